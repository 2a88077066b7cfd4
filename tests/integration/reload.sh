#!/bin/bash
# reload.sh — reloads and stops: SIGHUP under GET and POST load with zero failed requests,
# each POST served once and no upstream error in nginx's log; a new build of the app deploys
# with one SIGHUP; an invalid config or an app that cannot start keeps the old generation
# serving; a worker of a new generation killed while another still starts is replaced and
# the reload completes, one that crashes fails it; a reload that fails with some new workers already serving loses no
# request; a changed listen address; SIGUSR1 reopens logs; SIGQUIT lets
# in-flight requests finish; SIGTERM stops by its deadline; a killed master takes its workers
# with it and a restart reclaims the socket.
# A SIGHUP during a reload is queued, and runs once that reload is done.
# SIGTERM after a reload stops an old worker still busy by stop_timeout too.
# A second SIGTERM kills the workers at once.
# An app that the first workers cannot start stops the master with status 1.
# SIGQUIT lets a request in flight finish even past stop_timeout, which bounds SIGTERM only.
. "$(dirname "$0")/lib.sh"
# A worker is sent SIGSEGV on purpose here, and the test checks how its death is handled: in a
# sanitizer build (tests/sanitizers.sh) AddressSanitizer would take the signal, report it and
# abort (signal 6) instead. Not handled, it ends the worker as in any other build.
export ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0"
need curl nginx "$HELPERS/hammer" "$HELPERS/json_check"
MOD=$top_builddir/tests/helpers/.libs

cp "$MOD/greet_v1.so" "$T/app.so"
tn_conf "app = $T/app.so" "pm.max_children = 3" "request_timeout = 5s"
export GREET_SLOW_INIT=$T/slow GREET_SLOW_INDEX=2   # see tests/helpers/greet.c
tn_start
nginx_start
assert_eq "$(http / a.example)" "v1 from a.example" "generation 1 serves v1"

# ---- SIGHUP every 300 ms under load; the app is replaced half-way ---------------------------
# GETs on 8 connections and POSTs on 4 beside them. A reload is graceful: nothing may be lost.
# nginx runs with fastcgi_next_upstream off, so a kept connection closed under it is a 502
# here, not a silent retry; its error log must stay free of upstream errors; each POST body
# must come back to the byte, and tenancyd must have served each POST exactly once (its
# access log holds as many POSTs as the client got answers: nothing was sent twice).
POST_BODY="reload-$RANDOM$RANDOM-$(head -c 600 /dev/zero | tr '\0' 'w')"
# load_start NAME GETS POSTS SECONDS: GETs checked against their host on GETS connections
# ($T/NAME.json, .log; pid in $hammer) and POSTs echoed to the byte on POSTS connections
# ($T/NAME-post.json, .log; pid in $poster), each host a name of its own under NAME.
load_start() {
    "$HELPERS/hammer" -p "$NGINX_PORT" -c "$2" -d "$4" -H "$1%d.example" -N 50 -e 'from %h' \
        --json "$T/$1.json" 2> "$T/$1.log" &
    hammer=$!
    "$HELPERS/hammer" -p "$NGINX_PORT" -c "$3" -d "$4" -H "$1p%d.example" -N 50 -u /echo -m POST \
        -b "$POST_BODY" -e "$POST_BODY" --exact --json "$T/$1-post.json" 2> "$T/$1-post.log" &
    poster=$!
}
load_start hammer 8 4 6
for i in $(seq 1 18); do
    sleep 0.3
    if [ "$i" = 9 ]; then
        cp "$MOD/greet_v2.so" "$T/app.so.new" && mv "$T/app.so.new" "$T/app.so"   # atomic
    fi
    kill -HUP "$TN_PID"
done
wait "$hammer"
rc=$?
wait "$poster"
prc=$?
log "hammer: $(tail -1 "$T/hammer.log")"
log "POSTs: $(tail -1 "$T/hammer-post.log")"
assert_eq "$rc" 0 "no failed or wrong GET during 18 reloads"
assert_eq "$prc" 0 "no failed POST during 18 reloads, each body echoed to the byte"
access_log_settled
posts=$("$HELPERS/json_check" .status.200 < "$T/hammer-post.json")
served=$(grep -c '"method":"POST"' "$T/access.log")
assert_ge "${posts:-0}" 100 "POSTs answered during the reloads"
assert_eq "$served" "${posts:-0}" "each POST served exactly once (tenancyd's access log)"
assert_nginx_clean "18 reloads under GETs and POSTs"
reloads=$(grep -c 'reloaded: generation' "$T/tenancyd.log")
assert_ge "$reloads" 6 "reloads completed under load"
assert_eq "$(http / b.example)" "v2 from b.example" "the new build serves after SIGHUP"
gen=$(http /_tenancy/status | grep -o '"generation":[0-9]*' | head -1 | cut -d: -f2)
log "generation now $gen"
wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 3 ]" || fail "old generations did not leave"

