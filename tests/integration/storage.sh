#!/bin/bash
# storage.sh — each tenant's own storage behind a real nginx, on the three placements (a
# SQLite file, a PostgreSQL schema, a PostgreSQL database): every answer is exactly the
# tenant's own, with a marker read from its own storage in that request and its display name
# from the registry (both random, set at setup), and a request that fails mid-transaction,
# is killed by request_timeout mid-transaction, or loses its client mid-response leaves
# nothing behind — the next request on that worker reads its own tenant, and the tenant's
# data is unchanged.
. "$(dirname "$0")/lib.sh"
need curl nginx sqlite3 psql "$HELPERS/hammer" "$HELPERS/json_check" "$TENANCY_CLI"
STOREAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/storeapp.so
FIX=$top_srcdir/tests/fixtures/storeapp
pg_cluster

mkdir -p "$T/state"
tn_conf "app = $STOREAPP" "pm.max_children = 2" "request_timeout = 2s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" \
    "storage.migrations = $FIX/migrations" "storage.seed = $FIX/seed.sql" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema" \
    "placement.pgd.dsn = $TENANCY_TEST_PG" "placement.pgd.mode = database"
tn_cli init > /dev/null || fatal "tenancy init failed"
# Each tenant gets a display name in the registry and a marker in its own storage, both
# random: an answer is right only when it is exactly line i of $T/expect, which nothing
# derived from the Host (the slug) can produce.
: > "$T/expect"
for i in $(seq 1 30); do
    p=sqlite
    [ "$i" -gt 10 ] && p=pgs
    [ "$i" -gt 20 ] && p=pgd
    name="Store $RANDOM$RANDOM"
    marker="m-$i-$RANDOM$RANDOM"
    tn_cli tenant create "t$i" --placement "$p" --name "$name" > "$T/create.out" 2>&1 ||
        fatal "creating t$i on $p failed: $(cat "$T/create.out")"
    s=$(sqlite3 "$T/state/control.db" "SELECT storage FROM tenants WHERE slug = 't$i'")
    sql="UPDATE marker SET tenant = '$marker' WHERE id = 1"
    case $p in
    sqlite) sqlite3 "$s" "$sql" ;;
    pgs) psql -X -q -v ON_ERROR_STOP=1 -c "SET search_path = \"$s\"; $sql" ;;
    pgd) psql -X -q -v ON_ERROR_STOP=1 -d "$s" -c "$sql" ;;
    esac || fatal "setting t$i's marker in $s failed"
    echo "{\"tenant\":\"t$i\",\"data\":\"$marker\",\"name\":\"$name\"}" >> "$T/expect"
done
want() { sed -n "${1}p" "$T/expect"; }
tn_start
nginx_start

for i in 1 11 21; do
    assert_eq "$(http / "t$i.localhost")" "$(want "$i")" "t$i reads its own storage and name"
done

"$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -d 4 -H 't%d.localhost' -N 30 \
    --expect-file "$T/expect" --exact \
    2> "$T/hammer1.log" || fail "random tenants over three placements: $(tail -1 "$T/hammer1.log")"
log "hammer: $(tail -1 "$T/hammer1.log")"

# Then the misbehaving requests, one tenant per placement, each followed by checks that
# every worker reads its own tenant and the victim's data is intact.
check_all() {   # check_all WHAT [502S]: 40 random requests, every answer right
    # After a timeout kill nginx may already have sent the next request on the kept connection
    # of the worker being killed (it retries nothing): at most $2 such 502s, none wrong.
    local may=${2:-0}
    "$HELPERS/hammer" -p "$NGINX_PORT" -c 4 -n 40 -H 't%d.localhost' -N 30 \
        --expect-file "$T/expect" --exact --expect-status any --json "$T/check.json" 2> "$T/check.log"
    local n200 n502
    n200=$("$HELPERS/json_check" .status.200 < "$T/check.json" 2> /dev/null)
    n502=$("$HELPERS/json_check" .status.502 < "$T/check.json" 2> /dev/null)
    if grep -q 'wrong 0; unexpected 0;' "$T/check.log" && grep -q 'errors connect=0 reset=0 timeout=0 parse=0' "$T/check.log" &&
        [ $((${n200:-0} + ${n502:-0})) = 40 ] && [ "${n502:-0}" -le "$may" ]; then
        log "ok: $1 (${n502:-0} x 502)"
    else
        fail "$1: $(tail -1 "$T/check.log")"
    fi
}
for i in 2 12 22; do
    http /fail "t$i.localhost" > /dev/null
    assert_eq "$(last_status)" 500 "t$i: a handler error mid-transaction answers 500"
    check_all "after t$i's failed transaction"
    assert_eq "$(http / "t$i.localhost")" "$(want "$i")" "t$i's write was rolled back"

    http '/sleep?ms=6000' "t$i.localhost" > /dev/null
    assert_eq "$(last_status)" 504 "t$i: request_timeout kills mid-transaction"
    check_all "after t$i's timeout kill" 1
    assert_eq "$(http / "t$i.localhost")" "$(want "$i")" "t$i's write died with its worker"

    curl -s -m 1 -o /dev/null --limit-rate 10k -H "Host: t$i.localhost" "http://127.0.0.1:$NGINX_PORT/big"
    sleep 0.5
    check_all "after t$i's client went away mid-response"
    assert_eq "$(http / "t$i.localhost")" "$(want "$i")" "t$i's write rolled back after the abort"
done
status=$(http /_tenancy/status)
assert_contains "$status" '"timeouts":3' "three timeout kills counted"
