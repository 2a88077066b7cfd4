#!/bin/bash
# stream.sh — streaming responses and the stream hub, through nginx with `fastcgi_buffering
# off` and a real SSE client (the npm eventsource package, tests/sse/sse.mjs):
#   flush     tn_flush: each chunk reaches the client before the app writes the next;
#   order     a tenant's events arrive in order, each once, on the channels asked for;
#   isolation tenant B's stream never carries tenant A's events (and the other way round), nor
#             does that of a tenant whose streams share A's bucket in the hub's table;
#   reload    SIGHUP (a new generation) and a SIGKILLed worker do not end a stream;
#   resume    a client that reconnects with Last-Event-ID gets what it missed, nothing twice;
#   hub       a SIGKILLed hub is restarted; its clients reconnect and resume;
#   suspend   a suspended tenant's streams end (`event: end`), and a new one is refused;
#   slow      a client that reads nothing is dropped past stream.max_buffer, and nobody else;
#   limits    a reload lowers stream.max_per_tenant: one stream more is refused (503);
#   data      the data API's GET /subscribe?tables=notes: its row writes and schema changes;
#   release   a client that goes away frees its stream (status JSON: no subscriber left).
# The tenants are named in the path (tenant.resolvers = path): Node's fetch sets Host itself.
. "$(dirname "$0")/lib.sh"
need curl nginx node "$TENANCY_CLI"
SSE=$top_srcdir/tests/sse
[ -d "$SSE/node_modules/eventsource" ] || hard_error "tests/sse has no node_modules (run ./autogen.sh --deps)"

DATA_SO=${DATA_SO:-$(cd "$top_builddir" && pwd)/apps/.libs/data.so}
tn_conf "pm.max_children = 2" "state_dir = $T/state" "tenant.resolvers = path" \
    "mount.data.prefix = /api" "mount.data.app = $DATA_SO" "tenant.max_workers = 100%" \
    "stream.hub = on" "stream.heartbeat = 1s" "request_timeout = 10s" "stream.max_buffer = 64k"
mkdir -p "$T/state"
tn_cli init > /dev/null || fatal "tenancy init failed"
tn_cli tenant create acme --name Acme > /dev/null || fatal "tenant create failed"
tn_cli tenant create beta --name Beta > /dev/null || fatal "tenant create failed"
# gamma: a tenant whose id falls in acme's bucket of the hub's stream table (bucket_of in
# fcgi/hub.c, copied here), so that only the hub's own tenant comparison keeps acme's events
# off gamma's stream: acme and beta sit in buckets of their own, where a missing comparison
# could not show. The next id the registry hands out is set before gamma is created.
acme_id=$(sqlite3 "$T/state/control.db" "SELECT id FROM tenants WHERE slug = 'acme'")
gamma_id=$(python3 -c '
import sys
b = lambda i: ((i * 0x9E3779B97F4A7C15) % 2**64 >> 52) & 4095
a = int(sys.argv[1])
print(next(i for i in range(a + 1, 1 << 20) if b(i) == b(a)))' "$acme_id")
sqlite3 "$T/state/control.db" "UPDATE sqlite_sequence SET seq = $((gamma_id - 1)) WHERE name = 'tenants'" ||
    fatal "setting the next tenant id failed"
tn_cli tenant create gamma --name Gamma > /dev/null || fatal "tenant create failed"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT id FROM tenants WHERE slug = 'gamma'")" "$gamma_id" \
    "gamma has the id that shares acme's hub bucket"
tn_cli key create acme > "$T/key.out" 2> "$T/key.err" || fatal "key create: $(cat "$T/key.err")"
KEY=$(sed -n 2p "$T/key.out" | awk '{print $NF}')
tn_start
nginx_start "" "fastcgi_buffering off;"
BASE="http://localhost:$NGINX_PORT"

# publish SLUG CHANNEL DATA...: one event each, through the app (hello's POST /_publish,
# tn_publish), on one kept HTTP connection.
publish() {
    python3 - "$NGINX_PORT" "$@" <<'PY' || fail "publish $1 $2 failed"
import http.client, sys
port, slug, ch, datas = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
c = http.client.HTTPConnection("localhost", int(port), timeout=10)
for d in datas:
    c.request("POST", "/t/%s/_publish?channel=%s" % (slug, ch), body=d.encode())
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("publish %s %s: %d" % (slug, d[:20], r.status))
PY
}

# sse NAME SECONDS URL [args...]: a client in the background, its lines in $T/NAME.out.
sse() {
    local name=$1 secs=$2 url=$3
    shift 3
    node "$SSE/sse.mjs" --url "$url" --out "$T/$name.out" --seconds "$secs" "$@" \
        > "$T/$name.res" 2> "$T/$name.err" &
    echo $! > "$T/$name.pid"
    PIDS+=("$!")
}
sse_wait() { wait "$(cat "$T/$1.pid")" 2> /dev/null; }
opens() { grep -c '^open ' "$T/$1.out" 2> /dev/null || echo 0; }
# the data of NAME's events of one type, one a line
datas() { awk -v t="$2" '$1 == "event" && $4 == t { print $5 }' "$T/$1.out" 2> /dev/null; }
ids() { awk -v t="$2" '$1 == "event" && $4 == t { print $3 }' "$T/$1.out" 2> /dev/null; }
hub_status() { curl -s -m 5 "http://127.0.0.1:$NGINX_PORT/_tenancy/status" | json_field "$1"; }
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin)['hub']; print(d['$1'])"; }
wait_open() { wait_until 10 bash -c "[ \$(grep -c '^open ' '$T/$1.out' 2>/dev/null) -ge ${2:-1} ]"; }

