#!/bin/bash
# basic.sh — tenancyd behind a real nginx, over a unix socket and over TCP (v4 and v6):
# requests answered, bodies echoed, status/metrics/ping served (and refused to outsiders),
# metrics valid for promtool, one JSON access-log line per request, -t reports file:line; a
# host with no registry yet logs the job worker's and the hub's failure to open it once;
# workers ask for pm.slice's time slice and a reload can turn it off.
. "$(dirname "$0")/lib.sh"
need curl nginx promtool

tn_conf
tn_start
nginx_start

assert_eq "$(http / acme.example.com)" "hello from acme.example.com" "hello over a unix socket"
assert_eq "$(last_status)" 200 "status 200"
assert_eq "$(http / ACME.Example.COM:8080)" "hello from acme.example.com" "host lower-cased, port dropped"
body=$(head -c 200000 /dev/urandom | base64 -w0)
echo -n "$body" > "$T/body"
got=$(curl -s -m 20 --data-binary @"$T/body" "http://127.0.0.1:$NGINX_PORT/echo")
assert_eq "${#got}" "${#body}" "200 KB body echoed intact (length)"
[ "$got" = "$body" ] && log "ok: body content" || fail "echoed body differs"

assert_eq "$(http /_tenancy/ping)" "pong" "ping"
status=$(http /_tenancy/status)
assert_contains "$status" '"pm":"static"' "status JSON"
assert_contains "$status" '"max_children":2' "status shows max_children"
http /_tenancy/metrics > "$T/metrics.txt"
assert_contains "$(cat "$T/metrics.txt")" 'tenancy_requests_total{code="2xx"}' "metrics"
if promtool check metrics < "$T/metrics.txt" > "$T/promtool.log" 2>&1; then
    log "ok: promtool check metrics"
else
    fail "promtool: $(cat "$T/promtool.log")"
fi

# pm.slice: each worker asks the kernel for a 100 us time slice (the default), which the
# kernel reports in /proc; the master keeps the kernel's own, which this shell has too. A
# kernel before 6.12 has no slice per process: the master says so once, nothing changes.
slice_of() { awk -F: '/^se.slice/ { gsub(/ /, "", $2); print $2 }' "/proc/$1/sched" 2> /dev/null; }
kernel_slices() { uname -r | awk -F. '{ exit !($1 > 6 || ($1 == 6 && $2 >= 12)) }'; }
own_slice=$(slice_of self)
worker_slices() { local p; for p in $(tn_workers); do echo -n "$p=$(slice_of "$p") "; done; }
workers_at() {   # workers_at NS: every current worker's slice is NS
    local p n=0
    for p in $(tn_workers); do
        [ "$(slice_of "$p")" = "$1" ] || return 1
        n=$((n + 1))
    done
    [ "$n" -ge 2 ]
}
if kernel_slices; then
    if wait_until 5 workers_at 100000; then
        log "ok: each worker runs on a 100 us time slice"
    else
        fail "workers' time slices: $(worker_slices)"
    fi
    assert_eq "$(slice_of "$TN_PID")" "$own_slice" "the master keeps the kernel's time slice"
else
    assert_eq "$(tn_log_count 'pm.slice: the kernel keeps its own time slice')" 1 "an older kernel's time slice said once"
    assert_eq "$(slice_of "$(tn_workers | head -1)")" "$own_slice" "an older kernel's workers keep its time slice"
fi

# Status refused to a client outside status_allow (nginx passes REMOTE_ADDR 127.0.0.1; make
# the host believe otherwise through a config that allows only another address). The same
# reload turns pm.slice off: the new generation's workers run on the kernel's own slice.
tn_conf "status_allow = 10.9.9.9" "pm.slice = 0"
kill -HUP "$TN_PID"
wait_until 10 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fail "reload did not happen"
http /_tenancy/status > /dev/null
assert_eq "$(last_status)" 403 "status refused outside status_allow"
if wait_until 10 workers_at "$own_slice"; then
    log "ok: pm.slice = 0 leaves the workers on the kernel's time slice"
else
    fail "pm.slice = 0: workers' slices $(worker_slices)"
fi

# The access log: one JSON line per request with the fields we document.
access_log_settled
lines=$(grep -c '"req":' "$T/access.log")
assert_ge "$lines" 6 "access log lines"
line=$(grep '"uri":"/echo"' "$T/access.log" | head -1)
for f in '"time":"' '"method":"POST"' '"status":200' '"bytes":' '"us":' '"pid":'; do
    assert_contains "$line" "$f" "access log field $f"
done

# TCP, IPv4 and IPv6, with nginx pointed at each.
for spec in "127.0.0.1:$(free_port)" "[::1]:$(free_port)"; do
    kill -QUIT "$TN_PID"
    wait "$TN_PID" 2>/dev/null
    tn_conf "listen = $spec"
    tn_start
    nginx_pid_file="$T/nginx/nginx.pid"
    kill -QUIT "$(cat "$nginx_pid_file")" 2>/dev/null
    sleep 0.3
    nginx_start "$spec"
    assert_eq "$(http / tcp.example)" "hello from tcp.example" "hello over TCP $spec"
done

