#!/bin/bash
# lifecycle.sh — a tenant's life after creation, with the real `tenancy` command, a running
# tenancyd (the demo app, which reads the tenant's greeting from its own storage in every
# request) behind nginx, and two throwaway PostgreSQL clusters (tests/pg.sh):
#
#   - move between every pair of placements (SQLite file, PostgreSQL schema, PostgreSQL
#     database) and to a schema on another server, with every row of every table compared
#     after each move, generated ids continuing past the copied ones, and the host serving
#     the tenant from its new place at once (no restart); writes answered 503 while moving;
#   - moves that fail half-way (the target server unreachable; a row the target refuses after
#     other tables were copied) leave the source untouched and serving, and no target behind;
#   - export/import round trips (SQLite to a PostgreSQL schema, every row compared), a cut
#     dump refused with nothing left behind;
#   - delete (404), restore (200), purge (storage and registry gone; restore then says "no
#     tenant"), purge --expired after the grace period, a tombstone finished;
#   - check: consistent, then a missing file and an orphan schema found (exit 1).
#
# Owns: these cases. Must not: change the registry except through the binary, apart from the
# one tombstone case (a purge cut between its steps cannot be caused from outside).
. "$(dirname "$0")/lib.sh"
JSON_CHECK=${JSON_CHECK:-$HELPERS/json_check}
need curl nginx sqlite3 psql "$TENANCY_CLI" "$JSON_CHECK" "$DEMO_SO"

# ---- two PostgreSQL clusters, stopped on exit before lib.sh's cleanup ------------------------
PG_A= PG_B=
stop_pg() {
    [ -n "$PG_A" ] && bash "$top_srcdir/tests/pg.sh" stop "$PG_A"
    [ -n "$PG_B" ] && bash "$top_srcdir/tests/pg.sh" stop "$PG_B"
    PG_A= PG_B=
}
trap 'rc=$?; stop_pg; (exit $rc); cleanup' EXIT
env_a=$(bash "$top_srcdir/tests/pg.sh" start life_a) || hard_error "PostgreSQL A could not be started"
PG_A=$(eval "$env_a"; echo "$TENANCY_TEST_PG_DIR")
env_b=$(bash "$top_srcdir/tests/pg.sh" start life_b) || hard_error "PostgreSQL B could not be started"
PG_B=$(eval "$env_b"; echo "$TENANCY_TEST_PG_DIR")
DSN_A="postgres:host=$PG_A port=5432 dbname=life_a user=postgres"
DSN_B="postgres:host=$PG_B port=5432 dbname=life_b user=postgres"
pga() { psql -X -A -t -q -h "$PG_A" -p 5432 -U postgres -d "${DB:-life_a}" -c "$1"; }
pgb() { psql -X -A -t -q -h "$PG_B" -p 5432 -U postgres -d life_b -c "$1"; }

# ---- the host ------------------------------------------------------------------------------------
mkdir -p "$T/state"
base_conf=(
    "app = $DEMO_SO"
    "pm.max_children = 2"
    "state_dir = $T/state"
    "tenant.resolvers = subdomain"
    "tenant.base_domains = localhost"
    "storage.migrations = $top_srcdir/apps/demo/migrations"
    "storage.seed = $top_srcdir/apps/demo/seed.sql"
    "placement.pga.dsn = $DSN_A" "placement.pga.mode = schema"
    "placement.pgdb.dsn = $DSN_A" "placement.pgdb.mode = database"
    "placement.pgb.dsn = $DSN_B" "placement.pgb.mode = schema"
)
tn_conf "${base_conf[@]}"
tn_cli init > /dev/null || fatal "tenancy init failed"
tn_cli tenant create acme --name "Acme" > "$T/create.out" 2>&1 ||
    fatal "tenant create acme: $(cat "$T/create.out")"
tn_start
nginx_start

DB_FILE=$T/state/tenants/acme.db
field() { tn_cli --json tenant show "$1" | "$JSON_CHECK" "$2"; }
data_of() { http / "$1.localhost" | sed -n 's/.*"data":"\([^"]*\)".*/\1/p'; }

