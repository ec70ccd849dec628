#!/usr/bin/env bash
# Runs once, when the postgres image starts on an empty data directory (the official
# image's /docker-entrypoint-initdb.d): database $PGPLACE_DB (default `pgplace`, made by
# the entrypoint when it is POSTGRES_DB) with CREATE EXTENSION pgplace, sql/roles.sql, a
# login role for the gateway (when PGPLACE_GATEWAY_PASSWORD is set) and, with
# PGPLACE_DEMO=1, the demo board and user of sql/demo.sql (the user's token in
# $PGDATA/pgplace-demo-token, mode 0600: never in the log).
set -Eeuo pipefail

db=${PGPLACE_DB:-${POSTGRES_DB:-pgplace}}
sql_dir=/usr/share/pgplace
psql=(psql -X -q -v ON_ERROR_STOP=1 --no-password --username "${POSTGRES_USER:-postgres}")

# Connect to the maintenance database to make $db if the entrypoint did not.
"${psql[@]}" --dbname postgres -v db="$db" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL

"${psql[@]}" --dbname "$db" -c 'CREATE EXTENSION IF NOT EXISTS pgplace' -f "$sql_dir/roles.sql"

if [[ -n ${PGPLACE_GATEWAY_PASSWORD:-} ]]; then
    # The password never reaches a command line (where ps shows it): psql reads it from its
    # environment, the name goes quoted into SQL as a psql variable.
    "${psql[@]}" --dbname "$db" -v user="${PGPLACE_GATEWAY_USER:-pgplace_gateway}" <<'SQL'
\getenv password PGPLACE_GATEWAY_PASSWORD
SELECT format('CREATE ROLE %I LOGIN', :'user')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I PASSWORD %L', :'user', :'password') \gexec
SELECT format('GRANT pgplace_player TO %I', :'user') \gexec
SQL
    echo "pgplace: login role ${PGPLACE_GATEWAY_USER:-pgplace_gateway} (member of pgplace_player) for the gateway"
fi

if [[ ${PGPLACE_DEMO:-1} == 1 ]]; then
    # The token signs in as the demo user: it never goes to the log (which `docker logs`
    # shows anyone who may run containers), only to a file in the data volume that the
    # postgres user alone may read.
    token_file=$PGDATA/pgplace-demo-token
    token=$("${psql[@]}" --dbname "$db" -tA -f "$sql_dir/demo.sql")
    if [[ -n $token ]]; then
        (umask 077 && printf '%s\n' "$token" >"$token_file")
        echo "pgplace: demo board 'demo' and demo user 'demo' (token in $token_file)"
    else
        echo "pgplace: demo board 'demo' and demo user 'demo' (made before; its token was not kept here)"
    fi
fi
echo "pgplace: database $db is ready"
