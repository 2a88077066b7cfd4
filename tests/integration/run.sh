#!/bin/bash
# run.sh — `tenancy run`: a command once per tenant with the tenant's context in its
# environment, for real on SQLite tenants and on PostgreSQL schema tenants (a throwaway
# cluster from tests/pg.sh; one placement on the shared login, one that logs in as each
# tenant's role, with SCRAM passwords required for tenant roles, as isolation.sh sets up).
#
# Checks: each run sees exactly its own tenant's environment (id, name, state, placement,
# settings, config; no other tenant's slug anywhere in it) and, through TENANCY_STORAGE
# alone (no PG* variables), reads its own storage's marker row (sqlite3, psql: a random
# value only that tenant's seed wrote); on PostgreSQL the conninfo cannot read another
# tenant's schema (permission denied), and with login = tenant not even after RESET ROLE; a
# nested `tenancy` reads the same configuration (TENANCY_CONF); a program with arguments
# runs without a shell; -j 4 runs all, at once; --state, --placement, --all, --tenant and the
# default (active only) select what they say, tenants being deleted never; --json is one
# document with each exit status; a failing tenant gives exit 1 and the end of its output
# (--tail); --timeout kills the command's process group; a second SIGINT kills the running
# commands; resume: a run interrupted by SIGINT, then resumed with the same --resume file,
# ran each tenant exactly once successfully, and another command's file is refused; the bar
# on a terminal only; run by root with `user` set, the command runs as that user.
#
# Owns: these cases. Must not: change tenants' storage except through the commands it runs
# (the markers are written by the seed).
. "$(dirname "$0")/lib.sh"
TENANCY=${TENANCY:-$top_builddir/tenancy/tenancy}
JSON_CHECK=${JSON_CHECK:-$HELPERS/json_check}
need "$TENANCY" "$JSON_CHECK" sqlite3 psql jq script
TENANCY=$(cd "$(dirname "$TENANCY")" && pwd)/$(basename "$TENANCY")

PG_DIR=
stop_pg() { [ -n "$PG_DIR" ] && bash "$top_srcdir/tests/pg.sh" stop "$PG_DIR"; PG_DIR=; }
trap 'rc=$?; stop_pg; (exit $rc); cleanup' EXIT
pgenv=$(bash "$top_srcdir/tests/pg.sh" start tenancy_run) ||
    hard_error "PostgreSQL could not be started (tests/pg.sh start)"
eval "$pgenv"
PG_DIR=$TENANCY_TEST_PG_DIR

# The host's login: no superuser; tenant roles must prove their password (SCRAM).
psql -q -v ON_ERROR_STOP=1 > /dev/null <<'SQL' || fatal "the login role"
CREATE ROLE tenancy_app LOGIN CREATEROLE CREATEDB;
ALTER DATABASE tenancy_run OWNER TO tenancy_app;
SQL
APP_PG="postgres:host=$PG_DIR port=5432 dbname=tenancy_run user=tenancy_app"
pg_scram_but_host "$PG_DIR"

# ---- the tenants -------------------------------------------------------------------------------
mkdir -p "$T/state" "$T/mig"
echo "CREATE TABLE marker (v TEXT NOT NULL);" > "$T/mig/0001_marker.sql"
echo 'INSERT INTO marker (v) VALUES ($2);' > "$T/seed.sql"   # the tenant's (random) name
CONF=$T/tenancyd.conf
cat > "$CONF" <<EOF
app = /nonexistent/app.so
state_dir = $T/state
storage.migrations = $T/mig
storage.seed = $T/seed.sql
placement.pgs.dsn = "$APP_PG"
placement.pgs.mode = schema
placement.pgt.dsn = "$APP_PG"
placement.pgt.mode = schema
placement.pgt.login = tenant
EOF
"$TENANCY" -c "$CONF" init > "$T/init.out" 2>&1 || fatal "init: $(cat "$T/init.out")"

declare -A NAME=() PLACE=()
ALL="sq-ant sq-bee sq-cat sq-dog pgs-elk pgs-fox pgt-gnu pgt-hen"
for s in $ALL; do
    case $s in sq-*) PLACE[$s]=sqlite ;; pgs-*) PLACE[$s]=pgs ;; pgt-*) PLACE[$s]=pgt ;; esac
    NAME[$s]="Marker $s $RANDOM$RANDOM"
    "$TENANCY" -c "$CONF" tenant create "$s" --placement "${PLACE[$s]}" --name "${NAME[$s]}" \
        --setting "color=c-$s" --setting 'quote=say "hi"' > "$T/create.out" 2>&1 ||
        fatal "creating $s: $(cat "$T/create.out")"
