#!/bin/bash
# faults.sh — process and environment faults, one at a time, behind a real nginx.
#
# What tests/integration/ already covers is not repeated: a killed worker respawned
# (pm.sh), the crash-storm brake engaging, showing "brake":true and releasing (pm.sh), a
# killed master's idle workers gone within 3 s and its socket reclaimed (reload.sh). Here:
#   1. master SIGKILLed with one worker idle and one in the middle of a request: both gone
#      within a second (the busy one answers its client 504 first: nobody is left to bound its
#      request), a new tenancyd reclaims the socket and serves, and nginx logged no upstream
#      error;
#   2. crashes far apart do not add up: with pm.crash_window = 1s, a worker killed every
#      1.3 s is replaced as fast the sixth time as the first (the backoff restarts after a
#      crash-free window), and POSTs sent throughout lose at most the requests in flight at
#      each kill, each a 502 in nginx's log (nginx retries nothing, as doc/examples/nginx.conf
#      sets it); then a storm engages the brake, read from the status as JSON;
#   3. disk full on one SQLite tenant (its file on a 2 MB tmpfs, filled up): its writes get
#      503 and an error line naming it, its reads still work, the other tenants read and
#      write as usual, and once space is freed it writes again — no restart. Needs root and
#      mount(8): when the mount is refused the test fails (exit 99), it never skips;
#   4. PostgreSQL unreachable at start: tenancyd starts and serves its SQLite tenants, the
#      PostgreSQL ones get 503 at once (the pool backs off instead of connecting for every
#      request), and within 5 s of PostgreSQL coming up they are served.
# Output: a table and $STRESS_OUT/stress-faults.json. Fails on any broken expectation.
. "$(dirname "$0")/common.sh"
# (no length to choose: --quick and --seconds are accepted, as by the other suites, and ignored)
need curl nginx sqlite3 psql mount umount "$HELPERS/hammer" "$TENANCY_CLI" "$JSON_CHECK"
[ -f "$STORE_SO" ] || hard_error "$STORE_SO is not built (make check builds it)"
now_ms() { date +%s%3N; }
declare -A R=()   # figures for the JSON

# ---- 1. master SIGKILLed: idle and busy workers gone within a second -----------------------
tn_conf "pm.max_children = 2" "request_timeout = 30s"
tn_start
nginx_start
curl -s -m 20 -o "$T/inflight.body" -w '%{http_code}' -H 'Host: a.example' \
    "http://127.0.0.1:$NGINX_PORT/sleep?ms=8000" > "$T/inflight.code" & CURL=$!
sleep 0.5   # the request is in its handler
workers=$(tn_workers | tr '\n' ' ')
t0=$(now_ms)
kill -KILL "$TN_PID"
declare -A gone=()
while [ $(($(now_ms) - t0)) -lt 5000 ]; do
    left=0
    for p in $workers; do
        if pid_running "$p"; then left=1; elif [ -z "${gone[$p]:-}" ]; then gone[$p]=$(($(now_ms) - t0)); fi
    done
    [ "$left" = 0 ] && break
    sleep 0.01
done
wait "$CURL"
code=$(cat "$T/inflight.code")
worst=0
for p in $workers; do
    g=${gone[$p]:-99999}
    log "worker $p gone $g ms after the master"
    [ "$g" -gt "$worst" ] && worst=$g
done
R[master_kill_workers_gone_ms]=$worst
[ "$worst" -le 1000 ] && log "ok: every worker gone within a second ($worst ms)" ||
    fail "a worker outlived its master by $worst ms"
assert_eq "$code" 504 "the request in flight was answered 504 by its worker"
tn_start
assert_eq "$(http / b.example)" "hello from b.example" "a new tenancyd reclaimed the socket and serves"
# The busy worker answered its request itself and the idle one held none: nginx, which retries
# nothing (fastcgi_next_upstream off), must have lost no request on a connection they left.
assert_nginx_clean "master killed, a new one started"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- 2. crashes far apart do not add up; a storm engages the brake (status JSON) -----------
tn_conf "pm.max_children = 2" "pm.crash_limit = 4" "pm.crash_window = 1s" "pm.respawn_backoff_max = 5s"
tn_start
: > "$T/nginx-error.log"
# POSTs on 2 connections throughout: each kill may cost at most the requests in flight then
# (2), each a 502 with its line in nginx's log; every other POST comes back to the byte.
POST_BODY="faults-$RANDOM$RANDOM"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 2 -d 9 -u /echo -m POST -b "$POST_BODY" -e "$POST_BODY" \
    --exact --expect-status any --json "$T/kills.json" 2> "$T/kills.log" & POSTER=$!
