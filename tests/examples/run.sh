#!/usr/bin/env bash
# The SQL a newcomer copies runs as written: the README's "From SQL" block and
# sql/examples.sql, in psql with ON_ERROR_STOP, on a database made as `./pgplace.sh up`
# makes one (the extension, sql/roles.sql, sql/demo.sql). Then what they did is checked:
# the README's placement went to its own board, and the colours are named.
#
#   PSQL=/usr/bin/psql PGPLACE_ADMIN_URL=postgresql://... bash tests/examples/run.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
: "${PGPLACE_ADMIN_URL:?PGPLACE_ADMIN_URL must be a superuser URL of the cluster}"
PSQL=${PSQL:-psql}
out="$root/target/test-results/examples"
mkdir -p "$out"
db=pgplace_examples
url="${PGPLACE_ADMIN_URL%/*}/$db"
q() { "$PSQL" -X -q -v ON_ERROR_STOP=1 "$@"; }
fail() { echo "examples: $*" >&2; exit 1; }

q "$PGPLACE_ADMIN_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" 2>&1 |
    grep -v 'does not exist, skipping' || true
q "$url" -c "CREATE EXTENSION pgplace"
q "$url" -f "$root/sql/roles.sql" >/dev/null
q "$url" -f "$root/sql/demo.sql" >/dev/null

# Every ```sql block of the README, in order, as one psql script (they share variables).
awk '/^```sql$/ { inside = 1; next } /^```$/ { inside = 0 } inside' "$root/README.md" >"$out/readme.sql"
[[ -s $out/readme.sql ]] || fail "README.md has no sql block"
q "$url" -f "$out/readme.sql" >"$out/readme.out" 2>&1 || { cat "$out/readme.out" >&2; fail "README.md's SQL failed"; }
q "$url" -f "$root/sql/examples.sql" >"$out/examples.out" 2>&1 ||
    { cat "$out/examples.out" >&2; fail "sql/examples.sql failed"; }

# The README's placement is on the board it made, not on the demo board.
placed=$(q "$url" -At -c "SELECT b.name, p.x, p.y, p.color, u.name FROM place.placements p
                           JOIN place.boards b ON b.id = p.board_id JOIN place.users u ON u.id = p.user_id
                           WHERE u.name = 'alice'")
[[ $placed == "mine|10|20|5|alice" ]] || fail "the README's placement: '$placed', not mine|10|20|5|alice"
# The colours on the demo board are named (the default palette's names).
grep -Eq '^ +[0-9]+ \| white +\| #ffffff' "$out/examples.out" ||
    fail "sql/examples.sql's colours are not named: $(cat "$out/examples.out")"
q "$PGPLACE_ADMIN_URL" -c "DROP DATABASE $db WITH (FORCE)"
echo "examples: README.md's SQL and sql/examples.sql ran as written"
