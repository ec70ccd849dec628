# Shared by the pgbench scripts here (run.sh, cliff.sh): sourced after they set PG_BIN,
# ADMIN_URL, DB and DB_URL.
psql_admin() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_URL" "$@"; }
psql_bench() { "$PG_BIN/psql" -X -q -tA -v ON_ERROR_STOP=1 -d "$DB_URL" "$@"; }
drop_db() { psql_admin -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"; }
