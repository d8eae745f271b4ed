"""The Nextflow modules in ``workflows/modules/local/jaxrna/``, checked without Nextflow.

- each module follows the conventions (UPPER_SNAKE name, ``tag "$meta.id"``, labels incl. the
  GPU label, ``tuple val(meta), path(...)`` channels, ext.args/prefix, a versions topic, a stub);
- every ``meta.yml`` parses and lists the module's real inputs and outputs;
- the options ``conf/modules.config`` builds from the pipeline parameters are options the jaxrna
  command line accepts;
- every process's ``script:`` rendered with fixture values runs and writes exactly the files the
  process declares, and so does every ``stub:``; the versions ``eval`` prints the version.
"""

import os
import shlex
import shutil

import pytest
import yaml

from test_nextflow_groovy import (MODULES, PROCESS_DIRS, ROOT, SUBCOMMANDS, WORKFLOWS, Task,  # noqa: F401
                                  brace_expand, jax_cache, module_process, modules_config_block,
                                  pipeline_params, publish_dir, task_ext, tool_env)

TEST_DATA = os.path.join(ROOT, "test-data")


def process_name(module_dir):
    return "JAXRNA_" + module_dir.upper()


@pytest.fixture(scope="module")
def env(tmp_path_factory, jax_cache):
    env = tool_env(str(tmp_path_factory.mktemp("bin")))
    # one JAX compilation cache for every task, as the pipeline's env sets it
    env["JAXRNA_CACHE_DIR"] = jax_cache
    return env


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    files = {
        "fold": ">a first\nGGGAAAUCCC\n>b\nGCGCAAAGCGCAAUU\n",
        "q": ">q1\nGATTACAGATTACA\n>q2\nACGUACGUAAGG\n",
        "t": ">t1\nGATTTACAGATACA\n",
        "s1": ">s1\nGGGAAAUCC\n",
        "s2": ">s2\nGGAUUUCCC\n",
    }
    for name, text in files.items():
        (d / f"{name}.fa").write_text(text)
    return {name: str(d / f"{name}.fa") for name in files}


# --------------------------------------------------------------------------- conventions


@pytest.mark.parametrize("module", PROCESS_DIRS)
def test_module_conventions(module):
    proc = module_process(module)
    assert proc.name == process_name(module)
    assert proc.name == proc.name.upper() and " " not in proc.name
    assert 'tag "$meta.id"' in proc.directives
    labels = proc.labels()
    assert any(label.startswith("process_") and label != "process_gpu" for label in labels)
    if module in SUBCOMMANDS:
        assert "process_gpu" in labels
    assert 'conda "${moduleDir}/environment.yml"' in proc.directives
    # inputs and outputs are tuples led by val(meta), except the versions topic
    assert proc.inputs[0]["items"][0] == {"qualifier": "val", "name": "meta"}
    for channel in proc.outputs:
        if channel.get("topic") == "versions":
            quals = [i["qualifier"] for i in channel["items"]]
            assert quals == ["val", "val", "eval"] and channel["items"][0]["name"] == "${task.process}"
            assert channel["emit"].startswith("versions_")
        else:
            assert channel["items"][0] == {"qualifier": "val", "name": "meta"}
            assert all(i["qualifier"] == "path" for i in channel["items"][1:])
            assert "emit" in channel
    assert sum(1 for c in proc.outputs if c.get("topic") == "versions") == 1
    for section in (proc.script, proc.stub):
        assert "def args   = task.ext.args   ?: ''" in section or "def args    = task.ext.args   ?: ''" in section
        assert 'task.ext.prefix ?: "${meta.id}"' in section
    # every module runs a jaxrna subcommand (targets_split: jaxrna targets-split) and reports
    # jaxrna's version
    vers = [c for c in proc.outputs if c.get("topic") == "versions"][0]
    assert vers["items"][1]["name"] == "jaxrna" and vers["emit"] == "versions_jaxrna"
    assert vers["items"][2]["name"].startswith("jaxrna --version")
    assert f"jaxrna {module.replace('_', '-')} " in proc.script


