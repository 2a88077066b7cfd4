#!/bin/bash
# durability.sh — every write that got a 2xx is there afterwards, whole, in its own tenant.
#
#   durability.sh [--quick | --seconds N]     (30 s of writes; --quick or STRESS_QUICK=1: 10 s)
#
# storeapp's POST /write inserts the 20 ids of its body in one transaction and answers 200
# only after the commit. Three writers send such batches (unique ids, a batch name that
# starts with the tenant's slug) through nginx to random tenants: f1..f3 on SQLite with
# synchronous=FULL (the default), s1..s2 on SQLite with storage.synchronous=normal (the
# per-tenant opt-in), p1..p3 in PostgreSQL schemas (synchronous_commit=on, fsync=on).
# Meanwhile a random worker is SIGKILLed every half second; half way through the master is
# SIGKILLed (its workers must be gone within a second), PostgreSQL is stopped in immediate mode
# (a crash: no checkpoint) and started again, and tenancyd is started again on the same
# socket; the writers go on until the end. Then, reading the storage directly:
#   lost        a batch answered 2xx that does not have its 20 rows          must be 0
#   half        a batch with some rows but not 20 (a transaction half-applied) must be 0
#   foreign     a row in a tenant whose batch was sent to another tenant      must be 0
#   phantom     a batch in storage that no request sent                        must be 0
#   unacked     a batch whose commit happened but whose answer was not a 2xx (the worker
#               or the master died between the commit and the answer): allowed, counted.
# And tenant by tenant, every row of its table counted (the setup's batches included): it
# must hold 20 rows per batch acknowledged to that tenant, plus 20 per batch sent to it
# unacknowledged that committed anyway, never more than were sent; a tenant whose count is
# off is a failure even when the totals balance (one tenant's loss hidden by another's gain).
# The NORMAL window: SIGKILL of a process cannot lose a commit in NORMAL mode (the WAL was
# written to the kernel before the commit returned: only its fsync waits), so the kill run
# above must lose nothing there either. What NORMAL risks is an OS crash or power loss, which
# a test cannot cause; we measure what bounds it: the commit rate FULL vs NORMAL (one writer,
# quiet host), the WAL pages a batch adds, and so how many commits (and how many ms at that
# rate) can sit between two WAL syncs (one per checkpoint, every wal_autocheckpoint = 1000
# pages by default).
# Output: a table and $STRESS_OUT/stress-durability.json. Fails when lost, half, foreign or
# phantom > 0 or when a tenant's row count is not what was acknowledged to it.
. "$(dirname "$0")/common.sh"
stress_args 30 10 "$@"
need curl nginx sqlite3 psql "$TENANCY_CLI" "$JSON_CHECK"
[ -f "$STORE_SO" ] || hard_error "$STORE_SO is not built (make check builds it)"

pg_up
# The cluster of tests/pg.sh runs without fsync or synchronous commits (its options are on
# the command line, above ALTER SYSTEM): start it again with durable ones, which the crash
# below (restart -m immediate) keeps.
pg_ctl_as_owner restart -m fast -w -t 60 -o "-c listen_addresses='' -c unix_socket_directories='$PG_DIR' -c port=$PGPORT -c fsync=on -c synchronous_commit=on -c full_page_writes=on" \
    > "$T/pg_durable.log" 2>&1 || fatal "cannot restart PostgreSQL durable: $(cat "$T/pg_durable.log")"
[ "$(psql_q -c 'SHOW fsync')/$(psql_q -c 'SHOW synchronous_commit')" = on/on ] ||
    fatal "PostgreSQL is not durable (fsync, synchronous_commit)"
mkdir -p "$T/state" "$T/w"
tn_conf "app = $STORE_SO" "pm.max_children = 4" "request_timeout = 5s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" "pm.crash_limit = 100000" "pm.respawn_backoff_max = 200ms" \
    "storage.migrations = $STORE_FIX/migrations" "storage.seed = $STORE_FIX/seed.sql" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema"
