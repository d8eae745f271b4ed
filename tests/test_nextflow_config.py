"""The pipeline's configuration, schema and example parameter files, checked without Nextflow:
nextflow_schema.json is valid JSON Schema 2020-12 and describes every parameter of
nextflow.config (with the same defaults); every params file in workflows/params/, the defaults
and the test profile validate against it; the profiles exist and carry what they promise;
main.nf includes every module and the Dockerfile copies what exists."""

import glob
import json
import os
import re

import jsonschema
import pytest
import yaml

from test_nextflow_groovy import (MODULES, PROCESS_DIRS, ROOT, WORKFLOWS, config_block, pipeline_params,
                                  read_config)

SCHEMA_PATH = os.path.join(WORKFLOWS, "nextflow_schema.json")
PARAMS_FILES = sorted(glob.glob(os.path.join(WORKFLOWS, "params", "*.yml")))


@pytest.fixture(scope="module")
def schema():
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        schema = json.load(fh)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def properties(schema):
    props = {}
    for group in schema["$defs"].values():
        for name, spec in group["properties"].items():
            assert name not in props, f"{name} is described twice"
            props[name] = spec
    return props


def validate(schema, params):
    """As nf-schema does: unset (null) parameters are left out; unknown ones are errors here."""
    params = {k: v for k, v in params.items() if v is not None}
    unknown = set(params) - set(properties(schema))
    assert not unknown, f"parameters not in nextflow_schema.json: {sorted(unknown)}"
    jsonschema.Draft202012Validator(schema).validate(params)


