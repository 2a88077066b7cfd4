#!/bin/bash
# tenancy.sh — the tenancy chain behind a real nginx, with the demo app: 1,000 tenants on
# *.localhost names under random load with every answer checked for its tenant; a custom
# domain, a path prefix and a central domain; unknown and invalid hosts; suspended,
# maintenance, deleted tenants; a change made with the `tenancy` command seen by every
# worker at once; the theme with its ETag; the per-tenant worker cap holding with one tenant
# hammering while the others are served; lookup_cache = off.
. "$(dirname "$0")/lib.sh"
need curl nginx "$HELPERS/hammer" "$TENANCY_CLI"

base_conf=(
    "app = $DEMO_SO"
    "pm.max_children = 3"
    "state_dir = $T/state"
    "tenant.resolvers = subdomain, host, path"
    "tenant.base_domains = localhost"
    "tenant.central_domains = admin.localhost"
    "tenant.max_workers = 100%"
)
tn_conf "${base_conf[@]}"
mkdir -p "$T/state"
tn_cli init > /dev/null || fatal "tenancy init failed"
tn_seed 1000
tn_cli tenant create custom --name "Custom Corp" --domain shop.example > /dev/null ||
    fatal "tenant create failed"
tn_start
nginx_start

# ---- 1,000 tenants, random requests, every answer checked for its tenant ---------------------
# The demo's /hello answers "hello from <the tenant's display name>": each answer must be
# exactly its tenant's, with the random name tn_seed gave it in the registry.
sed 's/^/hello from /' "$T/names-t" > "$T/expect"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 16 -d 5 -H 't%d.localhost' -N 1000 -u /hello \
    --expect-file "$T/expect" --exact --json "$T/hammer.json" 2> "$T/hammer.log"
rc=$?
log "hammer: $(tail -1 "$T/hammer.log")"
assert_eq "$rc" 0 "1,000 tenants under load: every answer for the right tenant"
grep -q '"wrong": *0' "$T/hammer.json" || fail "wrong-tenant answers: $(grep -o '"wrong": *[0-9]*' "$T/hammer.json")"

body=$(http / t42.localhost)
assert_contains "$body" "\"tenant\":\"t42\",\"name\":\"$(tn_name 42)\"," "the tenant's name from the context"
assert_eq "$(http /hello shop.example)" "hello from Custom Corp" "a custom domain (host resolver)"
assert_eq "$(http /t/t7/hello other.example)" "hello from $(tn_name 7)" \
    "a path prefix (path resolver), handler sees /hello"
assert_contains "$(http / admin.localhost)" '"platform":true' "a central domain is never a tenant"

http / nobody.localhost > "$T/unknown.html"
assert_eq "$(last_status)" 404 "unknown tenant: 404"
assert_contains "$(cat "$T/unknown.html")" "no tenant at this address" "the 404 page says why"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bad_name.localhost' "http://127.0.0.1:$NGINX_PORT/")
assert_eq "$code" 400 "an invalid host name: 400"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: 127.0.0.1' "http://127.0.0.1:$NGINX_PORT/")
assert_eq "$code" 400 "an IP literal is never a tenant"

# ---- states, changed with the CLI, seen by every worker at once ------------------------------
all_workers_see() {   # all_workers_see HOST STATUS WHAT: 30 requests (all workers) give STATUS
    local host=$1 want=$2 what=$3 bad=0
    for i in $(seq 1 30); do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $host" "http://127.0.0.1:$NGINX_PORT/")
        [ "$code" = "$want" ] || bad=$((bad + 1))
    done
    assert_eq "$bad" 0 "$what (30 requests over every worker)"
}
all_workers_see t2.localhost 200 "t2 active"
tn_cli tenant suspend t2 > /dev/null
all_workers_see t2.localhost 403 "t2 suspended at once"
tn_cli tenant maintenance t3 > /dev/null
all_workers_see t3.localhost 503 "t3 in maintenance"
ra=$(curl -s -D - -o /dev/null -H 'Host: t3.localhost' "http://127.0.0.1:$NGINX_PORT/" | tr -d '\r' | grep -i '^retry-after:')
assert_contains "$ra" "Retry-After" "maintenance answers Retry-After"
tn_cli tenant resume t3 > /dev/null
all_workers_see t3.localhost 200 "t3 resumed"
tn_cli tenant delete t4 > /dev/null
all_workers_see t4.localhost 404 "t4 deleted"
all_workers_see fresh.localhost 404 "an unknown name (now cached as unknown)"
tn_cli tenant create fresh --name Fresh > /dev/null
all_workers_see fresh.localhost 200 "a new tenant replaces the cached 'unknown' at once"
tn_cli domain add t8 www.t8.example > /dev/null
assert_eq "$(http /hello www.t8.example)" "hello from $(tn_name 8)" "a domain added is served at once"

