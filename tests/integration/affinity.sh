#!/bin/bash
# affinity.sh — tenant.affinity: each PostgreSQL tenant's requests served by one worker.
#
# Against a real PostgreSQL (schema mode, README's login: no superuser) and nginx set up as
# doc/examples/nginx.conf recommends (kept connections, no second try), with 4 static workers
# and no shards, every answer checked exactly (the tenant's marker, read from its own schema
# as its own role):
# - on the defaults (tenant.affinity = auto), nothing is sent while every worker's
#   connection keeps every tenant it serves (32 tenants, no count bound);
# - once the workers' connections are closed at their bound (max_tenants = 6 here), at least
#   95 % of each tenant's requests are served by one worker (read from the access log's pid),
#   and requests were sent between workers to get there, and the pool at rest after it uses
#   next to no CPU (no connection goes round the idle workers); the control, tenant.affinity = off
#   after a reload, must spread them (under 60 % on one worker), else the measure proves
#   nothing;
# - auto learns it for the whole generation: workers recycled every 50 requests, each too
#   short-lived to find by itself that 32 tenants do not fit a count bound of 24, send most
#   requests to their home once one worker of the generation has (a worker alone: 22 %);
# - database mode: once a worker's pool had to close a tenant's database connection to make
#   room (pg_db_max_open = 2 here), each database tenant is served by one worker too;
# - tenants on SQLite are never sent (their files are per worker and cheap to keep);
# - a tenant busier than its home spills over to other workers instead of queueing;
# - workers recycling every 40 requests under load lose nothing (what was sent to a leaving
#   worker is served or passed on), and neither does a reload; a worker killed under load
#   costs at most the requests in flight on it;
# - `tenancyd -t` takes the option and refuses a bad value;
# - the status page and the metrics count what the workers' storage pools did: nothing
#   closed while every tenant fits, connections closed at max_tenants and evicted for
#   pg_db_max_open, SQLite handles opened and found open, the connections open now (the
#   workers' own figures adding up to the host's); the log says once, and only once the
#   shares do not fit, which bound to raise.
. "$(dirname "$0")/lib.sh"
SCOPEAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/scopeapp.so
FIX=$top_srcdir/tests/fixtures/storeapp
need psql curl nginx "$HELPERS/hammer" "$HELPERS/json_check" "$TENANCY_CLI" "$SCOPEAPP"
NT=32   # PostgreSQL schema tenants
ND=8    # PostgreSQL database tenants
NS=8    # SQLite tenants

pg_cluster
psql -q -v ON_ERROR_STOP=1 > /dev/null <<'SQL' || fatal "the login role"
CREATE ROLE tenancy_app LOGIN CREATEROLE CREATEDB;
GRANT pg_read_all_stats TO tenancy_app;
ALTER DATABASE tenancy_test OWNER TO tenancy_app;
SQL

mkdir -p "$T/state"
# conf [LINE...]: 4 static workers, the access log written at once (its pid field says
# which worker served), tenants by subdomain, the PostgreSQL placement pgs and SQLite.
conf() {
    tn_conf "app = $SCOPEAPP" "pm.max_children = 4" "request_timeout = 10s" \
        "access_log_buffer = 0" "state_dir = $T/state" "tenant.resolvers = subdomain" \
        "tenant.base_domains = localhost" "tenant.max_workers = 100%" \
        "storage.migrations = $FIX/migrations" "storage.seed = $FIX/seed.sql" \
        "placement.pgs.dsn = postgres:host=$PG_DIR port=5432 dbname=tenancy_test user=tenancy_app" \
        "placement.pgs.mode = schema" \
        "placement.pgd.dsn = postgres:host=$PG_DIR port=5432 dbname=tenancy_test user=tenancy_app" \
        "placement.pgd.mode = database" "$@"
}
conf
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
seq 1 "$NT" | sed 's/^/t/' > "$T/pg.list"
seq 1 "$NS" | sed 's/^/s/' > "$T/sq.list"
seq 1 "$ND" | sed 's/^/d/' > "$T/db.list"
tn_cli tenant create --from-file "$T/pg.list" --placement pgs -j 4 > "$T/create.out" 2>&1 ||
    fatal "creating the PostgreSQL tenants: $(tail -3 "$T/create.out")"
tn_cli tenant create --from-file "$T/sq.list" --placement sqlite -j 4 > "$T/create.out" 2>&1 ||
    fatal "creating the SQLite tenants: $(tail -3 "$T/create.out")"
tn_cli tenant create --from-file "$T/db.list" --placement pgd -j 4 > "$T/create.out" 2>&1 ||
    fatal "creating the database tenants: $(tail -3 "$T/create.out")"
tn_start
nginx_start

