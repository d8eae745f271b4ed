"""Snakemake wrapper for ``jaxrna targets``: miRNA target scanning with miRanda 3.3a's rules
and report (miRanda's option spellings work in ``extra``)."""

__author__ = "The jaxrna developers"
__copyright__ = "Copyright 2026, The jaxrna developers"
__license__ = "MIT"

import os

from snakemake.shell import shell

FORMATS = {".tsv": "tsv", ".json": "json"}  # anything else: miRanda's report (or -keyval in extra)

extra = snakemake.params.get("extra", "")
output = snakemake.output[0]
fmt = snakemake.params.get("format") or FORMATS.get(os.path.splitext(output)[1])
fmt_option = f"--format {fmt}" if fmt else ""
log = snakemake.log_fmt_shell(stdout=False, stderr=True)

shell(
    "jaxrna targets {extra} {fmt_option} --output {output:q}"
    " {snakemake.input.mirnas:q} {snakemake.input.targets:q} {log}"
)
