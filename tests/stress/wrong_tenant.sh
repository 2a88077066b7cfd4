#!/bin/bash
# wrong_tenant.sh — no request ever gets another tenant's answer, while things break.
#
#   wrong_tenant.sh [--quick | --seconds N]     (60 s; --quick or STRESS_QUICK=1: 15 s)
#
# One tenancyd (storeapp, 4 workers) behind a real nginx serves 1,000 tenants t1..t1000 on
# SQLite files and 1,000 tenants p1..p1000 in schemas of a throwaway PostgreSQL cluster, at
# once: the same workers switch between the two backends all the time, and each p tenant's
# requests are passed to its home worker (tenant.affinity = on). Two hammers (one per
# backend) ask /v of random tenants for the whole run; every 2xx must read
#   {"tenant":"tN","data":"tN","cache":"tN"}
# for host tN.localhost: the slug from the request's context, the marker row read from the
# tenant's own storage in that request, and the tenant's own app cache entry. Anything else
# in a 2xx body is a WRONG answer. Meanwhile, on a schedule:
#   - SIGHUP every second (a reload: a new generation of workers each time);
#   - SIGKILL of a random worker every 1-2 s;
#   - the storeapp "chaos" stage, a few times a second on random tenants, begins a transaction,
#     overwrites the tenant's marker, then fails (500), abort()s its worker (502) or sleeps past
#     request_timeout (504); and a client that goes away in the middle of /big (a transaction
#     open while streaming);
#   - PostgreSQL restarted once (pg_ctl restart -m fast), a third of the way in;
#   - registry changes invalidating every worker's lookup cache, in a loop: t1000 and p1000
#     suspended then resumed; the domain moved.example moved between t999 and p999.
#
# What counts as wrong, and when (tests/stress/README.md says the same):
#   - a 2xx whose tenant, data or cache is not the tenant the host names: WRONG, always;
#   - after `tenancy tenant suspend` has returned, a 200 for that tenant; after `resume` has
#     returned, a 403; after a domain move has returned, an answer naming the old owner: STALE
#     (the change was acknowledged, so every later request must see it). While a command runs,
#     old and new are both right (and, for a domain, 404 between its remove and its add);
#   - a status other than the expected one that is not a documented fault answer: BAD. The
#     documented ones: 502 (nginx, when the worker holding the request or its kept connection
#     was killed) during the faults, and 503 for PostgreSQL tenants while PostgreSQL restarts
#     (from the stop to one second after pg_ctl says it is up again). SQLite tenants must
#     never get a 503 — not even while PostgreSQL is down;
#   - a transport error (connect, reset, timeout, parse) between hammer and nginx: BAD.
# And the host must serve, not only never answer wrong:
#   - 502s: at most one per client connection (CONNS) for each worker death the test caused;
#   - a worker death the test did not cause (tenancyd's log says how each worker ended, and
#     the test knows the pids it killed and the chaos requests it sent): a failure;
#   - of the answers clear of every fault window (the second around each worker death the
#     test caused; the PostgreSQL restart for its tenants), at least 90 % a right 200, and at
#     least 100 of them (fewer cannot be judged). Each answer's time comes from hammer --log.
# At the end, with the faults stopped: every tenant's marker in its storage is its own (no
# fault committed its overwrite), and a last sweep of 4,000 requests is all 200 and right.
# Output: a table and $STRESS_OUT/stress-wrong-tenant.json. Fails when wrong, stale or bad > 0,
# or when one of the three above does not hold.
. "$(dirname "$0")/common.sh"
stress_args 60 15 "$@"
need curl nginx sqlite3 psql "$HELPERS/hammer" "$TENANCY_CLI" "$JSON_CHECK"
[ -f "$STORE_SO" ] || hard_error "$STORE_SO is not built (make check builds it)"
HAMMER=$HELPERS/hammer
N=1000
MAIN_N=990   # t991..t1000 and p991..p1000 are kept for the registry changes
t_setup=$SECONDS

