#!/bin/bash
# admin_jobs.sh — the panel's jobs through a real nginx with a real login, on jobs queued with
# `tenancy job enqueue` and run by tenancyd's job workers (pm.jobs = 2) with
# tests/helpers/jobapp.c (its jobs write what they saw into their tenant's own storage):
#   - /jobs and /t/SLUG/jobs list real jobs, filtered by tenant and state, with counts per
#     state; a job's page shows its state, attempts, last error and payload (escaped);
#   - retry and cancel are POSTs with the session's CSRF token (without it, or with a wrong
#     one: 403, nothing changes), audited; a retried dead job runs again and ends done;
#   - under /t/SLUG/ another tenant's job id is no job: 404 for its page, its retry and its
#     cancel (audited as refused), and the job is left as it was;
#   - the tenant's overview shows its job counts and links to its jobs;
#   - migrate and move from the panel are jobs (app host.admin) a job worker runs: queued while
#     the tenant's job slot is taken (jobs.per_tenant = 1; the other job worker is free and
#     runs other tenants' jobs meanwhile), one at a time per tenant (a second
#     is refused), their page refreshing until they end and showing the progress, outcome and
#     output from the job; the outcome audited by the job worker; a failed move is dead with
#     the command's error, and a retry from the panel runs it again.
. "$(dirname "$0")/lib.sh"
JSON_CHECK=${JSON_CHECK:-$HELPERS/json_check}
JOBAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/jobapp.so
FIX=$top_srcdir/tests/fixtures/jobapp
need curl nginx sqlite3 "$TENANCY_CLI" "$JSON_CHECK"
[ -f "$JOBAPP" ] || fatal "no $JOBAPP (make check builds it)"

PASSWORD='jobs panel password'
DEAD_PORT=$(free_port)   # nobody listens there: a move to it fails at its first connection
mkdir -p "$T/state"
tn_conf "app = $JOBAPP" "pm.max_children = 2" "pm.jobs = 2" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "storage.migrations = $FIX/migrations" "storage.seed = $FIX/seed.sql" \
    "jobs.hooks = off" "jobs.poll = 200ms" "jobs.timeout = 20s" "jobs.per_tenant = 1" \
    "placement.nowhere.dsn = postgresql://none@127.0.0.1:$DEAD_PORT/none?connect_timeout=3" \
    "placement.nowhere.mode = schema" \
    "admin.host = admin.localhost" "admin.cli = $(cd "$top_builddir" && pwd)/tenancy/tenancy"
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
printf '%s\n' "$PASSWORD" | tn_cli admin passwd --stdin > /dev/null || fatal "admin passwd failed"
for s in acme globex; do
    tn_cli tenant create "$s" > "$T/create.out" 2>&1 || fatal "creating $s: $(cat "$T/create.out")"
done
AUDIT=$T/state/admin-audit.log

jid() { tn_cli --json job enqueue "$@" | "$JSON_CHECK" .id; }
state_of() { tn_cli --json job show "$1" | "$JSON_CHECK" .state; }
wait_state() {   # wait_state ID STATE SECONDS
    wait_until "$3" bash -c "[ \"\$('$TENANCY_CLI' -c '$T/tenancyd.conf' --json job show $1 | '$JSON_CHECK' .state)\" = $2 ]"
}
joblog() { sqlite3 "$T/state/tenants/$1.db" "SELECT payload FROM job_log ORDER BY job_id, attempt" | tr '\n' ' '; }

A=$(jid --tenant acme record --payload '<script>alert(1)</script>')
G=$(jid --tenant globex record --payload secret-of-globex-g1)
GL=$(jid --tenant globex record --payload later --delay 3600)
[ -n "$A" ] && [ -n "$G" ] && [ -n "$GL" ] || fatal "tenancy job enqueue gave no ids"
tn_start
nginx_start
wait_state "$A" done 20 || fail "acme's job did not run ($(state_of "$A"))"
wait_state "$G" done 20 || fail "globex's job did not run ($(state_of "$G"))"
sqlite3 "$T/state/tenants/acme.db" "ALTER TABLE job_log RENAME TO job_log_off" || fatal "rename"
B=$(jid --tenant acme record --payload broken --max-attempts 1)
wait_state "$B" dead 20 || fail "the job without its table is not dead ($(state_of "$B"))"
sqlite3 "$T/state/tenants/acme.db" "ALTER TABLE job_log_off RENAME TO job_log" || fatal "rename back"