# The data: the demo's tables (greetings, visits) and tables of the test's own with values
# that are easy to get wrong: REALs that need 17 digits, a 2^53+1 integer, quotes, a
# backslash, newline and tab, UTF-8, an empty string beside NULL, dates, booleans.
sqlite3 "$DB_FILE" <<'SQL' || fatal "filling acme failed"
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
INSERT INTO visits (id, path, at) SELECT i, '/page/' || i, 1700000000 + i FROM n;
CREATE TABLE misc (k TEXT PRIMARY KEY, r REAL, i INTEGER, t TEXT, d DATETIME);
INSERT INTO misc VALUES
  ('a', 0.1 + 0.2, 9007199254740993, 'it''s "quoted" \back', '2024-01-01 10:00:00'),
  ('b', 1e300, -1, char(10) || 'new' || char(9) || 'line', NULL),
  ('c', -2.5, 0, '', NULL),
  ('d', NULL, NULL, NULL, NULL),
  ('e', 123456.789, 42, 'ñ€😀', '2020-02-02 02:02:02'),
  ('f', 1e-7, 9223372036854775807, 'NULL', NULL);
CREATE TABLE flags (id INTEGER PRIMARY KEY, on_ BOOLEAN NOT NULL DEFAULT 0);
INSERT INTO flags VALUES (1, 1), (2, 0);
CREATE INDEX misc_i ON misc (i);
SQL

# Every row of every table, as `tenancy export` reads it (the boolean table apart: its text
# is 1/0 in SQLite and t/f in PostgreSQL, checked on its own below).
rows_of() {
    awk '/^\{"table":/ { skip = ($0 ~ /^\{"table":"flags"/) } /^\[/ && !skip' "$1"
}
tables_of() { grep -o '^{"table":"[^"]*"' "$1" | tr '\n' ' '; }
export_to() {   # export_to NAME [SLUG]: $T/NAME.dump
    tn_cli export "${2:-acme}" -o "$T/$1.dump" > "$T/export.out" 2>&1 ||
        fail "export $1: $(cat "$T/export.out")"
}
same_data() {   # same_data A B WHAT
    if [ "$(tables_of "$T/$1.dump")" != "$(tables_of "$T/$2.dump")" ]; then
        fail "$3: the tables differ: $(tables_of "$T/$1.dump") / $(tables_of "$T/$2.dump")"
    elif ! cmp -s <(rows_of "$T/$1.dump") <(rows_of "$T/$2.dump"); then
        fail "$3: rows differ: $(diff <(rows_of "$T/$1.dump") <(rows_of "$T/$2.dump") | head -5)"
    else
        log "ok: $3 ($(rows_of "$T/$1.dump" | wc -l) rows, every one equal)"
    fi
}

# The greeting in the tenant's current storage, written around the host.
G=   # the greeting the tenant's storage holds now
set_greeting() {   # set_greeting TEXT
    local p s
    G=$1
    p=$(field acme .placement)
    s=$(field acme .storage)
    case $p in
    sqlite) sqlite3 "$s" "UPDATE greetings SET message = '$1' WHERE id = 1" ;;
    pga) pga "UPDATE $s.greetings SET message = '$1' WHERE id = 1" ;;
    pgb) pgb "UPDATE $s.greetings SET message = '$1' WHERE id = 1" ;;
    pgdb) DB=$s pga "UPDATE public.greetings SET message = '$1' WHERE id = 1" ;;
    esac
}
# The next generated id in the tenant's storage (inserted, read back, deleted).
next_flag_id() {
    local p s
    p=$(field acme .placement)
    s=$(field acme .storage)
    case $p in
    sqlite) sqlite3 "$s" "INSERT INTO flags (on_) VALUES (1); SELECT last_insert_rowid(); DELETE FROM flags WHERE id > 2" ;;
    pga) pga "INSERT INTO $s.flags (on_) VALUES (true) RETURNING id; DELETE FROM $s.flags WHERE id > 2" ;;
    pgb) pgb "INSERT INTO $s.flags (on_) VALUES (true) RETURNING id; DELETE FROM $s.flags WHERE id > 2" ;;
    pgdb) DB=$s pga "INSERT INTO public.flags (on_) VALUES (true) RETURNING id; DELETE FROM public.flags WHERE id > 2" ;;
    esac
}
flags_text() {
    local p s
    p=$(field acme .placement)
    s=$(field acme .storage)
    case $p in
    sqlite) sqlite3 "$s" "SELECT group_concat(on_, ',') FROM (SELECT on_ FROM flags ORDER BY id)" ;;
    pga) pga "SELECT string_agg(on_::text, ',' ORDER BY id) FROM $s.flags" ;;
    pgb) pgb "SELECT string_agg(on_::text, ',' ORDER BY id) FROM $s.flags" ;;
    pgdb) DB=$s pga "SELECT string_agg(on_::text, ',' ORDER BY id) FROM public.flags" ;;
    esac
}

