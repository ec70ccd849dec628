#!/usr/bin/env bash
# Fuzzes the gateway's parsers (gateway/fuzz, cargo fuzz + libFuzzer) for a bounded time:
# each target runs FUZZ_SECONDS (default 60), starting from the committed seed corpus
# (gateway/fuzz/corpus/<target>, read only) and from what earlier runs found
# (target/fuzz-corpus/<target>, where new inputs go). Exits non-zero on the first crash,
# naming the input that caused it (kept under target/fuzz-artifacts/<target>/).
#
# Environment: FUZZ_SECONDS (per target), FUZZ_TARGETS (default: every target),
# FUZZ_SANITIZER (default none: the code is safe Rust, and without ASan a run executes
# about twice the inputs; `address` to check the unsafe code of dependencies too).
# Debug assertions and overflow checks are on, as cargo fuzz builds by default.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
SANITIZER=${FUZZ_SANITIZER:-none}
FUZZ_TARGETS=${FUZZ_TARGETS:-rpc_request notify_payload}
# Everything generated lives under target/ (ignored by git), nothing in gateway/fuzz.
OUT=$ROOT/target
export CARGO_TARGET_DIR=$OUT/fuzz
# The toolchain is stable; cargo fuzz passes -Z flags that stable accepts only so.
export RUSTC_BOOTSTRAP=1

# The longest input per target: a request as large as several batched requests; a NOTIFY
# payload is shorter than 8,000 bytes.
max_len() {
    case $1 in
        notify_payload) echo 8000 ;;
        *) echo 4096 ;;
    esac
}

started=$(date +%s)
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    t0=$(date +%s)
    cargo install cargo-fuzz --locked
    echo "== cargo-fuzz installed in $(($(date +%s) - t0)) s"
fi
echo "== $(cargo fuzz --version)"

cd "$ROOT/gateway"
t0=$(date +%s)
cargo fuzz build --sanitizer "$SANITIZER"
echo "== fuzz targets built in $(($(date +%s) - t0)) s"

for target in $FUZZ_TARGETS; do
    corpus=$OUT/fuzz-corpus/$target
    artifacts=$OUT/fuzz-artifacts/$target
    mkdir -p "$corpus" "$artifacts"
    log=$OUT/fuzz-artifacts/$target.log
    echo "== $target: ${FUZZ_SECONDS} s (log: $log)"
    before=$(find "$artifacts" -type f | sort)
    status=0
    cargo fuzz run --sanitizer "$SANITIZER" "$target" \
        "$corpus" "$ROOT/gateway/fuzz/corpus/$target" -- \
        -max_total_time="$FUZZ_SECONDS" -max_len="$(max_len "$target")" -timeout=10 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1 || status=$?
    # libFuzzer's summary: executions, speed, coverage, corpus.
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)' "$log" || true
    grep -E '^#[0-9]+.*(DONE|INITED)' "$log" | tail -n 2 || true
    if ((status != 0)); then
        tail -n 60 "$log"
        echo "== $target FAILED (exit $status)" >&2
        comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | while read -r input; do
            [ -n "$input" ] && echo "crashing input: $input" >&2
        done
        grep -o 'Test unit written to .*' "$log" >&2 || true
        exit 1
    fi
done
# cargo fuzz makes gateway/fuzz/artifacts/<target> whatever -artifact_prefix says: left empty.
rmdir "$ROOT"/gateway/fuzz/artifacts/* "$ROOT/gateway/fuzz/artifacts" 2>/dev/null || true
echo "== fuzzing passed in $(($(date +%s) - started)) s"