done
"$TENANCY" -c "$CONF" tenant maintenance sq-cat > /dev/null || fatal "maintenance sq-cat"
"$TENANCY" -c "$CONF" tenant suspend sq-dog > /dev/null || fatal "suspend sq-dog"
"$TENANCY" -c "$CONF" tenant create sq-eel > /dev/null || fatal "creating sq-eel"
"$TENANCY" -c "$CONF" tenant delete sq-eel > /dev/null || fatal "deleting sq-eel"
ACTIVE="sq-ant sq-bee pgs-elk pgs-fox pgt-gnu pgt-hen"

RC=0 OUT= ERR=
# run ARGS...: tenancy run with $CONF and no PG* variables (TENANCY_STORAGE must be enough).
run() {
    env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE -u TENANCY_TEST_PG \
        "$TENANCY" -c "$CONF" run "$@" > "$T/out" 2> "$T/err"
    RC=$?
    OUT=$(cat "$T/out")
    ERR=$(cat "$T/err")
}
jrun() {   # the same with --json: stdout must be exactly one JSON document
    run --json "$@"
    "$JSON_CHECK" < "$T/out" 2> "$T/jerr" ||
        fail "--json run $*: not one JSON document ($(cat "$T/jerr")): $(head -c 300 "$T/out")"
}
jq_out() { jq -r "$1" < "$T/out"; }
slugs_run() { jq -r '[.tenants[].slug] | sort | join(" ")' < "$T/out"; }
sorted() { printf '%s\n' $1 | sort | tr '\n' ' ' | sed 's/ $//'; }

# ---- the environment: exactly the tenant's own -------------------------------------------------
mkdir -p "$T/env"
jrun --all -j 4 "env > '$T/env/'\$TENANCY_SLUG"
assert_eq "$RC" 0 "env: every tenant ran ($ERR)"
assert_eq "$(slugs_run)" "$(sorted "$ALL")" "env: --all is the active, maintenance and suspended tenants"
for s in $ALL; do
    f=$T/env/$s
    [ -f "$f" ] || { fail "env: $s wrote nothing"; continue; }
    "$TENANCY" -c "$CONF" --json tenant show "$s" > "$T/show.json"
    v() { sed -n "s/^$1=//p" "$f"; }
    assert_eq "$(v TENANCY_SLUG)" "$s" "env $s: TENANCY_SLUG"
    assert_eq "$(v TENANCY_TENANT_ID)" "$(jq -r .id "$T/show.json")" "env $s: TENANCY_TENANT_ID"
    assert_eq "$(v TENANCY_TENANT_NAME)" "${NAME[$s]}" "env $s: TENANCY_TENANT_NAME"
    assert_eq "$(v TENANCY_STATE)" "$(jq -r .state "$T/show.json")" "env $s: TENANCY_STATE"
    assert_eq "$(v TENANCY_PLACEMENT)" "${PLACE[$s]}" "env $s: TENANCY_PLACEMENT"
    assert_eq "$(v TENANCY_SETTINGS | jq -c .)" "$(jq -c .settings "$T/show.json")" \
        "env $s: TENANCY_SETTINGS is its settings' JSON"
    assert_eq "$(v TENANCY_CONFIG)" "$CONF" "env $s: TENANCY_CONFIG"
    assert_eq "$(v TENANCY_CONF)" "$CONF" "env $s: TENANCY_CONF"
    case $s in
    sq-*)
        assert_eq "$(v TENANCY_STORAGE_KIND)" sqlite "env $s: kind"
        assert_eq "$(v TENANCY_STORAGE)" "$T/state/tenants/$s.db" "env $s: the file, absolute" ;;
    *)
        assert_eq "$(v TENANCY_STORAGE_KIND)" postgres "env $s: kind"
        assert_contains "$(v TENANCY_STORAGE)" "search_path=t_${s//-/_}" "env $s: its schema" ;;
    esac
    for o in $ALL sq-eel; do
        [ "$o" = "$s" ] && continue
        if grep -q -- "$o" "$f"; then fail "env $s: holds another tenant's slug $o"; fi
    done
done
grep -q '^PGHOST=' "$T/env/sq-ant" && fail "env: a PG* variable of the test leaked in"

