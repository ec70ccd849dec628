#!/usr/bin/env bash
# The web page's benchmark (issue 3), run by hand: `./pgplace.sh bench-page`, or
#
#   GATEWAY_BIN=target/release/pgplace-gateway \
#   PGPLACE_ADMIN_URL=postgresql://postgres@127.0.0.1:54329/postgres \
#   PSQL=/usr/bin/psql bash tests/browser/bench.sh
#
# Creates a fresh database `pgplace_bench_page` with one 2000x2000 4-bit board (cooldown 0),
# PGPLACE_BENCH_USERS users and PGPLACE_BENCH_TILES pre-painted tiles, then runs bench.js
# in Debian's headless Chromium against the gateway binary: time from page open to the
# first full board, and frame times while panning with placements streaming in. Knobs
# (environment): PGPLACE_BENCH_TILES (400000), PGPLACE_BENCH_USERS (1000),
# PGPLACE_BENCH_RATE (1000 tiles/s), PGPLACE_BENCH_PAN_SECONDS (10), PGPLACE_BENCH_LOADS (5),
# PGPLACE_BENCH_PROFILE (1: a CPU profile and a trace of the page while panning),
# PGPLACE_BENCH_KEEP (1: keep the database). Results (JSON, profile, trace, gateway log)
# land in target/bench-page/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
: "${GATEWAY_BIN:?GATEWAY_BIN must name a built pgplace-gateway (a release build)}"
: "${PGPLACE_ADMIN_URL:?PGPLACE_ADMIN_URL must be a superuser URL of the cluster}"
PSQL="${PSQL:-psql}"
GATEWAY_BIN="$(cd "$(dirname "$GATEWAY_BIN")" && pwd)/$(basename "$GATEWAY_BIN")"
export GATEWAY_BIN PGPLACE_ADMIN_URL PSQL
export RESULTS_DIR="$root/target/bench-page"
export BROWSER_DB=pgplace_bench_page
tiles="${PGPLACE_BENCH_TILES:-400000}"
users="${PGPLACE_BENCH_USERS:-1000}"
export LC_ALL=C.UTF-8

. "$here/setup.sh"

rm -rf "$RESULTS_DIR"
mkdir -p "$RESULTS_DIR"
db_url="$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$PGPLACE_ADMIN_URL" "$BROWSER_DB")"
cleanup() {
  [ "${PGPLACE_BENCH_KEEP:-0}" = 1 ] && return
  "$PSQL" "$PGPLACE_ADMIN_URL" -Xq -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $BROWSER_DB WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$PSQL" "$PGPLACE_ADMIN_URL" -Xq -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" \
  -c "DROP DATABASE IF EXISTS $BROWSER_DB WITH (FORCE)" -c "CREATE DATABASE $BROWSER_DB"
"$PSQL" "$db_url" -Xq -v ON_ERROR_STOP=1 -c "CREATE EXTENSION pgplace"

echo "bench-page: a 2000x2000 board, $users users, $tiles pre-painted tiles"
started=$(date +%s.%N)
# Pre-painting: batches of at most 100,000 tiles (one place_many each), mostly a pattern of
# 64x64 blocks with 30% noise, at random places (some tiles painted more than once).
"$PSQL" "$db_url" -X -v ON_ERROR_STOP=1 -v tiles="$tiles" -v users="$users" \
  -o "$RESULTS_DIR/fixture.json" <<'SQL'
\set QUIET on
SELECT place.create_board('bench', 2000, 2000, 4, '0') AS board \gset
-- Fresh ids in a row, so that a random user is umin + random * (umax - umin).
SELECT min(u.user_id) AS umin, max(u.user_id) AS umax
FROM generate_series(1, :users) g, place.create_user('bench-' || g) u \gset
SELECT setseed(0.42) \gset
SELECT count(*) AS painted FROM generate_series(0, (:tiles - 1) / 100000) batch,
LATERAL (
  SELECT array_agg(:umin + (random() * (:umax - :umin))::bigint) AS us,
         array_agg(x) AS xs, array_agg(y) AS ys,
         array_agg(CASE WHEN random() < 0.7 THEN (x / 64 * 3 + y / 64 * 5) % 16 ELSE (random() * 15)::int END) AS cs
  FROM (SELECT (random() * 1999)::int AS x, (random() * 1999)::int AS y
        FROM generate_series(1, least(100000, :tiles - batch * 100000))) t
) arrays, place.place_many(:board, us, xs, ys, cs) \gset
\pset tuples_only on
\pset format unaligned
SELECT json_build_object('boards', json_build_object('bench', :board), 'users', json_build_object(),
  'bench', json_build_object('board', :board, 'users', (SELECT array_agg(id ORDER BY id) FROM place.users),
                             'painted', :painted, 'seq', (SELECT seq FROM place.boards WHERE id = :board)));
SQL
ended=$(date +%s.%N)
"$PSQL" "$db_url" -Xq -c "VACUUM ANALYZE" >/dev/null
awk -v a="$started" -v b="$ended" 'BEGIN { printf "bench-page: pre-painted in %.1f s\n", b - a }'

cd "$here"
node bench.js
