#!/usr/bin/env bash
# A local high-availability setup on pg_auto_failover (./pgplace.sh ha up | status |
# kill-primary | revive | switchover | down): a monitor, three PostgreSQL nodes (a primary and
# two standbys, one of which must confirm every commit: number-sync-standbys 1), two
# gateways on the nodes' multi-host connection string, nginx in front of the gateways.
#
# Why three: with one standby pg_auto_failover (number-sync-standbys 0, the only setting
# one standby allows) drops synchronous replication whenever it finds no healthy standby,
# and version 2.0 (Debian 12's) can do so on the old primary in the middle of a planned
# switchover, while its standby is being promoted: the old primary then acknowledges commits
# that the new one never gets, until the demote timeout stops it (pg_auto_failover issue
# #774, fixed upstream in 2026; our switchover test lost acknowledged placements to it once
# in about ten CI runs). With two standbys and one required, pg_auto_failover never drops
# synchronous replication on a primary that loses its standbys: COMMITs wait instead. Only
# a newly promoted primary runs without it until a standby has joined it, which the
# gateways' pgplace.require_synchronous_standby covers (setup_database).
# Called by pgplace.sh, which sets ROOT, PG_BIN and STATE and has installed the extension.
set -euo pipefail

: "${ROOT:?}" "${PG_BIN:?}" "${STATE:?}"
HA=$STATE/ha
MONITOR_PORT=${PGPLACE_HA_MONITOR_PORT:-54340}
NODE_PORTS=(${PGPLACE_HA_NODE_PORTS:-54341 54342 54343})
GATEWAY_PORTS=(${PGPLACE_HA_GATEWAY_PORTS:-8081 8082})
# Two more gateways with one placer per board (--placer-url), behind no nginx: the
# recommended setup for several gateways, for the failover test that needs it (set empty:
# none, as bench-ha does).
PLACER_GATEWAY_PORTS=(${PGPLACE_HA_PLACER_GATEWAY_PORTS-8083 8084})
NGINX_PORT=${PGPLACE_HA_NGINX_PORT:-8090}
GATEWAY_ROLE=pgplace_gateway
# The tests run their debug build; by default the release build is made and run.
GATEWAY_BIN=${PGPLACE_HA_GATEWAY_BIN:-}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
# pg_autoctl keeps its state and pid files under XDG directories: the setup's own, not
# the postgres user's, so that `down` removes them all.
XDG=(XDG_CONFIG_HOME="$HA/config" XDG_DATA_HOME="$HA/share" XDG_RUNTIME_DIR="$HA/run")
autoctl() { runuser -u postgres -- env "${XDG[@]}" pg_autoctl "$@"; }
# A pg_autoctl service in the background, in a session of its own (it outlives this shell).
autoctl_service() {
    local log=$1; shift
    setsid runuser -u postgres -- env "${XDG[@]}" nohup pg_autoctl "$@" >>"$log" 2>&1 </dev/null &
}
psql_at() { PGOPTIONS="-c client_min_messages=warning" "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$1" "${@:2}"; }
node_url() { printf 'postgresql://postgres@127.0.0.1:%s/%s' "$1" "${2:-pgplace}"; }
hosts() { local h=() p; for p in "${NODE_PORTS[@]}"; do h+=("127.0.0.1:$p"); done; (IFS=,; echo "${h[*]}"); }
# Connections to whichever node is primary: libpq and tokio-postgres try the hosts in turn.
primary_url() { printf 'postgresql://%s@%s/pgplace?target_session_attrs=read-write&connect_timeout=2' "${1:-postgres}" "$(hosts)"; }