# ---- storage: each command reads its own marker through TENANCY_STORAGE alone -----------------
jrun --all -j 4 'if [ "$TENANCY_STORAGE_KIND" = sqlite ]; then
        sqlite3 -batch "$TENANCY_STORAGE" "SELECT v FROM marker"
    else
        psql "$TENANCY_STORAGE" -qAtX -v ON_ERROR_STOP=1 -c "SELECT v FROM marker"
    fi'
assert_eq "$RC" 0 "storage: every command read its storage ($ERR)"
for s in $ALL; do
    assert_eq "$(jq -r --arg s "$s" '.tenants[] | select(.slug == $s) | .output' < "$T/out")" \
        "${NAME[$s]}" "storage $s: its own marker"
done

# PostgreSQL: the tenant's rights only.
jrun --placement pgt 'psql "$TENANCY_STORAGE" -qAtX -c "SELECT session_user, current_user"
    other=t_pgt_gnu; [ "$TENANCY_SLUG" = pgt-gnu ] && other=t_pgt_hen
    psql "$TENANCY_STORAGE" -qAtX -c "RESET ROLE" -c "SELECT v FROM $other.marker" 2>&1
    psql "$TENANCY_STORAGE" -qAtX -c "SELECT v FROM t_pgs_elk.marker" 2>&1; exit 0'
for s in pgt-gnu pgt-hen; do
    o=$(jq -r --arg s "$s" '.tenants[] | select(.slug == $s) | .output' < "$T/out")
    r=t_${s//-/_}
    assert_eq "$(printf '%s\n' "$o" | head -n 1)" "$r|$r" "pgt $s: logged in as its own role"
    assert_contains "$o" "permission denied for schema t_pgt_" \
        "pgt $s: another pgt tenant's schema refused, RESET ROLE or not"
    assert_contains "$o" "permission denied for schema t_pgs_elk" \
        "pgt $s: a shared-login tenant's schema refused"
    for x in $ALL; do
        case "$o" in *"${NAME[$x]}"*) [ "$x" != "$s" ] && fail "pgt $s: read $x's marker" ;; esac
    done
done
jrun --placement pgs 'psql "$TENANCY_STORAGE" -qAtX -c "SELECT current_user"
    other=t_pgs_elk; [ "$TENANCY_SLUG" = pgs-elk ] && other=t_pgs_fox
    psql "$TENANCY_STORAGE" -qAtX -c "SELECT v FROM $other.marker" 2>&1; exit 0'
for s in pgs-elk pgs-fox; do
    o=$(jq -r --arg s "$s" '.tenants[] | select(.slug == $s) | .output' < "$T/out")
    assert_eq "$(printf '%s\n' "$o" | head -n 1)" "t_${s//-/_}" \
        "pgs $s: the session starts as the tenant's role"
    assert_contains "$o" "permission denied for schema t_pgs_" \
        "pgs $s: another tenant's schema refused to that role"
done

# A nested tenancy reads the same configuration, without -c.
jrun --tenant sq-ant '"'"$TENANCY"'" settings get "$TENANCY_SLUG" color'
assert_eq "$(jq_out '.tenants[0].output')" "c-sq-ant" "TENANCY_CONF: a nested tenancy finds its configuration"
# A program and its arguments: no shell.
jrun --tenant sq-ant -- printf '%s\n' 'a b' '$TENANCY_SLUG'
assert_eq "$(jq_out '.tenants[0].output')" 'a b
$TENANCY_SLUG' "a program with arguments runs without a shell"
jrun --tenant sq-ant -- /nonexistent/prog x
assert_eq "$(jq_out '.tenants[0].exit')" 127 "a program that is not there: exit 127"
assert_contains "$(jq_out '.tenants[0].output')" "cannot run /nonexistent/prog" "... and why"

