#!/usr/bin/env bash
# What watching a table costs its writers, beside the change queues DBAs already run, in one
# cluster and one run (`./pgplace.sh bench-feed`, and the end of `./pgplace.sh bench`); not
# part of the test suite. Needs PGPLACE_ADMIN_URL (a superuser URL ending in /<database>)
# and PG_BIN. Four copies of one table (100,000 rows): plain; watched (place.watch, with a
# ticker-consumer calling place.tick() and reading place.change_feed 100 times a second,
# as the gateway does); PgQ 3.5 (pgq.logutriga into a queue, with pgq.ticker() and a
# consumer reading batches 100 times a second); and, when the cluster has
# wal_level = logical, a wal2json slot decoded live by pg_recvlogical. Workloads (pgbench
# -M prepared): UPDATE of one row per transaction and INSERT of one row, 8 clients; one
# INSERT of 1,000 rows per transaction, 2 clients. Each round runs every workload as
# plain, the peers, then plain again (PGPLACE_FEED_ROUNDS, default 3; PGPLACE_FEED_SECONDS
# per cell, default 10), each cell after a CHECKPOINT; a ratio is against the mean of the
# two plain cells around it, and the last rows give each column's median over the rounds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ADMIN_URL=${PGPLACE_ADMIN_URL:?set PGPLACE_ADMIN_URL}
PG_BIN=${PG_BIN:?set PG_BIN}
DB=pgplace_bench_feed
DB_URL=${ADMIN_URL%/*}/$DB
ROUNDS=${PGPLACE_FEED_ROUNDS:-3}
CELL=${PGPLACE_FEED_SECONDS:-10}
TMP=$(mktemp -d)
export LC_ALL=C.UTF-8
source "$HERE/lib.sh"

consumer_pid=""
stop_consumer() {
    if [[ -n $consumer_pid ]]; then
        kill "$consumer_pid" 2>/dev/null || true
        wait "$consumer_pid" 2>/dev/null || true
        consumer_pid=""
    fi
}
cleanup() {
    stop_consumer
    psql_bench -c "SELECT pg_drop_replication_slot('pgplace_bench_feed')" >/dev/null 2>&1 || true
    drop_db || true
    rm -rf "$TMP"
}
trap cleanup EXIT

have_pgq=false
[[ -f $("$PG_BIN/pg_config" --sharedir)/extension/pgq.control ]] && have_pgq=true
have_wal2json=false
[[ -f $("$PG_BIN/pg_config" --pkglibdir)/wal2json.so ]] && have_wal2json=true

drop_db
psql_admin -c "CREATE DATABASE $DB"
psql_bench -c "CREATE EXTENSION pgplace"
kinds=(plain watched)
if $have_pgq; then
    psql_bench -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('bench')" \
        -c "SELECT pgq.register_consumer('bench', 'bench')" >/dev/null
    kinds+=(pgq)
else
    echo "PgQ is not installed (Debian: postgresql-15-pgq3): its column is left out"
fi
if $have_wal2json && [[ $(psql_bench -c "SHOW wal_level") == logical ]]; then
    kinds+=(wal2json)
else
    echo "wal2json needs the package postgresql-15-wal2json and wal_level = logical: its column is left out"
fi
for t in "${kinds[@]}"; do
    psql_bench -c "CREATE TABLE bench_$t (id bigserial PRIMARY KEY, v int NOT NULL, note text NOT NULL)" \
        -c "INSERT INTO bench_$t (v, note) SELECT g, 'row ' || g FROM generate_series(1, 100000) g" \
        -c "VACUUM ANALYZE bench_$t"
    printf '%s\n' '\set id random(1, 100000)' "UPDATE bench_$t SET v = v + 1 WHERE id = :id;" >"$TMP/update_$t.sql"
    printf '%s\n' '\set v random(1, 1000000)' "INSERT INTO bench_$t (v, note) VALUES (:v, 'new row');" >"$TMP/insert_$t.sql"
    printf '%s\n' "INSERT INTO bench_$t (v, note) SELECT g, 'new row' FROM generate_series(1, 1000) g;" >"$TMP/rows1000_$t.sql"
done
psql_bench -c "SELECT place.watch('bench_watched')" >/dev/null
$have_pgq && psql_bench -c "CREATE TRIGGER bench_pgq AFTER INSERT OR UPDATE OR DELETE ON bench_pgq
                            FOR EACH ROW EXECUTE FUNCTION pgq.logutriga('bench')"
# The consumers: what reads the feed while the writers write, on the same machine.
psql_bench -c "CREATE TABLE bench_cursor (pos bigint NOT NULL)" -c "INSERT INTO bench_cursor VALUES (0)"
cat >"$TMP/consume_watched.sql" <<'SQL'
DO $$
DECLARE
    newest bigint := place.tick();
    at bigint := (SELECT pos FROM bench_cursor);
BEGIN
    IF newest > at THEN
        PERFORM count(*) FROM place.change_feed(at, 1000);
        UPDATE bench_cursor SET pos = least(newest, at + 1000);
    END IF;
END
$$;
SQL
cat >"$TMP/consume_pgq.sql" <<'SQL'
DO $$
DECLARE
    batch bigint;
BEGIN
    PERFORM pgq.ticker();
    batch := pgq.next_batch('bench', 'bench');
    IF batch IS NOT NULL THEN
        PERFORM count(*) FROM pgq.get_batch_events(batch);
        PERFORM pgq.finish_batch(batch);
    END IF;
END
$$;
SQL
# The latency cells' consumers: the same reads, and each probe found in them timed.
psql_bench -c "CREATE TABLE bench_latency (kind text NOT NULL, ms float8 NOT NULL)"
cat >"$TMP/consume_watched_timed.sql" <<'SQL'
DO $$
DECLARE
    newest bigint := place.tick();
    at bigint := (SELECT pos FROM bench_cursor);
BEGIN
    IF newest > at THEN
        INSERT INTO bench_latency
        SELECT 'watched', extract(epoch FROM clock_timestamp()) * 1000 - m[1]::float8 / 1000
        FROM place.change_feed(at, 1000) f, regexp_matches(f.payload, 'probe (\d+)', 'g') m;
        UPDATE bench_cursor SET pos = least(newest, at + 1000);
    END IF;
END
$$;
SQL
cat >"$TMP/consume_pgq_timed.sql" <<'SQL'
DO $$
DECLARE
    batch bigint;
BEGIN
    PERFORM pgq.ticker();
    batch := pgq.next_batch('bench', 'bench');
    IF batch IS NOT NULL THEN
        INSERT INTO bench_latency
        SELECT 'pgq', extract(epoch FROM clock_timestamp()) * 1000 - m[1]::float8 / 1000
        FROM pgq.get_batch_events(batch) e, regexp_matches(e.ev_data, 'probe[+ ](\d+)') m;
        PERFORM pgq.finish_batch(batch);
    END IF;
END
$$;
SQL
# The slot's reader: each probe timed as pg_recvlogical hands it over.
cat >"$TMP/stamp.py" <<'PYTHON'
import re, sys, time
probe = re.compile(r"probe (\d+)")
for line in sys.stdin:
    now = time.time() * 1000
    for m in probe.finditer(line):
        print(now - int(m.group(1)) / 1000, flush=True)
PYTHON
# $1: the peer; $2: "timed" for a latency cell.
start_consumer() {
    local timed=${2:-}
    case $1 in
        watched | pgq)
            "$PG_BIN/pgbench" -n -c 1 -R 100 -T $((CELL + 5)) -f "$TMP/consume_$1${timed:+_timed}.sql" "$DB_URL" \
                >"$TMP/consumer_$1.out" 2>&1 &
            consumer_pid=$! ;;
        wal2json)
            psql_bench -c "SELECT pg_drop_replication_slot('pgplace_bench_feed')" >/dev/null 2>&1 || true
            "$PG_BIN/pg_recvlogical" -d "$DB_URL" --slot pgplace_bench_feed --create-slot -P wal2json >/dev/null
            if [[ -z $timed ]]; then
                "$PG_BIN/pg_recvlogical" -d "$DB_URL" --slot pgplace_bench_feed --start -f /dev/null \
                    -o include-xids=1 &
            else
                # $! is pg_recvlogical itself (stop_consumer stops it); the reader ends with it.
                "$PG_BIN/pg_recvlogical" -d "$DB_URL" --slot pgplace_bench_feed --start -f - \
                    -o include-xids=1 > >(python3 -u "$TMP/stamp.py" >"$TMP/latency_wal2json.txt") &
            fi
            consumer_pid=$! ;;
    esac
    sleep 1
}
cell() {
    local name=$1 clients=$2; shift 2
    if ! "$PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$CELL" "$@" "$DB_URL" \
        >"$TMP/$name.out" 2>&1; then
        cat "$TMP/$name.out" >&2
        echo "pgbench cell '$name' failed" >&2
        exit 1
    fi
}
tps() { grep -oP '^tps = \K[0-9.]+' "$TMP/$1.out"; }

workloads=(update insert rows1000)
clients() { [[ $1 == rows1000 ]] && echo 2 || echo 8; }
for round in $(seq "$ROUNDS"); do
    for w in "${workloads[@]}"; do
        for t in "${kinds[@]}" plain_after; do
            table=${t%_after}
            echo "round $round: $w, $t"
            psql_bench -c "VACUUM bench_$table" -c "CHECKPOINT" >/dev/null
            start_consumer "$table"
            cell "${w}_${t}_$round" "$(clients "$w")" -f "$TMP/${w}_$table.sql"
            stop_consumer
            if [[ $table == wal2json ]]; then
                psql_bench -c "SELECT pg_drop_replication_slot('pgplace_bench_feed')" >/dev/null
            fi
        done
    done
done

# Commit -> consumer, once per peer: the UPDATE workload with a probe writer beside it.
latency_kinds=()
for t in "${kinds[@]:1}"; do
    if [[ $t == wal2json ]] && ! command -v python3 >/dev/null; then
        echo "the slot's latency needs python3 (its reader): left out"
        continue
    fi
    latency_kinds+=("$t")
    echo "latency: update, $t"
    printf '%s\n' "INSERT INTO bench_$t (v, note) VALUES (-1, 'probe ' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);" \
        >"$TMP/probe_$t.sql"
    psql_bench -c "VACUUM bench_$t" -c "CHECKPOINT" >/dev/null
    start_consumer "$t" timed
    "$PG_BIN/pgbench" -n -c 1 -R 50 -T "$CELL" -f "$TMP/probe_$t.sql" "$DB_URL" >"$TMP/probe_$t.out" 2>&1 &
    probe_pid=$!
    cell "latency_$t" 8 -f "$TMP/update_$t.sql"
    wait "$probe_pid"
    # The consumers run on past the writers: what was committed last is read too.
    sleep 1
    stop_consumer
    if [[ $t == wal2json ]]; then
        psql_bench -c "SELECT pg_drop_replication_slot('pgplace_bench_feed')" >/dev/null
    fi
done

# Nothing was lost: every watched transaction is in a position (each UPDATE changed a row).
psql_bench -c "SELECT place.tick()" >/dev/null
logged=$(psql_bench -c "SELECT count(*) FROM place.changes")
echo "place.changes holds $logged staged statements of bench_watched"

pad() { local s=$1; while ((${#s} < $2)); do s+=" "; done; printf '%s' "$s"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
header="| $(pad workload 40) | $(pad plain 15) |"
for t in "${kinds[@]:1}"; do header+=" $(pad "$t" 18) |"; done
echo
echo "$header"
declare -A ratios
for w in "${workloads[@]}"; do
    case $w in
        update) label="UPDATE 1 row/tx, 8 clients" unit=1 ;;
        insert) label="INSERT 1 row/tx, 8 clients" unit=1 ;;
        rows1000) label="INSERT 1,000 rows/tx, 2 clients" unit=1000 ;;
    esac
    for round in $(seq "$ROUNDS"); do
        p=$(awk -v a="$(tps "${w}_plain_$round")" -v b="$(tps "${w}_plain_after_$round")" 'BEGIN { print (a + b) / 2 }')
        line="| $(pad "$label, round $round" 40) | $(pad "$(awk -v p="$p" -v u="$unit" 'BEGIN { printf "%.0f %s", p * u, (u > 1 ? "rows/s" : "tx/s") }')" 15) |"
        for t in "${kinds[@]:1}"; do
            x=$(tps "${w}_${t}_$round")
            r=$(awk -v p="$p" -v x="$x" 'BEGIN { printf "%.2f", x / p }')
            ratios[$w,$t]+="$r "
            line+=" $(pad "$(awk -v x="$x" -v u="$unit" -v r="$r" 'BEGIN { printf "%.0f (%sx)", x * u, r }')" 18) |"
        done
        echo "$line"
    done
done
for w in "${workloads[@]}"; do
    line="| $(pad "$w: median of the rounds" 40) | $(pad "1.00x" 15) |"
    for t in "${kinds[@]:1}"; do
        line+=" $(pad "$(printf '%s\n' ${ratios[$w,$t]} | median)x" 18) |"
    done
    echo "$line"
done

if ((${#latency_kinds[@]})); then
    echo
    echo "| commit -> consumer (UPDATE, 8 clients, 50 probes/s) | probes read | p50 | p99 | max |"
    echo "|---|---|---|---|---|"
    for t in "${latency_kinds[@]}"; do
        if [[ $t == wal2json ]]; then
            values=$(cat "$TMP/latency_wal2json.txt")
        else
            values=$(psql_bench -c "SELECT ms FROM bench_latency WHERE kind = '$t'")
        fi
        written=$(psql_bench -c "SELECT count(*) FROM bench_$t WHERE v = -1")
        printf '%s\n' "$values" | sort -g | awk -v t="$t" -v w="$written" '
            NF { v[++n] = $1 }
            END {
                if (!n) { printf "| %s | 0 of %d | | | |\n", t, w; exit }
                p99 = int(n * 0.99); if (p99 < 1) p99 = 1
                printf "| %s | %d of %d | %.1f ms | %.1f ms | %.1f ms |\n", t, n, w, v[int((n + 1) / 2)], v[p99], v[n]
            }'
    done
fi