# ---- flush: each chunk before the next is written --------------------------------------------
start=$(date +%s%N)
curl -sN -m 10 "$BASE/t/acme/stream?n=3&ms=600" | while IFS= read -r l; do
    echo "$(( ($(date +%s%N) - start) / 1000000 )) $l"
done > "$T/flush.out"
first=$(awk 'NR == 1 { print $1 }' "$T/flush.out")
last=$(awk 'NR == 3 { print $1 }' "$T/flush.out")
assert_eq "$(awk '{ print $2 $3 }' "$T/flush.out" | tr '\n' ' ')" "chunk1 chunk2 chunk3 " "flush: all chunks"
[ "${first:-9999}" -lt 500 ] && log "ok: flush: the first chunk came at once ($first ms)" ||
    fail "flush: the first chunk came after $first ms (buffered?)"
[ "${last:-0}" -ge 1100 ] && log "ok: flush: the last came when written ($last ms)" ||
    fail "flush: the last chunk came at $last ms (expected >= 1100)"

# ---- order and isolation ----------------------------------------------------------------------
sse a 150 "$BASE/t/acme/subscribe?channels=table:a" --types table:a,table:b
sse b 150 "$BASE/t/beta/subscribe" --types table:a,table:b
wait_open a && wait_open b || fatal "the streams did not open: $(cat "$T"/a.err "$T"/b.err)"
assert_eq "$(hub_status subscribers)" 2 "hub: two subscribers"
sse g 30 "$BASE/t/gamma/subscribe" --types table:a,table:b
wait_open g || fatal "gamma's stream did not open: $(cat "$T"/g.err)"
publish acme table:a $(seq 1 20)
publish acme table:b skipped
publish beta table:b b1 b2
wait_until 5 bash -c "[ \$(grep -c ' table:a ' '$T/a.out') -ge 20 ]"
assert_eq "$(datas a table:a | tr '\n' ' ')" "$(seq 1 20 | tr '\n' ' ')" "order: acme's 20 events, in order, once each"
assert_eq "$(datas a table:b)" "" "channels: acme's table:b is not on a table:a stream"
wait_until 5 bash -c "[ \$(grep -c ' table:b ' '$T/b.out') -ge 2 ]"
assert_eq "$(datas b table:b | tr '\n' ' ')" "b1 b2 " "beta's own events"
assert_eq "$(datas b table:a)" "" "isolation: beta never receives acme's events"
assert_eq "$(grep -c ' table:a ' "$T/b.out")" 0 "isolation: no table:a event at all on beta's stream"
publish gamma table:a g1
wait_until 5 bash -c "grep -q ' table:a g1' '$T/g.out'"
assert_eq "$(datas g table:a | tr '\n' ' ')" "g1 " "isolation: gamma (in acme's hub bucket) gets its own event, none of acme's"
assert_eq "$(datas a table:a | grep -c g1)" 0 "isolation: gamma's event is not on acme's stream"
kill "$(cat "$T/g.pid")" 2> /dev/null
wait_until 5 bash -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"hub\"][\"subscribers\"])')\" = 2 ]" ||
    fail "gamma's stream was not released"
