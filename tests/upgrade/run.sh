#!/usr/bin/env bash
# ALTER EXTENSION pgplace UPDATE from every earlier release, checked: create the extension
# at the old version, fill it, update, then (1) every object is exactly as in a fresh
# install of the new version (describe.sql on both), (2) the data is all there and the
# board keeps working (the next placement continues the seq; board_at replays it), (3) a
# pg_dump of the old version restores into the new one with the same boards.
#
#   PSQL=/usr/bin/psql PG_CONFIG=... PGPLACE_ADMIN_URL=postgresql://... bash tests/upgrade/run.sh
#
# Old install scripts (tests/upgrade/pgplace--<old>.sql) are copied into the server's
# extension directory for the test: releases ship only the newest install script and the
# update scripts.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
: "${PGPLACE_ADMIN_URL:?PGPLACE_ADMIN_URL must be a superuser URL of the cluster}"
PSQL=${PSQL:-psql}
PG_CONFIG=${PG_CONFIG:-pg_config}
extdir="$("$PG_CONFIG" --sharedir)/extension"
out="$root/target/test-results/upgrade"
mkdir -p "$out"

url_of() { printf '%s/%s' "${PGPLACE_ADMIN_URL%/*}" "$1"; }
q() { "$PSQL" -X -q -v ON_ERROR_STOP=1 "$@"; }
# pg_dump and pg_restore of the same installation as psql.
pg_tool() { "$(dirname "$(command -v "$PSQL")")/$1" "${@:2}"; }
# Every board of database URL $1: name, seq and a digest of its bits, one line each.
# Then every cooldown: board, user and when the user last placed (place.cooldowns has had
# these columns in every release: a table, a view over versions, a view over the history).
boards() {
    q "$1" -At -c "SELECT b.name, b.seq, md5(bb.bits) FROM place.boards b, place.board_bits(b.id) bb ORDER BY b.id" \
        -c "SELECT b.name, u.name, c.last_placed_at FROM place.cooldowns c
            JOIN place.boards b ON b.id = c.board_id JOIN place.users u ON u.id = c.user_id
            ORDER BY b.name, u.name"
}
# How many tiles payloads one placement sends to a LISTENer in database $1: before 0.8.4 a
# trigger announced placements, since then the library does, and both an old schema under
# the new library and an updated one must hear of each placement. (Twice would look like
# once: NOTIFY folds a transaction's identical payloads; the library leaves the sending to
# an old schema's trigger all the same.)
announced() {
    q "$1" -At <<'SQL' | grep -c '"type":"tiles"' || true
LISTEN pgplace;
SELECT place.create_board('listened ' || clock_timestamp(), 4, 4, 1, '0') AS board \gset
SELECT user_id AS u FROM place.create_user('listener ' || clock_timestamp()) \gset
SELECT count(*) FROM place.place(:board, 1, 1, 1, :u);
SQL
}
expect_announced_once() {
    local n
    n=$(announced "$1")
    if [[ $n != 1 ]]; then
        echo "upgrade: $2: one placement sent $n tiles notifications, not 1" >&2
        status=1
    fi
}
fresh_db() {
    q "$PGPLACE_ADMIN_URL" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" 2>&1 |
        grep -v 'does not exist, skipping' || true
}

new=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$extdir/pgplace.control")
fresh_db pgplace_upgrade_new
q "$(url_of pgplace_upgrade_new)" -c "CREATE EXTENSION pgplace"
q "$(url_of pgplace_upgrade_new)" -f "$here/describe.sql" >"$out/fresh-$new.txt"

status=0
for script in "$here"/pgplace--*.sql; do
    old=$(basename "$script" .sql); old=${old#pgplace--}
    echo "upgrade: $old -> $new"
    cp "$script" "$extdir/"
    db=pgplace_upgrade_from_${old//./_}
    fresh_db "$db"
    url=$(url_of "$db")
    q "$url" -c "CREATE EXTENSION pgplace VERSION '$old'"
    q "$url" -f "$here/fill.sql" >/dev/null
    boards "$url" >"$out/before-$old.txt"
    # A DBA's dump of the old version restores into the new one (pg_dump writes CREATE
    # EXTENSION without a version: the restore makes the new schema, then copies the old
    # tables' rows into it).
    pg_tool pg_dump -Fc -f "$out/dump-$old.custom" "$url"
    # A cooldown set by hand, which the history does not show, survives the update too.
    q "$url" -c "UPDATE place.cooldowns SET last_placed_at = '2001-02-03 04:05:06+00'
                 WHERE user_id = (SELECT id FROM place.users WHERE name = 'up-v')"
    boards "$url" >"$out/edited-$old.txt"
    q "$url" -c "ALTER EXTENSION pgplace UPDATE"
    q "$url" -f "$here/describe.sql" >"$out/updated-from-$old.txt"
    if ! diff -u "$out/fresh-$new.txt" "$out/updated-from-$old.txt"; then
        echo "upgrade: $old -> $new leaves the schema different from a fresh $new (diff above)" >&2
        status=1
    fi
    boards "$url" >"$out/after-$old.txt"
    if ! diff -u "$out/edited-$old.txt" "$out/after-$old.txt"; then
        echo "upgrade: $old -> $new changed the boards or the cooldowns" >&2
        status=1
    fi
    fresh_db "${db}_restored"
    if ! pg_tool pg_restore --exit-on-error -d "$(url_of "${db}_restored")" \
        "$out/dump-$old.custom"; then
        echo "upgrade: a dump of $old does not restore into $new" >&2
        status=1
    fi
    boards "$(url_of "${db}_restored")" >"$out/restored-$old.txt"
    if ! diff -u "$out/before-$old.txt" "$out/restored-$old.txt"; then
        echo "upgrade: a dump of $old restored into $new has different boards or cooldowns" >&2
        status=1
    fi
    q "$url" -At -f "$here/check.sql" >"$out/check-$old.txt"
    if ! diff -u "$here/check.expected" "$out/check-$old.txt"; then
        echo "upgrade: $old -> $new: the updated database does not work as expected" >&2
        status=1
    fi
    fresh_db "${db}_listened"
    q "$(url_of "${db}_listened")" -c "CREATE EXTENSION pgplace VERSION '$old'"
    expect_announced_once "$(url_of "${db}_listened")" "$old's schema under the $new library"
    q "$(url_of "${db}_listened")" -c "ALTER EXTENSION pgplace UPDATE"
    expect_announced_once "$(url_of "${db}_listened")" "$old updated to $new"
done
exit $status
