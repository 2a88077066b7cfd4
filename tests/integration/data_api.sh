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
#   B never sees A's tables or rows: A's rows carry a random marker only A's storage holds;
#
#   export and import (io_scenario): A's dump (JSON; on SQLite also the .db, read back with
#   the sqlite3 CLI) imported into B replaces B's tables, row for row, with search working;
#   every bad import (shape, names, types, values, media type, size, a read-only key, a
#   database refusal half-way) changes nothing in B; A's export holds nothing of B's or of
#   the host's; and across backends: a SQLite tenant's JSON dump into a PostgreSQL one.
#
# The app runs as the root `app` here. Keys come from `tenancy key create`.
. "$(dirname "$0")/lib.sh"
need curl nginx sqlite3 psql "$TENANCY_CLI"
DATA_SO=${DATA_SO:-$(cd "$top_builddir" && pwd)/apps/.libs/data.so}
pg_cluster

mkdir -p "$T/state"
tn_conf "app = $DATA_SO" "pm.max_children = 2" "request_timeout = 10s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" "max_body = 256k" \
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
    # a read-only key is refused by the method: PATCH and DELETE write as POST does
    KEYAS=ro call PATCH "$A" "/todos?id=gt.0" -H 'Content-Type: application/json' --data-binary '{"prio":-4242}'
    expect "$tag read-only key updates" 403 read_only_key
    KEYAS=ro call DELETE "$A" "/todos?id=gt.0"
    expect "$tag read-only key deletes" 403 read_only_key
    assert_eq "$(count_rows "$A")" 6 "$tag no key wrote a row"
    call GET "$A" "/todos?select=id&prio=eq.-4242" -H 'Prefer: count=exact'
    assert_eq "$(header Content-Range | sed 's|.*/||')" 0 "$tag no key updated a row"

    # ---- B is untouched; A's marker is only in A
    call GET "$B" /stats
    assert_contains "$(body)" '"tables":[]' "$tag B's stats show no table"
    call POST "$B" /query -H 'Content-Type: application/json' --data-binary '{"sql":"SELECT * FROM todos"}'
    expect "$tag B's query of A's table" 400 sql_error
}


# ---- export and import ---------------------------------------------------------------------

# rows_of TENANT: every column of todos, in id order (the exact comparison of two tenants)
rows_of() { call GET "$1" "/todos?order=id"; body; }
# b_unchanged TAG: B still has only its own table and row (a refused import wrote nothing)
b_unchanged() {
    call GET "$B" "/oldstuff?select=note"
    assert_eq "$(body)" "[{\"note\":\"b-only $BMARK\"}]" "$1: B's old row is still there"
    call GET "$B" /todos
    expect "$1: B has no todos" 404 unknown_table
}
# bad_import TAG STATUS CODE BODY [curl args]: a JSON import refused with STATUS and CODE
bad_import() {
    local what=$1 st=$2 code=$3 data=$4
    shift 4
    call PUT "$B" /import -H "Content-Type: ${CT:-application/json}" --data-binary "$data" "$@"
    expect "$tag bad import: $what" "$st" "$code"
    b_unchanged "$tag bad import: $what"
}
dump() {   # dump TABLES-JSON: a dump document around the tables given
    printf '{"format":"tenancy-data-dump","version":1,"tables":%s}' "$1"
}