tn_cli init > /dev/null || fatal "tenancy init failed"
FULL=(f1 f2 f3) NORMAL=(s1 s2) PGT=(p1 p2 p3)
for s in "${FULL[@]}"; do tn_cli tenant create "$s" > /dev/null || fatal "create $s"; done
for s in "${NORMAL[@]}"; do
    tn_cli tenant create "$s" --setting storage.synchronous=normal > /dev/null || fatal "create $s"
done
for s in "${PGT[@]}"; do tn_cli tenant create "$s" --placement pgs > /dev/null || fatal "create $s"; done
ALL=("${FULL[@]}" "${NORMAL[@]}" "${PGT[@]}")
tn_start
nginx_start

now_ms() { date +%s%3N; }

# writer W UNTIL_MS: batches of 20 unique ids to random tenants, 20 requests per curl process
# (one kept connection); one line "tenant batch status" per request in $T/w/ack-W.
writer() {
    local w=$1 until=$2 k=0 j r cfg=$T/w/$1.cfg
    while [ "$(now_ms)" -lt "$until" ]; do
        : > "$cfg"
        for r in $(seq 1 20); do
            k=$((k + 1))
            local s=${ALL[RANDOM % ${#ALL[@]}]} base=$(((w * 10000000 + k) * 20)) body=""
            for j in $(seq 0 19); do body="$body$((base + j))\\n"; done
            [ "$r" -gt 1 ] && echo next >> "$cfg"
            cat >> "$cfg" <<CFG
url = "http://127.0.0.1:$NGINX_PORT/write?batch=$s-w${w}k$k"
header = "Host: $s.localhost"
data-binary = "$body"
max-time = 10
output = /dev/null
write-out = "$s $s-w${w}k$k %{http_code}\\n"
CFG
        done
        curl -s -K "$cfg" >> "$T/w/ack-$w" 2>/dev/null
        # nginx answers at once while no tenancyd listens: do not spin
        tail -n 20 "$T/w/ack-$w" | grep -qv ' 200$' && sleep 0.1
    done
}

# ---- NORMAL vs FULL: the commit rate on a quiet host, and WAL pages per batch -------------
rate() {   # rate TENANT N: sequential batches on one kept connection -> commits per second
    local s=$1 n=$2 cfg=$T/rate-$1.cfg k j body t0 t1 ok
    : > "$cfg"
    for k in $(seq 1 "$n"); do
        body=""
        for j in $(seq 0 19); do body="$body$((900000000 + k * 20 + j))\\n"; done
        [ "$k" -gt 1 ] && echo next >> "$cfg"
        printf 'url = "http://127.0.0.1:%s/write?batch=rate-%s"\nheader = "Host: %s.localhost"\ndata-binary = "%s"\noutput = /dev/null\nwrite-out = "%s rate-%s %%{http_code}\\n"\n' \
            "$NGINX_PORT" "$k" "$s" "$body" "$s" "$k" >> "$cfg"
    done
    t0=$(now_ms)
    ok=$(curl -s -K "$cfg" | tee -a "$T/acks-setup" | grep -c ' 200$')
    t1=$(now_ms)
    [ "$ok" = "$n" ] || fail "rate run on $s: $ok of $n writes answered 200"
    echo $((n * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1)))
}
N_RATE=200
[ "$SECS" -ge 30 ] && N_RATE=500
rate_full=$(rate f1 "$N_RATE")
rate_normal=$(rate s1 "$N_RATE")
rate_pg=$(rate p1 "$N_RATE")
log "commits/s with one writer: SQLite FULL $rate_full, SQLite NORMAL $rate_normal, PostgreSQL $rate_pg"
# WAL pages a batch adds: checkpoint, 50 batches, size of the WAL / page size.
s1db=$(sqlite3 "$T/state/control.db" "SELECT storage FROM tenants WHERE slug = 's1'")
wal_pages_per_commit=$(
    sqlite3 "$s1db" "PRAGMA wal_checkpoint(TRUNCATE);" > /dev/null
    cfg=$T/walrate.cfg
    : > "$cfg"
    for k in $(seq 1 50); do
        body=""
        for j in $(seq 0 19); do body="$body$((950000000 + k * 20 + j))\\n"; done
        [ "$k" -gt 1 ] && echo next >> "$cfg"
        printf 'url = "http://127.0.0.1:%s/write?batch=wal-%s"\nheader = "Host: s1.localhost"\ndata-binary = "%s"\noutput = /dev/null\nwrite-out = "s1 wal-%s %%{http_code}\\n"\n' \
            "$NGINX_PORT" "$k" "$body" "$k" >> "$cfg"
    done
    curl -s -K "$cfg" >> "$T/acks-setup"
    bytes=$(stat -c %s "$s1db-wal" 2>/dev/null || echo 0)
    page=$(sqlite3 "$s1db" "PRAGMA page_size;")
    # the WAL is a 32-byte header, then a 24-byte header before each page
    awk -v b="$bytes" -v p="$page" 'BEGIN { printf "%.1f", (b - 32) / (p + 24) / 50 }')
ckpt=$(sqlite3 "$s1db" "PRAGMA wal_autocheckpoint;")
window_commits=$(awk -v c="$ckpt" -v p="$wal_pages_per_commit" 'BEGIN { printf "%d", (p > 0 ? c / p : 0) }')
window_ms=$(awk -v n="$window_commits" -v r="$rate_normal" 'BEGIN { printf "%d", (r > 0 ? n * 1000 / r : 0) }')
log "NORMAL window: $wal_pages_per_commit WAL pages a batch; a sync every $ckpt pages: up to $window_commits commits (~$window_ms ms at $rate_normal/s)"

# ---- writes under SIGKILL: workers, then the master (and a PostgreSQL crash) ---------------
T0=$(now_ms)
END=$((T0 + SECS * 1000))
HALF=$((T0 + SECS * 500))
for w in 1 2 3; do writer "$w" "$END" & PIDS+=("$!"); WP+=("$!"); done
kills=0
while [ "$(now_ms)" -lt "$HALF" ]; do
    sleep 0.5
    mapfile -t ws < <(pgrep -P "$TN_PID")
    [ "${#ws[@]}" -gt 0 ] && kill -KILL "${ws[RANDOM % ${#ws[@]}]}" 2>/dev/null && kills=$((kills + 1))
done
# the master goes with all its workers up, serving the writers
wait_until 5 bash -c "[ \$(pgrep -P $TN_PID | wc -l) -ge 4 ]" || fail "fewer than 4 workers before the master kill"
workers=$(pgrep -P "$TN_PID" | tr '\n' ' ')
tk=$(now_ms)
kill -KILL "$TN_PID"
gone_ms=-1
while [ $(($(now_ms) - tk)) -lt 5000 ]; do
    alive=0
    for p in $workers; do pid_running "$p" && alive=1; done
    [ "$alive" = 0 ] && { gone_ms=$(($(now_ms) - tk)); break; }
    sleep 0.02
done
log "master SIGKILLed: its workers ($workers) gone after $gone_ms ms"
[ "$gone_ms" -ge 0 ] && [ "$gone_ms" -le 1000 ] || fail "workers outlived the master by more than 1 s ($gone_ms ms)"
# a crash of PostgreSQL (no checkpoint, recovery from the WAL at start) with the same options
pg_ctl_as_owner restart -m immediate -w -t 60 > "$T/pgcrash.log" 2>&1 ||
    fatal "PostgreSQL did not start again after an immediate stop: $(cat "$T/pgcrash.log")"
cp "$T/tenancyd.log" "$T/tenancyd-1.log"
tn_start
log "tenancyd started again on the same socket after $(($(now_ms) - tk)) ms"
wait "${WP[@]}"
log "writes stopped after $((($(now_ms) - T0) / 1000)) s"

# ---- verify, from the storage itself ------------------------------------------------------
cat "$T"/w/ack-* > "$T/acks"
declare -A ACK=()   # batch -> status
total=0 acked=0
while read -r s b code; do
    ACK[$b]=$code
    total=$((total + 1))
    [ "${code:0:1}" = 2 ] && acked=$((acked + 1))
done < "$T/acks"
# every batch present in each tenant, with its row count: "tenant batch count"
: > "$T/present"
for s in "${FULL[@]}" "${NORMAL[@]}"; do
    db=$(sqlite3 "$T/state/control.db" "SELECT storage FROM tenants WHERE slug = '$s'")
    sqlite3 -separator ' ' "$db" "SELECT '$s', batch, count(*) FROM writes WHERE batch NOT LIKE 'rate-%' AND batch NOT LIKE 'wal-%' GROUP BY batch" >> "$T/present" ||
        fail "cannot read $db"
done
for s in "${PGT[@]}"; do
    psql_q -F ' ' -c "SELECT '$s', batch, count(*) FROM t_$s.writes WHERE batch NOT LIKE 'rate-%' GROUP BY batch" >> "$T/present" ||
        fail "cannot read t_$s"
done
declare -A HAVE=()
half=0 foreign=0 unacked=0 lost=0 phantom=0
while read -r s b n; do
    HAVE[$b]=$n
    [ "$n" = 20 ] || { half=$((half + 1)); log "HALF: $s has $n rows of batch $b"; }
    [ "${b%%-*}" = "$s" ] || { foreign=$((foreign + 1)); log "FOREIGN: $s holds batch $b"; }
    code=${ACK[$b]:-none}
    [ "$code" = none ] && { phantom=$((phantom + 1)); log "PHANTOM: $s holds batch $b, which no request sent"; }
    [ "${code:0:1}" = 2 ] || unacked=$((unacked + 1))
done < "$T/present"
# Tenant by tenant, from the client's side (every request, the setup's too: "tenant batch
# status"): batches acknowledged, and batches sent without a 2xx (which may have committed).
declare -A T_ACK=() T_UNACK=()
while read -r s b code; do
    if [ "${code:0:1}" = 2 ]; then
        T_ACK[$s]=$((${T_ACK[$s]:-0} + 1))
    else
        T_UNACK[$s]=$((${T_UNACK[$s]:-0} + 1))
    fi
done < <(cat "$T/acks-setup" "$T/acks")
# ... and from the storage: every row of the tenant's table
per_tenant="" tenants_off=0
for s in "${ALL[@]}"; do
    case $s in
    p*) rows=$(psql_q -c "SELECT count(*) FROM t_$s.writes") ;;
    *) rows=$(sqlite3 "$(sqlite3 "$T/state/control.db" "SELECT storage FROM tenants WHERE slug = '$s'")" "SELECT count(*) FROM writes") ;;
    esac
    [[ $rows =~ ^[0-9]+$ ]] || { fail "cannot count the rows of $s"; rows=-1; }
    a=${T_ACK[$s]:-0} u=${T_UNACK[$s]:-0}
    extra=$((rows - 20 * a))
    if [ "$rows" -lt 0 ] || [ "$extra" -lt 0 ] || [ $((extra % 20)) -ne 0 ] || [ $((extra / 20)) -gt "$u" ]; then
        tenants_off=$((tenants_off + 1))
        log "TENANT $s: $rows rows; acknowledged $a batches ($((20 * a)) rows), $u more sent unacknowledged"
    fi
    per_tenant+="${per_tenant:+, }\"$s\": {\"rows\": $rows, \"acked_batches\": $a, \"unacked_sent\": $u, \"unacked_committed\": $((extra >= 0 ? extra / 20 : -1))}"