# ---- selection -----------------------------------------------------------------------------------
jrun true
assert_eq "$(slugs_run)" "$(sorted "$ACTIVE")" "default: the active tenants"
jrun --state suspended true
assert_eq "$(slugs_run)" "sq-dog" "--state suspended"
jrun --state suspended,maintenance true
assert_eq "$(slugs_run)" "sq-cat sq-dog" "--state suspended,maintenance"
jrun --placement pgt true
assert_eq "$(slugs_run)" "pgt-gnu pgt-hen" "--placement pgt (active)"
jrun --placement sqlite --all true
assert_eq "$(slugs_run)" "sq-ant sq-bee sq-cat sq-dog" "--placement sqlite --all"
jrun --placement pgt --state suspended true
assert_eq "$RC/$(jq_out .total)" "0/0" "--placement pgt --state suspended: nobody, exit 0"
jrun --tenant sq-dog --tenant pgs-fox --tenant sq-dog true
assert_eq "$(slugs_run)" "pgs-fox sq-dog" "--tenant: those, a slug given twice once"
jrun --tenant sq-eel true
assert_eq "$RC" 1 "--tenant of a tenant being deleted: exit 1"
assert_contains "$(jq_out .error)" "being deleted" "... saying why"
run --state deleting true
assert_eq "$RC" 2 "--state deleting: a usage error"
jrun --tenant nosuch true
assert_eq "$RC/$(jq_out .code)" "1/notfound" "--tenant of no tenant: exit 1, notfound"
run --tenant sq-ant --all true
assert_eq "$RC" 2 "--tenant with --all: a usage error"
run --placement nowhere true
assert_eq "$RC" 1 "--placement of no placement: exit 1"

# ---- -j 4: all, at once ------------------------------------------------------------------------
jrun --all -j 4 'sleep 1'
assert_eq "$RC/$(jq_out .succeeded)/$(jq_out .jobs)" "0/8/4" "-j 4: all 8 ran, on 4 at once"
awk -v s="$(jq_out .seconds)" 'BEGIN { exit !(s >= 2 && s < 3.5) }' ||
    fail "-j 4: 8 commands of 1 s took $(jq_out .seconds) s (want about 2)"

# ---- failures, the output's end, exit statuses ------------------------------------------------
jrun --all -j 3 --tail 100 'if [ "$TENANCY_SLUG" = sq-bee ]; then
        head -c 10000 /dev/zero | tr "\0" x; echo; echo "bee broke" >&2; exit 7
    fi; echo "fine $TENANCY_SLUG"'
assert_eq "$RC" 1 "a failing tenant: exit 1"
assert_eq "$(jq_out .ok)/$(jq_out .failed)/$(jq_out .succeeded)" "false/1/7" "--json counts"
bee='.tenants[] | select(.slug == "sq-bee")'
assert_eq "$(jq_out "$bee | .status")/$(jq_out "$bee | .exit")" "failed/7" "sq-bee: failed, exit 7"
assert_eq "$(jq_out "$bee | .output | length")" 100 "--tail 100: 100 bytes kept"
assert_eq "$(jq_out "$bee | .output_bytes")/$(jq_out "$bee | .truncated")" "10011/true" \
    "... of all it wrote"
assert_contains "$(jq_out "$bee | .output")" "bee broke" "... the end, stderr too"
assert_eq "$(jq_out '.tenants[] | select(.slug == "sq-ant") | .output')" "fine sq-ant" \
    "the others: their own output"
run --all 'echo "out of $TENANCY_SLUG"; [ "$TENANCY_SLUG" != sq-bee ] || exit 3'
assert_eq "$RC" 1 "text: a failing tenant: exit 1"
assert_contains "$OUT" "sq-bee: failed (exit 3" "text: a line for the failure"
assert_contains "$OUT" "  | out of sq-bee" "text: the end of its output"
case "$OUT" in *sq-ant*) fail "text: a tenant that succeeded is shown without --output" ;; esac
assert_contains "$ERR" "8 tenants: 7 ok, 1 failed" "text: the summary (stderr off a terminal)"
run --all --output 'echo "out of $TENANCY_SLUG"'
assert_contains "$OUT" "  | out of sq-ant" "--output: every tenant's output"

# ---- --timeout kills the process group --------------------------------------------------------
jrun --tenant sq-ant --timeout 1s 'sleep 30 & echo $! > "'"$T"'/bg.pid"; echo started; wait'
assert_eq "$RC/$(jq_out '.tenants[0].status')" "1/timeout" "--timeout: exit 1, status timeout"
ms=$(jq_out '.tenants[0].ms')
[ "$ms" -ge 1000 ] && [ "$ms" -lt 3000 ] || fail "--timeout 1s: it ran $ms ms"
bg=$(cat "$T/bg.pid")
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{ print $3 }' "/proc/$1/stat")" = Z ]; }
wait_until 3 gone "$bg" && log "ok: --timeout killed the command's children too" ||
    { fail "--timeout: the command's child $bg lives on"; kill "$bg"; }

