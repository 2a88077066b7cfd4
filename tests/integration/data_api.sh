#!/bin/bash
# data_api.sh — the data API app (apps/data) through nginx and tenancyd, on SQLite files and
# on PostgreSQL schemas, with two tenants per backend (A and B):
#
#   tables (create, an index, the changelog), insert, bulk insert, upsert, select with
#   filters, order, a range and an exact count, full-text search (also after an update),
#   update, delete (refused without a filter), CSV out (formulas neutralised) and in,
#   POST /query (and its refusal of writes and of internal objects), stats, OpenAPI;
#
#   bad input, each with its status and code, after which the row count is unchanged;
#
#   B never sees A's tables or rows: A's rows carry a random marker only A's storage holds.
#
# The app runs as the root `app` here. Keys come from `tenancy key create`.
. "$(dirname "$0")/lib.sh"
need curl nginx sqlite3 psql "$TENANCY_CLI"
DATA_SO=${DATA_SO:-$(cd "$top_builddir" && pwd)/apps/.libs/data.so}
eval "$("$top_srcdir/tests/pg.sh" start)" || hard_error "cannot start PostgreSQL (tests/pg.sh)"
PG_DIR=$TENANCY_TEST_PG_DIR
trap 'rc=$?; "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT

mkdir -p "$T/state"
tn_conf "app = $DATA_SO" "pm.max_children = 2" "request_timeout = 10s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema"
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
for x in la:sqlite lb:sqlite sa:pgs sb:pgs; do
    tn_cli tenant create "${x%%:*}" --placement "${x#*:}" > "$T/create.out" 2>&1 ||
        fatal "creating ${x%%:*}: $(cat "$T/create.out")"
done

# make_key SLUG [--read-only]: a new key of SLUG's (the second line `tenancy key create`
# prints, tenancy(1))
make_key() {
    tn_cli key create "$@" > "$T/key.out" 2> "$T/key.err" || fatal "key create $*: $(cat "$T/key.err")"
    sed -n 2p "$T/key.out" | awk '{print $NF}'
}
declare -A KEY RO
for s in la lb sa sb; do
    KEY[$s]=$(make_key "$s")
    RO[$s]=$(make_key "$s" --read-only)
done
tn_start
nginx_start
U=http://127.0.0.1:$NGINX_PORT

# api METHOD TENANT PATH [curl args...]: status on stdout; body in $T/body, headers in $T/hdr.
# The tenant's own key unless the args give an Authorization header (KEYAS=slug picks another's).
api() {
    local m=$1 t=$2 p=$3
    shift 3
    local key=${KEY[${KEYAS:-$t}]:-}
    curl -s -m 30 -X "$m" -H "Host: $t.localhost" -H "Authorization: Bearer $key" \
        -D "$T/hdr" -o "$T/body" -w '%{http_code}' "$@" "$U$p"
}
body() { cat "$T/body"; }
header() { grep -i "^$1:" "$T/hdr" | head -1 | sed 's/^[^:]*: *//; s/\r$//'; }
json() { printf '%s' "$1"; }
# expect WHAT STATUS CODE: the last answer had STATUS and, when given, the error CODE
expect() {
    local what=$1 st=$2 code=${3:-} got
    got=$(cat "$T/.st")
    assert_eq "$got" "$st" "$what: status"
    if [ -n "$code" ]; then
        assert_contains "$(body)" "\"code\":\"$code\"" "$what: code $code"
    fi
}
call() { api "$@" > "$T/.st"; }
count_rows() {   # count_rows TENANT: rows of todos, through the API
    call GET "$1" "/todos?select=id" -H 'Prefer: count=exact'
    header Content-Range | sed 's|.*/||'
}

