#!/bin/bash
# jobs.sh — no job is lost and none runs in another tenant, while job workers die and the
# master reloads.
#
#   jobs.sh [--quick | --seconds N]     (20,000 jobs over 1,000 tenants; --quick or
#                                        STRESS_QUICK=1: 2,000 over 100; --seconds is the
#                                        drain deadline, default 600 s, quick 240 s)
#
# One tenancyd (tests/helpers/jobapp.c, 2 HTTP workers, 4 job workers) behind a real nginx;
# the tenants are SQLite files with jobapp's tables and a marker of their own. Every tenant
# queues 20 "record" jobs with payloads 1..20 through one request (tn_job_enqueue, so the
# jobs go through the chain of a real request), all tenants at once. While the job workers
# drain the queue (faults from the first enqueue on):
#   - SIGKILL of a random job worker every 0.5-1 s (a job in hand dies with it);
#   - SIGHUP every 2 s (a reload: the job workers of the old generation finish their job
#     and leave, the new generation's start).
# A record job writes (job id, payload, the marker it read) into its own tenant's job_log.
# At the end, reading every tenant's file:
#   - LOST: a payload 1..20 with no row in its tenant's job_log, or a job not done: must be 0;
#   - WRONG: a row whose marker is not its tenant's (a job run in another tenant's storage):
#     must be 0;
#   - DUPLICATES: rows beyond one per job. Only a job whose worker died in it may run twice,
#     so duplicates must not exceed the jobs that needed more than one attempt, and those
#     must not exceed the job workers the test killed (each kill can interrupt one job);
#   - every job done, none dead, all drained before the deadline.
# Output: a table and $STRESS_OUT/stress-jobs.json.
. "$(dirname "$0")/common.sh"
DEADLINE=600
N=1000
[ "${STRESS_QUICK:-0}" = 1 ] && { DEADLINE=240; N=100; }
while [ $# -gt 0 ]; do
    case $1 in
    --quick) DEADLINE=240; N=100 ;;
    --seconds) DEADLINE=${2:?--seconds needs a number}; shift ;;
    *) echo "usage: $0 [--quick | --seconds N]" >&2; exit 2 ;;
    esac
    shift
done
PER=20
TOTAL=$((N * PER))
need curl nginx sqlite3 python3 "$TENANCY_CLI"
JOBAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/jobapp.so
JOB_FIX=$(cd "$top_srcdir" && pwd)/tests/fixtures/jobapp
[ -f "$JOBAPP" ] || hard_error "$JOBAPP is not built (make check builds it)"

mkdir -p "$T/state"
tn_conf "app = $JOBAPP" "pm.max_children = 2" "pm.jobs = 4" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 0" "jobs.timeout = 30s" "jobs.poll = 100ms" \
    "storage.migrations = $JOB_FIX/migrations" "storage.seed = $JOB_FIX/seed.sql" \
    "pm.crash_limit = 100000"
tn_cli init > /dev/null || fatal "tenancy init failed"
provision j "$N" sqlite
REG=$T/state/control.db
tn_start
nginx_start

job_pids() {
    curl -s -m 5 -H "Host: localhost" "http://127.0.0.1:$NGINX_PORT/_tenancy/status" |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(str(w["pid"]) for w in d["jobs"]["workers"] if w["state"] in ("idle","running")))' 2>/dev/null
}

