#!/usr/bin/env bash
# What keeping sessions in logged tables costs (`./pgplace.sh bench-sessions`; not part of
# the test suite): the gateway's session writes with place.sessions and
# place.session_views LOGGED (as since 0.8.2: they survive a crash and a failover) and
# UNLOGGED (as before), alternating in one run. Needs PGPLACE_ADMIN_URL (a superuser URL
# ending in /<database>) and PG_BIN. Workloads (pgbench -M prepared, 8 clients, each
# statement its own transaction, as the gateway sends them):
#   life  a page's session: session_create, session_subscribe (a board view),
#         session_destroy;
#   move  a legacy session moving to another gateway and back: session_move,
#         session_hand_over, session_take_handover, twice.
# Each round runs both workloads logged, unlogged, logged again (PGPLACE_SESSIONS_ROUNDS,
# default 2; PGPLACE_SESSIONS_SECONDS per cell, default 10), each cell after a CHECKPOINT;
# the ratio is unlogged against the mean of the logged cells around it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ADMIN_URL=${PGPLACE_ADMIN_URL:?set PGPLACE_ADMIN_URL}
PG_BIN=${PG_BIN:?set PG_BIN}
DB=pgplace_bench_sessions
DB_URL=${ADMIN_URL%/*}/$DB
ROUNDS=${PGPLACE_SESSIONS_ROUNDS:-2}
CELL=${PGPLACE_SESSIONS_SECONDS:-10}
CLIENTS=8
TMP=$(mktemp -d)
export LC_ALL=C.UTF-8
source "$HERE/lib.sh"
trap 'drop_db || true; rm -rf "$TMP"' EXIT

drop_db
psql_admin -c "CREATE DATABASE $DB"
psql_bench -c "SET client_min_messages = warning" -c "CREATE EXTENSION pgplace CASCADE" >/dev/null
BOARD=$(psql_bench -c "SELECT place.create_board('sessions', 100, 100, 4, '0')")

# Session ids are bearer secrets of at least 16 characters; a client's own counter keeps
# them unique among the live ones.
cat >"$TMP/life.sql" <<EOF
\set n random(1, 1000000000000)
SELECT place.session_create('bench-session-' || :client_id || '-' || :n, 1);
SELECT place.session_subscribe('bench-session-' || :client_id || '-' || :n, 'board/$BOARD', 'board', '{"board": $BOARD}', $BOARD, 0, :n, 1);
SELECT place.session_destroy('bench-session-' || :client_id || '-' || :n);
EOF
# One standing session per client, moved between gateways 1 and 2.
psql_bench -c "SELECT place.session_create('bench-moving-session-' || c, 1) FROM generate_series(0, $((CLIENTS - 1))) c" >/dev/null
cat >"$TMP/move.sql" <<EOF
SELECT version FROM place.session_move('bench-moving-session-' || :client_id, 2);
SELECT place.session_hand_over('bench-moving-session-' || :client_id, 1, '{"session": 1, "gateway": 1, "views": {"board/$BOARD": [1, {"seq": 42}]}}');
SELECT place.session_take_handover('bench-moving-session-' || :client_id, 2);
SELECT version FROM place.session_move('bench-moving-session-' || :client_id, 1);
SELECT place.session_hand_over('bench-moving-session-' || :client_id, 2, '{"session": 1, "gateway": 2, "views": {"board/$BOARD": [1, {"seq": 42}]}}');
SELECT place.session_take_handover('bench-moving-session-' || :client_id, 1);
EOF

# session_views references sessions: a logged table may not reference an unlogged one, so
# sessions is made logged first and unlogged last. The cell runs only in the mode asked.
set_tables() {
    if [[ $1 == LOGGED ]]; then
        psql_bench -c "ALTER TABLE place.sessions SET LOGGED" -c "ALTER TABLE place.session_views SET LOGGED"
    else
        psql_bench -c "ALTER TABLE place.session_views SET UNLOGGED" -c "ALTER TABLE place.sessions SET UNLOGGED"
    fi
    local want persistence
    want=$([[ $1 == LOGGED ]] && echo p || echo u)
    persistence=$(psql_bench -c "SELECT string_agg(DISTINCT relpersistence::text, '') FROM pg_class
        WHERE oid IN ('place.sessions'::regclass, 'place.session_views'::regclass)")
    [[ $persistence == "$want" ]] || { echo "the session tables are not $1 ($persistence)" >&2; exit 1; }
}

# Prints the script passes per second of one cell, on tables set to $1 beforehand; each
# cell starts from vacuumed tables and after a checkpoint.
cell() {
    local workload=$2
    psql_bench -c "VACUUM place.sessions, place.session_views" -c CHECKPOINT
    "$PG_BIN/pgbench" -n -M prepared -c "$CLIENTS" -j 2 -T "$CELL" -f "$TMP/$workload.sql" "$DB_URL" \
        2>/dev/null | awk '/^tps = / { printf "%.0f\n", $3 }'
}

printf '%-6s %-9s %12s %12s %12s %8s\n' round workload logged unlogged logged 'ratio'
for ((round = 1; round <= ROUNDS; round++)); do
    for workload in life move; do
        set_tables LOGGED
        a=$(cell LOGGED "$workload")
        set_tables UNLOGGED
        b=$(cell UNLOGGED "$workload")
        set_tables LOGGED
        c=$(cell LOGGED "$workload")
        ratio=$(awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { printf "%.2f", b / ((a + c) / 2) }')
        # A pgbench transaction is one pass of the script: 3 statements (life) or 6 (move).
        printf '%-6s %-9s %12s %12s %12s %7sx\n' "$round" "$workload" "$a" "$b" "$c" "$ratio"
    done
done
echo "(script passes per second, $CLIENTS clients; life = 3 transactions per pass, move = 6;"
echo " ratio = unlogged / the mean of the logged cells around it)"
set_tables LOGGED
