#!/bin/bash
# admin_http.sh — the admin panel over HTTP (curl through a real nginx), against tenants on
# SQLite and on a PostgreSQL schema placement (tests/pg.sh):
#   - every route refuses without a session (pages: 303 to /login; /api/: 401);
#   - login: wrong password 401, the session cookie HttpOnly + SameSite=Strict, sessions good
#     on every worker, logout ends the session on the server;
#   - CSRF: a POST without the token, with a wrong one, or from another origin is 403 and
#     changes nothing;
#   - login: `next` never leads off the panel (control characters, //, \, absolute URLs);
#   - the explorer reads only the tenant's own schema, qualified: a tenant's table named
#     pg_tables is its own, not the catalog's view of every schema;
#   - the SQL console: 55+ write attempts (DML, DDL, WITH ... DELETE, ATTACH, VACUUM INTO,
#     PRAGMA writable_schema, COPY ... TO PROGRAM, set_config, pg_terminate_backend,
#     lo_create, dblink, CALL, several statements, ...) each refused on BOTH backends, with
#     the data, the schema, sequences, roles and the file system unchanged afterwards;
#     reads, the row cap (cut by the database: a 50-million-row query returns at once), the
#     timeout, CSV and JSON;
#   - the SQLite console is an allow list: fts3_tokenizer (the address leak and the overwrite
#     that crash a worker), load_extension, functions not on the list, ATTACH, VACUUM INTO,
#     writable PRAGMAs and transactions are refused (403, SQLite's message), while counts,
#     FTS4 MATCH, JSON, window and table-valued PRAGMA functions work and no worker dies;
#   - XSS payloads in a tenant name, table names, column names and cell values come out
#     escaped;
#   - actions: suspend and resume seen by the tenant's own host at once; create (in process),
#     migrate and move as jobs a job worker runs (pm.jobs = 1) whose page shows their progress
#     from the job until they end,
#     delete with the slug typed and a restore; each audited; API keys listed on the tenant's
#     page (prefix, never the token) and revoked by a confirmed POST, audited;
#   - the panel is never a tenant: admin.localhost is the panel even with a tenant `admin`,
#     and a tenant's host never serves the panel;
#   - a login POST from another origin (Origin, or Referer without Origin) is 403;
#   - a session ends with its password: after `tenancy admin passwd` (which leaves the
#     panel's tables alone) the panel refuses and deletes the user's old sessions, and a
#     password file edited by hand (the user removed) refuses them at once;
#   - login throttling per client address, holding across workers; parallel failures are
#     each counted (run last: it locks this test's address out).
. "$(dirname "$0")/lib.sh"
need curl nginx sqlite3 psql "$TENANCY_CLI"
eval "$("$top_srcdir/tests/pg.sh" start)" || hard_error "cannot start PostgreSQL (tests/pg.sh)"
PG_DIR=$TENANCY_TEST_PG_DIR
trap 'rc=$?; [ -n "${SLEEPER:-}" ] && kill "$SLEEPER" 2>/dev/null; "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT

PASSWORD='correct horse battery'
mkdir -p "$T/state"
tn_conf "app = $DEMO_SO" "pm.max_children = 3" "pm.jobs = 1" "jobs.poll = 200ms" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" \
    "placement.pgs.dsn = $TENANCY_TEST_PG" "placement.pgs.mode = schema" \
    "admin.host = admin.localhost" "admin.cli = $(cd "$top_builddir" && pwd)/tenancy/tenancy" \
    "admin.row_cap = 100" \
    "admin.query_timeout = 1s" "storage.migrations = $top_srcdir/apps/demo/migrations"
tn_cli init > /dev/null || fatal "tenancy init failed"
printf '%s\n' "$PASSWORD" | tn_cli admin passwd --stdin > /dev/null || fatal "admin passwd failed"
grep -q '^admin:\$y\$' "$T/state/admin.passwd" || fail "the password file holds a yescrypt hash"
tn_cli tenant create lite --name "Lite Co" > /dev/null || fatal "create lite"
tn_cli tenant create pgt --name "PG Co" --placement pgs > /dev/null || fatal "create pgt"
tn_cli tenant create other --name "Other Co" --placement pgs > /dev/null || fatal "create other"
tn_cli tenant create xss --name '<script>alert("name")</script>' > /dev/null || fatal "create xss"
tn_cli tenant create admin --name "A tenant called admin" > /dev/null || fatal "create admin"


# Data: the same table on both backends (120 rows), and hostile names and values.
LITE_DB=$T/state/tenants/lite.db
sqlite3 "$LITE_DB" "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL DEFAULT 0);
  CREATE INDEX items_name ON items(name);
  CREATE TABLE notes (id INTEGER PRIMARY KEY, item_id INTEGER REFERENCES items(id), body TEXT);
  WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 120)
  INSERT INTO items (name, price) SELECT 'item ' || x, x * 1.5 FROM c;" || fatal "lite data"
