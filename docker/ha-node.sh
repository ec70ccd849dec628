#!/usr/bin/env bash
# One member of compose.yaml's `ha` profile (docker/README.md, "High availability"), run
# by the `ha` image:
#
#   pgplace-ha secrets   (as root, once before the others) the profile's CA, each member's
#                        certificate and every password, in the secrets volume
#   pgplace-ha monitor   the pg_auto_failover monitor
#   pgplace-ha node      a PostgreSQL node with its keeper: the first becomes the primary
#                        and sets the database up, the next ones its standbys (with two,
#                        the monitor itself makes one of them confirm every commit:
#                        number-sync-standbys 1); with PGPLACE_HA_REQUIRE_STANDBY=1 the
#                        gateways' writes are refused while no standby could confirm
#   pgplace-ha health    the healthcheck of either
#
# Everything a member keeps lives in its volume at $HA: the data directory and
# pg_autoctl's own state (kept under XDG directories), so a container made again from the
# volume goes on as the same node. What they share comes read-only from the secrets volume
# at $SECRETS, which the members (the postgres user) and the gateways (their own user) may
# each read only their part of. Every connection between them is TLS, verified (sslmode
# verify-full, against the profile's CA) and authenticated with scram-sha-256; no password
# is on a command line or in an environment that compose or the engine shows: libpq reads
# them from a password file (PGPASSFILE), psql from its own environment (\getenv).
# The addresses in the hba rules that pg_autoctl writes are the nodes' --hostname, so each
# member has a fixed address (compose.yaml) and gives it as PGPLACE_HA_HOSTNAME: a name
# would need reverse DNS. Each member's certificate names both its address and its
# service's name (PGPLACE_HA_CERT).
set -Eeuo pipefail

HA=/var/lib/postgresql/ha
SECRETS=${PGPLACE_HA_SECRETS:-/run/pgplace-ha}
export PGDATA=$HA/pgdata XDG_CONFIG_HOME=$HA/config XDG_DATA_HOME=$HA/share
# pg_autoctl's pid files: never from an earlier life of this container.
export XDG_RUNTIME_DIR=/tmp/pgplace-ha
MONITOR_HOST=${PGPLACE_HA_MONITOR_HOST:-ha-monitor}
GATEWAY_USER=${PGPLACE_GATEWAY_USER:-pgplace_gateway}

fail() { echo "pgplace-ha: $*" >&2; exit 1; }
need() { [[ -n ${!1:-} ]] || fail "set $1 (see docker/README.md, High availability)"; }
need_file() {
    [[ -r $1 ]] || fail "cannot read $1: the ha-secrets service makes it (see docker/README.md, High availability)"
}
psql_local() { psql -X -q -v ON_ERROR_STOP=1 --no-password -h /var/run/postgresql -p 5432 -U postgres "$@"; }

fresh_runtime_dir() {
    rm -rf "$XDG_RUNTIME_DIR"
    mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
}

# This member's TLS: its certificate and key from the secrets volume, the profile's CA to
# check its peers' (pg_autoctl writes hostssl rules and sslmode=verify-full conninfos).
tls_options() {
    need PGPLACE_HA_CERT
    local cert=$SECRETS/members/$PGPLACE_HA_CERT
    need_file "$SECRETS/ca.crt"
    need_file "$cert.crt"
    need_file "$cert.key"
    TLS=(--ssl-ca-file "$SECRETS/ca.crt" --server-cert "$cert.crt" --server-key "$cert.key"
        --ssl-mode verify-full)
}

