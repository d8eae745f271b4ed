#!/usr/bin/env bash
# Galaxy integration test of the tool wrappers in wrappers/:
#   1. install Galaxy (the `galaxy` package from PyPI, 26.x) into its own virtual environment;
#   2. make jaxrna available to Galaxy's jobs;
#   3. start Galaxy on 127.0.0.1 with a sqlite database and only the jaxrna tools, and its
#      Celery worker (uploads and metadata);
#   4. run every tool's <tests> through Galaxy's API with galaxy-tool-test;
#   5. stop Galaxy. Exit status 0 only when every declared test ran and passed.
#
# Environment (all optional):
#   GALAXY_VERSION  galaxy release to install (default 26.1.2)
#   GALAXY_VENV     reuse this virtual environment if Galaxy is installed there (else create it)
#   GALAXY_WORK     work directory: config, database, job files, logs (default: a new temp dir)
#   GALAXY_PORT     port to listen on (default: a free one)
#   JAXRNA          the jaxrna console script jobs run (default: `jaxrna` on PATH if its version
#                   matches this checkout, else a fresh virtual environment with this checkout)
#   GALAXY_PARALLEL tool tests run at once (default 2)
#   GALAXY_INSTALL_ONLY=1  stop after step 1 (install Galaxy into GALAXY_VENV): .ci/run does this
#                   in the background while the test suite runs, then runs this script again,
#                   which reuses that environment (or installs it, if the first install failed)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start_s=$SECONDS

log() { echo "galaxy-ci: $* ($((SECONDS - start_s)) s)" >&2; }

GALAXY_VERSION=${GALAXY_VERSION:-26.1.2}
work=${GALAXY_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/jaxrna-galaxy.XXXXXX")}
mkdir -p "$work"
work=$(cd "$work" && pwd)
gx_venv=${GALAXY_VENV:-$work/galaxy-venv}
python=${PYTHON:-python3}
tools=(jaxrna_fold jaxrna_align jaxrna_targets jaxrna_interact)
jaxrna_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' jaxrna/_version.py)

# --- 1. Galaxy ------------------------------------------------------------------------------
install_galaxy() {
    "$python" -m venv "$gx_venv"
    "$gx_venv/bin/python" -m pip install -q --upgrade pip
    local out
    if out=$("$gx_venv/bin/python" -m pip install -q "galaxy==$GALAXY_VERSION" 2>&1); then
        return 0
    fi
    # A release may pin a dependency version that is missing from the package index (e.g.
    # galaxy 26.1.2 pins certifi==2026.10.19). Install galaxy itself with --no-deps and its
    # requirements with each missing pin relaxed to the newest available release.
    echo "$out" | grep -v '^WARNING: Location' | tail -n 3 >&2
    log "relaxing pins that are missing from the index"
    local dl="$work/galaxy-wheel"
    rm -rf "$dl"
    "$gx_venv/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$dl" "galaxy==$GALAXY_VERSION"
    "$gx_venv/bin/python" - "$dl" "$work/galaxy-requirements.txt" <<'PY'
import email, pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("galaxy-*.whl"))
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = email.message_from_bytes(z.read(meta))
reqs = [r for r in msg.get_all("Requires-Dist") or [] if "extra ==" not in r]
pathlib.Path(sys.argv[2]).write_text("\n".join(reqs) + "\n")
PY
    local attempt missing
    for attempt in 1 2 3 4 5 6 7 8; do
        if out=$("$gx_venv/bin/python" -m pip install -q -r "$work/galaxy-requirements.txt" 2>&1); then
            "$gx_venv/bin/python" -m pip install -q --no-deps "$dl"/galaxy-*.whl
            return 0
        fi
        missing=$(echo "$out" | sed -n 's/.*No matching distribution found for \([A-Za-z0-9_.-]*\)==.*/\1/p' | head -n 1)
        if [ -z "$missing" ]; then
            echo "$out" | grep -v '^WARNING: Location' | tail -n 20 >&2
            return 1
        fi
        log "relaxing the pin of $missing (attempt $attempt)"
        sed -i -E "s/^(${missing//./\\.})==[^ ;]*/\1/I" "$work/galaxy-requirements.txt"
    done
    return 1
}

if [ -x "$gx_venv/bin/galaxy-tool-test" ] && [ -x "$gx_venv/bin/uvicorn" ] \
        && "$gx_venv/bin/python" -c 'import importlib.metadata as m; m.version("galaxy")' 2>/dev/null; then
    log "reusing Galaxy in $gx_venv"
else
    log "installing galaxy==$GALAXY_VERSION into $gx_venv"
    install_galaxy
fi
log "Galaxy $("$gx_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("galaxy"))') installed"
if [ "${GALAXY_INSTALL_ONLY:-}" = 1 ]; then
    exit 0
fi