assert_eq "$(data_of acme)" "Hello from Acme (acme), served from its own storage" \
    "the host serves acme from its SQLite file"
export_to start

# ---- move: every pair of placements ----------------------------------------------------------
n=0
move_to() {   # move_to PLACEMENT KIND STORAGE [options]: move, verify, serve
    local to=$1 kind=$2 storage=$3
    shift 3
    n=$((n + 1))
    set_greeting "greeting $n"
    export_to "before$n"
    tn_cli move acme --to "$to" --drain 0 "$@" > "$T/move.out" 2> "$T/move.err"
    local rc=$?
    if [ "$rc" != 0 ]; then
        fail "move $n to $to: exit $rc: $(cat "$T/move.err")"
        return
    fi
    log "move $n to $to: $(grep 'rows/s' "$T/move.out")"
    assert_eq "$(field acme .placement)/$(field acme .state)" "$to/active" \
        "move $n: registry says $to, active again"
    assert_eq "$(field acme .storage)" "$storage" "move $n: storage $kind $storage"
    export_to "after$n"
    same_data "before$n" "after$n" "move $n ($kind): data"
    assert_eq "$(data_of acme)" "greeting $n" "move $n: the host serves acme from $to at once"
    assert_eq "$(next_flag_id)" 3 "move $n: the next generated id follows the copied ones"
}
move_to pga schema t_acme
assert_eq "$(flags_text)" "true,false" "booleans are booleans in PostgreSQL"
[ -f "$DB_FILE" ] || fail "the source file was dropped without --drop-source"
sqlite3 "$DB_FILE" "UPDATE greetings SET message = 'stale'"
assert_eq "$(data_of acme)" "greeting 1" "the kept source is no longer read"
tn_cli check > "$T/check.out" 2>&1
assert_eq "$?" 1 "check reports the kept source"
assert_contains "$(cat "$T/check.out")" "orphan" "the kept source is an orphan"
tn_cli move acme --to sqlite --drain 0 > "$T/back.out" 2>&1
assert_eq "$?" 1 "a move onto the kept source is refused"
assert_contains "$(cat "$T/back.out")" "already exists: it is not overwritten" "and says why"
assert_eq "$(field acme .placement)/$(field acme .state)" "pga/active" "the refused move changed nothing"
rm -f "$DB_FILE" "$DB_FILE-wal" "$DB_FILE-shm"

move_to pgdb database tenant_acme --drop-source
assert_eq "$(pga "SELECT count(*) FROM pg_namespace WHERE nspname = 't_acme'")" 0 "--drop-source dropped the schema"
move_to sqlite sqlite "$DB_FILE" --drop-source
assert_eq "$(flags_text)" "1,0" "booleans are 1 and 0 in SQLite"
assert_eq "$(pga "SELECT count(*) FROM pg_database WHERE datname = 'tenant_acme'")" 0 "--drop-source dropped the database"
move_to pgdb database tenant_acme --drop-source
move_to pga schema t_acme --drop-source
move_to pgb schema t_acme --drop-source   # another server
assert_eq "$(pgb "SELECT count(*) FROM t_acme.visits")" 5000 "on server B: 5000 visits"
move_to sqlite sqlite "$DB_FILE" --drop-source
set_greeting "greeting 1"
export_to final
same_data before1 final "after $n moves the data is the data of before the first"
assert_eq "$(sqlite3 "$DB_FILE" "SELECT t FROM misc WHERE k = 'b'")" "$(printf '\nnew\tline')" \
    "a newline and a tab survived (read with sqlite3)"
assert_eq "$(sqlite3 "$DB_FILE" "SELECT printf('%!.17g', r) FROM misc WHERE k = 'a'")" \
    "0.30000000000000004" "a REAL kept all 17 digits"

# ---- writes answer 503 while moving, reads are served ----------------------------------------
tn_cli move acme --to pga --drain 3 --drop-source > "$T/slow.out" 2>&1 &
mover=$!
wait_until 10 bash -c "[ \"\$('$TENANCY_CLI' -c '$T/tenancyd.conf' --json tenant show acme | '$JSON_CHECK' .state)\" = moving ]" ||
    fail "the tenant did not become moving"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d x -H 'Host: acme.localhost' "http://127.0.0.1:$NGINX_PORT/")
