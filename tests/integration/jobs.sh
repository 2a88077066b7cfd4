#!/bin/bash
# jobs.sh — jobs through the real host behind nginx: tests/helpers/jobapp.c queues them from
# requests (tn_job_enqueue), the job workers (pm.jobs) run them, and each job writes the
# marker it read from the storage it was given into its tenant's job_log, so every check
# below compares exact values only the right tenant's storage holds.
#
#   context       each job reads its own tenant's marker; a failed attempt's open transaction
#                 (it overwrote the marker) never reaches the next job
#   retries       a flaky job fails twice, then succeeds on attempt 3 after a backoff
#   dead          attempts used up: kept as dead with its last error
#   backoff cap   a failed job waits at most jobs.max_backoff before its next attempt
#   unique keys   a second enqueue with a live key returns the first job's id
#   delay         a delayed job does not run early
#   tenants       a tenant's request cannot queue for another tenant; a central one can;
#                 central jobs run with no tenant
#   from a job    a job queues another job for its own tenant
#   timeout       a job past its timeout is stopped and kept as dead ("timed out")
#   crash         a job that aborts its worker: the worker is restarted, the job runs again
#   SIGKILL       a job worker killed mid-job: its job runs again at once (attempt 2)
#   reload        SIGHUP while a job runs: it finishes once, in the old generation
#   schedules     a schedule behind by hours runs once to catch up, and its next time is
#                 in the future; a bad cron spec is refused naming the field
#   hooks         created, suspended, resumed, deleted (run while deleted), restored and
#                 migrated reach the app as tenancy.* jobs, in the tenant's storage; a hook
#                 the app declines (restored) is done, not failed
#   recycling     pm.max_jobs replaces the job workers; nothing is lost
#   suspended     a suspended tenant's jobs wait (not counted as attempts) until it resumes
#   fairness      one tenant's 2,000 queued jobs do not hold back 20 tenants' single jobs
. "$(dirname "$0")/lib.sh"
need curl nginx sqlite3 python3 "$TENANCY_CLI"
# The host's job workers write the registry every few hundred milliseconds: the test's own
JOBAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/jobapp.so
FIX=$top_srcdir/tests/fixtures/jobapp
[ -f "$JOBAPP" ] || fatal "no $JOBAPP (make check builds it)"