io_scenario() {
    A=$1 B=$2 tag="$3 io"
    local IOMARK="io$RANDOM$RANDOM"
    BMARK="b$RANDOM$RANDOM"
    log "---- $tag: $A and $B"
    call POST "$A" /todos -H 'Content-Type: application/json' \
        --data-binary "{\"title\":\"io $IOMARK\",\"prio\":42,\"meta\":[\"x\"]}"
    expect "$tag A's marked row" 201
    if [ "$3" = sqlite ]; then   # a host table in A's file, as the host's migrations keep one
        local afile
        afile=$(find "$T/state" -name "$A.db" | head -1)
        [ -n "$afile" ] || fail "$tag no file $A.db under the state dir"
        sqlite3 "$afile" "CREATE TABLE tenancy_hostonly (secret TEXT);
            INSERT INTO tenancy_hostonly VALUES ('host-$IOMARK')" || fail "$tag host table"
    fi
    call POST "$B" /tables -H 'Content-Type: application/json' \
        --data-binary '{"name":"oldstuff","columns":[{"name":"note","type":"text"}]}'
    expect "$tag B's own table" 201
    call POST "$B" /oldstuff -H 'Content-Type: application/json' --data-binary "{\"note\":\"b-only $BMARK\"}"
    expect "$tag B's own row" 201

    # A's JSON dump: A's tables and rows, nothing of B's or the host's
    call GET "$A" /export -H 'Accept: application/json'
    expect "$tag export as JSON" 200
    cp "$T/body" "$T/a.json"
    assert_contains "$(header Content-Type)" application/json "$tag JSON dump type"
    assert_eq "$(header Content-Disposition)" "attachment; filename=\"$A.json\"" "$tag JSON dump file name"
    assert_contains "$(cat "$T/a.json")" '{"format":"tenancy-data-dump","version":1,"tables":[{"name":"todos","columns":[{"name":"title","type":"text","not_null":true,"unique":false},{"name":"done","type":"boolean","not_null":false,"unique":false,"default":false}' \
        "$tag the dump's columns with their default"
    assert_contains "$(cat "$T/a.json")" '"search":["title"],"indexes":[{"name":"todos_title_idx","unique":true,"columns":["title"]}]' \
        "$tag the dump's search column and index"
    assert_contains "$(cat "$T/a.json")" "\"io $IOMARK\",false,42,[\"x\"]," "$tag A's marked row in the dump"
    assert_contains "$(cat "$T/a.json")" '"changelog":[{"id":1,' "$tag the dump's changelog"
    grep -q "$BMARK" "$T/a.json" && fail "$tag A's export holds B's row"
    grep -q oldstuff "$T/a.json" && fail "$tag A's export holds B's table"
    grep -qi tenancy_ "$T/a.json" && fail "$tag A's export names a host table"
    grep -q "host-$IOMARK" "$T/a.json" && fail "$tag A's export holds a host table's row"
    KEY[ro]=${RO[$A]}
    KEYAS=ro call GET "$A" /export -H 'Accept: application/json'
    expect "$tag a read-only key exports" 200
    call GET "$A" /export -H 'Accept: text/csv'
    expect "$tag export as CSV" 406 not_acceptable
    call POST "$A" /export
    expect "$tag POST /export" 405 method_not_allowed
    tn_cli settings set "$A" data.export_max_bytes 1024 > /dev/null || fail "$tag settings set"
    call GET "$A" /export -H 'Accept: application/json'
    expect "$tag export over data.export_max_bytes" 413 too_large
    tn_cli settings unset "$A" data.export_max_bytes > /dev/null || fail "$tag settings unset"

    # bad imports: each refused with its code, B unchanged
    local good_cols='[{"name":"t","type":"text"}]'
    bad_import "malformed JSON" 400 invalid_json '{"format": "tenancy-data-dump",'
    bad_import "wrong format" 400 bad_dump '{"format":"pg_dump","version":1,"tables":[]}'
    bad_import "wrong version" 400 bad_dump '{"format":"tenancy-data-dump","version":2,"tables":[]}'
    bad_import "not a dump" 400 bad_dump '[1,2]'
    bad_import "internal table name" 400 bad_name "$(dump "[{\"name\":\"_secret\",\"columns\":$good_cols}]")"
    bad_import "host table name" 400 bad_name "$(dump "[{\"name\":\"tenancy_x\",\"columns\":$good_cols}]")"
    bad_import "reserved word" 400 bad_name "$(dump "[{\"name\":\"export\",\"columns\":$good_cols}]")"
    bad_import "bad column name" 400 bad_name "$(dump '[{"name":"n","columns":[{"name":"a b","type":"text"}]}]')"
    bad_import "reserved column" 400 reserved_column "$(dump '[{"name":"n","columns":[{"name":"id","type":"integer"}]}]')"
    bad_import "unknown type" 400 unknown_type "$(dump '[{"name":"n","columns":[{"name":"m","type":"money"}]}]')"
    bad_import "bad default" 400 bad_default "$(dump '[{"name":"n","columns":[{"name":"m","type":"integer","default":"1; DROP TABLE oldstuff"}]}]')"
    bad_import "search on a non-text column" 400 bad_search "$(dump '[{"name":"n","columns":[{"name":"m","type":"integer"}],"search":["m"]}]')"
    bad_import "wrong row length" 400 bad_dump "$(dump "[{\"name\":\"n\",\"columns\":$good_cols,\"rows\":[[1,\"a\"]]}]")"
    bad_import "value of the wrong type" 422 invalid_value "$(dump "[{\"name\":\"n\",\"columns\":[{\"name\":\"p\",\"type\":\"integer\"}],\"rows\":[[1,\"high\",null,null]]}]")"
    bad_import "bad timestamp" 422 invalid_value "$(dump "[{\"name\":\"n\",\"columns\":$good_cols,\"rows\":[[1,\"a\",\"yesterday\",null]]}]")"
    bad_import "duplicate table" 400 bad_table "$(dump "[{\"name\":\"n\",\"columns\":$good_cols},{\"name\":\"n\",\"columns\":$good_cols}]")"
    # passes every check but the database's: the first table is created, then the second's
    # duplicate id is refused, and the whole transaction with it
    bad_import "duplicate ids (refused half-way)" 409 conflict "$(dump "[{\"name\":\"n1\",\"columns\":$good_cols,\"rows\":[[1,\"a\",null,null]]},{\"name\":\"n2\",\"columns\":$good_cols,\"rows\":[[1,\"a\",null,null],[1,\"b\",null,null]]}]")"
    call GET "$B" /n1
    expect "$tag the half-way table is gone" 404 unknown_table
    CT=text/plain bad_import "wrong content type" 415 unsupported_media_type "@$T/a.json"
    head -c 300000 /dev/zero | tr '\0' ' ' > "$T/big.json"
    bad_import "body over max_body" 413 body_too_large "@$T/big.json"
    KEY[ro]=${RO[$B]}
    KEYAS=ro call PUT "$B" /import -H 'Content-Type: application/json' --data-binary "@$T/a.json"
    expect "$tag import with a read-only key" 403 read_only_key
    b_unchanged "$tag import with a read-only key"
    call GET "$B" /import
    expect "$tag GET /import" 405 method_not_allowed

    # A's dump into B: B's tables replaced by A's, row for row
    call PUT "$B" /import -H 'Content-Type: application/json' --data-binary "@$T/a.json"
    expect "$tag import" 200
    assert_eq "$(body)" '{"tables":1,"rows":7}' "$tag import counts"
    call GET "$B" /oldstuff
    expect "$tag B's old table is gone" 404 unknown_table
    assert_eq "$(rows_of "$B")" "$(rows_of "$A")" "$tag B's rows are A's, every column"
    assert_contains "$(rows_of "$B")" "io $IOMARK" "$tag A's marked row is in B"
    call GET "$B" "/todos?select=title&search=$IOMARK"
    assert_eq "$(body)" "[{\"title\":\"io $IOMARK\"}]" "$tag search works after the import"
    local maxid
    maxid=$(rows_of "$A" | grep -o '"id":[0-9]*' | tail -1 | cut -d: -f2)
    call POST "$B" "/todos?select=id" -H 'Content-Type: application/json' \
        -H 'Prefer: return=representation' --data-binary '{"title":"after import"}'
    expect "$tag insert after the import" 201
    assert_eq "$(body)" "[{\"id\":$((maxid + 1))}]" "$tag new ids follow the imported ones"
    # after the insert: a refused one still takes a number of PostgreSQL's sequence
    call POST "$B" /todos -H 'Content-Type: application/json' --data-binary '{"title":"beta"}'
    expect "$tag the unique index came along" 409 conflict
    call GET "$B" "/todos?select=title&search=after"
    assert_eq "$(body)" '[{"title":"after import"}]' "$tag search sees rows written after"
    call GET "$B" /changelog
    assert_contains "$(body)" '"action":"import","table":null,"detail":{' "$tag the import is in B's changelog"
    assert_contains "$(body)" '"dropped":["oldstuff"]' "$tag the changelog names the dropped table"

    [ "$3" = sqlite ] || return 0
    # ---- SQLite: the .db file
    call GET "$A" /export
    expect "$tag export as .db" 200
    cp "$T/body" "$T/a.db"
    assert_eq "$(header Content-Type)" application/vnd.sqlite3 "$tag .db type"
    assert_eq "$(header Content-Disposition)" "attachment; filename=\"$A.db\"" "$tag .db file name"
    assert_eq "$(sqlite3 "$T/a.db" 'PRAGMA integrity_check')" ok "$tag the .db opens with sqlite3"
    assert_eq "$(sqlite3 "$T/a.db" 'SELECT count(*) FROM todos')" 7 "$tag the .db has A's rows"
    assert_eq "$(sqlite3 "$T/a.db" 'SELECT prio FROM todos WHERE title = '"'io $IOMARK'")" 42 "$tag the .db has A's marked row"
    assert_eq "$(sqlite3 "$T/a.db" "SELECT group_concat(name, ' ') FROM sqlite_schema WHERE name LIKE 'tenancy%' OR name LIKE 'oldstuff'")" "" \
        "$tag the .db has no host table"
    grep -q "host-$IOMARK" "$T/a.db" && fail "$tag the .db keeps the host table's content"
    assert_eq "$(sqlite3 "$T/a.db" "SELECT title FROM _fts_todos WHERE _fts_todos MATCH '$IOMARK'")" "io $IOMARK" \
        "$tag the .db's search index"
    # bad files change nothing
    call PUT "$B" /import -H 'Content-Type: application/vnd.sqlite3' --data-binary 'not a database at all, not at all, no'
    expect "$tag import of a non-database" 400 bad_database
    rm -f "$T/bad.db"
    sqlite3 "$T/bad.db" 'CREATE TABLE good (v TEXT); CREATE TABLE bad ("a b" TEXT)'
    call PUT "$B" /import -H 'Content-Type: application/vnd.sqlite3' --data-binary "@$T/bad.db"
    expect "$tag import of a .db with a bad column name" 400 bad_name
    call GET "$B" /good
    expect "$tag nothing of the bad .db was written" 404 unknown_table
    assert_eq "$(count_rows "$B")" 8 "$tag B's rows are untouched by the bad .db"
    # A's .db into B: a foreign table of the file joins, the file's host table does not
    cp "$T/a.db" "$T/a2.db"
    sqlite3 "$T/a2.db" "CREATE TABLE tenancy_secret (x); INSERT INTO tenancy_secret VALUES ('s');
        CREATE TABLE plain (name VARCHAR(20), n BIGINT); INSERT INTO plain VALUES ('p1', 5)"
    call PUT "$B" /import -H 'Content-Type: application/vnd.sqlite3' --data-binary "@$T/a2.db"
    expect "$tag import of a .db" 200
    assert_eq "$(body)" '{"tables":2,"rows":8}' "$tag .db import counts"
    assert_eq "$(rows_of "$B")" "$(rows_of "$A")" "$tag B's rows are A's again, every column"
    call GET "$B" "/plain?select=id,name,n"
    assert_eq "$(body)" '[{"id":1,"name":"p1","n":5}]' "$tag a table of the file without the API's columns"
    call GET "$B" "/todos?select=title&search=$IOMARK"
    assert_eq "$(body)" "[{\"title\":\"io $IOMARK\"}]" "$tag search works after the .db import"
    local bfile
    bfile=$(find "$T/state" -name "$B.db" | head -1)
    [ -n "$bfile" ] || fail "$tag no file $B.db under the state dir"
    assert_eq "$(sqlite3 "$bfile" "SELECT count(*) FROM sqlite_schema WHERE name = 'tenancy_secret'")" 0 \
        "$tag the file's host table was not imported"
}

# ddl_elsewhere TENANT: another connection (the sqlite3 CLI on the tenant's file) changes a
# table's schema while the workers hold its catalog cached; the reads after it must answer
# by the new schema. A worker whose connection has not begun a transaction since takes its
# cached catalog on the data version alone (apps/data/catcache.c): the column added must not
# be refused as unknown (an answer decided on the catalog alone), and a column whose type
# changed under a statement that still compiles must be written as its new type (the
# catalog confirmed after the statement), in each of the two workers.
ddl_elsewhere() {
    local t=$1 tag="sqlite ddl elsewhere" file i
    file=$(find "$T/state" -name "$t.db" | head -1)
    [ -n "$file" ] || { fail "$tag: no file $t.db under the state dir"; return; }
    call POST "$t" /tables -H 'Content-Type: application/json' \
        --data-binary '{"name":"ddlx","columns":[{"name":"v","type":"integer"}]}'
    expect "$tag: table" 201
    call POST "$t" /ddlx -H 'Content-Type: application/json' --data-binary '{"v":1}'
    expect "$tag: row" 201
    for i in 1 2 3 4 5 6 7 8; do call GET "$t" "/ddlx?select=v"; done
    assert_eq "$(body)" '[{"v":1}]' "$tag: before"
    sqlite3 "$file" "ALTER TABLE ddlx ADD COLUMN w TEXT; UPDATE ddlx SET w = 'new'" ||
        fail "$tag: ALTER TABLE by sqlite3"
    for i in 1 2 3 4; do
        call GET "$t" "/ddlx?select=v,w"
        expect "$tag: a column added elsewhere ($i)" 200
        assert_eq "$(body)" '[{"v":1,"w":"new"}]' "$tag: the added column's value ($i)"
    done
    for i in 1 2 3 4 5 6 7 8; do call GET "$t" "/ddlx?select=v"; done
    sqlite3 "$file" "ALTER TABLE ddlx RENAME COLUMN v TO v_old; ALTER TABLE ddlx ADD COLUMN v TEXT;
        UPDATE ddlx SET v = '4' || v_old" || fail "$tag: the type change by sqlite3"
    for i in 1 2 3 4; do
        call GET "$t" "/ddlx?select=v"
        expect "$tag: a type changed elsewhere ($i)" 200
        assert_eq "$(body)" '[{"v":"41"}]' "$tag: the value by its new type, text ($i)"
    done
}

scenario la lb sqlite
io_scenario la lb sqlite
ddl_elsewhere la
cp "$T/a.json" "$T/la.json"
scenario sa sb postgres
io_scenario sa sb postgres

# ---- across backends: a SQLite tenant's JSON dump into a PostgreSQL tenant
call PUT sb /import -H 'Content-Type: application/json' --data-binary "@$T/la.json"
expect "sqlite to postgres import" 200
assert_eq "$(body)" '{"tables":1,"rows":7}' "sqlite to postgres counts"
sel="/todos?select=id,title,done,prio,meta&order=id"
call GET la "$sel"; a_rows=$(body)
call GET sb "$sel"; b_rows=$(body)
assert_eq "$b_rows" "$a_rows" "sqlite to postgres: the same rows"
call GET sb "/todos?select=title&search=omega"
assert_eq "$(body)" '[{"title":"omega"}]' "sqlite to postgres: search works"
call GET sb /export -H 'Accept: application/vnd.sqlite3'
expect "a .db from postgres" 406 not_acceptable
call PUT sb /import -H 'Content-Type: application/vnd.sqlite3' --data-binary "@$T/a.db"
expect "a .db into postgres" 415 unsupported_media_type

# A central request (no tenant) is not the data API's.
code=$(curl -s -m 10 -H 'Host: localhost' -o "$T/body" -w '%{http_code}' "$U/tables")
assert_eq "$code" 404 "a central request"