U=http://127.0.0.1:$NGINX_PORT
JAR=$T/jar
req() {   # req METHOD PATH [curl args...]: status; body in $T/body, headers in $T/head
    local m=$1 p=$2
    shift 2
    curl -s -m 20 -X "$m" -H 'Host: admin.localhost' -b "$JAR" -c "$JAR" -D "$T/head" \
        -o "$T/body" -w '%{http_code}' "$@" "$U$p"
}
body() { cat "$T/body"; }
header() { tr -d '\r' < "$T/head" | awk -v h="$(echo "$1" | tr 'A-Z' 'a-z')" -F': ' 'tolower($1)==h {print $2}'; }
has_row() { grep -q "id=\"job-$1\"" "$T/body"; }
count_of() { grep -o "id=\"count-$1\"[^>]*>.*" "$T/body" | head -1 | sed 's/<\/a>.*//' | grep -o '<b>[0-9]*</b>' | tr -dc 0-9; }

# ---- no session, no jobs ------------------------------------------------------------------------
for p in /jobs "/job?id=$A" /t/acme/jobs "/t/acme/job?id=$A"; do
    assert_eq "$(req GET "$p")" 303 "GET $p without a session: to the login"
done
assert_eq "$(req POST /t/acme/job --data "id=$B&op=retry")" 303 "a retry without a session: to the login"
panel_login "$PASSWORD"
TOKEN=$PANEL_TOKEN

# ---- the lists ------------------------------------------------------------------------------------
assert_eq "$(req GET /jobs)" 200 "the jobs page"
for j in "$A" "$G" "$GL" "$B"; do has_row "$j" && log "ok: /jobs lists job $j" || fail "/jobs misses job $j"; done
assert_eq "$(count_of dead) $(count_of done) $(count_of queued)" "1 2 1" "/jobs counts per state"
assert_contains "$(body)" 'href="/jobs"' "the navigation links the jobs page"
req GET '/jobs?state=dead' > /dev/null
has_row "$B" && ! has_row "$A" && ! has_row "$G" && log "ok: ?state=dead lists the dead job only" ||
    fail "?state=dead: $(grep -o 'id="job-[0-9]*"' "$T/body" | tr '\n' ' ')"
req GET '/jobs?tenant=globex' > /dev/null
has_row "$G" && has_row "$GL" && ! has_row "$A" && log "ok: ?tenant=globex lists globex's jobs only" ||
    fail "?tenant=globex: $(grep -o 'id="job-[0-9]*"' "$T/body" | tr '\n' ' ')"
assert_eq "$(req GET '/jobs?state=sleeping')" 400 "an unknown state: 400"
assert_eq "$(req GET '/jobs?tenant=nosuch')" 404 "an unknown tenant: 404"
assert_eq "$(req GET /t/acme/jobs)" 200 "a tenant's jobs page"
has_row "$A" && has_row "$B" && ! has_row "$G" && ! has_row "$GL" && log "ok: /t/acme/jobs lists acme's only" ||
    fail "/t/acme/jobs: $(grep -o 'id="job-[0-9]*"' "$T/body" | tr '\n' ' ')"
assert_contains "$(body)" "/t/acme/job?id=$B" "its rows link to the job under the tenant"
assert_eq "$(req GET /t/nosuch/jobs)" 404 "jobs of an unknown tenant: 404"

# ---- a job's page ----------------------------------------------------------------------------------
assert_eq "$(req GET "/t/acme/job?id=$B")" 200 "a dead job's page"
assert_contains "$(body)" 'id="job-state" class="error">dead' "it says dead"
assert_contains "$(grep -o 'id="job-error"[^<]*' "$T/body")" "job_log" "it shows the last error"
assert_contains "$(body)" "1 of 1" "its attempts"
assert_contains "$(body)" 'id="job-retry"' "a retry button"
[ -z "$(header Refresh)" ] && log "ok: a finished job's page does not refresh" || fail "a dead job's page refreshes"
req GET "/t/acme/job?id=$A" > /dev/null
assert_contains "$(body)" '&lt;script&gt;alert(1)&lt;/script&gt;' "a payload is shown escaped"
case "$(body)" in *'<script>alert(1)'*) fail "a payload reached the page unescaped" ;; *) log "ok: no raw payload" ;; esac
req GET "/t/globex/job?id=$GL" > /dev/null
assert_contains "$(body)" 'id="job-cancel"' "a queued job has a cancel button"
assert_eq "$(header Refresh)" 2 "a queued job's page refreshes itself"
assert_eq "$(req GET "/t/acme/job?id=$G")" 404 "another tenant's job under acme's URL: 404"
case "$(body)" in *secret-of-globex*) fail "the 404 shows the other tenant's job" ;; *) log "ok: nothing of it shown" ;; esac
assert_eq "$(req GET "/job?id=$G")" 200 "the same job on the panel-wide page"
assert_contains "$(body)" secret-of-globex "where it may be shown, its payload is (what the 404 is searched for)"
assert_eq "$(req GET '/job?id=999999')" 404 "an unknown job: 404"
assert_eq "$(req GET '/job?id=1x')" 404 "a bad id: 404"
assert_eq "$(req GET "/t/acme/job?id=$B&op=retry")" 200 "a GET with op=retry only shows the page"
assert_eq "$(state_of "$B")" dead "... and retries nothing"

