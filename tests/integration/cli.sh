#!/bin/bash
# cli.sh — the `tenancy` command line, run for real against a SQLite registry in a temporary
# state_dir and against a throwaway PostgreSQL (tests/pg.sh), with the same cases.
#
# Checks every command, the error messages and exit statuses (0 ok, 1 failed, 2 usage), that
# with --json stdout always holds exactly one JSON document (tests/helpers/json_check), that
# each change bumps the generation file exactly once, and that a refused command changes
# nothing (the whole registry, as `tenant list --json` prints it, and the generation).
#
# Owns: these cases. Must not: touch the registry except through the binary (the one
# exception: reading the generation file, as a worker would).
. "$(dirname "$0")/lib.sh"
TENANCY=${TENANCY:-$top_builddir/tenancy/tenancy}
JSON_CHECK=${JSON_CHECK:-$HELPERS/json_check}
need "$TENANCY" "$JSON_CHECK" od

# ---- PostgreSQL, stopped on exit before lib.sh's cleanup -------------------------------------
PG_DIR=
stop_pg() { [ -n "$PG_DIR" ] && bash "$top_srcdir/tests/pg.sh" stop "$PG_DIR"; PG_DIR=; }
trap 'rc=$?; stop_pg; (exit $rc); cleanup' EXIT
pgenv=$(bash "$top_srcdir/tests/pg.sh" start tenancy_cli) ||
    hard_error "PostgreSQL could not be started (tests/pg.sh start)"
eval "$pgenv"
PG_DIR=$TENANCY_TEST_PG_DIR

# ---- helpers ---------------------------------------------------------------------------------
CONF= STATE=
RC=0 OUT= ERR=

run() {   # run ARGS...: the binary with $CONF; sets RC, OUT, ERR
    "$TENANCY" -c "$CONF" "$@" > "$T/out" 2> "$T/err"
    RC=$?
    OUT=$(cat "$T/out")
    ERR=$(cat "$T/err")
}
jrun() {   # jrun ARGS...: run --json; stdout must be exactly one JSON document
    run --json "$@"
    "$JSON_CHECK" < "$T/out" 2> "$T/jerr" ||
        fail "--json $*: stdout is not one JSON document ($(cat "$T/jerr")): $(head -c 300 "$T/out")"
}
jget() { "$JSON_CHECK" "$1" < "$T/out"; }   # a value of the last jrun's output
gen() { od -An -t u8 -N8 "$STATE/registry.gen" 2>/dev/null | tr -d ' '; }
snap() { "$TENANCY" -c "$CONF" --json tenant list --limit 10000 2>/dev/null; echo "gen=$(gen)"; }

# change WHAT ARGS...: must succeed (text mode), bump the generation exactly once ($BUMPS
# times when set: a create bumps twice, once for the tenant in state provisioning and once
# when its storage is ready).
change() {
    local what=$1 g0
    shift
    g0=$(gen)
    run "$@"
    if [ "$RC" != 0 ]; then fail "$what: exit $RC: $ERR"; return; fi
    [ -z "$ERR" ] || fail "$what: unexpected stderr: $ERR"
    assert_eq "$(gen)" "$((g0 + ${BUMPS:-1}))" "$what: generation bumped ${BUMPS:-1} time(s)"
}
# jchange WHAT ARGS...: the same with --json; OUT is the JSON.
jchange() {
    local what=$1 g0
    shift
    g0=$(gen)
    jrun "$@"
    if [ "$RC" != 0 ]; then fail "$what: exit $RC: $ERR"; return; fi
    assert_eq "$(jget .ok)" true "$what: ok"
    assert_eq "$(gen)" "$((g0 + ${BUMPS:-1}))" "$what: generation bumped ${BUMPS:-1} time(s)"
}
# read_only WHAT ARGS...: must succeed and change nothing.
read_only() {
    local what=$1 before
    shift
    before=$(snap)
    run "$@"
    [ "$RC" = 0 ] || fail "$what: exit $RC: $ERR"
    [ "$(snap)" = "$before" ] || fail "$what: a read changed the registry"
}
# refused WHAT STATUS MESSAGE CODE ARGS...: exit STATUS with MESSAGE on stderr and nothing on
# stdout; with --json the same status, {"error": MESSAGE..., "code": CODE} on stdout; and the
# registry and generation unchanged after both.
refused() {
    local what=$1 want=$2 msg=$3 code=$4 before
    shift 4
    before=$(snap)
    run "$@"
    if [ "$RC" != "$want" ]; then
        fail "$what: exit $RC, expected $want (stderr: $ERR)"
    else
        assert_contains "$ERR" "$msg" "$what: message"
        [ -z "$OUT" ] || fail "$what: printed on stdout after a failure: $OUT"
    fi
    jrun "$@"
    assert_eq "$RC" "$want" "$what: --json exit status"
    assert_contains "$(jget .error)" "$msg" "$what: --json error"
    assert_eq "$(jget .code)" "$code" "$what: --json code"
    assert_eq "$(jget .#)" 2 "$what: --json error object has error and code only"
    [ "$(snap)" = "$before" ] || fail "$what: a refused command changed the registry"
}