respawn_ms=()
for i in 1 2 3 4 5 6; do
    victim=$(tn_workers | head -1)
    tk=$(now_ms)
    kill -KILL "$victim"
    wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 2 ] && ! kill -0 $victim 2>/dev/null" ||
        fail "crash $i: worker $victim not replaced within 10 s"
    respawn_ms+=($(($(now_ms) - tk)))
    sleep 1.3   # longer than pm.crash_window
done
wait "$POSTER"
log "POSTs across 6 kills: $(tail -1 "$T/kills.log")"
n200=$(jstatus "$T/kills.json" 200)
n502=$(jstatus "$T/kills.json" 502)
R[sporadic_kills_posts_502]=$n502
assert_ge "$n200" 100 "POSTs answered across the kills"
assert_eq "$(jget "$T/kills.json" .wrong):$(jerrors "$T/kills.json"):$(($(jget "$T/kills.json" .responses) - n200 - n502))" \
    0:0:0 "every POST 200 echoed to the byte; nothing but 200 and 502, no transport error"
[ "$n502" -le 12 ] && log "ok: 6 kills cost $n502 POSTs, at most the 2 in flight each" ||
    fail "6 kills cost $n502 POSTs (at most 2 each)"
assert_eq "$(nginx_upstream_errors | wc -l)" "$n502" "each 502 has its line in nginx's error log, no other"
log "replaced after each of 6 crashes 1.3 s apart (ms): ${respawn_ms[*]}"
R[sporadic_respawn_ms]="[$(IFS=,; echo "${respawn_ms[*]}")]"
[ "${respawn_ms[5]}" -le 1000 ] && log "ok: the sixth crash is replaced as fast as the first" ||
    fail "crashes far apart added up: the sixth replacement took ${respawn_ms[5]} ms"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
# a storm: every worker but the oldest killed, again and again, within the window; the oldest
# stays up to answer the status
tn_conf "pm.max_children = 3" "pm.crash_limit = 4" "pm.crash_window = 3s" "pm.respawn_backoff_max = 2s"
tn_start
oldest=$(tn_workers | head -1)
for i in $(seq 1 12); do
    for p in $(tn_workers); do [ "$p" = "$oldest" ] || kill -KILL "$p" 2>/dev/null; done
    sleep 0.1
done
wait_until 5 grep -q 'respawn brake engaged' "$T/tenancyd.log" || fail "the brake did not engage"
st=$(http /_tenancy/status)
brake=$(printf '%s' "$st" | "$JSON_CHECK" .pool.brake 2>/dev/null)
crashes=$(printf '%s' "$st" | "$JSON_CHECK" .pool.crashes 2>/dev/null)
[ -n "$brake" ] || log "status: $(printf '%s' "$st" | head -c 300)"
assert_eq "$brake" true "status JSON: .pool.brake is true during the storm"
R[storm_crashes_in_status]=${crashes:-0}
wait_until 15 grep -q 'respawn brake released' "$T/tenancyd.log" || fail "the brake was never released"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null

# ---- 3. disk full on one SQLite tenant ------------------------------------------------------
MNT=$T/full-mnt
mkdir -p "$MNT" "$T/state"
if ! mount -t tmpfs -o size=2m tmpfs "$MNT" 2> "$T/mount.err"; then
    hard_error "cannot mount a 2 MB tmpfs for the disk-full case ($(cat "$T/mount.err")): this test needs root and permission to mount (CI runs it as root)"
