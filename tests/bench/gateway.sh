#!/usr/bin/env bash
# pgplace gateway benchmark: run by hand (`./pgplace.sh bench-gateway`), not part of the
# test suite. Needs PGPLACE_ADMIN_URL (a superuser URL ending in /<database>), PG_BIN and
# GATEWAY_BIN (a built pgplace-gateway). Arguments go to the benchmark binary:
# `--only place|delivery|waiting|bits|lists|regions` (or PGPLACE_BENCH_ONLY), `--seconds N` (or
# PGPLACE_BENCH_SECONDS; default 15), `--schema 0.4.0` (or PGPLACE_BENCH_SCHEMA: an older schema,
# for a before/after in one run); `--only held --seconds 300 [--held-window 30]
# [--held-control]`: placements while a snapshot is held (the cliff), window by window;
# `--only flood [--seconds N]`: a control's placements and poll while one address floods the
# gateway with database lookups, budget on and off (A B C A B C, N seconds each);
# `--only moves`: legacy sessions on one gateway, then moving between two on every poll.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ADMIN_URL=${PGPLACE_ADMIN_URL:?set PGPLACE_ADMIN_URL}
PG_BIN=${PG_BIN:?set PG_BIN}
GATEWAY_BIN=${GATEWAY_BIN:?set GATEWAY_BIN}
DB=pgplace_bench_gateway
export LC_ALL=C.UTF-8

# The benchmark drops its database itself; this catches a run that died on the way.
cleanup() {
    "$PG_BIN/psql" -X -q -d "$ADMIN_URL" -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# 10,000 long polls are 10,000 sockets in each process (the limit is inherited by the
# gateway, which the benchmark starts). Root may raise the hard limit; others get theirs.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

echo "building the benchmark (release)"
(cd "$ROOT" && cargo build --release -p pgplace-tests --bin gateway_bench --quiet)
cd "$ROOT"
PGPLACE_ADMIN_URL=$ADMIN_URL GATEWAY_BIN=$GATEWAY_BIN \
    "$ROOT/target/release/gateway_bench" --log-dir "$ROOT/target/gateway-bench" "$@"