# ---- the cases, once per backend -------------------------------------------------------------
cases() {
    local backend=$1
    log "==== $backend"

    # Before init: every command refuses, and creates nothing.
    refused "$backend: list before init" 1 "run 'tenancy init'" notfound tenant list
    refused "$backend: create before init" 1 "run 'tenancy init'" notfound tenant create acme
    [ ! -e "$STATE" ] || fail "$backend: a command before init created $STATE"

    # init: state_dir (0755, parents too), tables, generation file; idempotent.
    run init
    assert_eq "$RC" 0 "$backend: init"
    [ -d "$STATE" ] || fail "$backend: init did not create $STATE"
    assert_eq "$(stat -c %a "$STATE")" 755 "$backend: state_dir mode"
    [ -f "$STATE/registry.gen" ] || fail "$backend: no generation file"
    assert_eq "$(gen)" 0 "$backend: generation after init"
    jrun init
    assert_eq "$RC" 0 "$backend: init again (--json)"
    assert_eq "$(jget .ok)" true "$backend: init ok"
    assert_eq "$(jget .backend)" "$backend" "$backend: init backend"
    assert_eq "$(jget .state_dir)" "$STATE" "$backend: init state_dir"
    case "$OUT" in *password* | *"host="*) fail "$backend: init printed a conninfo" ;; esac
    assert_eq "$(gen)" 0 "$backend: init changes no generation"

    # ---- tenant create ----
    BUMPS=2 change "$backend: create acme" tenant create acme --name "Acme Inc." --domain Acme.Test \
        --domain www.acme.test --setting theme=dark --setting 'greeting=hello, world' \
        --max-workers 3
    assert_contains "$OUT" "created tenant 'acme'" "$backend: create says so"
    BUMPS=2 jchange "$backend: create globex (--json)" tenant create globex --domain globex.test \
        --state provisioning --setting a=1 --setting a=2
    assert_eq "$(jget .tenant.slug)" globex "$backend: created slug"
    assert_eq "$(jget .tenant.name)" globex "$backend: the name defaults to the slug"
    assert_eq "$(jget .tenant.state)" provisioning "$backend: --state provisioning"
    assert_eq "$(jget .tenant.primary_domain)" globex.test "$backend: primary domain"
    assert_eq "$(jget .tenant.settings.a)" 2 "$backend: a later --setting wins"
    BUMPS=2 change "$backend: create with --opt=value" tenant create initech --name=Initech

    refused "$backend: duplicate slug" 1 "slug 'acme' is taken" exists \
        tenant create acme --domain other.test
    refused "$backend: domain taken" 1 "domain 'acme.test' already belongs to 'acme'" exists \
        tenant create hooli --domain hooli.test --domain ACME.test
    refused "$backend: the failed create left no tenant" 1 "no tenant 'hooli'" notfound \
        tenant show hooli
    refused "$backend: invalid slug" 1 "invalid slug 'A B'" invalid tenant create 'A B'
    refused "$backend: invalid domain" 1 "invalid domain '1.2.3.4'" invalid \
        tenant create hooli --domain 1.2.3.4
    refused "$backend: domain with port" 1 "invalid domain 'h.test:80'" invalid \
        tenant create hooli --domain h.test:80
    refused "$backend: domain twice" 1 "domain 'h.test' is given twice" invalid \
        tenant create hooli --domain h.test --domain H.TEST.
    refused "$backend: name with a control character" 1 "invalid name" invalid \
        tenant create hooli --name "$(printf 'a\033[2Jb')"
    refused "$backend: setting without =" 2 "--setting expects KEY=VALUE" usage \
        tenant create hooli --setting novalue
    refused "$backend: setting with empty key" 2 "--setting expects KEY=VALUE" usage \
        tenant create hooli --setting =x
    refused "$backend: create --state suspended" 2 "--state is active or provisioning" usage \
        tenant create hooli --state suspended
    refused "$backend: --max-workers not a number" 2 "--max-workers expects a whole number" \
        usage tenant create hooli --max-workers ten
    refused "$backend: --max-workers too big" 2 "--max-workers expects a whole number" usage \
        tenant create hooli --max-workers 100001

    # ---- usage errors (exit 2), before anything is opened ----
    refused "$backend: no command" 2 "no command given" usage
    refused "$backend: unknown command" 2 "unknown command 'bogus'" usage bogus
    refused "$backend: group without command" 2 "'tenant' needs a command" usage tenant
    refused "$backend: unknown subcommand" 2 "unknown command 'tenant bogus'" usage tenant bogus
    refused "$backend: missing argument" 2 "'tenant create' needs SLUG" usage tenant create
    refused "$backend: too many arguments" 2 "too many arguments" usage tenant show acme globex
    refused "$backend: unknown option" 2 "unknown option '--bogus'" usage tenant create x --bogus
    refused "$backend: option without value" 2 "--name needs a value" usage tenant create x --name
    refused "$backend: value option twice" 2 "--name is given twice" usage \
        tenant create x --name a --name b
    refused "$backend: flag with a value" 2 "--primary takes no value" usage \
        domain add acme x.test --primary=yes
    refused "$backend: unknown global option" 2 "unknown option '--bogus'" usage --bogus tenant list
    refused "$backend: bad --limit" 2 "--limit expects a whole number" usage tenant list --limit 0
    refused "$backend: bad --state" 2 "unknown state 'nope'" usage tenant list --state nope
    refused "$backend: set without options" 2 "nothing to set" usage tenant set acme
    refused "$backend: a missing config file" 1 "configuration:" config \
        -c "$T/nonexistent.conf" tenant list

    # ---- show ----
    read_only "$backend: show" tenant show acme
    assert_contains "$OUT" "name:        Acme Inc." "$backend: show name"
    assert_contains "$OUT" "domains:     acme.test (primary)" "$backend: show primary domain"
    assert_contains "$OUT" "www.acme.test" "$backend: show other domain"
    assert_contains "$OUT" "greeting = hello, world" "$backend: show settings"
    assert_contains "$OUT" "max_workers: 3" "$backend: show max_workers"
    jrun tenant show acme
    assert_eq "$RC" 0 "$backend: show --json"
    assert_eq "$(jget .slug)" acme "$backend: show .slug"
    assert_eq "$(jget .domains#)" 2 "$backend: show .domains"
    assert_eq "$(jget '.domains[0].domain')" acme.test "$backend: domains, primary first"
    assert_eq "$(jget '.domains[0].primary')" true "$backend: .primary"
    assert_eq "$(jget .settings.greeting)" "hello, world" "$backend: .settings"
    assert_eq "$(jget .max_workers)" 3 "$backend: .max_workers"
    case "$(jget .created_at)" in 20[0-9][0-9]-*T*Z) log "ok: $backend: created_at" ;;
    *) fail "$backend: created_at is '$(jget .created_at)'" ;; esac
    refused "$backend: show unknown" 1 "no tenant 'zz'" notfound tenant show zz

    # ---- states ----
    change "$backend: suspend" tenant suspend acme
    assert_eq "$OUT" "tenant 'acme' is now suspended" "$backend: suspend says so"
    jchange "$backend: maintenance (--json)" tenant maintenance acme
    assert_eq "$(jget .tenant.state)" maintenance "$backend: state maintenance"
    change "$backend: delete" tenant delete acme
    assert_contains "$OUT" "404" "$backend: delete says what the host answers"
    jrun tenant show acme
    assert_eq "$(jget .state)" deleting "$backend: state deleting"
    refused "$backend: resume a deleted tenant" 1 "tenant 'acme' is deleted: 'tenancy tenant restore acme' brings it back" busy tenant resume acme
    jchange "$backend: restore" tenant restore acme
    assert_eq "$(jget .tenant.state)" active "$backend: state active"
    assert_eq "$(jget .tenant.domains#)" 2 "$backend: domains kept across delete/restore"
    for verb in suspend resume maintenance delete; do
        refused "$backend: $verb unknown" 1 "no tenant 'zz'" notfound tenant "$verb" zz
    done

    # ---- set ----
    jchange "$backend: set --max-workers" tenant set acme --max-workers 7
    assert_eq "$(jget .tenant.max_workers)" 7 "$backend: max_workers set"
    change "$backend: set --max-workers 0" tenant set acme --max-workers 0
    refused "$backend: set unknown" 1 "no tenant 'zz'" notfound tenant set zz --max-workers 1

    # ---- domains ----
    change "$backend: domain add" domain add globex Shop.Globex.Test.
    assert_eq "$OUT" "domain 'shop.globex.test' added to 'globex'" "$backend: domain add says so"
    jchange "$backend: domain add --primary" domain add globex new.globex.test --primary
    assert_eq "$(jget .tenant.primary_domain)" new.globex.test "$backend: --primary moved it"
    assert_eq "$(jget .tenant.domains#)" 3 "$backend: three domains"
    change "$backend: domain add to a tenant without domains" domain add initech initech.test
    jrun tenant show initech
    assert_eq "$(jget .primary_domain)" initech.test "$backend: the first domain is primary"
    refused "$backend: domain add taken" 1 "domain 'acme.test' already belongs to 'acme'" \
        exists domain add globex acme.test
    refused "$backend: domain add unknown tenant" 1 "no tenant 'zz'" notfound \
        domain add zz zz.test
    refused "$backend: domain add invalid" 1 "invalid domain 'a b'" invalid \
        domain add globex 'a b'
    jchange "$backend: domain remove (the primary)" domain remove NEW.globex.test
    assert_eq "$(jget .removed)" new.globex.test "$backend: removed"
    jrun tenant show globex
    assert_eq "$(jget .primary_domain)" globex.test "$backend: the next domain became primary"
    refused "$backend: domain remove unknown" 1 "no domain 'new.globex.test'" notfound \
        domain remove new.globex.test

    # ---- settings ----
    change "$backend: settings set" settings set acme color red
    assert_contains "$OUT" "color = red" "$backend: settings set says so"
    change "$backend: settings set a negative value after --" settings set acme offset -- -5
    change "$backend: settings set UTF-8" settings set acme motto "$(printf 'caf\303\251 "quoted" \\ back')"
    change "$backend: settings set multi-line" settings set acme banner "$(printf 'line 1\nline 2')"
    read_only "$backend: settings get one" settings get acme offset
    assert_eq "$OUT" "-5" "$backend: settings get prints the value"
    run settings get acme banner
    assert_eq "$OUT" "$(printf 'line 1\nline 2')" "$backend: settings get is exact off a terminal"
    jrun settings get acme motto
    assert_eq "$(jget .value)" "$(printf 'caf\303\251 "quoted" \\ back')" "$backend: --json value"
    read_only "$backend: settings get all" settings get acme
    assert_contains "$OUT" "banner=line 1\\nline 2" "$backend: all settings, escaped"
    assert_eq "$(printf '%s\n' "$OUT" | cut -d= -f1 | tr '\n' ' ')" \
        "banner color greeting motto offset theme " "$backend: settings sorted by key"
    jrun settings get acme
    assert_eq "$(jget .settings#)" 6 "$backend: --json settings"
    jchange "$backend: settings unset" settings unset acme color
    assert_eq "$(jget .tenant.settings.color 2>/dev/null)" "" "$backend: color is gone"
    refused "$backend: unset a missing key" 1 "tenant 'acme' has no setting 'color'" notfound \
        settings unset acme color
    refused "$backend: get a missing key" 1 "tenant 'acme' has no setting 'color'" notfound \
        settings get acme color
    refused "$backend: settings of an unknown tenant" 1 "no tenant 'zz'" notfound \
        settings set zz k v
    refused "$backend: settings get unknown" 1 "no tenant 'zz'" notfound settings get zz
    refused "$backend: settings set missing value" 2 "'settings set' needs SLUG KEY VALUE" \
        usage settings set acme k
    local big
    big=$(head -c 8193 /dev/zero | tr '\0' v)
    refused "$backend: setting too big" 1 "over 8192 bytes" invalid settings set acme big "$big"

    # ---- list ----
    for i in $(seq -w 1 23); do
        "$TENANCY" -c "$CONF" tenant create "t$i" --name "Tenant $i" --domain "t$i.test" \
            > /dev/null || fail "$backend: create t$i"
    done
    BUMPS=2 change "$backend: a name with % in it" tenant create pct --name "100% real"
    BUMPS=2 change "$backend: a name with _ in it" tenant create snake --name "snake_case"
    BUMPS=2 change "$backend: a name like it" tenant create snakex --name "snakeXcase"
    read_only "$backend: list (not a terminal)" tenant list
    assert_eq "$(printf '%s\n' "$OUT" | wc -l)" 29 "$backend: one line per tenant, no header"
    assert_eq "$(printf '%s\n' "$OUT" | head -1)" \
        "$(printf 'acme\tAcme Inc.\tactive\tsqlite\tacme.test')" "$backend: tab-separated fields"
    jrun tenant list --limit 10
    assert_eq "$(jget .total)" 29 "$backend: total"
    assert_eq "$(jget .count)" 10 "$backend: count"
    assert_eq "$(jget .tenants#)" 10 "$backend: a page"
    assert_eq "$(jget '.tenants[0].slug')" acme "$backend: slug order"
    assert_eq "$(jget .next_after)" t04 "$backend: next_after"
    local after=t04 seen=10 pages=1
    while [ "$after" != null ]; do
        jrun tenant list --limit 10 --after "$after"
        seen=$((seen + $(jget .count)))
        pages=$((pages + 1))
        after=$(jget .next_after)
        [ "$pages" -lt 10 ] || { fail "$backend: paging does not end"; break; }
    done
    assert_eq "$seen" 29 "$backend: paging saw every tenant once"
    assert_eq "$pages" 3 "$backend: three pages"
    jrun tenant list --limit 29
    assert_eq "$(jget .next_after)" null "$backend: no next page when all fit"
    jrun tenant list --state provisioning
    assert_eq "$(jget .total)" 1 "$backend: --state"
    assert_eq "$(jget '.tenants[0].slug')" globex "$backend: --state finds globex"
    jrun tenant list --search '%'
    assert_eq "$(jget .total)" 1 "$backend: --search % is literal"
    jrun tenant list --search '_'
    assert_eq "$(jget .total)" 1 "$backend: --search _ is literal"
    assert_eq "$(jget '.tenants[0].slug')" snake "$backend: --search _ finds snake"
    jrun tenant list --search 'TENANT 1'
    assert_eq "$(jget .total)" 10 "$backend: --search ignores case, matches names"
    jrun tenant list --search nothing-like-it
    assert_eq "$(jget .total)" 0 "$backend: --search without a match"
    assert_eq "$(jget .tenants#)" 0 "$backend: an empty page"
    # On a terminal: a table with a header and a footer (script gives the CLI a tty).
    if command -v script > /dev/null 2>&1; then
        TENANCY_CONF=$CONF script -qec "$TENANCY tenant list --limit 5" /dev/null > "$T/tty" 2>&1
        assert_contains "$(cat "$T/tty")" "SLUG" "$backend: table header on a terminal"
        assert_contains "$(cat "$T/tty")" "(5 of 29 tenants; next page: --after snake)" \
            "$backend: table footer on a terminal"
    fi

    # ---- everything the CLI printed with --json parsed; the generation moved only on changes ----
    log "$backend: generation now $(gen)"
}

