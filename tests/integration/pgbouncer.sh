#!/bin/bash
# pgbouncer.sh — schema mode behind a real PgBouncer in transaction mode, through the whole
# chain: nginx (the recommended config, generated from doc/examples/nginx.conf) -> tenancyd
# (its workers log in as one plain role, tenant roles on) -> PgBouncer with default_pool_size
# = 1 -> PostgreSQL. Every worker is a PgBouncer client of its own and all of them share ONE
# server connection, so each transaction may follow another worker's, for another tenant, on
# the same server session: a schema set on the session (research §5.1) serves the wrong
# tenant here. Each tenant's schema holds a marker only it has (its slug, from the storeapp
# fixtures' seed); tests/helpers/scopeapp answers it with current_user.
#
# The promise: concurrent requests for random tenants, autocommit (GET /) and explicit
# transactions (GET /txn) at once, every one answered 200 with its own tenant's marker and
# role (hammer's check: 0 wrong, every request verified); the shared server session's
# search_path is still empty afterwards; and again while the control runs beside them.
# The control (GET /session) sets the tenant's schema on the SESSION and reads unqualified
# in a transaction of its own: it MUST serve other tenants' markers (wrong > 0), else the
# test fails, because a setup that cannot show the leak proves nothing.
#
# `tenancy check` through the same pool must leave the login's server session writable for
# the next client. The placement's statement_timeout rides with each of tenancyd's
# transactions and never stays on the shared server session: a request runs with it whatever
# a foreign client set there, `tenancy migrate` (which sets none) is not cancelled by it, nor
# is a move waiting for a writer, and `tenancy export` (a read-only snapshot) leaves the
# session writable too. Then the same traffic again after the placement moves to two group
# logins (login = group): one server connection per group login, every answer still the
# tenant's own.
#
# Then the storage layer alone (tests/helpers/scope_mix): 4 processes with a pool each
# through the same PgBouncer, 1,500 explicit transactions across 30 schemas, some left
# open, failed, with a session SET search_path or reading another tenant's table by its
# qualified name (refused by its role): zero wrong answers, one server connection; the same
# straight to PostgreSQL; and a missing driver module is a clear error.
. "$(dirname "$0")/lib.sh"
PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
SCOPEAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/scopeapp.so
FIX=$top_srcdir/tests/fixtures/storeapp
need "$PGBOUNCER" psql curl nginx "$HELPERS/hammer" "$HELPERS/json_check" "$HELPERS/scope_mix" \
    "$TENANCY_CLI" "$SCOPEAPP"
NT=24        # tenants
MAIN_N=800   # requests per route in each checked run: every one must be verified
MIX=30       # scope_mix: schemas, and operations per run below
MIX_OPS=1500

pg_cluster

# The host's login, as README recommends: no superuser, may create the tenants' roles, owns
# the shared database.
psql -q -v ON_ERROR_STOP=1 > /dev/null <<'SQL' || fatal "the login role"
CREATE ROLE tenancy_app LOGIN CREATEROLE;
ALTER DATABASE tenancy_test OWNER TO tenancy_app;
SQL

# ---- PgBouncer ------------------------------------------------------------------------------
# It refuses to run as root: then it runs as postgres (as the cluster does), in a folder of
# its own that postgres may enter.
B=$T/pgb
mkdir -p "$B"
as_owner() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
    chmod 711 "$T"
    chown postgres "$B"
    as_owner() { runuser -u postgres -- "$@"; }
fi
PORT=6432   # names the socket file only: no TCP
# No user in the database line: each client's own, so tenancyd's login (tenancy_app) and
# scope_mix's (postgres) get a pool each, of one server connection.
cat > "$B/pgbouncer.ini" <<INI
[databases]
tenancy_test = host=$PG_DIR port=5432 dbname=tenancy_test

