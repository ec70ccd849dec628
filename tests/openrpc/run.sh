#!/usr/bin/env bash
# rpc.discover checked by validators we did not write (tests/openrpc/openrpc.test.js).
#
#   GATEWAY_BIN=target/debug/pgplace-gateway \
#   PGPLACE_ADMIN_URL=postgresql://postgres@127.0.0.1:54329/postgres \
#   PSQL=/usr/bin/psql bash tests/openrpc/run.sh
#
# Installs node and npm when missing and the validators from package-lock.json, creates a
# fresh database `pgplace_openrpc` (fixture.sql), then runs the test, which starts the
# gateway on a free port.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${GATEWAY_BIN:?GATEWAY_BIN must name a built pgplace-gateway}"
: "${PGPLACE_ADMIN_URL:?PGPLACE_ADMIN_URL must be a superuser URL of the cluster}"
PSQL="${PSQL:-psql}"
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
stamp="$here/node_modules/.pgplace-installed-lock"
if ! cmp -s "$here/package-lock.json" "$stamp" 2>/dev/null; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$stamp"
fi
db=pgplace_openrpc
db_url="$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$PGPLACE_ADMIN_URL" "$db")"
"$PSQL" "$PGPLACE_ADMIN_URL" -Xq -v ON_ERROR_STOP=1 \
  -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" 2>&1 | grep -v 'does not exist, skipping' || true
"$PSQL" "$db_url" -Xq -v ON_ERROR_STOP=1 -c "CREATE EXTENSION pgplace"
export DEMO_TOKEN="$("$PSQL" "$db_url" -X -f "$here/fixture.sql" | tail -1)"
export OPENRPC_DB_URL="$db_url" GATEWAY_BIN
cd "$here"
node --test --test-reporter=spec openrpc.test.js
