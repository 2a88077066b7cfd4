#!/bin/bash
# events_hosts.sh — events across hosts: two tenancyd (a and b) share a tenant registry in a
# real PostgreSQL, each with its own stream hub, behind one nginx with a server per host.
# An event published on host a (hello's POST /_publish, tn_publish) reaches the subscribers
# of the same tenant on host b (NOTIFY tenancy_events -> b's hub -> b's event log -> b's
# streams), in order, with b's own ids; another tenant's subscriber on b gets none of it; and
# the other way round. A stream client here is curl -N (text/event-stream as sent).
. "$(dirname "$0")/lib.sh"
need curl nginx "$TENANCY_CLI"
pg_cluster

for h in a b; do
    host_conf "$h" "$HELLO_SO" "pm.jobs = 0" "stream.hub = on" "stream.heartbeat = 1s"
done
"$TENANCY_CLI" -c "$T/a.conf" init > /dev/null || fatal "init on PostgreSQL failed"
for s in acme globex; do
    "$TENANCY_CLI" -c "$T/a.conf" tenant create "$s" > /dev/null || fatal "creating $s failed"
done
start_host a
start_host b

PORT_A=$(free_port)
PORT_B=$(free_port)
{
    nginx_conf_head
    for h in a b; do
        eval "port=\$PORT_$(echo $h | tr a-b A-B)"
        cat <<NGX
    upstream host_$h { server unix:$T/$h.sock; keepalive 16; }
    server {
        listen 127.0.0.1:$port;
        include /etc/nginx/fastcgi_params;
        fastcgi_param TENANT_HOST \$host;
        fastcgi_keep_conn on;
        fastcgi_next_upstream off;
        fastcgi_buffering off;
        fastcgi_read_timeout 60s;
        location / { fastcgi_pass host_$h; }
    }
NGX
    done
    echo "}"
} > "$T/nginx.conf"
nginx_launch "$PORT_B"

subscribe() {   # subscribe PORT SLUG FILE: a stream in the background, 30 s at most
    curl -s -N -m 30 -H "Host: $2.localhost" "http://127.0.0.1:$1/subscribe" > "$3" 2>/dev/null &
    PIDS+=("$!")
}
publish() {   # publish PORT SLUG DATA -> "id=N"
    curl -s -m 10 -X POST -H "Host: $2.localhost" --data-binary "$3" \
        "http://127.0.0.1:$1/_publish?channel=table:notes"
}
subscribers() {   # subscribers PORT: open streams on that host's hub
    curl -s -m 5 -H "Host: localhost" "http://127.0.0.1:$1/_tenancy/status" |
        grep -o '"hub":{[^}]*"subscribers":[0-9]*' | grep -o '[0-9]*$'
}
datas() { grep '^data: ' "$1" | cut -c7- | tr '\n' ' '; }
ids() { grep '^id: ' "$1" | cut -c5- | tr '\n' ' '; }

# Events sent before a hub listens are not seen there (documented): wait for both.
for h in a b; do
    wait_until 10 grep -q "the hub listens for other hosts' events" "$T/$h.log" ||
        fail "host $h's hub does not listen for other hosts' events"
done
subscribe "$PORT_B" acme "$T/b-acme.sse"
subscribe "$PORT_B" globex "$T/b-globex.sse"
subscribe "$PORT_A" acme "$T/a-acme.sse"
subscribe "$PORT_A" globex "$T/a-globex.sse"
wait_until 10 bash -c "[ \"\$(curl -s -m 5 -H 'Host: localhost' http://127.0.0.1:$PORT_B/_tenancy/status | grep -o '\"subscribers\":[0-9]*' | head -1 | cut -d: -f2)\" = 2 ]" ||
    fail "host b's hub does not hold the two streams"
wait_until 10 bash -c "[ \"\$(curl -s -m 5 -H 'Host: localhost' http://127.0.0.1:$PORT_A/_tenancy/status | grep -o '\"subscribers\":[0-9]*' | head -1 | cut -d: -f2)\" = 2 ]" ||
    fail "host a's hub does not hold the two streams"

# ---- a -> b --------------------------------------------------------------------------------------
assert_eq "$(publish "$PORT_A" acme from-a-1)" "id=1" "host a: acme's first event has a's id 1"
assert_eq "$(publish "$PORT_A" acme from-a-2)" "id=2" "host a: acme's second, id 2"
assert_eq "$(publish "$PORT_A" acme from-a-3)" "id=3" "host a: acme's third, id 3"
wait_until 10 grep -q 'from-a-3' "$T/b-acme.sse" || fail "host a's events did not reach acme's stream on host b"
assert_eq "$(datas "$T/b-acme.sse")" "from-a-1 from-a-2 from-a-3 " \
    "host b: acme's stream has host a's three events, in order, each once"
assert_eq "$(ids "$T/b-acme.sse")" "1 2 3 " "... numbered by host b's own log"
assert_eq "$(datas "$T/a-acme.sse")" "from-a-1 from-a-2 from-a-3 " "host a: its own acme stream has them too"

# ---- b -> a, another tenant ------------------------------------------------------------------------------
publish "$PORT_B" globex from-b-1 > /dev/null
publish "$PORT_B" globex from-b-2 > /dev/null
wait_until 10 grep -q 'from-b-2' "$T/a-globex.sse" || fail "host b's events did not reach globex's stream on host a"
assert_eq "$(datas "$T/a-globex.sse")" "from-b-1 from-b-2 " "host a: globex's stream has host b's two events"
assert_eq "$(datas "$T/b-globex.sse")" "from-b-1 from-b-2 " "host b: globex's own stream has them"
sleep 1
case "$(cat "$T/b-globex.sse" "$T/a-globex.sse")" in
*from-a*) fail "a globex stream carries acme's events" ;;
*) log "ok: no globex stream on either host carries acme's events" ;;
esac
case "$(cat "$T/b-acme.sse" "$T/a-acme.sse")" in
*from-b*) fail "an acme stream carries globex's events" ;;
*) log "ok: no acme stream on either host carries globex's events" ;;
esac

# ---- polling on the other host: tn_events reads the remote events from b's log ---------------------
r=$(curl -s -m 5 -H "Host: acme.localhost" "http://127.0.0.1:$PORT_B/_events?after=0")
assert_contains "$r" "data=from-a-2" "host b's log lists the event published on host a (tn_events)"