[pgbouncer]
listen_addr =
listen_port = $PORT
unix_socket_dir = $B
auth_type = trust
auth_file = $B/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = 1
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 50
server_reset_query =
logfile = $B/pgbouncer.log
pidfile = $B/pgbouncer.pid
INI
# (and the group logins of the section on login = group: PgBouncer knows every login it
# takes, trusted here like the others)
printf '"postgres" ""\n"tenancy_app" ""\n"tn_pgs_0" ""\n"tn_pgs_1" ""\n' > "$B/userlist.txt"
[ "$(id -u)" -eq 0 ] && chown postgres "$B/pgbouncer.ini" "$B/userlist.txt"
# runuser's child, a grandchild of this shell: the cleanup stops it by its pidfile
as_owner "$PGBOUNCER" "$B/pgbouncer.ini" > "$T/pgbouncer-stdout.log" 2>&1 &
PIDS+=($!)
PIDFILES+=("$B/pgbouncer.pid")
wait_until 10 test -S "$B/.s.PGSQL.$PORT" || fatal "pgbouncer did not start"
log "pgbouncer $("$PGBOUNCER" --version | head -1 | awk '{print $NF}'): transaction mode, one server connection per user"
VIA="host=$B port=$PORT dbname=tenancy_test"

# ---- tenancyd and its tenants, every connection through PgBouncer ----------------------------
# The tenancyd.conf lines doc/examples/nginx.conf asks for go with its nginx config.
mkdir -p "$T/state"
cp -r "$FIX/migrations" "$T/migrations"   # a slow migration is added below
# conf [LINE...]: this test's tenancyd.conf, with the placement's extra lines
conf() {
    tn_conf "app = $SCOPEAPP" "pm.max_children = 4" "request_timeout = 10s" \
        "keepalive_timeout = 75s" "queue_timeout = 60s" "max_body = 8M" \
        "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
        "tenant.max_workers = 100%" \
        "storage.migrations = $T/migrations" "storage.seed = $FIX/seed.sql" \
        "placement.pgs.dsn = postgres:$VIA user=tenancy_app" "placement.pgs.mode = schema" \
        "placement.pgs.statement_timeout = 1s" "$@"
}
conf
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
[ -s "$T/state/role.key" ] || fail "tenancy init made no role key"
for i in $(seq 1 "$NT"); do
    tn_cli tenant create "t$i" --placement pgs > "$T/create.out" 2>&1 ||
        fatal "creating t$i: $(cat "$T/create.out")"
done
# Each schema is owned by its tenant's role and holds its own slug, and nothing else does.
q=""
for i in $(seq 1 "$NT"); do q="$q${q:+ UNION ALL }SELECT tenant FROM t_t$i.marker"; done
assert_eq "$(psql -At -c "SELECT string_agg(tenant, ',' ORDER BY tenant) FROM ($q) m")" \
    "$(seq 1 "$NT" | sed 's/^/t/' | LC_ALL=C sort | paste -sd,)" "each schema holds its own marker, once"
assert_eq "$(psql -At -c "SELECT count(*) FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
    WHERE n.nspname LIKE 't\_t%' AND r.rolname = n.nspname AND NOT r.rolsuper")" "$NT" \
    "each schema is owned by a tenant role of its own"
tn_start

# ---- nginx: doc/examples/nginx.conf, with this test's socket, port and names -----------------
NGINX_PORT=$(free_port)
mkdir -p "$T/nginx"
EX=$top_srcdir/doc/examples/nginx.conf
sed -e "s#^\( *server \)unix:/run/tenancy/tenancyd.sock;#\1unix:$T/fcgi.sock;#" \
    -e "s#^\( *listen \)80 default_server;#\1127.0.0.1:$NGINX_PORT default_server;#" \
    -e "s#^\( *listen \)80;#\1127.0.0.1:$NGINX_PORT;#" \
    -e '/^ *listen \[::\]:80/d' \
    -e 's#^\( *server_name \)acme\.example\.com \*\.saas\.example;#\1.localhost;#' \
    -e 's#^\( *include \)fastcgi_params;#\1/etc/nginx/fastcgi_params;#' "$EX" > "$T/site.conf"
# The example must still be what this test adapts; and what it is about must be in it.
for want in "server unix:$T/fcgi.sock;" "listen 127.0.0.1:$NGINX_PORT default_server;" \
    "listen 127.0.0.1:$NGINX_PORT;" "server_name .localhost;" "fastcgi_keep_conn on;" \
    "fastcgi_next_upstream off;" "keepalive 64;" "include /etc/nginx/fastcgi_params;"; do
    grep -q "^ *$want" "$T/site.conf" || fatal "doc/examples/nginx.conf no longer has '$want' where this test expects it"
