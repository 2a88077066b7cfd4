#!/bin/bash
# keep_conn.sh — a request nginx sends on a kept FastCGI connection is never lost.
#
# With the recommended `fastcgi_next_upstream off` nginx retries nothing: if tenancyd closes a
# kept connection at the moment nginx reuses it, the client gets 502 (nginx's default would
# retry a GET silently, never a POST). Each phase drives POSTs (echoed, each answer compared
# with its body) and GETs beside them through a real nginx with `fastcgi_keep_conn on` and
# upstream `keepalive`, in one of the situations where a worker used to close kept
# connections, and requires no 5xx and no upstream error in nginx's log:
#   many   more connections than a worker used to hold (it closed the least recently used,
#          often one with a request waiting in it);
#   recycle workers recycle every few requests (pm.max_requests), holding kept connections;
#   bursts bursts after pauses while other workers are idle (a busy worker frees itself of
#          its idle kept connections just as nginx takes them from its cache);
#   spread kept connections piled up on one worker are passed to an idle one while the
#          other serves (nginx's next request may be on one in flight).
# Then the guarantee that made the worker free itself still holds: a request on a kept
# connection is served while the worker that held it is busy.
. "$(dirname "$0")/lib.sh"
need curl nginx "$HELPERS/hammer"
HAMMER=$HELPERS/hammer
# The POSTs go to /echo, each answer compared with the body to the byte.
BODY="keep-$RANDOM$RANDOM-$(head -c 1500 /dev/zero | tr '\0' 'p')"

# load NAME SECONDS CONNECTIONS PATH [METHOD]: hammer in the background; its pid in $!.
load() {
    local name=$1 secs=$2 conns=$3 path=$4 method=${5:-GET}
    local body=()
    [ "$method" = POST ] && body=(-b "$BODY" -e "$BODY" --exact)
    "$HAMMER" -p "$NGINX_PORT" -d "$secs" -c "$conns" -u "$path" -m "$method" "${body[@]}" \
        --timeout 10000 --json "$T/$name.json" 2>> "$T/$name.err" &
}

# check PHASE NAME...: every run of the phase answered 2xx (each POST its body back, to the
# byte), and nginx logged no upstream error: with fastcgi_next_upstream off a kept connection
# closed under nginx is a lost request, never a silent retry.
check() {
    local phase=$1
    shift
    local bad=0 total=0 name
    for name in "$@"; do
        grep -q . "$T/$name.err" || { fail "$phase: hammer $name said nothing"; continue; }
        # "status 200=N 502=M; ..." — any status other than 2xx, and any error, is a loss.
        bad=$((bad + $(grep -o 'status [^;]*' "$T/$name.err" | tr ' ' '\n' | grep -v '^2..=' |
            grep -o '=[0-9]*' | tr -d = | awk '{s+=$1} END {print s+0}')))
        bad=$((bad + $(grep -o 'errors [^;]*' "$T/$name.err" | grep -o '=[0-9]*' | tr -d = |
            awk '{s+=$1} END {print s+0}')))
        bad=$((bad + $(grep -o 'wrong [0-9]*' "$T/$name.err" | awk '{s+=$2} END {print s+0}')))
        total=$((total + $(grep -o 'status [^;]*' "$T/$name.err" | grep -o '=[0-9]*' | tr -d = |
            awk '{s+=$1} END {print s+0}')))
    done
    log "$phase: $total responses, $bad lost"
    assert_ge "$total" 200 "$phase: the load ran"
    assert_eq "$bad" 0 "$phase: no request lost (no 502), no POST answered wrong"
    assert_nginx_clean "$phase: nginx never found a kept connection closed under it"
    : > "$T/nginx-error.log"
}

# ---- many: 1 worker, 150 connections at once (a worker used to hold 64) ---------------------
tn_conf "pm.max_children = 1" "log_requests = off" "request_timeout = 20s"
tn_start
nginx_start
assert_eq "$(http / a.example)" "hello from a.example" "served through nginx"
load many-post 3 150 /echo POST
p1=$!
load many-get 3 8 / GET
p2=$!
wait "$p1" "$p2"
check many many-post many-get
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
: > "$T/nginx-error.log"

# ---- recycle: workers leave every ~40 requests while nginx reuses their connections -------
tn_conf "pm.max_children = 3" "log_requests = off" "pm.max_requests = 40" \
    "pm.max_requests_jitter = 25"
tn_start
load recycle-post 3 24 /echo POST
p1=$!
load recycle-get 3 4 '/sleep?ms=5' GET
p2=$!
wait "$p1" "$p2"
check recycle recycle-post recycle-get
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
: > "$T/nginx-error.log"

# ---- bursts: 6 workers; bursts 1.2 s apart, so that nginx's cached connections go stale ----
tn_conf "pm.max_children = 6" "log_requests = off"
tn_start
for r in 1 2 3 4 5; do
    load burst-post 0.6 48 /echo POST
    p1=$!
    load burst-get 0.6 4 '/sleep?ms=20' GET
    p2=$!
    wait "$p1" "$p2"
    sleep 1.2
done
check bursts burst-post burst-get

