#!/usr/bin/env bash
# Runs every Strata test: builds the release broker, runs all Rust tests, checks that the API docs
# build without warnings, then the pytest interop
# suite (tests/interop) and the CI subset of librdkafka's own test suite
# (scripts/librdkafka-suite.sh, on one broker and on a 3-node cluster) against the real binary
# with real clients (confluent-kafka, kafka-python, aiokafka, kafkajs, kcat).
#
# Installs what the tests need first, idempotently (fast when already there):
#   - kcat, prometheus (promtool), burrow and zookeeper, Go and sarama (Debian packages), and
#     node/npm or python3-venv if missing;
#   - a Python venv at .venv with tests/interop/requirements.txt;
#   - tests/interop/js/node_modules via `npm ci` (package-lock.json is committed).
#
# Usage: scripts/test.sh [extra pytest args, e.g. -k crash -x]
# Env:   STRATA_SKIP_INSTALL=1  skip the install step (offline re-runs)
# Exits non-zero if any step fails; later steps still run when they can, so one run reports all.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export DEBIAN_FRONTEND=noninteractive

log() { printf '\n==> %s\n' "$*"; }
now() { date +%s; }

# ---------------------------------------------------------------------------------------------
# Install
# ---------------------------------------------------------------------------------------------
APT_UPDATED=0
apt_install() {
    if [ "$APT_UPDATED" = 0 ]; then
        apt-get update -qq || return 1
        APT_UPDATED=1
    fi
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null || return 1
}

hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

install_deps() {
    if ! command -v kcat >/dev/null 2>&1; then
        log "installing kcat (apt)"
        apt_install kcat || return 1
    fi
    # promtool checks the /metrics exposition (tests/tests/metrics.rs); the prometheus server
    # scrapes a broker in tests/interop/test_metrics.py.
    if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
        log "installing prometheus and promtool (apt)"
        apt_install prometheus || return 1
    fi
    # Burrow (with the ZooKeeper it needs for itself) checks group lag in tests/interop/test_burrow.py.
    if ! command -v Burrow >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; then
        log "installing burrow and zookeeper (apt)"
        apt_install burrow zookeeper || return 1
    fi
    # Go's sarama client in tests/interop/test_go_clients.py, built with Debian's Go.
    if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/github.com/Shopify/sarama ]; then
        log "installing golang-go and sarama (apt)"
        apt_install golang-go golang-github-shopify-sarama-dev || return 1
    fi
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        log "installing nodejs and npm (apt)"
        apt_install nodejs npm || return 1
    fi
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        log "installing python3-venv (apt)"
        apt_install python3-venv || return 1
    fi

    local req="tests/interop/requirements.txt" stamp=".venv/.strata-requirements"
    local want; want=$(hash_of "$req")
    if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "installing Python test packages into .venv"
        [ -x .venv/bin/python ] || python3 -m venv .venv || return 1
        .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req" || return 1
        echo "$want" >"$stamp"
    fi

    local js="tests/interop/js" jstamp="tests/interop/js/node_modules/.strata-lock"
    local jwant; jwant=$(hash_of "$js/package-lock.json")
    if [ ! -d "$js/node_modules" ] || [ "$(cat "$jstamp" 2>/dev/null)" != "$jwant" ]; then
        log "installing kafkajs (npm ci)"
        (cd "$js" && npm ci --no-audit --no-fund --loglevel=error) || return 1
        echo "$jwant" >"$jstamp"
    fi
}

# ---------------------------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------------------------
FAILED=()
declare -A TOOK

step() { # step NAME COMMAND...
    local name=$1 t0; shift
    log "$name: $*"
    t0=$(now)
    "$@"
    local rc=$?
    TOOK[$name]=$(( $(now) - t0 ))
    if [ $rc -ne 0 ]; then
        FAILED+=("$name (exit $rc)")
        return 1
    fi
}

# In CI every build starts from a fresh clone: incremental compilation only adds work there, and
# full debuginfo in test binaries mostly adds link time (line tables keep backtraces useful).
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
    export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
fi

T_START=$(now)
if [ "${STRATA_SKIP_INSTALL:-0}" != 1 ]; then
    step install install_deps
fi

STRATA_BIN="$ROOT/target/release/strata"
STRATA_WORDCOUNT="$ROOT/target/release/examples/wordcount"
export STRATA_BIN STRATA_WORDCOUNT
# The broker, and the exactly-once example the end-to-end tests drive (tests/tests/exactly_once_wordcount.rs).
build_release() {
    cargo build --release -p strata-broker --bin strata && cargo build --release -p strata-client --example wordcount
}
BUILD_OK=1
step build build_release || BUILD_OK=0

# --no-fail-fast: one failing test binary must not hide the results of the others.
step cargo-test cargo test --workspace --no-fail-fast

# The API docs build without warnings (broken or private intra-doc links); the examples in
# them ran as doc tests above.
step docs env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

if [ "$BUILD_OK" = 1 ] && [ -x .venv/bin/python ]; then
    step interop .venv/bin/python -m pytest tests/interop -p no:cacheprovider -ra "$@"
else
    FAILED+=("interop (not run: build or install failed)")
fi

# librdkafka's own test suite, its CI subset (tests/librdkafka/quick.txt; the whole of it is
# `scripts/librdkafka-suite.sh --full`), against one broker and then against a 3-node cluster
# with replication factor 3 (tests/librdkafka/cluster.txt: the same subset plus 0103, which
# needs a cluster). Builds librdkafka from the rdkafka-sys crate's source.
if [ "$BUILD_OK" = 1 ]; then
    step librdkafka scripts/librdkafka-suite.sh
    step librdkafka-cluster scripts/librdkafka-suite.sh --cluster
else
    FAILED+=("librdkafka (not run: build failed)")
fi

log "summary (total $(( $(now) - T_START ))s)"
for k in install build cargo-test docs interop librdkafka librdkafka-cluster; do
    [ -n "${TOOK[$k]:-}" ] && printf '  %-18s %5ss\n' "$k" "${TOOK[$k]}"
done
if [ ${#FAILED[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${FAILED[@]}"
    exit 1
fi
echo "all tests passed"