pg_up
mkdir -p "$T/state" "$T/h"
tn_conf "app = $STORE_SO" "pm.max_children = 4" "request_timeout = 2s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain, host" \
    "tenant.base_domains = localhost" "tenant.max_workers = 0" \
    "storage.migrations = $STORE_FIX/migrations" "storage.seed = $STORE_FIX/seed.sql" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema" \
    "pm.crash_limit = 100000" "tenant.affinity = on"
# (the kills here are on purpose: the crash-storm brake is tested by tests/integration/pm.sh)
# tenant.affinity = on: the PostgreSQL tenants' requests go to their home workers from the first
# one (auto, the default, would wait for a backend to fill its 64 MiB, which 1,000 small
# schemas never do here), so connections move between workers, through the reloads and kills,
# on most requests of the p tenants.
# No per-tenant cap: moved.example gets a 4-connection hammer and watch_moved's request at
# once, and while a reload runs two generations serve, so 5 of them can be in the chain
# together; the cap itself is tested by tests/integration/tenancy.sh.
tn_cli init > /dev/null || fatal "tenancy init failed"
provision t "$N" sqlite & P1=$!
provision p "$N" pgs & P2=$!
wait "$P1" || fatal "provisioning the SQLite tenants failed"
wait "$P2" || fatal "provisioning the PostgreSQL tenants failed"
tn_cli domain add t999 moved.example > /dev/null || fatal "domain add failed"
tn_start
nginx_start
log "set up ${N} SQLite + ${N} PostgreSQL tenants in $((SECONDS - t_setup)) s; running ${SECS} s"

now_ms() { date +%s%3N; }
START_MS=$(now_ms)
END_MS=$((START_MS + SECS * 1000))
running() { [ "$(now_ms)" -lt "$END_MS" ]; }
: > "$T/h/index"
: > "$T/killed"

# hb NAME BACKEND EXPECT HAMMER-ARGS...: one hammer run, judged at the end by its JSON, the
# time it ran (index: name backend expect start end) and the time of each answer (NAME.req).
hb() {
    local name=$1 backend=$2 expect=$3 t0
    shift 3
    t0=$(now_ms)
    "$HAMMER" -p "$NGINX_PORT" --expect-status any --timeout 10000 --json "$T/h/$name.json" \
        --log "$T/h/$name.req" "$@" 2> "$T/h/$name.log"
    echo "$name $backend $expect $t0 $(now_ms)" >> "$T/h/index"
}

# ---- the load: one hammer per backend, in 1-second slices (so a 503 can be placed in time) --
# The client connections open at once: two load hammers, the change hammer, watch_moved and
# the chaos requests. A worker that dies can spoil at most one request of each (one request
# a connection at a time), so at most CONNS 502s per worker death the test causes.
LOAD_C=3
CHG_C=4
CONNS=$((2 * LOAD_C + CHG_C + 2))
load() {   # load BACKEND PREFIX
    local k=0
    while running; do
        k=$((k + 1))
        hb "$1-$k" "$1" 200 -c "$LOAD_C" -d 1 -H "$2%d.localhost" -N "$MAIN_N" -u /v \
            -e "\"tenant\":\"$2%d\",\"data\":\"$2%d\",\"cache\":\"$2%d\""
    done
}
load sqlite t & LOAD1=$!
load pg p & LOAD2=$!

