#!/bin/bash
# shards.sh — listen.shards: tenant affinity through a web server that hashes the host.
#
# With listen.shards = N, tenancyd listens on N shard sockets beside the main one; worker
# index i serves the main socket and shard i mod N. This test checks, against a real
# tenancyd: the sockets exist and each worker reports its shard; a request on a shard socket
# is served by a worker of that shard and never by another (so a tenant hashed to a shard
# stays with its workers and their warm database connections); the main socket still serves;
# nginx with `hash $host consistent` over the shard sockets sends each host to one shard; a
# killed worker comes back on its shard; a request behind a busy shard's only worker is
# passed to an idle worker of another shard instead of waiting; the configuration errors are
# named by `tenancyd -t`, and a reload that cannot serve the running shards is refused while
# the old generation keeps serving.
. "$(dirname "$0")/lib.sh"
need curl nginx "$HELPERS/fcgi_probe" "$HELPERS/json_check"
PROBE=$HELPERS/fcgi_probe
JSON=$HELPERS/json_check

# shard_of_pids: "pid shard" lines of the running workers, from the status JSON.
shard_of_pids() {
    http /_tenancy/status > "$T/status.json"
    local n i
    n=$("$JSON" '.workers#' < "$T/status.json") || { fail "status is not JSON"; return; }
    for ((i = 0; i < n; i++)); do
        echo "$("$JSON" ".workers[$i].pid" < "$T/status.json") $("$JSON" ".workers[$i].shard" < "$T/status.json")"
    done
}

# Which worker served a request is read from the access log's new lines: written at once here
# (access_log_buffer = 0), so lines gathered earlier cannot land after the count.
shard_conf() { tn_conf "access_log_buffer = 0" "$@"; }

# served_by SOCKET HOST -> the pid that served one fcgi_probe request on SOCKET
served_by() {
    local before out
    before=$(wc -l < "$T/access.log")
    out=$("$PROBE" -t 5 -H "$2" "$1" request)
    case $out in *'request: PASS status=200'*) ;; *) fail "request on $1 for $2: $out"; return ;; esac
    wait_until 3 bash -c "[ \$(wc -l < '$T/access.log') -gt $before ]" || { fail "no access log line"; return; }
    tail -n +"$((before + 1))" "$T/access.log" | grep -o '"pid":[0-9]*' | head -1 | cut -d: -f2
}

# ---- sockets, shards of the workers, requests per shard --------------------------------------
shard_conf "pm.max_children = 4" "listen.shards = 2" "request_timeout = 10s"
tn_start
for s in "$T/fcgi.sock" "$T/fcgi.sock.0" "$T/fcgi.sock.1"; do
    [ -S "$s" ] && log "ok: $s is a socket" || fail "$s is not a socket"
done
nginx_start
shard_of_pids > "$T/shards.txt"
log "workers and shards: $(tr '\n' ' ' < "$T/shards.txt")"
assert_eq "$(awk '$2 == 0' "$T/shards.txt" | wc -l)" 2 "two workers serve shard 0"
assert_eq "$(awk '$2 == 1' "$T/shards.txt" | wc -l)" 2 "two workers serve shard 1"
assert_contains "$(cat "$T/status.json")" '"shards":2' "the status names the shard count"
assert_contains "$(cat "$T/status.json")" '"shard_queues":[' "and each shard's queue"

for shard in 0 1; do
    wrong=0 ok=0
    for i in $(seq 1 12); do
        pid=$(served_by "$T/fcgi.sock.$shard" "s$shard-$i.example")
        got=$(awk -v p="$pid" '$1 == p { print $2 }' "$T/shards.txt")
        if [ "$got" = "$shard" ]; then ok=$((ok + 1)); else wrong=$((wrong + 1)); fi
    done
    assert_eq "$ok/$wrong" "12/0" "shard $shard: every request served by a worker of shard $shard"
done
assert_eq "$(http / main.example)" "hello from main.example" "the main socket still serves"

# ---- nginx hashing the host over the shard sockets ------------------------------------------
kill -TERM "$(cat "$T/nginx/nginx.pid")" 2> /dev/null
wait_until 5 bash -c "! [ -e '$T/nginx/nginx.pid' ]"
nginx_start "unix:$T/fcgi.sock.0; server unix:$T/fcgi.sock.1; hash \$host consistent"
shard_of_pids > "$T/shards.txt"
: > "$T/hostshard.txt"
for round in 1 2 3; do
    for h in $(seq 1 16); do
        before=$(wc -l < "$T/access.log")
        [ "$(http / "h$h.example")" = "hello from h$h.example" ] || fail "h$h.example through nginx"
        wait_until 3 bash -c "[ \$(wc -l < '$T/access.log') -gt $before ]"
        pid=$(tail -n +"$((before + 1))" "$T/access.log" | grep -o '"pid":[0-9]*' | head -1 | cut -d: -f2)
        echo "h$h $(awk -v p="$pid" '$1 == p { print $2 }' "$T/shards.txt")" >> "$T/hostshard.txt"
    done
done
hosts_one_shard=$(sort -u "$T/hostshard.txt" | awk '{ print $1 }' | sort | uniq -u | wc -l)
assert_eq "$hosts_one_shard" 16 "each of 16 hosts always reached the same shard (3 rounds)"
used=$(awk '{ print $2 }' "$T/hostshard.txt" | sort -u | wc -l)
assert_eq "$used" 2 "nginx's hash spread the hosts over both shards"