monitor() {
    need PGPLACE_HA_HOSTNAME
    tls_options
    need_file "$SECRETS/members/monitor-password"
    fresh_runtime_dir
    if [[ ! -f $HA/created ]]; then
        pg_autoctl create monitor --pgdata "$PGDATA" --pgport 5432 --hostname "$PGPLACE_HA_HOSTNAME" \
            --auth scram-sha-256 "${TLS[@]}"
        # pg_autoctl sets no password; the nodes log in as autoctl_node with this one.
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        PGPLACE_SECRET=$(<"$SECRETS/members/monitor-password") psql_local -d pg_auto_failover <<'SQL'
\getenv password PGPLACE_SECRET
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
    [[ ${PGPLACE_HA_REQUIRE_STANDBY:-0} == [01] ]] ||
        fail "PGPLACE_HA_REQUIRE_STANDBY is '$PGPLACE_HA_REQUIRE_STANDBY', not 0 or 1"
    tls_options
    # libpq reads the monitor's and the replication user's passwords from this file: for
    # pg_autoctl, pg_basebackup, pg_rewind and the standby's walreceiver (the postmaster
    # inherits the variable), so no password is in pg_autoctl's settings or conninfos.
    export PGPASSFILE=$SECRETS/members/pgpass
    need_file "$PGPASSFILE"
    fresh_runtime_dir
    if [[ ! -f $HA/created ]]; then
        pg_autoctl create postgres --pgdata "$PGDATA" \
            --pgport 5432 --hostname "$PGPLACE_HA_HOSTNAME" --name "$PGPLACE_HA_NAME" --dbname pgplace \
            --auth scram-sha-256 "${TLS[@]}" --pg-hba-lan \
            --monitor "postgres://autoctl_node@$MONITOR_HOST:5432/pg_auto_failover?sslmode=verify-full&sslrootcert=$SECRETS/ca.crt"
        # The gateways (and psql) from the project's network, with a password and over TLS
        # only; pg_autoctl opens the network (hostssl too) to the postgres user only. (A
        # standby's copy of this file comes from the primary and may have the rule already.)
        local rule='hostssl pgplace all samenet scram-sha-256 # pgplace clients (docker/ha-node.sh)'
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
    PGPLACE_SUPERUSER=$(<"$SECRETS/members/postgres-password") \
        PGPLACE_REPLICATION=$(<"$SECRETS/members/replication-password") psql_local -d pgplace <<'SQL'
\getenv superuser PGPLACE_SUPERUSER
\getenv replication PGPLACE_REPLICATION
SELECT format('ALTER ROLE postgres PASSWORD %L', :'superuser') \gexec
SELECT format('ALTER ROLE pgautofailover_replicator PASSWORD %L', :'replication') \gexec
SQL
    PGPLACE_GATEWAY_PASSWORD=$(<"$SECRETS/gateway-password") PGPLACE_DB=pgplace \
        /docker-entrypoint-initdb.d/10-pgplace.sh
    # Nothing acknowledged on one node: the gateways' writes wait for a standby's
    # confirmation also while pg_auto_failover runs a new primary without one (wait_primary,
    # extension/README.md, Server settings). Only with standbys to spare: a lone primary
    # would refuse every write.
    if [[ ${PGPLACE_HA_REQUIRE_STANDBY:-0} == 1 ]]; then
        psql_local -d pgplace -v user="$GATEWAY_USER" <<'SQL'
ALTER ROLE :"user" SET pgplace.require_synchronous_standby = on;
SQL
    fi
    touch "$HA/set-up"
}