@pytest.mark.parametrize("module", PROCESS_DIRS)
def test_meta_yml_lists_real_inputs_and_outputs(module):
    proc = module_process(module)
    with open(os.path.join(MODULES, module, "meta.yml"), encoding="utf-8") as fh:
        meta = yaml.safe_load(fh)
    assert meta["name"] == process_name(module).lower()
    assert meta["description"] and meta["keywords"] and meta["tools"] and meta["authors"]
    # inputs: one list per input channel, one entry per tuple element, same names, same order
    assert len(meta["input"]) == len(proc.inputs)
    for yml_channel, nf_channel in zip(meta["input"], proc.inputs):
        assert [next(iter(e)) for e in yml_channel] == [i["name"] for i in nf_channel["items"]]
        for entry, item in zip(yml_channel, nf_channel["items"]):
            spec = next(iter(entry.values()))
            assert spec["type"] == ("map" if item["name"] == "meta" else "file")
            assert spec["description"]
    # outputs: keyed by emit name; each a tuple of the same elements (patterns verbatim)
    emits = {c["emit"]: c for c in proc.outputs}
    assert set(meta["output"]) == set(emits)
    for emit, channel in emits.items():
        (yml_tuple,) = meta["output"][emit]
        assert [next(iter(e)) for e in yml_tuple] == [i["name"] for i in channel["items"]]
        for entry, item in zip(yml_tuple, channel["items"]):
            spec = next(iter(entry.values()))
            expected = {"path": "file", "eval": "eval"}.get(item["qualifier"],
                                                            "map" if item["name"] == "meta" else "string")
            assert spec["type"] == expected, (emit, item)
            if item["qualifier"] == "path":
                assert spec["pattern"] == item["name"]
    versions = [c for c in proc.outputs if c.get("topic") == "versions"][0]
    (topic_tuple,) = meta["topics"]["versions"]
    assert [next(iter(e)) for e in topic_tuple] == [i["name"] for i in versions["items"]]


@pytest.mark.parametrize("module", PROCESS_DIRS)
def test_environment_yml(module):
    with open(os.path.join(MODULES, module, "environment.yml"), encoding="utf-8") as fh:
        env = yaml.safe_load(fh)
    assert env["channels"] == ["conda-forge", "bioconda"]
    deps = env["dependencies"]
    assert any(isinstance(d, str) and d.startswith("conda-forge::python=") for d in deps)
    pip = [d["pip"] for d in deps if isinstance(d, dict)][0]
    from jaxrna._version import __version__
    assert pip == [f"jaxrna=={__version__}"]


@pytest.mark.parametrize("module", PROCESS_DIRS)
def test_modules_config_has_every_process(module):
    block = modules_config_block(process_name(module))
    pub = publish_dir(block)
    assert pub is not None
    if module != "targets_split":
        assert "params.outdir" in pub and "params.publish_dir_mode" in pub


# --------------------------------------------------------------------------- options


def _parse_cli(sub, args, files):
    from jaxrna.cli import build_parser

    argv = [sub, *shlex.split(args), "--output", "out", *files]
    return build_parser().parse_args(argv)


PARAM_SETS = {
    "defaults": pipeline_params(),
    "test": pipeline_params("test"),
    "everything": pipeline_params(
        fold_model="nussinov", fold_format="json", fold_weights="GC=3,AU=2,GU=1.5", fold_min_loop=0,
        fold_score_only=True,
        align_pairs="zip", align_mode="local", align_match=2, align_mismatch=-3, align_gap_open=5,
        align_gap_extend=2, align_format="tsv", align_score_only=True,
        targets_format="keyval", targets_strict=True, targets_no_energy=True, targets_quiet=True,
        targets_scale=2.5, interact_window1=8, interact_window2=16, interact_all_windows=True,
        interact_outer=2, interact_format="json", interact_score_only=True, backend="gpu"),
    "matrix_and_preset": pipeline_params(align_matrix="BLOSUM62", align_format="json"),
    "turner_partition": pipeline_params(fold_params="turner1999", fold_dangles=0, fold_temp=30,
                                        fold_partition=True, fold_mea=2, fold_format="json"),
    "nussinov_partition": pipeline_params(fold_model="nussinov", fold_partition=True,
                                          fold_mea=2),
}