fi
trap 'rc=$?; umount -l "$MNT" 2>/dev/null; [ -n "$PG_DIR" ] && "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT
PG_DIR=
tn_conf "app = $STORE_SO" "pm.max_children = 3" "request_timeout = 10s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" \
    "storage.migrations = $STORE_FIX/migrations" "storage.seed = $STORE_FIX/seed.sql"
tn_cli init > /dev/null || fatal "tenancy init failed"
full_name="Full $RANDOM$RANDOM"
for s in a1 a2 a3 a4; do tn_cli tenant create "$s" > /dev/null || fatal "create $s"; done
tn_cli tenant create full --name "$full_name" > /dev/null || fatal "create full"
src=$(sqlite3 "$T/state/control.db" "SELECT storage FROM tenants WHERE slug = 'full'")
sqlite3 "$src" "PRAGMA wal_checkpoint(TRUNCATE);" > /dev/null
mv "$src" "$MNT/full.db" && rm -f "$src-wal" "$src-shm"
# (the one registry edit made by hand: a tenant's file on a disk of its own)
sqlite3 "$T/state/control.db" "UPDATE tenants SET storage = '$MNT/full.db' WHERE slug = 'full'"
tn_start
post() {   # post TENANT BATCH FIRST_ID -> status
    local body="" j
    for j in $(seq 0 19); do body="$body$(($3 + j))"$'\n'; done
    curl -s -o /dev/null -m 10 -w '%{http_code}' -H "Host: $1.localhost" --data-binary "$body" \
        "http://127.0.0.1:$NGINX_PORT/write?batch=$2"
}
assert_eq "$(post full warm 1)" 200 "the tenant on the small disk writes while there is room"
# fill the disk: what is left goes to a filler file
dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null
log "tmpfs: $(df -h "$MNT" | tail -1 | awk '{print $3 " used, " $4 " free"}')"
codes=""
for i in $(seq 1 20); do codes="$codes $(post full "f$i" $((1000 + i * 20)))"; done
n503=$(echo "$codes" | tr ' ' '\n' | grep -c '^503$')
n200=$(echo "$codes" | tr ' ' '\n' | grep -c '^200$')
log "20 writes on the full disk: $n503 x 503, $n200 x 200 (${codes# })"
R[disk_full_writes_503]=$n503
assert_ge "$n503" 1 "writes to the tenant on the full disk are refused with 503"
[ $((n503 + n200)) -eq 20 ] || fail "writes on the full disk answered something else than 503/200: $codes"
grep -E 'error: .*tenant=full\].*(full|disk|storage)' "$T/tenancyd.log" | head -2 > "$T/fulllog"
[ -s "$T/fulllog" ] && log "ok: error log names the tenant: $(head -1 "$T/fulllog" | cut -c1-200)" ||
    fail "no error line naming tenant 'full'"
assert_eq "$(http / full.localhost)" "{\"tenant\":\"full\",\"data\":\"full\",\"name\":\"$full_name\"}" \
    "its reads still work"
others=0
for s in a1 a2 a3 a4; do [ "$(post "$s" "o-$s" $((5000 + ${s#a} * 100)))" = 200 ] && others=$((others + 1)); done
assert_eq "$others" 4 "the other tenants write as usual"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 3 -n 400 -H 'a%d.localhost' -N 4 -e '"tenant":"a%d","data":"a%d"' \
    --json "$T/others.json" 2> "$T/others.log" && log "ok: the other tenants read as usual" ||
    fail "other tenants while one disk is full: $(tail -1 "$T/others.log")"
rm -f "$MNT/filler"
assert_eq "$(post full after 90000)" 200 "space freed: the tenant writes again (no restart)"
half=$(sqlite3 "$MNT/full.db" "SELECT count(*) FROM (SELECT batch FROM writes GROUP BY batch HAVING count(*) <> 20)")
assert_eq "$half" 0 "no write half-applied on the full disk"
kill -QUIT "$TN_PID"; wait "$TN_PID" 2>/dev/null
umount -l "$MNT"

# ---- 4. PostgreSQL unreachable at start ------------------------------------------------------
pg_up
trap 'rc=$?; [ -n "$PG_DIR" ] && "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT
rm -rf "$T/state"
mkdir -p "$T/state"
tn_conf "app = $STORE_SO" "pm.max_children = 3" "request_timeout = 10s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" \
    "storage.migrations = $STORE_FIX/migrations" "storage.seed = $STORE_FIX/seed.sql" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema"