psql -q -v ON_ERROR_STOP=1 > /dev/null <<'SQL' || fatal "pgt data"
-- made as each tenant's own role, as its app and migrations make them: its role owns them
SET ROLE t_pgt;
CREATE TABLE t_pgt.items (id serial PRIMARY KEY, name text NOT NULL, price numeric DEFAULT 0);
CREATE INDEX items_name ON t_pgt.items(name);
CREATE TABLE t_pgt.notes (id serial PRIMARY KEY, item_id int REFERENCES t_pgt.items(id), body text);
INSERT INTO t_pgt.items (name, price) SELECT 'item ' || x, x * 1.5 FROM generate_series(1, 120) x;
SET ROLE t_other;
CREATE TABLE t_other.secrets (v text);
INSERT INTO t_other.secrets VALUES ('other tenant secret');
SET ROLE t_pgt;
-- a tenant's table named like a catalog view: unqualified, it would be pg_catalog's
CREATE TABLE t_pgt.pg_tables (schemaname text, tablename text);
INSERT INTO t_pgt.pg_tables VALUES ('mine', 'only row');
SQL
sqlite3 "$T/state/tenants/xss.db" "CREATE TABLE \"<script>alert('table')</script>\" (v TEXT);
  CREATE TABLE things (id INTEGER PRIMARY KEY, \"\"\"><img src=x onerror=alert('col')>\" TEXT, v TEXT);
  INSERT INTO things (v) VALUES ('<img src=x onerror=alert(\"cell\")>'), ('\"><script>alert(1)</script>');" ||
    fatal "xss data"
tn_start
nginx_start

U=http://127.0.0.1:$NGINX_PORT
AH='Host: admin.localhost'
JAR=$T/jar

# req METHOD PATH [curl args...]: status code on stdout, body in $T/body, headers in $T/head.
req() {
    local m=$1 p=$2
    shift 2
    curl -s -m 20 -X "$m" -H "$AH" -b "$JAR" -c "$JAR" -D "$T/head" -o "$T/body" \
        -w '%{http_code}' "$@" "$U$p"
}
body() { cat "$T/body"; }
header() { tr -d '\r' < "$T/head" | awk -v h="$(echo "$1" | tr 'A-Z' 'a-z')" -F': ' 'tolower($1)==h {print $2}'; }
csrf() { req GET / > /dev/null; grep -o 'name="csrf" value="[^"]*"' "$T/body" | head -1 | sed 's/.*value="//; s/"$//'; }

# ---- every route refuses without a session ----------------------------------------------------
rm -f "$JAR"
for p in / /host /audit /new /t/lite /t/lite/sql '/t/lite/table?name=items' \
    '/t/lite/table?name=items&view=structure' '/t/lite/row?name=items&key=1' \
    '/t/lite/confirm?action=suspend' /t/nosuch /nowhere; do
    code=$(req GET "$p")
    assert_eq "$code" 303 "GET $p without a session: redirect"
    case $(header Location) in /login*) ;; *) fail "GET $p redirects to the login, not '$(header Location)'" ;; esac
done
for p in /t/lite/action /t/lite/sql /new /logout; do
    code=$(req POST "$p" --data 'action=suspend&confirm=yes&sql=DELETE+FROM+items')
    assert_eq "$code" 303 "POST $p without a session: redirect to the login"
done
for p in /api/status /api/tenants; do
    assert_eq "$(req GET "$p")" 401 "GET $p without a session: 401"
done
code=$(req GET /assets/admin.css)
assert_eq "$code" 200 "the style sheet is public (no data in it)"
assert_contains "$(header Content-Security-Policy)" "script-src 'self'" "a CSP on every answer"
case $(header Content-Security-Policy) in *unsafe-inline*) fail "the CSP allows unsafe-inline" ;; *) log "ok: no unsafe-inline" ;; esac

# ---- login ---------------------------------------------------------------------------------
login() {   # login PASSWORD -> status
    req GET /login > /dev/null
    local nonce
    nonce=$(grep -o 'name="nonce" value="[^"]*"' "$T/body" | sed 's/.*value="//; s/"$//')
    req POST /login --data-urlencode "nonce=$nonce" --data-urlencode "user=admin" \
        --data-urlencode "password=$1" --data-urlencode "next=/host"
}
assert_eq "$(login 'wrong password')" 401 "a wrong password: 401"
code=$(req POST /login --data-urlencode "user=admin" --data-urlencode "password=$PASSWORD")
assert_eq "$code" 403 "a login without the login form's token: 403"
req GET /login > /dev/null
nonce=$(grep -o 'name="nonce" value="[^"]*"' "$T/body" | sed 's/.*value="//; s/"$//')
code=$(req POST /login -H 'Origin: http://evil.example' --data-urlencode "nonce=$nonce" \
    --data-urlencode "user=admin" --data-urlencode "password=$PASSWORD")
assert_eq "$code" 403 "a login POST from another origin: 403"
code=$(req POST /login -H 'Referer: http://evil.example/admin.localhost/login' \
    --data-urlencode "nonce=$nonce" --data-urlencode "user=admin" --data-urlencode "password=$PASSWORD")
assert_eq "$code" 403 "a login POST with another site's Referer and no Origin: 403"
assert_contains "$(grep '"action":"login"' "$T/state/admin-audit.log" | grep 'origin' | tail -1)" \
    '"result":"refused"' "a login from another origin audited as refused"
assert_eq "$(login "$PASSWORD")" 303 "the right password: 303"
assert_eq "$(header Location)" "/host" "back to where the login was asked for"
cookie=$(tr -d '\r' < "$T/head" | grep -i '^set-cookie: tn_admin=' | head -1)
assert_contains "$cookie" "HttpOnly" "session cookie HttpOnly"
assert_contains "$cookie" "SameSite=Strict" "session cookie SameSite=Strict"
sid=$(echo "$cookie" | sed 's/^[^=]*=//; s/;.*//')
sqlite3 "$T/state/control.db" "SELECT count(*) FROM admin_sessions WHERE id_hash = '$sid'" | grep -qx 0 &&
    log "ok: the registry holds no session id (only its hash)" || fail "a session id is stored as is"
MAINJAR=$JAR JAR=$T/jar.next
for evil in $'/\t/evil.example' $'/\n/evil.example' '//evil.example' '/\evil.example' 'http://evil.example'; do
    rm -f "$JAR"
    req GET /login > /dev/null
    nonce=$(grep -o 'name="nonce" value="[^"]*"' "$T/body" | sed 's/.*value="//; s/"$//')
    req POST /login --data-urlencode "nonce=$nonce" --data-urlencode "user=admin" \
        --data-urlencode "password=$PASSWORD" --data-urlencode "next=$evil" > /dev/null
    assert_eq "$(header Location)" "/" "a login never sends the browser off the panel (next=$(printf %q "$evil"))"
done
JAR=$MAINJAR
bad=0
for i in $(seq 1 12); do [ "$(req GET /)" = 200 ] || bad=$((bad + 1)); done
assert_eq "$bad" 0 "the session holds on every worker (12 requests, 3 workers)"
assert_contains "$(body)" 'id="fleet"' "the fleet page"
for p in /host /audit /new /t/lite /t/lite/sql '/t/lite/table?name=items' \
    '/t/lite/table?name=items&view=structure' '/t/lite/row?name=items&key=1' /t/pgt \
    '/t/pgt/table?name=items' '/t/pgt/table?name=items&view=structure' '/t/pgt/row?name=items&key=7'; do
    assert_eq "$(req GET "$p")" 200 "GET $p with a session"
done
assert_eq "$(req GET /api/status)" 200 "GET /api/status with a session"
assert_contains "$(body)" '"workers":[' "the host status through the panel"
assert_eq "$(req GET '/api/tenants?q=lit')" 200 "GET /api/tenants"
assert_contains "$(body)" '"slug":"lite"' "search finds lite"