done
lost_full=0 lost_normal=0 lost_pg=0
for b in "${!ACK[@]}"; do
    [ "${ACK[$b]:0:1}" = 2 ] || continue
    if [ "${HAVE[$b]:-0}" != 20 ]; then
        lost=$((lost + 1))
        log "LOST: batch $b was answered ${ACK[$b]} but has ${HAVE[$b]:-0} rows"
        case ${b:0:1} in f) lost_full=$((lost_full + 1)) ;; s) lost_normal=$((lost_normal + 1)) ;; *) lost_pg=$((lost_pg + 1)) ;; esac
    fi
done
statuses=$(awk '{print $3}' "$T/acks" | sort | uniq -c | awk '{printf "%s\"%s\": %s", (n++ ? ", " : ""), $2, $1}')
acked_by=$(awk '$3 ~ /^2/ {print substr($1,1,1)}' "$T/acks" | sort | uniq -c | awk '{printf "%s\"%s\": %s", (n++ ? ", " : ""), ($2=="f" ? "sqlite_full" : $2=="s" ? "sqlite_normal" : "postgres"), $1}')
ok=true
[ "$lost" -eq 0 ] && [ "$half" -eq 0 ] && [ "$foreign" -eq 0 ] && [ "$phantom" -eq 0 ] && [ "$tenants_off" -eq 0 ] && [ "$acked" -gt 0 ] && [ "$FAILED" -eq 0 ] || ok=false
cat > "$STRESS_OUT/stress-durability.json" <<EOF
{"suite": "durability", "seconds": $SECS, "writes": $total, "acked": $acked,
 "acked_by_backend": {$acked_by}, "status": {$statuses},
 "lost": $lost, "lost_by_backend": {"sqlite_full": $lost_full, "sqlite_normal": $lost_normal, "postgres": $lost_pg},
 "half_applied": $half, "foreign": $foreign, "phantom": $phantom, "committed_unacked": $unacked,
 "tenants_off": $tenants_off, "per_tenant": {$per_tenant},
 "faults": {"worker_kills": $kills, "master_kills": 1, "postgres_crashes": 1, "workers_gone_ms": $gone_ms},
 "normal_window": {"commits_per_s_full": $rate_full, "commits_per_s_normal": $rate_normal,
  "commits_per_s_postgres": $rate_pg, "wal_pages_per_commit": $wal_pages_per_commit,
  "wal_autocheckpoint_pages": $ckpt, "commits_between_syncs": $window_commits, "ms_between_syncs": $window_ms},
 "ok": $ok}