# ---- the theme ---------------------------------------------------------------------------------
tn_cli settings set t1 theme.primary '#ff0000' > /dev/null
tn_cli settings set t1 theme.bad 'red;}body{x' > /dev/null
css=$(http /_theme.css t1.localhost)
assert_contains "$css" "--primary: #ff0000;" "the theme as CSS"
case "$css" in *"body{"*) fail "an unsafe theme value was rendered" ;; *) log "ok: unsafe value dropped" ;; esac
etag=$(curl -s -D - -o /dev/null -H 'Host: t1.localhost' "http://127.0.0.1:$NGINX_PORT/_theme.css" | tr -d '\r' | awk -F': ' 'tolower($1)=="etag"{print $2}')
[ -n "$etag" ] || fail "no ETag on the theme"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: t1.localhost' -H "If-None-Match: $etag" "http://127.0.0.1:$NGINX_PORT/_theme.css")
assert_eq "$code" 304 "If-None-Match gives 304"

# ---- the access log carries the tenant ---------------------------------------------------------
access_log_settled
line=$(grep '"host":"t42.localhost"' "$T/access.log" | tail -1)
assert_contains "$line" '"tenant":{"id":' "access log: tenant id"
assert_contains "$line" '"slug":"t42"' "access log: tenant slug"
line=$(grep '"host":"nobody.localhost"' "$T/access.log" | tail -1)
assert_contains "$line" '"stage":"identify"' "access log: the stage of a 404"

# ---- the per-tenant worker cap -------------------------------------------------------------------
# Three t9 requests of 1.5 s each at once, with a cap of one worker per tenant. Each start
# and end is timed by curl: start_ms is when the request was sent, the total its answer.
cap_run() {   # LABEL: three /sleep?ms=1500 of t9 at once, and t10 meanwhile
    rm -f "$T"/cap?.code "$T"/cap?
    local pids=() i
    # The first one alone, then two more: the workers look at a request's tenant before
    # reading it only once a tenant is at its cap, so three sent at the same instant could
    # meet the cap before the first is counted (and be refused at once, as without waiting).
    for i in 1 2 3; do
        curl -s -o "$T/cap$i" -w '%{http_code} %{time_total}\n' -H 'Host: t9.localhost' \
            "http://127.0.0.1:$NGINX_PORT/sleep?ms=1500" > "$T/cap$i.code" & pids+=($!)
        [ "$i" = 1 ] && sleep 0.2
    done
    sleep 0.2
    other=$(curl -s -m 5 -w ' %{http_code} %{time_total}' -H 'Host: t10.localhost' \
        "http://127.0.0.1:$NGINX_PORT/" | tr -d '\n')
    # The workers' nice values while the second t9 request runs (it waited, so t9 uses its
    # whole share: tenant.heavy_nice); the first one was admitted before t9 was at its cap.
    sleep 1.6
    nices=$(ps -o ni= --ppid "$TN_PID" | tr -d ' ' | sort -n | tr '\n' ' ')
    wait "${pids[@]}"
    codes=$(cut -d' ' -f1 "$T"/cap?.code | sort | tr '\n' ' ')
    slowest=$(cut -d' ' -f2 "$T"/cap?.code | sort -n | tail -1)
    log "$1: t9 x3 with a cap of 1: $codes(slowest ${slowest}s); t10 meanwhile: $other;" \
        "workers' nice values then: $nices"
}
# tenant.queue_wait (default 5 s): the two over the cap wait, holding no worker, and run one
# after the other. Two workers: a wait that held one would leave t10 none.
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
tn_conf "${base_conf[@]}" "app = $HELLO_SO" "tenant.max_workers = 1" "request_timeout = 10s" \
    "pm = static" "pm.max_children = 2"