# ---- faults from the first enqueue to the drained queue -----------------------------------------------------------------
: > "$T/killed"
drained() { [ "$(sqlite3 -cmd '.timeout 10000' "$REG" "SELECT count(*) FROM jobs WHERE state IN ('queued','running')")" = 0 ]; }
kills() {
    while ! [ -e "$T/stop" ]; do
        sleep "0.$((5 + RANDOM % 5))"
        local p
        p=$(job_pids | shuf -n 1)
        [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && echo "$p" >> "$T/killed"
    done
}
reloads() {
    local n=0
    while ! [ -e "$T/stop" ]; do
        sleep 2
        kill -HUP "$TN_PID" 2>/dev/null && n=$((n + 1))
    done
    echo "$n" > "$T/reloads"
}
kills & KP=$!
reloads & RP=$!

# ---- queue: every tenant its 20 jobs, 8 requests at a time -------------------------------------
t0=$SECONDS
seq 1 "$N" | xargs -P 8 -I{} curl -s -m 60 -X POST -H "Host: j{}.localhost" \
    "http://127.0.0.1:$NGINX_PORT/enqueue_many?n=$PER&name=record" > "$T/enqueue.out"
ok=$(grep -c "^ok $PER\$" "$T/enqueue.out" || true)
[ "$ok" = "$N" ] || fatal "only $ok of $N tenants queued their jobs: $(grep -v "^ok $PER\$" "$T/enqueue.out" | head -3)"
log "queued $TOTAL jobs over $N tenants in $((SECONDS - t0)) s"

t1=$SECONDS
while ! drained; do
    [ $((SECONDS - t0)) -lt "$DEADLINE" ] || break
    sleep 1
done
touch "$T/stop"
wait "$KP" "$RP"
drain_s=$((SECONDS - t0))
drained && DRAINED=1 || DRAINED=0
KILLED=$(grep -c . "$T/killed" || true)
RELOADS=$(cat "$T/reloads" 2>/dev/null || echo 0)

# ---- judge, from the storage ------------------------------------------------------------------------
sleep 1
for i in $(seq 1 "$N"); do
    echo "ATTACH '$T/state/tenants/j$i.db' AS x;"
    echo "SELECT 'j$i', payload, marker FROM x.job_log WHERE name = 'record';"
    echo "DETACH x;"
done | sqlite3 -separator ' ' ":memory:" > "$T/rows" || fatal "reading the tenants' job logs failed"
read -r LOST WRONG DUPS <<< "$(python3 - "$T/rows" "$N" "$PER" <<'PY'
import sys, collections
rows, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen = collections.Counter()
wrong = 0
for line in open(rows):
    slug, payload, marker = line.rstrip('\n').split(' ', 2)
    if marker != slug:
        wrong += 1
    seen[(slug, payload)] += 1
lost = sum(1 for i in range(1, n + 1) for p in range(1, per + 1) if seen[('j%d' % i, str(p))] == 0)
dups = sum(c - 1 for c in seen.values() if c > 1)
print(lost, wrong, dups)
PY
)"
counts=$(sqlite3 "$REG" "SELECT state, count(*) FROM jobs GROUP BY state" | tr '\n' ' ')
NOTDONE=$(sqlite3 "$REG" "SELECT count(*) FROM jobs WHERE state <> 'done'")
RETRIED=$(sqlite3 "$REG" "SELECT count(*) FROM jobs WHERE attempts > 1")
RATE=$((drain_s > 0 ? TOTAL / drain_s : TOTAL))

printf '\n%-34s %s\n' "jobs queued" "$TOTAL ($N tenants x $PER)"
printf '%-34s %s\n' "queued and drained in" "$drain_s s (about $RATE jobs/s, under faults)"
printf '%-34s %s\n' "job workers killed / reloads" "$KILLED / $RELOADS"
printf '%-34s %s\n' "jobs by state" "$counts"
printf '%-34s %s\n' "LOST (payload never recorded)" "$LOST"
printf '%-34s %s\n' "WRONG (another tenant's marker)" "$WRONG"
printf '%-34s %s\n' "duplicates / jobs run twice" "$DUPS / $RETRIED"
res="{\"jobs\":$TOTAL,\"tenants\":$N,\"drain_s\":$drain_s,\"killed\":$KILLED,\"reloads\":$RELOADS,\"lost\":$LOST,\"wrong\":$WRONG,\"duplicates\":$DUPS,\"retried\":$RETRIED,\"not_done\":$NOTDONE}"
echo "STRESS-RESULT $res"
echo "$res" > "$STRESS_OUT/stress-jobs.json"

[ "$DRAINED" = 1 ] || fail "the queue was not drained within $DEADLINE s"
[ "$LOST" = 0 ] || fail "$LOST jobs lost"
[ "$WRONG" = 0 ] || fail "$WRONG jobs ran in another tenant's storage"
[ "$NOTDONE" = 0 ] || fail "$NOTDONE jobs are not done ($counts)"
[ "$DUPS" -le "$RETRIED" ] || fail "$DUPS duplicate runs but only $RETRIED jobs needed a second attempt"
[ "$RETRIED" -le "$KILLED" ] || fail "$RETRIED jobs ran again but only $KILLED job workers were killed"
[ "$KILLED" -ge 3 ] || fail "only $KILLED job workers were killed: the faults were not exercised"
unexplained=$(grep -E 'job worker [0-9]+ (died|exited)' "$T/tenancyd.log" | grep -v 'signal 9' | head -3)
[ -z "$unexplained" ] || fail "a job worker died that the test did not kill: $unexplained"