# ---- CSRF, and another tenant's job ----------------------------------------------------------------
assert_eq "$(req POST /t/acme/job --data "id=$B&op=retry")" 403 "a retry without the CSRF token: 403"
assert_eq "$(req POST /t/acme/job --data "id=$B&op=retry&csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")" 403 \
    "a retry with a wrong CSRF token: 403"
assert_eq "$(req POST /t/acme/job -H 'Origin: http://evil.example' --data "id=$B&op=retry&csrf=$TOKEN")" 403 \
    "a retry from another origin: 403"
assert_eq "$(state_of "$B")" dead "nothing was retried"
assert_eq "$(req POST /t/acme/job --data "id=$GL&op=cancel&csrf=$TOKEN")" 404 \
    "cancelling globex's job under acme's URL: 404"
assert_eq "$(req POST /t/acme/job --data "id=$G&op=retry&csrf=$TOKEN")" 404 \
    "retrying globex's job under acme's URL: 404"
assert_eq "$(state_of "$GL")" queued "globex's job is still queued"
assert_contains "$(grep '"action":"job-cancel"' "$AUDIT" | tail -1)" '"result":"refused"' \
    "the refused cancel is audited"
assert_eq "$(req POST /t/acme/job --data "id=$B&op=explode&csrf=$TOKEN")" 400 "an unknown operation: 400"

# ---- retry and cancel -----------------------------------------------------------------------------------
assert_eq "$(req POST /t/acme/job --data "id=$B&op=retry&csrf=$TOKEN")" 303 "retry the dead job"
assert_eq "$(header Location)" "/t/acme/job?id=$B" "back to its page"
wait_state "$B" done 20 || fail "the retried job did not run ($(state_of "$B"))"
assert_contains "$(joblog acme)" "broken" "the retried job ran again, in acme's storage"
line=$(grep '"action":"job-retry"' "$AUDIT" | grep '"result":"ok"' | tail -1)
assert_contains "$line" "\"detail\":\"job $B record\"" "the retry audited with the job"
assert_contains "$line" '"user":"admin"' "... and who"
assert_contains "$line" '"tenant":"acme"' "... and the tenant"
assert_eq "$(req POST /job --data "id=$GL&op=cancel&csrf=$TOKEN")" 303 "cancel globex's queued job from the panel-wide page"
assert_eq "$(header Location)" "/job?id=$GL" "back to its page"
assert_eq "$(state_of "$GL")" cancelled "it is cancelled"
assert_contains "$(grep '"action":"job-cancel"' "$AUDIT" | grep '"result":"ok"' | tail -1)" '"tenant":"globex"' \
    "the cancel audited with the job's tenant"
assert_eq "$(req POST /t/acme/job --data "id=$A&op=cancel&csrf=$TOKEN")" 409 "a done job cannot be cancelled"
assert_eq "$(req POST /t/acme/job --data "id=$A&op=retry&csrf=$TOKEN")" 409 "nor retried"

# ---- the tenant's overview ------------------------------------------------------------------------------
assert_eq "$(req GET /t/acme)" 200 "the tenant's page"
assert_contains "$(body)" 'id="tenant-jobs" href="/t/acme/jobs"' "it links to its jobs"
assert_eq "$(count_of done)" 2 "it shows its job counts (2 done)"
assert_contains "$(body)" 'href="/t/acme/jobs?state=dead"' "each count links to its jobs in that state"

