#!/bin/bash
# apache_proxy_fcgi.sh — tenancyd behind Apache httpd's mod_proxy_fcgi, over a unix socket and
# over TCP: the Host reaches the app, bodies are echoed, the status path answers, a trusted
# Host can be set by the vhost, and with `enablereuse=on` (kept FastCGI connections) a second
# client is never stuck behind a busy worker, an idle kept connection that tenancyd closes is
# replaced, and a request body the app did not read never poisons the kept connection (nor is
# run as a request of its own). At the end SIGTERM stops tenancyd and its workers at once.
#
# Apache runs in the foreground with a config generated here (its own ServerRoot, pid file
# and error log in $T), one event-MPM child so that its connection pool is shared.
. "$(dirname "$0")/lib.sh"
need curl apache2

APACHE_MODULES=${APACHE_MODULES:-/usr/lib/apache2/modules}
[ -r "$APACHE_MODULES/mod_proxy_fcgi.so" ] ||
    hard_error "mod_proxy_fcgi not found in $APACHE_MODULES (Debian: apache2)"

# ---- apache ----------------------------------------------------------------------------------

# httpd refuses to serve as root, so under root its children run as an unprivileged account;
# $T is opened for traversal and the socket is handed to that account.
if [ "$(id -u)" = 0 ]; then
    AP_USER=
    for u in www-data nobody; do
        if id -u "$u" >/dev/null 2>&1; then AP_USER=$u; break; fi
    done
    [ -n "$AP_USER" ] || hard_error "running as root, but no www-data or nobody account for Apache"
    AP_GROUP=$(id -gn "$AP_USER")
    chmod 711 "$T"
else
    AP_USER=$(id -un)
    AP_GROUP=$(id -gn)
fi

