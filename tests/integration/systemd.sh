#!/bin/bash
# systemd.sh — socket activation and readiness as systemd drives them: the socket comes
# from systemd-socket-activate on fd 3 (listen = systemd), readiness and reloads are told on
# NOTIFY_SOCKET (READY=1, RELOADING=1, STOPPING=1), the socket's path is left to systemd at
# the stop, and the shipped unit file is valid.
. "$(dirname "$0")/lib.sh"
need curl nginx systemd-socket-activate systemd-analyze "$HELPERS/notify_recv"

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
# The socket is systemd's (it passed it): tenancyd leaves its path in place at the stop.
[ -S "$T/fcgi.sock" ] && log "ok: the socket systemd passed is left in place at the stop" ||
    fail "tenancyd removed $T/fcgi.sock, the socket systemd passed it"

# The unit file installed by make install, checked by systemd-analyze verify: any problem it
# reports about our unit fails. verify also checks that each Exec command is an executable
# and that each man page in Documentation= exists; nothing is installed here, so the copy it
# reads runs the build's tenancyd in place of the installed one (only that path differs),
# and man looks in the source's own man pages.
unit=$top_builddir/doc/tenancyd.service
[ -f "$unit" ] || (cd "$top_builddir" && make -s doc/tenancyd.service) || fatal "cannot build the unit"
grep -q '^Type=notify' "$unit" && log "ok: the unit is Type=notify" || fail "unit not Type=notify"
sbin=$(sed -n 's|^ExecStart=\(/.*\)/tenancyd .*|\1|p' "$unit")
[ -n "$sbin" ] || fatal "the unit's ExecStart does not run an absolute .../tenancyd"
mkdir -p "$T/unit" "$T/man/man5" "$T/man/man8"
sed "s|$sbin/tenancyd |$(cd "$top_builddir" && pwd)/tenancyd |" "$unit" > "$T/unit/tenancyd.service"
cp "$top_srcdir/doc/tenancyd.8" "$T/man/man8/" && cp "$top_srcdir/doc/tenancyd.conf.5" "$T/man/man5/" ||
    fatal "no man pages in $top_srcdir/doc"
# verify looks at the first command of each Exec kind only: every one must run a program.
n_exec=0
while read -r cmd; do
    n_exec=$((n_exec + 1))
    [ -x "$cmd" ] || fail "the unit runs $cmd, which is not an executable"
done < <(sed -n 's/^Exec[A-Za-z]*=[-@:+!]*\([^ ]*\).*/\1/p' "$T/unit/tenancyd.service")
assert_ge "$n_exec" 4 "the unit's Exec commands (each checked to be an executable)"
# --recursive-errors=no: the exit status counts the problems of our unit only, not those of
# the units it names (network.target, multi-user.target), which verify loads from this
# machine: in a container those may be missing or broken, and they are not ours to fix. For
# the same reason only the lines naming our unit (by its name, or by its file for a syntax
# problem) fail the test; any others are shown.
MANPATH=$T/man systemd-analyze verify --recursive-errors=no "$T/unit/tenancyd.service" \
    > "$T/verify.out" 2>&1
rc=$?
ours=$(grep -F -e 'tenancyd.service:' -e "$T/unit/tenancyd.service" "$T/verify.out")
others=$(grep -v -F -e 'tenancyd.service:' -e "$T/unit/tenancyd.service" "$T/verify.out")
[ -z "$others" ] || log "note: systemd-analyze verify, about other units: $others"
if [ "$rc" = 0 ] && [ -z "$ours" ]; then
    log "ok: systemd-analyze verify finds no problem in the unit"
else
    fail "systemd-analyze verify (exit $rc) on the unit: ${ours:-$(cat "$T/verify.out")}"
fi