# ---- the fleet: search, filters, keyset pages -----------------------------------------------------
req GET '/?q=co&state=active' > /dev/null
assert_contains "$(body)" '/t/pgt' "fleet search and state filter"
req GET '/?placement=pgs' > /dev/null
n=$(grep -o 'data-href="/t/[a-z0-9-]*"' "$T/body" | sort -u | tr '\n' ' ')
assert_eq "$n" 'data-href="/t/other" data-href="/t/pgt" ' "placement filter"

# ---- the explorer reads only the tenant's own schema -----------------------------------------------
req GET /t/pgt > /dev/null
assert_contains "$(body)" '>items</a></td><td class="num">120<' "pgt: items with 120 rows"
case $(body) in *secrets*) fail "pgt's page shows another schema's table" ;; *) log "ok: only pgt's own tables" ;; esac
assert_eq "$(req GET '/t/pgt/table?name=secrets')" 404 "another schema's table is not pgt's"
# A tenant's table called pg_tables is that table, not the catalog's view of every schema.
assert_eq "$(req GET '/t/pgt/table?name=pg_tables')" 200 "pgt: its own table pg_tables"
assert_contains "$(body)" '>only row<' "pgt: pg_tables shows the tenant's row"
case $(body) in *secrets* | *t_other* | *pg_catalog*) fail "pgt: pg_tables showed the catalog (another schema's table)" ;;
    *) log "ok: pgt: pg_tables is read from pgt's schema, not pg_catalog" ;; esac
assert_eq "$(req GET '/t/pgt/row?name=pg_tables&offset=0')" 200 "pgt: a row of pg_tables"
case $(body) in *secrets* | *t_other* | *pg_catalog*) fail "pgt: the row view read the catalog" ;;
    *) assert_contains "$(body)" 'only row' "pgt: the row view reads the tenant's pg_tables" ;; esac
req GET /t/pgt > /dev/null
assert_contains "$(body)" '>pg_tables</a></td><td class="num">1<' "pgt: pg_tables counted in pgt's schema (1 row)"
req GET '/t/pgt/table?name=items&view=structure' > /dev/null
assert_contains "$(body)" 'nextval(' "pg: a column default"
assert_contains "$(body)" 'CREATE INDEX items_name' "pg: an index"
req GET '/t/pgt/table?name=notes&view=structure' > /dev/null
assert_contains "$(body)" 'FOREIGN KEY (item_id) REFERENCES items(id)' "pg: a foreign key"
req GET '/t/lite/table?name=notes&view=structure' > /dev/null
assert_contains "$(body)" 'REFERENCES items' "sqlite: a foreign key"
req GET '/t/lite/table?name=items' > /dev/null
assert_contains "$(body)" 'paged by key' "keyset paging where there is a one-column key"
next=$(grep -o 'id="next-page" href="[^"]*"' "$T/body" | sed 's/.*href="//; s/"$//; s/&amp;/\&/g')
assert_contains "$next" "after=50" "the next page starts after key 50"
req GET "$next" > /dev/null
assert_contains "$(body)" '>item 51<' "page 2 starts at 51"
req GET '/t/lite/table?name=items&sort=name&dir=desc&f1=item+9' > /dev/null
assert_contains "$(body)" '>item 99<' "sort and a column filter"

# ---- CSRF -----------------------------------------------------------------------------------------
TOKEN=$(csrf)
[ -n "$TOKEN" ] || fatal "no CSRF token on the page"
assert_eq "$(req POST /t/lite/action --data 'action=suspend&confirm=yes')" 403 "POST without the CSRF token: 403"
assert_eq "$(req POST /t/lite/action --data 'action=suspend&confirm=yes&csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')" 403 \
    "POST with a wrong CSRF token: 403"
assert_eq "$(req POST /t/lite/action -H 'Origin: http://evil.example' --data "action=suspend&confirm=yes&csrf=$TOKEN")" 403 \
    "POST from another origin: 403"
assert_eq "$(req POST /t/lite/sql --data 'sql=SELECT+1')" 403 "the console without the CSRF token: 403"
assert_eq "$(http / lite.localhost > /dev/null; last_status)" 200 "nothing was suspended"

# ---- the console: reads --------------------------------------------------------------------------------
sql() {   # sql TENANT SQL [format] -> status; body in $T/body
    req POST "/t/$1/sql" --data-urlencode "csrf=$TOKEN" --data-urlencode "sql=$2" \
        --data-urlencode "format=${3:-html}"
}
for t in lite pgt; do
    assert_eq "$(sql $t 'SELECT count(*) AS n, sum(price) AS s FROM items')" 200 "$t: a read"
    assert_contains "$(body)" '<td>120</td>' "$t: 120 items"
    code=$(sql $t 'SELECT a.id FROM items a, items b')
    assert_eq "$code" 200 "$t: a big read"
    assert_contains "$(body)" 'stopped at admin.row_cap' "$t: the row cap"
    [ "$(grep -o '<tr>' "$T/body" | wc -l)" = 101 ] && log "ok: $t: 100 rows shown" || fail "$t: row cap: $(grep -o '<tr>' "$T/body" | wc -l) rows"
    # 50 million rows: the database stops at the cap (a cursor in PostgreSQL), well within
    # admin.query_timeout (1 s here), instead of producing them all first.
    code=$(sql $t 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000000) SELECT x FROM c')
    assert_eq "$code" 200 "$t: a huge result is cut at the row cap by the database"
    assert_contains "$(body)" 'stopped at admin.row_cap' "$t: said so"
    assert_eq "$(sql $t 'SELECT id, name FROM items WHERE id <= 3 ORDER BY id' csv)" 200 "$t: CSV export"
    assert_contains "$(header Content-Disposition)" "attachment" "$t: CSV as an attachment"
    assert_eq "$(body | tr -d '\r')" "$(printf 'id,name\n1,item 1\n2,item 2\n3,item 3')" "$t: CSV content"
    assert_eq "$(sql $t "SELECT id, name, NULL AS z FROM items WHERE id = 1" json)" 200 "$t: JSON export"
    assert_eq "$(body)" "{\"tenant\":\"$t\",\"columns\":[\"id\",\"name\",\"z\"],\"rows\":[[\"1\",\"item 1\",null]],\"truncated\":false}" "$t: JSON content"
    sql $t "SELECT '=cmd|'' /C calc''!A0' AS f" csv > /dev/null
    assert_contains "$(body)" "\"'=cmd" "$t: a formula is neutralised in CSV"
    # A column's name is the operator's to choose (an alias), so the header row is a cell
    # like any other: a formula there is neutralised too.
    sql $t 'SELECT 1 AS "=1+2", 2 AS "@SUM(A1)"' csv > /dev/null
    assert_eq "$(body | head -1 | tr -d '\r')" "\"'=1+2\",\"'@SUM(A1)\"" "$t: a formula in a column name is neutralised in CSV"
