#!/bin/bash
# pm.sh — the process manager behind a real nginx: a worker killed under POSTs costs at most
# the requests in flight (each a 502 in nginx's log), is respawned and requests keep
# succeeding; request_timeout answers 504, kills and logs the request; slow_request logs
# without killing; pm.max_requests recycles with jitter; ondemand scales from zero and back;
# dynamic keeps its spares and retires those above pm.max_spare only after pm.idle_timeout;
# a crash storm engages the brake, visible in the status.
# A request_timeout is not counted as a crash.
# A worker that does not take its SIGALRM is killed two seconds after it.
# ondemand never runs more than pm.max_children workers.
# dynamic keeps spares at pm.max_spare (it retires only those above it).
# dynamic counts a worker still starting as a spare.
# dynamic starts pm.start workers.
# dynamic retires the longest-lived of the idle spares first.
# The brake engages at the pm.crash_limit-th crash, not later.
# Crashes far apart (a crash-free pm.crash_window between them) never add up to a long backoff.
# A slow request is logged and counted once.
. "$(dirname "$0")/lib.sh"
need curl nginx "$HELPERS/hammer" "$HELPERS/json_check"

# ---- kill -9 of a worker under POSTs ----------------------------------------------------------
# POSTs on 4 connections while one worker is killed. nginx does not retry (fastcgi_next_upstream
# off), so what the kill cost shows: at most the requests in flight at that moment (4, one per
# connection) may get 502, each with its line in nginx's error log (none retried silently);
# every other POST comes back to the byte.
tn_conf "pm.max_children = 2" "request_timeout = 2s" "slow_request = 500ms"
tn_start
nginx_start
POST_BODY="pm-$RANDOM$RANDOM-$(head -c 500 /dev/zero | tr '\0' 'k')"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 4 -d 2 -H 'p%d.example' -N 20 -u /echo -m POST \
    -b "$POST_BODY" -e "$POST_BODY" --exact --expect-status any --json "$T/kill.json" \
    2> "$T/kill.log" &
poster=$!
sleep 0.7
before=$(tn_workers | tr '\n' ' ')
victim=$(tn_workers | head -1)
kill -9 "$victim"
wait_until 5 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 2 ] && ! kill -0 $victim" ||
    fail "worker $victim was not replaced"
wait "$poster"
log "POSTs across the kill: $(tail -1 "$T/kill.log")"
jk() { local v; v=$("$HELPERS/json_check" "$1" < "$T/kill.json" 2> /dev/null); echo "${v:-0}"; }
n200=$(jk .status.200)
n502=$(jk .status.502)
assert_ge "$n200" 100 "POSTs answered across the kill"
assert_eq "$(jk .wrong)" 0 "every POST answered 200 echoed its body to the byte"
assert_eq "$(($(jk .responses) - n200 - n502)):$(jk .errors.connect):$(jk .errors.reset):$(jk .errors.timeout)" \
    "0:0:0:0" "nothing but 200 and 502, no transport error"
[ "$n502" -le 4 ] && log "ok: the kill cost $n502 POST(s), at most the 4 in flight" ||
    fail "the kill of one worker cost $n502 POSTs (at most the 4 in flight)"
nerr=$(nginx_upstream_errors | wc -l)
assert_eq "$nerr" "$n502" "each 502 has its line in nginx's error log, no other upstream error"
: > "$T/nginx-error.log"
after=$(tn_workers | tr '\n' ' ')
log "workers before: $before after: $after"
ok=0
for i in $(seq 1 20); do
    [ "$(http / k$i.example)" = "hello from k$i.example" ] && ok=$((ok + 1))
done
assert_eq "$ok" 20 "requests after the kill"
assert_contains "$(cat "$T/tenancyd.log")" "died from signal 9" "the death is logged"
assert_contains "$(http /_tenancy/status)" '"crashes":1' "the crash is counted"