assert_eq "$(http / t5.localhost)" '{"tenant":"t5","data":"t5","role":"t_t5"}' \
    "t5 reads its own marker as its own role"
assert_eq "$(http /plain s3.localhost)" '{"tenant":"s3","data":"s3","role":""}' \
    "s3 reads its own marker from its file"

counter() { http /_tenancy/status | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
# st FIELD: storage.FIELD of the status page
st() { http /_tenancy/status | "$HELPERS/json_check" ".storage.$1" || echo missing; }
# metric LINE_START: the value of the metrics line that starts so
metric() { http /_tenancy/metrics | grep -F "$1 " | awk '{ print $NF }'; }
FIT_WARN='closed its PostgreSQL connection at placement.NAME.max_tenants a second time'

# load NAME HOSTS N EXPECT [hammer args]: N checked requests over the tenants, 8 connections;
# every answer must be exactly the tenant's own, with no error.
load() {
    local name=$1 hosts=$2 n=$3 expect=$4
    shift 4
    "$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -n "$n" -d 60 -H "$hosts" --exact -e "$expect" \
        --json "$T/$name.json" "$@" 2> "$T/$name.log"
    local rc=$?
    log "$name: $(tail -1 "$T/$name.log")"
    [ $rc = 0 ] || fail "$name: hammer saw errors or wrong answers"
}

# pool_ticks: the CPU clock ticks tenancyd and its workers have used so far (user + system;
# the fields after the command name, which may hold spaces).
pool_ticks() {
    local s=0 p t
    for p in "$TN_PID" $(pgrep -P "$TN_PID"); do
        t=$(sed 's/^.*) //' "/proc/$p/stat" 2> /dev/null | awk '{ print $12 + $13 }')
        s=$((s + ${t:-0}))
    done
    echo "$s"
}

# modal_share FROM_LINE PREFIX: of the access-log lines after FROM_LINE for tenants PREFIX*,
# the share served by each tenant's most frequent worker, in percent.
modal_share() {
    tail -n +"$(($1 + 1))" "$T/access.log" |
        grep -o '"pid":[0-9]*.*"slug":"'"$2"'[0-9]*"' |
        sed 's/"pid":\([0-9]*\).*"slug":"\([^"]*\)"/\2 \1/' |
        awk '{ n[$1 " " $2]++; t[$1]++ } END {
            for (k in n) { split(k, a, " "); if (n[k] > m[a[1]]) m[a[1]] = n[k] }
            for (s in t) { top += m[s]; all += t[s] }
            if (all == 0) print 0; else print int(100 * top / all) }'
}

PG_EXPECT=$'{"tenant":"t%d","data":"t%d","role":"t_t%d"}\n'

reload_to() {   # reload_to [LINE...]: the new configuration, reloaded and serving
    conf "$@"
    local before
    before=$(tn_log_count ' reloaded: ')
    kill -HUP "$TN_PID"
    wait_until 10 bash -c "[ \$(grep -c ' reloaded: ' '$T/tenancyd.log') -gt $before ]" ||
        fatal "the reload did not complete: $(tail -3 "$T/tenancyd.log")"
    wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 4 ]" || fatal "old workers stayed"
}

# ---- on the defaults (auto): nothing to gain, nothing sent ------------------------------------
sent0=$(counter affinity_sent)
load auto-fits 't%d.localhost' 1000 "$PG_EXPECT" -N "$NT"
assert_eq "$(($(counter affinity_sent) - sent0))" 0 \
    "auto: nothing sent while every connection keeps every tenant"
assert_eq "$(st pg_closed_tenants)/$(st pg_closed_memory)" 0/0 \
    "storage: no connection closed at a bound while every tenant fits"
assert_ge "$(st pg_connects)" 1 "storage: the workers' PostgreSQL connections are counted"
http /_tenancy/status > "$T/status.json"
open_sum=0
for ((i = 0; i < $("$HELPERS/json_check" '.workers#' < "$T/status.json"); i++)); do
    open_sum=$((open_sum + $("$HELPERS/json_check" ".workers[$i].pg_open" < "$T/status.json")))
done
assert_eq "$open_sum" "$("$HELPERS/json_check" .storage.pg_open < "$T/status.json")" \
    "storage: the workers' open connections add up to the host's"
assert_ge "$open_sum" 1 "storage: connections are open"
assert_eq "$(tn_log_count "$FIT_WARN")" 0 "nothing said while every tenant fits"

