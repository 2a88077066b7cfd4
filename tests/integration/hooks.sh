#!/bin/bash
# hooks.sh — jobs.hooks = auto (the default) through the real host and the real command: a
# lifecycle hook is queued only when it can reach an app. Each check counts the hook rows the
# command left in the registry for one tenant it created:
#
#   no host       before tenancyd ever ran, the created hook is queued (whichever apps start
#                 get it), and the job worker runs it once it starts
#   no handler    tenancyd's job worker runs hello, which has no job handler: it says so in
#                 job_hosts, and a tenant created then gets no hook
#   on            jobs.hooks = on in the command's configuration queues it all the same
#   reload        SIGHUP to an app with a job handler (tests/helpers/jobapp.c): the host says
#                 so, and the next tenant's hook is queued and run; back to hello: none again
#   stopped       tenancyd stopped: its row is gone, and a hook is queued again
. "$(dirname "$0")/lib.sh"
need sqlite3 "$TENANCY_CLI"
JOBAPP=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/jobapp.so
FIX=$top_srcdir/tests/fixtures/jobapp
[ -f "$JOBAPP" ] || fatal "no $JOBAPP (make check builds it)"
[ -f "$HELLO_SO" ] || fatal "no $HELLO_SO (make builds it)"

mkdir -p "$T/state" "$T/migrations"
cp "$FIX"/migrations/*.sql "$T/migrations/"
export JOBAPP_CENTRAL_FILE=$T/central.out
# jobapp's tenants need its tables (the seed and migrations), hello's tenants do not mind them
tn_conf "app = $HELLO_SO" "pm.jobs = 1" "jobs.poll = 200ms" "jobs.timeout = 20s" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "storage.migrations = $T/migrations" "storage.seed = $FIX/seed.sql"
tn_cli init > "$T/init.out" 2>&1 || fatal "tenancy init failed: $(cat "$T/init.out")"
REG=$T/state/control.db

# hooks_of SLUG: the created hooks queued for the tenant (any state)
hooks_of() {
    sqlite3 "$REG" "SELECT count(*) FROM jobs j JOIN tenants t ON t.id = j.tenant_id
                    WHERE t.slug = '$1' AND j.name = 'tenancy.created'"
}
hook_state() {
    sqlite3 "$REG" "SELECT j.state FROM jobs j JOIN tenants t ON t.id = j.tenant_id
                    WHERE t.slug = '$1' AND j.name = 'tenancy.created'"
}
host_says() { sqlite3 "$REG" "SELECT group_concat(hooks) FROM job_hosts"; }
# for wait_until, which runs its command again each time: the values read then, not now
host_is() { test "$(host_says)" = "$1"; }
state_is() { test "$(hook_state "$1")" = "$2"; }
create() {   # create SLUG [CONFIG]
    "$TENANCY_CLI" -c "${2:-$T/tenancyd.conf}" tenant create "$1" > "$T/create.out" 2>&1 ||
        fatal "creating $1: $(cat "$T/create.out")"
}
set_app() {   # set_app PATH: the root app of the configuration
    sed -i "s|^app = .*|app = $1|" "$T/tenancyd.conf"
}

# ---- no host has run yet ------------------------------------------------------------------------
create early
assert_eq "$(hooks_of early)" 1 "no job worker has run: early's created hook is queued"
assert_eq "$(sqlite3 "$REG" "SELECT count(*) FROM job_hosts")" 0 "no host has said anything"

# ---- hello, no job handler ------------------------------------------------------------------------
tn_start
wait_until 10 host_is 0 ||
    fatal "the job worker did not say that its apps take no hooks (job_hosts: '$(host_says)')"
wait_until 10 state_is early done ||
    fail "early's hook was not run by the job worker (state '$(hook_state early)')"
create quiet
assert_eq "$(hooks_of quiet)" 0 "the host's app has no job handler: no hook queued for quiet"

# ---- jobs.hooks = on queues it all the same ------------------------------------------------------
sed 's/^jobs.poll = .*/&\njobs.hooks = on/' "$T/tenancyd.conf" > "$T/on.conf"
grep -q '^jobs.hooks = on$' "$T/on.conf" || fatal "cannot write on.conf"
create loud "$T/on.conf"
assert_eq "$(hooks_of loud)" 1 "jobs.hooks = on: loud's hook is queued"
sed 's/^jobs.hooks = on$/jobs.hooks = off/' "$T/on.conf" > "$T/off.conf"
create silent "$T/off.conf"
assert_eq "$(hooks_of silent)" 0 "jobs.hooks = off: no hook for silent"

# ---- a reload to an app with a job handler, and back ---------------------------------------------
set_app "$JOBAPP"
kill -HUP "$TN_PID"
wait_until 15 host_is 1 ||
    fatal "after the reload to jobapp the host did not say that it takes hooks ('$(host_says)')"
create heard
assert_eq "$(hooks_of heard)" 1 "jobapp has a job handler: heard's hook is queued"
wait_until 15 state_is heard done ||
    fail "heard's hook was not run (state '$(hook_state heard)')"
set_app "$HELLO_SO"
kill -HUP "$TN_PID"
wait_until 15 host_is 0 ||
    fatal "after the reload back to hello the host still says '$(host_says)'"
create quiet2
assert_eq "$(hooks_of quiet2)" 0 "back on hello: no hook queued for quiet2"

# ---- tenancyd stopped -----------------------------------------------------------------------------
kill -TERM "$TN_PID"
wait_until 15 bash -c "! kill -0 $TN_PID 2> /dev/null" || fatal "tenancyd did not stop"
assert_eq "$(sqlite3 "$REG" "SELECT count(*) FROM job_hosts")" 0 "the stopped host's row is gone"
create late
assert_eq "$(hooks_of late)" 1 "no job worker runs: late's created hook is queued"
assert_eq "$(hook_state late)" queued "... and waits for a job worker"

exit 0