done
{ nginx_conf_head; echo "    include $T/site.conf;"; echo "}"; } > "$T/nginx.conf"
nginx -t -c "$T/nginx.conf" -e "$T/nginx-error.log" > "$T/nginx-t.log" 2>&1 ||
    fatal "the example nginx config is invalid: $(cat "$T/nginx-t.log")"
nginx -c "$T/nginx.conf" -e "$T/nginx-error.log" >> "$T/nginx.log" 2>&1 &
PIDS+=("$!")
wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NGINX_PORT" || fatal "nginx did not start"

# A scoped answer: the tenant's own marker, read as its own role.
EXPECT='"tenant":"t%d","data":"t%d","role":"t_t%d"'
assert_eq "$(http / t7.localhost)" '{"tenant":"t7","data":"t7","role":"t_t7"}' \
    "t7 reads its own marker as its own role"
assert_eq "$(http /txn t8.localhost)" '{"tenant":"t8","data":"t8","role":"t_t8"}' \
    "t8 reads its own marker in a transaction"

# hammer_bg NAME PATH N EXPECT [args]: N requests for random tenants on PATH in the
# background, 8 connections, each 2xx body checked against EXPECT; the summary in
# $T/NAME.log and the numbers in $T/NAME.json.
HPIDS=()
hammer_bg() {
    local name=$1 path=$2 n=$3 expect=$4
    shift 4
    "$HELPERS/hammer" -p "$NGINX_PORT" -c 8 -n "$n" -d 30 -H 't%d.localhost' -N "$NT" \
        -u "$path" -e "$expect" --json "$T/$name.json" "$@" 2> "$T/$name.log" &
    HPIDS+=($!)
    PIDS+=($!)   # stopped by the cleanup if the test ends before them
}
hammer_wait() {
    for p in "${HPIDS[@]}"; do wait "$p"; done
    HPIDS=()
}
jv() { "$HELPERS/json_check" "$2" < "$T/$1.json" 2>/dev/null || echo 0; }
# check_all NAME WHAT: every request answered 200 with its own tenant's marker and role.
check_all() {
    local name=$1 what=$2 ok wrong
    wrong=$(jv "$name" .wrong)
    ok=$(($(jv "$name" .status.200) - wrong))
    log "$name: $(tail -1 "$T/$name.log")"
    assert_eq "$wrong" 0 "$what: no answer carries another tenant's marker"
    assert_ge "$ok" "$MAIN_N" "$what: answers verified as the tenant's own"
    [ "$(jv "$name" .ok)" = true ] || fail "$what: hammer saw errors: $(tail -1 "$T/$name.log")"
}
# The server connections behind tenancyd's pool, and the PgBouncer clients sharing them.
servers() {
    psql -At -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'tenancy_app'"
}
clients() {
    psql -At -h "$B" -p "$PORT" -U postgres -d pgbouncer -c 'SHOW CLIENTS' |
        awk -F'|' '$2 == "tenancy_app"' | wc -l
}

# ---- the host's scope, through PgBouncer -------------------------------------------------------
hammer_bg auto / "$MAIN_N" "$EXPECT"
hammer_bg txn /txn "$MAIN_N" "$EXPECT"
hammer_wait
check_all auto "autocommit requests"
check_all txn "requests in explicit transactions"
assert_eq "$(servers)" 1 "tenancyd's requests ran on one server connection"
assert_ge "$(clients)" 2 "PgBouncer clients (tenancyd workers) sharing it"
# A plain client of the same pool gets that server connection: its session search_path is
# the empty one the driver sets at connect (psql's own would be "$user", public).
path=$(psql -At -h "$B" -p "$PORT" -U tenancy_app -d tenancy_test -c 'SHOW search_path' 2>&1)
if [ "$path" = '""' ] || [ -z "$path" ]; then
    log "ok: the shared server session's search_path is still empty"
else
    fail "the shared server session's search_path is '$path' after scoped traffic (expected empty)"
fi

