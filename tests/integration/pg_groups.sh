#!/bin/bash
# pg_groups.sh — a schema placement with group logins (placement.NAME.login = group), on the
# login README.md gives (CREATEROLE, no superuser), through everything that reaches a
# tenant's storage: tenant create (one at a time, and in bulk on existing and on new group
# logins), tenancyd's requests, the panel, tenancy migrate, tenancy run, a move to SQLite and
# back, delete and purge, tenancy check --repair-roles, a placement of the shared login
# moved to groups (its configuration, --repair-roles, a reload), and an export imported as
# another tenant. Throughout, the dsn's user is a member of no tenant role once the command that made or mended it ends
# (PostgreSQL 15 lists every role a login may become on each SET ROLE: see bench/run roles),
# each group login is a member of exactly its group's tenants, and every answer carries
# what only the tenant's own schema holds.
. "$(dirname "$0")/lib.sh"
need curl nginx psql "$TENANCY_CLI"
STOREAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/storeapp.so
FIX=$top_srcdir/tests/fixtures/storeapp
[ -f "$STOREAPP" ] || fatal "no $STOREAPP (make check builds it)"
pg_cluster

psql -q -v ON_ERROR_STOP=1 > /dev/null <<'SQL' || fatal "the login role"
CREATE ROLE tenancy_app LOGIN CREATEROLE;
GRANT pg_read_all_stats TO tenancy_app;
ALTER DATABASE tenancy_test OWNER TO tenancy_app;
SQL
APP_PG="postgres:host=$PG_DIR port=5432 dbname=tenancy_test user=tenancy_app"
# every login but the superuser and the host's proves its password: the group logins' come
# from the role key
pg_scram_but_host "$PG_DIR"