def test_schema_is_2020_12_and_groups_are_all_used(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs = [part["$ref"] for part in schema["allOf"]]
    assert refs == [f"#/$defs/{name}" for name in schema["$defs"]]
    for group in schema["$defs"].values():
        assert group["type"] == "object" and group["title"] and group["description"]
        for name, spec in group["properties"].items():
            assert spec.get("description"), name
            assert "type" in spec, name


def test_schema_describes_every_parameter_with_its_default(schema):
    params = pipeline_params()
    props = properties(schema)
    assert set(params) == set(props)
    for name, value in params.items():
        if value is None:
            assert "default" not in props[name], name
        else:
            assert props[name].get("default") == value, name


def test_defaults_and_test_profile_validate(schema):
    validate(schema, pipeline_params())
    test = pipeline_params("test")
    validate(schema, test)
    for name, value in test.items():
        if props_is_file(schema, name) and value:
            assert os.path.exists(value), f"test profile: {name} = {value} does not exist"
    assert set(test["mode"].split(",")) == {"fold", "align", "targets", "interact"}


def props_is_file(schema, name):
    return properties(schema)[name].get("format") in ("file-path", "file-path-pattern")


def test_there_are_params_files_for_every_pipeline():
    names = {os.path.basename(p) for p in PARAMS_FILES}
    assert {"fold.yml", "align.yml", "targets.yml", "interact.yml"} <= names


@pytest.mark.parametrize("path", PARAMS_FILES, ids=os.path.basename)
def test_params_file_validates(schema, path):
    with open(path, encoding="utf-8") as fh:
        params = yaml.safe_load(fh)
    validate(schema, params)
    for name, value in params.items():
        if props_is_file(schema, name):
            assert glob.glob(os.path.join(ROOT, value)), f"{path}: {name}: {value} not found from the repository root"
    # the modes it names get the inputs they need
    needs = {"fold": ["input"], "align": ["align_queries", "align_targets"], "targets": ["mirnas", "targets"],
             "interact": ["strand1", "strand2"]}
    for mode in params["mode"].split(","):
        for name in needs[mode]:
            assert params.get(name), f"{path}: mode {mode} needs {name}"


@pytest.mark.parametrize("bad", [
    {"mode": "fold,unknown"}, {"fold_format": "fasta"}, {"fold_min_loop": -1},
    {"fold_weights": "GC=3"}, {"targets_gap_open": 2}, {"backend": "tpu"},
    {"interact_outer": 3}, {"targets_chunk_nt": -5}, {"no_such_param": 1},
])
def test_schema_rejects_bad_values(schema, bad):
    params = pipeline_params(**{k: v for k, v in bad.items() if k != "no_such_param"})
    params.update(bad)
    with pytest.raises((jsonschema.ValidationError, AssertionError)):
        validate(schema, params)


def test_profiles():
    text = read_config(os.path.join(WORKFLOWS, "nextflow.config"))
    profiles = config_block(text, "profiles")
    for name in ("standard", "gpu", "conda", "docker", "apptainer", "slurm", "test"):
        assert config_block(profiles, name) is not None, f"profile {name} is missing"
    gpu = config_block(profiles, "gpu")
    assert "withLabel: 'process_gpu'" in gpu and re.search(r"accelerator\s*=\s*1", gpu)
    assert "XLA_PYTHON_CLIENT_PREALLOCATE = 'false'" in gpu
    assert "--nv" in gpu and "--gpus all" in gpu
    assert "conda.enabled          = true" in config_block(profiles, "conda")
    for engine in ("docker", "apptainer"):
        block = config_block(profiles, engine)
        assert f"{engine}.enabled" in block and "process.container      = params.container" in block
    assert "process.executor       = 'slurm'" in config_block(profiles, "slurm")
    assert "includeConfig 'conf/test.config'" in config_block(profiles, "test")
    for inc in ("conf/base.config", "conf/modules.config"):
        assert f"includeConfig '{inc}'" in text
    assert "nf-schema@" in text


def test_base_config_labels():
    text = read_config(os.path.join(WORKFLOWS, "conf", "base.config"))
    used = set()
    for module in PROCESS_DIRS:
        with open(os.path.join(MODULES, module, "main.nf"), encoding="utf-8") as fh:
            used |= set(re.findall(r"label '([^']+)'", fh.read()))
    for label in used | {"process_single", "process_low", "process_medium", "process_high", "process_gpu"}:
        assert config_block(text, f"withLabel: '{label}'") is not None, label


def test_main_nf_includes_every_module_and_named_workflows():
    with open(os.path.join(WORKFLOWS, "main.nf"), encoding="utf-8") as fh:
        text = fh.read()
    for module in PROCESS_DIRS:
        name = "JAXRNA_" + module.upper()
        assert re.search(rf"include \{{ {name}\s*\}} from './modules/local/jaxrna/{module}/main'", text), name
    for wf in ("FOLD", "ALIGN", "TARGETS", "INTERACT"):
        assert re.search(rf"^workflow {wf} \{{", text, re.M)
    assert "channel.topic('versions')" in text
    # every params.X main.nf reads is a pipeline parameter
    used = set(re.findall(r"params\.(\w+)", text)) | set(re.findall(r"required\('(\w+)'\)", text))
    assert used <= set(pipeline_params())


def test_modules_config_reads_only_known_params():
    text = read_config(os.path.join(WORKFLOWS, "conf", "modules.config"))
    assert set(re.findall(r"params\.(\w+)", text)) <= set(pipeline_params())


def test_dockerfile_copies_existing_paths():
    with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as fh:
        text = fh.read()
    for src in re.findall(r"^COPY\s+(.+)\s+\S+$", text, re.M):
        for path in src.split():
            assert os.path.exists(os.path.join(ROOT, path)), path
    assert "procps" in text and "jax[${JAX_EXTRA}]" in text
    from jaxrna._version import __version__
    assert f'org.opencontainers.image.version="{__version__}"' in text
    assert pipeline_params()["container"] == f"jaxrna:{__version__}"


def test_readme_says_how_to_run_and_what_was_checked():
    with open(os.path.join(WORKFLOWS, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    assert "nextflow run workflows/main.nf -profile test,gpu" in text
    for test_file in ("test_nextflow_modules.py", "test_nextflow_config.py", "test_nextflow_targets_chunks.py"):
        assert test_file in text
