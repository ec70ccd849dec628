#!/usr/bin/env bash
# ./pgplace.sh bench-ha (by hand; not part of the tests): on the setup of `ha up`,
# board.place through one gateway on the primary with its standbys synchronous, asynchronous
# and stopped (the primary alone), alternating over two rounds; then the time from a kill
# of the primary to the first acknowledged placement after it, over PGPLACE_HA_FAILOVERS
# failovers (default 5), as tests/tests/fleet/ha_failover.rs measures it.
# PGPLACE_HA_NODE_PORTS picks the nodes: "54341 54342" (the default: one standby, what one
# standby costs) or "54341 54342 54343" (`ha up`'s own: two standbys, one of which confirms
# each commit).
# GATEWAY_BIN picks the gateway build the phases place through (default the release build;
# `ha up`'s own gateways keep running from that file, so to compare builds set this rather
# than copying over it).
set -euo pipefail

: "${ROOT:?}" "${PG_BIN:?}" "${STATE:?}"
HA=$STATE/ha
SECONDS_PER_PHASE=${PGPLACE_BENCH_SECONDS:-15}
FAILOVERS=${PGPLACE_HA_FAILOVERS:-5}
# Without the idle gateways of the placer test (every gateway ticks the database). A setup
# already up keeps its nodes and gateways: `ha down` first.
read -r -a PORTS <<<"${PGPLACE_HA_NODE_PORTS:-54341 54342}"
ha=(env ROOT="$ROOT" PG_BIN="$PG_BIN" STATE="$STATE" PGPLACE_HA_PLACER_GATEWAY_PORTS= PGPLACE_HA_NODE_PORTS="${PORTS[*]}" bash "$ROOT/tests/ha/ha.sh")
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
XDG=(XDG_CONFIG_HOME="$HA/config" XDG_DATA_HOME="$HA/share" XDG_RUNTIME_DIR="$HA/run")
autoctl() { runuser -u postgres -- env "${XDG[@]}" pg_autoctl "$@"; }
q() { "$PG_BIN/psql" -X -q -tA -d "postgresql://postgres@127.0.0.1:$1/postgres?connect_timeout=1" -c "$2"; }