tn_start
cap_run "queue_wait 5s"
assert_eq "$codes" "200 200 200 " "queue_wait: all three t9 requests served"
# One after the other: the last ends 4.5 s after the first began, 0.2 s before it was sent.
awk -v s="$slowest" 'BEGIN { exit !(s >= 4.1) }' ||
    fail "queue_wait: the last t9 answer came after ${slowest}s: the cap of one did not hold"
assert_eq "${other% *}" "hello from t10.localhost 200" "queue_wait: another tenant served meanwhile"
awk -v s="${other##* }" 'BEGIN { exit !(s < 1.0) }' ||
    fail "queue_wait: t10 waited ${other##* }s: the waiting t9 requests held a worker"
t9=$(http /_tenancy/status | grep -o '"slug":"t9"[^}]*')
assert_contains "$t9" '"max_inflight":1,' "queue_wait: never two t9 requests at once"
assert_contains "$t9" '"rejected":0,' "queue_wait: no t9 request refused"
assert_contains "$t9" '"waiting":0' "queue_wait: none left waiting"
assert_eq "$(echo "$nices" | tr ' ' '\n' | grep -c '^19$')" 1 \
    "tenant.heavy_nice: the one worker serving t9's second request runs at nice 19"
# back at their own value: the master's (make check may run under nice)
base_ni=$(ps -o ni= -p "$TN_PID" | tr -d ' ')
assert_eq "$(ps -o ni= --ppid "$TN_PID" | tr -d ' ' | sort -u | tr '\n' ' ')" "$base_ni " \
    "tenant.heavy_nice: every worker back at the master's nice value ($base_ni) afterwards"

# queue_wait 1s: the first runs, the other two give up waiting after a second (503).
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
tn_conf "${base_conf[@]}" "app = $HELLO_SO" "tenant.max_workers = 1" "request_timeout = 10s" \
    "tenant.queue_wait = 1s"
tn_start
cap_run "queue_wait 1s"
assert_eq "$codes" "200 503 503 " "queue_wait 1s: one served, two refused after waiting"
for i in 1 2 3; do
    read -r code secs < "$T/cap$i.code"
    [ "$code" = 503 ] || continue
    awk -v s="$secs" 'BEGIN { exit !(s >= 0.9 && s < 1.5) }' ||
        fail "queue_wait 1s: a 503 came after ${secs}s, not after the second of waiting"
done

# tenant.queue_wait = 0: refused at once, as before the setting.
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
tn_conf "${base_conf[@]}" "app = $HELLO_SO" "tenant.max_workers = 1" "request_timeout = 10s" \
    "tenant.queue_wait = 0"
tn_start
cap_run "queue_wait 0"
assert_eq "$codes" "200 503 503 " "queue_wait 0: two t9 requests refused at once (503)"
assert_eq "${other% *}" "hello from t10.localhost 200" "another tenant served meanwhile"
assert_contains "$(http /_tenancy/status)" '"slug":"t9"' "per-tenant counters in the status"
assert_contains "$(http /_tenancy/status | grep -o '"slug":"t9"[^}]*')" '"rejected":2' "t9's refusals counted"

# ---- lookup_cache = off still works ----------------------------------------------------------------
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
tn_conf "${base_conf[@]}" "lookup_cache = off"
tn_start
# Without the cache every request reads the registry: the state set above holds, and a
# change is seen at once. With t2 resumed and t4 restored all 1,000 tenants must answer 200,
# so the run below is judged as strictly as the first one (no status but 2xx, no error),
# each body exactly its tenant's greeting (the registry's display name).
all_workers_see t2.localhost 403 "lookup_cache = off: t2 still suspended"
tn_cli tenant resume t2 > /dev/null || fail "tenant resume t2 failed"
tn_cli tenant restore t4 > /dev/null || fail "tenant restore t4 failed"
all_workers_see t2.localhost 200 "lookup_cache = off: t2 resumed at once"
all_workers_see t4.localhost 200 "lookup_cache = off: t4 restored at once"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -n 2000 -H 't%d.localhost' -N 1000 -u /hello \
    --expect-file "$T/expect" --exact --json "$T/hammer2.json" 2> "$T/hammer2.log"
rc=$?
log "hammer: $(tail -1 "$T/hammer2.log")"
assert_eq "$rc" 0 "lookup_cache = off, 1,000 tenants under load: every answer 2xx and exact"
grep -q '"wrong": *0' "$T/hammer2.json" ||
    fail "lookup_cache = off: wrong-tenant answers: $(grep -o '"wrong": *[0-9]*' "$T/hammer2.json")"