# ---- not pinned: a request on a kept connection held by a busy worker is still served -----
# The workers serve requests on several kept connections, then one worker is made
# busy for 3 s; the next requests (some on connections the busy worker holds) must not wait
# for it: the busy worker passes its idle kept connections to the others.
warm=()
for i in 1 2 3 4 5 6 7 8; do
    curl -s -m 10 -o /dev/null "http://127.0.0.1:$NGINX_PORT/sleep?ms=50" &
    warm+=("$!")
done
wait "${warm[@]}"
sleep 1.1   # idle long enough to be passed on
curl -s -m 10 -o /dev/null -H 'Host: busy.example' "http://127.0.0.1:$NGINX_PORT/sleep?ms=3000" &
busy=$!
sleep 0.3
t0=$(date +%s%N)
for i in 1 2 3 4 5 6; do
    [ "$(http / "q$i.example")" = "hello from q$i.example" ] || fail "request $i during the busy one"
done
ms=$((($(date +%s%N) - t0) / 1000000))
wait "$busy"
log "6 requests beside a busy worker took ${ms} ms"
if [ "$ms" -lt 1500 ]; then log "ok: no request waited for the busy worker"; else
    fail "requests waited for the busy worker (${ms} ms)"; fi
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
: > "$T/nginx-error.log"

# ---- spread: kept connections opened while one worker was busy end up evenly held ---------
# nginx opens its kept connections in a burst; here all of them reach one worker (the other
# is in a slow request), which a scheduler can do by chance to any burst. Under the next load
# the worker holding more passes idle kept connections to the idle one until they hold about
# as many, instead of serving the pool's load alone while the other waits.
tn_conf "pm.max_children = 2" "log_requests = off"
tn_start
# held_by: the sockets each worker of this tenancyd holds (the same few of its own each,
# besides the connections), in pid order (the master's children: no hub, no job workers)
held_by() {
    local w
    for w in $(pgrep -P "$TN_PID" | sort -n); do
        ls -l "/proc/$w/fd" 2> /dev/null | grep -c socket
    done | tr '\n' ' '
}
released() { http /_tenancy/status | grep -o '"keepalive_released":[0-9]*' | cut -d: -f2; }
curl -s -m 10 -o /dev/null -H 'Host: slow.example' "http://127.0.0.1:$NGINX_PORT/sleep?ms=1500" &
slow=$!
sleep 0.2
load spread-1 0.8 16 / GET
wait "$!"
wait "$slow"
read -r s1 s2 _ <<< "$(held_by)"
log "after the burst beside a busy worker: sockets per worker $s1 and $s2"
assert_ge "$(( s1 > s2 ? s1 - s2 : s2 - s1 ))" 8 "the burst's connections piled up on one worker"
r0=$(released)
load spread-2 2 16 / GET
wait "$!"
check spread spread-1 spread-2
read -r s1 s2 _ <<< "$(held_by)"
log "after a load on them: sockets per worker $s1 and $s2; passed on: $r0 before, $(released) after"
assert_ge 2 "$(( s1 > s2 ? s1 - s2 : s2 - s1 ))" \
    "the kept connections evened out over the workers (a difference of at most 2)"
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
: > "$T/nginx-error.log"

# ---- ondemand: the last worker leaves on pm.idle_timeout; its kept connections stay -------
# It passes them to the master, which keeps them open and starts a worker when a request
# arrives on one: nginx's next request is served on a connection it kept (no new accept),
# never raced by a close.
tn_conf "pm = ondemand" "pm.max_children = 2" "pm.idle_timeout = 1s" "log_requests = off"
tn_start
accepted() { http /_tenancy/status | grep -o '"accepted":[0-9]*' | head -1 | cut -d: -f2; }
for i in 1 2 3; do
    [ "$(http / "od$i.example")" = "hello from od$i.example" ] || fail "ondemand request $i"
done
a1=$(accepted)
wait_until 10 bash -c "[ -z \"\$(pgrep -P $TN_PID)\" ]" || fail "the ondemand worker did not leave"
log "workers left: $(pgrep -P "$TN_PID" | wc -l); the master holds $(ls -l /proc/"$TN_PID"/fd 2> /dev/null | grep -c socket) sockets"
t0=$(date +%s%N)
out=$(curl -s -m 10 -X POST --data-binary "@$T/tenancyd.conf" -H 'Host: after.example' \
    -w ' %{http_code}' "http://127.0.0.1:$NGINX_PORT/")
ms=$((($(date +%s%N) - t0) / 1000000))
assert_eq "${out##* }" 200 "a POST after the last worker left is answered ($ms ms)"
a2=$(accepted)
log "connections accepted: $a1 before the worker left, $a2 after the POST and this status request"
assert_eq "$a2" "$a1" "served on the connections nginx kept (no new connection accepted)"
assert_nginx_clean "ondemand: the POST after the last worker left"

# ---- order: one worker serves the requests waiting on its connections in the order they came
# (fcgi_probe serve-order: served once on a, b, c; a slow request; then written c, b, a).
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
tn_conf "pm.max_children = 1" "access_log_buffer = 0"
tn_start
out=$("$HELPERS/fcgi_probe" -t 10 "$T/fcgi.sock" serve-order 2>&1)
assert_contains "$out" "serve-order: PASS" "every request of the serve-order probe answered"
order=$(grep -o '"host":"order-[abc]' "$T/access.log" | tail -3 | cut -d- -f2 | tr -d '\n')
assert_eq "$order" "cba" "the waiting requests served in the order they came"

exit 0