# ---- connections closed at their bound: one worker per tenant --------------------------------
reload_to "placement.pgs.max_tenants = 6"
load warm-up 't%d.localhost' 400 "$PG_EXPECT" -N "$NT"   # every worker meets its bound
from=$(wc -l < "$T/access.log")
sent0=$(counter affinity_sent)
spilled0=$(counter affinity_spilled)
released0=$(counter keepalive_released)
load affine 't%d.localhost' 2000 "$PG_EXPECT" -N "$NT"
log "spilled $(($(counter affinity_spilled) - spilled0)), passed on $(($(counter keepalive_released) - released0))"
share=$(modal_share "$from" t)
log "with affinity: $share % of each tenant's requests on its most frequent worker"
assert_ge "$share" 95 "each PostgreSQL tenant is served by one worker"
sent=$(($(counter affinity_sent) - sent0))
assert_ge "$sent" 100 "requests were sent to their tenant's home ($sent)"
homes=$(tail -n +"$((from + 1))" "$T/access.log" | grep -o '"pid":[0-9]*' | sort -u | wc -l)
assert_eq "$homes" 4 "the tenants' homes are spread over the 4 workers"
assert_nginx_clean "requests sent between workers"
closed=$(st pg_closed_tenants)
assert_ge "$closed" 8 "storage: connections closed at max_tenants are counted ($closed)"
assert_eq "$(metric 'tenancy_storage_closed_total{kind="postgresql",reason="max_tenants"}')" "$closed" \
    "metrics: the same count of closes at max_tenants"
assert_ge "$(st pg_connects)" "$closed" "storage: each close was followed by a connect"
# 8 tenants a worker against a bound of 6: the shares do not fit, and the log says so once
assert_eq "$(tn_log_count "$FIT_WARN")" 1 "the log says once which bound to raise"
# At rest after a load on more connections than workers the pool uses next to no CPU: the
# spread of waiting requests (7b1721a, taken out since) once made idle workers pass nginx's
# idle kept connections round between them for as long as nginx kept them open (a taken
# connection is marked to be looked at, and it took that for a request waiting: about 0.7 of
# a core). Anything that passes connections between idle workers must not do that again.
load many-conns 't%d.localhost' 3000 "$PG_EXPECT" -N "$NT" -c 64
sleep 1
ticks0=$(pool_ticks)
sleep 3
idle_ticks=$(($(pool_ticks) - ticks0))
log "at rest after the load: $idle_ticks clock ticks of CPU in 3 s ($(getconf CLK_TCK) a second)"
[ "$idle_ticks" -le 30 ] || fail "the idle pool used $idle_ticks clock ticks of CPU in 3 s"

# ---- database mode: once a worker's connections no longer hold its tenants' databases ------
reload_to "storage.pg_db_max_open = 2"
D_EXPECT=$'{"tenant":"d%d","data":"d%d","role":""}\n'
load db-warm-up 'd%d.localhost' 200 "$D_EXPECT" -N "$ND" -u /plain
from=$(wc -l < "$T/access.log")
sent0=$(counter affinity_sent)
load db 'd%d.localhost' 800 "$D_EXPECT" -N "$ND" -u /plain
share=$(modal_share "$from" d)
log "database mode: $share % of each tenant's requests on its most frequent worker"
assert_ge "$share" 95 "each database tenant is served by one worker (2 connections a worker)"
assert_ge "$(($(counter affinity_sent) - sent0))" 50 "database tenants' requests were sent"
assert_ge "$(st pg_evicted)" 1 "storage: database connections closed for room are counted"
assert_eq "$(metric 'tenancy_storage_closed_total{kind="postgresql",reason="pg_db_max_open"}')" \
    "$(st pg_evicted)" "metrics: the same count of evictions"

# ---- SQLite tenants are never sent --------------------------------------------------------------
sent0=$(counter affinity_sent)
hits0=$(st sqlite_hits)
load sqlite 's%d.localhost' 400 $'{"tenant":"s%d","data":"s%d","role":""}\n' -N "$NS" -u /plain
assert_eq "$(($(counter affinity_sent) - sent0))" 0 "no SQLite tenant's request was sent"
opens=$(st sqlite_opens)
hits=$(($(st sqlite_hits) - hits0))
log "storage: $opens SQLite handles opened, $hits requests found theirs open, $(st sqlite_open) open now"
assert_ge "$opens" 1 "storage: SQLite handles opened are counted"
[ "$opens" -le $((4 * NS + 1)) ] || fail "storage: $opens SQLite opens for $NS tenants on 4 workers"
assert_ge "$hits" $((400 - 4 * NS)) "storage: requests that found their handle open are counted"
assert_ge "$(st sqlite_open)" 1 "storage: the SQLite handles open now"

# ---- auto learns for the whole generation ------------------------------------------------------
# Workers recycled every 50 requests with a count bound of 24 (of 32 tenants): a worker alone
# would close its connection at its bound only after about 49 requests and send little before
# it leaves; once one worker of the generation has, the later ones send from their first.
reload_to "placement.pgs.max_tenants = 24" "pm.max_requests = 50"
sent0=$(counter affinity_sent)
load learnt 't%d.localhost' 3000 "$PG_EXPECT" -N "$NT"
sent=$(($(counter affinity_sent) - sent0))
log "auto with workers recycled every 50 requests: $sent of 3000 requests sent to their home"
assert_ge "$sent" 1500 "workers started later send from their first request"