# ---- global options ------------------------------------------------------------------------
"$TENANCY" -h > "$T/help" 2>&1
assert_eq "$?" 0 "tenancy -h"
assert_contains "$(cat "$T/help")" "tenancy tenant create SLUG" "help lists the commands"
assert_contains "$(cat "$T/help")" "then 'tenancy purge' removes it" "help says delete is restorable, then purged"
"$TENANCY" --version > "$T/v"
assert_eq "$?" 0 "--version"
"$TENANCY" tenant create -h > "$T/h2"
assert_eq "$?" 0 "a command's -h"
assert_contains "$(cat "$T/h2")" "--max-workers N" "a command's usage"
"$TENANCY" --commands | cut -f1 > "$T/cmds"
assert_eq "$(wc -l < "$T/cmds")" "$(grep -c '^  tenancy ' "$T/help")" \
    "--commands lists every command of the help"

# ---- SQLite, in a state_dir that init must create (with a missing parent) ----------------
STATE=$T/sqlite/var/state
CONF=$T/sqlite.conf
mkdir -p "$T/sqlite"
printf 'app = /nonexistent/app.so\nstate_dir = %s\n' "$STATE" > "$CONF"
cases sqlite
# $TENANCY_CONF is the default configuration
TENANCY_CONF=$CONF "$TENANCY" tenant show acme > /dev/null
assert_eq "$?" 0 "TENANCY_CONF is read when -c is not given"