# --- 2. jaxrna for the jobs -----------------------------------------------------------------
# A Galaxy job's PATH starts with Galaxy's venv, then the server's PATH: put a directory that
# holds only a `jaxrna` link (the console script runs jaxrna's own interpreter) on that PATH.
jaxrna_bin=${JAXRNA:-}
if [ -z "$jaxrna_bin" ] && command -v jaxrna >/dev/null 2>&1 \
        && [ "$(jaxrna --version 2>/dev/null)" = "jaxrna $jaxrna_version" ]; then
    jaxrna_bin=$(command -v jaxrna)
fi
if [ -z "$jaxrna_bin" ]; then
    log "installing this checkout of jaxrna into $work/jaxrna-venv"
    "$python" -m venv "$work/jaxrna-venv"
    "$work/jaxrna-venv/bin/python" -m pip install -q "$repo"
    jaxrna_bin=$work/jaxrna-venv/bin/jaxrna
fi
mkdir -p "$work/bin"
ln -sf "$(cd "$(dirname "$jaxrna_bin")" && pwd)/$(basename "$jaxrna_bin")" "$work/bin/jaxrna"
log "jobs run $("$work/bin/jaxrna" --version) from $jaxrna_bin"

# --- 3. start Galaxy ------------------------------------------------------------------------
port=${GALAXY_PORT:-$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
url=http://127.0.0.1:$port
admin_key=$("$python" -c 'import secrets; print(secrets.token_hex(16))')
mkdir -p "$work/data"
{
    echo '<?xml version="1.0"?>'
    echo '<toolbox monitor="false">'
    echo '  <section id="jaxrna" name="jaxrna">'
    for t in "${tools[@]}"; do echo "    <tool file=\"$repo/wrappers/$t.xml\"/>"; done
    echo '  </section>'
    echo '</toolbox>'
} > "$work/tool_conf.xml"
cat > "$work/galaxy.yml" <<EOF
galaxy:
  data_dir: $work/data
  database_connection: sqlite:///$work/data/universe.sqlite?isolation_level=IMMEDIATE
  tool_config_file: $work/tool_conf.xml
  galaxy_infrastructure_url: $url
  bootstrap_admin_api_key: $admin_key
  admin_users: admin@jaxrna.test
  conda_auto_init: false
  conda_auto_install: false
  dependency_resolvers:
    - type: galaxy_packages
  watch_tools: false
  log_level: INFO
  # Uploads and the metadata of every job's outputs in Celery tasks of one long-lived worker
  # (started below) instead of two new Python processes per job, each importing Galaxy's
  # model and datatypes (about 9 CPU-seconds apiece on a 2-core CI machine: most of this
  # step's time). Broker and results: Galaxy's defaults (SQLite files in data_dir).
  enable_celery_tasks: true
  metadata_strategy: directory_celery
  cleanup_job: onsuccess
  job_config:
    runners:
      local:
        load: galaxy.jobs.runners.local:LocalJobRunner
        workers: 4
    execution:
      default: local
      environments:
        local:
          runner: local
EOF

export GALAXY_CONFIG_FILE=$work/galaxy.yml
# Jobs activate $GALAXY_VIRTUAL_ENV (Galaxy's own scripts - uploads, metadata - need its
# python first on PATH); the jaxrna link comes right after it.
export GALAXY_VIRTUAL_ENV=$gx_venv
# A caller's active virtual environment would stop job scripts from activating Galaxy's.
unset VIRTUAL_ENV PYTHONHOME
export PATH=$gx_venv/bin:$work/bin:$PATH
export JAXRNA_CACHE_DIR=${JAXRNA_CACHE_DIR:-$work/jax-cache}
gx_pid=
celery_pid=
pids=()
stop_process() {  # PID SECONDS: TERM, up to SECONDS to exit, then KILL
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 0
    kill "$1" 2>/dev/null || true
    for _ in $(seq "$2"); do kill -0 "$1" 2>/dev/null || break; sleep 1; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
stop_galaxy() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    stop_process "$celery_pid" 20
    if [ -n "$gx_pid" ] && kill -0 "$gx_pid" 2>/dev/null; then
        log "stopping Galaxy (pid $gx_pid)"
        stop_process "$gx_pid" 30
    fi
}
# wait_until WHAT PID LOG SECONDS CHECK...: run CHECK every second until it succeeds; exit 1
# with LOG's tail if process PID ends first or SECONDS pass
wait_until() {
    local what=$1 pid=$2 logfile=$3 seconds=$4
    shift 4
    for _ in $(seq "$seconds"); do
        if "$@"; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 40 "$logfile" >&2
            log "$what exited during start-up"
            exit 1
        fi
        sleep 1
    done
    if ! "$@"; then
        tail -n 40 "$logfile" >&2
        log "$what was not ready within $((seconds / 60)) minutes"
        exit 1
    fi
}
galaxy_answers() { curl -fsS "$url/api/version" >/dev/null 2>&1; }
worker_ready() { grep -q "ready\." "$work/celery.log" 2>/dev/null; }
trap stop_galaxy EXIT
log "starting Galaxy on $url (work directory $work)"
(cd "$work" && exec "$gx_venv/bin/uvicorn" --factory galaxy.webapps.galaxy.fast_factory:factory \
    --host 127.0.0.1 --port "$port" --no-access-log > "$work/galaxy.log" 2>&1) &
gx_pid=$!
wait_until Galaxy "$gx_pid" "$work/galaxy.log" 900 galaxy_answers
log "Galaxy $(curl -fsS "$url/api/version") is up"
# The Celery worker of the uploads and metadata (galaxy.yml above): one process, threads,
# started once the server has set up the database it shares.
(cd "$work" && exec "$gx_venv/bin/celery" --app galaxy.celery worker --pool threads \
    --concurrency 4 --queues celery,galaxy.internal,galaxy.external --loglevel INFO \
    > "$work/celery.log" 2>&1) &
celery_pid=$!
wait_until "Galaxy's Celery worker" "$celery_pid" "$work/celery.log" 300 worker_ready
log "Galaxy's Celery worker is ready"

# --- 4. tool tests through the API ----------------------------------------------------------
status=0
for t in "${tools[@]}"; do
    if ! curl -fsS -H "x-api-key: $admin_key" "$url/api/tools/$t" >/dev/null 2>&1; then
        grep -n -i -B2 -A10 "$t" "$work/galaxy.log" | grep -i -A10 "error\|exception" | head -n 40 >&2 || true
        log "FAIL: Galaxy did not load $t"
        status=1
    fi
done
out_dir=$work/tool-test-output
mkdir -p "$out_dir"
# The four tools' tests run at the same time (Galaxy queues the jobs), which hides the
# latencies of job polling; each tool's report is checked below.
# One test user and one API key for all four galaxy-tool-test runs (each run would otherwise
# make a new key for the user, which revokes the key of the runs already going).
user_id=$(curl -fsS -H "x-api-key: $admin_key" -H "Content-Type: application/json" \
    -d '{"username": "tooltest", "email": "test@bx.psu.edu", "password": "tool-test-password"}' \
    "$url/api/users" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["id"])')
user_key=$(curl -fsS -X POST -H "x-api-key: $admin_key" "$url/api/users/$user_id/api_key" \
    | "$python" -c 'import json, sys; print(json.load(sys.stdin))')
for t in "${tools[@]}"; do
    log "testing $t"
    "$gx_venv/bin/galaxy-tool-test" -u "$url" -k "$user_key" -a "$admin_key" -t "$t" \
        --parallel-tests "${GALAXY_PARALLEL:-2}" --output "$out_dir/$t" \
        --output-json "$out_dir/$t.json" --suite-name "$t" > "$out_dir/$t.log" 2>&1 &
    pids+=($!)
done
for i in "${!tools[@]}"; do
    wait "${pids[$i]}" || status=1
    log "${tools[$i]} done"
    grep -E "(Passed|Failed|Skipped|Errored) tool tests" "$out_dir/${tools[$i]}.log" >&2 \
        || tail -n 20 "$out_dir/${tools[$i]}.log" >&2
done

# Every <test> declared in the wrappers must have run and passed.
"$gx_venv/bin/python" - "$repo/wrappers" "$out_dir" "${tools[@]}" <<'PY' || status=1
import json, pathlib, sys
from xml.etree import ElementTree as ET
wrappers, out_dir, tools = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
ok, total_passed, total_declared = True, 0, 0
for tool in tools:
    declared = len(ET.parse(wrappers / f"{tool}.xml").getroot().findall("tests/test"))
    report = out_dir / f"{tool}.json"
    tests = json.loads(report.read_text())["tests"] if report.exists() else []
    passed = [t for t in tests if t.get("data", {}).get("status") == "success"]
    for t in tests:
        data = t.get("data", {})
        if data.get("status") != "success":
            problems = [data.get("execution_problem") or ""] + list(data.get("output_problems") or [])
            job = data.get("job") or {}
            print(f"galaxy-ci: {t['id']}: {data.get('status')}:", *(p[-1500:] for p in problems if p),
                  "job stderr: " + (job.get("stderr") or "")[-1500:], sep="\n", file=sys.stderr)
    print(f"galaxy-ci: {tool}: {len(passed)}/{declared} tests passed", file=sys.stderr)
    ok &= len(passed) == declared
    total_passed += len(passed)
    total_declared += declared
print(f"galaxy-ci: {total_passed}/{total_declared} Galaxy tool tests passed", file=sys.stderr)
sys.exit(0 if ok else 1)
PY

stop_galaxy
if [ "$status" -ne 0 ]; then
    log "FAILED (Galaxy log: $work/galaxy.log, Celery log: $work/celery.log, test outputs: $out_dir)"
    exit 1
fi
log "all Galaxy tool tests passed"
