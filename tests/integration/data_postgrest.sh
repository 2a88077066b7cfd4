#!/bin/bash
# data_postgrest.sh — the data API driven by PostgREST's own client (@supabase/postgrest-js,
# tests/postgrest/), mounted at /api beside another app at the root, as an operator runs it:
# one tenancyd, one nginx location, two apps. On SQLite files and on PostgreSQL schemas.
#
# Each backend gets tenants a and b (a<backend> in the Host is what the client sends), a
# table todos (title text unique, done boolean, prio integer) in each, a key for each, and a
# row "only in b" in b's. The client then selects with filters, order, range and count,
# inserts, upserts, updates and deletes in a, and checks that b sees only its own row and
# that a's key is refused at b's host. The root app (hello) still answers at the root.
. "$(dirname "$0")/lib.sh"
need curl nginx node psql "$TENANCY_CLI"
DATA_SO=${DATA_SO:-$(cd "$top_builddir" && pwd)/apps/.libs/data.so}
CLIENT_DIR=$top_srcdir/tests/postgrest
[ -d "$CLIENT_DIR/node_modules/@supabase/postgrest-js" ] ||
    hard_error "PostgREST's JS client is not installed: run ./autogen.sh --deps (npm ci in tests/postgrest)"
pg_cluster

mkdir -p "$T/state"
tn_conf "pm.max_children = 2" "request_timeout = 10s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "mount.data.prefix = /api" "mount.data.app = $DATA_SO" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema"
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
for x in a:sqlite b:sqlite pa:pgs pb:pgs; do
    tn_cli tenant create "${x%%:*}" --placement "${x#*:}" > "$T/create.out" 2>&1 ||
        fatal "creating ${x%%:*}: $(cat "$T/create.out")"
done
declare -A KEY
for s in a b pa pb; do
    KEY[$s]=$(tn_cli key create "$s" | sed -n 2p) || fatal "key create $s failed"
    [[ ${KEY[$s]} =~ ^tnk_ ]] || fatal "no key for $s"
done
tn_start
nginx_start
U=http://127.0.0.1:$NGINX_PORT

# api TENANT METHOD PATH [curl args]: the status; the body in $T/body
api() {
    local t=$1 m=$2 p=$3
    shift 3
    curl -s -m 20 -X "$m" -H "Host: $t.localhost" -H "Authorization: Bearer ${KEY[$t]}" \
        -H 'Content-Type: application/json' -o "$T/body" -w '%{http_code}' "$@" "$U/api$p"
}

for pair in a:b pa:pb; do
    A=${pair%%:*} B=${pair#*:}
    log "---- tenants $A and $B"
    for t in "$A" "$B"; do
        st=$(api "$t" POST /tables --data-binary '{"name":"todos","columns":[
            {"name":"title","type":"text","not_null":true,"unique":true},
            {"name":"done","type":"boolean","not_null":true,"default":false},
            {"name":"prio","type":"integer"}]}')
        assert_eq "$st" 201 "$t: the table todos is created ($(cat "$T/body"))"
    done
    st=$(api "$B" POST /todos --data-binary '{"title":"only in b","done":false,"prio":5}')
    assert_eq "$st" 201 "$B: its own row"

    # The operator's app still answers at the root, the data API only under /api.
    assert_eq "$(curl -s -m 5 -H "Host: $A.localhost" "$U/")" "hello from $A.localhost" \
        "$A: the root app answers at /"
    st=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Host: $A.localhost" "$U/api/todos")
    assert_eq "$st" 401 "$A: /api without a key is refused by the data API"

    # The client sends Host a.localhost etc.: give it the right tenant names.
    out=$(cd "$CLIENT_DIR" && TENANT_A=$A TENANT_B=$B timeout 60 node postgrest.test.js \
        "$NGINX_PORT" /api "${KEY[$A]}" "${KEY[$B]}" 2>&1)
    rc=$?
    log "$out"
    assert_eq "$rc" 0 "$A/$B: PostgREST's client passes every step"
    assert_contains "$out" "all steps passed" "$A/$B: the client ran to its end"

    # What the client wrote is in A's storage, and B's is untouched (through the API and
    # through the backend itself).
    st=$(api "$A" GET '/todos?select=title,done,prio&order=title')
    assert_eq "$(cat "$T/body")" \
        '[{"title":"alpha of a","done":true,"prio":9},{"title":"beta of a","done":true,"prio":2},{"title":"gamma of a","done":true,"prio":3}]' \
        "$A: the rows the client left"
    st=$(api "$B" GET '/todos?select=title')
    assert_eq "$(cat "$T/body")" '[{"title":"only in b"}]' "$B: only its own row"
done
n=$(sqlite3 "$T/state/tenants/a.db" 'SELECT count(*) FROM todos')
assert_eq "$n" 3 "a's SQLite file holds the three rows"
n=$(psql -X -qtA "${TENANCY_TEST_PG#postgres:}" -c 'SELECT count(*) FROM t_pb.todos')
assert_eq "$n" 1 "pb's schema holds its one row"
assert_nginx_clean "data API through PostgREST's client"
exit "$FAILED"