# ---- an invalid configuration keeps the old one -------------------------------------------------
cp "$T/tenancyd.conf" "$T/good.conf"
printf '\npm.max_children = lots\n' >> "$T/tenancyd.conf"
kill -HUP "$TN_PID"
wait_until 5 grep -q 'reload refused' "$T/tenancyd.log" || fail "bad reload not reported"
assert_contains "$(grep 'reload refused' "$T/tenancyd.log")" "tenancyd.conf:" "the refusal names file:line"
assert_eq "$(http / c.example)" "v2 from c.example" "still serving after a refused reload"
gen2=$(http /_tenancy/status | grep -o '"generation":[0-9]*' | head -1 | cut -d: -f2)
assert_eq "$gen2" "$gen" "generation unchanged"
cp "$T/good.conf" "$T/tenancyd.conf"

# ---- an app that fails to start: rollback -----------------------------------------------------
cp "$MOD/greet_bad.so" "$T/app.so.new" && mv "$T/app.so.new" "$T/app.so"
kill -HUP "$TN_PID"
wait_until 10 grep -q 'reload rolled back' "$T/tenancyd.log" || fail "failed app start not rolled back"
assert_eq "$(http / d.example)" "v2 from d.example" "old generation kept serving after rollback"
cp "$MOD/greet_v1.so" "$T/app.so.new" && mv "$T/app.so.new" "$T/app.so"

# ---- a new worker killed while another of its generation starts: replaced, the reload done ----
# Worker #2 of the new generation takes 2 s to start; meanwhile one of the two already ready
# is SIGKILLed (an operator, the OOM killer). The killed worker says nothing against the new
# configuration: another takes its place and the reload completes.
new_workers() {   # pids of the master's children not in "$1"
    local p
    for p in $(tn_workers); do case " $1 " in *" $p "*) ;; *) echo "$p" ;; esac; done
}
before=$(tn_workers | tr '\n' ' ')
done_before=$(tn_log_count 'reloaded: generation')
rolled_before=$(tn_log_count 'reload rolled back')
echo slow > "$T/slow"; rm -f "$T/slow.pid"
kill -HUP "$TN_PID"
wait_until 5 test -s "$T/slow.pid" || fail "the slow worker did not start"
slow=$(cat "$T/slow.pid"); rm -f "$T/slow"
sleep 0.5   # the other two new workers are ready by now (greet starts at once)
victim=$(new_workers "$before $slow" | head -1)
[ -n "$victim" ] || fail "no ready worker of the new generation to kill"
kill -9 "$victim"
wait_until 10 bash -c "[ \$(grep -c 'reloaded: generation' '$T/tenancyd.log') -gt $done_before ]" ||
    fail "the reload did not complete after one of its workers was killed"
assert_eq "$(tn_log_count 'reload rolled back')" "$rolled_before" "no rollback for a killed new worker"
assert_eq "$(http / k.example)" "v1 from k.example" "the new generation serves"
wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 3 ]" || fail "not 3 workers after the reload"

# ---- a new worker that crashes while another still starts: the reload fails ----------------
# (a new build that dies on its first requests must not replace a working one)
before=$(tn_workers | tr '\n' ' ')
rolled_before=$(tn_log_count 'reload rolled back')
echo slow > "$T/slow"; rm -f "$T/slow.pid"
kill -HUP "$TN_PID"
wait_until 5 test -s "$T/slow.pid" || fail "the slow worker did not start"
slow=$(cat "$T/slow.pid"); rm -f "$T/slow"
sleep 0.5
victim=$(new_workers "$before $slow" | head -1)
[ -n "$victim" ] || fail "no ready worker of the new generation to crash"
kill -SEGV "$victim"
wait_until 10 bash -c "[ \$(grep -c 'reload rolled back' '$T/tenancyd.log') -gt $rolled_before ]" ||
    fail "a new worker crashed and the reload was not rolled back"
assert_eq "$(http / m.example)" "v1 from m.example" "the old generation serves after the rollback"
wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 3 ]" || fail "not 3 workers after the rollback"

