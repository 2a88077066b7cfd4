#!/bin/bash
# jobs_pg.sh — jobs on a PostgreSQL registry shared by two hosts: the job workers of both
# claim from one queue (FOR UPDATE SKIP LOCKED), each job runs once, in its tenant's own
# schema and as its tenant's own role (placement login = tenant); a tenant moved to SQLite
# is told so (tenancy.moved) in its new storage; and a host killed with a
# job in hand gets it back the moment it starts again (its leases are recognised as its
# own), not when the lease expires. A job's statements are bounded by the job's own time
# limit, not by the placement's statement_timeout (a request's bound), and a statement of a
# job that ran out of time is cancelled by the server, not left running.
#
# Two tenancyd (a and b: their own state_dir and socket, one registry) behind one nginx
# whose upstream has both, so requests and their jobs land on either host.
. "$(dirname "$0")/lib.sh"
need curl nginx psql python3 "$TENANCY_CLI"
JOBAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/jobapp.so
FIX=$top_srcdir/tests/fixtures/jobapp
[ -f "$JOBAPP" ] || fatal "no $JOBAPP (make check builds it)"
pg_cluster

post() {
    curl -s -m 20 -X POST -H "Host: $2" "http://127.0.0.1:$NGINX_PORT$1"
}
psql_q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
job_state() { psql_q -c "SELECT state || '|' || attempts FROM tenancy.jobs WHERE id = $1"; }

for h in a b; do
    host_conf "$h" "$JOBAPP" "pm.jobs = 2" "stream.hub = off" \
        "storage.migrations = $FIX/migrations" "storage.seed = $FIX/seed.sql" \
        "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema" \
        "placement.pgs.login = tenant" "placement.pgs.statement_timeout = 1s" \
        "jobs.poll = 200ms" "jobs.timeout = 60s"
done
tn_cli() { "$TENANCY_CLI" -c "$T/a.conf" "$@"; }
tn_cli init > "$T/init.out" 2>&1 || fatal "init on PostgreSQL failed: $(cat "$T/init.out")"
for s in acme globex initech; do
    tn_cli tenant create "$s" --placement pgs > "$T/create.out" 2>&1 ||
        fatal "creating $s: $(cat "$T/create.out")"
done
start_host a
start_host b
nginx_start "unix:$T/a.sock; server unix:$T/b.sock"

# ---- both hosts' job workers drain one queue, each job once -------------------------------------
for i in $(seq 1 40); do
    for s in acme globex initech; do
        r=$(post "/enqueue?name=record&payload=$s-$i" "$s.localhost")
        case "$r" in ok\ *) ;; *) fail "enqueue for $s: '$r'" ;; esac
    done
done
wait_until 60 bash -c "[ \"\$(psql -X -At -c \"SELECT count(*) FROM tenancy.jobs WHERE name = 'record' AND state = 'done'\")\" = 120 ]" ||
    fail "the 120 jobs were not all done ($(psql_q -c "SELECT state, count(*) FROM tenancy.jobs GROUP BY state" | tr '\n' ' '))"
for s in acme globex initech; do
    got=$(http /log "$s.localhost" | awk -F'|' '$2 == "record"' | cut -d'|' -f3,4 | sort -t- -k2 -n | tr '\n' ' ')
    want=$(for i in $(seq 1 40); do printf '%s-%d|%s ' "$s" "$i" "$s"; done)
    assert_eq "$got" "$want" "$s: its 40 jobs each ran once, in its own schema"