# ---- faults ------------------------------------------------------------------------------
reloads() {
    local n=0
    while running; do
        sleep 1
        kill -HUP "$TN_PID" 2>/dev/null && n=$((n + 1))
    done
    echo "$n" > "$T/reloads"
}
kills() {
    local n=0 ws w
    while running; do
        sleep "1.$((RANDOM % 10))"
        mapfile -t ws < <(pgrep -P "$TN_PID")
        [ "${#ws[@]}" -gt 0 ] || continue
        w=${ws[RANDOM % ${#ws[@]}]}
        # (time and pid: the judge tells the deaths it caused from the others by them)
        kill -KILL "$w" 2>/dev/null && n=$((n + 1)) && echo "$(now_ms) $w" >> "$T/killed"
    done
    echo "$n" > "$T/kills"
}
chaos() {   # one misbehaving request at a time: "kind status" lines in $T/chaos
    local kind host code r be c0
    while running; do
        r=$((RANDOM % 10))
        if [ $((RANDOM % 2)) = 0 ]; then host=t$((RANDOM % MAIN_N + 1)).localhost; be=sqlite; else host=p$((RANDOM % MAIN_N + 1)).localhost; be=pg; fi
        c0=$(now_ms)
        case $r in
        0 | 1 | 2 | 3) kind=fail; path=/chaos/fail ;;
        4 | 5) kind=abort; path=/chaos/abort ;;
        6) kind=sleep; path='/chaos/sleep?ms=4000' ;;
        *) kind=client_abort; path=/big ;;
        esac
        if [ "$kind" = client_abort ]; then
            code=$(curl -s -o /dev/null -w '%{http_code}' -m 0.3 --limit-rate 20k -H "Host: $host" "http://127.0.0.1:$NGINX_PORT$path")
            code=gone
        else
            code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -H "Host: $host" "http://127.0.0.1:$NGINX_PORT$path")
        fi
        echo "$kind $code $be $c0 $(now_ms)" >> "$T/chaos"
        sleep 0.2
    done
}
pg_restart() {
    sleep $((SECS / 3))
    echo "$(now_ms)" > "$T/pg_window"
    pg_ctl_as_owner restart -m fast -w -t 30 > "$T/pg_restart.log" 2>&1 || echo failed > "$T/pg_restart_failed"
    echo "$(now_ms)" >> "$T/pg_window"
}
# The registry changes: a short hammer on the tenant before, and after each acknowledged change.
changes() {
    local n_susp=0 n_move=0 owner=t999 next s
    while running; do
        for s in t1000 p1000; do
            local be=sqlite
            [ "${s:0:1}" = p ] && be=pg
            hb "chg-$s-before-$n_susp" "$be" 200 -c "$CHG_C" -n 40 -H "$s.localhost" -u /v \
                -e "\"tenant\":\"$s\",\"data\":\"$s\",\"cache\":\"$s\""
            tn_cli tenant suspend "$s" > /dev/null || echo "suspend $s failed" >> "$T/change_errors"
            hb "chg-$s-suspended-$n_susp" "$be" 403 -c "$CHG_C" -n 40 -H "$s.localhost" -u /v \
                -e "\"tenant\":\"$s\",\"data\":\"$s\",\"cache\":\"$s\""
            tn_cli tenant resume "$s" > /dev/null || echo "resume $s failed" >> "$T/change_errors"
            hb "chg-$s-resumed-$n_susp" "$be" 200 -c "$CHG_C" -n 40 -H "$s.localhost" -u /v \
                -e "\"tenant\":\"$s\",\"data\":\"$s\",\"cache\":\"$s\""
        done
        n_susp=$((n_susp + 1))
        if [ "$owner" = t999 ]; then next=p999; else next=t999; fi
        { tn_cli domain remove moved.example && tn_cli domain add "$next" moved.example; } > /dev/null ||
            echo "moving moved.example to $next failed" >> "$T/change_errors"
        owner=$next
        n_move=$((n_move + 1))
        local be=sqlite
        [ "${owner:0:1}" = p ] && be=pg
        hb "chg-moved-$n_move" "$be" 200 -c "$CHG_C" -n 40 -H moved.example -u /v \
            -e "\"tenant\":\"$owner\",\"data\":\"$owner\",\"cache\":\"$owner\""
    done
    echo "$((n_susp * 2)) $n_move" > "$T/changes"
}
# Requests on moved.example all along, also while it moves: each answer must be consistent
# (tenant = data = cache, one of the two owners) or 404 (between remove and add) or a fault.
watch_moved() {
    local body code n=0 bad=0 c404=0
    while running; do
        body=$(curl -s -m 10 -w '\n%{http_code}' -H 'Host: moved.example' "http://127.0.0.1:$NGINX_PORT/v")
        code=${body##*$'\n'}
        body=${body%$'\n'*}
        body=${body%$'\n'}
        n=$((n + 1))
        case $code in
        200)
            if ! [[ $body =~ ^\{\"tenant\":\"(t999|p999)\",\"data\":\"([a-z0-9]*)\",\"cache\":\"([a-z0-9]*)\"\}$ ]] ||
                [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ] || [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[3]}" ]; then
                bad=$((bad + 1))
                echo "moved.example: $body" >> "$T/watch_wrong"
            fi ;;
        404) c404=$((c404 + 1)) ;;
        esac
        echo "$code" >> "$T/watch_codes"
    done
    echo "$n $bad $c404" > "$T/watch"
}
PIDS+=("$LOAD1" "$LOAD2")
reloads & F1=$!
kills & F2=$!
chaos & F3=$!
pg_restart & F4=$!
changes & F5=$!
watch_moved & F6=$!
PIDS+=("$F1" "$F2" "$F3" "$F4" "$F5" "$F6")
wait $LOAD1 $LOAD2 $F1 $F2 $F3 $F4 $F5 $F6
log "load and faults stopped after $((($(now_ms) - START_MS) / 1000)) s"

# ---- after the run: storage intact, and a quiet sweep ---------------------------------------
sleep 1   # the last reload's generation takes over
# One line per tenant whose marker is not its own (or whose storage cannot be read).
leaked_sqlite=$(sqlite3 -separator ' ' "$T/state/control.db" \
    "SELECT slug, storage FROM tenants WHERE placement = 'sqlite'" | while read -r slug path; do
    echo "ATTACH '$path' AS x; SELECT '$slug' FROM x.marker WHERE tenant <> '$slug'; DETACH x;"
done | sqlite3 ":memory:" 2>&1 | wc -l)
leaked_pg=$(for i in $(seq 1 "$N"); do
    echo "SELECT 'p$i' FROM t_p$i.marker WHERE tenant <> 'p$i';"
done | psql_q 2>&1 | wc -l)
assert_eq "$leaked_sqlite" 0 "every SQLite tenant's marker is its own after the faults"
assert_eq "$leaked_pg" 0 "every PostgreSQL tenant's marker is its own after the faults"
hb sweep-sqlite sqlite 200 -c 4 -n 2000 -H 't%d.localhost' -N "$N" -u /v \
    -e '"tenant":"t%d","data":"t%d","cache":"t%d"'
hb sweep-pg pg 200 -c 4 -n 2000 -H 'p%d.localhost' -N "$N" -u /v \
    -e '"tenant":"p%d","data":"p%d","cache":"p%d"'

# ---- judge ----------------------------------------------------------------------------------
iso_ms() { printf '%s.%03dZ' "$(date -u -d "@$(($1 / 1000))" +%Y-%m-%dT%H:%M:%S)" $(($1 % 1000)); }
# why: what tenancyd and nginx logged (errors and warnings) from FROM-500 ms to TO+500 ms, so a
# failure in CI says what happened, not only that it did.
why() {
    local a b
    a=$(iso_ms $(($1 - 500)))
    b=$(iso_ms $(($2 + 500)))
    awk -v a="$a" -v b="$b" '$1 >= a && $1 <= b && / (error|warning|warn):/' "$T/tenancyd.log" |
        grep -v 'stage chaos failed' | cut -c1-300 | head -8 | sed 's/^/    tenancyd: /'
}
# The p tenants' requests went to their home workers (tenant.affinity = on): a run in which
# none was passed would not have tested that under the faults.
AFF_SENT=$(curl -s -m 5 -H 'Host: localhost' "http://127.0.0.1:$NGINX_PORT/_tenancy/status" |
    grep -o '"affinity_sent":[0-9]*' | cut -d: -f2)
AFF_SENT=${AFF_SENT:-0}
read -r PGW0 PGW1 < <(tr '\n' ' ' < "$T/pg_window")
PGW1=$((PGW1 + 1000))
declare -A CODES=() BADC=()
REQ=0 RESP=0 WRONG=0 STALE=0 BAD=0 TRANSPORT=0 OK2XX=0 TOL502=0 TOL503=0
while read -r name backend expect t0 t1; do
    f=$T/h/$name.json
    [ -s "$f" ] || { fail "$name: hammer wrote no result ($(tail -1 "$T/h/$name.log"))"; continue; }
    REQ=$((REQ + $(jget "$f" .requests)))
    RESP=$((RESP + $(jget "$f" .responses)))
    w=$(jget "$f" .wrong)
    e=$(jerrors "$f")
    TRANSPORT=$((TRANSPORT + e))
    [ "$e" -gt 0 ] && log "$name: transport errors: $(jget "$f" .errors)"
    in_pg_window=0
    [ "$backend" = pg ] && [ "$t1" -ge "$PGW0" ] && [ "$t0" -le "$PGW1" ] && in_pg_window=1
    while read -r code n; do
        CODES[$code]=$(( ${CODES[$code]:-0} + n ))
        if [ "$code" = "$expect" ]; then
            [ "${code:0:1}" = 2 ] && OK2XX=$((OK2XX + n))
        elif [ "$expect" = 403 ] && [ "$code" = 200 ]; then
            STALE=$((STALE + n))
            log "STALE: $name: $n answers 200 after the suspension was acknowledged"
        elif [ "$code" = 502 ] && [[ $name != sweep-* ]]; then
            # (the sweeps run with the faults stopped: there a 502 is BAD like any other)
            TOL502=$((TOL502 + n))
        elif [ "$code" = 503 ] && [ "$in_pg_window" = 1 ]; then
            TOL503=$((TOL503 + n))
        else
            BAD=$((BAD + n))
            BADC[$code]=$(( ${BADC[$code]:-0} + n ))
            log "BAD: $name ($backend, expected $expect): $n x $code, from $(iso_ms "$t0") to $(iso_ms "$t1")"
            why "$t0" "$t1"
        fi
    done < <(jcodes "$f")
    if [ "$w" -gt 0 ]; then
        # After a move the old owner's answer is stale; anywhere else a wrong body is WRONG.
        if [[ $name == chg-moved-* ]]; then STALE=$((STALE + w)); else WRONG=$((WRONG + w)); fi
        log "WRONG/STALE: $name: $w answers: $(grep -A2 -i wrong "$T/h/$name.log" | head -6)"
    fi
done < "$T/h/index"
read -r W_N W_BAD W_404 < "$T/watch"
WRONG=$((WRONG + W_BAD))
REQ=$((REQ + W_N))
read -r N_CHANGES N_MOVES < "$T/changes"
declare -A CH=()
while read -r kind code be c0 c1; do
    # a chaos request on a PostgreSQL tenant while PostgreSQL restarts may get the 503 first
    if [ "$code" = 503 ] && [ "$be" = pg ] && [ "$c1" -ge "$PGW0" ] && [ "$c0" -le "$PGW1" ]; then
        TOL503=$((TOL503 + 1))
        code=503_pg_restart
    fi
    CH["$kind $code"]=$(( ${CH["$kind $code"]:-0} + 1 ))
done < "$T/chaos"
chaos_total=$(wc -l < "$T/chaos")
chaos_bad=0
for k in "${!CH[@]}"; do
    case $k in
    "fail 500" | "fail 502" | "abort 502" | "sleep 504" | "sleep 502" | "client_abort gone" | *" 503_pg_restart") ;;
    *) chaos_bad=$((chaos_bad + CH[$k])); log "BAD chaos answer: $k x ${CH[$k]}" ;;
    esac
