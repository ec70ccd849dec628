#!/usr/bin/env bash
# The web page's tests in headless Chromium (tests/browser/page.test.js).
#
#   GATEWAY_BIN=target/debug/pgplace-gateway \
#   PGPLACE_ADMIN_URL=postgresql://postgres@127.0.0.1:54329/postgres \
#   PSQL=/usr/bin/psql bash tests/browser/run.sh
#
# Installs what is missing (Debian's chromium, node and npm; playwright-core from
# package-lock.json, which never downloads a browser), creates a fresh database
# `pgplace_browser` with the extension, boards and users (fixture.sql), then runs the tests;
# they start the gateway binary on a free port, restart it once, and stop it. Screenshots,
# the fixture and the gateway's log land in target/test-results/browser/.
#
# BROWSER_DB and RESULTS_DIR override the database and the results folder, so that two
# runs on one cluster and one checkout (say, two people's) never drop each other's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
: "${GATEWAY_BIN:?GATEWAY_BIN must name a built pgplace-gateway}"
: "${PGPLACE_ADMIN_URL:?PGPLACE_ADMIN_URL must be a superuser URL of the cluster}"
PSQL="${PSQL:-psql}"
GATEWAY_BIN="$(cd "$(dirname "$GATEWAY_BIN")" && pwd)/$(basename "$GATEWAY_BIN")"
export GATEWAY_BIN PGPLACE_ADMIN_URL PSQL
export RESULTS_DIR="${RESULTS_DIR:-$root/target/test-results/browser}"
export BROWSER_DB="${BROWSER_DB:-pgplace_browser}"

. "$here/setup.sh"

rm -rf "$RESULTS_DIR"
mkdir -p "$RESULTS_DIR"
db_url="$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$PGPLACE_ADMIN_URL" "$BROWSER_DB")"
"$PSQL" "$PGPLACE_ADMIN_URL" -Xq -v ON_ERROR_STOP=1 \
  -c "DROP DATABASE IF EXISTS $BROWSER_DB WITH (FORCE)" -c "CREATE DATABASE $BROWSER_DB" 2>&1 | grep -v 'does not exist, skipping' || true
"$PSQL" "$db_url" -Xq -v ON_ERROR_STOP=1 -c "CREATE EXTENSION pgplace"
"$PSQL" "$db_url" -X -f "$here/fixture.sql" > "$RESULTS_DIR/fixture.json"

cd "$here"
status=0
node --test --test-concurrency=1 --test-timeout=120000 --test-reporter=spec page.test.js || status=$?
echo "browser tests: screenshots in ${RESULTS_DIR#"$root"/}/"
exit $status