wait_until 5 bash -c "[ \$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"hub\"][\"heartbeats\"])') -ge 1 ]"
assert_ge "$(hub_status heartbeats)" 1 "heartbeats on idle streams (stream.heartbeat = 1s)"

# ---- a reload and a killed worker do not end a stream ----------------------------------------
kill -HUP "$TN_PID"
wait_until 15 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fail "the reload did not finish"
victim=$(pgrep -P "$TN_PID" | while read -r p; do
    [ "$(cat /proc/"$p"/comm 2> /dev/null)" = tenancyd-hub ] || echo "$p"; done | head -1)
kill -KILL "$victim"
sleep 0.5
publish acme table:a 21 22
wait_until 5 bash -c "[ \$(grep -c ' table:a ' '$T/a.out') -ge 22 ]"
assert_eq "$(datas a table:a | tail -2 | tr '\n' ' ')" "21 22 " "reload, killed worker: the stream carries on"
assert_eq "$(opens a)" 1 "reload, killed worker: the stream was never reopened"

# ---- resume with Last-Event-ID ----------------------------------------------------------------
last=$(ids a table:a | tail -1)
publish acme table:a 23 24 25
sse r 4 "$BASE/t/acme/subscribe?channels=table:a" --types table:a --last-id "$((last - 2))"
wait_open r
wait_until 5 bash -c "[ \$(grep -c ' table:a ' '$T/r.out') -ge 5 ]"
assert_eq "$(datas r table:a | tr '\n' ' ')" "21 22 23 24 25 " "resume: the missed events after Last-Event-ID, once each"

