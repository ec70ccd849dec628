#!/usr/bin/env bash
# pgplace's developer entry point: `./pgplace.sh help` lists its commands (COMMANDS below).
# Everything it creates lives under .pgplace/ (git-ignored; /var/tmp/pgplace-<hash> when
# the postgres user cannot reach the checkout): the cluster's data, its
# socket and log, the demo user's token, the gateway's log and pid.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BIN/pg_config
PGXS_TEST=/usr/lib/postgresql/15/lib/pgxs/src/test
export PGHOST=127.0.0.1 PGPORT=${PGPLACE_PORT:-54329} PGUSER=postgres

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Every command and what it does, one line each: `help` prints them, the usage line names them.
COMMANDS=(
    "up|set everything up and run pgplace: the local cluster with the extension, the demo board, the gateway; prints the URL to open"
    "test|the whole test suite, every layer (what CI runs)"
    "status|what runs where: the cluster, the gateway, their URLs and versions"
    "psql|psql on the pgplace database (further arguments go to psql)"
    "stop|stop the gateway and the local cluster"
    "soak|the long fault soak: gateways behind nginx through kills and restarts (--minutes, --sessions, --rate, --fault-every)"
    "ha|pg_auto_failover with three nodes, four gateways and nginx: ha up | status | kill-primary | revive | switchover | report | down"
    "bench|the extension's benchmark beside plain SQL, then bench-feed"
    "bench-feed|what watching a table costs its writers, beside PgQ and a wal2json slot"
    "bench-groups|place_many by streams of groups: what the database allows the gateways' group commit"
    "bench-history|time travel and history queries on a board with 1,000,000 placements"
    "bench-sessions|what logged session tables cost the gateway's session writes"
    "bench-cliff|placements while another session holds an old snapshot, window by window"
    "bench-gateway|the gateway under load: placements, delivery, waiting polls, lists, regions (--only ...)"
    "bench-peers|pgplace beside Redis, nginx and Nchan, in one run"
    "bench-page|the web page in headless Chromium: time to the first full board, frame times while panning under placements"
    "bench-ha|what a synchronous standby costs board.place, and how long failovers take"
    "restart-cluster [immediate]|restart the local cluster (what the fault tests do; immediate: as after a crash, WAL not yet flushed is lost)"
    "help|this list"
)

