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
# A tool that cannot be installed (no apt-get, no root, no network) is said loudly and its
# tests are skipped rather than the whole CI run failing here.
apt_install() {
    echo "ci: installing $* (apt-get)" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } \
            >/dev/null 2>&1; then
        echo "ci: WARNING: could not install $* with apt-get; the tests that need it are skipped" >&2
    fi
}
# planemo's pip install runs in the background while apt-get installs the others
planemo_venv=${PLANEMO_VENV:-$(mktemp -d)/planemo-venv}
planemo_log=
if [ ! -x "$planemo_venv/bin/planemo" ]; then
    echo "ci: installing planemo into $planemo_venv" >&2
    planemo_log=$(mktemp)
    { python3 -m venv "$planemo_venv" \
        && "$planemo_venv/bin/python" -m pip install -q "planemo>=0.75,<0.76"; } \
        > "$planemo_log" 2>&1 &
    planemo_pid_bg=$!
fi
if ! command -v groovy >/dev/null 2>&1; then
    apt_install groovy
fi
# Debian's groovy start script wants JAVA_HOME (or /usr/lib/jvm/default-java, which another
# package's JRE does not provide)
if [ -z "${JAVA_HOME:-}" ] || [ ! -x "$JAVA_HOME/bin/java" ]; then
    if java_bin=$(command -v java); then
        JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$java_bin")")")
        export JAVA_HOME
    fi
fi
if command -v groovy >/dev/null 2>&1; then
    export JAXRNA_REQUIRE_GROOVY=1
fi
if ! command -v needle >/dev/null 2>&1 || ! command -v water >/dev/null 2>&1; then
    apt_install emboss
fi
if command -v needle >/dev/null 2>&1 && command -v water >/dev/null 2>&1; then
    export JAXRNA_REQUIRE_EMBOSS=1
fi
if [ -n "${planemo_log:-}" ]; then
    if ! wait "$planemo_pid_bg"; then
        grep -v '^WARNING: Location' "$planemo_log" | tail -n 20 >&2
        echo "ci: WARNING: could not install planemo; the planemo lint tests are skipped" >&2
    fi
fi
if [ -x "$planemo_venv/bin/planemo" ]; then
    export JAXRNA_PLANEMO=$planemo_venv/bin/planemo JAXRNA_REQUIRE_PLANEMO=1
fi
have() { if [ -n "${!1:-}" ]; then echo yes; else echo "no (its tests skip)"; fi; }
echo "ci: tools ready ($((SECONDS - tools_start)) s): groovy $(have JAXRNA_REQUIRE_GROOVY)," \
    "emboss $(have JAXRNA_REQUIRE_EMBOSS), planemo $(have JAXRNA_REQUIRE_PLANEMO)" >&2