EOF
"$JSON_CHECK" < "$STRESS_OUT/stress-durability.json" || fail "the summary is not valid JSON"
printf '\n%-34s %s\n' "durability, ${SECS} s of writes" "(20-row batches, 3 writers)"
printf '  %-32s %s\n' "writes sent" "$total" "answered 2xx" "$acked ($acked_by)" \
    "statuses" "$statuses" "LOST (2xx, not all there)" "$lost" "HALF-APPLIED" "$half" \
    "FOREIGN (in another tenant)" "$foreign" "PHANTOM (no request sent it)" "$phantom" \
    "committed, not acknowledged" "$unacked" \
    "TENANTS whose rows are off" "$tenants_off of ${#ALL[@]}" \
    "workers SIGKILLed" "$kills" "master SIGKILLed; workers gone" "1; $gone_ms ms" \
    "PostgreSQL crashed (immediate)" 1 \
    "commits/s FULL / NORMAL / PG" "$rate_full / $rate_normal / $rate_pg" \
    "NORMAL: WAL pages a commit" "$wal_pages_per_commit" \
    "NORMAL: unsynced window" "up to $window_commits commits (~$window_ms ms), OS crash only"
echo "STRESS-RESULT $(tr -d '\n' < "$STRESS_OUT/stress-durability.json")"
[ "$lost" -eq 0 ] || fail "$lost acknowledged writes lost"
[ "$half" -eq 0 ] || fail "$half half-applied transactions"
[ "$foreign" -eq 0 ] || fail "$foreign batches in another tenant's storage"
[ "$phantom" -eq 0 ] || fail "$phantom batches that no request sent"
[ "$tenants_off" -eq 0 ] || fail "$tenants_off tenants do not hold exactly the rows acknowledged to them"
[ "$acked" -gt 0 ] || fail "no write was acknowledged"
