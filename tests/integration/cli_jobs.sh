#!/bin/bash
# cli_jobs.sh — `tenancy job ...` against real jobs: queued with `tenancy job enqueue`, run by
# the job workers of a real tenancyd (pm.jobs = 1) with tests/helpers/jobapp.c, whose jobs
# write what they saw into their tenant's own storage (job_log), so "it ran" is read from
# the tenant's file, not from the queue alone.
#
#   enqueue     refused: a 'tenancy.' hook name, a host module's app ('host.*'), no tenant, an
#               unknown tenant, a bad name; a unique key held by a queued job (exists + its id)
#   list/show   pages by id (--limit, --before: no job twice), filters (tenant, state),
#               every field of a job (times, attempts, last error, lease while running)
#   retry       a dead job (its app's table was missing) runs again once fixed and ends done;
#               a cancelled job runs when retried
#   cancel      a queued job; a running one is refused (busy), a finished one too (invalid)
#   counts      per state, per tenant
#   schedules   one an app made is listed, runs once behind its time (the one job worker,
#               number 0, runs the chores), then is removed with unschedule
#   --json      one JSON document on stdout, errors included (tests/helpers/json_check)
. "$(dirname "$0")/lib.sh"
JSON_CHECK=${JSON_CHECK:-$HELPERS/json_check}
JOBAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/jobapp.so
FIX=$top_srcdir/tests/fixtures/jobapp
need curl nginx sqlite3 "$TENANCY_CLI" "$JSON_CHECK"
[ -f "$JOBAPP" ] || fatal "no $JOBAPP (make check builds it)"

mkdir -p "$T/state"
tn_conf "app = $JOBAPP" "pm.max_children = 1" "pm.jobs = 1" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "storage.migrations = $FIX/migrations" "storage.seed = $FIX/seed.sql" \
    "jobs.hooks = off" "jobs.poll = 200ms" "jobs.timeout = 20s" "jobs.per_tenant = 2"
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
for s in acme globex; do
    tn_cli tenant create "$s" > "$T/create.out" 2>&1 || fatal "creating $s: $(cat "$T/create.out")"
done

RC=0 OUT= ERR=
run() { tn_cli "$@" > "$T/out" 2> "$T/err"; RC=$?; OUT=$(cat "$T/out"); ERR=$(cat "$T/err"); }
jrun() {
    run --json "$@"
    "$JSON_CHECK" < "$T/out" 2> "$T/jerr" ||
        fail "--json $*: stdout is not one JSON document ($(cat "$T/jerr")): $(head -c 300 "$T/out")"
}
jget() { "$JSON_CHECK" "$1" < "$T/out"; }
# refused CODE WHAT ARGS...: exits CODE (1 failed, 2 usage), prints nothing on stdout
refused() {
    local code=$1 what=$2
    shift 2
    run "$@"
    assert_eq "$RC" "$code" "$what: exit $code"
    assert_eq "$OUT" "" "$what: nothing on stdout"
}
state_of() { tn_cli --json job show "$1" | "$JSON_CHECK" .state; }
wait_state() {   # wait_state ID STATE SECONDS
    wait_until "$3" bash -c "[ \"\$('$TENANCY_CLI' -c '$T/tenancyd.conf' --json job show $1 | '$JSON_CHECK' .state)\" = $2 ]"
}
joblog() { sqlite3 "$T/state/tenants/$1.db" "SELECT payload || '|' || marker || '|' || attempt FROM job_log WHERE name = '$2' ORDER BY job_id, attempt"; }

# ---- enqueue, before any job worker runs --------------------------------------------------------
refused 2 "a hook's name" job enqueue --tenant acme tenancy.created
assert_contains "$ERR" "lifecycle hooks" "a hook's name: says why"
refused 2 "a host module's app" job enqueue --tenant acme --app host.admin admin.migrate
refused 2 "the hooks' app" job enqueue --tenant acme --app '*' record
refused 2 "no tenant" job enqueue record
refused 2 "--tenant and --central" job enqueue --tenant acme --central record
refused 1 "an unknown tenant" job enqueue --tenant nosuch record
assert_contains "$ERR" "no tenant 'nosuch'" "an unknown tenant: named"
refused 1 "a bad job name" job enqueue --tenant acme 'Bad Name'
jrun job enqueue --tenant nosuch record
assert_eq "$RC" 1 "--json: an unknown tenant fails"
assert_eq "$(jget .code)" notfound "--json: code notfound"
assert_eq "$(tn_cli --json job counts | "$JSON_CHECK" .total)" 0 "nothing refused was queued"

