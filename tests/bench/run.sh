#!/usr/bin/env bash
# pgplace benchmark: run by hand (`./pgplace.sh bench`), not part of the test suite.
# Needs PGPLACE_ADMIN_URL (a superuser URL ending in /<database>) and PG_BIN.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ADMIN_URL=${PGPLACE_ADMIN_URL:?set PGPLACE_ADMIN_URL}
PG_BIN=${PG_BIN:?set PG_BIN}
DB=pgplace_bench
DB_URL=${ADMIN_URL%/*}/$DB
SECONDS_PER_PHASE=${PGPLACE_BENCH_SECONDS:-12}
TMP=$(mktemp -d)
export LC_ALL=C.UTF-8

# psql_admin, psql_bench, drop_db
source "$HERE/lib.sh"
# Drop the database and the logs on failure too, so a broken run leaves nothing behind.
cleanup() { drop_db || true; rm -rf "$TMP"; }
trap cleanup EXIT

# Runs one pgbench phase; its full output lands in $TMP/<name>.out so that an error from
# the extension is shown verbatim. The remaining arguments go to pgbench. Beside it,
# $TMP/<name>.cpu holds the CPU seconds the cluster spent during the phase (every backend
# and helper process) and pgbench's own (from the shell's children times, so that no tool
# beyond bash is needed).
children_cpu() { awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"; }
bench() {
    local name=$1; shift
    echo "running $name: $*"
    local before after
    before=$(server_cpu_seconds)
    times >"$TMP/$name.t0"
    if ! "$PG_BIN/pgbench" -n -M prepared "$@" "$DB_URL" >"$TMP/$name.out" 2>&1; then
        cat "$TMP/$name.out" >&2
        echo "pgbench phase '$name' failed" >&2
        exit 1
    fi
    times >"$TMP/$name.t1"
    after=$(server_cpu_seconds)
    local load
    load=$(awk -v a="$(children_cpu "$TMP/$name.t1")" -v b="$(children_cpu "$TMP/$name.t0")" 'BEGIN { print a - b }')
    if [[ -n $before && -n $after ]]; then
        echo "$(awk -v b="$before" -v a="$after" 'BEGIN { print a - b }') $load" >"$TMP/$name.cpu"
    else
        echo "n/a $load" >"$TMP/$name.cpu"
    fi
}
# "PostgreSQL N µs, pgbench M µs": the CPU per placement (or row) of a phase of `per`
# placements a transaction.
cpu_per() {
    local name=$1 per=$2
    awk -v n="$(xacts "$name")" -v per="$per" '{
        units = n * per
        if (units == 0 || $1 == "n/a") { printf "PostgreSQL n/a, pgbench %.1f µs\n", units ? $2 / units * 1e6 : 0; exit }
        printf "PostgreSQL %.1f µs, pgbench %.1f µs\n", $1 / units * 1e6, $2 / units * 1e6
    }' "$TMP/$name.cpu"
}
tps() { grep -oP '^tps = \K[0-9.]+' "$TMP/$1.out"; }
xacts() { grep -oP '^number of transactions actually processed: \K[0-9]+' "$TMP/$1.out"; }
board_seq() { psql_bench -c "SELECT seq FROM place.boards WHERE id = $BOARD"; }
# Every attempt must be a placement (cooldown 0, distinct users), or the rate is not
# what it claims to measure.
expect_placed() {
    local want=$1 got=$2
    ((want == got)) || { echo "expected $want placements, the board's seq moved by $got" >&2; exit 1; }
}

drop_db
psql_admin -c "CREATE DATABASE $DB"
psql_bench -c "CREATE EXTENSION pgplace" \
    -c "CREATE TABLE bench_baseline (id bigserial PRIMARY KEY, x int, y int, c int, at timestamptz DEFAULT now())" \
    -c "CREATE TABLE bench_history (LIKE place.placements INCLUDING ALL)" -c "CREATE SEQUENCE bench_history_seq"
BOARD=$(psql_bench -c "SELECT place.create_board('bench', 1000, 1000, 4, '0')")
# The same board with freeze_after: what checking each tile's last change costs.
FREEZING=$(psql_bench -c "SELECT place.create_board('bench-freezing', 1000, 1000, 4, '0')")
psql_bench -c "SELECT place.set_freeze_after($FREEZING, '1 hour')" >/dev/null
# The scripts address users as base + offset, so each group's ids must be consecutive.
create_users() {
    psql_bench -c "SELECT min(u.user_id) || ' ' || (max(u.user_id) - min(u.user_id) + 1)
                   FROM generate_series(1, $2) g, place.create_user('$1-' || g) u"
}
read -r PLACE_BASE n < <(create_users place 8)
((n == 8)) || { echo "place users are not consecutive" >&2; exit 1; }
read -r MANY_BASE n < <(create_users many 200)
((n == 200)) || { echo "place_many users are not consecutive" >&2; exit 1; }
read -r RANDOM_BASE n < <(create_users random 20000)
((n == 20000)) || { echo "the 20,000 users are not consecutive" >&2; exit 1; }
# The same contract in plain PL/pgSQL, on its own board (naive.sql).
psql_bench -f "$HERE/naive.sql" >/dev/null
naive_seq() { psql_bench -c "SELECT seq FROM naive.boards WHERE id = 1"; }

echo "cores: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)"
"$PG_BIN/pgbench" --version

bench baseline -c 8 -j 8 -T "$SECONDS_PER_PHASE" -f "$HERE/baseline.sql"

seq0=$(board_seq)
bench place -c 8 -j 8 -T "$SECONDS_PER_PHASE" -D board="$BOARD" -D ubase="$PLACE_BASE" -f "$HERE/place.sql"
seq1=$(board_seq)
expect_placed "$(xacts place)" $((seq1 - seq0))

seq_f0=$(psql_bench -c "SELECT seq FROM place.boards WHERE id = $FREEZING")
bench place_freezing -c 8 -j 8 -T "$SECONDS_PER_PHASE" -D board="$FREEZING" -D ubase="$PLACE_BASE" -f "$HERE/place.sql"
seq_f1=$(psql_bench -c "SELECT seq FROM place.boards WHERE id = $FREEZING")
expect_placed "$(xacts place_freezing)" $((seq_f1 - seq_f0))

bench place_many -c 2 -j 2 -T "$SECONDS_PER_PHASE" -D board="$BOARD" -D ubase="$MANY_BASE" \
    -f "$HERE/place_many.sql"
seq2=$(board_seq)
expect_placed $(($(xacts place_many) * 100)) $((seq2 - seq1))

# pgplace against the PL/pgSQL baseline, alternating, on realistic users: a random one of
# 20,000 per call (or per batch of 100 consecutive ones), and one user per client.
# counted_phase name clients script placements-per-call seq-function min-percent
# [pgbench options]: at least min-percent of the calls' placements must be placed, and no
# more than all of them.
counted_phase() {
    local name=$1 clients=$2 script=$3 per=$4 seq_of=$5 min_percent=$6 before after
    shift 6
    before=$($seq_of)
    bench "$name" -c "$clients" -j "$clients" -T "$SECONDS_PER_PHASE" "$@" -f "$HERE/$script"
    after=$($seq_of)
    local want=$(($(xacts "$name") * per)) got=$((after - before))
    ((got <= want && got * 100 >= want * min_percent)) || { echo "$name placed $got of $want" >&2; exit 1; }
}
# pgplace_phase / naive_phase name clients script placements-per-call.
pgplace_phase() {
    counted_phase "$@" board_seq 100 -D board="$BOARD" -D ubase="${ONE_BASE:-$RANDOM_BASE}"
}
# The baseline's cooldown compares now() (its transaction's start) with the stamp of a
# concurrent call by the same user that started later: it refuses a rare placement.
naive_phase() { counted_phase "$@" naive_seq 99; }
for round in 1 2; do
    # place() against INSERT + pg_notify in the same round, with the seq lock freed before
    # the commit's flush (extension/src/early_release.rs) and without.
    bench "baseline_$round" -c 8 -j 8 -T "$SECONDS_PER_PHASE" -f "$HERE/baseline.sql"
    export PGOPTIONS="-c pgplace.release_before_flush=on"
    pgplace_phase "place_early_$round" 8 place_random.sql 1
    unset PGOPTIONS
    pgplace_phase "place_random_$round" 8 place_random.sql 1
    naive_phase "naive_random_$round" 8 naive_random.sql 1
    naive_phase "naive_one_$round" 8 naive_one.sql 1
    ONE_BASE=$PLACE_BASE pgplace_phase "place_one_$round" 8 place.sql 1
    pgplace_phase "place_many_random_$round" 2 place_many_random.sql 100
    naive_phase "naive_many_$round" 2 naive_many.sql 100
    bench "baseline_many_$round" -c 2 -j 2 -T "$SECONDS_PER_PHASE" -f "$HERE/baseline_many.sql"
    # The copy holds what the history holds now (the other phases' placements too).
    psql_bench -c "TRUNCATE bench_history" -c "INSERT INTO bench_history SELECT * FROM place.placements" \
        -c "SELECT setval('bench_history_seq', coalesce(max(seq), 0) + 1) FROM bench_history" \
        -c "VACUUM ANALYZE bench_history" >/dev/null
    bench "history_shape_$round" -c 2 -j 2 -T "$SECONDS_PER_PHASE" -D ubase="$RANDOM_BASE" -f "$HERE/history_shape.sql"
done

# Per-transaction log: the 3rd column is the latency in µs.
bench board_bits -c 1 -t 300 -D board="$BOARD" -l --log-prefix="$TMP/bits" -f "$HERE/board_bits.sql"
read -r bits_median bits_p99 < <(cat "$TMP"/bits.* | awk '{print $3}' | sort -n | awk '
    { v[NR] = $1 }
    END { printf "%.2f %.2f\n", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.99 + 0.999)] / 1000 }')

base_tps=$(tps baseline) place_tps=$(tps place) many_tps=$(tps place_many)
freezing_tps=$(tps place_freezing)
# Pads by characters, not bytes, so "≥" does not shift the columns.
pad() { local s=$1; while ((${#s} < $2)); do s+=" "; done; printf '%s' "$s"; }
row() { echo "| $(pad "$1" 52) | $(pad "$2" 40) | $(pad "$3" 13) |"; }
echo
row measurement result target
row "baseline INSERT+pg_notify, 8 clients" "$(printf '%.0f tx/s' "$base_tps")" ""
row "place(), 8 clients, distinct users" \
    "$(awk -v p="$place_tps" -v b="$base_tps" 'BEGIN { printf "%.0f tx/s (%.2fx baseline)", p, p / b }')" "≥ 0.6x"
row "place(), same, board with freeze_after" \
    "$(awk -v p="$freezing_tps" -v q="$place_tps" 'BEGIN { printf "%.0f tx/s (%.2fx place())", p, p / q }')" ""
row "place_many(), 100/batch, 2 clients" \
    "$(awk -v t="$many_tps" 'BEGIN { printf "%.0f placements/s (%.1f batches/s)", t * 100, t }')" "≥ 25,000/s"
row "board_bits() 1000x1000x4, median / p99" "$bits_median / $bits_p99 ms" "median ≤ 5 ms"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
for round in 1 2; do
    pr=$(tps "place_random_$round") nr=$(tps "naive_random_$round") po=$(tps "place_one_$round") no=$(tps "naive_one_$round")
    pm=$(tps "place_many_random_$round") nm=$(tps "naive_many_$round") bm=$(tps "baseline_many_$round")
    hs=$(tps "history_shape_$round")
    row "round $round: place(), 8 clients, random users of 20k" "$(printf '%.0f tx/s' "$pr")" ""
    row "  PL/pgSQL baseline, same workload" "$(printf '%.0f tx/s: pgplace %sx' "$nr" "$(ratio "$pr" "$nr")")" "≥ 1.0x"
    row "  INSERT+pg_notify (first row)" "pgplace $(ratio "$pr" "$base_tps")x" "≥ 0.6x"
    br=$(tps "baseline_$round") pe=$(tps "place_early_$round")
    row "  INSERT+pg_notify, 8 clients, this round" "$(printf '%.0f tx/s: pgplace %sx' "$br" "$(ratio "$pr" "$br")")" "≥ 0.6x"
    row "  place(), pgplace.release_before_flush = on" "$(printf '%.0f tx/s: %sx INSERT+pg_notify' "$pe" "$(ratio "$pe" "$br")")" "≥ 0.6x"
    row "round $round: place(), 8 clients, a user per client" "$(printf '%.0f tx/s' "$po")" ""
    row "  PL/pgSQL baseline, same workload" "$(printf '%.0f tx/s: pgplace %sx' "$no" "$(ratio "$po" "$no")")" "≥ 1.0x"
    row "round $round: place_many(100), 2 clients, random users" "$(printf '%.0f placements/s' "$(awk -v t="$pm" 'BEGIN { print t * 100 }')")" ""
    row "  PL/pgSQL baseline, same workload" "$(printf '%.0f placements/s: pgplace %sx' "$(awk -v t="$nm" 'BEGIN { print t * 100 }')" "$(ratio "$pm" "$nm")")" ""
    row "  100-row INSERT + 1 pg_notify, 2 clients" "$(printf '%.0f rows/s: pgplace %sx' "$(awk -v t="$bm" 'BEGIN { print t * 100 }')" "$(ratio "$pm" "$bm")")" "≥ 0.5x"
    row "  the same into the history's shape (3 indexes)" "$(printf '%.0f rows/s: %sx; pgplace %sx' "$(awk -v t="$hs" 'BEGIN { print t * 100 }')" "$(ratio "$hs" "$bm")" "$(ratio "$pm" "$hs")")" ""
    row "  CPU per placement: place(), random users" "$(cpu_per "place_random_$round" 1)" ""
    row "    release_before_flush = on" "$(cpu_per "place_early_$round" 1)" ""
    row "    PL/pgSQL baseline, same workload" "$(cpu_per "naive_random_$round" 1)" ""
    row "    INSERT+pg_notify (per row)" "$(cpu_per baseline 1)" ""
    row "  CPU per placement: place_many(100)" "$(cpu_per "place_many_random_$round" 100)" ""
    row "    PL/pgSQL baseline, same workload" "$(cpu_per "naive_many_$round" 100)" ""
    row "    100-row INSERT + 1 pg_notify (per row)" "$(cpu_per "baseline_many_$round" 100)" ""
done