@pytest.mark.parametrize("which", sorted(PARAM_SETS))
def test_ext_args_are_options_of_the_cli(which):
    params = PARAM_SETS[which]
    meta = {"id": "run1"}
    fold = _parse_cli("fold", task_ext("JAXRNA_FOLD", params, meta)["args"], ["a.fa"])
    assert fold.format == params["fold_format"] and fold.backend == params["backend"]
    assert fold.model == params["fold_model"] and fold.score_only == params["fold_score_only"]
    assert fold.partition == params["fold_partition"]
    from jaxrna.cli.fold_energy import energy_model

    model = energy_model(fold)
    if params["fold_model"] == "nussinov":
        assert model is None and fold.mea is None
        from jaxrna.cli.common import weights_arg

        assert fold.min_loop == params["fold_min_loop"]
        assert fold.weights == weights_arg(params["fold_weights"])
    else:
        assert (model.params, model.dangles, model.temperature) == \
            (params["fold_params"], params["fold_dangles"], params["fold_temp"])
        assert fold.mea == (params.get("fold_mea") if params["fold_partition"] else None)
    align = _parse_cli("align", task_ext("JAXRNA_ALIGN", params, meta)["args"], ["q.fa", "t.fa"])
    assert align.mode == params["align_mode"] and align.pairs == params["align_pairs"]
    assert align.format == params["align_format"]
    ext = task_ext("JAXRNA_TARGETS", params, meta)
    targets = _parse_cli("targets", ext["args"], ["m.fa", "t.fa"])
    assert targets.score_threshold == params["targets_score_threshold"]
    assert targets.format == params["targets_format"] and targets.quiet == params["targets_quiet"]
    assert targets.strict == params["targets_strict"] and targets.no_energy == params["targets_no_energy"]
    assert targets.pair_offset == 0  # chunks are renumbered by the merge step, never offset
    assert ext["prefix"] == "run1"
    assert task_ext("JAXRNA_TARGETS", params, {"id": "run1", "chunk": "run1.chunk000002"})["prefix"] == \
        "run1.chunk000002"
    ext = task_ext("JAXRNA_INTERACT", params, meta)
    inter = _parse_cli("interact", ext["args"], ["a.fa", "b.fa"])
    assert inter.format == params["interact_format"] and str(inter.outer) == str(params["interact_outer"])
    assert inter.window1 == params["interact_window1"] and ext["all_windows"] == params["interact_all_windows"]
    # the output suffix follows the format
    for proc, key, fmt_map in [("JAXRNA_FOLD", "fold_format", {}), ("JAXRNA_ALIGN", "align_format", {"pair": "txt"}),
                               ("JAXRNA_TARGETS", "targets_format", {"miranda": "txt", "keyval": "txt"}),
                               ("JAXRNA_TARGETS_MERGE", "targets_format", {"miranda": "txt", "keyval": "txt"}),
                               ("JAXRNA_INTERACT", "interact_format", {})]:
        suffix = task_ext(proc, params, meta)["suffix"]
        assert suffix == fmt_map.get(params[key], params[key])
        pattern = [c for c in module_process(proc[len("JAXRNA_"):].lower()).outputs if not c.get("topic")][0]
        assert any(p.endswith("." + suffix) for p in brace_expand(pattern["items"][1]["name"]))
    split = task_ext("JAXRNA_TARGETS_SPLIT", params, meta)["args"]
    assert f"--chunk-nt {params['targets_chunk_nt']}" in split


# --------------------------------------------------------------------------- running the scripts


def _check_outputs(task, proc):
    assert task.result.returncode == 0, task.result.stderr[-3000:]
    outputs = task.outputs()
    declared = set()
    for channel in proc.outputs:
        if channel.get("topic"):
            continue
        files = outputs[channel["emit"]]
        if channel.get("optional") != "true":
            assert files, f"{proc.name}: no file for output '{channel['emit']}'"
        declared.update(files)
    assert task.produced() == declared, f"{proc.name}: produced {task.produced()} but declares {declared}"
    return outputs