# Where the cluster lives: .pgplace/ in the project, unless the postgres user cannot reach
# the project (a checkout under /root, say), then a directory in /var/tmp named after it.
# A cluster that already exists in either place keeps its place.
choose_state_dir() {
    local private=/var/tmp/pgplace-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)
    STATE=$ROOT/.pgplace
    if [[ ! -f $STATE/data/PG_VERSION ]] &&
        { [[ -f $private/data/PG_VERSION ]] || ! runuser -u postgres -- test -x "$ROOT" 2>/dev/null; }; then
        STATE=$private
    fi
    DATA=$STATE/data LOG=$STATE/postgres.log RUN=$STATE/run
    # A Unix socket path is limited to 107 bytes; a deep checkout puts its socket in /tmp.
    if ((${#RUN} > 80)); then
        RUN=/tmp/pgplace-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)
    fi
}
DB_URL="postgresql://postgres@$PGHOST:$PGPORT/pgplace"
# The superuser URL the tests and benchmarks are given (they make databases of their own).
ADMIN_URL="postgresql://postgres@$PGHOST:$PGPORT/postgres"
# The gateway of `up` logs in as its own role, a member of pgplace_player (sql/roles.sql),
# not as the superuser: what it may do is what roles.sql grants a gateway. No password:
# the local cluster trusts loopback.
GATEWAY_ROLE=pgplace_gateway
GATEWAY_DB_URL="postgresql://$GATEWAY_ROLE@$PGHOST:$PGPORT/pgplace"
GATEWAY_LISTEN=${PGPLACE_LISTEN:-127.0.0.1:8080}

as_postgres() { runuser -u postgres -- "$@"; }
psql_q() { PGOPTIONS="-c client_min_messages=warning" "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }

# Installs those of the Debian packages named that are missing (one apt run).
install_packages() {
    local missing=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    if ((${#missing[@]})); then
        say "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

install_missing_packages() {
    install_packages postgresql-15 postgresql-server-dev-15 postgresql-client-15 libclang-dev clang sudo curl nginx
    if [[ $(cargo pgrx --version 2>/dev/null) != *0.18.1* ]]; then
        say "installing cargo-pgrx 0.18.1 (about 5 minutes)"
        cargo install cargo-pgrx --version 0.18.1 --locked
    fi
    if ! grep -qs '^pg15' "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
        cargo pgrx init --pg15 "$PG_CONFIG" >/dev/null
    fi
}

install_extension() {
    say "building and installing the pgplace extension (release)"
    (cd "$ROOT/extension" && cargo pgrx install --release --pg-config "$PG_CONFIG")
    test -f "$("$PG_CONFIG" --sharedir)/extension/pgplace.control"
}

# An older install script (tests/upgrade/pgplace--<version>.sql) into the extension directory,
# for the benchmarks' before/after: releases ship only the newest one.
install_old_schema() {
    local script="$ROOT/tests/upgrade/pgplace--$1.sql"
    [[ -f $script ]] || { echo "no install script of version $1 in tests/upgrade/" >&2; exit 2; }
    cp "$script" "$("$PG_CONFIG" --sharedir)/extension/"
}

# The servers' ports lie in Linux's range of ephemeral ports (32768-60999): a test's
# outgoing connection can hold one just when a server starts (the HA monitor once failed
# to bind 54340 so). Reserved where this may write the setting (root); $1: ports, commas.
reserve_ports() {
    local setting=/proc/sys/net/ipv4/ip_local_reserved_ports current
    current=$(cat "$setting" 2>/dev/null) || return 0
    echo "${current:+$current,}$1" >"$setting" 2>/dev/null || true
}

start_cluster() {
    mkdir -p "$STATE" && chmod o+x "$STATE"
    reserve_ports "$PGPORT"
    if [[ ! -f $DATA/PG_VERSION ]]; then
        say "creating the local cluster in $DATA (trust authentication, loopback only)"
        mkdir -p "$DATA" && chown postgres:postgres "$DATA"
        as_postgres "$PG_BIN/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
        cat >>"$DATA/postgresql.conf" <<EOF
# pgplace local cluster
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$RUN'
max_connections = 400
shared_buffers = 512MB
EOF
    fi
    # Prepared transactions (a test prepares a watched write); a cluster made before lacks it.
    grep -qs '^max_prepared_transactions' "$DATA/postgresql.conf" ||
        echo "max_prepared_transactions = 10" >>"$DATA/postgresql.conf"
    # A crash recovery first fsyncs every file of the cluster, one by one; the suite leaves
    # a database per test (60,000 files), and that took 20 s here and over 30 s in CI.
    # syncfs (Linux) syncs the file system at once.
    grep -qs '^recovery_init_sync_method' "$DATA/postgresql.conf" ||
        echo "recovery_init_sync_method = syncfs" >>"$DATA/postgresql.conf"
    mkdir -p "$RUN" && chown postgres:postgres "$RUN"
    touch "$LOG" && chown postgres:postgres "$LOG"
    if as_postgres "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        # A freshly installed library is only loaded by new backends; restart to be sure.
        as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -m fast restart >/dev/null || explain_cluster_failure
    else
        as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w start >/dev/null || explain_cluster_failure
    fi
}

# When the cluster does not start, the log's last words and the disk's free space go to
# stderr, so that a CI run that only shows the output says why. Returns failure.
explain_cluster_failure() {
    echo "the cluster did not start; the end of its log ($LOG):" >&2
    grep -v 'the database system is \(starting up\|shutting down\)' "$LOG" | tail -n 30 >&2
    df -h "$DATA" >&2
    return 1
}

setup() {
    install_missing_packages
    choose_state_dir
    install_extension
    start_cluster
}

build_gateway() {
    say "building the gateway (release)"
    (cd "$ROOT" && cargo build --release -p pgplace-gateway --quiet)
}

stop_gateway() {
    local pid
    pid=$(cat "$STATE/gateway.pid" 2>/dev/null) || return 0
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$STATE/gateway.pid"
}

start_gateway() {
    stop_gateway
    say "starting the gateway on http://$GATEWAY_LISTEN/"
    # Visitors play on the demo board as guests (PGPLACE_GUEST_BOARDS= for none).
    PGPLACE_DATABASE_URL=$GATEWAY_DB_URL PGPLACE_LISTEN=$GATEWAY_LISTEN \
        PGPLACE_GUEST_BOARDS=${PGPLACE_GUEST_BOARDS-demo} \
        nohup "$ROOT/target/release/pgplace-gateway" >"$STATE/gateway.log" 2>&1 &
    echo $! >"$STATE/gateway.pid"
    for _ in $(seq 100); do
        curl -fsS "http://$GATEWAY_LISTEN/readyz" >/dev/null 2>&1 && return 0
        kill -0 "$(cat "$STATE/gateway.pid")" 2>/dev/null || break
        sleep 0.1
    done
    cat "$STATE/gateway.log" >&2
    echo "the gateway did not start (log: $STATE/gateway.log)" >&2
    return 1
}

cmd_up() {
    setup
    build_gateway
    psql_q -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'pgplace'" | grep -q 1 ||
        psql_q -d postgres -c "CREATE DATABASE pgplace"
    psql_q -d pgplace -c "CREATE EXTENSION IF NOT EXISTS pgplace" -c "ALTER EXTENSION pgplace UPDATE"
    # The grants, again after every update (extension/README.md, "Roles"), and the gateway's login role.
    psql_q -d pgplace -f "$ROOT/sql/roles.sql"
    psql_q -d pgplace -v role="$GATEWAY_ROLE" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN IN ROLE pgplace_player', :'role')
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = :'role') \gexec
SELECT format('GRANT pgplace_player TO %I', :'role')
WHERE NOT pg_catalog.pg_has_role(:'role', 'pgplace_player', 'MEMBER') \gexec
SQL
    local token
    token=$(psql_q -d pgplace -tA -f "$ROOT/sql/demo.sql")
    [[ -n $token ]] && (umask 077 && echo "$token" >"$STATE/demo-token")
    # A token is shown once, when its user is made: only a file this tree wrote holds it.
    local demo_token="token in $STATE/demo-token"
    [[ -f $STATE/demo-token ]] ||
        demo_token="its token was shown once, when it was made; a new user: SELECT * FROM place.create_user('you');"
    start_gateway
    cat <<EOF

pgplace is running.
  open:       http://$GATEWAY_LISTEN/  (Play as a guest on the demo board, or sign in with the demo token)
  JSON-RPC:   curl -d '{"jsonrpc":"2.0","method":"board.list","id":1}' http://$GATEWAY_LISTEN/jsonrpc
  gateway:    logged in as role $GATEWAY_ROLE (member of pgplace_player); log in $STATE/gateway.log
  database:   $DB_URL
  psql:       psql "$DB_URL"
  demo board: SELECT * FROM place.boards WHERE name = 'demo';
  demo user:  'demo', $demo_token
  place:      SELECT * FROM place.place((SELECT id FROM place.boards WHERE name = 'demo'), 10, 20, 5, (SELECT id FROM place.users WHERE name = 'demo'));
  stop:       ./pgplace.sh stop
EOF
}

cmd_test() {
    setup
    local out=$ROOT/target/test-results
    rm -rf "$out" && mkdir -p "$out" && chmod -R o+rwx "$out"
    say "unit and property tests (pgplace-core, gateway)"
    cargo test -p pgplace-core -p pgplace-gateway --quiet
    say "SQL tests (pg_regress)"
    "$PGXS_TEST/regress/pg_regress" --inputdir="$ROOT/tests/regress" --outputdir="$out/regress" \
        --dbname=pgplace_regress --load-extension=pgplace --bindir="$PG_BIN" \
        --schedule="$ROOT/tests/regress/schedule"
    say "concurrency tests (isolation specs)"
    "$PGXS_TEST/isolation/pg_isolation_regress" --inputdir="$ROOT/tests/isolation" \
        --outputdir="$out/isolation" --dbname=pgplace_isolation --load-extension=pgplace \
        --bindir="$PG_BIN" $(cd "$ROOT/tests/isolation/specs" && ls *.spec | sed 's/\.spec$//' | sort)
    say "extension update paths (ALTER EXTENSION pgplace UPDATE)"
    PSQL="$PG_BIN/psql" PG_CONFIG="$PG_CONFIG" \
        PGPLACE_ADMIN_URL="$ADMIN_URL" bash "$ROOT/tests/upgrade/run.sh"
    say "the README's SQL and sql/examples.sql, run as written"
    PSQL="$PG_BIN/psql" PGPLACE_ADMIN_URL="$ADMIN_URL" bash "$ROOT/tests/examples/run.sh"
    say "client tests (real connections; gateway processes behind nginx)"
    # Clients the suite did not write: Python's urllib and http.client, Java's HttpURLConnection.
    command -v python3 >/dev/null || install_packages python3
    command -v java >/dev/null || install_packages default-jdk-headless
    cargo build -p pgplace-gateway --quiet
    # The restart tests restart this cluster with this command.
    PGPLACE_TEST_ADMIN_URL="$ADMIN_URL" \
        PGPLACE_TEST_PG_RESTART="$(printf %q "$ROOT/pgplace.sh") restart-cluster" \
        GATEWAY_BIN="$ROOT/target/debug/pgplace-gateway" \
        cargo test -p pgplace-tests
    say "high availability: a planned switchover and a killed primary under load (pg_auto_failover, tests/ha/)"
    local ha=(env ROOT="$ROOT" PG_BIN="$PG_BIN" STATE="$STATE" bash "$ROOT/tests/ha/ha.sh")
    PGPLACE_HA_GATEWAY_BIN="$ROOT/target/debug/pgplace-gateway" "${ha[@]}" up
    local ha_status=0
    PGPLACE_TEST_HA_GATEWAYS=127.0.0.1:8081,127.0.0.1:8082 \
        PGPLACE_TEST_HA_PLACER_GATEWAYS=127.0.0.1:8083,127.0.0.1:8084 \
        PGPLACE_TEST_HA_DATABASE="postgresql://postgres@127.0.0.1:54341,127.0.0.1:54342,127.0.0.1:54343/pgplace?target_session_attrs=read-write&connect_timeout=2" \
        PGPLACE_TEST_HA_KILL="${ha[*]} kill-primary" \
        PGPLACE_TEST_HA_SWITCHOVER="${ha[*]} switchover" \
        cargo test -p pgplace-tests --test fleet -- --ignored --nocapture --test-threads=1 ha_commit:: ha_durable:: ha_failover:: ha_standby_required:: || ha_status=$?
    if ((ha_status != 0)); then
        say "the HA tests failed: the monitor's events and the setup's logs"
        "${ha[@]}" report || true
    fi
    "${ha[@]}" down
    ((ha_status == 0)) || return "$ha_status"
    say "rpc.discover against the OpenRPC meta-schema, and every method's example called"
    GATEWAY_BIN="$ROOT/target/debug/pgplace-gateway" PSQL="$PG_BIN/psql" \
        PGPLACE_ADMIN_URL="$ADMIN_URL" \
        bash "$ROOT/tests/openrpc/run.sh"
    say "fuzzing the gateway's parsers (cargo fuzz, ${FUZZ_SECONDS:-60} s per target)"
    bash "$ROOT/tests/fuzz/run.sh"
    say "containers (docker/: built and run with podman)"
    bash "$ROOT/tests/container/run.sh"
    say "web page tests (headless Chromium)"
    cargo build -p pgplace-gateway --quiet
    GATEWAY_BIN="$ROOT/target/debug/pgplace-gateway" PSQL="$PG_BIN/psql" \
        PGPLACE_ADMIN_URL="$ADMIN_URL" \
        bash "$ROOT/tests/browser/run.sh"
}

# pg_auto_failover, three nodes, four gateways and nginx (tests/ha/ha.sh):
# ./pgplace.sh ha up | status | kill-primary | revive | switchover | down
cmd_ha() {
    choose_state_dir
    if [[ ${1:-} == up ]]; then
        install_missing_packages
        install_extension
    fi
    ROOT=$ROOT PG_BIN=$PG_BIN STATE=$STATE bash "$ROOT/tests/ha/ha.sh" "$@"
}

# What synchronous replication costs board.place, and how long failovers take (tests/ha/bench.sh).
cmd_bench_ha() {
    choose_state_dir
    install_missing_packages
    install_extension
    ROOT=$ROOT PG_BIN=$PG_BIN STATE=$STATE bash "$ROOT/tests/ha/bench.sh"
}

# The long fault soak: ./pgplace.sh soak [--minutes 30 --sessions 5000 --rate 500 --fault-every 5]
cmd_soak() {
    setup
    build_gateway
    (cd "$ROOT" && cargo build --release -p pgplace-tests --bin soak --quiet)
    PGPLACE_TEST_ADMIN_URL="$ADMIN_URL" \
        PGPLACE_TEST_PG_RESTART="$(printf %q "$ROOT/pgplace.sh") restart-cluster" \
        GATEWAY_BIN="$ROOT/target/release/pgplace-gateway" \
        "$ROOT/target/release/soak" "$@"
}

cmd_bench() {
    setup
    PGPLACE_ADMIN_URL="$ADMIN_URL" \
        PG_BIN="$PG_BIN" bash "$ROOT/tests/bench/run.sh"
    cmd_bench_feed
}

# What watching a table costs its writers, beside PgQ and a wal2json slot (tests/bench/feed.sh).
cmd_bench_feed() {
    setup
    install_packages postgresql-15-pgq3 postgresql-15-wal2json
    # The wal2json column needs wal_level = logical: the whole run has it (as the issue's
    # figures did), and the cluster goes back to its setting after (PGPLACE_FEED_LOGICAL=0:
    # leave it alone, without that column).
    local logical=${PGPLACE_FEED_LOGICAL:-1}
    # Some builds (this machine's 15.18) allow only the output plugins listed in
    # output_plugin_libraries.
    local plugins
    plugins=$(psql_q -d postgres -tA -c "SELECT count(*) FROM pg_settings WHERE name = 'output_plugin_libraries'")
    if ((logical)); then
        psql_q -d postgres -c "ALTER SYSTEM SET wal_level = logical"
        ((plugins)) && psql_q -d postgres -c "ALTER SYSTEM SET output_plugin_libraries = 'wal2json'"
        cmd_restart_cluster >/dev/null
    fi
    local status=0
    PGPLACE_ADMIN_URL="$ADMIN_URL" \
        PG_BIN="$PG_BIN" bash "$ROOT/tests/bench/feed.sh" || status=$?
    if ((logical)); then
        psql_q -d postgres -c "ALTER SYSTEM RESET wal_level"
        ((plugins)) && psql_q -d postgres -c "ALTER SYSTEM RESET output_plugin_libraries"
        cmd_restart_cluster >/dev/null
    fi
    return $status
}

# What the database allows the gateways' group commit: place_many by S streams of groups of G
# (tests/bench/groups.sh; PGPLACE_GROUPS="1x28 2x14 ...").
cmd_bench_groups() {
    setup
    PGPLACE_ADMIN_URL="$ADMIN_URL" \
        PG_BIN="$PG_BIN" bash "$ROOT/tests/bench/groups.sh"
}

# Placements while another session holds an old snapshot: ./pgplace.sh bench-cliff
# (PGPLACE_CLIFF_SECONDS, PGPLACE_CLIFF_WINDOW).
cmd_bench_cliff() {
    setup
    [[ -z ${PGPLACE_CLIFF_VERSION:-} ]] || install_old_schema "$PGPLACE_CLIFF_VERSION"
    PGPLACE_ADMIN_URL="$ADMIN_URL" \
        PG_BIN="$PG_BIN" bash "$ROOT/tests/bench/cliff.sh"
}

# PGPLACE_BENCH_SCHEMA=0.4.0: an older schema (its install script from tests/upgrade/, served
# by this library as that version was), for a before/after in one session.
# What logged session tables cost the gateway's session writes (tests/bench/sessions.sh).
cmd_bench_sessions() {
    setup
    PGPLACE_ADMIN_URL="$ADMIN_URL" \
        PG_BIN="$PG_BIN" bash "$ROOT/tests/bench/sessions.sh"
}

cmd_bench_history() {
    setup
    local version=""
    if [[ -n ${PGPLACE_BENCH_SCHEMA:-} ]]; then
        install_old_schema "$PGPLACE_BENCH_SCHEMA"
        version=" VERSION '$PGPLACE_BENCH_SCHEMA'"
    fi
    psql_q -d postgres -c "DROP DATABASE IF EXISTS pgplace_bench_history WITH (FORCE)" -c "CREATE DATABASE pgplace_bench_history"
    psql_q -d pgplace_bench_history -c "CREATE EXTENSION pgplace$version"
    "$PG_BIN/psql" -X -d pgplace_bench_history -f "$ROOT/tests/bench/history.sql"
    psql_q -d postgres -c "DROP DATABASE pgplace_bench_history WITH (FORCE)"
}

cmd_bench_gateway() {
    setup
    [[ -z ${PGPLACE_BENCH_SCHEMA:-} ]] || install_old_schema "$PGPLACE_BENCH_SCHEMA"
    build_gateway
    PGPLACE_ADMIN_URL="$ADMIN_URL" PG_BIN="$PG_BIN" \
        GATEWAY_BIN="$ROOT/target/release/pgplace-gateway" bash "$ROOT/tests/bench/gateway.sh" "$@"
}

# pgplace beside Redis (Lua placements), nginx (a static snapshot) and Nchan (long-poll
# fan-out), each in one run.
cmd_bench_peers() {
    setup
    install_packages redis-server nginx libnginx-mod-nchan
    build_gateway
    PGPLACE_ADMIN_URL="$ADMIN_URL" PG_BIN="$PG_BIN" \
        GATEWAY_BIN="$ROOT/target/release/pgplace-gateway" bash "$ROOT/tests/bench/gateway.sh" --only peers "$@"
    PGPLACE_ADMIN_URL="$ADMIN_URL" PG_BIN="$PG_BIN" \
        GATEWAY_BIN="$ROOT/target/release/pgplace-gateway" bash "$ROOT/tests/bench/gateway.sh" --only fanout "$@"
}

cmd_bench_page() {
    setup
    build_gateway
    PGPLACE_ADMIN_URL="$ADMIN_URL" PSQL="$PG_BIN/psql" \
        GATEWAY_BIN="$ROOT/target/release/pgplace-gateway" bash "$ROOT/tests/browser/bench.sh"
}

# The restart the fault tests inflict (PGPLACE_TEST_PG_RESTART): fast (a clean shutdown), or
# immediate (every server process quits at once, so what WAL was not yet written is lost,
# and the start recovers as after a crash). If the cluster does not come back, says why
# (explain_cluster_failure), then starts it once more.
cmd_restart_cluster() {
    local mode=${1:-fast}
    case $mode in
        fast | immediate) ;;
        *) echo "usage: ./pgplace.sh restart-cluster [fast|immediate]" >&2; exit 2 ;;
    esac
    choose_state_dir
    # -t: a crash recovery (immediate) on a slow disk can take longer than pg_ctl's 60 s.
    as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 300 -m "$mode" restart && return 0
    explain_cluster_failure || true
    echo "starting it once more in 2 s" >&2
    sleep 2
    as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 300 start
}

cmd_stop() {
    choose_state_dir
    stop_gateway
    if [[ -f $DATA/PG_VERSION ]] && as_postgres "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -w -m fast stop >/dev/null
        say "stopped the local cluster"
    else
        say "nothing is running"
    fi
}

cmd_help() {
    echo "usage: $0 <command> [arguments]"
    local entry
    for entry in "${COMMANDS[@]}"; do
        printf '  %-16s %s\n' "${entry%%|*}" "${entry#*|}"
    done
    echo "Everything it makes lives under $STATE (the cluster's data and log, the gateway's log)."
}

# What runs where: the cluster (its port, versions, the extension in pgplace) and the gateway
# (its pid, URL and whether it answers).
cmd_status() {
    choose_state_dir
    if [[ -f $DATA/PG_VERSION ]] && as_postgres "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        local server extension
        server=$(psql_q -d postgres -tAc "SHOW server_version" 2>/dev/null || echo "not answering")
        extension=$(psql_q -d pgplace -tAc "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'pgplace'" 2>/dev/null || true)
        echo "cluster:   running, PostgreSQL $server on $PGHOST:$PGPORT (data $DATA, log $LOG)"
        echo "database:  $DB_URL (extension pgplace ${extension:-not installed}; the installed build is $(grep -oP "default_version = '\K[^']+" "$($PG_CONFIG --sharedir)/extension/pgplace.control" 2>/dev/null || echo none))"
    else
        echo "cluster:   not running (data $DATA)"
    fi
    local pid
    pid=$(cat "$STATE/gateway.pid" 2>/dev/null || true)
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        local ready="not ready"
        curl -fsS "http://$GATEWAY_LISTEN/readyz" >/dev/null 2>&1 && ready="ready"
        echo "gateway:   running (pid $pid), http://$GATEWAY_LISTEN/ $ready (log $STATE/gateway.log)"
    else
        echo "gateway:   not running (./pgplace.sh up starts it)"
    fi
}

case "${1:-}" in
    up) cmd_up ;;
    test) cmd_test ;;
    bench) cmd_bench ;;
    bench-feed) cmd_bench_feed ;;
    bench-groups) cmd_bench_groups ;;
    soak) shift; cmd_soak "$@" ;;
    bench-gateway) shift; cmd_bench_gateway "$@" ;;
    bench-history) cmd_bench_history ;;
    bench-sessions) cmd_bench_sessions ;;
    bench-cliff) cmd_bench_cliff ;;
    bench-page) cmd_bench_page ;;
    bench-peers) shift; cmd_bench_peers "$@" ;;
    ha) shift; cmd_ha "$@" ;;
    bench-ha) cmd_bench_ha ;;
    stop) cmd_stop ;;
    restart-cluster) shift; cmd_restart_cluster "$@" ;;
    psql) shift; exec "$PG_BIN/psql" -d pgplace "$@" ;;
    status) cmd_status ;;
    help | -h | --help) choose_state_dir; cmd_help ;;
    *) choose_state_dir; cmd_help >&2; exit 2 ;;
esac
