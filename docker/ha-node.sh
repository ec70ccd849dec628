#!/usr/bin/env bash
# One member of compose.yaml's `ha` profile (docker/README.md, "High availability"), run
# as the postgres user by the `ha` image:
#
#   pgplace-ha monitor   the pg_auto_failover monitor
#   pgplace-ha node      a PostgreSQL node with its keeper: the first becomes the primary
#                        and sets the database up, the next one its synchronous standby
#   pgplace-ha health    the healthcheck of either
#
# Everything lives in the volume at $HA: the data directory and pg_autoctl's own state
# (kept under XDG directories), so a container made again from the volume goes on as the
# same node. Authentication is scram-sha-256 everywhere, over TLS with self-signed
# certificates between the engine's members. The addresses in the hba rules that
# pg_autoctl writes are the nodes' --hostname, so each member has a fixed address
# (compose.yaml) and gives it as PGPLACE_HA_HOSTNAME: a name would need reverse DNS.
set -Eeuo pipefail

HA=/var/lib/postgresql/ha
export PGDATA=$HA/pgdata XDG_CONFIG_HOME=$HA/config XDG_DATA_HOME=$HA/share
# pg_autoctl's pid files: never from an earlier life of this container.
export XDG_RUNTIME_DIR=/tmp/pgplace-ha
MONITOR_HOST=${PGPLACE_HA_MONITOR_HOST:-ha-monitor}
GATEWAY_USER=${PGPLACE_GATEWAY_USER:-pgplace_gateway}

fail() { echo "pgplace-ha: $*" >&2; exit 1; }
need() { [[ -n ${!1:-} ]] || fail "set $1 (see docker/README.md, High availability)"; }
psql_local() { psql -X -q -v ON_ERROR_STOP=1 --no-password -h /var/run/postgresql -p 5432 -U postgres "$@"; }

fresh_runtime_dir() {
    rm -rf "$XDG_RUNTIME_DIR"
    mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
}

monitor() {
    need PGPLACE_HA_HOSTNAME
    need PGPLACE_HA_MONITOR_PASSWORD
    fresh_runtime_dir
    if [[ ! -f $HA/created ]]; then
        pg_autoctl create monitor --pgdata "$PGDATA" --pgport 5432 --hostname "$PGPLACE_HA_HOSTNAME" \
            --auth scram-sha-256 --ssl-self-signed
        # pg_autoctl sets no password; the nodes log in as autoctl_node with this one.
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        psql_local -d pg_auto_failover -v password="$PGPLACE_HA_MONITOR_PASSWORD" <<'SQL'
SELECT format('ALTER ROLE autoctl_node PASSWORD %L', :'password') \gexec
-- A failover within seconds (the defaults take about 30): each node checked every second,
-- given up on after 2 s without an answer.
ALTER SYSTEM SET pgautofailover.health_check_period = 1000;
ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000;
ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1;
ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500;
ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000;
ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 5000;
SQL
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
        touch "$HA/created"
    fi
    exec pg_autoctl run --pgdata "$PGDATA"
}

node() {
    need PGPLACE_HA_HOSTNAME
    need PGPLACE_HA_NAME
    need PGPLACE_HA_MONITOR_PASSWORD
    need PGPLACE_HA_REPLICATION_PASSWORD
    need POSTGRES_PASSWORD
    need PGPLACE_GATEWAY_PASSWORD
    fresh_runtime_dir
    if [[ ! -f $HA/created ]]; then
        # A standby's base backup logs in to the primary as the replication user.
        PGPASSWORD=$PGPLACE_HA_REPLICATION_PASSWORD pg_autoctl create postgres --pgdata "$PGDATA" \
            --pgport 5432 --hostname "$PGPLACE_HA_HOSTNAME" --name "$PGPLACE_HA_NAME" --dbname pgplace \
            --auth scram-sha-256 --ssl-self-signed --pg-hba-lan \
            --monitor "postgres://autoctl_node:$PGPLACE_HA_MONITOR_PASSWORD@$MONITOR_HOST:5432/pg_auto_failover?sslmode=require"
        # Used whenever this node (re)joins as a standby.
        pg_autoctl config set --pgdata "$PGDATA" replication.password "$PGPLACE_HA_REPLICATION_PASSWORD" >/dev/null
        # The gateways (and psql) from the project's network, with a password; pg_autoctl
        # opens the network to the postgres user only. (A standby's copy of this file
        # comes from the primary and may have the rule already.)
        local rule='host pgplace all samenet scram-sha-256 # pgplace clients (docker/ha-node.sh)'
        grep -qxF "$rule" "$PGDATA/pg_hba.conf" || echo "$rule" >>"$PGDATA/pg_hba.conf"
        touch "$HA/created"
    fi
    if [[ ! -f $HA/set-up ]]; then
        set_up_if_primary &
    fi
    exec pg_autoctl run --pgdata "$PGDATA"
}

# Once this node serves: if it is the primary (the first node, on its first start), the
# passwords and the pgplace database (docker/initdb-pgplace.sh, as the single-node image
# does); a standby has all that from the primary.
set_up_if_primary() {
    local in_recovery
    for ((i = 0; i < 600; i++)); do
        in_recovery=$(psql_local -d pgplace -tAc 'SELECT pg_is_in_recovery()' 2>/dev/null) || in_recovery=
        case $in_recovery in
            t) touch "$HA/set-up"; return 0 ;;
            f) break ;;
        esac
        sleep 1
    done
    [[ $in_recovery == f ]] || fail "PostgreSQL did not start within 600 s; the database is not set up"
    psql_local -d pgplace -v superuser="$POSTGRES_PASSWORD" -v replication="$PGPLACE_HA_REPLICATION_PASSWORD" <<'SQL'
SELECT format('ALTER ROLE postgres PASSWORD %L', :'superuser') \gexec
SELECT format('ALTER ROLE pgautofailover_replicator PASSWORD %L', :'replication') \gexec
SQL
    PGPLACE_DB=pgplace /docker-entrypoint-initdb.d/10-pgplace.sh
    touch "$HA/set-up"
}

# Healthy: the monitor answers; a node serves, and a primary has pgplace and the gateway's
# role (a standby is healthy while it replays).
health() {
    if [[ -f $HA/monitor ]]; then
        pg_isready -q -h /var/run/postgresql -p 5432 -d pg_auto_failover
        return
    fi
    [[ $(psql_local -d pgplace -v user="$GATEWAY_USER" -tA <<'SQL'
SELECT pg_is_in_recovery()
    OR (EXISTS (SELECT FROM pg_extension WHERE extname = 'pgplace')
        AND EXISTS (SELECT FROM pg_roles WHERE rolname = :'user'))
SQL
    ) == t ]]
}

case ${1:-} in
    monitor) touch "$HA/monitor"; monitor ;;
    node) node ;;
    health) health ;;
    *) fail "usage: pgplace-ha monitor | node | health" ;;
esac