done
code=$(sql lite 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c')
assert_eq "$code" 400 "lite: a runaway query stops at admin.query_timeout"
assert_contains "$(body)" 'Timed out' "lite: said to time out"
code=$(sql pgt 'SELECT pg_sleep(5)')
assert_eq "$code" 400 "pgt: statement_timeout"
assert_contains "$(body)" 'Timed out' "pgt: said to time out"
sql pgt 'SELECT v FROM secrets' > /dev/null
assert_contains "$(body)" 'result-error' "pgt: another schema's table is not on the search path"

# ---- the console: writes, all refused on both backends ----------------------------------------------
MARK=$T/program-ran
WRITES=(
    "INSERT INTO items (name) VALUES ('x')"
    "UPDATE items SET name = 'pwned'"
    "DELETE FROM items"
    "DELETE FROM items WHERE id = 1 RETURNING *"
    "DROP TABLE items"
    "CREATE TABLE evil (x int)"
    "ALTER TABLE items ADD COLUMN evil int"
    "CREATE INDEX evil_idx ON items (name)"
    "CREATE VIEW evil_view AS SELECT 1 AS x"
    "TRUNCATE items"
    "REPLACE INTO items (id, name) VALUES (1, 'x')"
    "WITH d AS (DELETE FROM items RETURNING id) SELECT count(*) FROM d"
    "WITH x AS (SELECT 1) DELETE FROM items"
    "WITH x AS (SELECT 1) UPDATE items SET name = 'x'"
    "INSERT INTO items (name) SELECT name FROM items"
    "MERGE INTO items USING (SELECT 1 AS id) s ON items.id = s.id WHEN MATCHED THEN DELETE"
    "ATTACH DATABASE '$T/evil.db' AS evil"
    "PRAGMA writable_schema = ON"
    "PRAGMA journal_mode = DELETE"
    "PRAGMA user_version = 42"
    "VACUUM"
    "REINDEX items"
    "COPY (SELECT 1) TO PROGRAM 'touch $MARK'"
    "COPY items FROM PROGRAM 'echo 1'"
    "COPY items TO '$T/copied.csv'"
    "SELECT set_config('transaction_read_only', 'off', true)"
    "SET TRANSACTION READ WRITE"
    "SELECT set_config('role', 'postgres', true), pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'postgres' AND pid <> pg_backend_pid()"
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'postgres' AND pid <> pg_backend_pid()"
    "SELECT pg_read_file('/etc/passwd')"
    "SELECT lo_import('/etc/hostname')"
    "SELECT nextval('items_id_seq')"
    "SELECT * FROM items FOR UPDATE"
    "LOCK TABLE items IN ACCESS EXCLUSIVE MODE"
    "CREATE TEMP TABLE tmp AS SELECT 1 AS x"
    "DO \$\$BEGIN DELETE FROM items; END\$\$"
    "EXPLAIN ANALYZE DELETE FROM items"
    "GRANT SELECT ON items TO PUBLIC"
    "SELECT 1; DELETE FROM items"
    "SELECT 1; DROP TABLE items"
    "BEGIN; DELETE FROM items; COMMIT"
    "COMMIT; DELETE FROM items"
    "BEGIN EXCLUSIVE"
    "VACUUM INTO '$T/vacuumed.db'"
    "CALL no_such_procedure()"
    "SELECT dblink_exec('dbname=postgres', 'DELETE FROM t_pgt.items')"
    "CREATE EXTENSION dblink"
    "SELECT setval('items_id_seq', 1000)"
    "SELECT lo_create(0)"
    "COMMENT ON TABLE items IS 'pwned'"
    "CREATE ROLE evil"
    "ALTER SYSTEM SET work_mem = '1MB'"
    "SELECT pg_reload_conf()"
    "PRAGMA query_only = 0"
    "PRAGMA foreign_keys = OFF"
    "PRAGMA optimize"
    "SELECT load_extension('$T/evil.so')"
    "DETACH DATABASE main"
)
# PostgreSQL runs these in a READ ONLY transaction (ANALYZE skips tables the console role does
# not own; a notification is sent only at commit): they are let through, and the rollback
# leaves nothing behind. SQLite refuses them. Counted apart; the fingerprints cover them too.
INERT=("ANALYZE" "ANALYZE items" "NOTIFY evil" "SELECT pg_notify('evil', 'x')")
# A superuser session for pg_terminate_backend to aim at.
psql -q -c "SELECT pg_sleep(120)" > /dev/null 2>&1 &
SLEEPER=$!
sleep 0.3
fingerprint_lite() { sqlite3 "$LITE_DB" "SELECT count(*), sum(price), group_concat(name) FROM items; SELECT group_concat(name || ':' || sql) FROM sqlite_master; PRAGMA user_version; PRAGMA journal_mode;" | md5sum; }
fingerprint_pg() { psql -At -c "SELECT count(*), sum(price), string_agg(name, ',' ORDER BY id) FROM t_pgt.items; SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('t_pgt', 'public'); SELECT has_table_privilege('public', 't_pgt.items', 'SELECT'); SELECT last_value, is_called FROM t_pgt.items_id_seq; SELECT count(*) FROM pg_largeobject_metadata; SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles; SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension; SELECT obj_description('t_pgt.items'::regclass, 'pg_class'); SELECT string_agg(schemaname || tablename, ',') FROM t_pgt.pg_tables;" | md5sum; }
before_lite=$(fingerprint_lite)
before_pg=$(fingerprint_pg)
refused=0
total=0
for t in lite pgt; do
    for w in "${WRITES[@]}"; do
        total=$((total + 1))
        code=$(sql $t "$w")
        if [ "$code" != 200 ] && grep -q 'id="result-error"' "$T/body"; then
            refused=$((refused + 1))
            log "ok: $t refused ($code $(sed -n 's/.*id="result-error"[^>]*><b>\([A-Za-z ]*\)<\/b>.*/\1/p' "$T/body" | head -1)): $w"
        else
            fail "$t: NOT refused (status $code): $w"
        fi
    done
done
for w in "${INERT[@]}"; do
    code=$(sql lite "$w")
    [ "$code" != 200 ] && grep -q 'id="result-error"' "$T/body" && log "ok: lite refused ($code): $w" ||
        fail "lite: NOT refused (status $code): $w"
    sql pgt "$w" > /dev/null
done
kill "$SLEEPER" 2>/dev/null
SLEEPER=
assert_eq "$refused" "$total" "write attempts refused (${#WRITES[@]} statements x 2 backends)"
assert_eq "$(fingerprint_lite)" "$before_lite" "lite: data and schema unchanged"
assert_eq "$(fingerprint_pg)" "$before_pg" "pgt: data, schema and grants unchanged"
[ ! -e "$MARK" ] && log "ok: no program ran" || fail "COPY ... TO PROGRAM ran a program"
[ ! -e "$T/evil.db" ] && log "ok: nothing was attached" || fail "ATTACH created a file"
[ ! -e "$T/copied.csv" ] && log "ok: no server file written" || fail "COPY TO a file worked"
[ ! -e "$T/vacuumed.db" ] && log "ok: VACUUM INTO wrote no file" || fail "VACUUM INTO wrote a copy"

# The console refuses to run as a role that could act outside the database.
# It logs in as the tenant's own role; a role that was given too much is refused.
code=$(sql pgt "SELECT current_user, session_user")
assert_eq "$code" 200 "the console runs"
assert_contains "$(body)" '<td>t_pgt</td><td>t_pgt</td>' "as the tenant's own role, logged in as it"
psql -q -c "ALTER ROLE t_pgt SUPERUSER" > /dev/null
code=$(sql pgt "SELECT 1")
assert_eq "$code" 403 "the console will not run as a superuser"
assert_contains "$(body)" 'tenancy check' "and says where to look"
psql -q -c "ALTER ROLE t_pgt NOSUPERUSER" > /dev/null

# ---- the console: SQLite's allow list ----------------------------------------------------------------
# fts3_tokenizer('simple') hands out the address of a tokenizer inside libsqlite3 and
# fts3_tokenizer('simple', X) overwrites it; an FTS4 table then calls through it (the worker
# dies of SIGSEGV, nginx answers 502). The console lets through only SELECT, reads, the
# PRAGMAs that read and a list of built-in functions: each statement below is refused when it
# is prepared, 403 with SQLite's own message quoted. The overwrites here put the pointer's
# own value back, so that even a console without the fix would not crash on them (the leak
# alone shows the hole); a worker that died anyway is caught by the log check at the end.
sqlite3 "$LITE_DB" "CREATE VIRTUAL TABLE docs USING fts4(body);
  INSERT INTO docs (body) VALUES ('hello tokenizer');
  CREATE VIEW leak AS SELECT hex(fts3_tokenizer('simple')) AS p;" || fatal "lite: an FTS4 table"
crashes_before=$(tn_log_count 'died from signal')
refused_lite() {   # refused_lite SQL NEEDLE: 403, NEEDLE in the message, no blob in the page
    code=$(sql lite "$1")
    assert_eq "$code" 403 "lite: refused: $1"
    assert_contains "$(sed -n 's/.*id="result-error"[^>]*>\(.*\)<\/div>.*/\1/p' "$T/body")" "$2" \
        "lite: the database's message for: $1"
    grep -q 'id="result"' "$T/body" && fail "lite: a result was shown for: $1" || true
}
FN='not authorized to use function'
refused_lite "SELECT fts3_tokenizer('simple')" "$FN: fts3_tokenizer"
refused_lite "SELECT hex(fts3_tokenizer('simple'))" "$FN: fts3_tokenizer"
refused_lite "SELECT typeof(fts3_tokenizer('simple')) FROM docs WHERE docs MATCH 'hello'" "$FN: fts3_tokenizer"
refused_lite "SELECT fts3_tokenizer('simple', fts3_tokenizer('simple'))" "$FN: fts3_tokenizer"
refused_lite "SELECT load_extension('$T/evil.so')" "$FN: load_extension"
refused_lite "SELECT sqlite_source_id()" "$FN: sqlite_source_id"   # built in, not on the list
refused_lite "SELECT randomblob(1000000000)" "$FN: randomblob"
refused_lite "ATTACH DATABASE '$T/attached.db' AS a" "not authorized"
refused_lite "PRAGMA writable_schema = 1" "not authorized"
refused_lite "PRAGMA trusted_schema = 1" "not authorized"
refused_lite "BEGIN" "not authorized"
refused_lite "SAVEPOINT s" "not authorized"
# VACUUM INTO attaches its target only when it runs: the console refuses it before, as a write.
refused_lite "VACUUM INTO '$T/vacuumed2.db'" "would write"
[ ! -e "$T/vacuumed2.db" ] && [ ! -e "$T/attached.db" ] && log "ok: no file was written" ||
    fail "VACUUM INTO or ATTACH wrote a file"
# A function SQLite does not know: its own message (an error, 400, before any rule applies).
code=$(sql lite "SELECT no_such_function(1)")
assert_eq "$code" 400 "lite: an unknown function is an error"
assert_contains "$(body)" 'no such function: no_such_function' "lite: with SQLite's message"
# A view written into the file that calls fts3_tokenizer: refused too, never a blob.
code=$(sql lite "SELECT p FROM leak")
[ "$code" != 200 ] && grep -q 'id="result-error"' "$T/body" && grep -q 'fts3_tokenizer' "$T/body" &&
    log "ok: lite: a view calling fts3_tokenizer refused ($code)" ||
    fail "lite: a view calling fts3_tokenizer was not refused (status $code)"
# What a read needs still works, and the FTS table still uses its own tokenizer.
assert_eq "$(sql lite 'SELECT count(*) FROM items')" 200 "lite: a count of its own table"
assert_contains "$(body)" '<td>120</td>' "lite: 120 items"
assert_eq "$(sql lite "SELECT count(*) FROM docs WHERE docs MATCH 'tokenizer'")" 200 "lite: an FTS4 MATCH"
assert_contains "$(body)" '<td>1</td>' "lite: the FTS4 table finds its row"
assert_eq "$(sql lite "SELECT snippet(docs) FROM docs WHERE docs MATCH 'hello'")" 200 "lite: snippet()"
assert_eq "$(sql lite "SELECT upper(name), length(name), json_extract('{\"a\":2}', '\$.a') * price, strftime('%Y', 'now'), row_number() OVER (ORDER BY id) FROM items WHERE id = 2")" 200 "lite: functions on the list"
assert_contains "$(body)" '<td>ITEM 2</td>' "lite: their results"
assert_eq "$(sql lite "SELECT name, type FROM pragma_table_info('items') ORDER BY cid")" 200 "lite: a table-valued PRAGMA function"
assert_contains "$(body)" '<td>price</td>' "lite: its rows"
assert_eq "$(sql lite 'PRAGMA table_info(items)')" 200 "lite: a PRAGMA that reads"
assert_eq "$(sql lite 'SELECT value FROM json_each(json_array(1, 2, 3))')" 200 "lite: json_each"
assert_eq "$(tn_log_count 'died from signal')" "$crashes_before" "no worker died"
kill -0 "$TN_PID" 2>/dev/null && log "ok: tenancyd is alive" || fail "tenancyd died"

# ---- XSS payloads come out inert ---------------------------------------------------------------------
xss_check() {   # xss_check WHAT: no live tag of ours in $T/body
    if grep -q -e '<script>alert' -e '<img src=x' -e "onerror=alert('col')>" "$T/body"; then
        fail "$1: a payload came out as HTML: $(grep -o -e '<script>alert[^<]*' -e '<img src=x[^>]*>' "$T/body" | head -2)"
    else
        log "ok: $1: escaped"
    fi
}
req GET '/?q=xss' > /dev/null
assert_contains "$(body)" '&lt;script&gt;alert(&quot;name&quot;)&lt;/script&gt;' "a tenant name is escaped"
xss_check "fleet"
req GET '/api/tenants?q=xss' > /dev/null
assert_eq "$(header Content-Type)" "application/json" "the fleet API is JSON (never rendered as HTML)"
assert_eq "$(header X-Content-Type-Options)" "nosniff" "and says nosniff"
assert_contains "$(body)" '&lt;script&gt;alert(&quot;name&quot;)' "its HTML rows are escaped"
req GET /t/xss > /dev/null
assert_contains "$(body)" "&lt;script&gt;alert(&#39;table&#39;)&lt;/script&gt;" "a table name is escaped"
xss_check "tenant page"
req GET '/t/xss/table?name=things' > /dev/null
assert_contains "$(body)" '&lt;img src=x onerror=alert(&quot;cell&quot;)&gt;' "a cell value is escaped"
xss_check "table browser"
req GET '/t/xss/table?name=things&view=structure' > /dev/null
xss_check "structure (a hostile column name)"
req GET "/t/xss/table?name=%3Cscript%3Ealert('table')%3C%2Fscript%3E" > /dev/null
xss_check "a table whose name cannot be quoted"
sql xss 'SELECT * FROM things' > /dev/null
xss_check "console result"
sql xss "SELECT '<script>alert(1)</script>' AS \"<b>x</b>\"" > /dev/null
xss_check "console result with a hostile column name"

# ---- actions: suspend and resume, audited ----------------------------------------------------------------
assert_eq "$(req GET '/t/lite/confirm?action=suspend')" 200 "the confirmation page"
assert_eq "$(http / lite.localhost > /dev/null; last_status)" 200 "a GET changes nothing"
code=$(req POST /t/lite/action --data "action=suspend&csrf=$TOKEN")
assert_eq "$code" 400 "an action without its confirmation: refused"
code=$(req POST /t/lite/action --data "action=suspend&confirm=yes&csrf=$TOKEN")
assert_eq "$code" 303 "suspend"
assert_eq "$(http / lite.localhost > /dev/null; last_status)" 403 "the tenant's host answers 403 at once"
code=$(req POST /t/lite/action --data "action=resume&confirm=yes&csrf=$TOKEN")
assert_eq "$code" 303 "resume"
assert_eq "$(http / lite.localhost > /dev/null; last_status)" 200 "served again"
code=$(req POST /t/lite/action --data "action=delete&confirm=yes&confirm_slug=wrong&csrf=$TOKEN")
assert_eq "$code" 409 "delete needs the slug typed"
assert_eq "$(http / lite.localhost > /dev/null; last_status)" 200 "not deleted"
code=$(req POST /t/other/action --data "action=domain-add&confirm=yes&domain=shop.other.example&csrf=$TOKEN")
assert_eq "$code" 303 "add a domain"
code=$(req POST /t/lite/action --data "action=domain-remove&confirm=yes&domain=shop.other.example&csrf=$TOKEN")
assert_eq "$code" 409 "a tenant cannot remove another's domain"

# API keys: listed on the tenant's page (prefix, flags, dates; never the token), revoked by a
# confirmed POST with the CSRF token, audited; another tenant's key is not revoked from here.
KEY=$(tn_cli key create lite --label "panel test" --read-only | sed -n 2p)
OKEY=$(tn_cli key create other | sed -n 2p)
[[ $KEY =~ ^tnk_ ]] && [[ $OKEY =~ ^tnk_ ]] || fatal "tenancy key create printed no token"
KID=$(tn_cli key list lite --json | sed 's/.*"id":\([0-9]*\).*/\1/')
OKID=$(tn_cli key list other --json | sed 's/.*"id":\([0-9]*\).*/\1/')
assert_eq "$(req GET /t/lite)" 200 "the tenant's page with its keys"
assert_contains "$(body)" "${KEY:0:12}" "the page lists the key's prefix"
assert_contains "$(body)" "read-only" "and its flag"
assert_contains "$(body)" "panel test" "and its label"
case "$(body)" in *"${KEY:12}"*) fail "the page shows a token" ;; *) log "ok: the page shows no token" ;; esac
assert_contains "$(body)" "confirm?action=key-revoke&amp;key=$KID" "a revoke link"
assert_eq "$(req GET "/t/lite/confirm?action=key-revoke&key=$KID")" 200 "the revoke confirmation page"
assert_eq "$(tn_cli key list lite --json | grep -c '"revoked_at":null')" 1 "a GET revokes nothing"
code=$(req POST /t/lite/action --data "action=key-revoke&confirm=yes&key=$KID&csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
assert_eq "$code" 403 "a revoke without the session's CSRF token: refused"
code=$(req POST /t/lite/action --data "action=key-revoke&confirm=yes&key=$OKID&csrf=$TOKEN")
assert_eq "$code" 409 "another tenant's key is not revoked from this tenant's page"
assert_eq "$(tn_cli key list other --json | grep -c '"revoked_at":null')" 1 "... and stays live"
code=$(req POST /t/lite/action --data "action=key-revoke&confirm=yes&key=$KID&csrf=$TOKEN")
assert_eq "$code" 303 "revoke a key"
assert_contains "$(tn_cli key list lite --json)" '"status":"revoked"' "the key is revoked in the registry"
assert_contains "$(grep '"action":"key-revoke"' "$T/state/admin-audit.log" | grep '"result":"ok"')" \
    "key $KID ${KEY:0:12}" "the revoke audited with the key's id and prefix"
assert_contains "$(grep '"action":"key-revoke"' "$T/state/admin-audit.log" | grep '"result":"ok"')" \
    '"user":"admin"' "the revoke audited with who"
case "$(cat "$T/state/admin-audit.log")" in *"${KEY:12}"*) fail "the audit log holds a token" ;; esac
assert_eq "$(req GET /t/lite)" 200 "the tenant's page after the revoke"
case "$(body)" in *"revoke-key-$KID"*) fail "a revoked key still has a revoke link" ;;
*) log "ok: a revoked key has no revoke link" ;; esac

