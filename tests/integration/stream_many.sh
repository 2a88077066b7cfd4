#!/bin/bash
# stream_many.sh — 2,000 open Server-Sent Events streams hold no worker.
#
# pm.max_children = 4. One SSE client process (tests/sse/sse.mjs) opens 2,000 streams through
# nginx; each is handed to the stream hub. Then, with all of them open, hammer sends ordinary
# requests: every one is answered, and the status JSON shows the workers free (none running a
# request once the load stops) while the hub holds the 2,000 streams. Events published then
# reach the streams, and the hub's memory per idle stream stays within 16 KiB. nginx gets enough descriptors and connections for it (a stream is two:
# the client's and the upstream's), and so does this shell's limit, which the processes
# started here inherit.
. "$(dirname "$0")/lib.sh"
need curl nginx node python3 "$HELPERS/hammer" "$TENANCY_CLI"
SSE=$top_srcdir/tests/sse
[ -d "$SSE/node_modules/eventsource" ] || hard_error "tests/sse has no node_modules (run ./autogen.sh --deps)"
N=${STREAMS:-2000}
need_fds=$((3 * N + 1000))
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge "$need_fds" ] ||
    hard_error "the open-files hard limit $(ulimit -Hn) is below $need_fds"
ulimit -n "$need_fds" || hard_error "cannot raise the open-files limit to $need_fds"

tn_conf "pm.max_children = 4" "state_dir = $T/state" "tenant.resolvers = path" \
    "stream.hub = on" "stream.heartbeat = 5s" "log_requests = off" \
    "stream.max_per_tenant = $((N + 10))" "tenant.max_workers = 100%"
mkdir -p "$T/state"
tn_cli init > /dev/null || fatal "tenancy init failed"
tn_cli tenant create acme --name Acme > /dev/null || fatal "tenant create failed"
tn_start

NGINX_PORT=$(free_port)
{ nginx_conf_head | sed "s/worker_connections 1024;/worker_connections $((3 * N + 500));/; s/^worker_processes 1;/worker_processes 1;\nworker_rlimit_nofile $need_fds;/"
cat <<NGX
    upstream tenancy { server unix:$T/fcgi.sock; keepalive 64; keepalive_timeout 60s; }
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        include /etc/nginx/fastcgi_params;
        fastcgi_param TENANT_HOST \$host;
        fastcgi_param REQUEST_ID \$request_id;
        fastcgi_keep_conn on;
        fastcgi_next_upstream off;
        fastcgi_read_timeout 60s;
        location / { fastcgi_pass tenancy; }
        location ~ /subscribe\$ { fastcgi_buffering off; fastcgi_pass tenancy; }
    }
}
NGX
} > "$T/nginx.conf"
nginx_launch
BASE="http://localhost:$NGINX_PORT"
status() { curl -s -m 5 "http://127.0.0.1:$NGINX_PORT/_tenancy/status"; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }

hub_pid=$(status | field "['hub']['pid']")
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$hub_pid/status"; }   # KiB
rss0=$(rss)
node "$SSE/sse.mjs" --url "$BASE/t/acme/subscribe?channels=table:a" --out "$T/many.out" \
    --types table:a --count "$N" --seconds 60 > "$T/many.res" 2> "$T/many.err" &
SSE_PID=$!
PIDS+=("$SSE_PID")
wait_until 40 bash -c "[ \$(grep -c '^open ' '$T/many.out' 2>/dev/null) -ge $N ]" ||
    fail "only $(grep -c '^open ' "$T/many.out") of $N streams opened ($(grep -c '^error' "$T/many.out") errors: $(grep '^error' "$T/many.out" | head -2))"
assert_eq "$(status | field "['hub']['subscribers']")" "$N" "the hub holds $N streams"
per=$(( ($(rss) - rss0) * 1024 / N ))
log "hub memory: $rss0 KiB idle, $(rss) KiB with $N streams: $per bytes per stream"
[ "$per" -le 16384 ] && log "ok: at most 16 KiB of hub memory per idle stream" ||
    fail "hub memory per idle stream: $per bytes (over 16 KiB)"

# ordinary requests beside them: all answered, quickly
"$HELPERS/hammer" -p "$NGINX_PORT" -H localhost -u /t/acme/ -c 8 -n 3000 -e 'hello from' \
    --timeout 5000 --json "$T/hammer.json" 2> "$T/hammer.err"
rc=$?
assert_eq "$rc" 0 "hammer: every ordinary request answered right ($(tail -1 "$T/hammer.err"))"
assert_eq "$(field "['responses']" < "$T/hammer.json")" 3000 "hammer: 3,000 answers"
log "ordinary requests beside $N streams: $(python3 -c "import json; d=json.load(open('$T/hammer.json')); print('p50 %d us, p99 %d us' % (d['latency_us']['p50'], d['latency_us']['p99']))")"

# the workers are free: none is running a request now, all four are there
st=$(status)
assert_eq "$(field "['pool']['total']" <<< "$st")" 4 "four workers"
assert_eq "$(field "['pool']['active']" <<< "$st")" 1 "no worker held (the one answering this status is the only active)"
assert_eq "$(field "['hub']['subscribers']" <<< "$st")" "$N" "the streams still open"

# an event reaches every stream
code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -d to-all "$BASE/t/acme/_publish?channel=table:a")
assert_eq "$code" 200 "published (tn_publish)"
wait_until 15 bash -c "[ \$(grep -c ' to-all\$' '$T/many.out') -ge $N ]"
assert_eq "$(grep -c ' to-all$' "$T/many.out")" "$N" "one event reached all $N streams"
kill "$SSE_PID" 2> /dev/null
wait "$SSE_PID" 2> /dev/null
wait_until 15 bash -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"hub\"][\"subscribers\"])')\" = 0 ]" ||
    fail "the streams were not released when the client went away"
log "hub after: $(status | field "['hub']")"