# The profile's secrets, made once (files that exist are kept; a member's certificate is
# made again within 30 days of its end), in the volume the members mount read-only:
#   ca.crt                      the CA everyone trusts                      root 0644
#   ca/ca.key                   its key: no service but this one reads it   root 0600
#   members/<name>.crt, .key    each member's, for its name and address    postgres 0600
#   members/pgpass              autoctl_node's and the replication user's   postgres 0600
#   members/*-password          the monitor's, the replication user's, the superuser's
#   gateway-password            pgplace_gateway's: the gateways (uid 10001) and the
#                               members (group postgres), who make the role  0440
# PGPLACE_HA_MEMBERS lists the members as name=address; the passwords are random.
secrets() {
    [[ $(id -u) == 0 ]] || fail "pgplace-ha secrets runs as root: it gives each file its owner"
    need PGPLACE_HA_MEMBERS
    local pg_uid pg_gid gw_uid=${PGPLACE_GATEWAY_UID:-10001} work
    pg_uid=$(id -u postgres) pg_gid=$(id -g postgres)
    umask 077
    work=$(mktemp -d)
    install -d -m 0755 -o 0 -g 0 "$SECRETS"
    install -d -m 0700 -o 0 -g 0 "$SECRETS/ca"
    install -d -m 0750 -o 0 -g "$pg_gid" "$SECRETS/members"
    if [[ ! -s $SECRETS/ca.crt || ! -s $SECRETS/ca/ca.key ]]; then
        openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
            -subj "/CN=pgplace ha CA" -keyout "$work/ca.key" -out "$work/ca.crt" \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
            2>/dev/null
        install -m 0600 -o 0 -g 0 "$work/ca.key" "$SECRETS/ca/ca.key"
        install -m 0644 -o 0 -g 0 "$work/ca.crt" "$SECRETS/ca.crt"
        rm -f "$SECRETS"/members/*.crt # signed by a CA that is gone
        echo "pgplace-ha: made the CA ($SECRETS/ca.crt)"
    fi
    local member name address cert
    for member in $PGPLACE_HA_MEMBERS; do
        name=${member%%=*} address=${member#*=}
        [[ $name =~ ^[a-z0-9][a-z0-9.-]*$ && $address =~ ^[0-9a-f.:]+$ ]] ||
            fail "PGPLACE_HA_MEMBERS: '$member' is not name=address"
        cert=$SECRETS/members/$name.crt
        if [[ -s $cert && -s ${cert%.crt}.key ]] &&
            openssl x509 -checkend $((30 * 86400)) -noout -in "$cert" >/dev/null; then
            continue
        fi
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
            -keyout "$work/$name.key" -out "$work/$name.csr" 2>/dev/null
        printf '%s\n' "subjectAltName=DNS:$name,IP:$address" 'basicConstraints=critical,CA:FALSE' \
            'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth,clientAuth' >"$work/$name.ext"
        openssl x509 -req -in "$work/$name.csr" -CA "$SECRETS/ca.crt" -CAkey "$SECRETS/ca/ca.key" \
            -set_serial "0x$(openssl rand -hex 16)" -days 825 -extfile "$work/$name.ext" \
            -out "$work/$name.crt" 2>/dev/null
        install -m 0600 -o "$pg_uid" -g "$pg_gid" "$work/$name.key" "${cert%.crt}.key"
        install -m 0644 -o "$pg_uid" -g "$pg_gid" "$work/$name.crt" "$cert"
        echo "pgplace-ha: made the certificate of $name ($address), valid 825 days"
    done
    local file
    for file in members/monitor-password members/replication-password members/postgres-password gateway-password; do
        [[ -s $SECRETS/$file ]] || openssl rand -hex 24 >"$SECRETS/$file"
    done
    chown "$pg_uid:$pg_gid" "$SECRETS"/members/*-password && chmod 0600 "$SECRETS"/members/*-password
    chown "$gw_uid:$pg_gid" "$SECRETS/gateway-password" && chmod 0440 "$SECRETS/gateway-password"
    # From the files above (printf is bash's own: no command line), replaced in one rename
    # when it changed: a member may be reading it.
    printf '*:*:pg_auto_failover:autoctl_node:%s\n*:*:*:pgautofailover_replicator:%s\n' \
        "$(<"$SECRETS/members/monitor-password")" "$(<"$SECRETS/members/replication-password")" \
        >"$work/pgpass"
    if ! cmp -s "$work/pgpass" "$SECRETS/members/pgpass"; then
        install -m 0600 -o "$pg_uid" -g "$pg_gid" "$work/pgpass" "$SECRETS/members/.pgpass.new"
        mv -f "$SECRETS/members/.pgpass.new" "$SECRETS/members/pgpass"
    fi
    rm -rf "$work"
    echo "pgplace-ha: secrets ready in $SECRETS"
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
    secrets) secrets ;;
    monitor) touch "$HA/monitor"; monitor ;;
    node) node ;;
    health) health ;;
    *) fail "usage: pgplace-ha secrets | monitor | node | health" ;;
esac