# ---- migrate as a job -------------------------------------------------------------------------------------
# acme's one job slot (jobs.per_tenant = 1) is taken by a sleeping job: the migrate waits queued,
# though the other job worker is free.
S=$(jid --tenant acme sleep --payload 6000)
wait_state "$S" running 10 || fail "the sleeping job did not start"
code=$(req POST /t/acme/action --data "action=migrate&confirm=yes&csrf=$TOKEN")
assert_eq "$code" 303 "migrate from the panel: queued at once"
loc=$(header Location)
M=${loc##*job=}
assert_eq "$loc" "/t/acme/confirm?job=$M" "sent to the job's page"
# The free job worker runs two jobs of globex queued after the migrate. Tenants take turns, so
# once the second is done it has claimed past acme's turn: the migrate is still queued only
# because acme is at jobs.per_tenant.
Y1=$(jid --tenant globex record --payload y1)
Y2=$(jid --tenant globex record --payload y2)
wait_state "$Y2" done 20 || fail "globex's jobs did not run beside acme's ($(state_of "$Y1") $(state_of "$Y2"))"
assert_eq "$(state_of "$Y1") $(state_of "$M") $(state_of "$S")" "done queued running" \
    "globex's jobs ran on the free job worker; acme's migrate waits for its one slot"
jrun_m=$(tn_cli --json job show "$M")
assert_eq "$("$JSON_CHECK" .app <<< "$jrun_m") $("$JSON_CHECK" .name <<< "$jrun_m") $("$JSON_CHECK" .tenant <<< "$jrun_m")" \
    "host.admin admin.migrate acme" "a job of the panel's own for acme"
assert_eq "$("$JSON_CHECK" .max_attempts <<< "$jrun_m")" 1 "tried once"
assert_contains "$("$JSON_CHECK" .payload <<< "$jrun_m")" "user=admin" "it names who asked"
assert_eq "$(req GET "$loc")" 200 "the job's page"
assert_contains "$(body)" 'id="job-state" class="muted">queued' "queued behind the tenant's running job"
assert_contains "$(body)" 'id="job-waiting"' "and says what it waits for"
assert_eq "$(header Refresh)" 2 "it refreshes itself"
assert_eq "$(req POST /t/acme/action --data "action=migrate&confirm=yes&csrf=$TOKEN")" 409 \
    "a second long action of the tenant is refused while one is queued"
assert_contains "$(body)" "job $M" "naming the job in the way"
assert_contains "$(grep '"action":"migrate"' "$AUDIT" | tail -1)" '"result":"refused"' "the refusal audited"
for i in $(seq 1 150); do
    req GET "$loc" > /dev/null
    st=$(grep -o 'id="job-state" class="[a-z]*">[a-z]*' "$T/body" | sed 's/.*>//')
    case $st in queued | running) sleep 0.2 ;; *) break ;; esac
done
assert_eq "$st" done "the migrate ran and ended (page: $(tr '\n' ' ' < "$T/body" | grep -o '<section.*</section>' | head -c 600))"
assert_contains "$(body)" '1 of 1 tenant done, 0 failed' "its page shows the progress from the job"
assert_contains "$(body)" 'last: acme current' "and the tenant's outcome"
assert_contains "$(body)" 'id="job-output"' "and the command's output"
[ -z "$(header Refresh)" ] && log "ok: the page stops refreshing" || fail "a done job's page still refreshes"
assert_contains "$(tn_cli --json job show "$M" | "$JSON_CHECK" .progress)" "1 of 1 tenant done" \
    "the job's row holds the progress (tenancy job show)"
assert_eq "$(state_of "$S")" done "the sleeping job was not disturbed"
assert_contains "$(grep '"action":"migrate"' "$AUDIT" | grep '"result":"started"' | tail -1)" "\"detail\":\"job $M\"" \
    "the migrate's start audited with its job"
line=$(grep '"action":"migrate"' "$AUDIT" | grep '"result":"ok"' | tail -1)
assert_contains "$line" '"by":"job worker"' "its outcome audited by the job worker"
assert_contains "$line" '"user":"admin"' "... as the user who asked"
assert_contains "$line" "\"job\":\"$M\"" "... with its job"

# ---- a move that fails, retried ---------------------------------------------------------------------------
PLACED=$(sqlite3 "$T/state/control.db" "SELECT placement || '|' || storage FROM tenants WHERE slug = 'acme'")
code=$(req POST /t/acme/action --data "action=move&confirm=yes&to=nowhere&csrf=$TOKEN")
assert_eq "$code" 303 "move from the panel: queued"
loc=$(header Location)
MV=${loc##*job=}
wait_state "$MV" dead 30 || fail "the move to a placement nobody serves did not fail ($(state_of "$MV"))"
req GET "$loc" > /dev/null
assert_contains "$(body)" 'id="job-state" class="error">dead' "its page says dead"
assert_contains "$(grep -o 'id="job-error"[^<]*' "$T/body")" "exit status 1" "with the command's failure as the error"
assert_contains "$(body)" 'id="job-output"' "and its output"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT placement || '|' || storage FROM tenants WHERE slug = 'acme'")" "$PLACED" \
    "acme stayed where it was"
assert_contains "$(grep '"action":"move"' "$AUDIT" | grep '"result":"error"' | tail -1)" '"by":"job worker"' \
    "the failed move audited by the job worker"
assert_eq "$(req POST /t/acme/job --data "id=$MV&op=retry&csrf=$TOKEN")" 303 "retry the failed move from the panel"
wait_until 30 bash -c "[ \$(grep '\"action\":\"move\"' '$AUDIT' | grep -c '\"result\":\"error\"') -ge 2 ]" ||
    fail "the retried move did not run again"
wait_state "$MV" dead 30 || fail "the retried move did not end ($(state_of "$MV"))"
assert_eq "$(http /log acme.localhost > /dev/null; last_status)" 200 "acme is served all along"