# Create (in process), migrate and move (jobs of the panel's own that the job worker runs: the
# request only queues one and is sent to its page, which shows the job's progress until it
# ends); delete with its grace period, then a restore.
code=$(req POST /new --data "slug=made&name=Made+here&confirm=yes&csrf=$TOKEN")
assert_eq "$code" 303 "create a tenant from the panel"
assert_eq "$(header Location)" "/t/made" "and go to its page"
assert_eq "$(http / made.localhost > /dev/null; last_status)" 200 "the new tenant is served"
code=$(req POST /new --data "slug=made2&name=x&csrf=$TOKEN")
assert_eq "$code" 400 "create needs its confirmation"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT count(*) FROM tenants WHERE slug = 'made2'")" 0 "nothing created unconfirmed"
code=$(req POST /new --data "slug=made&name=again&confirm=yes&csrf=$TOKEN")
assert_eq "$code" 400 "a tenant that exists is not created again"
assert_contains "$(body)" "slug &#39;made&#39; is taken" "and the page says why"

# job ACTION [ARGS]: start a job on made, wait for its page to say it ended; its state in
# JOB_STATE (not a subshell: the assertions inside count).
job() {
    local code loc state i
    code=$(req POST /t/made/action --data "action=$1&confirm=yes${2:+&$2}&csrf=$TOKEN")
    assert_eq "$code" 303 "$1 starts a job at once"
    loc=$(header Location)
    assert_contains "$loc" "/t/made/confirm?job=" "$1: sent to the job's page"
    for i in $(seq 1 150); do
        req GET "$loc" > /dev/null
        state=$(grep -o 'id="job-state" class="[a-z]*">[a-z]*' "$T/body" | sed 's/.*>//')
        case $state in queued | running) ;; *) break ;; esac
        [ "$i" = 1 ] && assert_contains "$(header Refresh)" 2 "$1: the $state job's page refreshes itself"
        sleep 0.2
    done
    JOB_STATE=$state
}
job migrate
assert_eq "$JOB_STATE" done "a migrate job ends (page: $(tr '\n' ' ' < "$T/body" | grep -o '<section.*</section>' | head -c 600))"
assert_contains "$(body)" '1 of 1 tenant done, 0 failed' "its page shows the progress"
assert_contains "$(body)" 'last: made current' "and the tenant's outcome (made at the last migration already)"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT migration_version FROM tenants WHERE slug = 'made'")" 0002 "made is at the last migration"
assert_eq "$(req GET '/t/lite/confirm?job=nosuchjob')" 404 "an unknown job"
mjob=$(grep '"action":"migrate"' "$T/state/admin-audit.log" | grep '"result":"started"' | tail -1 | sed -n 's/.*"detail":"job \([0-9]*\)".*/\1/p')
assert_eq "$(req GET "/t/lite/confirm?job=$mjob")" 404 "made's job is not shown under another tenant"
assert_contains "$("$TENANCY_CLI" -c "$T/tenancyd.conf" --json job show "$mjob")" '"app":"host.admin"' \
    "the migrate was a job of the panel's own"
