"""Snakemake wrapper for ``jaxrna align``: global or local pairwise alignment, affine gaps."""

__author__ = "The jaxrna developers"
__copyright__ = "Copyright 2026, The jaxrna developers"
__license__ = "MIT"

import os

from snakemake.shell import shell

FORMATS = {".pair": "pair", ".txt": "pair", ".tsv": "tsv", ".json": "json"}

extra = snakemake.params.get("extra", "")
output = snakemake.output[0]
fmt = snakemake.params.get("format") or FORMATS.get(os.path.splitext(output)[1], "pair")
log = snakemake.log_fmt_shell(stdout=False, stderr=True)

shell(
    "jaxrna align {extra} --format {fmt} --output {output:q}"
    " {snakemake.input.queries:q} {snakemake.input.targets:q} {log}"
)