tn_cli init > /dev/null || fatal "tenancy init failed"
for s in s1 s2 s3; do tn_cli tenant create "$s" > /dev/null || fatal "create $s"; done
for s in q1 q2 q3; do tn_cli tenant create "$s" --placement pgs > /dev/null || fatal "create $s"; done
pg_ctl_as_owner stop -m fast -w > "$T/pgstop.log" 2>&1 || fatal "cannot stop PostgreSQL"
tn_start
log "ok: tenancyd is ready with PostgreSQL down"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 2 -d 2 -H 's%d.localhost' -N 3 -e '"tenant":"s%d","data":"s%d"' \
    --json "$T/sq.json" 2> "$T/sq.log" & H1=$!
"$HELPERS/hammer" -p "$NGINX_PORT" -c 2 -d 2 -H 'q%d.localhost' -N 3 --expect-status 503 \
    --json "$T/pgdown.json" 2> "$T/pgdown.log" & H2=$!
wait "$H1" && log "ok: SQLite tenants served while PostgreSQL is down" ||
    fail "SQLite tenants while PostgreSQL is down: $(tail -1 "$T/sq.log")"
wait "$H2" && log "ok: PostgreSQL tenants answered 503 while it is down" ||
    fail "PostgreSQL tenants while it is down: $(tail -1 "$T/pgdown.log")"
R[pg_down_requests_503]=$(jstatus "$T/pgdown.json" 503)
R[pg_down_p99_us]=$(jget "$T/pgdown.json" .latency_us.p99)
R[sqlite_while_pg_down_200]=$(jstatus "$T/sq.json" 200)
grep -q 'not tried again' "$T/tenancyd.log" && log "ok: the pool backs off (logged)" ||
    fail "no sign of the backoff in the log"
grep -m1 'storage unavailable' "$T/tenancyd.log" | cut -c1-220
tp=$(now_ms)
if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 30 \
        -o "-c listen_addresses='' -c unix_socket_directories='$PG_DIR' -c port=$PGPORT -c fsync=off" start > "$T/pgstart.log" 2>&1
else
    "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 30 \
        -o "-c listen_addresses='' -c unix_socket_directories='$PG_DIR' -c port=$PGPORT -c fsync=off" start > "$T/pgstart.log" 2>&1
fi || fatal "PostgreSQL did not start again: $(cat "$T/pgstart.log")"
tu=$(now_ms)
served_after=-1
while [ $(($(now_ms) - tu)) -lt 10000 ]; do
    if "$HELPERS/hammer" -p "$NGINX_PORT" -c 3 -n 30 -H 'q%d.localhost' -N 3 \
        -e '"tenant":"q%d","data":"q%d"' 2> /dev/null; then
        served_after=$(($(now_ms) - tu))
        break
    fi
    sleep 0.2
done
R[pg_served_after_up_ms]=$served_after
[ "$served_after" -ge 0 ] && [ "$served_after" -le 5000 ] &&
    log "ok: every PostgreSQL tenant served by every worker $served_after ms after it came up" ||
    fail "PostgreSQL tenants not served within 5 s of PostgreSQL coming up ($served_after)"

# ---- summary ---------------------------------------------------------------------------------
ok=true
[ "$FAILED" -eq 0 ] || ok=false
{
    printf '{"suite": "faults"'
    for k in "${!R[@]}"; do printf ', "%s": %s' "$k" "${R[$k]}"; done
    printf ', "ok": %s}\n' "$ok"
} > "$STRESS_OUT/stress-faults.json"
"$JSON_CHECK" < "$STRESS_OUT/stress-faults.json" || fail "the summary is not valid JSON"
printf '\n%s\n' "process faults"
for k in $(printf '%s\n' "${!R[@]}" | sort); do printf '  %-32s %s\n' "$k" "${R[$k]}"; done
echo "STRESS-RESULT $(cat "$STRESS_OUT/stress-faults.json")"
