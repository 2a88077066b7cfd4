#!/bin/bash
# reload.sh — reloads and stops: SIGHUP under GET and POST load with zero failed requests,
# each POST served once and no upstream error in nginx's log; a new build of the app deploys
# with one SIGHUP; an invalid config or an app that cannot start keeps the old generation
# serving; a changed listen address; SIGUSR1 reopens logs; SIGQUIT lets
# in-flight requests finish; SIGTERM stops by its deadline; a killed master takes its workers
# with it and a restart reclaims the socket.
. "$(dirname "$0")/lib.sh"
need curl nginx "$HELPERS/hammer" "$HELPERS/json_check"
MOD=$top_builddir/tests/helpers/.libs

cp "$MOD/greet_v1.so" "$T/app.so"
tn_conf "app = $T/app.so" "pm.max_children = 3" "request_timeout = 5s"
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
"$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -d 6 -H 't%d.example' -N 50 -e 'from %h' \
    --json "$T/hammer.json" 2> "$T/hammer.log" &
hammer=$!
"$HELPERS/hammer" -p "$NGINX_PORT" -c 4 -d 6 -H 'p%d.example' -N 50 -u /echo -m POST \
    -b "$POST_BODY" -e "$POST_BODY" --exact --json "$T/post.json" 2> "$T/post.log" &
poster=$!
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
log "POSTs: $(tail -1 "$T/post.log")"
assert_eq "$rc" 0 "no failed or wrong GET during 18 reloads"
assert_eq "$prc" 0 "no failed POST during 18 reloads, each body echoed to the byte"
access_log_settled
posts=$("$HELPERS/json_check" .status.200 < "$T/post.json")
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

# ---- a new listen address -----------------------------------------------------------------------
tn_conf "app = $T/app.so" "pm.max_children = 3" "listen = $T/fcgi2.sock"
kill -HUP "$TN_PID"
wait_until 10 bash -c "[ -S $T/fcgi2.sock ]" || fail "new socket not created"
wait_until 10 bash -c "[ ! -e $T/fcgi.sock ]" || fail "old socket not removed after its workers left"
kill -QUIT "$(cat "$T/nginx/nginx.pid")"; sleep 0.3
nginx_start "unix:$T/fcgi2.sock"
assert_eq "$(http / e.example)" "v1 from e.example" "served on the new socket"

# ---- SIGUSR1 reopens the logs -------------------------------------------------------------------
mv "$T/access.log" "$T/access.log.1"
kill -USR1 "$TN_PID"
wait_until 5 grep -q 'logs reopened' "$T/tenancyd.log" || fail "SIGUSR1 not handled"
http / f.example > /dev/null
wait_until 3 grep -q 'f.example' "$T/access.log" || fail "no line in the new access log"
grep -q 'f.example' "$T/access.log.1" && fail "line written to the rotated file"

# ---- SIGQUIT: the in-flight request finishes ------------------------------------------------------
cp "$MOD/../../../apps/.libs/hello.so" "$T/app.so.new" 2>/dev/null || cp "$HELLO_SO" "$T/app.so.new"
mv "$T/app.so.new" "$T/app.so"
kill -HUP "$TN_PID"
wait_until 10 bash -c "[ \"\$(curl -s -H 'Host: g.example' http://127.0.0.1:$NGINX_PORT/)\" = 'hello from g.example' ]" ||
    fail "hello app not deployed"
http '/sleep?ms=1500' inflight.example > "$T/inflight.body" &
req=$!
sleep 0.4
kill -QUIT "$TN_PID"
wait "$req"
assert_eq "$(cat "$T/inflight.body")" "hello from inflight.example" "in-flight request finished on SIGQUIT"
wait_until 5 bash -c "! kill -0 $TN_PID" || fail "master did not exit after SIGQUIT"
assert_eq "$(pgrep -f "$T/tenancyd.conf" | wc -l)" 0 "no process left after SIGQUIT"

# ---- SIGTERM: stop by stop_timeout even with a stuck request ----------------------------------------
tn_conf "listen = $T/fcgi2.sock" "stop_timeout = 1s" "request_timeout = 30s"
tn_start
http '/sleep?ms=20000' stuck.example > /dev/null &
req=$!
sleep 0.4
t0=$(date +%s%N)
kill -TERM "$TN_PID"
wait_until 5 bash -c "! kill -0 $TN_PID" || fail "master did not stop after SIGTERM"
ms=$((($(date +%s%N) - t0) / 1000000))
log "SIGTERM stop took $ms ms"
[ "$ms" -le 3000 ] || fail "SIGTERM stop took $ms ms (stop_timeout 1s)"
wait "$req" 2>/dev/null
assert_eq "$(pgrep -f "$T/tenancyd.conf" | wc -l)" 0 "no process left after SIGTERM"

# ---- a killed master takes its workers with it; a restart reclaims the socket -----------------------
tn_start
workers=$(tn_workers | tr '\n' ' ')
kill -9 "$TN_PID"
wait_until 3 bash -c "for p in $workers; do kill -0 \$p 2>/dev/null && exit 1; done; exit 0" ||
    fail "workers outlived the master"
log "ok: workers gone within a second or so of the master's death"
tn_start
assert_eq "$(http / h.example)" "hello from h.example" "restart reclaimed the socket"
