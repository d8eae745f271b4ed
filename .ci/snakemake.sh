#!/usr/bin/env bash
# Snakemake from PyPI, in a virtual environment of its own, runs the tests of jaxrna's Snakemake
# wrappers (snakemake/wrappers/bio/jaxrna/*/test/Snakefile) and the example workflow
# (snakemake/workflow/Snakefile: a chunked targets scan merged back byte for byte, and one job
# of each other subcommand): tests/test_snakemake.py, with JAXRNA_REQUIRE_SNAKEMAKE=1.
#
# Run it from an environment with this checkout's test extra (pip install ".[test]"): its
# python runs the tests and its jaxrna runs the jobs. SNAKEMAKE_VENV=DIR reuses (or fills) a
# Snakemake environment; SNAKEMAKE_INSTALL_ONLY=1 only fills it (.ci/run does that in the
# background while the test suite runs).
set -euo pipefail
cd "$(dirname "$0")/.."
start_s=$SECONDS
log() { echo "snakemake-ci: $* ($((SECONDS - start_s)) s)" >&2; }

smk_venv=${SNAKEMAKE_VENV:-$(mktemp -d "${TMPDIR:-/tmp}/jaxrna-snakemake.XXXXXX")/venv}
if [ ! -x "$smk_venv/bin/snakemake" ]; then
    log "installing Snakemake into $smk_venv"
    python3 -m venv "$smk_venv"
    if ! out=$("$smk_venv/bin/python" -m pip install -q "snakemake>=9,<10" 2>&1); then
        echo "$out" | grep -v '^WARNING: Location' | tail -n 20 >&2
        exit 1
    fi
fi
log "Snakemake $("$smk_venv/bin/snakemake" --version) installed"
if [ "${SNAKEMAKE_INSTALL_ONLY:-}" = 1 ]; then
    exit 0
fi
JAXRNA_SNAKEMAKE=$smk_venv/bin/snakemake JAXRNA_REQUIRE_SNAKEMAKE=1 \
    python -m pytest -q -p no:cacheprovider tests/test_snakemake.py
log "Snakemake wrappers and example workflow passed"