job move to=pgs
assert_eq "$JOB_STATE" done "a move job to the PostgreSQL placement ends (page: $(tr '\n' ' ' < "$T/body" | grep -o '<section.*</section>' | head -c 600))"
assert_contains "$(body)" '3 of 3 tables copied' "the move's page shows the tables copied"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT placement FROM tenants WHERE slug = 'made'")" pgs "the registry says it moved"
code=$(req POST /t/made/action --data "action=move&confirm=yes&to=nowhere&csrf=$TOKEN")
assert_eq "$code" 409 "a move to an unknown placement is refused"
code=$(req POST /t/made/action --data "action=delete&confirm=yes&confirm_slug=made&csrf=$TOKEN")
assert_eq "$code" 303 "delete with the slug typed"
assert_eq "$(http / made.localhost > /dev/null; last_status)" 404 "a deleted tenant is not served"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT state FROM tenants WHERE slug = 'made'")" deleting "kept for the grace period"
code=$(req POST /t/made/action --data "action=resume&confirm=yes&csrf=$TOKEN")
assert_eq "$code" 303 "restore within the grace period"
assert_eq "$(http / made.localhost > /dev/null; last_status)" 200 "served again after the restore"
audit=$T/state/admin-audit.log
for act in create migrate move delete; do
    line=$(grep "\"action\":\"$act\"" "$audit" | grep '"tenant":"made"' | grep '"result":"ok"' | head -1)
    [ "$act" = migrate ] || [ "$act" = move ] &&
        assert_contains "$(grep "\"action\":\"$act\"" "$audit" | grep '"tenant":"made"' | head -1)" \
            '"result":"started"' "$act: its start audited"
    assert_contains "$line" '"user":"admin"' "$act audited with who"
    assert_contains "$line" '"time":"20' "$act audited with when"