# ---- slow_request and request_timeout ------------------------------------------------------
body=$(http '/sleep?ms=800' slow.example)
assert_eq "$(last_status)" 200 "a slow request still answers"
wait_until 3 grep -q 'slow request' "$T/tenancyd.log" || fail "slow request not logged"
assert_contains "$(grep 'slow request' "$T/tenancyd.log")" "GET /sleep" "slow log names the request"
assert_eq "$(tn_log_count 'slow request')" 1 "a slow request logged once, not at every look"
assert_contains "$(http /_tenancy/status)" '"slow_requests":1' "a slow request counted once"
pids=$(tn_workers | tr '\n' ' ')
t0=$SECONDS
body=$(http '/sleep?ms=10000' stuck.example)
assert_eq "$(last_status)" 504 "request_timeout answers 504"
[ $((SECONDS - t0)) -le 4 ] || fail "the timeout took $((SECONDS - t0)) s"
wait_until 5 grep -q 'request timed out' "$T/tenancyd.log" || fail "timeout not logged"
line=$(grep 'request timed out' "$T/tenancyd.log" | tail -1)
assert_contains "$line" "GET /sleep" "the timeout log names the request"
assert_contains "$line" "worker" "the timeout log names the worker"
wait_until 5 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 2 ]" || fail "no replacement after timeout"
assert_eq "$(http / after.example)" "hello from after.example" "served after the timeout kill"
status=$(http /_tenancy/status)
assert_contains "$status" '"timeouts":1' "timeouts counted"
assert_contains "$status" '"crashes":1' "a request_timeout is not counted as a crash (the kill's only)"
# A worker that does not take its SIGALRM (stopped here) is killed two seconds later.
http '/sleep?ms=10000' frozen.example > /dev/null &
req=$!
sleep 0.3
http /_tenancy/status > "$T/status.json"
frozen=""
n=$("$HELPERS/json_check" '.workers#' < "$T/status.json")
for ((i = 0; i < n; i++)); do
    case $("$HELPERS/json_check" ".workers[$i].request.uri" < "$T/status.json" 2> /dev/null) in
    /sleep*) frozen=$("$HELPERS/json_check" ".workers[$i].pid" < "$T/status.json") ;;
    esac
done
[ -n "$frozen" ] || fail "no worker found serving the request to freeze"
kill -STOP "$frozen"
wait_until 6 bash -c "! kill -0 $frozen" || fail "worker $frozen, which did not take its SIGALRM, was not killed"
wait "$req"
assert_contains "$(grep 'request timed out' "$T/tenancyd.log" | tail -1)" "worker $frozen killed" \
    "the worker that did not take its SIGALRM killed at request_timeout"
assert_eq "$(nginx_upstream_errors | wc -l)" 1 "the killed worker's request is the one upstream error"
: > "$T/nginx-error.log"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- pm.max_requests with jitter ------------------------------------------------------------
tn_conf "pm.max_children = 2" "pm.max_requests = 20" "pm.max_requests_jitter = 25" "keepalive_timeout = 0"
tn_start
first=$(tn_workers | tr '\n' ' ')
for i in $(seq 1 120); do http / r$i.example > /dev/null; done
recycled=$(grep -c 'recycling after' "$T/tenancyd.log")
assert_ge "$recycled" 3 "workers recycled by pm.max_requests"
counts=$(grep -o 'recycling after [0-9]*' "$T/tenancyd.log" | awk '{print $3}' | sort -u | tr '\n' ' ')
log "requests served before recycling: $counts"
for n in $counts; do
    [ "$n" -ge 15 ] && [ "$n" -le 25 ] || fail "recycle count $n outside 20 +/- 25%"
done
assert_eq "$(grep -c 'died from signal' "$T/tenancyd.log")" 0 "recycling is not a crash"
assert_nginx_clean "workers recycled under nginx's kept connections"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- ondemand: zero workers, scale up under load, back to zero ---------------------------------
tn_conf "pm = ondemand" "pm.max_children = 3" "pm.idle_timeout = 1s"
tn_start
wait_until 5 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 0 ]" || fail "ondemand did not go to zero"
log "workers at rest: $(pgrep -P "$TN_PID" | wc -l)"
assert_eq "$(http / od.example)" "hello from od.example" "first request spawns a worker"
# Four concurrent requests for three workers at most: the fourth waits for one of them.
jobs_=()
for i in 1 2 3 4; do http '/sleep?ms=1500' od$i.example > /dev/null & jobs_+=($!); done
busy=0
for _ in $(seq 1 25); do   # the most workers seen while the four are served
    sleep 0.1
    n=$(pgrep -P "$TN_PID" | wc -l)
    [ "$n" -gt "$busy" ] && busy=$n