assert_eq "$code" 503 "a write while moving: 503"
assert_eq "$(http / acme.localhost > /dev/null; last_status)" 200 "a read while moving: 200"
wait "$mover"
assert_eq "$?" 0 "the slow move finished"
assert_eq "$(field acme .placement)" pga "and switched"
assert_eq "$(data_of acme)" "$G" "served from pga after the slow move"

# ---- moves that fail half-way ----------------------------------------------------------------
# The target server is unreachable (its own configuration: the host does not know it).
grep -v '^placement' "$T/tenancyd.conf" > "$T/bad.conf"
printf '%s\n' "placement.pga.dsn = $DSN_A" "placement.pga.mode = schema" \
    "placement.down.dsn = postgres:host=$T/nowhere port=5432 dbname=x user=postgres" \
    "placement.down.mode = schema" >> "$T/bad.conf"
export_to beforefail1
"$TENANCY_CLI" -c "$T/bad.conf" move acme --to down --drain 0 > "$T/f1.out" 2> "$T/f1.err"
assert_eq "$?" 1 "a move to an unreachable server fails"
assert_contains "$(cat "$T/f1.err")" "failed while creating the target" "it names the step"
assert_contains "$(cat "$T/f1.err")" "the source is untouched and 'acme' is active again" "and says the source is untouched"
assert_eq "$(field acme .placement)/$(field acme .state)" "pga/active" "unreachable target: registry unchanged"
assert_eq "$(data_of acme)" "$G" "unreachable target: still served from the source"
export_to afterfail1
same_data beforefail1 afterfail1 "unreachable target: the source is untouched"

# A row the target refuses, in the last table, after the others were copied: a DATE column
# holds whatever SQLite was given; PostgreSQL's date refuses 'not a date'.
tn_cli move acme --to sqlite --drain 0 --drop-source > /dev/null 2>&1 || fail "setup: move to sqlite"
sqlite3 "$DB_FILE" "CREATE TABLE zz_date (id INTEGER PRIMARY KEY, day DATE); INSERT INTO zz_date VALUES (1, '2024-01-01'), (2, 'not a date')"
export_to beforefail2
tn_cli move acme --to pgdb --drain 0 > "$T/f2.out" 2> "$T/f2.err"
assert_eq "$?" 1 "a move whose last table the target refuses fails"
assert_contains "$(cat "$T/f2.err")" "copying table zz_date" "it names the step and the table"
assert_eq "$(field acme .placement)/$(field acme .state)" "sqlite/active" "refused row: registry unchanged"
assert_eq "$(pga "SELECT count(*) FROM pg_database WHERE datname = 'tenant_acme'")" 0 \
    "refused row: the half-made target database was dropped"
export_to afterfail2
same_data beforefail2 afterfail2 "refused row: the source is untouched"
assert_eq "$(data_of acme)" "$G" "refused row: still served from the source"
sqlite3 "$DB_FILE" "DROP TABLE zz_date"

# ---- export / import -------------------------------------------------------------------------
export_to orig
tn_cli import "$T/orig.dump" --slug acme-copy --placement pga --no-domains > "$T/imp.out" 2>&1 ||
    fail "import into a PostgreSQL schema: $(cat "$T/imp.out")"
assert_eq "$(field acme-copy .placement)/$(field acme-copy .storage)/$(field acme-copy .state)" \
    "pga/t_acme_copy/active" "imported into schema t_acme_copy, active"
export_to copy acme-copy
same_data orig copy "export from SQLite, import into a PostgreSQL schema: every row"
assert_eq "$(data_of acme-copy)" "$G" "the host serves the imported tenant"
assert_eq "$(field acme-copy .name)" "Acme" "the name came with the dump"
# Through a pipe, then a cut dump: refused, nothing left.
tn_cli export acme | tn_cli import - --slug acme-pipe --placement pgdb --no-domains > /dev/null 2>&1 ||
    fail "export | import -"
export_to pipe acme-pipe
same_data orig pipe "export | import - into a PostgreSQL database: every row"
head -n 100 "$T/orig.dump" > "$T/cut.dump"
tn_cli import "$T/cut.dump" --slug acme-cut --placement pga --no-domains > /dev/null 2> "$T/cut.err"
assert_eq "$?" 1 "a cut dump is refused"
assert_contains "$(cat "$T/cut.err")" "it was cut" "and says so"
tn_cli tenant show acme-cut > /dev/null 2>&1 && fail "a refused import left a registry entry"
assert_eq "$(pga "SELECT count(*) FROM pg_namespace WHERE nspname = 't_acme_cut'")" 0 \
    "a refused import left no schema"