done
assert_contains "$(grep '"detail":"restored"' "$audit" | tail -1)" '"tenant":"made"' "the restore audited"
assert_contains "$(grep '"action":"suspend"' "$audit")" '"user":"admin"' "the audit log says who suspended"
assert_contains "$(grep '"action":"suspend"' "$audit")" '"tenant":"lite"' "and which tenant"
assert_contains "$(grep '"action":"resume"' "$audit")" '"result":"ok"' "resume audited"
assert_contains "$(grep '"action":"csrf_refused"' "$audit" | head -1)" '"result":"refused"' "CSRF refusals audited"
# A console query is two lines with one id: its start (before it runs), then its outcome.
drop_id=$(grep '"action":"sql"' "$audit" | grep 'DROP TABLE' | grep '"phase":"start"' | head -1 |
    sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p')
assert_contains "$(grep -F "\"id\":\"$drop_id\"" "$audit" | grep '"phase":"end"')" '"result":"refused"' "console queries audited"
assert_eq "$(req GET /audit)" 200 "the audit page"
assert_contains "$(body)" '<td>suspend</td>' "the audit page lists the suspend"

# ---- the panel is never a tenant, and a tenant never the panel ------------------------------------------
rm -f "$T/nojar"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$AH" "$U/")
assert_eq "$code" 303 "admin.localhost is the panel although a tenant 'admin' exists"
body=$(http /login lite.localhost)
case $body in *nonce*) fail "a tenant's host served the panel's login" ;; *) log "ok: a tenant's host never serves the panel" ;; esac
assert_contains "$(http / admin2.localhost)" "no tenant" "an unknown host is not the panel"