# ---- a reload that fails with some of its workers serving: they finish, nothing is lost ----
# Worker #2 of the new generation fails its init after 2 s; the other two are serving by then
# (they share the socket). The rollback lets them finish their requests and leave (SIGQUIT),
# as an old generation would: POSTs and GETs sent all along get no error, and no worker is
# killed under a request.
echo fail > "$T/slow"; rm -f "$T/slow.pid"
load_start rb 4 2 4
sleep 0.5
kill -HUP "$TN_PID"
wait_until 5 test -s "$T/slow.pid" || fail "the slow worker did not start"
sleep 1
# Eight 1.5 s requests over the five workers serving (three old, two new), sent 1 s into the
# slow worker's 2 s start, so in flight when the rollback comes: those on a new worker must
# finish there. (1.5 s: two of them queued on one worker still leave the GETs and POSTs
# waiting behind them well inside hammer's 5 s timeout.)
for i in 1 2 3 4 5 6 7 8; do
    http /sleep "s$i.example" > "$T/sleep.$i" &
    sleepers+=($!)
done
wait_until 10 bash -c "[ \$(grep -c 'reload rolled back' '$T/tenancyd.log') -gt $rolled_before ]" ||
    fail "the failed reload was not rolled back"
rm -f "$T/slow"
wait "$hammer"; rc=$?
wait "$poster"; prc=$?
wait "${sleepers[@]}"
for i in 1 2 3 4 5 6 7 8; do
    assert_eq "$(cat "$T/sleep.$i")" "slept in v1" "long request $i in flight during the rollback"
done
log "rollback under load: $(tail -1 "$T/rb.log"); POSTs: $(tail -1 "$T/rb-post.log")"
assert_eq "$rc" 0 "no failed GET while a reload failed with new workers serving"
assert_eq "$prc" 0 "no failed POST while a reload failed with new workers serving"
assert_eq "$(tn_log_count 'did not exit in time')" 0 "no worker killed for lateness"
assert_nginx_clean "a reload rolled back under load"
assert_eq "$(http / l.example)" "v1 from l.example" "the old generation serves after the rollback"

# ---- a new listen address -----------------------------------------------------------------------
tn_conf "app = $T/app.so" "pm.max_children = 3" "listen = $T/fcgi2.sock"
kill -HUP "$TN_PID"
wait_until 10 bash -c "[ -S $T/fcgi2.sock ]" || fail "new socket not created"
wait_until 10 bash -c "[ ! -e $T/fcgi.sock ]" || fail "old socket not removed after its workers left"
kill -QUIT "$(cat "$T/nginx/nginx.pid")"; sleep 0.3
nginx_start "unix:$T/fcgi2.sock"
assert_eq "$(http / e.example)" "v1 from e.example" "served on the new socket"

# ---- a SIGHUP while a reload runs is queued: the newer configuration follows -----------------
# Worker #2 of the next generation takes 2 s to start; a new build and a second SIGHUP come
# meanwhile. The second reload starts once the first is done, and the new build serves.
done_before=$(tn_log_count 'reloaded: generation')
echo slow > "$T/slow"; rm -f "$T/slow.pid"
kill -HUP "$TN_PID"
wait_until 5 test -s "$T/slow.pid" || fail "the slow worker did not start"
rm -f "$T/slow"
cp "$MOD/greet_v2.so" "$T/app.so.new" && mv "$T/app.so.new" "$T/app.so"
kill -HUP "$TN_PID"
wait_until 10 bash -c "[ \$(grep -c 'reloaded: generation' '$T/tenancyd.log') -ge $((done_before + 2)) ]" ||
    fail "the SIGHUP sent during a reload was not acted on"
assert_eq "$(tn_log_count 'reloaded: generation')" "$((done_before + 2))" "the queued reload ran after the first"
assert_eq "$(http / q.example)" "v2 from q.example" "the build of the queued reload serves"

# ---- SIGUSR1 reopens the logs -------------------------------------------------------------------
mv "$T/access.log" "$T/access.log.1"
kill -USR1 "$TN_PID"
wait_until 5 grep -q 'logs reopened' "$T/tenancyd.log" || fail "SIGUSR1 not handled"
http / f.example > /dev/null
wait_until 3 grep -q 'f.example' "$T/access.log" || fail "no line in the new access log"
grep -q 'f.example' "$T/access.log.1" && fail "line written to the rotated file"

# ---- SIGQUIT: the in-flight request finishes ------------------------------------------------------
# (even past stop_timeout: that is SIGTERM's deadline; a graceful stop waits for request_timeout)
cp "$MOD/../../../apps/.libs/hello.so" "$T/app.so.new" 2>/dev/null || cp "$HELLO_SO" "$T/app.so.new"
mv "$T/app.so.new" "$T/app.so"
tn_conf "app = $T/app.so" "pm.max_children = 3" "listen = $T/fcgi2.sock" "stop_timeout = 1s"
kill -HUP "$TN_PID"
wait_until 10 bash -c "[ \"\$(curl -s -H 'Host: g.example' http://127.0.0.1:$NGINX_PORT/)\" = 'hello from g.example' ]" ||
    fail "hello app not deployed"
