"""Snakemake wrapper for ``jaxrna interact``: BPMax RNA-RNA interaction."""

__author__ = "The jaxrna developers"
__copyright__ = "Copyright 2026, The jaxrna developers"
__license__ = "MIT"

import os
import shlex

from snakemake.shell import shell

FORMATS = {".tsv": "tsv", ".dbn": "dbn", ".json": "json"}

extra = snakemake.params.get("extra", "")
output = snakemake.output[0]
fmt = snakemake.params.get("format") or FORMATS.get(os.path.splitext(output)[1], "tsv")
windows = snakemake.output.get("windows")
windows_option = f"--all-windows {shlex.quote(windows)}" if windows else ""
log = snakemake.log_fmt_shell(stdout=False, stderr=True)

shell(
    "jaxrna interact {extra} {windows_option} --format {fmt} --output {output:q}"
    " {snakemake.input.strand1:q} {snakemake.input.strand2:q} {log}"
)