done
wait "${jobs_[@]}"
assert_eq "$busy" 3 "ondemand scaled up to pm.max_children = 3 under 4 concurrent requests, not above"
wait_until 6 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 0 ]" || fail "idle workers did not exit"
log "ok: back to zero workers after pm.idle_timeout"
assert_eq "$(http / od2.example)" "hello from od2.example" "served again after scaling to zero"
assert_nginx_clean "ondemand workers left and came back under nginx's kept connections"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- dynamic: spares ----------------------------------------------------------------------
tn_conf "pm = dynamic" "pm.max_children = 4" "pm.start = 1" "pm.min_spare = 2" "pm.max_spare = 2" \
    "pm.idle_timeout = 1s"
tn_start
wait_until 5 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 2 ]" || fail "dynamic did not reach min_spare"
log "ok: dynamic started 1 and grew to min_spare=2"
# Two idle workers are pm.max_spare, not above it: neither is retired (and replaced) after
# pm.idle_timeout.
spares=$(tn_workers | tr '\n' ' ')
sleep 2.5
assert_eq "$(tn_workers | tr '\n' ' ')" "$spares" "the spares at pm.max_spare kept past pm.idle_timeout"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- dynamic: a worker still starting counts as a spare ---------------------------------------
# The second worker (greet's index 1) takes 2 s to start: with it the pool has its
# pm.min_spare = 2, and no third worker is started meanwhile. At pm.max_children = 2, the pool
# is full but nothing is busy: no spawn is wanted, and none is reported as refused.
echo slow > "$T/slow"
for max in 4 2; do
    tn_conf "app = $top_builddir/tests/helpers/.libs/greet_v1.so" "pm = dynamic" \
        "pm.max_children = $max" "pm.start = 1" "pm.min_spare = 2" "pm.max_spare = 2"
    rm -f "$T/slow.pid"
    GREET_SLOW_INIT=$T/slow GREET_SLOW_INDEX=1 tn_start
    wait_until 5 test -s "$T/slow.pid" || fail "the slow second worker did not start"
    sleep 1
    assert_eq "$(tn_workers | wc -l)" 2 "no third worker while the second starts (pm.max_children = $max)"
    assert_contains "$(http /_tenancy/status)" '"max_children_reached":0' \
        "no spawn wanted while the second worker starts (pm.max_children = $max)"
    assert_eq "$(tn_log_count 'pm.max_children reached')" 0 "no 'all workers busy' while one starts"
    kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
done

# ---- dynamic: pm.start workers at launch ---------------------------------------------------
tn_conf "pm = dynamic" "pm.max_children = 4" "pm.start = 3" "pm.min_spare = 1" "pm.max_spare = 3"
tn_start
assert_contains "$(grep ' ready: ' "$T/tenancyd.log")" "generation 1, 3 workers" "ready with pm.start = 3 workers"
assert_eq "$(tn_workers | wc -l)" 3 "pm.start = 3 workers running"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- dynamic: spares above max_spare leave after pm.idle_timeout, not in the first lull ----
# A burst grows the pool; when it stops, every worker is idle and above pm.max_spare, but a
# worker that served a moment ago keeps what it has open (tenants' files, catalogs): it is
# retired only once it has served nothing for pm.idle_timeout.
tn_conf "pm = dynamic" "pm.max_children = 4" "pm.start = 1" "pm.min_spare = 1" "pm.max_spare = 1" \
    "pm.idle_timeout = 3s"
tn_start
"$HELPERS/hammer" -p "$NGINX_PORT" -c 4 -d 2.5 -H 'b%d.example' -N 8 -u '/sleep?ms=200' \
    --json "$T/burst.json" 2> "$T/burst.log" &