# ---- a killed worker comes back on its shard -------------------------------------------------
victim=$(awk '$2 == 1 { print $1; exit }' "$T/shards.txt")
kill -9 "$victim"
wait_until 5 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 4 ] && ! kill -0 $victim" ||
    fail "worker $victim was not replaced"
wait_until 5 bash -c "curl -s -H 'Host: localhost' http://127.0.0.1:$NGINX_PORT/_tenancy/status | grep -q '\"state\":\"starting\"' && exit 1 || exit 0"
shard_of_pids > "$T/shards.txt"
assert_eq "$(awk '$2 == 1' "$T/shards.txt" | wc -l)" 2 "shard 1 has two workers again after the kill"
pid=$(served_by "$T/fcgi.sock.1" after-kill.example)
assert_eq "$(awk -v p="$pid" '$1 == p { print $2 }' "$T/shards.txt")" 1 "shard 1 serves after the kill"
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
for s in "$T/fcgi.sock" "$T/fcgi.sock.0" "$T/fcgi.sock.1"; do
    [ -e "$s" ] && fail "$s left behind after the stop" || log "ok: $s removed at the stop"
done

# ---- a busy shard: one worker per shard, a slow request on shard 0 ---------------------------
shard_conf "pm.max_children = 2" "listen.shards = 2" "request_timeout = 10s"
tn_start
slow_start=$SECONDS
"$PROBE" -t 8 -b 6000 -u '/sleep?ms=3000' -H slow.example "$T/fcgi.sock.0" request > "$T/slow.out" 2>&1 &
slow=$!
sleep 0.3
t0=$(date +%s%N)
out=$("$PROBE" -t 5 -H quick.example "$T/fcgi.sock.0" request)
ms=$((($(date +%s%N) - t0) / 1000000))
assert_contains "$out" 'request: PASS status=200' "a request behind the busy shard 0 is answered"
log "it took $ms ms (the slow request runs 3,000 ms)"
[ "$ms" -lt 1500 ] || fail "the request waited for the slow one on its shard ($ms ms)"
wait "$slow"
assert_contains "$(cat "$T/slow.out")" 'request: PASS status=200' "the slow request finished too"
[ $((SECONDS - slow_start)) -le 8 ] || fail "the slow request took too long"

# ---- configuration errors, and a reload that cannot serve the running shards ---------------
check_t() {   # check_t EXPECTED_MESSAGE "key = value"...
    local want=$1
    shift
    tn_conf "$@"
    local out
    out=$("$TENANCYD" -t -c "$T/tenancyd.conf" 2>&1)
    [ $? = 1 ] || fail "tenancyd -t accepted: $*"
    assert_contains "$out" "$want" "tenancyd -t: $want"
}
cp "$T/tenancyd.conf" "$T/running.conf"
check_t "needs pm = static" "pm = dynamic" "pm.max_children = 4" "listen.shards = 2"
check_t "above pm.max_children" "pm.max_children = 2" "listen.shards = 3"
check_t "not listen = inherit" "listen = inherit" "listen.shards = 2"
check_t "has no address" "listen = 127.0.0.1:65534" "listen.shards = 2"
# the running socket keeps its 2 shards: a reload to pm = dynamic and no shards is refused
shard_conf "pm = dynamic" "pm.max_children = 4" "pm.start = 2"
kill -HUP "$TN_PID"
wait_until 5 grep -q 'reload refused: the running socket has 2 shards' "$T/tenancyd.log" ||
    fail "the reload was not refused"
wait_until 5 grep -q 'listen.shards changed, which takes effect only after a restart' "$T/tenancyd.log" ||
    fail "the restart-only change is not named"
cp "$T/running.conf" "$T/tenancyd.conf"
pid=$(served_by "$T/fcgi.sock.1" after-refused-reload.example)
[ -n "$pid" ] && log "ok: shard 1 still serves after the refused reload"

# ---- reloads that keep the shards: the same socket, then a new one -------------------------
each_shard_serves() {   # each_shard_serves SOCKET WHEN: a request on each of its 2 shards
    local shard out
    for shard in 0 1; do
        out=$("$PROBE" -t 5 -H "s$shard.example" "$1.$shard" request)
        assert_contains "$out" 'request: PASS status=200' "$2, shard $shard serves"
    done
}
old_pids=$(pgrep -P "$TN_PID" | sort | tr '\n' ' ')
kill -HUP "$TN_PID"
wait_until 10 grep -q 'generation 2' "$T/tenancyd.log" || fail "the reload did not start generation 2"
wait_until 10 bash -c "for p in $old_pids; do kill -0 \$p 2> /dev/null && exit 1; done; exit 0" ||
    fail "the old generation did not leave"
each_shard_serves "$T/fcgi.sock" "after a reload"
# a new listen path: its shards are opened beside the old ones, which go with their workers
shard_conf "pm.max_children = 2" "listen.shards = 2" "request_timeout = 10s" "listen = $T/new.sock"
kill -HUP "$TN_PID"
wait_until 10 bash -c "[ -S '$T/new.sock.1' ] && ! [ -e '$T/fcgi.sock.1' ]" ||
    fail "the new shard sockets did not replace the old ones"
each_shard_serves "$T/new.sock" "after moving the socket"
[ -e "$T/fcgi.sock.0" ] && fail "the old shard socket is left behind" || log "ok: the old shard sockets are gone"
kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fatal "tenancyd did not stop"