# The access log's buffer, with access_log_flush = 60s so that only a leaving worker writes:
# one killed at request_timeout writes the lines it gathered first, and so does one stopping.
kill -QUIT "$TN_PID"
wait "$TN_PID" 2>/dev/null
tn_conf "listen = $spec" "pm.max_children = 1" "access_log_flush = 60s" "request_timeout = 1s"
tn_start
for i in 1 2 3; do http / "buf$i.example" > /dev/null; done
access_log_settled
assert_eq "$(grep -c '"host":"buf' "$T/access.log")" 0 "access-log lines gathered, not written yet"
http "/sleep?ms=3000" slow.example > /dev/null
assert_eq "$(last_status)" 504 "request_timeout answers 504"
wait_until 3 bash -c "[ \$(grep -c '\"host\":\"buf' '$T/access.log') = 3 ]" &&
    log "ok: a worker killed at request_timeout wrote its gathered lines first" ||
    fail "the lines gathered before a request_timeout were lost"
http / bufstop.example > /dev/null
kill -QUIT "$TN_PID"
wait "$TN_PID" 2>/dev/null
assert_eq "$(grep -c '"host":"bufstop.example"' "$T/access.log")" 1 "a stopping worker writes its gathered lines"

# -t: valid and invalid configurations.
"$TENANCYD" -c "$T/tenancyd.conf" -t 2>/dev/null && log "ok: -t accepts a valid file" || fail "-t refused a valid file"
printf 'app = %s\npm = static\n\npm.max_children = many\n' "$HELLO_SO" > "$T/bad.conf"
out=$("$TENANCYD" -c "$T/bad.conf" -t 2>&1)
rc=$?
assert_eq "$rc" 1 "-t exit status on a bad file"
assert_contains "$out" "bad.conf:4: pm.max_children: expected an integer" "-t names file and line"
# t_placement NAME LINE [ERROR]: `tenancyd -t` on a file of one placement with LINE (its line
# 3) names ERROR at NAME.conf:3, or accepts the file when ERROR is not given.
t_placement() {
    printf 'app = %s\nplacement.pg.dsn = postgres:dbname=x\n%s\n' "$HELLO_SO" "$2" > "$T/$1.conf"
    if [ -n "${3:-}" ]; then
        assert_contains "$("$TENANCYD" -c "$T/$1.conf" -t 2>&1)" "$1.conf:3: $3" "-t names a bad '$2'"
    else
        "$TENANCYD" -c "$T/$1.conf" -t 2>/dev/null && log "ok: -t accepts '$2'" || fail "-t refused '$2'"
    fi
}
t_placement bad-reset "placement.pg.session_reset = sometimes" \
    "placement.pg.session_reset: expected auto or always, got 'sometimes'"
t_placement reset "placement.pg.session_reset = always"
t_placement bad-mem "placement.pg.max_backend_memory = lots" \
    "placement.pg.max_backend_memory: expected a size (e.g. 64M, 512k) or 0 for no bound, got 'lots'"
t_placement mem "placement.pg.max_backend_memory = 256M"
printf 'app = /nonexistent/app.so\n' > "$T/noapp.conf"
out=$("$TENANCYD" -c "$T/noapp.conf" -t 2>&1)
assert_contains "$out" "cannot load" "-t checks the app module"

# ---- a host with no registry yet: the job worker says so once, not at each try ---------------
# (it tries again every turn, about twice a second; each such line used to be logged). The hub
# reads the registry only for streams of tenants: with none subscribed, never.
# run_noreg NAME EXTRA: a host of one worker and one job worker whose state_dir does not exist.
run_noreg() {
    printf 'listen = %s\napp = %s\nstate_dir = %s\npm = static\npm.max_children = 1\npm.jobs = 1\nstream.hub = on\naccess_log = %s\n%b' \
        "$T/$1.sock" "$HELLO_SO" "$T/$1-missing" "$T/$1-access.log" "$2" > "$T/$1.conf"
    "$TENANCYD" -c "$T/$1.conf" > "$T/$1.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    wait_until 10 grep -q ' ready: ' "$T/$1.log" || fail "tenancyd ($1) without a registry did not start"
    sleep 6
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null
    jw=$(grep -c 'job worker: the registry' "$T/$1.log")
    hub=$(grep -c 'hub cannot open the registry' "$T/$1.log")
    idle=$(grep -c 'pm.jobs: no job worker' "$T/$1.log")
    log "$1, without a registry for 6 s: $jw job-worker lines, $hub hub lines, $idle lines of no job worker"
}
run_noreg noreg-tenants 'tenant.resolvers = subdomain\ntenant.base_domains = localhost\n'
assert_eq "$jw:$idle" 1:0 "a host with tenancy: the job worker's failing registry logged once, not at every try"
assert_eq "$hub" 0 "the hub with no stream of tenants does not read a registry"
# A plain FastCGI host (no tenancy, no tenancy.registry, no panel): nothing on it can queue a
# job, so no job worker is started, and nothing tries the registry it has no use for.
run_noreg noreg ''
assert_eq "$jw:$idle" 0:1 "a host without tenancy starts no job worker, and says so once"
assert_eq "$hub" 0 "the hub of a host without tenancy does not read a registry"
