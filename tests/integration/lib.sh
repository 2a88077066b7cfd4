# lib.sh — shared harness for the integration tests (sourced, bash).
#
# Each test gets a private folder ($T), starts what it needs (tenancyd, nginx, apache,
# spawn-fcgi) with generated configs on free loopback ports or unix sockets in $T, and stops
# all of it on exit, whatever happens. A server a test needs but cannot find is a hard error
# (exit 99), never a skip: the suite must not pass without having run. The helpers below
# each say what they do: one tenancyd (tn_conf, tn_start), several on one PostgreSQL
# registry (host_conf, start_host), nginx in front, the assertions, the admin panel.
#
# Environment (set by the Makefile): top_srcdir, top_builddir.

set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
TENANCYD=${TENANCYD:-$top_builddir/tenancyd}
HELLO_SO=${HELLO_SO:-$(cd "$top_builddir" && pwd)/apps/.libs/hello.so}
HELPERS=${HELPERS:-$top_builddir/tests/helpers}
# The build tree's PostgreSQL driver: tenancyd and tenancy dlopen() it (storage/README.md).
export TENANCY_PGDRIVER=${TENANCY_PGDRIVER:-$(cd "$top_builddir" && pwd)/storage/.libs/pgdriver.so}
TEST_NAME=$(basename "$0" .sh)
T=$(mktemp -d "${TMPDIR:-/tmp}/tenancy-$TEST_NAME.XXXXXX")
PIDS=()
PIDFILES=()
FAILED=0
# Sanitizer builds (--enable-asan, tests/sanitizers.sh): every instrumented process this test
# starts (tenancyd and its workers, the tenancy command, helpers) writes its AddressSanitizer,
# LeakSanitizer or UndefinedBehaviorSanitizer report into $T/san/, and cleanup fails the test
# when one is there: a report from a worker or a daemon whose stderr nobody reads is still a
# failure. Added after the caller's options (the last one wins); uninstrumented programs
# (nginx, apache, postgres) ignore them.
mkdir -p "$T/san"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/san/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$T/san/ubsan"

log() { printf '%s %s\n' "$(date +%H:%M:%S.%N | cut -c1-12)" "$*"; }
fail() { log "FAIL: $*"; FAILED=1; }
fatal() { log "FATAL: $*"; exit 1; }
hard_error() { log "ERROR (environment): $*"; exit 99; }