done
pids=$(for s in acme globex initech; do http /pids "$s.localhost"; done | sort -u)
ran_a=0 ran_b=0
for p in $pids; do
    [ "$p" = 0 ] && continue
    [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$PID_a" ] && ran_a=1
    [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$PID_b" ] && ran_b=1
done
assert_eq "$ran_a$ran_b" 11 "job workers of both hosts ran jobs from the one queue"

# ---- the moved hook: told in the tenant's new storage --------------------------------------------
tn_cli move initech --to sqlite --drain 0 > "$T/move.out" 2>&1 || fail "move initech failed: $(cat "$T/move.out")"
wait_until 20 bash -c "curl -s -H 'Host: initech.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q tenancy.moved" ||
    fail "the moved hook did not run"
assert_eq "$(http /log initech.localhost | awk -F'|' '$2 == "tenancy.moved"' | cut -d'|' -f3,4)" \
    '{"from":"pgs","to":"sqlite"}|initech' "initech's app was told of its move, in its new storage"
assert_eq "$(http /log initech.localhost | awk -F'|' '$2 == "record"' | grep -c .)" 40 \
    "its 40 rows came along"

# ---- a job's statements are bounded by its own time limit, not the placement's -----------------
# The placement's statement_timeout (1 s) bounds a request: a 2.5 s statement is cancelled. A
# job may take longer (jobs.timeout, 60 s here): the same statement runs to its end. A job given
# 3 s for a 60 s statement has it cancelled by the server when its attempt ends.
r=$(http "/pgsleep?s=2.5" acme.localhost)
assert_contains "$r" "canceling statement due to statement timeout" \
    "a request's statement is bounded by the placement's statement_timeout"
r=$(post "/enqueue?name=pgsleep&payload=2.5&attempts=1" acme.localhost)
jid=$(awk '{print $2}' <<< "$r")
[ -n "$jid" ] && [ "$jid" != 0 ] || fatal "enqueue pgsleep: '$r'"
wait_until 30 bash -c "psql -X -At -c \"SELECT state FROM tenancy.jobs WHERE id = $jid\" | grep -qx 'done\|dead'" ||
    fail "the 2.5 s job did not end ($(job_state "$jid"))"
assert_eq "$(job_state "$jid")" "done|1" \
    "a job's 2.5 s statement ran past the placement's 1 s statement_timeout"
assert_eq "$(http /log acme.localhost | awk -F'|' '$2 == "pgsleep"' | cut -d'|' -f3,4,5)" \
    "2.5|acme|1" "the job ran once, in acme's storage"
r=$(post "/enqueue?name=pgsleep&payload=60&attempts=1&timeout=3000" globex.localhost)
jid=$(awk '{print $2}' <<< "$r")
[ -n "$jid" ] && [ "$jid" != 0 ] || fatal "enqueue pgsleep: '$r'"
wait_until 30 bash -c "[ \"\$(psql -X -At -c \"SELECT state FROM tenancy.jobs WHERE id = $jid\")\" = dead ]" ||
    fail "the job past its 3 s was not kept as dead ($(job_state "$jid"))"
running_sql="SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND state = 'active'"
wait_until 5 bash -c "[ \"\$(psql -X -At -c \"$running_sql\")\" = 0 ]" ||
    fail "the statement of the job that ran out of time still runs ($(psql_q -c "$running_sql"))"
log "ok: the timed-out job's statement was cancelled by the server"

# ---- a host killed with a job in hand gets it back as it starts --------------------------------------
# Only host a takes jobs now (b reloaded with pm.jobs = 0), so the job is a's.
sed -i 's/^pm.jobs = 2$/pm.jobs = 0/' "$T/b.conf"
kill -HUP "$PID_b"
wait_until 20 grep -q 'reloaded: generation 2' "$T/b.log" || fatal "host b did not reload"
sleep 2   # its old job workers, idle, leave at once
# 15 s on the first attempt: the kill lands inside it on a loaded machine too; 0.2 s after.
r=$(post "/enqueue?name=sleep&payload=15000/200" globex.localhost)
sid=$(awk '{print $2}' <<< "$r")
lease=""
for _ in $(seq 1 100); do
    lease=$(psql_q -c "SELECT lease FROM tenancy.jobs WHERE id = $sid AND state = 'running'")
    [ -n "$lease" ] && break
    sleep 0.1
done
[ -n "$lease" ] || fatal "the sleep job never ran"
log "host a runs the sleep job (lease $lease); killing host a, master and workers"
# The master is stopped first: running, it could reap its killed job worker before its own
# SIGKILL lands and queue the job again at once (what it does for a job worker killed
# alone), and the job would not be left running for the restart to find.
kids=$(pgrep -P "$PID_a")
kill -STOP "$PID_a"
kill -KILL $kids "$PID_a" 2>/dev/null
wait "$PID_a" 2>/dev/null
sleep 0.5
assert_eq "$(job_state "$sid")" "running|1" "the killed host's job is left running, its lease unexpired"
t0=$(date +%s%3N)
start_host a
wait_until 20 bash -c "[ \"\$(psql -X -At -c \"SELECT state FROM tenancy.jobs WHERE id = $sid\")\" = done ]" ||
    fail "the killed host's job did not run again ($(job_state "$sid"))"
took=$(( $(date +%s%3N) - t0 ))
assert_eq "$(job_state "$sid")" "done|2" "the job in hand when its host was killed ran again, once"
log "it was done $took ms after its host started again (its lease would have lasted 90 s)"
[ "$took" -lt 30000 ] && log "ok: recovered at the host's start, not at the lease's end" ||
    fail "the job waited $took ms: the restarted host did not recover its own lease"
assert_contains "$(cat "$T/a.log")" "the host restarted while it ran" \
    "the restarted host says why the job runs again"