# Run as root with `user` set, init gives the registry to the workers' user (they must be
# able to open it: SQLite in WAL mode writes beside the file even to read).
if [ "$(id -u)" = 0 ] && id nobody > /dev/null 2>&1; then
    STATE=$T/owned/state
    CONF=$T/owned.conf
    mkdir -p "$T/owned"
    printf 'app = /x.so\nstate_dir = %s\nuser = nobody\n' "$STATE" > "$CONF"
    run init
    assert_eq "$RC" 0 "init with user = nobody"
    for f in "$STATE" "$STATE/control.db" "$STATE/registry.gen"; do
        assert_eq "$(stat -c %U "$f")" nobody "init gave $(basename "$f") to the workers' user"
    done
    BUMPS=2 change "create in a registry owned by nobody" tenant create acme
    assert_eq "$(stat -c %U "$STATE/control.db")" nobody "the registry stays the workers'"
    for f in "$STATE/tenants" "$STATE/tenants/acme.db"; do
        assert_eq "$(stat -c %U "$f")" nobody "the tenant's $(basename "$f") is the workers'"
    done
    printf 'app = /x.so\nstate_dir = %s\nuser = no-such-user-here\n' "$T/owned/s2" > "$T/bad.conf"
    refused "init for a user that does not exist" 1 "no such user 'no-such-user-here'" invalid \
        -c "$T/bad.conf" init
    [ ! -e "$T/owned/s2" ] || fail "init for an unknown user created state_dir"
else
    log "not root: the ownership given by init is not checked"
fi

# ---- PostgreSQL ------------------------------------------------------------------------------
STATE=$T/pg/state
CONF=$T/pg.conf
printf 'app = /nonexistent/app.so\nstate_dir = %s\nregistry = "%s"\n' "$STATE" \
    "$TENANCY_TEST_PG" > "$CONF"
cases postgres