burst=$!
wait_until 3 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -ge 3 ]" || fail "the burst did not grow the pool"
wait "$burst"
grown=$(pgrep -P "$TN_PID" | wc -l)
sleep 1.2   # a lull, under pm.idle_timeout
lull=$(pgrep -P "$TN_PID" | wc -l)
assert_ge "$lull" 3 "workers kept through a 1.2 s lull (pm.idle_timeout 3s; $grown after the burst)"
wait_until 8 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 1 ]" ||
    fail "the idle spares were not retired after pm.idle_timeout: $(pgrep -P "$TN_PID" | wc -l) left"
log "ok: back to pm.max_spare = 1 once they had been idle for pm.idle_timeout"
assert_nginx_clean "spares retired under nginx's kept connections"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- dynamic: of the idle spares past pm.idle_timeout, the longest-lived is retired first ----
# The first worker (a) serves a 3 s request, so a second (b) is started, which takes a 4 s one,
# so a third (c) is started. When b's request ends, three are idle, one above pm.max_spare:
# a and c have both been idle past pm.idle_timeout, and a, the longest-lived, is retired.
tn_conf "pm = dynamic" "pm.max_children = 4" "pm.start = 1" "pm.min_spare = 1" "pm.max_spare = 2" \
    "pm.idle_timeout = 1s"
tn_start
a=$(tn_workers)
http '/sleep?ms=3000' long-a.example > /dev/null &
ra=$!
wait_until 3 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 2 ]" || fail "no second worker beside a busy one"
sleep 0.3
b=$(tn_workers | grep -v -x "$a")
http '/sleep?ms=4000' long-b.example > /dev/null &
rb=$!
wait_until 3 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 3 ]" || fail "no third worker beside two busy ones"
c=$(tn_workers | grep -v -x -e "$a" -e "$b")
wait "$ra" "$rb"
wait_until 3 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 2 ]" || fail "no spare retired above pm.max_spare"
assert_eq "$(tn_workers | tr '\n' ' ')" "$(printf '%s\n' "$b" "$c" | sort -n | tr '\n' ' ')" \
    "the longest-lived idle spare (a) retired; b and c kept"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- crash storm: the brake engages and shows in the status ----------------------------------
tn_conf "pm.max_children = 2" "pm.crash_limit = 4" "pm.crash_window = 10s" "pm.respawn_backoff_max = 2s"
tn_start
for i in $(seq 1 8); do http /crash c$i.example > /dev/null; sleep 0.1; done
wait_until 5 grep -q 'respawn brake engaged' "$T/tenancyd.log" || fail "brake not engaged"
# The crashes come one after the other (each request waits for its answer): the brake engages
# at the pm.crash_limit-th, not later.
assert_contains "$(grep 'respawn brake engaged' "$T/tenancyd.log")" "crash storm: 4 workers crashed within" \
    "the brake engaged at the 4th crash (pm.crash_limit = 4)"
assert_contains "$(http /_tenancy/status)" '"brake":true' "brake visible in status"
kill -0 "$TN_PID" && log "ok: master alive through the storm" || fail "master died"
wait_until 20 grep -q 'respawn brake released' "$T/tenancyd.log" || fail "brake never released"
assert_eq "$(http / calm.example)" "hello from calm.example" "served after the storm"
# Each /crash request costs its own worker and answer (502), and nothing else.
nerr=$(nginx_upstream_errors | wc -l)
[ "$nerr" -le 8 ] && log "ok: $nerr upstream errors in nginx's log, at most the 8 crashes" ||
    fail "$nerr upstream errors in nginx's log for 8 crashing requests"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- crashes far apart: each respawn after the shortest backoff, none adding up ---------------
# Six crashes, each after a crash-free pm.crash_window: each replacement is back within 0.6 s
# (in a row, the sixth would wait 50 ms doubled five times).
tn_conf "pm.max_children = 2" "pm.crash_window = 1s" "pm.respawn_backoff_max = 5s"
tn_start
back=""
for i in $(seq 1 6); do
    http /crash "far$i.example" > /dev/null
    sleep 0.6
    back="$back$(tn_workers | wc -l) "
    sleep 0.8
done
assert_eq "$back" "2 2 2 2 2 2 " "each of 6 crashes far apart replaced at once (the backoff starts again)"