scenario() {
    local A=$1 B=$2 tag=$3
    local MARK="m$RANDOM$RANDOM"
    log "---- $tag: $A and $B"

    # ---- tables
    call POST "$A" /tables -H 'Content-Type: application/json' --data-binary \
        '{"name":"todos","columns":[{"name":"title","type":"text","not_null":true},
          {"name":"done","type":"boolean","default":false},{"name":"prio","type":"integer"},
          {"name":"meta","type":"json"}],"search":["title"]}'
    expect "$tag create table" 201
    assert_contains "$(body)" '"search":["title"]' "$tag the table has its search column"
    call GET "$B" /tables
    expect "$tag B lists its tables" 200
    assert_eq "$(body)" '{"tables":[]}' "$tag B sees none of A's tables"
    call GET "$B" /todos
    expect "$tag B reads A's table" 404 unknown_table

    # ---- insert, bulk, select
    call POST "$A" "/todos?select=title,done,prio,meta" -H 'Content-Type: application/json' \
        -H 'Prefer: return=representation' \
        --data-binary "{\"title\":\"alpha $MARK\",\"prio\":1,\"meta\":{\"k\":[1,2]}}"
    expect "$tag insert one" 201
    assert_eq "$(body)" "[{\"title\":\"alpha $MARK\",\"done\":false,\"prio\":1,\"meta\":{\"k\":[1,2]}}]" \
        "$tag the inserted row comes back with its default"
    call POST "$A" /todos -H 'Content-Type: application/json' --data-binary \
        '[{"title":"beta","done":true,"prio":2},{"title":"gamma","done":false,"prio":3},{"title":"delta","done":false,"prio":null}]'
    expect "$tag bulk insert" 201
    assert_eq "$(body)" "" "$tag bulk insert answers nothing (return=minimal)"
    call GET "$A" "/todos?select=title,prio&done=eq.false&order=prio.desc.nullslast&limit=2" \
        -H 'Prefer: count=exact'
    expect "$tag select with a range" 206
    assert_eq "$(body)" "[{\"title\":\"gamma\",\"prio\":3},{\"title\":\"alpha $MARK\",\"prio\":1}]" \
        "$tag filters, order and limit"
    assert_eq "$(header Content-Range)" "0-1/3" "$tag Content-Range"
    call GET "$A" "/todos?select=title&order=title" -H 'Range: 1-2'
    expect "$tag Range header" 200
    assert_eq "$(body)" '[{"title":"beta"},{"title":"delta"}]' "$tag Range: 1-2"
    call GET "$A" "/todos?select=title,done&prio=eq.2" -H 'Accept: application/vnd.pgrst.object+json'
    expect "$tag single object" 200
    assert_eq "$(body)" '{"title":"beta","done":true}' "$tag single object body"

    # ---- upsert
    call POST "$A" /tables/todos/indexes -H 'Content-Type: application/json' \
        --data-binary '{"columns":["title"],"unique":true}'
    expect "$tag unique index" 201
    call POST "$A" "/todos?on_conflict=title&select=title,prio" -H 'Content-Type: application/json' \
        -H 'Prefer: resolution=merge-duplicates, return=representation' \
        --data-binary '[{"title":"beta","prio":9},{"title":"epsilon","prio":5}]'
    expect "$tag upsert" 201
    assert_eq "$(body)" '[{"title":"beta","prio":9},{"title":"epsilon","prio":5}]' "$tag upsert rows"
    call POST "$A" "/todos?on_conflict=title" -H 'Content-Type: application/json' \
        -H 'Prefer: resolution=ignore-duplicates' --data-binary '{"title":"beta","prio":1}'
    expect "$tag upsert ignoring duplicates" 201
    assert_eq "$(count_rows "$A")" 5 "$tag five rows after the upserts"

    # ---- search, update, delete
    call GET "$A" "/todos?select=title&search=$MARK"
    assert_eq "$(body)" "[{\"title\":\"alpha $MARK\"}]" "$tag search finds A's marker"
    call GET "$B" "/todos?search=$MARK"
    expect "$tag B searches A's table" 404 unknown_table
    call PATCH "$A" "/todos?title=eq.gamma&select=title,done" -H 'Content-Type: application/json' \
        -H 'Prefer: return=representation' --data-binary '{"done":true,"title":"omega"}'
    expect "$tag update" 200
    assert_eq "$(body)" '[{"title":"omega","done":true}]' "$tag updated rows"
    call GET "$A" "/todos?select=title&search=omega"
    assert_eq "$(body)" '[{"title":"omega"}]' "$tag search sees the update"
    call GET "$A" "/todos?select=title&search=gamma"
    assert_eq "$(body)" '[]' "$tag search forgot the old title"
    call DELETE "$A" /todos
    expect "$tag delete without a filter" 400 filter_required
    call PATCH "$A" /todos -H 'Content-Type: application/json' --data-binary '{"prio":0}'
    expect "$tag update without a filter" 400 filter_required
    assert_eq "$(count_rows "$A")" 5 "$tag nothing deleted without a filter"
    call DELETE "$A" "/todos?title=eq.delta"
    expect "$tag delete" 204
    assert_eq "$(count_rows "$A")" 4 "$tag one row deleted"
    call GET "$A" "/todos?select=title&search=delta"
    assert_eq "$(body)" '[]' "$tag search forgot the deleted row"

    # ---- CSV
    call POST "$A" /todos -H 'Content-Type: text/csv' --data-binary $'title,prio\r\n"=HYPERLINK(""x"")",7\r\n"a, b",\r\n'
    expect "$tag CSV in" 201
    call GET "$A" "/todos?select=title,prio&prio=gte.5&order=prio" -H 'Accept: text/csv'
    expect "$tag CSV out" 200
    assert_eq "$(body)" $'title,prio\r\nepsilon,5\r\n"\'=HYPERLINK(""x"")",7\r\nbeta,9\r' \
        "$tag CSV body (formula neutralised)"
    assert_eq "$(count_rows "$A")" 6 "$tag CSV rows in"

    # ---- POST /query
    call POST "$A" /query -H 'Content-Type: application/json' \
        --data-binary '{"sql":"SELECT title FROM todos WHERE prio = $1","params":[9]}'
    expect "$tag query" 200
    assert_eq "$(body)" '{"columns":["title"],"rows":[["beta"]],"truncated":false}' "$tag query body"
    call POST "$A" /query -H 'Content-Type: application/json' --data-binary '{"sql":"DELETE FROM todos"}'
    expect "$tag query refuses a write" 403 read_only
    call POST "$A" /query -H 'Content-Type: application/json' \
        --data-binary '{"sql":"SELECT * FROM _data_changelog"}'
    expect "$tag query refuses internal objects" 403 internal_object
    call POST "$A" /query -H 'Content-Type: application/json' \
        --data-binary '{"sql":"SELECT * FROM tenancy_migrations"}'
    expect "$tag query refuses the host's table" 403 internal_object
    assert_eq "$(count_rows "$A")" 6 "$tag nothing written by /query"

    # ---- stats, OpenAPI, changelog
    call GET "$A" /stats
    expect "$tag stats" 200
    assert_contains "$(body)" '"tables":[{"name":"todos","rows":6' "$tag stats counts A's rows"
    call GET "$A" /openapi.json
    expect "$tag openapi" 200
    assert_contains "$(body)" '"/todos":{"get"' "$tag openapi has A's table"
    call GET "$B" /
    assert_contains "$(body)" '"paths":{}' "$tag B's openapi has no table"
    call GET "$A" /changelog
    assert_eq "$(body | grep -o '"action":"[a-z_]*"' | tr '\n' ' ')" \
        '"action":"create_table" "action":"create_index" ' "$tag changelog"
    call GET "$A" "/changelog?since=1"
    assert_eq "$(body | grep -o '"action":"[a-z_]*"' | tr '\n' ' ')" '"action":"create_index" ' \
        "$tag changelog since"

    # ---- bad input: status, code, nothing written
    call POST "$A" /todos -H 'Content-Type: application/json' --data-binary '{"title": "x",'
    expect "$tag malformed JSON" 400 invalid_json
    assert_contains "$(body)" '"details":"line 1, column' "$tag malformed JSON: where"
    call POST "$A" /todos -H 'Content-Type: application/json' --data-binary '{"title":"x","prio":"high"}'
    expect "$tag wrong type" 422 invalid_value
    call POST "$A" /todos -H 'Content-Type: application/json' \
        --data-binary '[{"title":"ok1"},{"title":"ok2","done":"yes"}]'
    expect "$tag bulk with one bad row" 422 invalid_value
    call POST "$A" /todos -H 'Content-Type: application/json' --data-binary '{"title":"x","nope":1}'
    expect "$tag unknown column" 400 unknown_column
    call POST "$A" /todos -H 'Content-Type: text/plain' --data-binary 'title=x'
    expect "$tag wrong content type" 415 unsupported_media_type
    call POST "$A" /todos -H 'Content-Type: application/json' --data-binary '[{"title":"new1"},{"title":"beta"}]'
    expect "$tag duplicate in a bulk insert" 409 conflict
    call POST "$A" /todos -H 'Content-Type: application/json' --data-binary '{"prio":1}'
    expect "$tag missing NOT NULL column" 400 not_null_violation
    call POST "$A" /todos -H 'Content-Type: text/csv' --data-binary $'title,prio\r\nx,1,2\r\n'
    expect "$tag bad CSV" 400 invalid_csv
    call GET "$A" "/todos?title=zz.1"
    expect "$tag bad filter" 400
    call GET "$A" "/todos?select=id" -H 'Accept: application/vnd.pgrst.object+json'
    expect "$tag single object of many" 406 not_single_object
    call GET "$A" "/todos?offset=100" -H 'Prefer: count=exact'
    expect "$tag range past the end" 416 range_not_satisfiable
    call POST "$A" /tables -H 'Content-Type: application/json' --data-binary '{"name":"_secret"}'
    expect "$tag internal table name" 400 bad_name
    call POST "$A" /tables -H 'Content-Type: application/json' --data-binary \
        '{"name":"t2","columns":[{"name":"n","type":"integer","default":"1; DROP TABLE todos"}]}'
    expect "$tag default of the wrong type" 400 bad_default
    call PUT "$A" /todos
    expect "$tag wrong method" 405 method_not_allowed
    assert_eq "$(count_rows "$A")" 6 "$tag no bad request wrote a row"

    # ---- keys
    KEY[none]=""
    KEYAS=none call GET "$A" /todos
    expect "$tag no key" 401 unauthorized
    assert_contains "$(cat "$T/hdr")" "WWW-Authenticate: Bearer" "$tag 401 names the scheme"
    KEYAS=$B call GET "$A" /todos
    expect "$tag B's key at A" 401 unauthorized
    KEY[ro]=${RO[$A]}
    KEYAS=ro call POST "$A" /todos -H 'Content-Type: application/json' --data-binary '{"title":"ro"}'
    expect "$tag read-only key writes" 403 read_only_key
    KEYAS=ro call GET "$A" "/todos?select=title&prio=eq.9"
    expect "$tag read-only key reads" 200
    assert_eq "$(count_rows "$A")" 6 "$tag no key wrote a row"

    # ---- B is untouched; A's marker is only in A
    call GET "$B" /stats
    assert_contains "$(body)" '"tables":[]' "$tag B's stats show no table"
    call POST "$B" /query -H 'Content-Type: application/json' --data-binary '{"sql":"SELECT * FROM todos"}'
    expect "$tag B's query of A's table" 400 sql_error
}

scenario la lb sqlite
scenario sa sb postgres

# A central request (no tenant) is not the data API's.
code=$(curl -s -m 10 -H 'Host: localhost' -o "$T/body" -w '%{http_code}' "$U/tables")
assert_eq "$code" 404 "a central request"