# ---- logout ends the session on the server -----------------------------------------------------------------
cp "$JAR" "$T/jar.old"
assert_eq "$(req POST /logout --data "csrf=$TOKEN")" 303 "logout"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$AH" -b "$T/jar.old" "$U/")
assert_eq "$code" 303 "the old cookie no longer opens the panel"

# ---- a session ends with its password -----------------------------------------------------------------------
JAR=$T/jar.pw
rm -f "$JAR"
assert_eq "$(login "$PASSWORD")" 303 "logged in again"
assert_eq "$(req GET /)" 200 "the new session works"
before=$(sqlite3 "$T/state/control.db" "SELECT count(*) FROM admin_sessions WHERE username = 'admin'")
out=$(printf '%s\n' "$PASSWORD" | tn_cli admin passwd --stdin)
assert_contains "$out" "refuses the sessions 'admin' opened with the old password" \
    "admin passwd says the old sessions are refused from now on"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT count(*) FROM admin_sessions WHERE username = 'admin'")" "$before" \
    "admin passwd leaves the panel's sessions table alone"
assert_eq "$(req GET /)" 303 "the session from before the new password no longer opens the panel"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT count(*) FROM admin_sessions WHERE username = 'admin'")" "$((before - 1))" \
    "the panel deleted the session it refused"
assert_eq "$(login "$PASSWORD")" 303 "a login with the new hash"
assert_eq "$(req GET /)" 200 "works"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT count(*) FROM admin_sessions WHERE username = 'admin'")" 1 \
    "the login swept the other sessions of the old password"
cp "$T/state/admin.passwd" "$T/passwd.saved"
sed -i '/^admin:/d' "$T/state/admin.passwd"   # the user removed by hand: nothing deletes sessions
bad=0
for i in 1 2 3 4 5 6; do [ "$(req GET /)" = 303 ] || bad=$((bad + 1)); done
assert_eq "$bad" 0 "a removed user's session is refused by every worker"
cp "$T/passwd.saved" "$T/state/admin.passwd"
assert_eq "$(req GET /)" 303 "and stays ended when the user comes back"
JAR=$MAINJAR

# ---- throttling (last: it locks 127.0.0.1 out) ---------------------------------------------------------------
# Parallel failures are each counted: one statement adds one (a read then a write of the
# read value plus one lost the failures that overlapped, on 3 workers). Those refused with
# 429 are not failures; every 401 must be in both counters.
sqlite3 "$T/state/control.db" "DELETE FROM admin_throttle"
JAR=$T/jar.par
rm -f "$JAR"
req GET /login > /dev/null
nonce=$(grep -o 'name="nonce" value="[^"]*"' "$T/body" | sed 's/.*value="//; s/"$//')
# Another connection holds the registry's write lock for 2 s, so the failures that overlap
# all wait at their write together (busy timeout 5 s) instead of by luck: a count read
# before the wait and written back after it would lose all but one of them.
(echo "BEGIN IMMEDIATE;"; sleep 2; echo "COMMIT;") | sqlite3 "$T/state/control.db" &
holder=$!
sleep 0.3
N=12
par=()
for i in $(seq 1 $N); do
    curl -s -m 30 -o /dev/null -w '%{http_code}\n' -H "$AH" -b "$JAR" -X POST \
        --data-urlencode "nonce=$nonce" --data-urlencode "user=admin" \
        --data-urlencode "password=wrong parallel $i" "$U/login" > "$T/par.$i" &
    par+=($!)
done
wait "${par[@]}"   # only the curls: tenancyd and nginx are this shell's children too
wait "$holder"
n401=$(cat "$T"/par.* | grep -c '^401$')
other=$(cat "$T"/par.* | grep -v -e '^401$' -e '^429$' | tr '\n' ' ')
assert_eq "$other" "" "parallel wrong logins: each 401 or 429"
assert_ge "$n401" 5 "parallel wrong logins that got through to the password check"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT failures FROM admin_throttle WHERE key = 'addr:127.0.0.1'")" "$n401" \
    "every one of $n401 parallel failures counted for the address"
assert_eq "$(sqlite3 "$T/state/control.db" "SELECT failures FROM admin_throttle WHERE key = 'user:admin'")" "$n401" \
    "every one of $n401 parallel failures counted for the account"
sqlite3 "$T/state/control.db" "DELETE FROM admin_throttle"
JAR=$MAINJAR
for i in 1 2 3 4 5; do login "wrong $i" > /dev/null; done
code=$(login "$PASSWORD")
assert_eq "$code" 429 "after 5 failures the address is locked, even with the right password"
[ -n "$(header Retry-After)" ] && log "ok: Retry-After $(header Retry-After)" || fail "no Retry-After"
bad=0
for i in 1 2 3 4 5 6; do [ "$(login "$PASSWORD")" = 429 ] || bad=$((bad + 1)); done
assert_eq "$bad" 0 "the lock holds on every worker"
assert_contains "$(grep throttled "$audit" | tail -1)" '"result":"refused"' "throttled logins audited"
