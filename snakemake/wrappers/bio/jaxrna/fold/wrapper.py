"""Snakemake wrapper for ``jaxrna fold``: Nussinov folding of every record of FASTA file(s)."""

__author__ = "The jaxrna developers"
__copyright__ = "Copyright 2026, The jaxrna developers"
__license__ = "MIT"

import os

from snakemake.shell import shell

FORMATS = {".dbn": "dbn", ".ct": "ct", ".bpseq": "bpseq", ".tsv": "tsv", ".json": "json"}

extra = snakemake.params.get("extra", "")
output = snakemake.output[0]
fmt = snakemake.params.get("format") or FORMATS.get(os.path.splitext(output)[1], "dbn")
log = snakemake.log_fmt_shell(stdout=False, stderr=True)

shell("jaxrna fold {extra} --format {fmt} --output {output:q} {snakemake.input:q} {log}")