# ---- delete, restore, purge ------------------------------------------------------------------
tn_cli tenant delete acme-copy > /dev/null || fail "delete"
assert_eq "$(http / acme-copy.localhost > /dev/null; last_status)" 404 "deleted: 404"
tn_cli tenant resume acme-copy > /dev/null 2>&1 && fail "resume must not restore a deleted tenant"
tn_cli tenant restore acme-copy > /dev/null || fail "restore"
assert_eq "$(http / acme-copy.localhost > /dev/null; last_status)" 200 "restored: 200"
tn_cli tenant delete acme-copy > /dev/null
tn_cli purge acme-copy > /dev/null 2> "$T/p1.err"
assert_eq "$?" 1 "purge within the grace period is refused"
assert_contains "$(cat "$T/p1.err")" "--now purges it earlier" "and says how"
tn_cli --json purge acme-copy --now > "$T/p2.out"
assert_eq "$?" 0 "purge --now"
"$JSON_CHECK" < "$T/p2.out" || fail "purge --json is not one JSON document"
assert_eq "$("$JSON_CHECK" .purged[0].slug < "$T/p2.out")" acme-copy "purge --json names it"
assert_eq "$(pga "SELECT count(*) FROM pg_namespace WHERE nspname = 't_acme_copy'")" 0 "purge dropped the schema"
tn_cli tenant restore acme-copy > /dev/null 2> "$T/r.err"
assert_eq "$?" 1 "restore after purge fails"
assert_contains "$(cat "$T/r.err")" "no tenant 'acme-copy'" "restore after purge: no tenant"
assert_eq "$(http / acme-copy.localhost > /dev/null; last_status)" 404 "purged: 404"

# --expired, after a (short) grace period; and a tombstone left by a purge cut short.
grep -v '^storage.delete_grace' "$T/tenancyd.conf" > "$T/grace.conf"
echo "storage.delete_grace = 1s" >> "$T/grace.conf"
tn_cli tenant delete acme-pipe > /dev/null
sleep 2
"$TENANCY_CLI" -c "$T/grace.conf" tenant restore acme-pipe > /dev/null 2> "$T/r2.err"
assert_contains "$(cat "$T/r2.err")" "grace period of tenant 'acme-pipe' ended" "restore after the grace period is refused"
tn_cli tenant create ghost > /dev/null && tn_cli tenant delete ghost > /dev/null
sqlite3 "$T/state/control.db" "UPDATE tenants SET deleted_at = 0 WHERE slug = 'ghost'"   # step 1 done, cut
tn_cli check > "$T/check2.out" 2>&1
assert_contains "$(cat "$T/check2.out")" "tombstone" "check reports an unfinished purge"
"$TENANCY_CLI" -c "$T/grace.conf" purge --expired > "$T/p3.out" 2>&1
assert_eq "$?" 0 "purge --expired"
assert_contains "$(cat "$T/p3.out")" "purged 'acme-pipe'" "the expired tenant is purged"
assert_contains "$(cat "$T/p3.out")" "purged 'ghost'" "the tombstone is finished"
assert_eq "$(pga "SELECT count(*) FROM pg_database WHERE datname = 'tenant_acme_pipe'")" 0 "its database is gone"
[ -e "$T/state/tenants/ghost.db" ] && fail "the tombstone's file is still there"

# ---- check -------------------------------------------------------------------------------------
tn_cli check > "$T/c1.out" 2>&1
assert_eq "$?" 0 "check: consistent ($(cat "$T/c1.out"))"
tn_cli tenant create beta > /dev/null || fail "create beta"
rm -f "$T/state/tenants/beta.db"
pga "CREATE SCHEMA t_orphan"
tn_cli --json check > "$T/c2.out" 2> /dev/null
assert_eq "$?" 1 "check: inconsistent"
"$JSON_CHECK" < "$T/c2.out" || fail "check --json is not one JSON document"
assert_eq "$("$JSON_CHECK" .ok < "$T/c2.out")" false "check --json: ok false"
grep -q '"kind":"missing","slug":"beta"' "$T/c2.out" && log "ok: check finds beta's missing file" ||
    fail "check did not find the missing file: $(cat "$T/c2.out")"
grep -q '"kind":"orphan","slug":null,"placement":"pga","storage":"t_orphan"' "$T/c2.out" &&
    log "ok: check finds the orphan schema" || fail "check did not find the orphan: $(cat "$T/c2.out")"
assert_eq "$(pga "SELECT count(*) FROM pg_namespace WHERE nspname = 't_orphan'")" 1 "check is read-only"