# ---- the control: the schema set on the session -------------------------------------------------
# It must leak: answers carry other tenants' markers (its role is the shared login's, so
# only the marker is checked). Errors are allowed (a session path that another worker's
# session wipe emptied resolves nothing); only wrong answers count. The scoped routes run
# beside it and must still be right.
hammer_bg control /session 400 '"tenant":"t%d","data":"t%d"' --expect-status any
hammer_bg auto2 / "$MAIN_N" "$EXPECT"
hammer_bg txn2 /txn "$MAIN_N" "$EXPECT"
hammer_wait
log "control: $(tail -1 "$T/control.log")"
leaks=$(jv control .wrong)
assert_ge "$(jv control .status.200)" 40 "control: answers"
assert_ge "$leaks" 1 "control: a session search_path served other tenants' markers through PgBouncer"
check_all auto2 "autocommit requests beside the control"
check_all txn2 "transactions beside the control"
assert_eq "$(servers)" 1 "still one server connection"

# ---- tenancy check through PgBouncer leaves the shared server session writable ----------------
# (its inventory once opened a read-only connection, whose session default then made the
# next client's transactions on that server session read-only: the repair below failed)
out=$(tn_cli check 2>&1)
assert_contains "$out" "in $NT tenants" "tenancy check through PgBouncer read every tenant"
w=$(psql -qAt -h "$B" -p "$PORT" -U tenancy_app -d tenancy_test \
    -c "CREATE TEMP TABLE pb_write (a int)" -c "SELECT current_setting('default_transaction_read_only')" 2>&1)
assert_eq "$w" "off" "the login's next client of the pool may write after tenancy check"

# ---- the timeout rides with each transaction, never on the shared server session ---------------
pool_psql() { psql -qAt -h "$B" -p "$PORT" -U tenancy_app -d tenancy_test "$@" 2>&1; }
assert_eq "$(pool_psql -c 'SHOW statement_timeout')" 0 \
    "the shared server session holds the server's statement_timeout after tenancyd's traffic"
# One statement of this migration outlasts the requests' timeout (t1's): on a session that
# kept tenancyd's timeout it would be cancelled.
echo "SELECT pg_sleep(CASE WHEN current_schema() = 't_t1' THEN 1.5 ELSE 0 END);" \
    > "$T/migrations/0002_slow.sql"
out=$(tn_cli migrate --all 2>&1) || fail "tenancy migrate through PgBouncer: $out"
assert_eq "$(psql -At -c "SELECT count(*) FROM t_t1.tenancy_migrations WHERE version = '0002'")" 1 \
    "t1's slow migration applied through the pool tenancyd's requests use"
out=$(tn_cli export t4 -o "$T/t4.dump" 2>&1) || fail "tenancy export through PgBouncer: $out"
assert_contains "$(cat "$T/t4.dump")" '"t4"' "the export holds t4's marker"
w=$(pool_psql -c "CREATE TEMP TABLE pb_write2 (a int)" \
    -c "SELECT current_setting('default_transaction_read_only')")
assert_eq "$w" "off" "the login's next client of the pool may write after tenancy export"
assert_eq "$(http / t4.localhost)" '{"tenant":"t4","data":"t4","role":"t_t4"}' \
    "t4 still reads its own marker"
# A move waits for a writer in flight (its SHARE lock, up to 30 s), not for the requests'
# timeout: t5's marker is held for 3 s by another session when the move starts (no drain);
# t5 goes to SQLite (its definitions copied: the slow migration is PostgreSQL's) and back,
# and reads its own marker again.
psql -q -c "BEGIN; LOCK TABLE t_t5.marker IN ROW EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT" &
holder=$!
lock_held() { [ "$(psql -At -c "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'marker' AND c.relnamespace = 't_t5'::regnamespace AND l.mode = 'RowExclusiveLock' AND l.granted")" = 1 ]; }
wait_until 5 lock_held || fail "the writer in flight did not take its lock"
out=$(tn_cli move t5 --to sqlite --drop-source --copy-definitions --drain 0 2>&1) ||
    fail "moving t5 behind a writer in flight: $out"
wait "$holder"
assert_contains "$(tn_cli tenant show t5 2>&1)" "sqlite" "t5 moved to SQLite after the writer finished"
out=$(tn_cli move t5 --to pgs --drop-source 2>&1) || fail "moving t5 back: $out"
assert_eq "$(http / t5.localhost)" '{"tenant":"t5","data":"t5","role":"t_t5"}' \
    "t5 reads its own marker after the moves"
