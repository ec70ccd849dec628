# Shared by the pgbench scripts here (run.sh, cliff.sh): sourced after they set PG_BIN,
# ADMIN_URL, DB and DB_URL.
psql_admin() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_URL" "$@"; }
psql_bench() { "$PG_BIN/psql" -X -q -tA -v ON_ERROR_STOP=1 -d "$DB_URL" "$@"; }
drop_db() { psql_admin -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"; }

# CPU seconds the cluster has spent so far: the postmaster's own and its reaped children's
# (backends that have exited: a pgbench phase's connections end with it), plus every live
# child's. Empty when the data directory is not on this machine or not readable.
server_cpu_seconds() {
    local dir pid
    dir=$(psql_admin -tA -c "SHOW data_directory") || return 0
    pid=$(head -1 "$dir/postmaster.pid" 2>/dev/null) || return 0
    [[ -n $pid && -r /proc/$pid/stat ]] || return 0
    # Fields after the command's closing parenthesis: 4 is the ppid, 14-17 utime, stime,
    # cutime, cstime (in clock ticks).
    {
        sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 + $14 + $15 }'
        # A process that exits between the glob and the read is skipped (under pipefail
        # its failed sed would end the caller's script).
        for stat in /proc/[0-9]*/stat; do
            { sed 's/^.*) //' "$stat" 2>/dev/null || true; } | awk -v p="$pid" '$2 == p { print $12 + $13 }'
        done
    } | awk -v hz="$(getconf CLK_TCK)" '{ t += $1 } END { printf "%.3f\n", t / hz }'
}