APACHE_PID=
alive() {   # a live process (a zombie that has not been waited for is not)
    local s
    s=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$s" ] && [ "${s#Z}" = "$s" ]
}

# apache_common: the part of every config of this test (what apache_start writes first).
apache_common() {
    cat <<AP
ServerRoot "$T/apache"
ServerName localhost
PidFile "$T/apache/httpd.pid"
DefaultRuntimeDir "$T/apache"
ErrorLog "$T/apache-error.log"
LogLevel warn
User $AP_USER
Group $AP_GROUP
LoadModule mpm_event_module "$APACHE_MODULES/mod_mpm_event.so"
<IfModule !unixd_module>
    LoadModule unixd_module "$APACHE_MODULES/mod_unixd.so"
</IfModule>
LoadModule authz_core_module "$APACHE_MODULES/mod_authz_core.so"
LoadModule headers_module "$APACHE_MODULES/mod_headers.so"
LoadModule proxy_module "$APACHE_MODULES/mod_proxy.so"
LoadModule proxy_fcgi_module "$APACHE_MODULES/mod_proxy_fcgi.so"
StartServers 1
ServerLimit 1
ThreadLimit 16
ThreadsPerChild 16
MaxRequestWorkers 16
MinSpareThreads 1
MaxSpareThreads 16
Timeout 20
AP
}

# apache_start BODY_FN PORT_VAR...: take a port into each PORT_VAR, write $T/apache.conf
# (apache_common, then what BODY_FN prints with those ports), check it with apache2 -t, start
# httpd in the foreground and wait until every port answers. When one of the ports was taken
# by someone else meanwhile, start again on other ports.
apache_start() {
    local body_fn=$1 attempt v end up
    shift
    mkdir -p "$T/apache"
    for attempt in 1 2 3; do
        for v in "$@"; do take_port "$v"; done
        { apache_common; "$body_fn"; } > "$T/apache.conf"
        if ! apache2 -t -f "$T/apache.conf" > "$T/apache-t.out" 2>&1; then
            cat "$T/apache-t.out"
            hard_error "generated Apache config is invalid (apache2 -t above; the config is $T/apache.conf)"
        fi
        : > "$T/apache.log"
        apache2 -D FOREGROUND -f "$T/apache.conf" >> "$T/apache.log" 2>&1 &
        APACHE_PID=$!
        PIDS+=("$APACHE_PID")
        end=$((SECONDS + 10))
        up=0
        while [ "$SECONDS" -lt "$end" ] && alive "$APACHE_PID"; do
            up=1
            for v in "$@"; do
                (exec 3<>"/dev/tcp/127.0.0.1/${!v}") 2>/dev/null || { up=0; break; }
            done
            [ "$up" = 1 ] && return 0
            sleep 0.05
        done
        alive "$APACHE_PID" && break
        wait "$APACHE_PID" 2>/dev/null
        APACHE_PID=
        grep -q 'Address already in use' "$T/apache.log" || break
        log "apache (attempt $attempt): a port was taken meanwhile; again on other ports"
    done
    fatal "apache did not start: $(tail -n 5 "$T/apache.log" "$T/apache-error.log" 2>/dev/null)"
}

all_gone() {   # all_gone PID...
    local p
    for p in "$@"; do alive "$p" && return 1; done
    return 0
}

# stop_checked PID WHAT: SIGTERM to a tenancyd master; it and every worker it had must be gone
# within 3 s (nothing is running, so nothing should wait for stop_timeout). Whatever is left
# is reported with where it sits, then killed: a test must not leave processes behind.
stop_checked() {
    local m=$1 what=$2 procs p left=""
    procs="$m $(pgrep -P "$m" | tr '\n' ' ')"
    kill -TERM "$m" 2>/dev/null
    # shellcheck disable=SC2086
    if wait_until 3 all_gone $procs; then
        log "ok: $what: SIGTERM stopped the master and its workers"
    else
        for p in $procs; do
            alive "$p" && left+=" $p (in syscall $(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null), wchan $(ps -o wchan:40= -p "$p"))"
        done
        fail "$what: still running 3 s after SIGTERM:$left"
        # shellcheck disable=SC2086
        kill -KILL $procs 2>/dev/null
    fi
    wait "$m" 2>/dev/null
    STOP_RC=$?   # its exit status, when it is our child
}

apache_gone() { ! alive "$APACHE_PID"; }
# Stop httpd and wait for it: lib.sh's cleanup would SIGKILL it after 0.2 s, which leaves its
# children behind.
apache_stop() {
    [ -n "$APACHE_PID" ] || return 0
    local kids
    kids=$(pgrep -P "$APACHE_PID")
    kill -TERM "$APACHE_PID" 2>/dev/null
    wait_until 10 apache_gone || kill -KILL "$APACHE_PID" $kids 2>/dev/null
    wait "$APACHE_PID" 2>/dev/null
    APACHE_PID=
}

# stop_quietly PID...: on the way out, stop tenancyd masters still running and wait for their
# workers; lib.sh's cleanup would SIGKILL a master after 0.2 s, and a worker that cannot take
# SIGTERM at that moment would outlive the test.
stop_quietly() {
    local m procs
    for m in "$@"; do
        [ -n "$m" ] && alive "$m" || continue
        procs="$m $(pgrep -P "$m" | tr '\n' ' ')"
        kill -TERM "$m" 2>/dev/null
        # shellcheck disable=SC2086
        wait_until 3 all_gone $procs || kill -KILL $procs 2>/dev/null
    done
}
TCP_PID=
# shellcheck disable=SC2154
trap 'rc_=$?; apache_stop; stop_quietly "$TN_PID" "$TCP_PID"; (exit $rc_); cleanup' EXIT

# take_port VAR: a port nobody listens on, outside the kernel's ephemeral range (where a
# client connection of anyone on this machine may hold it) and not yet taken by this test.
read -r EPH_LO EPH_HI < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || EPH_LO=32768 EPH_HI=60999
PORTS_TAKEN=
take_port() {
    local p tries=0
    while p=$(free_port); do
        tries=$((tries + 1))
        [[ " $PORTS_TAKEN " == *" $p "* ]] && continue
        [ "$p" -ge "$EPH_LO" ] && [ "$p" -le "$EPH_HI" ] && [ "$tries" -lt 100 ] && continue
        break
    done
    PORTS_TAKEN+=" $p"
    printf -v "$1" '%s' "$p"
}

# get PORT PATH [HOST]: body on stdout, status in last_status (as lib.sh's http).
get() {
    local out
    out=$(curl -s -m 20 -H "Host: ${3:-localhost}" -w '\n%{http_code}' "http://127.0.0.1:$1$2")
    printf '%s' "${out##*$'\n'}" > "$T/.last_status"
    printf '%s' "${out%$'\n'*}"
}

# status_field NAME: a counter from tenancyd's status JSON (read over the plain vhost).
status_field() {
    get "$P_PLAIN" /_tenancy/status | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2
}

faster_than() {   # faster_than SECONDS "CODE TIME" WHAT
    local code=${2% *} t=${2#* }
    if [ "$code" = 200 ] && awk -v t="$t" -v m="$1" 'BEGIN { exit !(t < m) }'; then
        log "ok: $3 (${t}s)"
    else
        fail "$3: status $code after ${t}s (bound ${1}s)"
    fi
}

# ---- tenancyd: one on the unix socket, one on TCP ---------------------------------------------

extra=()
[ "$(id -u)" = 0 ] && extra+=("listen.owner = $AP_USER")
# A short keepalive_timeout, so that the test also sees tenancyd close idle kept connections;
# a short queue_timeout for the REQUEST_START check (only the trusted vhost passes it).
tn_conf "listen.mode = 0660" "keepalive_timeout = 1s" "queue_timeout = 1s" "${extra[@]}"
tn_start

take_port TCP_PORT
cat > "$T/tcp.conf" <<EOF
listen = 127.0.0.1:$TCP_PORT
app = $HELLO_SO
access_log = $T/access-tcp.log
pm = static
pm.max_children = 2
EOF
: > "$T/tenancyd-tcp.log"
TENANCY_HELLO_TEST_ROUTES=1 "$TENANCYD" -c "$T/tcp.conf" >> "$T/tenancyd-tcp.log" 2>&1 &
TCP_PID=$!
PIDS+=("$TCP_PID")
wait_until 10 grep -q ' ready: ' "$T/tenancyd-tcp.log" || fatal "tenancyd (TCP) did not become ready"

# ---- apache: one vhost per case ------------------------------------------------------------------

# The worker names differ (plain, reuse, trusted, pinned) so that httpd keeps a connection
# pool with its own parameters per vhost, all to the one socket.
proxy_vhosts() {
    cat <<AP
    ProxyFCGIBackendType GENERIC
    Listen 127.0.0.1:$P_PLAIN
    Listen 127.0.0.1:$P_REUSE
    Listen 127.0.0.1:$P_TCP
    Listen 127.0.0.1:$P_TRUST
    <VirtualHost 127.0.0.1:$P_PLAIN>
        ProxyPass "/" "unix:$T/fcgi.sock|fcgi://plain/"
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_REUSE>
        ProxyPass "/" "unix:$T/fcgi.sock|fcgi://reuse/" enablereuse=on
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TCP>
        ProxyPass "/" "fcgi://127.0.0.1:$TCP_PORT/" enablereuse=on
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TRUST>
        ServerName default.invalid
        <Location "/">
            Require all denied
        </Location>
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TRUST>
        ServerName tenant.example
        ServerAlias *.saas.example
        ProxyFCGISetEnvIf "true" HTTP_HOST "%{SERVER_NAME}"
        RequestHeader set X-Request-Start "%t"
        ProxyFCGISetEnvIf "%{HTTP:X-Request-Start} =~ /^t=([0-9]+)([0-9]{6})\$/" REQUEST_START "\$1.\$2"
        ProxyPass "/" "unix:$T/fcgi.sock|fcgi://trusted/"
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TRUST>
        ServerName pinned.example
        ServerAlias alias.pinned.example
        UseCanonicalName On
        ProxyFCGISetEnvIf "true" HTTP_HOST "%{SERVER_NAME}"
        ProxyPass "/" "unix:$T/fcgi.sock|fcgi://pinned/"
    </VirtualHost>
AP
}
apache_start proxy_vhosts P_PLAIN P_REUSE P_TCP P_TRUST

# ---- the basics, over the unix socket ------------------------------------------------------------

assert_eq "$(get "$P_PLAIN" / acme.example.com)" "hello from acme.example.com" "hello over a unix socket"
assert_eq "$(last_status)" 200 "status 200"
assert_eq "$(get "$P_PLAIN" / ACME.Example.COM:8080)" "hello from acme.example.com" \
    "raw Host header lower-cased, port dropped"
head -c 150000 /dev/urandom | base64 -w0 > "$T/body"
got=$(curl -s -m 20 --data-binary @"$T/body" "http://127.0.0.1:$P_PLAIN/echo")
assert_eq "${#got}" "$(stat -c %s "$T/body")" "200 KB body echoed intact (length)"
[ "$got" = "$(cat "$T/body")" ] && log "ok: body content" || fail "echoed body differs"
status=$(get "$P_PLAIN" /_tenancy/status)
assert_eq "$(last_status)" 200 "status path answered through Apache"
assert_contains "$status" '"pm":"static"' "status JSON"
assert_eq "$(get "$P_PLAIN" /_tenancy/ping)" "pong" "ping"

# Trusted Host, as doc/examples/apache-proxy-fcgi.conf sets it: a Host no vhost names is
# refused by the first vhost and never reaches tenancyd; HTTP_HOST is replaced by the name
# Apache matched (lower-cased, no port), or by the ServerName with UseCanonicalName On.
assert_eq "$(get "$P_TRUST" / Tenant.EXAMPLE:8080)" "hello from tenant.example" "trusted Host: ServerName"
assert_eq "$(last_status)" 200 "trusted Host: REQUEST_START from Apache accepted (no 503)"
assert_eq "$(get "$P_TRUST" / Shop.SaaS.example)" "hello from shop.saas.example" "trusted Host: ServerAlias wildcard"
get "$P_TRUST" / evil.example > /dev/null
assert_eq "$(last_status)" 403 "a Host no vhost names is refused"
access_log_settled
assert_eq "$(grep -c '"host":"evil.example"' "$T/access.log")" 0 "... and never reaches tenancyd"
assert_eq "$(get "$P_TRUST" / ALIAS.pinned.example)" "hello from pinned.example" \
    "UseCanonicalName On pins the vhost's ServerName"

# ---- TCP ---------------------------------------------------------------------------------------

assert_eq "$(get "$P_TCP" / tcp.example)" "hello from tcp.example" "hello over TCP"
got=$(curl -s -m 20 --data-binary @"$T/body" "http://127.0.0.1:$P_TCP/echo")
[ "$got" = "$(cat "$T/body")" ] && log "ok: body echoed over TCP" || fail "echoed body differs over TCP"

# ---- enablereuse=on: kept connections ----------------------------------------------------------

accepted0=$(status_field accepted)
codes=""
for _ in $(seq 1 20); do codes+="$(curl -s -o /dev/null -m 10 -w '%{http_code}' "http://127.0.0.1:$P_REUSE/") "; done
assert_eq "$codes" "$(printf '200 %.0s' $(seq 1 20))" "20 requests over kept connections"
accepted=$(( $(status_field accepted) - accepted0 - 1 ))   # the status request has its own
if [ "$accepted" -le 5 ]; then
    log "ok: connections were kept ($accepted accepted for 20 requests)"
else
    fail "connections were not kept: $accepted accepted for 20 requests"
fi

# A slow request must not hold up a second client, whichever kept connection httpd picks.
for round in 1 2; do
    curl -s -o /dev/null -m 20 -w '%{http_code} %{time_total}' \
        "http://127.0.0.1:$P_REUSE/sleep?ms=1500" > "$T/slow.res" &
    slow=$!
    sleep 0.3
    faster_than 1.0 "$(curl -s -o /dev/null -m 20 -w '%{http_code} %{time_total}' \
        "http://127.0.0.1:$P_REUSE/")" "round $round: second client served while a slow request runs"
    wait "$slow"
    faster_than 2.5 "$(cat "$T/slow.res")" "round $round: the slow request itself"
done
# Two slow requests at once run side by side on the two workers.
both=()
for c in a b; do
    curl -s -o /dev/null -m 20 -w '%{http_code} %{time_total}' \
        "http://127.0.0.1:$P_REUSE/sleep?ms=1000" > "$T/both.$c" &
    both+=("$!")
done
wait "${both[@]}"
faster_than 1.8 "$(cat "$T/both.a")" "two concurrent slow requests (first)"
faster_than 1.8 "$(cat "$T/both.b")" "two concurrent slow requests (second)"

# queue_timeout (1 s here) with REQUEST_START from Apache: with both workers busy for 2 s,
# a request through the trusted vhost waits in the listen queue and is then answered 503.
# Two connections that arrive together could both wake the same worker (the listen socket is
# in every worker's epoll set with EPOLLEXCLUSIVE): it took one and the other waited for it
# while the second worker idled, so the third request found a free worker. The handoff
# thread now accepts and passes such a waiting connection after keepalive_handoff_after;
# the scenario is still tried twice, as a margin for a slow machine.
for attempt in 1 2; do
    rejected0=$(status_field rejected_deadline)
    busy=()
    for _ in a b; do
        curl -s -o /dev/null -m 20 "http://127.0.0.1:$P_PLAIN/sleep?ms=2000" &
        busy+=("$!")
    done
    sleep 0.3
    get "$P_TRUST" / tenant.example > /dev/null
    st=$(last_status)
    wait "${busy[@]}"
    [ "$st" = 503 ] && break
    log "queue deadline attempt $attempt: got $st, trying again"
done
assert_eq "$st" 503 "queue deadline from Apache's REQUEST_START: 503"
assert_eq "$(( $(status_field rejected_deadline) - rejected0 ))" 1 "counted as rejected_deadline"

# tenancyd closes kept connections idle for keepalive_timeout (1 s); httpd must notice and
# connect again rather than fail.
sleep 1.5
assert_eq "$(get "$P_REUSE" / idle.example)" "hello from idle.example" "request after the kept connections idled out"
assert_eq "$(get "$P_TCP" / idle.example)" "hello from idle.example" "the same over TCP (default keepalive)"

# ---- enablereuse=on: a request body the app does not read ----------------------------------------
# hello's / never reads the body. What is left of it in the kept connection must be skipped,
# not parsed as the next FastCGI request. The body below is a run of empty 8-byte management
# records, then a whole request for /smuggled (keep-conn, REMOTE_ADDR and Host of the sender's
# choosing), then filler: 20000 bytes, so that part of it is always left unread, with the
# records within the first 8 KiB, which httpd sends as one STDIN record. Of the eight shifts,
# one lines the records up with wherever tenancyd would resume reading.
fcgi_rec() {   # fcgi_rec TYPE CONTENT_FILE: one record, request id 1
    local n
    n=$(stat -c %s "$2")
    printf "\\001\\$(printf %03o "$1")\\000\\001\\$(printf %03o $((n >> 8)))\\$(printf %03o $((n & 255)))\\000\\000"
    cat "$2"
}
fcgi_nv() { printf "\\$(printf %03o ${#1})\\$(printf %03o ${#2})%s%s" "$1" "$2"; }
printf '\000\001\001\000\000\000\000\000' > "$T/begin.bin"   # responder, keep the connection
{
    fcgi_nv REQUEST_METHOD GET
    fcgi_nv REQUEST_URI /smuggled
    fcgi_nv HTTP_HOST smuggled.example
    fcgi_nv REMOTE_ADDR 127.0.0.1
} > "$T/params.bin"
: > "$T/empty.bin"
{
    fcgi_rec 1 "$T/begin.bin"
    fcgi_rec 4 "$T/params.bin"
    fcgi_rec 4 "$T/empty.bin"
    fcgi_rec 5 "$T/empty.bin"
} > "$T/smuggled.bin"
for _ in $(seq 1 985); do printf '\001\013\000\000\000\000\000\000'; done > "$T/sled.bin"
bad_follow=0
for shift in 0 1 2 3 4 5 6 7; do
    {
        head -c "$shift" /dev/zero | tr '\0' x
        cat "$T/sled.bin" "$T/smuggled.bin"
    } > "$T/post.bin"
    size=$(stat -c %s "$T/post.bin")
    head -c $((20000 - size)) /dev/zero | tr '\0' y >> "$T/post.bin"
    code=$(curl -s -o /dev/null -m 10 -w '%{http_code}' --data-binary @"$T/post.bin" \
        "http://127.0.0.1:$P_REUSE/")
    [ "$code" = 200 ] || fail "POST with an unread body (shift $shift): status $code"
    after=$(get "$P_REUSE" / "after$shift.example")
    if [ "$after" != "hello from after$shift.example" ] || [ "$(last_status)" != 200 ]; then
        bad_follow=$((bad_follow + 1))
        log "after the unread body (shift $shift) the next client got status $(last_status): '$after'"
    fi
done
assert_eq "$bad_follow" 0 "the next client on the kept connection gets its own answer"
access_log_settled
assert_eq "$(grep -c '"uri":"/smuggled"' "$T/access.log")" 0 \
    "an unread request body is never run as a FastCGI request"
assert_eq "$(tn_log_count 'malformed FastCGI')" 0 \
    "no 'malformed FastCGI stream' from a well-formed client (leftover body)"

apache_stop
stop_checked "$TN_PID" "tenancyd (unix socket)"
stop_checked "$TCP_PID" "tenancyd (TCP)"
assert_eq "$STOP_RC" 0 "tenancyd (TCP): exit status after SIGTERM"