mkdir -p "$T/state" "$T/migrations"
cp "$FIX"/migrations/*.sql "$T/migrations/"
# conf PGC_LOGIN: placement pgc starts on the shared login and is moved to groups below
conf() {
    tn_conf "app = $STOREAPP" "pm.max_children = 2" "state_dir = $T/state" \
        "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
        "storage.migrations = $T/migrations" "storage.seed = $FIX/seed.sql" \
        "storage.placement = pgg" \
        "placement.pgg.dsn = $APP_PG" "placement.pgg.mode = schema" "placement.pgg.login = group" \
        "placement.pgg.login_groups = 2" "admin.host = admin.localhost" \
        "placement.pgh.dsn = $APP_PG" "placement.pgh.mode = schema" "placement.pgh.login = group" \
        "placement.pgh.login_groups = 2" \
        "placement.pgc.dsn = $APP_PG" "placement.pgc.mode = schema" "placement.pgc.login = $1"
}
conf shared
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"

# each group login's members (of the tenants g1..g7)
members() { psql -At -c "SELECT coalesce(string_agg(r.rolname, ',' ORDER BY r.rolname), '') FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE m.member = '$1'::regrole AND r.rolname LIKE 't\\_g%'"; }

# t_g1..t_g6 fall into the two groups by FNV-1a of the schema's name: g1, g3, g5 in 0,
# g2, g4, g6 in 1 (placement_group_of; a change of it moves tenants between groups)
declare -A NAME=()
for i in 1 2 3 4 5 6; do
    NAME[g$i]="Group $RANDOM$RANDOM"
    tn_cli tenant create "g$i" --name "${NAME[g$i]}" > "$T/create.out" 2>&1 ||
        fatal "creating g$i: $(cat "$T/create.out")"
done
# three tenants on the shared login, moved to groups further down
for i in 1 2 3; do
    NAME[c$i]="Shared $RANDOM$RANDOM"
    tn_cli tenant create "c$i" --placement pgc --name "${NAME[c$i]}" > "$T/create.out" 2>&1 ||
        fatal "creating c$i: $(cat "$T/create.out")"
done
# what the dsn's user holds of the shared placement's (pgc's) tenants' roles
held_c() { psql -At -c "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE m.member = 'tenancy_app'::regrole AND r.rolname LIKE 't\\_c_'"; }
# what the dsn's user holds of the tenants' roles but the shared placement's
held() { psql -At -c "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE m.member = 'tenancy_app'::regrole AND r.rolname LIKE 't\\_%' AND r.rolname NOT LIKE 't\\_c%'"; }
assert_eq "$(held)" 0 "the host's login holds no tenant role after creating six"
# and in bulk, four at a time (a group target's creation keeps no connection between tenants)
seq -f 'b%g' 1 8 > "$T/bulk.tsv"
out=$(tn_cli --json tenant create --from-file "$T/bulk.tsv" -j 4 2>"$T/bulk.err") || fail "bulk create: $(cat "$T/bulk.err") $out"
assert_eq "$(echo "$out" | jq -c '[.created, .failed]')" "[8,0]" "bulk create: eight created, none failed"
assert_eq "$(held)" 0 "the host's login holds no tenant role after a bulk create"
# a bulk create on a placement whose group logins do not exist yet: the first creators of a
# group take turns making it
seq -f 'h%g' 1 8 > "$T/bulk-h.tsv"
out=$(tn_cli --json tenant create --from-file "$T/bulk-h.tsv" --placement pgh -j 4 2>"$T/bulk.err") ||
    fail "bulk create on new groups: $(cat "$T/bulk.err") $out"
assert_eq "$(echo "$out" | jq -c '[.created, .failed]')" "[8,0]" "bulk create on new groups: eight created"
assert_eq "$(psql -At -c "SELECT count(*) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.member JOIN pg_roles r ON r.oid = m.roleid WHERE g.rolname LIKE 'tn\\_pgh\\__' AND r.rolname LIKE 't\\_h%'")" 8 \
    "each of them a member of its new group login"
assert_eq "$(psql -At -c "SELECT count(*) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.member JOIN pg_roles r ON r.oid = m.roleid WHERE g.rolname LIKE 'tn\\_pgg\\__' AND r.rolname LIKE 't\\_b%'")" 8 \
    "each bulk-made tenant's role is its group login's"
assert_eq "$(members tn_pgg_0)/$(members tn_pgg_1)" "t_g1,t_g3,t_g5/t_g2,t_g4,t_g6" \
    "each group login a member of exactly its group's tenants"
assert_eq "$(psql -At -c "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'tn_pgg_0'")" t \
    "the group login has its derived password"

tn_start
nginx_start
body() { echo "{\"tenant\":\"$1\",\"data\":\"$1\",\"name\":\"${NAME[$1]}\"}"; }
for round in 1 2; do
    for i in 1 2 3 4 5 6; do
        assert_eq "$(http / "g$i.localhost")" "$(body "g$i")" "round $round: g$i reads its own schema"
    done
done
assert_eq "$(psql -At -c "SELECT string_agg(DISTINCT usename, ',' ORDER BY usename) FROM pg_stat_activity WHERE usename LIKE 'tn\\_pgg\\_%'")" \
    "tn_pgg_0,tn_pgg_1" "the requests' connections log in as the two group logins"
# a tenant created while the host serves: the serving connections see it at once
NAME[g7]="Group $RANDOM$RANDOM"
tn_cli tenant create g7 --name "${NAME[g7]}" > "$T/create.out" 2>&1 || fatal "creating g7: $(cat "$T/create.out")"
for i in 1 2 7; do
    assert_eq "$(http / "g$i.localhost")" "$(body "g$i")" "after a create: g$i reads its own schema"
done
assert_eq "$(held)" 0 "the host's login holds no tenant role after a create under load"

# ---- the panel's pages read a tenant's schema through its group login ------------------------
PASSWORD="pg groups $RANDOM$RANDOM"
printf '%s\n' "$PASSWORD" | tn_cli admin passwd --stdin > /dev/null || fatal "admin passwd failed"
panel_login "$PASSWORD"
page() { curl -s -m 30 -H 'Host: admin.localhost' -b "$T/jar" -c "$T/jar" -o "$T/page" -w '%{http_code}' "http://127.0.0.1:$NGINX_PORT$1"; }
declare -A SECRET=()
for i in 1 2; do
    SECRET[g$i]="SECRET-$i-$RANDOM$RANDOM"
    code=$(curl -s -m 30 -H "Host: g$i.localhost" --data-binary \
        "INSERT INTO marker (id, tenant) VALUES (2, '${SECRET[g$i]}')" -o "$T/out" -w '%{http_code}' \
        "http://127.0.0.1:$NGINX_PORT/sql")
    [ "$code" = 200 ] || fatal "g$i's secret row: $code $(cat "$T/out")"
done
for i in 1 2; do
    o=$((3 - i))
    assert_eq "$(page "/t/g$i/table?name=marker")" 200 "the panel shows g$i's marker table"
    assert_contains "$(cat "$T/page")" "${SECRET[g$i]}" "... with the row only g$i's schema holds"
    if grep -q -- "${SECRET[g$o]}" "$T/page"; then fail "g$i's page shows g$o's row"; else log "ok: g$i's page shows no row of g$o's"; fi
done
assert_eq "$(held)" 0 "the host's login holds no tenant role after the panel's reads"

# ---- tenancy migrate: each file applied through the group logins ------------------------------
echo "ALTER TABLE marker ADD COLUMN extra TEXT NOT NULL DEFAULT 'added';" > "$T/migrations/0002_extra.sql"
out=$(tn_cli --json migrate --all 2>&1) || fail "migrate --all: $out"
assert_eq "$(echo "$out" | jq -c '[.migrated, .failed]')" "[26,0]" "migrate: all twenty-six migrated, none failed"
assert_eq "$(psql -At -c "SELECT count(*) FROM information_schema.columns WHERE table_name = 'marker' AND column_name = 'extra' AND (table_schema LIKE 't\\_g_' OR table_schema LIKE 't\\_b_')")" 15 \
    "the column is in every tenant's schema"
assert_eq "$(psql -At -c "SELECT count(*) || '/' || count(*) FILTER (WHERE tableowner = schemaname) FROM pg_tables WHERE schemaname LIKE 't\\_g_' OR schemaname LIKE 't\\_b_'")" \
    "45/45" "every table (three in each of fifteen tenants) is its tenant's role's"
assert_eq "$(held)" 0 "the host's login holds no tenant role after a migration"

# ---- tenancy run: the command's connection logs in as the tenant's group and takes its role --
out=$(tn_cli run --all --output -- sh -c 'psql "$TENANCY_STORAGE" -XAt -c "SELECT session_user || chr(32) || current_user || chr(32) || current_schema() || chr(32) || tenant FROM marker WHERE id = 1"' 2>&1) ||
    fail "tenancy run: $out"
for i in 1 3; do
    assert_contains "$out" "tn_pgg_0 t_g$i t_g$i g$i" "tenancy run: g$i through group 0, as its role, in its schema"
done
assert_contains "$out" "tn_pgg_1 t_g2 t_g2 g2" "tenancy run: g2 through group 1"

# ---- a move to SQLite and back: read and written through the group login ----------------------
out=$(tn_cli move g3 --to sqlite --drop-source 2>&1) || fail "move g3 to sqlite: $out"
assert_eq "$(http / g3.localhost)" "$(body g3)" "g3 served from SQLite"
assert_eq "$(psql -At -c "SELECT count(*) FROM pg_namespace WHERE nspname = 't_g3'")" 0 \
    "its schema dropped (through the role the host's login took for it)"
assert_eq "$(held)" 0 "the host's login holds no tenant role after the drop"
out=$(tn_cli move g3 --to pgg --drop-source 2>&1) || fail "move g3 back: $out"
assert_eq "$(http / g3.localhost)" "$(body g3)" "g3 served from its schema again"
assert_contains "$(members tn_pgg_0)" "t_g3" "g3's role is its group login's again"
assert_eq "$(held)" 0 "the host's login holds no tenant role after the moves"

# ---- delete and purge: the schema and the role go -----------------------------------------------
tn_cli tenant delete g6 > /dev/null 2>&1 || fail "delete g6"
out=$(tn_cli purge g6 --now 2>&1) || fail "purge g6: $out"
assert_eq "$(psql -At -c "SELECT count(*) FROM pg_namespace WHERE nspname = 't_g6'")/$(psql -At -c "SELECT count(*) FROM pg_roles WHERE rolname = 't_g6'")" \
    "0/0" "g6's schema and role are gone"
assert_eq "$(members tn_pgg_1)" "t_g2,t_g4" "group 1 lost g6 only"

# ---- check and repair: a login left a member, a group login left out ---------------------------
out=$(tn_cli check 2>&1)
assert_contains "$out" "consistent: 25 tenants" "tenancy check: no drift"
psql -q -v ON_ERROR_STOP=1 -c "GRANT t_g1 TO tenancy_app" -c "REVOKE t_g4 FROM tn_pgg_1" > /dev/null ||
    fatal "making drift"
out=$(tn_cli check 2>&1)
assert_contains "$out" "the host's login is still a member of its role t_g1" "check: the login left a member"
assert_contains "$out" "its group login tn_pgg_1 is not a member of its role t_g4" "check: a group login left out"
out=$(tn_cli check --repair-roles 2>&1)
assert_contains "$out" "repaired the roles of 2 tenants" "check --repair-roles mends both"
assert_eq "$(held)" 0 "the repair took the role back from the host's login"
assert_eq "$(members tn_pgg_1)" "t_g2,t_g4" "and gave g4's role to its group login again"
for i in 1 4; do
    assert_eq "$(http / "g$i.localhost")" "$(body "g$i")" "g$i served after the repair"
done
# ---- a shared placement moved to groups: the configuration, a reload, --repair-roles -----------
for i in 1 2 3; do
    assert_eq "$(http / "c$i.localhost")" "$(body "c$i")" "c$i served on the shared login"
done
assert_eq "$(held_c)" 3 \
    "on the shared login the host's login is a member of its tenants' roles"
# tenancy check tells when the shared login may become more than 2,000 roles: its own three
# tenants', pg_read_all_stats, and 2,000 more given to it here
psql -q -c "DO \$\$BEGIN FOR i IN 1..2000 LOOP EXECUTE format('CREATE ROLE pad_%s', i);
    EXECUTE format('GRANT pad_%s TO tenancy_app', i); END LOOP; END\$\$" || fatal "the padding roles"
out=$(tn_cli check 2>&1)
assert_contains "$out" "its login may become 2004 roles (more than 2000)" "check: the shared login's roles counted"
assert_contains "$out" "set placement.pgc.login = group" "... and the way out named for its placement"
assert_eq "$(echo "$out" | grep -c 'may become')" 1 "... on the shared placement only"
psql -q -c "DO \$\$BEGIN FOR i IN 1..2000 LOOP EXECUTE format('DROP ROLE pad_%s', i); END LOOP; END\$\$" ||
    fatal "dropping the padding roles"
conf group
out=$(tn_cli check 2>&1)
assert_contains "$out" "its group login tn_pgc_4 does not exist" "check after the switch: t_c1's group login (4 of 8) is missing"
assert_contains "$out" "the host's login is still a member of its role t_c1" "check after the switch: the login still a member"
# The move without a refused request (README): requests for c1..c3 run throughout, each
# answer checked whole; --keep-shared-login makes the group logins and leaves the host's
# login a member, so the running tenancyd (still on the shared login) keeps serving; the
# reload moves the workers to the group logins; once the old workers are gone, a plain
# --repair-roles takes the roles back from the host's login.
rm -f "$T/traffic.stop"
(
    while [ ! -e "$T/traffic.stop" ]; do
        for i in 1 2 3; do
            out=$(curl -s -m 20 -H "Host: c$i.localhost" -w '\n%{http_code}' \
                "http://127.0.0.1:$NGINX_PORT/")
            b=${out%$'\n'*}
            printf 'c%s %s %s\n' "$i" "${b%$'\n'}" "${out##*$'\n'}"
        done
    done > "$T/traffic.log"
) &
TRAFFIC=$!
PIDS+=("$TRAFFIC")
out=$(tn_cli check --repair-roles --keep-shared-login 2>&1)
assert_contains "$out" "repaired the roles of 3 tenants" "--repair-roles --keep-shared-login makes the three groups' memberships"
assert_contains "$out" "once tenancyd has reloaded, run tenancy check --repair-roles" "... and says what comes next"
assert_eq "$(held_c)" 3 \
    "the host's login still holds the three roles the running tenancyd uses"
assert_contains "$(tn_cli check --keep-shared-login 2>&1)" "consistent: 25 tenants" "check --keep-shared-login: nothing else to mend"
sleep 1
kill -HUP "$TN_PID"
wait_until 10 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fail "the reload did not happen"
no_shared_conns() { [ "$(psql -At -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'tenancy_app'")" = 0 ]; }
wait_until 20 no_shared_conns || fail "the old workers' connections on the shared login did not go"
out=$(tn_cli check 2>&1)
assert_contains "$out" "the host's login is still a member of its role t_c1" "after the reload: the login still a member"
out=$(tn_cli check --repair-roles 2>&1)
assert_contains "$out" "repaired the roles of 3 tenants" "--repair-roles takes the three back from the host's login"
out=$(tn_cli check 2>&1)
assert_contains "$out" "consistent: 25 tenants" "no drift after the move to groups"
assert_eq "$(held_c)" 0 \
    "the host's login holds none of them now"
sleep 1
touch "$T/traffic.stop"
wait "$TRAFFIC"
total=$(wc -l < "$T/traffic.log")
good=0
for i in 1 2 3; do
    good=$((good + $(grep -cxF "c$i $(body "c$i") 200" "$T/traffic.log")))
done
log "requests during the move: $good of $total answered 200 with their own tenant's body"
assert_ge "$good" 30 "requests answered during the move"
[ "$good" = "$total" ] || grep -vxF -e "c1 $(body c1) 200" -e "c2 $(body c2) 200" -e "c3 $(body c3) 200" \
    "$T/traffic.log" | cut -c1-160 | sort | uniq -c | head -5 | while read -r l; do log "during the move: $l"; done
assert_eq "$good" "$total" "every request during the move answered 200 with its own tenant's body"
for i in 1 2 3; do
    assert_eq "$(http / "c$i.localhost")" "$(body "c$i")" "c$i served through its group login after the reload"
done
assert_ge "$(psql -At -c "SELECT count(*) FROM pg_stat_activity WHERE usename LIKE 'tn\\_pgc\\_%'")" 1 \
    "the requests' connections log in as pgc's group logins"

# ---- export and import: read and written through the group logins ----------------------------
# g1's dump (its marker and the secret row only its schema holds) imported as x1: a schema of
# its own, its role a member of its group login only, served through it.
out=$(tn_cli export g1 -o "$T/g1.dump" 2>&1) || fail "export g1: $out"
assert_contains "$(cat "$T/g1.dump")" "${SECRET[g1]}" "g1's dump holds the row only its schema holds"
out=$(tn_cli import "$T/g1.dump" --slug x1 --no-domains 2>&1) || fail "import as x1: $out"
assert_eq "$(psql -At -c "SELECT string_agg(tenant, ',' ORDER BY id) FROM t_x1.marker")" "g1,${SECRET[g1]}" \
    "x1's schema holds g1's rows"
assert_eq "$(psql -At -c "SELECT count(*) || ' ' || bool_and(g.rolname ~ '^tn_pgg_[01]\$') FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.member WHERE m.roleid = 't_x1'::regrole")" \
    "1 true" "x1's role: a member of one group login of pgg, and of nothing else"
out=$(tn_cli check 2>&1)
assert_contains "$out" "consistent: 26 tenants" "tenancy check: x1 in its own group, no drift"
code=$(curl -s -m 30 -H "Host: x1.localhost" --data-binary "SELECT tenant FROM marker WHERE id = 2" \
    -o "$T/out" -w '%{http_code}' "http://127.0.0.1:$NGINX_PORT/sql")
assert_eq "$code" 200 "x1's own SQL through its group login"
assert_contains "$(cat "$T/out")" "${SECRET[g1]}" "... reads the row imported into its schema"
assert_eq "$(held)" 0 "the host's login holds no tenant role after the export and the import"

died=$(grep -c 'died from signal' "$T/tenancyd.log" || true)
assert_eq "$died" 0 "no worker died"

[ "$FAILED" = 0 ] && log "PASS"
exit "$FAILED"