done
BAD=$((BAD + chaos_bad))

# ---- worker deaths: each one caused by the test, or a failure ---------------------------------
# Every worker death tenancyd logged, told apart by its cause: a SIGKILL from kills() (by its
# pid), the chaos stage's abort() (signal 6 in /chaos/abort), or its sleep past
# request_timeout (the worker answers 504 and exits, or is killed, in /chaos/sleep). Any
# other death (a crash, an exit with a status, an app that cannot start) the test did not
# cause, and it fails the test: the 502 it leaves would otherwise pass as one of a killed
# worker.
awk -v killed="$T/killed" '
    BEGIN { while ((getline l < killed) > 0) { split(l, f, " "); k[f[2]] = 1 } }
    !/ (error|warn): / { next }
    match($0, /worker [0-9]+ died from signal [0-9]+/) {
        split(substr($0, RSTART, RLENGTH), f, " ")
        if ((f[6] == 9 && (f[2] in k)) || (f[6] == 6 && index($0, " while GET /chaos/abort ")))
            print "injected", $1
        else
            print "NOT " $0
        next
    }
    # (tenancyd says a retiring worker that dies of SIGKILL "did not exit in time", also
    # when kills() was what killed it)
    match($0, /worker [0-9]+ did not exit in time and was killed/) {
        split(substr($0, RSTART, RLENGTH), f, " ")
        if ((f[2] in k) || index($0, "GET /chaos/sleep")) print "injected", $1; else print "NOT " $0
        next
    }
    /request timed out/ {
        if (index($0, "GET /chaos/sleep")) print "injected", $1; else print "NOT " $0
        next
    }
    /worker [0-9]+ exited with status/ || /could not start the app/ { print "NOT " $0 }
