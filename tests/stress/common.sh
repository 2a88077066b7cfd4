# common.sh — what the stress suites share (sourced, bash), on top of tests/integration/lib.sh:
# the run length, a throwaway PostgreSQL cluster, provisioning of many storeapp tenants in a
# few seconds, reading hammer's JSON, and the result files.
#
# Length: STRESS_QUICK=1 in the environment (make check sets it) or --quick on the command
# line gives the quick run; --seconds N any other length; the default is the full run.
# Every suite writes $STRESS_OUT/<suite>.json (one object, the figures) and prints a table;
# STRESS_OUT defaults to the folder the suite runs from (the build folder under make).

. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

STRESS_OUT=${STRESS_OUT:-$PWD}
STORE_SO=$(cd "$top_builddir" && pwd)/tests/helpers/.libs/storeapp.so
STORE_FIX=$(cd "$top_srcdir" && pwd)/tests/fixtures/storeapp
JSON_CHECK=$HELPERS/json_check
# A fault injected on purpose must not leave a core file behind.
ulimit -c 0

# stress_args FULL QUICK "$@": sets SECS from --quick / --seconds N / STRESS_QUICK.
stress_args() {
    local full=$1 quick=$2
    shift 2
    SECS=$full
    [ "${STRESS_QUICK:-0}" = 1 ] && SECS=$quick
    while [ $# -gt 0 ]; do
        case $1 in
        --quick) SECS=$quick ;;
        --seconds) SECS=${2:?--seconds needs a number}; shift ;;
        *) echo "usage: $0 [--quick | --seconds N]" >&2; exit 2 ;;
        esac
        shift
    done
    [[ $SECS =~ ^[0-9]+$ ]] && [ "$SECS" -ge 5 ] || { echo "$0: --seconds must be >= 5" >&2; exit 2; }
}

# ---- PostgreSQL: a throwaway cluster, stopped on exit --------------------------------------
PG_DIR=
pg_up() {
    eval "$("$top_srcdir/tests/pg.sh" start)" || hard_error "cannot start PostgreSQL (tests/pg.sh)"
    PG_DIR=$TENANCY_TEST_PG_DIR
    trap 'rc=$?; [ -n "$PG_DIR" ] && "$top_srcdir/tests/pg.sh" stop "$PG_DIR" >/dev/null 2>&1; (exit $rc); cleanup' EXIT
    PG_BIN=$(printf '%s\n' /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)
    PG_BIN=${PG_BIN%/pg_ctl}
    [ -n "${PG_BINDIR:-}" ] && PG_BIN=$PG_BINDIR
    [ -x "$PG_BIN/pg_ctl" ] || hard_error "no pg_ctl found"
}
# pg_ctl_as_owner ARGS...: pg_ctl on the test cluster as its owner (the server refuses root).
pg_ctl_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" "$@"
    else
        "$PG_BIN/pg_ctl" -D "$PG_DIR/data" "$@"
    fi
}
psql_q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }

# ---- provisioning ---------------------------------------------------------------------------
# provision PREFIX N PLACEMENT: tenants PREFIX1..PREFIXN on PLACEMENT (sqlite or a placement
# name of the config). PREFIX1 is created by `tenancy tenant create` (migrations and seed, the
# real path); the others get a copy of what the app reads (SQLite: the whole file; schema
# mode: the tables marker and writes) with a marker of their own, and a registry row of their
# own, made in one run of sqlite3 or psql: `tenancy tenant create` costs tens of ms a tenant,
# too slow for a thousand in a quick run. Two calls may run at once (one per backend).
provision() {
    local pfx=$1 n=$2 placement=$3 db=$T/state/control.db t0=$SECONDS
    tn_cli tenant create "${pfx}1" --placement "$placement" > "$T/create-$pfx.out" 2>&1 ||
        fatal "creating ${pfx}1 on $placement failed: $(cat "$T/create-$pfx.out")"
    local row storage version i s
    row=$(sqlite3 -cmd '.timeout 10000' -separator ' ' "$db" \
        "SELECT storage, migration_version FROM tenants WHERE slug = '${pfx}1'")
    storage=${row% *}
    version=${row##* }
    [ -n "$storage" ] && [ -n "$version" ] || fatal "${pfx}1 has no storage in the registry"
    if [ "$placement" = sqlite ]; then
        local dir=${storage%/*}
        [ -f "$storage" ] || fatal "$storage missing"
        sqlite3 "$storage" "PRAGMA wal_checkpoint(TRUNCATE);" > /dev/null || fatal "checkpoint of $storage failed"
        # one tee writes all the copies (a cp per file costs a fork each)
        tee $(for i in $(seq 2 "$n"); do echo "$dir/$pfx$i.db"; done) < "$storage" > /dev/null ||
            fatal "copying $storage failed"
        for i in $(seq 2 "$n"); do
            echo "ATTACH '$dir/$pfx$i.db' AS x; PRAGMA x.synchronous = OFF;"
            echo "UPDATE x.marker SET tenant = '$pfx$i'; DETACH x;"
        done | sqlite3 ":memory:" || fatal "giving the copies of ${pfx}1 their markers failed"
    else
        # 100 schemas a transaction: one for all would run out of lock table slots. Each has
        # its tenant role, as tenancy makes it: the role owns the schema and what is in it.
        psql_q -c "DO \$\$ BEGIN FOR i IN 2..$n LOOP
            EXECUTE format('CREATE ROLE %1\$I LOGIN; GRANT %1\$I TO CURRENT_USER;
                CREATE SCHEMA %1\$I AUTHORIZATION %1\$I;
                CREATE TABLE %1\$I.marker (LIKE %2\$I.marker INCLUDING ALL);
                CREATE TABLE %1\$I.writes (LIKE %2\$I.writes INCLUDING ALL);
                ALTER TABLE %1\$I.marker OWNER TO %1\$I; ALTER TABLE %1\$I.writes OWNER TO %1\$I;
                INSERT INTO %1\$I.marker (id, tenant) VALUES (1, %3\$L)', 't_$pfx' || i, '$storage', '$pfx' || i);
            IF i % 100 = 0 THEN COMMIT; END IF; END LOOP; END \$\$" > /dev/null ||
            fatal "copying $storage failed"
    fi
    {
        echo ".timeout 10000"
        echo "BEGIN;"
        for i in $(seq 2 "$n"); do
            if [ "$placement" = sqlite ]; then s=${storage%/*}/$pfx$i.db; else s=t_$pfx$i; fi
            echo "INSERT INTO tenants (slug, name, state, placement, storage, migration_version, created_at, updated_at) VALUES ('$pfx$i', 'Tenant $pfx$i', 'active', '$placement', '$s', '$version', 0, 0);"
        done
        echo "COMMIT;"
    } | sqlite3 "$db" || fatal "registering the $pfx tenants failed"
    log "provisioned $n tenants ${pfx}1..$pfx$n on $placement in $((SECONDS - t0)) s"
}

# ---- hammer's JSON --------------------------------------------------------------------------
# jget FILE PATH: a value from a JSON file (json_check), empty when absent.
jget() { "$JSON_CHECK" "$2" < "$1" 2>/dev/null; }
# jstatus FILE CODE: how many responses had that status.
jstatus() { local v; v=$(jget "$1" ".status.$2"); echo "${v:-0}"; }
# jcodes FILE: the status codes seen, one "CODE COUNT" a line.
jcodes() { jget "$1" .status | tr -d '{} ' | tr ',' '\n' | tr -d '"' | tr ':' ' ' | sed '/^$/d'; }
# jerrors FILE: connect+reset+timeout+parse.
jerrors() {
    local sum=0 k v
    for k in connect reset timeout parse; do
        v=$(jget "$1" ".errors.$k")
        sum=$((sum + ${v:-0}))
    done
    echo "$sum"
}

# pid_running PID: the process exists and is not a zombie (a dead child of a killed master is
# reparented, and until its new parent reaps it `kill -0` still finds it).
pid_running() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}
