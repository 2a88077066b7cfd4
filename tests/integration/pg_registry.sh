#!/bin/bash
# pg_registry.sh — two hosts sharing one tenant registry in a real PostgreSQL: each host
# (a tenancyd with its own state_dir, hence its own generation file) runs a registry watcher;
# a change made with the `tenancy` command on host A is seen by host B's workers at once
# (NOTIFY -> B's watcher -> B's generation); a host started while PostgreSQL is down serves
# 503 for tenants and recovers when it comes back.
. "$(dirname "$0")/lib.sh"
need "$HELPERS/fcgi_probe" "$TENANCY_CLI"
pg_cluster

host_conf() {   # host_conf NAME: write $T/NAME.conf for one host
    mkdir -p "$T/$1"
    cat > "$T/$1.conf" <<CONF
listen = $T/$1.sock
app = $DEMO_SO
access_log = $T/$1-access.log
pm = static
pm.max_children = 2
state_dir = $T/$1
registry = $TENANCY_TEST_PG
tenant.resolvers = subdomain
tenant.base_domains = example.test
tenant.host_params = HTTP_HOST
CONF
}
start_host() {   # start_host NAME
    # Emptied here, not by the launch's own redirection: that one runs in the background
    # job, and the wait below could otherwise read the host's earlier "ready" line (a
    # restart) before the new process has even bound its socket.
    : > "$T/$1.log"
    "$TENANCYD" -c "$T/$1.conf" >> "$T/$1.log" 2>&1 &
    PIDS+=($!)
    eval "PID_$1=$!"
    wait_until 10 grep -q ' ready: ' "$T/$1.log" || fatal "host $1 did not start"
}
ask() {   # ask HOST-NAME TENANT -> the body (or the failure line)
    "$HELPERS/fcgi_probe" -t 10 -H "$2.example.test" -B "$T/$1.sock" request 2>/dev/null
}
status_of() {
    "$HELPERS/fcgi_probe" -t 10 -H "$2.example.test" "$T/$1.sock" request 2>/dev/null |
        grep -o 'status=[0-9]*' | cut -d= -f2
}

host_conf a
host_conf b
"$TENANCY_CLI" -c "$T/a.conf" init > /dev/null || fatal "init on PostgreSQL failed"
"$TENANCY_CLI" -c "$T/a.conf" tenant create acme --name "Acme" > /dev/null || fatal "create failed"
start_host a
start_host b
wait_until 10 grep -q 'registry watcher: listening' "$T/b.log" || fail "host b's watcher is not listening"
assert_contains "$(ask a acme)" '"tenant":"acme"' "host a serves acme"
assert_contains "$(ask b acme)" '"tenant":"acme"' "host b serves acme (now cached there)"
assert_eq "$(status_of b newco)" 404 "host b: newco unknown (cached as unknown)"

# A change on host a, seen by host b's workers without waiting for any TTL.
"$TENANCY_CLI" -c "$T/a.conf" tenant suspend acme > /dev/null
"$TENANCY_CLI" -c "$T/a.conf" tenant create newco --name "NewCo" > /dev/null
ok=0
for i in $(seq 1 50); do
    [ "$(status_of b acme)" = 403 ] && [ "$(status_of b newco)" = 200 ] && { ok=1; break; }
    sleep 0.1
done
assert_eq "$ok" 1 "host b sees host a's changes (suspended, created) within moments"
for i in $(seq 1 10); do
    s=$(status_of b acme)
    [ "$s" = 403 ] || fail "a host b worker still serves suspended acme ($s)"
done
log "ok: every host b worker refuses suspended acme"

# PostgreSQL down: tenant requests get 503, the host stays up, and recovers.
"$top_srcdir/tests/pg.sh" stop "$PG_DIR" > /dev/null 2>&1
"$TENANCY_CLI" -c "$T/a.conf" tenant resume acme > /dev/null 2>&1 && fail "the CLI claims success with PostgreSQL down"
kill -QUIT "$PID_a"; wait "$PID_a" 2>/dev/null
start_host a
s=$(status_of a newco)
assert_eq "$s" 503 "registry unreachable: 503, not a crash"
kill -0 "$PID_a" && log "ok: the host stays up without its registry" || fail "host a died"
eval "$("$top_srcdir/tests/pg.sh" start)" || hard_error "cannot restart PostgreSQL"
PG_DIR=$TENANCY_TEST_PG_DIR
# A fresh cluster: recreate what the test needs and point both hosts at it.
sed -i "s|^registry = .*|registry = $TENANCY_TEST_PG|" "$T/a.conf" "$T/b.conf"
"$TENANCY_CLI" -c "$T/a.conf" init > /dev/null
rm -rf "$T/a/tenants"   # the old registry's tenants' files: `tenant create` makes storage
"$TENANCY_CLI" -c "$T/a.conf" tenant create newco --name "NewCo" > /dev/null
kill -HUP "$PID_a"
wait_until 10 grep -q 'reloaded: generation 2' "$T/a.log" || fail "reload of host a"
ok=0
for i in $(seq 1 30); do
    [ "$(status_of a newco)" = 200 ] && { ok=1; break; }
    sleep 0.2
done
assert_eq "$ok" 1 "host a serves again once the registry is back"