# ---- a second SIGINT kills the running commands ---------------------------------------------------
"$TENANCY" -c "$CONF" --json run -j 2 'sleep 30' > "$T/int2.out" 2> "$T/int2.err" &
pid=$!
kids() { [ "$(pgrep -P "$1" | wc -l)" = "$2" ]; }
wait_until 5 kids "$pid" 2 || fail "two commands did not start"
kill -INT "$pid"
sleep 0.3
kill -INT "$pid"
start=$SECONDS
wait "$pid"
rc=$?
assert_eq "$rc" 1 "two SIGINTs: exit 1"
[ $((SECONDS - start)) -le 4 ] || fail "two SIGINTs: the run took $((SECONDS - start)) s to end"
assert_eq "$(jq -r '[.tenants[].status] | unique | join(",")' < "$T/int2.out")" killed \
    "two SIGINTs: the running ones killed"
assert_eq "$(jq -r .not_run < "$T/int2.out")" 4 "two SIGINTs: the other 4 never started"

# ---- resume after an interrupt: each tenant once, successfully ------------------------------------
mkdir -p "$T/count"
RCMD='sleep 0.7; echo x >> "'"$T"'/count/$TENANCY_SLUG"'
"$TENANCY" -c "$CONF" run --all -j 2 --resume "$T/state.run" "$RCMD" > "$T/r1.out" 2>&1 &
pid=$!
counted() { [ "$(ls "$T/count" | wc -l)" -ge "$1" ]; }
wait_until 10 counted 2 || fail "resume: nothing ran"
kill -INT "$pid"
wait "$pid"
rc=$?
assert_eq "$rc" 1 "resume: the interrupted run exits 1"
assert_contains "$(cat "$T/r1.out")" "stopped (interrupted)" "resume: it says it stopped"
first=$(ls "$T/count" | wc -l)
[ "$first" -ge 2 ] && [ "$first" -lt 8 ] || fail "resume: the first run did $first of 8"
assert_eq "$(grep -c '^ok ' "$T/state.run")" "$first" \
    "resume: the file records each tenant that finished (the running ones too)"
run --all --resume "$T/state.run" 'true'
assert_eq "$RC" 1 "resume: another command's file is refused"
assert_contains "$ERR" "another command" "... saying why"
jrun --all -j 2 --resume "$T/state.run" "$RCMD"
assert_eq "$RC" 0 "resume: the second run succeeds"
assert_eq "$(jq_out .skipped_done)/$(jq_out .succeeded)" "$first/$((8 - first))" \
    "resume: the done ones skipped, the rest run"
for s in $ALL; do
    assert_eq "$(cat "$T/count/$s" 2> /dev/null | wc -l)" 1 "resume: $s ran exactly once"
done
jrun --all --resume "$T/state.run" "$RCMD"
assert_eq "$RC/$(jq_out .total)/$(jq_out .skipped_done)" "0/0/8" "resume: a third run has nothing left"

# ---- the bar: on a terminal only --------------------------------------------------------------------
TENANCY_CONF=$CONF script -qec "$TENANCY run --all -j 2 'sleep 0.3'" /dev/null > "$T/tty" 2>&1
assert_contains "$(cat "$T/tty")" "tenants/s" "a terminal: the bar (count, rate)"
assert_contains "$(cat "$T/tty")" "ETA" "a terminal: the bar's time left"
assert_eq "$(grep -o '\] [0-9]*/[0-9]*' "$T/tty" | sed 's|.*/||' | sort -u | tr '\n' ' ')" "8 " \
    "a terminal: the bar's total is the 8 tenants throughout"
run --all 'true'
case "$ERR" in *ETA*) fail "not a terminal: no bar" ;; *) log "ok: not a terminal: no bar" ;; esac

# ---- root with `user` set: the command runs as the workers' owner --------------------------------
if [ "$(id -u)" = 0 ] && id nobody > /dev/null 2>&1; then
    cp "$CONF" "$CONF.user"
    echo "user = nobody" >> "$CONF.user"
    "$TENANCY" -c "$CONF.user" --json run --tenant sq-ant 'id -u' > "$T/out" 2> "$T/err"
    assert_eq "$(jq_out '.tenants[0].output')" "$(id -u nobody)" "root, user = nobody: run as nobody"
else
    log "note: not root: the change to the workers' owner is not exercised"
fi

[ "$FAILED" = 0 ] && log "ok: tenancy run"
