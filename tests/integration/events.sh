#!/bin/bash
# events.sh — the host's event log through the real host behind nginx: tn_publish from the
# hello app's test route POST /_publish?channel=C, read back with tn_events through its
# GET /_events?after=N. Ids are per tenant, 1, 2, 3... whichever worker publishes; a tenant
# never lists another's events; the log outlives a SIGHUP reload (a whole new generation of
# workers) and a SIGKILLed worker, and ids go on where they were; a bad channel, a body over
# events.max_event and a central request are refused; once the ring has wrapped, a reader
# behind it is told of the gap (410) instead of missing events.
. "$(dirname "$0")/lib.sh"
need curl nginx "$TENANCY_CLI"

tn_conf "pm.max_children = 3" \
    "state_dir = $T/state" \
    "tenant.resolvers = subdomain" \
    "tenant.base_domains = localhost" \
    "tenant.central_domains = localhost" \
    "events.ring_size = 64k" \
    "events.max_event = 2k"
mkdir -p "$T/state"
tn_cli init > /dev/null || fatal "tenancy init failed"
tn_cli tenant create acme > /dev/null || fatal "tenant create acme failed"
tn_cli tenant create globex > /dev/null || fatal "tenant create globex failed"
tn_start
nginx_start

# publish HOST CHANNEL DATA -> body; status in last_status
publish() {
    local out
    out=$(curl -s -m 20 -H "Host: $1" --data-binary "$3" -w '\n%{http_code}' \
        "http://127.0.0.1:$NGINX_PORT/_publish?channel=$2")
    printf '%s' "${out##*$'\n'}" > "$T/.last_status"
    printf '%s' "${out%$'\n'*}"
}

# ---- ids per tenant, over every worker -------------------------------------------------------
ids=""
for i in 1 2 3 4 5 6; do
    ids="$ids $(publish acme.localhost table:notes "acme-$i")"
done
assert_eq "$(echo $ids)" "id=1 id=2 id=3 id=4 id=5 id=6" "tenant A's ids: 1 to 6 in order (3 workers)"
ids=""
for i in 1 2 3; do
    ids="$ids $(publish globex.localhost schema "globex-$i")"
done
assert_eq "$(echo $ids)" "id=1 id=2 id=3" "tenant B's ids start at 1, apart from A's"

a=$(http "/_events?after=0" acme.localhost)
assert_eq "$(last_status)" 200 "A lists its events"
assert_eq "$(grep -c '^id=' <<< "$a")" 6 "A lists its 6 events"
assert_contains "$a" "id=3 channel=table:notes data=acme-3" "A's event 3 as published"
assert_contains "$a" "last=6" "A's last id"
b=$(http "/_events?after=0" globex.localhost)
assert_eq "$(grep -c '^id=' <<< "$b")" 3 "B lists its 3 events"
case "$b" in
*acme*) fail "tenant B's list shows tenant A's events: $b" ;;
*) log "ok: tenant B never lists tenant A's events" ;;
esac
case "$a" in
*globex*) fail "tenant A's list shows tenant B's events: $a" ;;
esac
assert_eq "$(http "/_events?after=4" acme.localhost | tr '\n' ' ')" \
    "id=5 channel=table:notes data=acme-5 id=6 channel=table:notes data=acme-6 last=6 " \
    "after=4: the events after 4 only"

# ---- refusals --------------------------------------------------------------------------------
publish acme.localhost 'bad%20name' x > /dev/null
assert_eq "$(last_status)" 400 "a channel with a space is refused"
publish acme.localhost table:notes "$(head -c 3000 /dev/zero | tr '\0' x)" > /dev/null
assert_eq "$(last_status)" 413 "an event over events.max_event is refused"
publish localhost table:notes x > /dev/null
assert_eq "$(last_status)" 404 "a central request has no tenant to publish to"

# ---- a reload and a killed worker keep the log -------------------------------------------------
kill -HUP "$TN_PID"
wait_until 20 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fatal "the reload did not finish"
a=$(http "/_events?after=0" acme.localhost)
assert_eq "$(grep -c '^id=' <<< "$a")" 6 "after SIGHUP: A's 6 events are still there"
assert_eq "$(publish acme.localhost table:notes acme-7)" "id=7" "after SIGHUP: A's ids go on (7)"
victim=$(tn_workers | head -1)
kill -KILL "$victim"
wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -ge 3 ] && ! kill -0 $victim 2>/dev/null" ||
    fail "the killed worker was not replaced"
for _ in 1 2 3 4 5 6; do   # over every worker, the new one too
    n=$(http "/_events?after=0" acme.localhost | grep -c '^id=')
    [ "$n" = 7 ] || fail "after SIGKILL of a worker: A lists $n events, expected 7"
done
log "ok: after SIGKILL of a worker: 6 requests over the workers list A's 7 events"
assert_eq "$(publish acme.localhost table:notes acme-8)" "id=8" "after SIGKILL: A's ids go on (8)"
assert_eq "$(publish globex.localhost schema globex-4)" "id=4" "after both: B's ids go on (4)"

# ---- a reader behind the ring is told of the gap -----------------------------------------------
big=$(head -c 1500 /dev/zero | tr '\0' y)
for _ in $(seq 1 60); do publish globex.localhost table:big "$big" > /dev/null; done
http "/_events?after=0" acme.localhost > "$T/gap.txt"
assert_eq "$(last_status)" 410 "A's events after 0 were pushed out by B's: a gap (410)"
assert_contains "$(cat "$T/gap.txt")" "gap last=8" "the gap says A's last id"
assert_eq "$(publish acme.localhost table:notes acme-9)" "id=9" "after the gap: A's ids go on (9)"
assert_eq "$(http "/_events?after=8" acme.localhost | head -1)" \
    "id=9 channel=table:notes data=acme-9" "a reader at the last id gets the next one"

assert_nginx_clean "event requests"
exit "$FAILED"
