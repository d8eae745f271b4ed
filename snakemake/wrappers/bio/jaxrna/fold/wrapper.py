"""Snakemake wrapper for ``jaxrna fold``: minimum free energy folding (the energy model, as
RNAfold; ``partition=True``: the ensemble, as RNAfold -p) or Nussinov folding
(``model="nussinov"``) of every record of FASTA file(s)."""

__author__ = "The jaxrna developers"
__copyright__ = "Copyright 2026, The jaxrna developers"
__license__ = "MIT"

import os

from snakemake.shell import shell

FORMATS = {".dbn": "dbn", ".ct": "ct", ".bpseq": "bpseq", ".tsv": "tsv", ".json": "json"}

extra = snakemake.params.get("extra", "")
model = snakemake.params.get("model")
if model:
    extra = f"--model {model} {extra}"
if snakemake.params.get("partition"):
    extra = f"{extra} --partition"
mea = snakemake.params.get("mea")
if mea is not None and mea is not False:
    extra = f"{extra} --mea={1.0 if mea is True else float(mea)}"
output = snakemake.output[0]
fmt = snakemake.params.get("format") or FORMATS.get(os.path.splitext(output)[1], "dbn")
log = snakemake.log_fmt_shell(stdout=False, stderr=True)

shell("jaxrna fold {extra} --format {fmt} --output {output:q} {snakemake.input:q} {log}")