# ---- a killed hub: restarted, its clients reconnect and resume ---------------------------------
hub_pid=$(hub_status pid)
kill -KILL "$hub_pid"
wait_until 10 bash -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; h=json.load(sys.stdin)[\"hub\"]; print(h[\"running\"] and h[\"pid\"] != $hub_pid)')\" = True ]" ||
    fail "the hub was not restarted"
assert_eq "$(hub_status restarts)" 1 "hub: the restart is counted"
: > "$T/nginx-error.log"   # the streams the kill cut are nginx's upstream errors, rightly
publish acme table:a 26 27
wait_until 15 bash -c "[ \$(grep -c ' table:a ' '$T/a.out') -ge 27 ]"
assert_ge "$(opens a)" 2 "hub restart: the client reconnected"
assert_eq "$(datas a table:a | tr '\n' ' ')" "$(seq 1 27 | tr '\n' ' ')" "hub restart: resumed, nothing lost or doubled"

# ---- a suspended tenant's streams end --------------------------------------------------------
wait_open b 2 || true   # beta's client reconnected after the hub's restart
a_opens=$(opens a)
tn_cli tenant suspend beta > /dev/null || fail "suspend failed"
wait_until 10 grep -q ' end tenant suspended' "$T/b.out"
assert_contains "$(cat "$T/b.out")" "end tenant suspended" "suspend: the stream ended with event: end"
# the hub decides once per tenant in a pass: beta's verdict must not end acme's stream
assert_eq "$(grep -c ' end ' "$T/a.out")" 0 "suspend: acme's stream is not ended"
assert_eq "$(opens a)" "$a_opens" "suspend: acme's stream stays open (not reopened)"
wait_until 10 grep -q '^error 0 403' "$T/b.out"
assert_contains "$(cat "$T/b.out")" "error 0 403" "suspend: reconnecting is refused (403)"
assert_ge "$(hub_status kept_returned)" 1 "an ended stream's kept connection went back to the workers"

# ---- a slow client is dropped past stream.max_buffer, the others go on ----------------------------
python3 - "$NGINX_PORT" > "$T/slow.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"GET /t/acme/subscribe?channels=bulk HTTP/1.1\r\nHost: localhost\r\n\r\n")
time.sleep(25)   # reads nothing: nginx's buffers, then the hub's, fill up
PY
echo $! > "$T/slow.pid"
PIDS+=("$(cat "$T/slow.pid")")
wait_until 5 bash -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"hub\"][\"subscribers\"])')\" = 2 ]"
bulk=$(head -c 7000 /dev/zero | tr '\0' 'x')
for i in $(seq 1 40); do publish acme bulk $(for _ in $(seq 1 50); do echo "$bulk"; done); done
wait_until 10 bash -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"hub\"][\"dropped_slow\"])')\" -ge 1 ]"
assert_eq "$(hub_status dropped_slow)" 1 "slow: the client that reads nothing was dropped"
assert_contains "$(grep 'client is slow' "$T/tenancyd.log")" "stream.max_buffer" "slow: logged"
publish acme table:a 28
wait_until 5 bash -c "[ \$(grep -c ' table:a ' '$T/a.out') -ge 28 ]"
assert_eq "$(datas a table:a | tail -1)" 28 "slow: the other stream goes on"
kill "$(cat "$T/slow.pid")" 2> /dev/null

# ---- a reload lowers the per-tenant limit: one stream more is refused ----------------------------
sed -i 's/^stream.heartbeat = .*/stream.heartbeat = 1s\nstream.max_per_tenant = 1/' "$T/tenancyd.conf"
kill -HUP "$TN_PID"
wait_until 15 grep -q 'reloaded: generation 3' "$T/tenancyd.log" || fail "the second reload did not finish"
before=$(opens a)
code=$(curl -s -o "$T/limit.body" -w '%{http_code}' -m 5 "$BASE/t/acme/subscribe")
assert_eq "$code" 503 "limits: a second stream of acme is refused after the reload (stream.max_per_tenant = 1)"
sleep 1
assert_eq "$(opens a)" "$before" "limits: the open stream stays (not reopened)"
assert_eq "$(hub_status subscribers)" 1 "limits: one stream of acme open"
assert_ge "$(hub_status refused_limit)" 1 "limits: counted"

# ---- the data API's change feed ---------------------------------------------------------------
api() {   # api METHOD PATH [BODY]: the data API of acme, with its key
    curl -s -m 10 -o /dev/null -w '%{http_code}' -X "$1" -H "Authorization: Bearer $KEY" \
        -H 'Content-Type: application/json' ${3:+-d "$3"} "$BASE/t/acme/api$2"
}
sed -i 's/^stream.max_per_tenant = 1$/stream.max_per_tenant = 100/' "$T/tenancyd.conf"
kill -HUP "$TN_PID"
wait_until 15 grep -q 'reloaded: generation 4' "$T/tenancyd.log" || fail "the third reload did not finish"
assert_eq "$(api POST /tables '{"name":"notes","columns":[{"name":"body","type":"text"}]}')" 201 "data: a table"
assert_eq "$(api GET '/subscribe?tables=nosuch')" 404 "data: a stream of an unknown table is refused"
sse d 20 "$BASE/t/acme/api/subscribe?tables=notes" --types table:notes,schema \
    --header "Authorization: Bearer $KEY"
wait_open d || fail "data: the stream did not open: $(cat "$T/d.out" "$T/d.err")"
assert_eq "$(api POST /notes '[{"body":"one"},{"body":"two"}]')" 201 "data: rows written"
assert_eq "$(api POST /tables '{"name":"other","columns":[{"name":"x","type":"integer"}]}')" 201 "data: another table"
assert_eq "$(api POST /other '{"x":1}')" 201 "data: a row of a table not followed"
wait_until 10 bash -c "grep -q ' schema ' '$T/d.out'"
assert_contains "$(datas d table:notes)" '"op":"insert"' "data: the insert into notes arrived"
assert_contains "$(datas d schema)" '"table":"other"' "data: the schema change arrived"
assert_eq "$(grep -c 'table:other' "$T/d.out")" 0 "data: nothing of a table not followed"
kill "$(cat "$T/d.pid")" 2> /dev/null

# ---- a client that goes away frees its stream ---------------------------------------------------
kill "$(cat "$T/a.pid")" 2> /dev/null
sse_wait a
wait_until 10 bash -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"hub\"][\"subscribers\"])')\" = 0 ]" ||
    fail "the streams were not released"
assert_eq "$(hub_status subscribers)" 0 "release: no subscriber left"
assert_eq "$(curl -s -m 5 "$BASE/t/acme/")" "hello from localhost" "ordinary requests after all that"
assert_nginx_clean "streams ended properly"