"${ha[@]}" up >/dev/null
primary() { local p; for p in "${PORTS[@]}"; do [[ $(q "$p" "SELECT pg_is_in_recovery()" 2>/dev/null) == f ]] && { echo "$p"; return; }; done; return 1; }
# The standbys' node numbers (node1 is on the first port, and so on).
standby_nodes() {
    local i p
    p=$(primary)
    for i in "${!PORTS[@]}"; do [[ ${PORTS[$i]} == "$p" ]] || echo $((i + 1)); done
}
wait_until() { for _ in $(seq 240); do eval "$1" >/dev/null 2>&1 && return 0; sleep 0.25; done; echo "timed out: $1" >&2; return 1; }
# One primary, every other node a secondary. (The state is read whole first: grep -q closing
# the pipe early would fail it, pipefail.)
all_healthy() {
    local state
    state=$("${ha[@]}" status)
    [[ $(grep -c ' secondary *| *secondary' <<<"$state") == $((${#PORTS[@]} - 1)) ]] &&
        grep -q ' primary *| *primary' <<<"$state"
}
# With two standbys the monitor wants one of them to confirm each commit
# (number-sync-standbys 1); it refuses to leave fewer standbys in the quorum than that
# needs, so the setting goes down before their quorum and up after it. The monitor takes
# one change at a time: each waits for the nodes to settle (the primary applies each).
# (pg_autoctl 2.0 logs a failed get_nodes call after a change and makes it anyway: the
# monitor is asked after.)
sync_standbys() {
    ((${#PORTS[@]} > 2)) || return 0
    all_healthy || return 1
    local pgdata
    pgdata=$HA/node$(standby_nodes | head -1)
    autoctl set formation number-sync-standbys "$1" --pgdata "$pgdata" >/dev/null 2>&1 || true
    [[ $(autoctl get formation number-sync-standbys --pgdata "$pgdata" 2>/dev/null) == "$1" ]]
}
quorum() { # node, true|false
    all_healthy || return 1
    autoctl set node replication-quorum "$2" --pgdata "$HA/node$1" >/dev/null 2>&1
}

mode() {
    local standby
    case $1 in
        sync)
            "${ha[@]}" revive >/dev/null
            wait_until all_healthy
            for standby in $(standby_nodes); do
                wait_until "quorum $standby true"
            done
            wait_until 'sync_standbys 1'
            wait_until '[[ -n $(q "$(primary)" "SHOW synchronous_standby_names") ]]'
            ;;
        async)
            wait_until 'sync_standbys 0'
            for standby in $(standby_nodes); do
                wait_until "quorum $standby false"
            done
            wait_until '[[ -z $(q "$(primary)" "SHOW synchronous_standby_names") ]]'
            ;;
        single)
            for standby in $(standby_nodes); do
                autoctl stop --pgdata "$HA/node$standby" >/dev/null
                wait_until '! q '"${PORTS[$((standby - 1))]}"' "SELECT 1"'
            done
            wait_until '[[ -z $(q "$(primary)" "SHOW synchronous_standby_names") ]]'
            ;;
    esac
}

declare -A rate
for round in 1 2; do
    for m in sync async single; do
        mode "$m"
        say "round $round: $m (primary on port $(primary), synchronous_standby_names '$(q "$(primary)" "SHOW synchronous_standby_names")')"
        PGPLACE_ADMIN_URL="postgresql://postgres@127.0.0.1:$(primary)/postgres" PG_BIN="$PG_BIN" \
            GATEWAY_BIN="${GATEWAY_BIN:-$ROOT/target/release/pgplace-gateway}" \
            bash "$ROOT/tests/bench/gateway.sh" --only place --seconds "$SECONDS_PER_PHASE" >"$HA/bench-$m-$round.log" 2>&1
        rate[$m,$round]=$(grep -m1 'placements/s' "$HA/bench-$m-$round.log" | awk -F'|' '{ print $4 }' | awk '{ print $1 }')
        echo "  ${rate[$m,$round]} placements/s"
    done
done
mode sync

say "recovery over $FAILOVERS failovers"
times=()
for i in $(seq "$FAILOVERS"); do
    wait_until all_healthy
    hosts=$(printf '127.0.0.1:%s,' "${PORTS[@]}")
    out=$(PGPLACE_TEST_HA_GATEWAYS=127.0.0.1:8081,127.0.0.1:8082 \
        PGPLACE_TEST_HA_DATABASE="postgresql://postgres@${hosts%,}/pgplace?target_session_attrs=read-write&connect_timeout=2" \
        PGPLACE_TEST_HA_KILL="$(printf '%q ' "${ha[@]}")kill-primary" \
        cargo test -q -p pgplace-tests --test fleet -- --ignored --nocapture --exact \
            ha_failover::nothing_acknowledged_is_lost_when_the_primary_dies 2>&1) ||
        { echo "$out" >&2; exit 1; }
    t=$(grep -oP 'first acknowledged placement after the first error: Some\(\K[0-9.]+' <<<"$out")
    echo "  failover $i: ${t} s"
    times+=("$t")
    "${ha[@]}" revive >/dev/null
done

echo
echo "| measure | round 1 | round 2 |"
echo "|---|---|---|"
if ((${#PORTS[@]} > 2)); then
    declare -A label=([sync]="$((${#PORTS[@]} - 1)) standbys, one synchronous (ANY 1)" [async]="$((${#PORTS[@]} - 1)) asynchronous standbys" [single]="the standbys stopped (the primary alone)")
else
    declare -A label=([sync]="a synchronous standby" [async]="an asynchronous standby" [single]="the standby stopped (the primary alone)")
fi
for m in sync async single; do
    echo "| board.place, 1 gateway, 64 clients, ${label[$m]} | ${rate[$m,1]}/s | ${rate[$m,2]}/s |"
done
# What a synchronous standby costs, split: an asynchronous standby costs its CPU alone
# (replay, WAL sender and receiver on the same cores), the synchronous one that and the wait.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
for pair in "sync single the synchronous standby / the primary alone (target ≥ 0.85x)" \
    "async single the standby's CPU: asynchronous / alone" \
    "sync async the wait: synchronous / asynchronous"; do
    read -r a b what <<<"$pair"
    echo "| $what | $(ratio "${rate[$a,1]}" "${rate[$b,1]}") | $(ratio "${rate[$a,2]}" "${rate[$b,2]}") |"
done
if ((FAILOVERS > 0)); then
    printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END {
        printf "| kill to the first acknowledged placement, %d failovers | min %.1f s, median %.1f s, max %.1f s | |\n", NR, v[1], v[int((NR + 1) / 2)], v[NR] }'
fi