' "$T/tenancyd.log" > "$T/deaths"
DEATHS_INJ=$(grep -c '^injected ' "$T/deaths")
DEATHS_NOT=$(grep -c '^NOT ' "$T/deaths")
grep '^NOT ' "$T/deaths" | cut -c5-300 | head -5 | sed 's/^/    not caused by the test: /'

# ---- 502s: at most one per client connection for each worker death the test caused --------------
# (counted from the log: nginx may pass a chaos request that killed its worker on to another
# worker, which it kills too)
N502=$((${CODES[502]:-0} + $(grep -c '^502$' "$T/watch_codes" 2>/dev/null) +
    $(awk '$2 == 502' "$T/chaos" | wc -l)))
CAP502=$((DEATHS_INJ * CONNS))

# ---- right answers away from the faults ------------------------------------------------------
# Around a worker death some requests may fail (the 502s above); away from one the host must
# serve. A fault window is the second around each worker death the test caused (half a
# second either side of its SIGKILL, and of the death tenancyd logged), and, for the
# PostgreSQL tenants, the restart. The reloads are no window: a reload loses no request (only
# a dead worker gives a 502), and at one a second they would leave nothing to judge. Every
# answer of a slice that expects 200 (the sweeps are judged on their own) whose request ran
# clear of every window counts, and at least 90 % of them must be a right 200.
{
    # (printf: awk may print a number of 13 digits in exponent form)
    awk '{ printf "%.0f %.0f all\n", $1 - 500, $1 + 500 }' "$T/killed"
    awk '$1 == "injected" { print $2 }' "$T/deaths" | date -u -f - +%s%3N |
        awk '{ printf "%.0f %.0f all\n", $1 - 500, $1 + 500 }'
    echo "$PGW0 $PGW1 pg"
} | sort -n -k1,1 > "$T/windows"
read -r CLEAR CLEAR_OK NEAR < <(while read -r name backend expect t0 t1; do
    [ "$expect" = 200 ] && [[ $name != sweep-* ]] && [ -f "$T/h/$name.req" ] || continue
    sed "s/^/$backend /" "$T/h/$name.req"
done < "$T/h/index" | awk -v wf="$T/windows" '
    # windows: sorted by start; merged into disjoint runs, one list for every backend ("all")
    # and one for the PostgreSQL tenants (all and pg), each searched by bisection
    function add(s, e, k) {
        if (k in n && s <= E[k, n[k]]) { if (e > E[k, n[k]]) E[k, n[k]] = e; return }
        n[k]++; S[k, n[k]] = s; E[k, n[k]] = e
    }
    function near(k, x0, x1,   lo, hi, mid) {
        lo = 1; hi = n[k] + 0
        if (hi == 0 || S[k, 1] > x1) return 0
        while (lo < hi) { mid = int((lo + hi + 1) / 2); if (S[k, mid] <= x1) lo = mid; else hi = mid - 1 }
        return E[k, lo] >= x0
    }
    BEGIN {
        while ((getline l < wf) > 0) {
            split(l, f, " ")
            if (f[3] == "all") add(f[1] + 0, f[2] + 0, "all")
            add(f[1] + 0, f[2] + 0, "pg")
        }
    }
    {   # BACKEND START END STATUS|ERROR RESULT
        if (near($1 == "pg" ? "pg" : "all", $2 + 0, $3 + 0)) { nearc++; next }
        clear++
        if ($4 == 200 && $5 == "ok") ok++
    }
    END { print clear + 0, ok + 0, nearc + 0 }')
CLEAR_MIN=100   # fewer answers clear of the faults than this are too few to judge
CLEAR_PCT=$(( CLEAR > 0 ? CLEAR_OK * 1000 / CLEAR : 0 ))   # per mille
CLEAR_PCT=$((CLEAR_PCT / 10)).$((CLEAR_PCT % 10))

[ -f "$T/pg_restart_failed" ] && fail "pg_ctl restart failed: $(cat "$T/pg_restart.log")"
[ -f "$T/change_errors" ] && fail "registry changes failed: $(cat "$T/change_errors")"

codes_json=$(for c in "${!CODES[@]}"; do printf '"%s": %s\n' "$c" "${CODES[$c]}"; done | sort | paste -sd, -)
bad_json=$(for c in "${!BADC[@]}"; do printf '"%s": %s\n' "$c" "${BADC[$c]}"; done | sort | paste -sd, -)
chaos_json=$(for k in "${!CH[@]}"; do printf '"%s": %s\n' "${k// /:}" "${CH[$k]}"; done | sort | paste -sd, -)
ok=true
[ "$WRONG" -eq 0 ] && [ "$STALE" -eq 0 ] && [ "$BAD" -eq 0 ] && [ "$TRANSPORT" -eq 0 ] &&
    [ "$N502" -le "$CAP502" ] && [ "$DEATHS_NOT" -eq 0 ] && [ "$CLEAR" -ge "$CLEAR_MIN" ] &&
    [ $((CLEAR_OK * 100)) -ge $((CLEAR * 90)) ] && [ "$AFF_SENT" -gt 0 ] && [ "$FAILED" -eq 0 ] ||
    ok=false
cat > "$STRESS_OUT/stress-wrong-tenant.json" <<EOF
{"suite": "wrong_tenant", "seconds": $SECS, "tenants": {"sqlite": $N, "postgres": $N},
 "requests": $REQ, "responses": $RESP, "ok_2xx": $OK2XX, "wrong": $WRONG, "stale": $STALE,
 "bad": $BAD, "transport_errors": $TRANSPORT,
 "status": {$codes_json}, "bad_status": {$bad_json},
 "tolerated": {"502_worker_killed": $TOL502, "503_pg_restart": $TOL503, "404_domain_gap": $W_404},
 "502": {"count": $N502, "cap": $CAP502, "connections": $CONNS},
 "clear_of_faults": {"answers": $CLEAR, "right_200": $CLEAR_OK, "percent": $CLEAR_PCT,
  "near_a_fault": $NEAR},
 "worker_deaths": {"caused": $DEATHS_INJ, "not_caused": $DEATHS_NOT},
 "faults": {"reloads": $(cat "$T/reloads"), "worker_kills": $(cat "$T/kills"),
  "chaos": {$chaos_json}, "chaos_total": $chaos_total, "pg_restarts": 1,
  "pg_restart_ms": $((PGW1 - 1000 - PGW0)), "suspend_resume": $N_CHANGES, "domain_moves": $N_MOVES},
 "storage_markers_overwritten": $((leaked_sqlite + leaked_pg)), "affinity_sent": $AFF_SENT,
 "ok": $ok}
EOF
"$JSON_CHECK" < "$STRESS_OUT/stress-wrong-tenant.json" || fail "the summary is not valid JSON"
cp "$STRESS_OUT/stress-wrong-tenant.json" "$T/" 2>/dev/null
printf '\n%-34s %s\n' "wrong-tenant stress, ${SECS} s" "(2 x $N tenants, nginx, 4 workers)"
printf '  %-32s %s\n' "requests" "$REQ" "2xx as expected" "$OK2XX" \
    "WRONG (another tenant's answer)" "$WRONG" "STALE (after an acknowledged change)" "$STALE" \
    "BAD (undocumented status)" "$BAD" "transport errors" "$TRANSPORT" \
    "502 (a killed worker)" "$TOL502" \
    "502 in all / cap" "$N502 / $CAP502 ($CONNS per death caused)" \
    "right 200s clear of faults" "$CLEAR_OK of $CLEAR ($CLEAR_PCT %; $NEAR near a fault)" \
    "worker deaths caused / not" "$DEATHS_INJ / $DEATHS_NOT" \
    "503 (PostgreSQL restarting)" "$TOL503" \
    "404 (domain between owners)" "$W_404" \
    "reloads (SIGHUP)" "$(cat "$T/reloads")" "workers SIGKILLed" "$(cat "$T/kills")" \
    "chaos requests" "$chaos_total ($chaos_json)" \
    "PostgreSQL restart" "$((PGW1 - 1000 - PGW0)) ms" \
    "suspend+resume / domain moves" "$N_CHANGES / $N_MOVES" \
    "markers overwritten in storage" "$((leaked_sqlite + leaked_pg))" \
    "requests passed to their home" "$AFF_SENT"
echo "STRESS-RESULT $(tr -d '\n' < "$STRESS_OUT/stress-wrong-tenant.json")"
[ "$WRONG" -eq 0 ] || fail "$WRONG wrong-tenant answers"
[ "$AFF_SENT" -gt 0 ] || fail "no request was passed to its tenant's home (tenant.affinity = on)"
[ "$STALE" -eq 0 ] || fail "$STALE stale answers after an acknowledged change"
[ "$BAD" -eq 0 ] || fail "$BAD answers with an undocumented status"
[ "$TRANSPORT" -eq 0 ] || fail "$TRANSPORT transport errors"
[ "$N502" -le "$CAP502" ] ||
    fail "$N502 answers 502, more than $CAP502 ($CONNS connections x $DEATHS_INJ worker deaths caused)"
[ "$DEATHS_NOT" -eq 0 ] || fail "$DEATHS_NOT worker deaths the test did not cause"
[ "$CLEAR" -ge "$CLEAR_MIN" ] ||
    fail "only $CLEAR answers clear of the faults, fewer than $CLEAR_MIN: too few to judge"
[ $((CLEAR_OK * 100)) -ge $((CLEAR * 90)) ] ||
    fail "$CLEAR_OK of $CLEAR answers clear of the faults are a right 200 ($CLEAR_PCT %), fewer than 90 %"