def _version(task, proc, env):
    import subprocess

    cmd = [c for c in proc.outputs if c.get("topic") == "versions"][0]["items"][2]["name"]
    out = subprocess.run(["bash", "-c", cmd], cwd=task.workdir, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _run(module, section, inputs, params, tmp_path, env, meta=None):
    proc = module_process(module)
    meta = meta or {"id": "sample1"}
    ext = task_ext(process_name(module), params, meta)
    task = Task(proc, section, str(tmp_path / f"{module}-{section}"), inputs, meta, ext, env)
    assert task.when
    return proc, task, _check_outputs(task, proc)


def test_fold_script(tiny, tmp_path, env):
    params = pipeline_params(fold_format="tsv")
    proc, task, out = _run("fold", "script", {"fasta": tiny["fold"]}, params, tmp_path, env)
    assert out["fold"] == ["sample1.fold.tsv"]
    rows = open(os.path.join(task.workdir, "sample1.fold.tsv")).read().splitlines()
    assert rows[0] == "#id\tlength\tenergy\tstructure"        # the energy model by default
    assert [r.split("\t")[0] for r in rows[1:]] == ["a", "b"]
    from jaxrna._version import __version__
    assert _version(task, proc, env) == __version__
    # Nussinov
    params = pipeline_params(fold_format="tsv", fold_model="nussinov", fold_weights="bpmax")
    _, task, out = _run("fold", "script", {"fasta": tiny["fold"]}, params, tmp_path / "n", env)
    rows = open(os.path.join(task.workdir, "sample1.fold.tsv")).read().splitlines()
    assert rows[0] == "#id\tlength\tscore\tstructure"


def test_fold_script_turner_partition(tiny, tmp_path, env):
    import json

    params = pipeline_params(fold_format="json", fold_partition=True, fold_mea=1)
    _, task, out = _run("fold", "script", {"fasta": tiny["fold"]}, params, tmp_path, env)
    assert out["fold"] == ["sample1.fold.json"]
    objs = json.load(open(os.path.join(task.workdir, "sample1.fold.json")))
    assert [o["id"] for o in objs] == ["a", "b"]
    assert all("ensemble_energy" in o and "mea_structure" in o for o in objs)


def test_align_script(tiny, tmp_path, env):
    params = pipeline_params(align_format="tsv", align_mode="local", align_match=2, align_mismatch=-3)
    _, task, out = _run("align", "script", {"queries": tiny["q"], "targets": tiny["t"]}, params, tmp_path, env)
    assert out["align"] == ["sample1.align.tsv"]
    rows = [r for r in open(os.path.join(task.workdir, "sample1.align.tsv")).read().splitlines()
            if not r.startswith("#")]
    assert len(rows) == 2


def test_interact_script_with_windows(tiny, tmp_path, env):
    params = pipeline_params(interact_window1=6, interact_window2=6, interact_all_windows=True)
    _, task, out = _run("interact", "script", {"strand1": tiny["s1"], "strand2": tiny["s2"]}, params,
                        tmp_path, env)
    assert out["interact"] == ["sample1.interact.tsv"] and out["windows"] == ["sample1.windows.tsv"]


def test_targets_script_unsplit(tmp_path, env):
    params = pipeline_params(targets_chunk_nt=0, targets_score_threshold=120, targets_quiet=True)
    _, task, out = _run("targets", "script", {"mirnas": os.path.join(TEST_DATA, "miranda", "bantam_stRNA.fasta"),
                                              "targets": os.path.join(TEST_DATA, "miranda", "hid_UTR.fasta")},
                        params, tmp_path, env)
    text = open(os.path.join(task.workdir, out["targets"][0])).read()
    assert out["targets"] == ["sample1.targets.txt"] and text.endswith("Scan Complete\n\n") and ">>" in text


STUB_INPUTS = {
    "fold": {"fasta": "fold"},
    "align": {"queries": "q", "targets": "t"},
    "targets": {"mirnas": "q", "targets": "t"},
    "interact": {"strand1": "s1", "strand2": "s2"},
    "targets_split": {"targets": "t"},
}


@pytest.mark.parametrize("module", PROCESS_DIRS)
@pytest.mark.parametrize("which", ["defaults", "everything"])
def test_stub_writes_the_declared_files(module, which, tiny, tmp_path, env):
    if module == "targets_merge":
        inputs = {"reports": [("chunks/sample1.chunk000001.targets.txt", tiny["t"])],
                  "manifest": tiny["t"], "mirnas": tiny["q"]}
    else:
        inputs = {name: tiny[key] for name, key in STUB_INPUTS[module].items()}
    _, task, out = _run(module, "stub", inputs, PARAM_SETS[which], tmp_path, env)
    if module == "interact":
        assert bool(out["windows"]) == PARAM_SETS[which]["interact_all_windows"]


@pytest.mark.parametrize("module", PROCESS_DIRS)
def test_tasks_call_only_jaxrna(module):
    """Every command a task script runs is `jaxrna` (the pipeline has no scripts of its own:
    no bin/ directory, nothing else on the tasks' PATH is needed)."""
    assert not os.path.exists(os.path.join(WORKFLOWS, "bin"))
    proc = module_process(module)
    ext = task_ext(process_name(module), PARAM_SETS["everything"], {"id": "s1"})
    binding = {"meta": {"id": "s1"}, "task": {"process": proc.name, "ext": ext, "cpus": 1, "attempt": 1},
               **{item["name"]: "x.fa" for channel in proc.inputs for item in channel["items"][1:]}}
    commands = [line for line in proc.render("script", binding).replace("\\\n", " ").splitlines()
                if line.strip()]
    assert commands and all(shlex.split(c)[0] == "jaxrna" for c in commands), commands
    assert shutil.which("bash")