mkdir -p "$T/state" "$T/migrations"
cp "$FIX"/migrations/*.sql "$T/migrations/"   # a second one is added for the migrated hook
export JOBAPP_CENTRAL_FILE=$T/central.out
tn_conf "app = $JOBAPP" "pm.max_children = 2" "pm.jobs = 2" "pm.max_jobs = 20" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.central_domains = localhost" \
    "storage.migrations = $T/migrations" "storage.seed = $FIX/seed.sql" \
    "jobs.timeout = 20s" "jobs.per_tenant = 2" "jobs.poll = 200ms" "jobs.max_backoff = 1s"
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
for s in acme globex initech; do
    tn_cli tenant create "$s" > "$T/create.out" 2>&1 || fatal "creating $s: $(cat "$T/create.out")"
done
REG=$T/state/control.db
tn_start
nginx_start

# post PATH HOST -> body (status in last_status)
post() {
    local out
    out=$(curl -s -m 20 -X POST -H "Host: $2" -w '\n%{http_code}' "http://127.0.0.1:$NGINX_PORT$1")
    printf '%s' "${out##*$'\n'}" > "$T/.last_status"
    printf '%s' "${out%$'\n'*}"
}
joblog() { http /log "$1.localhost"; }
# rows NAME TENANT: job_log rows of jobs named NAME
rows() { joblog "$2" | awk -F'|' -v n="$1" '$2 == n'; }
count() { rows "$1" "$2" | grep -c . || true; }
job_state() { sqlite3 "$REG" "SELECT state || '|' || attempts FROM jobs WHERE id = $1"; }
job_error() { sqlite3 "$REG" "SELECT last_error FROM jobs WHERE id = $1"; }
status_json() { curl -s -m 5 -H "Host: localhost" "http://127.0.0.1:$NGINX_PORT/_tenancy/status"; }
job_pids() {
    status_json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(str(w["pid"]) for w in d["jobs"]["workers"] if w["state"] in ("idle","running")))'
}
running_pid() {   # running_pid JOB_ID: the job worker running it now
    status_json | python3 -c "import json,sys; d=json.load(sys.stdin); print(''.join(str(w['pid']) for w in d['jobs']['workers'] if w.get('job') == $1))"
}
id_of() { awk '{print $2}' <<< "$1"; }

# ---- hooks of the creates, and the job workers ------------------------------------------------
wait_until 10 bash -c "[ \"\$(curl -s -H 'Host: initech.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -c 'tenancy.created')\" = 1 ]" ||
    fail "the tenancy.created hook did not run for initech"
for s in acme globex initech; do
    assert_eq "$(rows tenancy.created "$s" | cut -d'|' -f3-5)" "|$s|1" \
        "$s: its created hook ran once, in its own storage"
done
assert_eq "$(job_pids | grep -c .)" 2 "pm.jobs = 2: two job workers ready"
first_pids=$(job_pids | sort | tr '\n' ' ')
http_workers=$(pgrep -P "$TN_PID" | grep -vxF -f <(job_pids) | grep -c .)
assert_eq "$http_workers" 2 "the two HTTP workers are others (jobs never take one)"

# ---- context: 20 jobs each for three tenants, interleaved ----------------------------------------
for i in $(seq 1 20); do
    for s in acme globex initech; do
        r=$(post "/enqueue?name=record&payload=$s-$i" "$s.localhost")
        case "$r" in ok\ *) ;; *) fail "enqueue for $s: '$r' ($(last_status))" ;; esac
    done
done
for s in acme globex initech; do
    wait_until 20 bash -c "[ \"\$(curl -s -H 'Host: $s.localhost' http://127.0.0.1:$NGINX_PORT/log | awk -F'|' '\$2 == \"record\"' | grep -c .)\" -ge 20 ]" ||
        fail "$s: its 20 jobs did not all run"
    got=$(rows record "$s" | cut -d'|' -f3,4 | sort -t- -k2 -n | tr '\n' ' ')
    want=$(for i in $(seq 1 20); do printf '%s-%d|%s ' "$s" "$i" "$s"; done)
    assert_eq "$got" "$want" "$s: its 20 jobs each ran once and read its own marker"
done

now_pids=$(job_pids | sort | tr '\n' ' ')
[ "$now_pids" != "$first_pids" ] && log "ok: pm.max_jobs = 20: the job workers were replaced ($first_pids-> $now_pids), no job lost" ||
    fail "after 63 jobs the job workers are the same ($now_pids): pm.max_jobs did not replace them"

# ---- retries, and a failed attempt's transaction ------------------------------------------------
r=$(post "/enqueue?name=flaky&payload=2&attempts=5" acme.localhost)
flaky=$(id_of "$r")
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $flaky\")\" = done ]" ||
    fail "the flaky job did not end done ($(job_state "$flaky"))"
assert_eq "$(job_state "$flaky")" "done|3" "flaky: done on attempt 3"
assert_eq "$(rows flaky acme | cut -d'|' -f4,5 | tr '\n' ' ')" "acme|1 acme|2 acme|3 " \
    "flaky: each attempt read the true marker (the failed attempts' writes were rolled back)"
post "/enqueue?name=record&payload=after-flaky" acme.localhost > /dev/null
wait_until 10 bash -c "curl -s -H 'Host: acme.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q after-flaky" ||
    fail "the job after the flaky one did not run"
assert_eq "$(rows record acme | grep after-flaky | cut -d'|' -f4)" acme \
    "the next job reads acme's marker, not the failed attempt's POISONED"

# ---- dead jobs ------------------------------------------------------------------------------------
r=$(post "/enqueue?name=flaky&payload=99&attempts=2" globex.localhost)
dead=$(id_of "$r")
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $dead\")\" = dead ]" ||
    fail "the always-failing job is not dead ($(job_state "$dead"))"
assert_eq "$(job_state "$dead")" "dead|2" "attempts used up: dead after 2"
assert_contains "$(job_error "$dead")" "flaky attempt 2" "a dead job keeps the app's message"

# ---- the cap on the backoff (jobs.max_backoff = 1s) ----------------------------------------------
# After its third failure a job waits 4 s uncapped, 1 s (plus up to 10 %) capped. Read while it
# waits: started_at is the third attempt's start (the attempt itself takes a few ms), run_at
# the fourth's time.
r=$(post "/enqueue?name=flaky&payload=99&attempts=4" globex.localhost)
capped=$(id_of "$r")
wait_until 20 bash -c "v=\$(sqlite3 '$REG' \"SELECT run_at - started_at FROM jobs WHERE id = $capped AND state = 'queued' AND attempts = 3\"); [ -n \"\$v\" ] && echo \"\$v\" > '$T/backoff'" ||
    fail "the job did not wait after its third attempt ($(job_state "$capped"))"
backoff=$(cat "$T/backoff" 2>/dev/null)
[ "${backoff:-0}" -ge 1000 ] && [ "${backoff:-0}" -lt 2000 ] &&
    log "ok: the third failure's backoff is capped by jobs.max_backoff ($backoff ms to the next attempt)" ||
    fail "the third failure's next attempt came ${backoff:-?} ms after its start, not 1 s (jobs.max_backoff)"
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $capped\")\" = dead ]" ||
    fail "the capped job did not end dead ($(job_state "$capped"))"

# ---- unique keys and delays -------------------------------------------------------------------------
r1=$(post "/enqueue?name=record&payload=unique&key=k1&delay=60000" acme.localhost)
r2=$(post "/enqueue?name=record&payload=unique2&key=k1" acme.localhost)
assert_eq "${r2%% *}" exists "a second job with a live unique key is refused"
assert_eq "$(id_of "$r2")" "$(id_of "$r1")" "... and names the first job's id"
r3=$(post "/enqueue?name=record&payload=unique-other&key=k1" globex.localhost)
assert_eq "${r3%% *}" ok "the same key in another tenant is another job"
post "/enqueue?name=record&payload=delayed&delay=2500" initech.localhost > /dev/null
sleep 1
assert_eq "$(rows record initech | grep -c delayed)" 0 "a job delayed 2.5 s has not run after 1 s"
wait_until 10 bash -c "curl -s -H 'Host: initech.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q delayed" ||
    fail "the delayed job never ran"

# ---- whose jobs: tenant, central ---------------------------------------------------------------------
r=$(post "/enqueue?name=record&payload=sneaky&tenant=globex" acme.localhost)
assert_eq "${r%% *}" denied "a tenant's request cannot queue a job for another tenant"
r=$(post "/enqueue?name=record&payload=from-central&tenant=globex" localhost)
assert_eq "${r%% *}" ok "a central request queues for a tenant it names"
r=$(post "/enqueue?name=central&payload=hello" localhost)
assert_eq "${r%% *}" ok "a central request queues a central job"
r=$(post "/enqueue?name=tenancy.created" acme.localhost)
assert_eq "${r%% *}" invalid "an app cannot queue the host's tenancy.* jobs"
wait_until 10 bash -c "curl -s -H 'Host: globex.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q from-central" ||
    fail "the central request's job for globex did not run"
assert_eq "$(rows record globex | grep from-central | cut -d'|' -f4)" globex \
    "the job a central request queued for globex ran in globex"
assert_eq "$(rows record acme | grep -c sneaky)$(rows record globex | grep -c sneaky)" 00 \
    "the refused job ran nowhere"
wait_until 10 test -s "$JOBAPP_CENTRAL_FILE" || fail "the central job did not run"
assert_eq "$(cat "$JOBAPP_CENTRAL_FILE")" "central none hello" "a central job runs with no tenant"

# ---- a job queues a job ----------------------------------------------------------------------------------
r=$(post "/enqueue?name=spawn&payload=parent" initech.localhost)
parent=$(id_of "$r")
wait_until 10 bash -c "curl -s -H 'Host: initech.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q child-of-$parent" ||
    fail "the job queued from a job did not run"
assert_eq "$(rows record initech | grep "child-of-$parent" | cut -d'|' -f4)" initech \
    "a job queued from a job runs for the same tenant"

# ---- timeout --------------------------------------------------------------------------------------------
r=$(post "/enqueue?name=sleep&payload=30000&timeout=1000&attempts=1" acme.localhost)
slow=$(id_of "$r")
wait_until 15 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $slow\")\" = dead ]" ||
    fail "the job over its timeout was not stopped ($(job_state "$slow"))"
assert_contains "$(job_error "$slow")" "timed out after 1000 ms" "a job over its timeout is stopped"
wait_until 10 bash -c "[ \"\$(curl -s -H 'Host: localhost' http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; print(sum(1 for w in json.load(sys.stdin)[\"jobs\"][\"workers\"] if w[\"state\"] in (\"idle\",\"running\")))')\" = 2 ]" ||
    fail "the job worker stopped at the timeout was not replaced"

# ---- a crashing job -------------------------------------------------------------------------------------
r=$(post "/enqueue?name=crash&payload=boom&attempts=2" globex.localhost)
crash=$(id_of "$r")
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $crash\")\" = dead ]" ||
    fail "the crashing job is not dead ($(job_state "$crash"))"
assert_eq "$(job_state "$crash")" "dead|2" "a job that aborts its worker runs again at once, then is dead"
assert_contains "$(job_error "$crash")" "signal 6" "its error says how the worker died"
assert_eq "$(rows crash globex | cut -d'|' -f4,5 | tr '\n' ' ')" "globex|1 globex|2 " \
    "both attempts ran in globex"

# ---- a job worker SIGKILLed mid-job ------------------------------------------------------------------------
# The first attempt sleeps 15 s (jobs.timeout is 20 s here), so the kill lands inside it
# however slow the machine (a 2 s sleep could end before a loaded machine's polling found
# it: "done|1"); the retry sleeps 0.2 s.
r=$(post "/enqueue?name=sleep&payload=15000/200" initech.localhost)
victim_job=$(id_of "$r")
wait_until 10 bash -c "[ -n \"\$(curl -s -H 'Host: localhost' http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c \"import json,sys; print(''.join(str(w['pid']) for w in json.load(sys.stdin)['jobs']['workers'] if w.get('job') == $victim_job))\")\" ]" ||
    fail "the sleeping job never showed as running"
vp=$(running_pid "$victim_job")
[ -n "$vp" ] || fail "the sleeping job's worker could not be found ($(job_state "$victim_job"))"
kill -KILL "$vp"
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $victim_job\")\" = done ]" ||
    fail "the killed worker's job did not run again ($(job_state "$victim_job"))"
assert_eq "$(job_state "$victim_job")" "done|2" "a SIGKILLed worker's job ran again (attempt 2) and is done"
assert_eq "$(rows sleep initech | grep -c '|15000/200|')" 2 "the killed job's duplicate is the one counted attempt"

# ---- reload while a job runs ---------------------------------------------------------------------------------
r=$(post "/enqueue?name=sleep&payload=6000" acme.localhost)
rl=$(id_of "$r")
wait_until 10 bash -c "[ -n \"\$(curl -s -H 'Host: localhost' http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c \"import json,sys; print(''.join(str(w['pid']) for w in json.load(sys.stdin)['jobs']['workers'] if w.get('job') == $rl))\")\" ]" ||
    fail "the job never showed as running before the reload"
kill -HUP "$TN_PID"
wait_until 20 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fatal "the reload did not finish"
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $rl\")\" = done ]" ||
    fail "the job running across the reload did not finish"
assert_eq "$(job_state "$rl")" "done|1" "a reload lets the running job finish, once"
gen=$(status_json | python3 -c 'import json,sys; print(sorted(set(w["generation"] for w in json.load(sys.stdin)["jobs"]["workers"] if w["state"] in ("idle","running"))))')
wait_until 10 bash -c "curl -s -H 'Host: localhost' http://127.0.0.1:$NGINX_PORT/_tenancy/status | python3 -c 'import json,sys; g=sorted(set(w[\"generation\"] for w in json.load(sys.stdin)[\"jobs\"][\"workers\"])); sys.exit(0 if g == [2] else 1)'" ||
    fail "after the reload the job workers are not all generation 2 ($gen)"
post "/enqueue?name=record&payload=after-reload" acme.localhost > /dev/null
wait_until 10 bash -c "curl -s -H 'Host: acme.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q after-reload" ||
    fail "the new generation's job workers run no job"

# ---- schedules ----------------------------------------------------------------------------------------------------
r=$(post "/schedule?name=record&cron=61%20*%20*%20*%20*" acme.localhost)
assert_contains "$r" "invalid" "a bad cron spec is refused"
assert_contains "$r" "minute" "... naming the field"
r=$(post "/schedule?name=record&cron=0%203%20*%20*%20*&payload=nightly" globex.localhost)
assert_eq "${r%% *}" ok "a schedule is set"
# The host was down for three days: the schedule is three runs behind.
sqlite3 "$REG" "UPDATE job_schedules SET next_run_at = (strftime('%s','now') - 3 * 86400) * 1000 WHERE name = 'record'"
wait_until 10 bash -c "curl -s -H 'Host: globex.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q nightly" ||
    fail "the schedule behind its time did not run"
sleep 2.5
assert_eq "$(rows record globex | grep -c nightly)" 1 "a schedule behind by three runs catches up once"
next=$(sqlite3 "$REG" "SELECT next_run_at > strftime('%s','now') * 1000 FROM job_schedules WHERE name = 'record'")
assert_eq "$next" 1 "its next time is in the future"
assert_eq "$(post "/unschedule?name=record" globex.localhost)" ok "a schedule is removed"
assert_eq "$(sqlite3 "$REG" "SELECT count(*) FROM job_schedules")" 0 "... and gone from the registry"

# ---- hooks of state changes --------------------------------------------------------------------------------------
tn_cli tenant suspend initech > /dev/null || fail "suspend failed"
tn_cli tenant resume initech > /dev/null || fail "resume failed"
wait_until 10 bash -c "curl -s -H 'Host: initech.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q tenancy.resumed" ||
    fail "the resumed hook did not run"
assert_eq "$(joblog initech | cut -d'|' -f2,4 | grep '^tenancy\.' | tr '\n' ' ')" \
    "tenancy.created|initech tenancy.suspended|initech tenancy.resumed|initech " \
    "initech's app was told: created, suspended, resumed, in that order, in its storage"
# (its suspended hook takes 0.5 s and the resume came at once: two job workers were free,
# so only the one-at-a-time rule keeps "resumed" after "suspended")
assert_eq "$(sqlite3 "$REG" "SELECT (SELECT started_at FROM jobs WHERE name = 'tenancy.resumed') >= (SELECT finished_at FROM jobs WHERE name = 'tenancy.suspended')")" 1 \
    "the resumed hook started only after the suspended one ended"

# ---- hooks of delete, restore and migrate ---------------------------------------------------------
tn_cli tenant delete acme > /dev/null || fail "delete acme failed"
wait_until 10 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE name = 'tenancy.deleted'\")\" = done ]" ||
    fail "the deleted hook did not run for a tenant being deleted"
tn_cli tenant restore acme > /dev/null || fail "restore acme failed"
printf 'ALTER TABLE marker ADD COLUMN note TEXT;\n' > "$T/migrations/0002_note.sql"
tn_cli migrate --all > "$T/migrate.out" 2>&1 || fail "migrate --all failed: $(cat "$T/migrate.out")"
wait_until 10 bash -c "curl -s -H 'Host: acme.localhost' http://127.0.0.1:$NGINX_PORT/log | grep -q tenancy.migrated" ||
    fail "the migrated hook did not run"
assert_eq "$(joblog acme | cut -d'|' -f2,4 | grep -E '^tenancy\.(deleted|restored|migrated)' | tr '\n' ' ')" \
    "tenancy.deleted|acme tenancy.restored|acme tenancy.migrated|acme " \
    "acme's app was told: deleted (while deleted, in its kept storage), restored, migrated"
# jobapp declines tenancy.restored: for a hook that is done, as TN_OK is (include/tenancy.h).
# The migrated hook ran, so the restored one had ended before it (one at a time).
assert_eq "$(sqlite3 "$REG" "SELECT state || '|' || attempts || '|' || COALESCE(last_error, '') FROM jobs WHERE name = 'tenancy.restored'")" "done|1|" \
    "the restored hook the app declined is done on its first attempt, not failed"
assert_eq "$(rows tenancy.migrated globex | cut -d'|' -f3)" '{"from":"0001","to":"0002"}' \
    "the migrated hook's payload names the version"

# ---- a suspended tenant's jobs wait; its hooks do not -------------------------------------------
tn_cli tenant suspend globex > /dev/null || fail "suspend globex failed"
r=$(post "/enqueue?name=record&payload=while-suspended&tenant=globex" localhost)
waiting=$(id_of "$r")
wait_until 10 bash -c "sqlite3 '$REG' \"SELECT last_error FROM jobs WHERE id = $waiting\" | grep -q 'not active'" ||
    fail "the suspended tenant's job was not held back ($(job_state "$waiting"))"
assert_eq "$(job_state "$waiting")" "queued|0" "a suspended tenant's job waits, its attempts not counted"
tn_cli tenant resume globex > /dev/null || fail "resume globex failed"
wait_until 20 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT state FROM jobs WHERE id = $waiting\")\" = done ]" ||
    fail "the held-back job did not run after the resume ($(job_state "$waiting"))"
assert_eq "$(job_state "$waiting")" "done|1" "... and runs once the tenant is active again"

# ---- fairness -------------------------------------------------------------------------------------------------------
tn_cli tenant create hog > /dev/null || fatal "creating hog"
for i in $(seq 1 20); do tn_cli tenant create "small$i" > /dev/null || fatal "creating small$i"; done
r=$(post "/enqueue_many?n=2000&name=record" hog.localhost)
assert_eq "$r" "ok 2000" "hog queued 2,000 jobs"
for i in $(seq 1 20); do post "/enqueue?name=record&payload=small" "small$i.localhost" > /dev/null; done
wait_until 30 bash -c "[ \"\$(sqlite3 '$REG' \"SELECT count(*) FROM jobs j JOIN tenants t ON t.id = j.tenant_id WHERE t.slug LIKE 'small%' AND j.name = 'record' AND j.state = 'done'\")\" = 20 ]" ||
    fail "the 20 small tenants' jobs did not all run"
left=$(sqlite3 "$REG" "SELECT count(*) FROM jobs j JOIN tenants t ON t.id = j.tenant_id WHERE t.slug = 'hog' AND j.state = 'queued'")
log "hog still has $left jobs queued when the 20 small tenants' jobs are done"
[ "$left" -ge 1 ] && log "ok: the small tenants' jobs ran while hog's backlog waited" ||
    fail "hog's backlog was drained before the small tenants' jobs were done"
maxwait=$(sqlite3 "$REG" "SELECT max(j.started_at - j.created_at) FROM jobs j JOIN tenants t ON t.id = j.tenant_id WHERE t.slug LIKE 'small%' AND j.name = 'record'")
log "the longest wait of a small tenant's job behind hog's backlog: $maxwait ms"
[ "$maxwait" -lt 1000 ] && log "ok: every small tenant's job started within 1 s of its enqueue" ||
    fail "a small tenant's job waited $maxwait ms behind hog's backlog"
for i in 1 7 20; do
    assert_eq "$(rows record "small$i" | cut -d'|' -f3,4)" "small|small$i" "small$i's job read its own marker"
done

# ---- the counters ---------------------------------------------------------------------------------------------------
m=$(http /_tenancy/metrics localhost)
assert_contains "$m" "tenancy_jobs_done_total" "metrics count jobs"