run job enqueue --tenant acme record --payload first
assert_eq "$RC" 0 "enqueue a job for acme"
FIRST=$(sed -n 's/^queued job \([0-9]*\)$/\1/p' <<< "$OUT")
[ -n "$FIRST" ] || fatal "enqueue printed no id: $OUT"
jrun job enqueue --tenant globex record --payload 'glob<b>ex'
assert_eq "$(jget .ok)" true "--json enqueue"
GLOBEX=$(jget .id)
jrun job enqueue --tenant acme record --payload later --delay 3600 --unique nightly --priority 5
LATER=$(jget .id)
jrun job enqueue --tenant acme record --payload again --unique nightly
assert_eq "$RC" 1 "a second job with a held unique key is refused"
assert_eq "$(jget .code)" exists "... code exists"
assert_eq "$(jget .id)" "$LATER" "... naming the job that holds the key"
assert_contains "$(jget .error)" "job $LATER holds the unique key 'nightly'" "... and saying so"

jrun job list
assert_eq "$(jget .count)" 3 "three jobs queued"
assert_eq "$(jget '.jobs[0].id')" "$LATER" "newest first"
assert_eq "$(jget '.jobs[0].state')" queued "queued"
assert_eq "$(jget '.jobs[0].priority')" 5 "its priority"
assert_eq "$(jget '.jobs[0].unique_key')" nightly "its unique key"
assert_eq "$(jget '.jobs[0].started_at')" null "never started"
assert_eq "$(jget '.next_before')" null "one page"
jrun job list --limit 2
assert_eq "$(jget .count)" 2 "--limit 2"
next=$(jget .next_before)
assert_eq "$next" "$GLOBEX" "a full page names where the next starts"
jrun job list --limit 2 --before "$next"
assert_eq "$(jget '.jobs[0].id') $(jget .count)" "$FIRST 1" "--before: the older page, no job twice"
jrun job list --tenant globex
assert_eq "$(jget .count) $(jget '.jobs[0].tenant') $(jget '.jobs[0].payload')" "1 globex glob<b>ex" "--tenant"
run job list --tenant acme
assert_contains "$OUT" "ID" "the text list has a header"
assert_contains "$OUT" "queued" "and the jobs' states"
run job list --limit 1
assert_contains "$OUT" "(more: --before $LATER)" "a full text page says how to go on"
refused 2 "a bad state" job list --state sleeping
refused 2 "a bad --before" job list --before x1
refused 2 "a bad --limit" job list --limit 0
refused 1 "an unknown tenant's list" job list --tenant nosuch
jrun job counts --tenant acme
assert_eq "$(jget .queued) $(jget .total)" "2 2" "counts per tenant"

# ---- the job workers run them --------------------------------------------------------------------
tn_start
nginx_start
wait_state "$FIRST" done 20 || fail "acme's job did not run ($(state_of "$FIRST"))"
wait_state "$GLOBEX" done 20 || fail "globex's job did not run ($(state_of "$GLOBEX"))"
assert_eq "$(joblog acme record)" "first|acme|1" "acme's job ran once, in acme's storage"
assert_eq "$(joblog globex record)" "glob<b>ex|globex|1" "globex's job ran once, in globex's storage"
jrun job show "$FIRST"
assert_eq "$(jget .state) $(jget .attempts) $(jget .max_attempts)" "done 1 5" "show: done on attempt 1 of jobs.max_attempts"
assert_eq "$(jget .tenant) $(jget .app) $(jget .name)" "acme  record" "show: tenant, app (root), name"
for f in created_at run_at started_at finished_at; do
    assert_contains "$(jget .$f)" "T" "show: $f is a time"
done
assert_eq "$(jget .lease_until)" null "show: no lease once done"
run job show "$FIRST"
assert_contains "$OUT" "state:        done" "text show: the state"
assert_contains "$OUT" "payload:      first" "text show: the payload"
refused 1 "show an unknown job" job show 999999
refused 2 "show a bad id" job show 12x

# ---- a dead job, fixed, retried ----------------------------------------------------------------------
sqlite3 "$T/state/tenants/acme.db" "ALTER TABLE job_log RENAME TO job_log_off" || fatal "rename"
jrun job enqueue --tenant acme record --payload broken --max-attempts 1
BROKEN=$(jget .id)
wait_state "$BROKEN" dead 20 || fail "the job without its table did not die ($(state_of "$BROKEN"))"
jrun job show "$BROKEN"
assert_contains "$(jget .last_error)" "job_log" "a dead job keeps its last error"
assert_eq "$(jget .attempts)" 1 "dead after its one attempt"
jrun job list --state dead
assert_eq "$(jget .count) $(jget '.jobs[0].id')" "1 $BROKEN" "--state dead lists it"
refused 1 "cancel a dead job" job cancel "$BROKEN"
sqlite3 "$T/state/tenants/acme.db" "ALTER TABLE job_log_off RENAME TO job_log" || fatal "rename back"
jrun job retry "$BROKEN"
assert_eq "$(jget .ok)" true "retry a dead job"
assert_contains "$(jget .job.state)" "queued" "... it is queued again (or already running)"
wait_state "$BROKEN" done 20 || fail "the retried job did not run ($(state_of "$BROKEN"))"
assert_eq "$(joblog acme record | grep broken)" "broken|acme|1" "the retried job ran again, attempt 1, in acme"
refused 1 "retry a done job" job retry "$BROKEN"
refused 1 "retry an unknown job" job retry 999999

