#!/usr/bin/env bash
# What the database allows the gateways' group commit: `place_many` called by S streams
# (gateways) with groups of G placements each, on a 1000x1000x4 board without a cooldown,
# with nothing but pgbench beside the cluster. Run by hand (`./pgplace.sh bench-groups`);
# PGPLACE_GROUPS ("1x12 1x28 2x14 ..."), PGPLACE_BENCH_SECONDS (default 10) and
# PGPLACE_BENCH_ROUNDS (default 2) choose the phases. Needs PGPLACE_ADMIN_URL and PG_BIN.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ADMIN_URL=${PGPLACE_ADMIN_URL:?set PGPLACE_ADMIN_URL}
PG_BIN=${PG_BIN:?set PG_BIN}
DB=pgplace_bench_groups
DB_URL=${ADMIN_URL%/*}/$DB
SECONDS_PER_PHASE=${PGPLACE_BENCH_SECONDS:-10}
export LC_ALL=C.UTF-8

# psql_admin, psql_bench, drop_db
source "$HERE/lib.sh"
trap 'drop_db || true' EXIT

drop_db
psql_admin -c "CREATE DATABASE $DB"
psql_bench -c "CREATE EXTENSION pgplace" >/dev/null
BOARD=$(psql_bench -c "SELECT place.create_board('groups', 1000, 1000, 4, '0')")
read -r UBASE n < <(psql_bench -c "SELECT min(u.user_id) || ' ' || (max(u.user_id) - min(u.user_id) + 1)
                                   FROM generate_series(1, 20000) g, place.create_user('g-' || g) u")
((n == 20000)) || { echo "the 20,000 users are not consecutive" >&2; exit 1; }

# CPU seconds every core of the machine has been busy (/proc/stat): on a quiet machine, what
# PostgreSQL and pgbench spent. (lib.sh's server_cpu_seconds, which sums the cluster's
# processes, came out near zero for some 10-second phases here.)
busy_seconds() {
    awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.3f\n", ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat
}
children_cpu() { times | awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'; }

echo "| streams x group | round | placements/s | ms per call | CPU per placement: PostgreSQL (the machine's busy time less pgbench's) |"
echo "|---|---|---|---|---|"
for round in $(seq "${PGPLACE_BENCH_ROUNDS:-2}"); do
    for spec in ${PGPLACE_GROUPS:-1x12 1x28 1x56 2x12 2x14 2x28 4x7}; do
        streams=${spec%x*} group=${spec#*x}
        before=$(busy_seconds) pgbench_before=$(children_cpu)
        out=$("$PG_BIN/pgbench" -n -M prepared -c "$streams" -j "$streams" -T "$SECONDS_PER_PHASE" \
            -D board="$BOARD" -D ubase="$UBASE" -D g="$group" -f "$HERE/group.sql" "$DB_URL" 2>&1) || {
            echo "$out" >&2
            exit 1
        }
        after=$(busy_seconds) pgbench_after=$(children_cpu)
        cpu=$(awk -v a="$after" -v b="$before" -v pa="$pgbench_after" -v pb="$pgbench_before" 'BEGIN { print a - b - (pa - pb) }')
        awk -v spec="$spec" -v round="$round" -v g="$group" -v cpu="$cpu" '
            /^tps/ { tps = $3 } /^latency average/ { ms = $4 }
            /^number of transactions actually processed/ { n = $NF }
            END { printf "| %s | %d | %.0f | %.2f | %.1f µs |\n", spec, round, tps * g, ms, cpu / (n * g) * 1e6 }' <<<"$out"
    done
done
