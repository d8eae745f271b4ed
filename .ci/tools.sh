# Sourced by .ci/run before the test suite: the outside tools some tests drive (issue 19), so
# that those tests run instead of being skipped (JAXRNA_REQUIRE_* makes a missing tool a
# failure, not a skip):
# - groovy (Debian's package) parses every Nextflow .nf and .config file with Groovy's own
#   parser (tests/test_nextflow_groovy_parse.py);
# - planemo (PyPI, in a virtual environment of its own: it pins its own galaxy-tool-util) lints
#   the Galaxy tools and the Tool Shed repository (tests/test_galaxy_planemo.py).
# - emboss (Debian's package): the real needle and water, whose scores and rows the alignment
#   tests compare with jaxrna's (tests/test_align_end_gaps.py, tests/test_align_pair_biopython.py).
# PLANEMO_VENV=DIR reuses (or fills) a planemo environment.
tools_start=$SECONDS
if ! command -v groovy >/dev/null 2>&1; then
    echo "ci: installing groovy (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq groovy >/dev/null
fi
# Debian's groovy start script wants JAVA_HOME (or /usr/lib/jvm/default-java, which another
# package's JRE does not provide)
if [ -z "${JAVA_HOME:-}" ] || [ ! -x "$JAVA_HOME/bin/java" ]; then
    if java_bin=$(command -v java); then
        JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$java_bin")")")
        export JAVA_HOME
    fi
fi
export JAXRNA_REQUIRE_GROOVY=1
if ! command -v needle >/dev/null 2>&1 || ! command -v water >/dev/null 2>&1; then
    echo "ci: installing emboss (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq emboss >/dev/null
fi
export JAXRNA_REQUIRE_EMBOSS=1
planemo_venv=${PLANEMO_VENV:-$(mktemp -d)/planemo-venv}
if [ ! -x "$planemo_venv/bin/planemo" ]; then
    echo "ci: installing planemo into $planemo_venv" >&2
    python3 -m venv "$planemo_venv"
    if ! pip_out=$("$planemo_venv/bin/python" -m pip install -q "planemo>=0.75,<0.76" 2>&1); then
        echo "$pip_out" | grep -v '^WARNING: Location' | tail -n 20 >&2
        return 1
    fi
fi
export JAXRNA_PLANEMO=$planemo_venv/bin/planemo JAXRNA_REQUIRE_PLANEMO=1
echo "ci: $(groovy --version | head -n 1), $("$JAXRNA_PLANEMO" --version), $(needle -version 2>&1 | tail -n 1) ready ($((SECONDS - tools_start)) s)" >&2