# ---- the control: tenant.affinity = off, after a reload ----------------------------------------
reload_to "tenant.affinity = off" "placement.pgs.max_tenants = 6"
from=$(wc -l < "$T/access.log")
sent0=$(counter affinity_sent)
load control 't%d.localhost' 2000 "$PG_EXPECT" -N "$NT"
share=$(modal_share "$from" t)
log "without affinity: $share %"
[ "$share" -lt 60 ] && log "ok: without affinity the tenants spread over the workers ($share % < 60 %)" ||
    fail "the control did not spread the tenants ($share %): the measure above cannot fail"
assert_eq "$(($(counter affinity_sent) - sent0))" 0 "nothing was sent with tenant.affinity = off"

# ---- a tenant busier than its home spills over (on: sent from the first request) -------------
reload_to "tenant.affinity = on"
from=$(wc -l < "$T/access.log")
spilled0=$(counter affinity_spilled)
"$HELPERS/hammer" -p "$NGINX_PORT" -c 32 -d 4 -H 't7.localhost' --exact \
    -e $'{"tenant":"t7","data":"t7","role":"t_t7"}\n' --json "$T/hot.json" 2> "$T/hot.log" ||
    fail "hot tenant: hammer saw errors or wrong answers: $(tail -1 "$T/hot.log")"
log "hot: $(tail -1 "$T/hot.log")"
workers=$(tail -n +"$((from + 1))" "$T/access.log" | grep -o '"pid":[0-9]*' | sort -u | wc -l)
assert_ge "$workers" 2 "one tenant's 32 connections were served by several workers ($workers)"
assert_ge "$(($(counter affinity_spilled) - spilled0))" 1 "requests spilled from the busy home"

# ---- recycling and reloads under load lose nothing ---------------------------------------------
reload_to "tenant.affinity = on" "pm.max_requests = 40"
: > "$T/nginx-error.log"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -n 3000 -d 60 -H 't%d.localhost' -N "$NT" --exact \
    -e "$PG_EXPECT" --json "$T/recycle.json" 2> "$T/recycle.log" &
hpid=$!
sleep 1
kill -HUP "$TN_PID"
wait "$hpid" || fail "recycling and a reload under load: $(tail -1 "$T/recycle.log")"
log "recycling: $(tail -1 "$T/recycle.log")"
assert_ge "$(tn_log_count 'recycling after')" 20 "workers recycled under the load"
assert_nginx_clean "recycling every 40 requests, and a reload, with requests sent between workers"

# ---- a worker killed under load costs at most its requests in flight ---------------------------
reload_to "tenant.affinity = on"
"$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -n 3000 -d 60 -H 't%d.localhost' -N "$NT" --exact \
    -e "$PG_EXPECT" --json "$T/kill.json" 2> "$T/kill.log" &
hpid=$!
sleep 1
victim=$(pgrep -P "$TN_PID" | head -1)
kill -9 "$victim"
wait "$hpid"
log "kill: $(tail -1 "$T/kill.log")"
jv() { "$HELPERS/json_check" "$2" < "$T/$1.json" 2> /dev/null || echo 0; }
assert_eq "$(jv kill .wrong)" 0 "no wrong answer around the kill"
lost=$(($(jv kill .requests) - $(jv kill .status.200)))
assert_ge "$(jv kill .status.200)" 2900 "answers right around the kill"
[ "$lost" -le 8 ] && log "ok: the kill cost $lost requests (at most the 8 in flight)" ||
    fail "the kill cost $lost requests (at most 8 were in flight)"
wait_until 10 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -eq 4 ]" || fail "the killed worker was not replaced"
load after-kill 't%d.localhost' 500 "$PG_EXPECT" -N "$NT"

# ---- the option --------------------------------------------------------------------------------
conf "tenant.affinity = sometimes"
out=$("$TENANCYD" -t -c "$T/tenancyd.conf" 2>&1)
[ $? = 1 ] || fail "tenancyd -t accepted tenant.affinity = sometimes"
assert_contains "$out" "tenant.affinity" "tenancyd -t names the option"
for v in off auto on; do
    conf "tenant.affinity = $v"
    "$TENANCYD" -t -c "$T/tenancyd.conf" > /dev/null 2>&1 || fail "tenancyd -t refused tenant.affinity = $v"
done

assert_eq "$(tn_log_count "$FIT_WARN")" 1 "the log said it once for the host's life"

kill -TERM "$TN_PID"
wait_until 10 bash -c "! kill -0 $TN_PID" || fail "tenancyd did not stop"