# Waits up to $1 seconds for a command to succeed.
wait_for() {
    local seconds=$1; shift
    for _ in $(seq $((seconds * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
    return 1
}
# One node primary and every other one a standby, as the monitor sees them (each node's
# reported state equal to its assigned one).
nodes_are_healthy() {
    local state primaries
    state=$(autoctl show state --pgdata "$HA/monitor" 2>/dev/null) || return 1
    primaries=$(grep -cE '^ *node[0-9]+ .* primary *\| *primary *$' <<<"$state" || true)
    ((primaries == 1)) &&
        (($(grep -cE '^ *node[0-9]+ .* secondary *\| *secondary *$' <<<"$state" || true) == ${#NODE_PORTS[@]} - 1))
}
# Waits up to $1 seconds for healthy nodes. A standby's base backup waits for a
# checkpoint: ask for one each second rather than wait for the next timed one.
wait_for_nodes() {
    local primary
    for _ in $(seq "$1"); do
        nodes_are_healthy && return 0
        primary=$(primary_node || echo 1)
        psql_at "$(node_url "${NODE_PORTS[$((primary - 1))]}" postgres)" -c CHECKPOINT >/dev/null 2>&1 || true
        sleep 1
    done
    nodes_are_healthy
}
# Two standbys or more: then one is required of every commit (see the top of this file).
several_standbys() { ((${#NODE_PORTS[@]} > 2)); }
is_running() { [[ -f $1 ]] && kill -0 "$(head -1 "$1")" 2>/dev/null; }
# The sessions of this setup's keepers: each pg_autoctl service runs in a session of its
# own (setsid), which holds its children and its PostgreSQL. Never the caller's session.
keeper_sessions() {
    local pid sid own
    own=$(ps -o sid= -p $$ | tr -d ' ')
    for pid in $(pgrep -f "^pg_autoctl (run|create) .*--pgdata $HA/${1:-}" || true); do
        sid=$(ps -o sid= -p "$pid" | tr -d ' ')
        [[ -n $sid && $sid != "$own" ]] && echo "$sid"
    done
}

install_packages() {
    local missing=()
    for p in postgresql-15-auto-failover pg-auto-failover-cli nginx curl; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if ((${#missing[@]})); then
        say "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

start_monitor() {
    # Its ports reserved, as pgplace.sh's start_cluster reserves the local cluster's (why: there).
    local setting=/proc/sys/net/ipv4/ip_local_reserved_ports ports current
    ports="$MONITOR_PORT,$(IFS=,; echo "${NODE_PORTS[*]}")"
    current=$(cat "$setting" 2>/dev/null) && echo "${current:+$current,}$ports" >"$setting" 2>/dev/null || true
    if [[ ! -f $HA/monitor/PG_VERSION ]]; then
        say "creating the pg_auto_failover monitor on port $MONITOR_PORT"
        autoctl create monitor --pgctl "$PG_BIN/pg_ctl" --pgdata "$HA/monitor" --pgport "$MONITOR_PORT" \
            --hostname 127.0.0.1 --auth trust --no-ssl >>"$HA/monitor.log" 2>&1
        # pg_autoctl listens on every address; with trust authentication, loopback only.
        autoctl config set --pgdata "$HA/monitor" postgresql.listen_addresses 127.0.0.1 >/dev/null
    fi
    autoctl_service "$HA/monitor.log" run --pgdata "$HA/monitor"
    wait_for 30 psql_at "$(node_url "$MONITOR_PORT" pg_auto_failover)" -c "SELECT 1" ||
        { tail -20 "$HA/monitor.log" >&2; echo "the monitor did not start" >&2; exit 1; }
    # A failover within seconds (the defaults take about 30): the monitor checks each node
    # every second and gives up on one after 2 s without an answer.
    psql_at "$(node_url "$MONITOR_PORT" pg_auto_failover)" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
        -c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000" \
        -c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 5000" \
        -c "SELECT pg_reload_conf()" >/dev/null
}

# Node $1 (1-based): created against the monitor on its first start, then run by its keeper.
start_node() {
    local n=$1 port=${NODE_PORTS[$(($1 - 1))]} dir=$HA/node$1
    local monitor="postgres://autoctl_node@127.0.0.1:$MONITOR_PORT/pg_auto_failover?sslmode=disable"
    if [[ -f $dir/PG_VERSION ]]; then
        autoctl_service "$HA/node$n.log" run --pgdata "$dir"
    else
        say "creating PostgreSQL node $n on port $port"
        autoctl_service "$HA/node$n.log" create postgres --pgctl "$PG_BIN/pg_ctl" --pgdata "$dir" \
            --pgport "$port" --listen 127.0.0.1 --hostname 127.0.0.1 --name "node$n" --dbname pgplace \
            --auth trust --no-ssl --monitor "$monitor" --run
    fi
}

setup_database() {
    say "the pgplace extension, its roles and the demo board on the primary"
    local url
    url=$(primary_url)
    psql_at "$url" -c "CREATE EXTENSION IF NOT EXISTS pgplace" -c "ALTER EXTENSION pgplace UPDATE"
    psql_at "$url" -f "$ROOT/sql/roles.sql" >/dev/null
    psql_at "$url" -v role="$GATEWAY_ROLE" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I LOGIN IN ROLE pgplace_player', :'role')
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = :'role') \gexec
SQL
    # With two standbys, nothing acknowledged on one node: the gateways' placements, other
    # writes and reads wait for a synchronous standby also while pg_auto_failover runs a new
    # primary without one (wait_primary). Not with one standby: a primary alone would then
    # refuse every write until the other node is back (extension/README.md, Settings).
    if several_standbys; then
        psql_at "$url" -c "ALTER ROLE $GATEWAY_ROLE SET pgplace.require_synchronous_standby = on"
    fi
    local token
    token=$(psql_at "$url" -tA -f "$ROOT/sql/demo.sql")
    # The token is printed once, when the demo user is made.
    if [[ -n $token ]]; then (umask 077 && echo "$token" >"$HA/demo-token"); fi
}

start_gateways() {
    local i port placer_url
    local ports=("${GATEWAY_PORTS[@]}" "${PLACER_GATEWAY_PORTS[@]}")
    for i in "${!ports[@]}"; do
        port=${ports[$i]}
        is_running "$HA/gateway$((i + 1)).pid" && continue
        placer_url=
        ((i >= ${#GATEWAY_PORTS[@]})) && placer_url=http://127.0.0.1:$port
        say "starting gateway $((i + 1)) on http://127.0.0.1:$port/${placer_url:+ (one placer per board)}"
        # The second of each pair commits its groups before they are durable (--commit
        # asynchronous, waiting for the standby before it answers): a failover meets both
        # kinds.
        PGPLACE_DATABASE_URL=$(primary_url "$GATEWAY_ROLE") PGPLACE_LISTEN=127.0.0.1:$port \
            PGPLACE_TRUSTED_PROXIES=127.0.0.1 PGPLACE_COMMIT=$( ((i % 2 == 1)) && echo asynchronous || echo synchronous) \
            env ${placer_url:+PGPLACE_PLACER_URL=$placer_url} setsid nohup "$GATEWAY_BIN" >>"$HA/gateway$((i + 1)).log" 2>&1 </dev/null &
        echo $! >"$HA/gateway$((i + 1)).pid"
    done
    for port in "${ports[@]}"; do
        wait_for 30 curl -fsS "http://127.0.0.1:$port/readyz" ||
            { echo "the gateway on port $port did not start (logs: $HA/gateway*.log)" >&2; exit 1; }
    done
}

start_nginx() {
    is_running "$HA/nginx.pid" && return 0
    local servers="" port
    for port in "${GATEWAY_PORTS[@]}"; do
        servers+="        server 127.0.0.1:$port max_fails=1 fail_timeout=2s;"$'\n'
    done
    # The pattern of docker/nginx-gateways.conf, on this setup's ports.
    cat >"$HA/nginx.conf" <<EOF
worker_processes 1;
pid $HA/nginx.pid;
error_log $HA/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    upstream pgplace_gateways {
$servers        keepalive 64;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://pgplace_gateways;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_read_timeout 120s;
            proxy_buffering off;
        }
    }
}
EOF
    say "starting nginx on http://127.0.0.1:$NGINX_PORT/"
    nginx -c "$HA/nginx.conf" -p "$HA"
}

primary_node() {
    local n port
    for n in "${!NODE_PORTS[@]}"; do
        port=${NODE_PORTS[$n]}
        [[ $(psql_at "$(node_url "$port" postgres)?connect_timeout=1" -tA -c "SELECT pg_is_in_recovery()" 2>/dev/null) == f ]] &&
            { echo $((n + 1)); return 0; }
    done
    return 1
}

cmd_up() {
    install_packages
    mkdir -p "$HA/run" && chown postgres:postgres "$HA" "$HA/run" && chmod o+x "$STATE"
    is_running "$HA/monitor/postmaster.pid" || start_monitor
    local n
    for n in $(seq "${#NODE_PORTS[@]}"); do
        pgrep -f "pg_autoctl .*--pgdata $HA/node$n( |$)" >/dev/null || start_node "$n"
        if ((n == 1)); then
            wait_for 60 primary_node || { tail -20 "$HA/node1.log" >&2; echo "node 1 did not start" >&2; exit 1; }
        fi
    done
    say "waiting for the other nodes to follow (synchronous replication)"
    wait_for_nodes 180 || { cmd_status >&2; tail -20 "$HA"/node*.log >&2; echo "the standbys did not follow" >&2; exit 1; }
    # One standby's confirmation required of every commit (see the top of this file); a
    # setting of the formation, kept in the monitor.
    # (pg_autoctl 2.0 logs a failed get_nodes call while it does this, and sets it anyway:
    # the monitor is asked after.)
    if several_standbys; then
        autoctl set formation number-sync-standbys 1 --pgdata "$HA/node1" >>"$HA/setup.log" 2>&1 || true
        [[ $(psql_at "$(node_url "$MONITOR_PORT" pg_auto_failover)" -tA \
            -c "SELECT number_sync_standbys FROM pgautofailover.formation WHERE formationid = 'default'") == 1 ]] ||
            { tail -20 "$HA/setup.log" >&2; echo "number-sync-standbys 1 was not set" >&2; exit 1; }
        wait_for_nodes 60 || { cmd_status >&2; echo "the nodes did not apply number-sync-standbys 1" >&2; exit 1; }
    fi
    setup_database
    if [[ -z $GATEWAY_BIN ]]; then
        (cd "$ROOT" && cargo build --release -p pgplace-gateway --quiet)
        GATEWAY_BIN=$ROOT/target/release/pgplace-gateway
    fi
    start_gateways
    start_nginx
    cat <<EOF

pgplace is running on pg_auto_failover.
  open (nginx):  http://127.0.0.1:$NGINX_PORT/
  gateways:      $(for p in "${GATEWAY_PORTS[@]}"; do printf 'http://127.0.0.1:%s/ ' "$p"; done)
  one placer per board (--placer-url): $(for p in "${PLACER_GATEWAY_PORTS[@]}"; do printf 'http://127.0.0.1:%s/ ' "$p"; done)
  database:      $(primary_url)
  monitor:       $(node_url "$MONITOR_PORT" pg_auto_failover)
  state:         ./pgplace.sh ha status
  fail over:     ./pgplace.sh ha kill-primary
  remove it all: ./pgplace.sh ha down
  logs:          $HA/*.log
EOF
}

cmd_status() {
    [[ -d $HA/monitor ]] || { echo "no HA setup (./pgplace.sh ha up)"; return 0; }
    autoctl show state --pgdata "$HA/monitor"
    local primary
    if primary=$(primary_node); then
        echo "primary: node$primary (port ${NODE_PORTS[$((primary - 1))]})"
    else
        echo "primary: none answers read-write"
    fi
    local port
    for port in "${GATEWAY_PORTS[@]}" "${PLACER_GATEWAY_PORTS[@]}"; do
        printf 'gateway 127.0.0.1:%s: %s\n' "$port" "$(curl -fsS --max-time 2 "http://127.0.0.1:$port/readyz" 2>/dev/null || echo down)"
    done
}

# The primary's node vanishes at once: every process of its keeper's session (the keeper,
# the child that would restart PostgreSQL, the postmaster and its backends) is SIGKILLed.
cmd_kill_primary() {
    local n dir pm sessions
    n=$(primary_node) || { echo "no node answers read-write" >&2; exit 1; }
    dir=$HA/node$n
    pm=$(head -1 "$dir/postmaster.pid")
    sessions=$(keeper_sessions "node$n( |$)")
    for sid in $sessions; do pkill -9 -s "$sid"; done
    pkill -9 -P "$pm" 2>/dev/null || true
    kill -9 "$pm" 2>/dev/null || true
    echo "killed node$n (port ${NODE_PORTS[$((n - 1))]}): postmaster $pm and its keeper's session $(echo $sessions)"
}

# Nodes whose keeper is gone (killed) run again: pg_auto_failover rejoins them as standbys.
cmd_revive() {
    local n
    for n in "${!NODE_PORTS[@]}"; do
        n=$((n + 1))
        [[ -f $HA/node$n/PG_VERSION ]] || continue
        if [[ -z $(keeper_sessions "node$n( |$)") ]]; then
            say "node $n runs again"
            start_node "$n"
        fi
    done
}

# A planned switchover: a standby becomes the primary, the primary a standby. A killed
# node runs again first; every node must be healthy before it starts. pg_autoctl waits until
# the monitor says it is done (60 s at most).
cmd_switchover() {
    cmd_revive
    wait_for_nodes 120 || { cmd_status >&2; echo "no healthy primary and standbys to switch over" >&2; exit 1; }
    local before after
    before=$(primary_node) || { echo "no node answers read-write" >&2; exit 1; }
    autoctl perform switchover --pgdata "$HA/node$before" >>"$HA/switchover.log" 2>&1 ||
        { tail -20 "$HA/switchover.log" >&2; echo "the switchover failed" >&2; exit 1; }
    after=$(primary_node) || { echo "no node answers read-write after the switchover" >&2; exit 1; }
    ((after != before)) || { echo "node$before is still the primary" >&2; exit 1; }
    echo "switched over: node$before -> node$after (port ${NODE_PORTS[$((after - 1))]})"
}

# What a failed test leaves to read, on standard output (CI keeps nothing else): the
# monitor's state changes and the end of every log of the setup.
cmd_report() {
    [[ -d $HA/monitor ]] && autoctl show events --count 60 --pgdata "$HA/monitor" 2>&1 || true
    local f
    for f in "$HA"/*.log; do
        [[ -f $f ]] || continue
        echo "--- $f (last 80 lines)"
        tail -n 80 "$f"
    done
}

# Every keeper's session, the gateways and nginx, then the directory.
cmd_down() {
    local f pid
    for f in "$HA"/gateway*.pid "$HA"/nginx.pid; do
        [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null || true
    done
    for sid in $(keeper_sessions); do pkill -9 -s "$sid" 2>/dev/null || true; done
    for f in "$HA"/monitor "$HA"/node*; do
        [[ -f $f/postmaster.pid ]] && kill -9 "$(head -1 "$f/postmaster.pid")" 2>/dev/null || true
    done
    rm -rf "$HA"
    say "removed the HA setup"
}

case ${1:-} in
    up) cmd_up ;;
    status) cmd_status ;;
    kill-primary) cmd_kill_primary ;;
    revive) cmd_revive ;;
    switchover) cmd_switchover ;;
    down) cmd_down ;;
    report) cmd_report ;;
    *) echo "usage: ./pgplace.sh ha up | status | kill-primary | revive | switchover | report | down" >&2; exit 2 ;;
esac
