#!/bin/bash
# systemd.sh — socket activation and readiness as systemd drives them: the socket comes
# from systemd-socket-activate on fd 3 (listen = systemd), readiness and reloads are told on
# NOTIFY_SOCKET (READY=1, RELOADING=1, STOPPING=1), and the shipped unit file is valid.
. "$(dirname "$0")/lib.sh"
need curl nginx systemd-socket-activate "$HELPERS/notify_recv"

"$HELPERS/notify_recv" "$T/notify.sock" 20 > "$T/notify.log" &
PIDS+=($!)
wait_until 5 test -S "$T/notify.sock" || fatal "no notify socket"
tn_conf "listen = systemd"
systemd-socket-activate -E NOTIFY_SOCKET="$T/notify.sock" -E TENANCY_HELLO_TEST_ROUTES=1 \
    -l "$T/fcgi.sock" "$TENANCYD" -c "$T/tenancyd.conf" > "$T/tenancyd.log" 2>&1 &
TN_PID=$!
PIDS+=("$TN_PID")
wait_until 5 test -S "$T/fcgi.sock" || fatal "systemd-socket-activate did not create the socket"
nginx_start
# (systemd-socket-activate passes only the variables given with -E.)
# The first connection activates the service; the request must be answered.
assert_eq "$(http / act.example)" "hello from act.example" "a request through the activated socket"
wait_until 5 grep -q 'READY=1' "$T/notify.log" || fail "no READY=1"
assert_contains "$(grep 'READY=1' "$T/notify.log" | head -1)" "STATUS=" "READY carries a STATUS"
kill -HUP "$TN_PID"
wait_until 10 grep -q 'RELOADING=1' "$T/notify.log" || fail "no RELOADING=1 on SIGHUP"
wait_until 10 bash -c "[ \$(grep -c 'READY=1' $T/notify.log) -ge 2 ]" || fail "no READY=1 after the reload"
assert_eq "$(http / again.example)" "hello from again.example" "served after the reload"
kill -TERM "$TN_PID"
wait_until 10 grep -q 'STOPPING=1' "$T/notify.log" || fail "no STOPPING=1"
wait_until 10 bash -c "! kill -0 $TN_PID" || fail "did not stop"

# The unit file installed by make install.
unit=$top_builddir/doc/tenancyd.service
[ -f "$unit" ] || (cd "$top_builddir" && make -s doc/tenancyd.service) || fatal "cannot build the unit"
grep -q '^Type=notify' "$unit" && log "ok: the unit is Type=notify" || fail "unit not Type=notify"
if command -v systemd-analyze >/dev/null 2>&1; then
    out=$(systemd-analyze verify "$unit" 2>&1 | grep -v -e 'Failed to open' -e 'No such file' -e 'not executable' -e 'Command .* is not executable' || true)
    [ -z "$out" ] && log "ok: systemd-analyze verify" || log "note: systemd-analyze says: $out"
fi