# ---- cancel -----------------------------------------------------------------------------------------
run job cancel "$LATER"
assert_eq "$RC $OUT" "0 job $LATER cancelled" "cancel a queued job"
assert_eq "$(state_of "$LATER")" cancelled "it is cancelled"
refused 1 "cancel it again" job cancel "$LATER"
jrun job enqueue --tenant acme record --payload again --unique nightly
assert_eq "$(jget .ok)" true "a cancelled job holds its unique key no more"
AGAIN=$(jget .id)
wait_state "$AGAIN" done 20 || fail "the job after the cancel did not run"
run job retry "$LATER"
assert_eq "$RC" 0 "retry a cancelled job"
wait_state "$LATER" done 20 || fail "the retried cancelled job did not run ($(state_of "$LATER"))"
assert_eq "$(joblog acme record | grep -c later)" 1 "a cancelled job ran only once retried"
jrun job enqueue --tenant globex sleep --payload 3000
SLEEP=$(jget .id)
wait_state "$SLEEP" running 10 || fail "the sleep job did not start"
jrun job show "$SLEEP"
[ -n "$(jget .lease)" ] && log "ok: a running job shows its lease" || fail "a running job shows no lease"
assert_contains "$(jget .lease_until)" "T" "and until when it holds"
jrun job cancel "$SLEEP"
assert_eq "$RC $(jget .code)" "1 busy" "a running job cannot be cancelled (busy)"
wait_state "$SLEEP" done 10 || fail "the sleep job did not end"

# ---- counts ------------------------------------------------------------------------------------------
jrun job counts
assert_eq "$(jget .done) $(jget .queued) $(jget .dead) $(jget .cancelled) $(jget .total)" "6 0 0 0 6" "counts of all jobs"
jrun job counts --tenant globex
assert_eq "$(jget .done) $(jget .total)" "2 2" "counts of one tenant"
run job counts
assert_contains "$OUT" "done       6" "text counts"

# ---- schedules ----------------------------------------------------------------------------------------
r=$(curl -s -m 10 -X POST -H 'Host: acme.localhost' "http://127.0.0.1:$NGINX_PORT/schedule?name=nightly&cron=@daily&payload=n1")
assert_eq "$r" "ok " "the app schedules a job"
jrun job schedules
assert_eq "$(jget .count) $(jget '.schedules[0].tenant') $(jget '.schedules[0].name') $(jget '.schedules[0].cron')" \
    "1 acme nightly @daily" "schedules lists it"
assert_contains "$(jget '.schedules[0].next_run_at')" "T" "with its next run"
# Put behind its time, as after downtime: the one job worker (pm.jobs = 1, so number 0, which
# runs the chores) queues its job and runs it, in acme's storage with the schedule's payload.
sqlite3 "$T/state/control.db" "UPDATE job_schedules SET next_run_at = (strftime('%s','now') - 60) * 1000 WHERE name = 'nightly'"
wait_until 10 bash -c "[ \"\$(sqlite3 '$T/state/control.db' \"SELECT state FROM jobs WHERE name = 'nightly'\")\" = done ]" ||
    fail "the schedule behind its time did not run with one job worker"
assert_eq "$(joblog acme nightly)" "n1|acme|1" "the schedule's job ran once, in acme's storage, with its payload"
jrun job schedules --tenant globex
assert_eq "$(jget .count)" 0 "globex has none"
refused 1 "unschedule another tenant's" job unschedule --tenant globex nightly
refused 1 "unschedule another app's" job unschedule --tenant acme --app other nightly
refused 2 "unschedule without a tenant" job unschedule nightly
run job unschedule --tenant acme nightly
assert_eq "$RC" 0 "unschedule"
assert_eq "$(tn_cli --json job schedules | "$JSON_CHECK" .count)" 0 "the schedule is gone"
refused 1 "unschedule it again" job unschedule --tenant acme nightly
refused 1 "a bad cron spec" job schedule --tenant acme weekly '0 25 * * *'
assert_contains "$ERR" "hour" "... its error names the field"
refused 1 "a hook's name" job schedule --tenant acme tenancy.created @daily
jrun job schedule --tenant globex --payload w1 weekly '30 6 * * mon'
assert_eq "$RC" 0 "an operator sets a schedule"
jrun job schedules --tenant globex
assert_eq "$(jget '.schedules[0].name') $(jget '.schedules[0].cron') $(jget '.schedules[0].payload')" \
    "weekly 30 6 * * mon w1" "it is listed with its spec and payload"
run job unschedule --tenant globex weekly
assert_eq "$RC" 0 "and removed"
