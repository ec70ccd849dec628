#!/usr/bin/env bash
# Placements while another session holds an old snapshot (`./pgplace.sh bench-cliff`): run
# by hand, not part of the test suite. Each workload runs undisturbed for one window, then
# for PGPLACE_CLIFF_SECONDS (default 60; the issue's target is 300) while a REPEATABLE READ
# transaction holds its snapshot, in windows of PGPLACE_CLIFF_WINDOW seconds (default 10);
# each window is printed as a ratio to the undisturbed one. Dead row versions cannot be
# pruned while the snapshot is held: a row that every placement updates would make every
# window slower than the one before.
# Each window also shows the buffers written out during it by the checkpointer, the
# background writer and the backends themselves (pg_stat_bgwriter, cluster-wide).
# PGPLACE_CLIFF_CONTROL=1 runs the same windows without holding a snapshot: how much the
# windows vary on their own (checkpoints, autovacuum) on this machine.
# PGPLACE_CLIFF_HOLDER=pg_dump holds the snapshot the way a backup does: pg_dump of the
# database, its output read by nobody for the whole hold (so it stays in its transaction).
# PGPLACE_CLIFF_WORKLOADS=place_many (or place) runs one workload only.
# PGPLACE_CLIFF_VERSION installs an older schema (the library serves it as that version
# did; its install script must be in the extension directory: tests/upgrade/ keeps them),
# for a before/after in one run.
# Needs PGPLACE_ADMIN_URL (a superuser URL ending in /<database>) and PG_BIN.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ADMIN_URL=${PGPLACE_ADMIN_URL:?set PGPLACE_ADMIN_URL}
PG_BIN=${PG_BIN:?set PG_BIN}
DB=pgplace_bench_cliff
DB_URL=${ADMIN_URL%/*}/$DB
HOLD=${PGPLACE_CLIFF_SECONDS:-60}
WINDOW=${PGPLACE_CLIFF_WINDOW:-10}
USERS=20000
TMP=$(mktemp -d)
export LC_ALL=C.UTF-8

# psql_admin, psql_bench, drop_db
source "$HERE/lib.sh"
HOLDER=
cleanup() {
    [[ -n $HOLDER ]] && kill "$HOLDER" 2>/dev/null || true
    drop_db || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# One pgbench window; prints its transactions per second.
window() {
    local name=$1; shift
    if ! "$PG_BIN/pgbench" -n -M prepared -T "$WINDOW" "$@" "$DB_URL" >"$TMP/$name.out" 2>&1; then
        cat "$TMP/$name.out" >&2
        echo "pgbench window '$name' failed" >&2
        exit 1
    fi
    grep -oP '^tps = \K[0-9.]+' "$TMP/$name.out"
}

# The holder's backend, told apart from the workload's (pgbench) and ours (psql).
HOLDER_BACKEND="datname = '$DB' AND backend_xmin IS NOT NULL AND (query LIKE '%pg_sleep%' OR application_name = 'pg_dump')"

# Holds a snapshot for $HOLD seconds: a REPEATABLE READ transaction (taken by its first
# statement), or with PGPLACE_CLIFF_HOLDER=pg_dump a pg_dump whose output pipe nobody reads,
# so that it waits in the middle of its transaction.
hold_snapshot() {
    if [[ ${PGPLACE_CLIFF_HOLDER:-} == pg_dump ]]; then
        { "$PG_BIN/pg_dump" -d "$DB_URL" 2>/dev/null | { sleep $((HOLD + 5)); cat >/dev/null; }; } &
    else
        "$PG_BIN/psql" -X -q -d "$DB_URL" >/dev/null 2>&1 <<SQL &
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM place.boards;
SELECT pg_sleep($HOLD + 5);
COMMIT;
SQL
    fi
    HOLDER=$!
    # Wait until the snapshot is really held before the first window starts.
    for _ in $(seq 100); do
        (($(psql_bench -c "SELECT count(*) FROM pg_stat_activity WHERE $HOLDER_BACKEND") > 0)) && return
        sleep 0.1
    done
    echo "the snapshot holder did not start" >&2
    exit 1
}

release_snapshot() {
    kill "$HOLDER" 2>/dev/null || true
    psql_bench -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE $HOLDER_BACKEND AND pid <> pg_backend_pid()" >/dev/null
    wait "$HOLDER" 2>/dev/null || true
    HOLDER=
}

# Buffers written so far (cluster-wide) by the checkpointer, the background writer and the
# backends themselves: a backend that must write a dirty page out to make room waits on it.
written() {
    psql_bench -c "SELECT buffers_checkpoint || ' ' || buffers_clean || ' ' || buffers_backend FROM pg_stat_bgwriter"
}

# Runs one workload undisturbed, then under a held snapshot; prints one line per window.
workload() {
    local name=$1; shift
    psql_bench -c "VACUUM" -c "CHECKPOINT" >/dev/null
    # A first window warms the caches and the statements' plans up; the second one counts.
    window "${name}_warm_up" "$@" >/dev/null
    local base
    base=$(window "${name}_undisturbed" "$@")
    printf '%-34s undisturbed %8.0f tx/s\n' "$name" "$base"
    [[ -n ${PGPLACE_CLIFF_CONTROL:-} ]] || hold_snapshot
    local w=0 worst=
    local checkpointer bgwriter backends c2 g2 b2
    read -r checkpointer bgwriter backends < <(written)
    while ((w * WINDOW < HOLD)); do
        w=$((w + 1))
        local t
        t=$(window "${name}_held_$w" "$@")
        read -r c2 g2 b2 < <(written)
        printf '%-34s %3d-%3d s    %8.0f tx/s  %.2fx   buffers written: checkpointer %7d, bgwriter %6d, backends %7d\n' \
            "$name" $(((w - 1) * WINDOW)) $((w * WINDOW)) "$t" \
            "$(awk -v t="$t" -v b="$base" 'BEGIN { print t / b }')" \
            $((c2 - checkpointer)) $((g2 - bgwriter)) $((b2 - backends))
        checkpointer=$c2 bgwriter=$g2 backends=$b2
        worst=$(awk -v t="$t" -v b="$base" -v w="$worst" 'BEGIN { r = t / b; print (w == "" || r < w) ? r : w }')
    done
    [[ -n ${PGPLACE_CLIFF_CONTROL:-} ]] || release_snapshot
    local under="under the snapshot"
    [[ -z ${PGPLACE_CLIFF_CONTROL:-} ]] || under="(no snapshot held)"
    printf '%-34s worst window %s: %.2fx undisturbed (target ≥ 0.8x)\n' "$name" "$under" "$worst"
}

drop_db
psql_admin -c "CREATE DATABASE $DB"
VERSION=
[[ -n ${PGPLACE_CLIFF_VERSION:-} ]] && VERSION=" VERSION '$PGPLACE_CLIFF_VERSION'"
psql_bench -c "CREATE EXTENSION pgplace$VERSION"
BOARD=$(psql_bench -c "SELECT place.create_board('cliff', 1000, 1000, 4, '0')")
read -r UBASE n < <(psql_bench -c "SELECT min(u.user_id) || ' ' || (max(u.user_id) - min(u.user_id) + 1)
                                   FROM generate_series(1, $USERS) g, place.create_user('cliff-' || g) u")
((n == USERS)) || { echo "users are not consecutive" >&2; exit 1; }

echo "schema $(psql_bench -c "SELECT extversion FROM pg_extension WHERE extname = 'pgplace'"); cores: $(nproc); snapshot held by ${PGPLACE_CLIFF_HOLDER:-a REPEATABLE READ transaction} for ${HOLD} s in ${WINDOW}-second windows; board 1000x1000x4, $USERS users, cooldown 0"
if [[ -n ${PGPLACE_CLIFF_CONTROL:-} ]]; then
    echo "control run: no snapshot is held"
fi
want() { [[ -z ${PGPLACE_CLIFF_WORKLOADS:-} || ,$PGPLACE_CLIFF_WORKLOADS, == *,$1,* ]]; }
if want place_many; then
    workload "place_many(100), 2 clients" -c 2 -j 2 -D board="$BOARD" -D ubase="$UBASE" -f "$HERE/place_many_random.sql"
fi
if want place; then
    workload "place(), 8 clients, random users" -c 8 -j 8 -D board="$BOARD" -D ubase="$UBASE" -f "$HERE/place_random.sql"
fi