cleanup() {
    local rc=$?
    local kids="" f
    # servers that are not our children (started through runuser): by their pidfiles
    for f in "${PIDFILES[@]:-}"; do
        [ -n "$f" ] && [ -s "$f" ] && kids="$kids $(cat "$f" 2>/dev/null)"
    done
    for p in $kids; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] || continue
        kids="$kids $(pgrep -P "$p" 2>/dev/null | tr '\n' ' ')"
        kill -TERM "$p" 2>/dev/null
    done
    for _ in $(seq 1 30); do
        local alive=0
        for p in "${PIDS[@]:-}" $kids; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]:-}" $kids; do
        [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    local san
    for san in "$T"/san/*; do
        [ -f "$san" ] || continue
        # A report fails the test; a warning alone (a failed huge allocation that the
        # program handles, with allocator_may_return_null) is shown, not counted.
        if grep -q -E 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$san"; then
            echo "---- sanitizer report $san"
            FAILED=1
        else
            echo "---- sanitizer warning $san"
        fi
        head -n 60 "$san"
    done
    if [ "$rc" -ne 0 ] || [ "$FAILED" -ne 0 ]; then
        for f in "$T"/*.log; do
            [ -f "$f" ] || continue
            echo "---- $f (last 40 lines)"
            tail -n 40 "$f"
        done
    fi
    if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
    if [ "$rc" -eq 0 ] && [ "$FAILED" -ne 0 ]; then exit 1; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A program on PATH or an executable path. `type -P` looks on PATH only, so a shell function
# of the same name (sqlite3 below) does not stand in for the binary.
need() {
    for p in "$@"; do
        type -P "$p" >/dev/null 2>&1 || [ -x "$p" ] ||
            hard_error "'$p' is required by this test (run ./autogen.sh --deps)"
    done
}

# The tests write a running host's SQLite registry with the sqlite3 tool, while the host's
# workers and job workers write it too. The tool has no busy timeout and fails at once with
# "database is locked"; this one waits up to 5 s, as the host's own connections do.
# Exported for the tests' `bash -c` children.
sqlite3() { command sqlite3 -cmd ".timeout 5000" "$@"; }
export -f sqlite3

# A TCP port nobody listens on (loopback), below the kernel's ephemeral range (32768+) so
# that an outgoing connection cannot take it between our check and the server's bind.
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    hard_error "no free port"
}

# tenancyd gathers access-log lines and writes them within access_log_flush (100 ms by
# default): before reading the log for what must be there, or must not, give it that long.
access_log_settled() { sleep 0.3; }

wait_until() {   # wait_until SECONDS command...
    local limit=$1
    shift
    local end=$((SECONDS + limit))
    while ! "$@" 2>/dev/null; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.05
    done
}

# ---- tenancyd -------------------------------------------------------------------------------

# tn_conf "key = value" ... : write $T/tenancyd.conf with test defaults, then the given lines.
# The stream hub and the job workers are off by default here: the tests that count the
# master's children as its workers (pgrep -P) predate them; the stream and job tests turn
# them on (stream.hub = on, pm.jobs = N).
tn_conf() {
    {
        echo "listen = $T/fcgi.sock"
        echo "app = $HELLO_SO"
        echo "access_log = $T/access.log"
        echo "pm = static"
        echo "pm.max_children = 2"
        echo "stream.hub = off"
        echo "pm.jobs = 0"
        for l in "$@"; do echo "$l"; done
    } > "$T/tenancyd.conf.new"
    # A later line for the same key replaces the default (the parser refuses duplicates).
    awk -F' *= *' '{ k[$1] = $0; if (!($1 in seen)) { order[n++] = $1; seen[$1] = 1 } }
        END { for (i = 0; i < n; i++) print k[order[i]] }' "$T/tenancyd.conf.new" > "$T/tenancyd.conf"
    rm -f "$T/tenancyd.conf.new"
}

TENANCY_CLI=${TENANCY_CLI:-$top_builddir/tenancy/tenancy}
DEMO_SO=${DEMO_SO:-$(cd "$top_builddir" && pwd)/apps/.libs/demo.so}

# tn_cli ARGS...: the tenancy command on this test's configuration.
tn_cli() { "$TENANCY_CLI" -c "$T/tenancyd.conf" "$@"; }

# tn_seed N [PREFIX]: N tenants PREFIX1..PREFIXN straight into the SQLite registry in one
# transaction (the CLI creates one per call; 1,000 would take seconds). Each gets a display
# name of its own, random ("Org 4711-29871"), kept in $T/names-PREFIX, line i for PREFIXi:
# an answer that carries it comes from the registry's row, not from anything in the Host.
tn_seed() {
    local n=$1 prefix=${2:-t} db=$T/state/control.db
    need sqlite3
    for i in $(seq 1 "$n"); do echo "Org $RANDOM-$RANDOM$i"; done > "$T/names-$prefix"
    {
        echo "BEGIN;"
        local i=0 name
        while IFS= read -r name; do
            i=$((i + 1))
            echo "INSERT INTO tenants (slug, name, state, created_at, updated_at) VALUES ('$prefix$i', '$name', 'active', 0, 0);"
        done < "$T/names-$prefix"
        echo "COMMIT;"
    } | sqlite3 "$db" || fatal "seeding $n tenants failed"
}
# tn_name I [PREFIX]: the display name tn_seed gave PREFIXi.
tn_name() { sed -n "${1}p" "$T/names-${2:-t}"; }

TN_PID=
tn_start() {   # start tenancyd with $T/tenancyd.conf; wait for "ready"
    need "$TENANCYD"
    : > "$T/tenancyd.log"
    TENANCY_HELLO_TEST_ROUTES=1 "$TENANCYD" -c "$T/tenancyd.conf" >> "$T/tenancyd.log" 2>&1 &
    TN_PID=$!
    PIDS+=("$TN_PID")
    wait_until 10 grep -q ' ready: ' "$T/tenancyd.log" || fatal "tenancyd did not become ready"
}

tn_workers() {   # pids of the current workers
    pgrep -P "$TN_PID" | sort -n
}

tn_log_count() { grep -c -- "$1" "$T/tenancyd.log" || true; }

# ---- several hosts on one PostgreSQL registry -------------------------------------------------

# host_conf NAME APP [LINE...]: write $T/NAME.conf for host NAME, one of several tenancyd that
# share the registry $TENANCY_TEST_PG (set by `tests/pg.sh start`): its own socket
# $T/NAME.sock, state_dir $T/NAME (so its own generation file) and access log
# $T/NAME-access.log; two static workers running the app APP; tenants by subdomain of
# localhost, localhost itself central. Each LINE is one more "key = value" line (pm.jobs,
# stream.hub, ...); a key written here must not be given again (the parser refuses a
# duplicate, and the host then does not start).
host_conf() {
    local name=$1 app=$2 l
    shift 2
    mkdir -p "$T/$name"
    {
        cat <<CONF
listen = $T/$name.sock
app = $app
access_log = $T/$name-access.log
pm = static
pm.max_children = 2
state_dir = $T/$name
registry = $TENANCY_TEST_PG
tenant.resolvers = subdomain
tenant.base_domains = localhost
tenant.central_domains = localhost
CONF
        for l in "$@"; do echo "$l"; done
    } > "$T/$name.conf"
}

# start_host NAME: start tenancyd with $T/NAME.conf (hello's test routes on, as tn_start),
# its output in $T/NAME.log, emptied first (a host started again has a log of its new run
# only); its pid goes into PIDS and PID_NAME. Waits for "ready"; fatal after 10 s.
start_host() {
    : > "$T/$1.log"
    TENANCY_HELLO_TEST_ROUTES=1 "$TENANCYD" -c "$T/$1.conf" >> "$T/$1.log" 2>&1 &
    PIDS+=("$!")
    eval "PID_$1=$!"
    wait_until 10 grep -q ' ready: ' "$T/$1.log" || fatal "host $1 did not start"
}

# ---- nginx -----------------------------------------------------------------------------------

NGINX_PORT=
# nginx_start [upstream] [extra location directives]: upstream defaults to the unix socket.
# The set-up doc/examples/nginx.conf recommends: kept connections (fastcgi_keep_conn, upstream
# keepalive below tenancyd's keepalive_timeout), the params at server level, and no second
# try (fastcgi_next_upstream off). With nginx's default retry a request whose kept connection
# failed is sent again without a word to the client, so a test would pass over the very losses
# (a reload or a dead worker closing a connection under nginx) it is there to see; nginx still
# logs each one, and nginx_upstream_errors reads them. (Debian's fastcgi_params already passes
# HTTP_HOST as \$host; TENANT_HOST is the param tenancyd's chain reads by default.)
# nginx_conf_head: the start of a test's nginx.conf on stdout (one worker; this test's pid
# file, error log and temp folders; the http block opened). The caller writes the rest and
# closes the http block.
nginx_conf_head() {
    local user=""
    [ "$(id -u)" = 0 ] && user="user root;"
    mkdir -p "$T/nginx"
    cat <<NGX
daemon off;
$user
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $T/nginx/body;
    fastcgi_temp_path $T/nginx/fastcgi;
    proxy_temp_path $T/nginx/proxy;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
NGX
}

nginx_start() {
    need nginx
    local upstream=${1:-unix:$T/fcgi.sock}
    local extra=${2:-}
    NGINX_PORT=$(free_port)
    { nginx_conf_head; cat <<NGX
    upstream tenancy { server $upstream; keepalive 64; keepalive_timeout 60s; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        include /etc/nginx/fastcgi_params;
        fastcgi_param TENANT_HOST \$host;
        fastcgi_param REQUEST_START \$msec;
        fastcgi_param REQUEST_ID \$request_id;
        fastcgi_param HTTP_PROXY "";
        fastcgi_keep_conn on;
        fastcgi_next_upstream off;
        fastcgi_read_timeout 30s;
        location / {
            $extra
            fastcgi_pass tenancy;
        }
    }
}
NGX
    } > "$T/nginx.conf"
    nginx_launch
}

# nginx_launch [PORT]: check the config a test wrote to $T/nginx.conf (an invalid one is a
# hard error), start nginx on it (its pid in PIDS) and wait until PORT ($NGINX_PORT) answers.
nginx_launch() {
    local port=${1:-$NGINX_PORT}
    nginx -t -c "$T/nginx.conf" -e "$T/nginx-error.log" >/dev/null 2>&1 ||
        hard_error "generated nginx config is invalid: $(nginx -t -c "$T/nginx.conf" -e "$T/nginx-error.log" 2>&1)"
    nginx -c "$T/nginx.conf" -e "$T/nginx-error.log" >> "$T/nginx.log" 2>&1 &
    PIDS+=("$!")
    wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" || fatal "nginx did not start"
}

# nginx_upstream_errors: the lines of nginx's error log about a failed upstream connection or
# response (closed under nginx, refused, reset, timed out, a bad FastCGI record), one a line.
# Each is a request that got 502/504 from nginx, or that nginx would have retried silently.
NGINX_UPSTREAM_ERRORS='upstream prematurely closed|connect\(\) (to .* )?failed|recv\(\) failed|readv\(\) failed|writev\(\) failed|send\(\) failed|sendfile\(\) failed|upstream timed out|no live upstreams|upstream sent|while (connecting to|reading response header from|sending request to|reading upstream)'
nginx_upstream_errors() { grep -E "$NGINX_UPSTREAM_ERRORS" "$T/nginx-error.log" 2> /dev/null || true; }
# assert_nginx_clean WHAT: nginx logged no upstream error (a graceful change must lose nothing).
assert_nginx_clean() {
    local e
    e=$(nginx_upstream_errors)
    if [ -z "$e" ]; then log "ok: $1 (no upstream error in nginx's log)"; else
        fail "$1: nginx logged $(printf '%s\n' "$e" | wc -l) upstream error(s): $(printf '%s\n' "$e" | head -3)"; fi
}

# http PATH [HOST] -> body on stdout; the status code is kept for last_status (a file, so
# that it survives the subshell of $(http ...)).
http() {
    local path=$1 host=${2:-localhost}
    local out
    out=$(curl -s -m 20 -H "Host: $host" -w '\n%{http_code}' "http://127.0.0.1:$NGINX_PORT$path")
    printf '%s' "${out##*$'\n'}" > "$T/.last_status"
    printf '%s' "${out%$'\n'*}"
}
last_status() { cat "$T/.last_status"; }

assert_eq() {   # assert_eq ACTUAL EXPECTED WHAT
    if [ "$1" != "$2" ]; then fail "$3: got '$1', expected '$2'"; else log "ok: $3"; fi
}
assert_contains() {   # assert_contains HAYSTACK NEEDLE WHAT
    case "$1" in
    *"$2"*) log "ok: $3" ;;
    *) fail "$3: '$2' not found in: $(printf '%s' "$1" | head -c 400)" ;;
    esac
}
assert_lacks() {   # assert_lacks HAYSTACK NEEDLE WHAT
    case "$1" in
    *"$2"*) fail "$3: '$2' found in: $(printf '%s' "$1" | head -c 400)" ;;
    *) log "ok: $3" ;;
    esac
}
assert_ge() {
    if [ "$1" -ge "$2" ] 2>/dev/null; then log "ok: $3 ($1 >= $2)"; else fail "$3: $1 < $2"; fi
}

# pg_cluster: a throwaway PostgreSQL cluster for this test (tests/pg.sh: PGHOST and the rest
# exported, TENANCY_TEST_PG set), its folder in PG_DIR, stopped on exit before the cleanup.
# A cluster that cannot start is a hard error, never a skip.
pg_cluster() {
    eval "$("$top_srcdir/tests/pg.sh" start)" || hard_error "cannot start PostgreSQL (tests/pg.sh)"
    PG_DIR=$TENANCY_TEST_PG_DIR
    trap 'rc=$?; "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT
}

# pg_scram_but_host DIR: the throwaway cluster in DIR (tests/pg.sh) trusts only its superuser
# and the host's login, tenancy_app; every other login (tenant roles, group logins) proves
# its password with SCRAM, as the host derives it from the role key. Reloads the server.
pg_scram_but_host() {
    local hba=$1/data/pg_hba.conf
    { echo "local all postgres,tenancy_app trust"; echo "local all all scram-sha-256"; } > "$hba.new"
    cat "$hba.new" > "$hba"
    psql -qAt -c "SELECT pg_reload_conf()" > /dev/null || fatal "reloading pg_hba.conf"
}

# ---- the admin panel -------------------------------------------------------------------------

# panel_login PASSWORD: log in to the panel (Host admin.localhost, behind nginx_start's port)
# as admin, keeping the session in the cookie jar $T/jar; the session's CSRF token in
# PANEL_TOKEN. A failed login or a page without a token is fatal.
PANEL_TOKEN=
panel_login() {
    local u="http://127.0.0.1:$NGINX_PORT" page nonce code
    page=$(curl -s -m 30 -H 'Host: admin.localhost' -b "$T/jar" -c "$T/jar" "$u/login")
    nonce=$(grep -o 'name="nonce" value="[^"]*"' <<< "$page" | sed 's/.*value="//; s/"$//')
    code=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H 'Host: admin.localhost' \
        -b "$T/jar" -c "$T/jar" --data-urlencode "nonce=$nonce" --data-urlencode "user=admin" \
        --data-urlencode "password=$1" "$u/login")
    [ "$code" = 303 ] || fatal "panel login: $code"
    page=$(curl -s -m 30 -H 'Host: admin.localhost' -b "$T/jar" -c "$T/jar" "$u/")
    PANEL_TOKEN=$(grep -o 'name="csrf" value="[^"]*"' <<< "$page" | head -1 |
        sed 's/.*value="//; s/"$//')
    [ -n "$PANEL_TOKEN" ] || fatal "the panel gave no CSRF token"
}
