#!/bin/bash
# pgbouncer.sh — schema mode behind a real PgBouncer in transaction mode, where a session
# SET search_path silently serves the wrong tenant (research §5.1): default_pool_size = 1, so
# every client shares ONE server connection and each transaction may come from another
# client and another tenant. tests/helpers/scope_mix runs 4 worker processes, each with its
# own pool (one scoped connection to PgBouncer), 2,000 random (tenant -> SELECT its marker
# row) operations across 50 schemas, in autocommit and then in explicit transactions (some
# left open, failed, or with a session SET search_path to another tenant): zero wrong answers.
# It also checks that the server connection's session search_path is still empty after the
# scoped traffic (the scope is transaction-local), and that a missing PostgreSQL driver
# module is a clear error.
. "$(dirname "$0")/lib.sh"
PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
need "$PGBOUNCER" "$HELPERS/scope_mix"
PSQL=$(command -v psql || echo /usr/lib/postgresql/15/bin/psql)
need "$PSQL"

eval "$("$top_srcdir/tests/pg.sh" start)" || hard_error "cannot start PostgreSQL (tests/pg.sh)"
PG_DIR=$TENANCY_TEST_PG_DIR
trap 'rc=$?; "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT

# PgBouncer refuses to run as root: then it runs as postgres (as the cluster does), in a
# folder of its own that postgres may enter.
B=$T/pgb
mkdir -p "$B"
as_owner() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
    chmod 711 "$T"
    chown postgres "$B"
    as_owner() { runuser -u postgres -- "$@"; }
fi
PORT=6432   # names the socket file only: no TCP
cat > "$B/pgbouncer.ini" <<INI
[databases]
tenancy_test = host=$PG_DIR port=5432 dbname=tenancy_test user=postgres

[pgbouncer]
listen_addr =
listen_port = $PORT
unix_socket_dir = $B
auth_type = trust
auth_file = $B/userlist.txt
pool_mode = transaction
default_pool_size = 1
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 50
server_reset_query =
logfile = $B/pgbouncer.log
pidfile = $B/pgbouncer.pid
INI
echo '"postgres" ""' > "$B/userlist.txt"
[ "$(id -u)" -eq 0 ] && chown postgres "$B/pgbouncer.ini" "$B/userlist.txt"
# runuser's child, a grandchild of this shell: the cleanup stops it by its pidfile
as_owner "$PGBOUNCER" "$B/pgbouncer.ini" > "$T/pgbouncer-stdout.log" 2>&1 &
PIDS+=($!)
PIDFILES+=("$B/pgbouncer.pid")
wait_until 10 test -S "$B/.s.PGSQL.$PORT" || fatal "pgbouncer did not start"
VIA="postgres:host=$B port=$PORT dbname=tenancy_test user=postgres"
log "pgbouncer $("$PGBOUNCER" --version | head -1 | awk '{print $NF}'): transaction mode, one server connection"

# The schemas, made directly on the server.
"$HELPERS/scope_mix" setup "$TENANCY_TEST_PG" 50 > /dev/null || fatal "scope_mix setup failed"

# A plain client of PgBouncer: the server connection's session search_path (psql sets none).
server_path() {
    "$PSQL" -X -A -t -h "$B" -p "$PORT" -U postgres -d tenancy_test -c 'SHOW search_path' 2>&1
}

out=$("$HELPERS/scope_mix" run "$VIA" 50 2000 4 2> "$T/mix-autocommit.log")
rc=$?
log "autocommit: $out"
[ "$rc" = 0 ] || fail "autocommit run: $(head -5 "$T/mix-autocommit.log")"
case $out in *"backends=1 "*) ;; *) fail "the clients did not share one server connection: $out" ;; esac
path=$(server_path)
[ "$path" = '""' ] || [ -z "$path" ] ||
    fail "the server's session search_path is '$path' after scoped traffic (expected empty)"
log "ok: the shared server connection's session search_path is still empty"

out=$("$HELPERS/scope_mix" run "$VIA" 50 2000 4 txn 2> "$T/mix-txn.log")
rc=$?
log "transactions: $out"
[ "$rc" = 0 ] || fail "transaction run: $(head -5 "$T/mix-txn.log")"
case $out in *"backends=1 "*) ;; *) fail "the clients did not share one server connection: $out" ;; esac

# The control: a session SET search_path per request, as other tools do. It is expected to
# serve wrong tenants here; that it does shows this setup can see the leak at all.
out=$("$HELPERS/scope_mix" run "$VIA" 50 2000 4 naive 2> "$T/mix-naive.log")
log "control, session SET search_path: $out"
case $out in
*" wrong=0 "*) log "note: the control saw no wrong tenant this time (interleaving is chance)" ;;
*" wrong="*) log "ok: the control leaks through PgBouncer, as documented" ;;
*) fail "the control did not run: $(head -3 "$T/mix-naive.log")" ;;
esac

# The same traffic straight to PostgreSQL (each worker its own backend).
out=$("$HELPERS/scope_mix" run "$TENANCY_TEST_PG" 50 2000 4 txn 2> "$T/mix-direct.log")
rc=$?
log "direct: $out"
[ "$rc" = 0 ] || fail "direct run: $(head -5 "$T/mix-direct.log")"

# No driver module: a clear error, not a crash.
err=$(TENANCY_PGDRIVER=$T/no-such-pgdriver.so "$HELPERS/scope_mix" run "$VIA" 2 2 1 2>&1)
case $err in
*"PostgreSQL driver cannot be loaded"*"TENANCY_PGDRIVER"*) log "ok: a missing driver module is a clear error" ;;
*) fail "a missing driver module: $err" ;;
esac

cp "$B/pgbouncer.log" "$T/pgbouncer.log" 2>/dev/null
grep -E 'WARNING|ERROR|FATAL' "$T/pgbouncer.log" | grep -v 'server_reset_query' | head -5 |
    while read -r l; do log "pgbouncer: $l"; done
[ "$FAILED" = 0 ] && log "PASS"
exit 0
