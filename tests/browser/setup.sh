# Sourced by run.sh and bench.sh (with $here set to this directory): installs what the
# browser tests need and is missing — Debian's chromium, node and npm, and playwright-core
# from package-lock.json (which never downloads a browser).
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
export CHROMIUM
missing=()
[ -x "$CHROMIUM" ] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "browser: installing ${missing[*]} (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# npm ci again only when the lock file changed since the last install.
stamp="$here/node_modules/.pgplace-installed-lock"
if ! cmp -s "$here/package-lock.json" "$stamp" 2>/dev/null; then
  (cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$stamp"
fi