http '/sleep?ms=2500' inflight.example > "$T/inflight.body" &
req=$!
sleep 0.4
kill -QUIT "$TN_PID"
wait "$req"
assert_eq "$(cat "$T/inflight.body")" "hello from inflight.example" "in-flight request finished on SIGQUIT"
wait_until 5 bash -c "! kill -0 $TN_PID" || fail "master did not exit after SIGQUIT"
assert_eq "$(pgrep -f "$T/tenancyd.conf" | wc -l)" 0 "no process left after SIGQUIT"

# ---- SIGTERM: stop by stop_timeout even with a stuck request ----------------------------------------
# term_stops_in_time WHAT: SIGTERM to the master while the request $req runs: it stops by its
# stop_timeout (1s; 3 s allowed), and no process of it is left.
term_stops_in_time() {
    local t0 ms
    t0=$(date +%s%N)
    kill -TERM "$TN_PID"
    wait_until 5 bash -c "! kill -0 $TN_PID" || fail "master did not stop after SIGTERM $1"
    ms=$((($(date +%s%N) - t0) / 1000000))
    log "SIGTERM stop $1 took $ms ms"
    [ "$ms" -le 3000 ] || fail "SIGTERM stop $1 took $ms ms (stop_timeout 1s)"
    wait "$req" 2>/dev/null
    assert_eq "$(pgrep -f "$T/tenancyd.conf" | wc -l)" 0 "no process left after SIGTERM $1"
}
# start_with_stuck HOST STOP_TIMEOUT: tenancyd on fcgi2.sock serving a 20 s request for HOST
# (its pid in $req), request_timeout 30s
start_with_stuck() {
    tn_conf "listen = $T/fcgi2.sock" "stop_timeout = $2" "request_timeout = 30s"
    tn_start
    http '/sleep?ms=20000' "$1" > /dev/null &
    req=$!
    sleep 0.4
}
start_with_stuck stuck.example 1s
term_stops_in_time "with a stuck request"

# ---- SIGTERM after a reload: an old worker still busy stops by stop_timeout too -----------------
# The old generation's worker finishing a long request was given request_timeout for it; a
# SIGTERM cuts that to stop_timeout.
start_with_stuck old.example 1s
kill -HUP "$TN_PID"
wait_until 10 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fail "the reload did not complete"
term_stops_in_time "with an old worker busy"

# ---- a second SIGTERM kills the workers at once, without waiting for stop_timeout -----------
start_with_stuck stuck2.example 20s
kill -TERM "$TN_PID"
sleep 1
if kill -0 "$TN_PID"; then
    log "ok: the first SIGTERM waits for the request in flight"
else
    fail "the master stopped at the first SIGTERM with a request in flight"
fi
kill -TERM "$TN_PID"
wait_until 3 bash -c "! kill -0 $TN_PID" || fail "a second SIGTERM did not stop the master"
wait "$req" 2>/dev/null
assert_eq "$(pgrep -f "$T/tenancyd.conf" | wc -l)" 0 "no process left after the second SIGTERM"

# ---- a killed master takes its workers with it; a restart reclaims the socket -----------------------
tn_start
workers=$(tn_workers | tr '\n' ' ')
kill -9 "$TN_PID"
wait_until 3 bash -c "for p in $workers; do kill -0 \$p 2>/dev/null && exit 1; done; exit 0" ||
    fail "workers outlived the master"
log "ok: workers gone within a second or so of the master's death"
tn_start
assert_eq "$(http / h.example)" "hello from h.example" "restart reclaimed the socket"

# ---- an app that cannot start at launch: the master stops with status 1 --------------------
cp "$MOD/greet_bad.so" "$T/app.so.new" && mv "$T/app.so.new" "$T/app.so"
tn_conf "app = $T/app.so" "listen = $T/fcgi3.sock"
"$TENANCYD" -c "$T/tenancyd.conf" > "$T/badstart.log" 2>&1 &
bad=$!
PIDS+=("$bad")
wait_until 10 grep -q 'the first workers cannot start; stopping' "$T/badstart.log" ||
    fail "the master did not give up on an app its first workers cannot start"
wait_until 5 grep -q ' stopped$' "$T/badstart.log" || { fail "the master did not stop"; kill -KILL "$bad"; }
wait "$bad"
assert_eq "$?" 1 "the exit status of a master whose first workers cannot start the app"
