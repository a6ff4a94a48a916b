#!/usr/bin/env bash
# Runs librdkafka's own benchmark client, rdkafka_performance, against a bootstrap
# address: the same produce and consume workloads as compare.sh, measured by a widely
# used C client instead of strata-perf, as a cross-check of both the broker and
# strata-perf.
#
# The source is librdkafka as bundled in the rdkafka-sys crate from crates.io: the
# script fetches that crate with cargo into the local registry (a throwaway manifest
# under target/), copies librdkafka into target/rdkafka/ and builds the static library
# and examples/rdkafka_performance there. Nothing of it is committed. Build
# dependencies (a C toolchain, zlib, zstd, lz4, OpenSSL headers) are installed with
# apt-get when missing.
#
# Usage: benches/rdkafka-perf.sh --bootstrap host:port [--records N] [--topic T]
#                                [--record-size B] [--build-only]
# The topic should exist (e.g. created by `strata-perf produce --partitions 1`); the
# script creates it with strata-perf when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BOOTSTRAP=""
RECORDS=500000
RECORD_SIZE=1024
TOPIC="rdkafka-perf-$$"
BUILD_ONLY=0
RDKAFKA_SYS_VERSION="4"
while [ $# -gt 0 ]; do
    case "$1" in
        --bootstrap) BOOTSTRAP=$2; shift 2 ;;
        --records) RECORDS=$2; shift 2 ;;
        --record-size) RECORD_SIZE=$2; shift 2 ;;
        --topic) TOPIC=$2; shift 2 ;;
        --build-only) BUILD_ONLY=1; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$BUILD_ONLY" = 0 ] && [ -z "$BOOTSTRAP" ]; then
    echo "--bootstrap host:port is required" >&2
    exit 2
fi

log() { printf '==> %s\n' "$*" >&2; }
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$TARGET_DIR/rdkafka
BIN=$WORK/bin/rdkafka_performance

install_build_deps() {
    local missing=()
    command -v cc >/dev/null 2>&1 || missing+=(build-essential)
    command -v make >/dev/null 2>&1 || missing+=(make)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    for pkg in zlib1g-dev libzstd-dev liblz4-dev libssl-dev; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]} (apt)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# Prints the librdkafka directory inside the registry copy of rdkafka-sys, fetching
# the crate first if it is not there.
librdkafka_source() {
    local found
    found=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/rdkafka-sys-*/librdkafka 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$found" ]; then
        log "fetching the rdkafka-sys crate (bundled librdkafka source) with cargo"
        local fetch=$WORK/fetch
        mkdir -p "$fetch/src"
        cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "rdkafka-source-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rdkafka-sys = "$RDKAFKA_SYS_VERSION"

[workspace]
EOF
        echo 'fn main() {}' >"$fetch/src/main.rs"
        (cd "$fetch" && cargo fetch -q)
        found=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/rdkafka-sys-*/librdkafka 2>/dev/null | sort -V | tail -1 || true)
    fi
    [ -n "$found" ] || { echo "librdkafka source not found after cargo fetch" >&2; exit 1; }
    echo "$found"
}

build() {
    if [ -x "$BIN" ]; then
        return
    fi
    install_build_deps
    local src
    src=$(librdkafka_source)
    log "building librdkafka and rdkafka_performance from $src"
    rm -rf "$WORK/src"
    mkdir -p "$WORK/bin"
    cp -a "$src" "$WORK/src"
    (
        cd "$WORK/src"
        ./configure --disable-gssapi --disable-curl --enable-static >"$WORK/configure.log" 2>&1 \
            || { cat "$WORK/configure.log" >&2; exit 1; }
        make -j"$(nproc)" libs >"$WORK/make.log" 2>&1 || { tail -50 "$WORK/make.log" >&2; exit 1; }
        make -C examples rdkafka_performance >>"$WORK/make.log" 2>&1 \
            || { tail -50 "$WORK/make.log" >&2; exit 1; }
    )
    cp "$WORK/src/examples/rdkafka_performance" "$BIN"
    log "built $BIN"
}

build
if [ "$BUILD_ONLY" = 1 ]; then
    exit 0
fi

PERF=$TARGET_DIR/release/strata-perf
if [ ! -x "$PERF" ]; then
    cargo build --release -q -p strata-benches --bin strata-perf
fi
# One record makes sure the topic exists with one partition (strata-perf creates it).
"$PERF" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 1 --records 1 \
    --record-size 16 --quiet >/dev/null

log "rdkafka_performance produce: $RECORDS x ${RECORD_SIZE} B, acks=1, partition 0"
# linger.ms and batch.size as in compare.sh's strata-perf produce workload. -u prints a
# table; its last row is the final tally (MB = 10^6 bytes, as strata-perf reports).
"$BIN" -P -t "$TOPIC" -p 0 -b "$BOOTSTRAP" -s "$RECORD_SIZE" -c "$RECORDS" -a 1 -u \
    -X linger.ms=5 -X batch.size=131072 >"$WORK/produce.out" 2>&1 || { cat "$WORK/produce.out" >&2; exit 1; }
grep -E '^\| +[0-9]' "$WORK/produce.out" | tail -1 | awk -F'|' \
    '{printf "rdkafka_performance produce: %d records delivered in %.2f s: %.0f records/s, %.2f MB/s\n", $6, $2/1000, $7, $8}'

log "rdkafka_performance consume: $RECORDS records from the start of partition 0"
"$BIN" -C -t "$TOPIC" -p 0 -b "$BOOTSTRAP" -o beginning -c "$RECORDS" -u \
    >"$WORK/consume.out" 2>&1 || { cat "$WORK/consume.out" >&2; exit 1; }
grep -E '^\| +[0-9]' "$WORK/consume.out" | tail -1 | awk -F'|' \
    '{printf "rdkafka_performance consume: %d records in %.2f s: %.0f records/s, %.2f MB/s\n", $3, $2/1000, $6, $7}'