# So does a purge, whose DROP waits for a reader in flight: t24's marker is read in a
# transaction for 3 s when the purge starts.
tn_cli tenant delete t24 > /dev/null 2>&1 || fail "deleting t24"
psql -q -c "BEGIN; LOCK TABLE t_t24.marker IN ACCESS SHARE MODE; SELECT pg_sleep(3); COMMIT" &
holder=$!
reader_held() { [ "$(psql -At -c "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'marker' AND c.relnamespace = 't_t24'::regnamespace AND l.granted")" -ge 1 ]; }
wait_until 5 reader_held || fail "the reader in flight did not take its lock"
out=$(tn_cli purge t24 --now 2>&1) || fail "purging t24 behind a reader in flight: $out"
wait "$holder"
assert_eq "$(psql -At -c "SELECT count(*) FROM pg_namespace WHERE nspname = 't_t24'")" 0 \
    "t24's schema dropped once the reader finished"
NT=23   # t24 is gone: the requests and checks below cover t1..t23
pool_psql -c "SET statement_timeout = '7s'" > /dev/null   # a foreign client's session setting
assert_eq "$(http /timeout t3.localhost)" '{"tenant":"t3","data":"1s","role":"t_t3"}' \
    "a request runs with the placement's timeout, not the one a foreign client left"
pool_psql -c "RESET statement_timeout" > /dev/null

# ---- the same through group logins (placement.pgs.login = group) ------------------------------
# The placement moved to two group logins (its configuration, --repair-roles, a reload):
# PgBouncer keeps a pool of one server connection per login, so each group's tenants share
# one server session, and every answer must still be its own tenant's, as its own role.
conf "placement.pgs.login = group" "placement.pgs.login_groups = 2"
out=$(tn_cli check --repair-roles 2>&1)
assert_contains "$out" "repaired the roles of $NT tenants" "the $NT tenants moved to their group logins"
kill -HUP "$TN_PID"
wait_until 10 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fail "the reload did not happen"
hammer_bg gauto / "$MAIN_N" "$EXPECT"
hammer_bg gtxn /txn "$MAIN_N" "$EXPECT"
hammer_wait
check_all gauto "autocommit requests through the group logins"
check_all gtxn "transactions through the group logins"
for g in 0 1; do
    assert_eq "$(psql -At -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'tn_pgs_$g'")" 1 \
        "group login tn_pgs_$g: its tenants' requests on one server connection"
done

# ---- the storage layer alone: scope_mix ---------------------------------------------------------
"$HELPERS/scope_mix" setup "$TENANCY_TEST_PG" "$MIX" > /dev/null || fatal "scope_mix setup failed"
out=$("$HELPERS/scope_mix" run "postgres:$VIA user=postgres" "$MIX" "$MIX_OPS" 4 txn 2> "$T/mix-txn.log")
rc=$?
log "scope_mix, transactions through PgBouncer: $out"
[ "$rc" = 0 ] || fail "scope_mix through PgBouncer: $(head -5 "$T/mix-txn.log")"
case $out in *"backends=1 "*) ;; *) fail "the clients did not share one server connection: $out" ;; esac

# The same traffic straight to PostgreSQL (each worker its own backend).
out=$("$HELPERS/scope_mix" run "$TENANCY_TEST_PG" "$MIX" "$MIX_OPS" 4 txn 2> "$T/mix-direct.log")
rc=$?
log "scope_mix, direct: $out"
[ "$rc" = 0 ] || fail "scope_mix direct: $(head -5 "$T/mix-direct.log")"

# No driver module: a clear error, not a crash.
err=$(TENANCY_PGDRIVER=$T/no-such-pgdriver.so "$HELPERS/scope_mix" run "$TENANCY_TEST_PG" 2 2 1 2>&1)
case $err in
*"PostgreSQL driver cannot be loaded"*"TENANCY_PGDRIVER"*) log "ok: a missing driver module is a clear error" ;;
*) fail "a missing driver module: $err" ;;
esac

cp "$B/pgbouncer.log" "$T/pgbouncer.log" 2>/dev/null
grep -E 'WARNING|ERROR|FATAL' "$T/pgbouncer.log" | head -5 |
    while read -r l; do log "pgbouncer: $l"; done
[ "$FAILED" = 0 ] && log "PASS"
exit 0
