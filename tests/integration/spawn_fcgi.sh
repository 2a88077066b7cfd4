#!/bin/bash
# spawn_fcgi.sh — tenancyd started by spawn-fcgi, which creates the unix socket and execs the
# program with it on fd 0 (`listen = inherit`). In the foreground (-n, the way daemontools or
# systemd run it) with nginx in front and cgi-fcgi as a second, independent client; then
# daemonised (-P pidfile). Each time SIGTERM stops tenancyd and its workers.
. "$(dirname "$0")/lib.sh"
need curl nginx spawn-fcgi cgi-fcgi "$TENANCYD"

alive() {   # a live process (a zombie nobody has waited for yet is not)
    local s
    s=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$s" ] && [ "${s#Z}" = "$s" ]
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
DPID=
# shellcheck disable=SC2154
trap 'rc_=$?; stop_quietly "$TN_PID" "$DPID"; (exit $rc_); cleanup' EXIT

# One request with cgi-fcgi, which sends its whole environment as the FastCGI params (hence
# env -i) and never keeps the connection. Bounded by timeout: cgi-fcgi itself never gives up.
cgi_get() {   # cgi_get SOCKET URI [HOST]
    env -i REQUEST_METHOD=GET REQUEST_URI="$2" HTTP_HOST="${3:-cgi.example}" \
        REMOTE_ADDR=127.0.0.1 SERVER_PROTOCOL=HTTP/1.1 \
        "$(command -v timeout)" 10 "$(command -v cgi-fcgi)" -bind -connect "$1" < /dev/null
}
cgi_post() {   # cgi_post SOCKET URI FILE
    env -i REQUEST_METHOD=POST REQUEST_URI="$2" HTTP_HOST=cgi.example CONTENT_LENGTH="$(stat -c %s "$3")" \
        CONTENT_TYPE=application/octet-stream REMOTE_ADDR=127.0.0.1 SERVER_PROTOCOL=HTTP/1.1 \
        "$(command -v timeout)" 10 "$(command -v cgi-fcgi)" -bind -connect "$1" < "$3"
}
body_of() { sed '1,/^\r\{0,1\}$/d'; }   # a CGI response without its headers

# ---- spawn-fcgi -n: tenancyd in the foreground, under the test's control ------------------------

tn_conf "listen = inherit"
: > "$T/tenancyd.log"
TENANCY_HELLO_TEST_ROUTES=1 spawn-fcgi -n -s "$T/fcgi.sock" -M 0600 -- \
    "$TENANCYD" -c "$T/tenancyd.conf" >> "$T/tenancyd.log" 2>&1 &
TN_PID=$!
PIDS+=("$TN_PID")
wait_until 10 grep -q ' ready: ' "$T/tenancyd.log" || fatal "tenancyd under spawn-fcgi did not become ready"
assert_contains "$(ps -o args= -p "$TN_PID")" "tenancyd -c" "spawn-fcgi -n exec'ed tenancyd in its own process"
assert_contains "$(cat "$T/tenancyd.log")" "listening on inherit" "tenancyd took the socket from fd 0"
[ -S "$T/fcgi.sock" ] && log "ok: spawn-fcgi created the socket" || fail "no socket at $T/fcgi.sock"
assert_eq "$(stat -c %a "$T/fcgi.sock")" 600 "socket mode from spawn-fcgi -M"

nginx_start
assert_eq "$(http / acme.example.com)" "hello from acme.example.com" "hello through nginx"
assert_eq "$(last_status)" 200 "status 200"
head -c 150000 /dev/urandom | base64 -w0 > "$T/body"
got=$(curl -s -m 20 --data-binary @"$T/body" "http://127.0.0.1:$NGINX_PORT/echo")
[ "$got" = "$(cat "$T/body")" ] && log "ok: 200 KB body echoed through nginx" || fail "echoed body differs"
status=$(http /_tenancy/status)
assert_contains "$status" '"pm":"static"' "status path through nginx"

# cgi-fcgi on the same socket, on its own and while nginx's request keeps one worker busy.
out=$(cgi_get "$T/fcgi.sock" / CGI.Example:9000)
assert_contains "$out" "Status: 200" "cgi-fcgi: status"
assert_eq "$(printf '%s\n' "$out" | body_of)" "hello from cgi.example" "cgi-fcgi: hello"
assert_eq "$(cgi_get "$T/fcgi.sock" /_tenancy/ping | body_of)" "pong" "cgi-fcgi: ping"
head -c 30000 /dev/urandom | base64 -w0 > "$T/small"
assert_eq "$(cgi_post "$T/fcgi.sock" /echo "$T/small" | body_of)" "$(cat "$T/small")" "cgi-fcgi: body echoed"

curl -s -o /dev/null -m 20 "http://127.0.0.1:$NGINX_PORT/sleep?ms=1500" &
slow=$!
sleep 0.3
t0=$(date +%s%N)
out=$(cgi_get "$T/fcgi.sock" / side.example | body_of)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
assert_eq "$out" "hello from side.example" "cgi-fcgi answered while nginx's slow request runs"
[ "$ms" -lt 1000 ] && log "ok: ... in ${ms} ms" || fail "cgi-fcgi waited ${ms} ms behind the slow request"
wait "$slow"
assert_eq "$(http / after.example)" "hello from after.example" "nginx still served after cgi-fcgi"

# SIGTERM: tenancyd and its workers go, with status 0.
[ -n "$(tn_workers)" ] || fail "no workers found under $TN_PID"
stop_checked "$TN_PID" "spawn-fcgi -n"
assert_eq "$STOP_RC" 0 "exit status after SIGTERM"
assert_contains "$(cat "$T/tenancyd.log")" "info: stopped" "tenancyd logged its stop"

# ---- spawn-fcgi -P: daemonised, tenancyd no longer our child ----------------------------------------

cat > "$T/daemon.conf" <<EOF
listen = inherit
app = $HELLO_SO
access_log = $T/access-daemon.log
error_log = $T/tenancyd-daemon.log
pm = static
pm.max_children = 2
EOF
spawn-fcgi -s "$T/daemon.sock" -P "$T/spawn.pid" -- "$TENANCYD" -c "$T/daemon.conf" \
    > "$T/spawn-fcgi.log" 2>&1 || fatal "spawn-fcgi failed: $(cat "$T/spawn-fcgi.log")"
DPID=$(cat "$T/spawn.pid")
PIDS+=("$DPID")
wait_until 10 grep -q ' ready: ' "$T/tenancyd-daemon.log" || fatal "daemonised tenancyd did not become ready"
assert_eq "$(cgi_get "$T/daemon.sock" / daemon.example | body_of)" "hello from daemon.example" \
    "cgi-fcgi to the daemonised tenancyd"
[ -n "$(pgrep -P "$DPID")" ] || fail "no workers found under $DPID"
stop_checked "$DPID" "spawn-fcgi -P (daemonised)"
assert_contains "$(cat "$T/tenancyd-daemon.log")" "info: stopped" "daemonised tenancyd logged its stop"
