#!/bin/bash
# demo.sh — `make demo` as a user runs it: the demo runner prints "ready", the three tenants
# answer with their own name at <slug>.localhost, an unknown one gets the 404 page, and a
# SIGTERM stops everything it started.
#
# "Everything it started" is counted from this run's demo only: its session (the runner is
# started as a session leader, and whatever it starts stays in the session unless it leaves
# it), the processes naming its own folders, and its PostgreSQL server by the pid in its pid
# file, which is read while the demo runs (pg_ctl starts the server in a session of its own).
# A demo someone runs in another terminal is none of these, and must not fail this test.
. "$(dirname "$0")/lib.sh"
need curl nginx setsid "$TENANCY_CLI"

# alive PID [START]: the process exists, is not a zombie (a process whose parent died is
# reaped by init, maybe late), and, given START, still is the one that started then (its
# field 22 of /proc/PID/stat), not a later process with the same pid.
alive() {
    local st
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    set -- "$1" "${2:-}" $st
    [ "$3" != Z ] && { [ -z "$2" ] || [ "${22}" = "$2" ]; }
}
# own_left SID DIR PGDIR POSTMASTER: what is left of the demo: its session, the processes
# naming its folders, its PostgreSQL server and that server's children, each pid once.
own_left() {
    local sid=$1 dir=$2 pgdir=$3 pm=$4 p
    {
        pgrep -s "$sid"
        [ -z "$dir" ] || pgrep -f -- "$dir/"
        [ -z "$pgdir" ] || pgrep -f -- "$pgdir"
        if [ -n "$pm" ] && alive $pm; then
            echo "${pm% *}"
            pgrep -P "${pm% *}"
        fi
    } 2>/dev/null | sort -un | while read -r p; do alive "$p" && echo "$p"; done
}
run_demo() {
    local storage=$1 port
    port=$(free_port)
    log "--- DEMO_STORAGE=$storage"
    DEMO_PORT=$port DEMO_STORAGE=$storage setsid bash "$top_srcdir/apps/demo/demo.sh" "$top_builddir" \
        > "$T/demo-$storage.log" 2>&1 &
    local demo=$!
    PIDS+=("$demo")
    wait_until 30 grep -q 'ready' "$T/demo-$storage.log" ||
        fatal "the demo did not print ready: $(cat "$T/demo-$storage.log")"
    assert_contains "$(cat "$T/demo-$storage.log")" "Storage: $storage" "$storage: the banner names the storage"
    for t in acme:"Acme Corporation" globex:"Globex Corporation" initech:Initech; do
        local slug=${t%%:*} name=${t#*:} body
        body=$(curl -s -m 5 "http://$slug.localhost:$port/")
        assert_contains "$body" "\"tenant\":\"$slug\"" "$storage: $slug answers as itself"
        assert_contains "$body" "\"name\":\"$name\"" "$storage: $slug's name from the context"
        assert_contains "$body" "\"data\":\"Hello from $name ($slug), served from its own storage\"" \
            "$storage: $slug's data from its own storage"
    done
    local code
    # a job: queued by a request, run by a job worker in acme's context, seen in its storage
    assert_contains "$(curl -s -X POST "http://acme.localhost:$port/greet?message=hello%20later")" \
        '"queued":' "$storage: acme queues a greeting as a job"
    wait_until 10 bash -c "curl -s http://acme.localhost:$port/greetings | grep -qx 'hello later'" ||
        fail "$storage: the job did not add acme's greeting"
    assert_eq "$(curl -s "http://globex.localhost:$port/greetings" | grep -c 'hello later')" 0 \
        "$storage: globex's greetings are its own"
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://nobody.localhost:$port/")
    assert_eq "$code" 404 "$storage: an unknown tenant gets 404"
    assert_contains "$(curl -s "http://acme.localhost:$port/_theme.css")" "--primary: #d9480f" "$storage: acme's theme"
    assert_contains "$(curl -s "http://localhost:$port/")" '"platform":true' "$storage: the platform page"
    # The data API beside the demo app, with the keys the banner prints, as its quickstart
    # does: a table and rows in acme's storage, which globex's key cannot reach.
    local ka kg J='Content-Type: application/json' A
    ka=$(sed -n 's/^ *acme: *\(tnk_[A-Za-z0-9_-]*\)$/\1/p' "$T/demo-$storage.log")
    kg=$(sed -n 's/^ *globex: *\(tnk_[A-Za-z0-9_-]*\)$/\1/p' "$T/demo-$storage.log")
    [ -n "$ka" ] && [ -n "$kg" ] || fatal "$storage: the banner prints no data API keys"
    A="http://acme.localhost:$port/api"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ka" -H "$J" "$A/tables" \
        -d '{"name":"notes","columns":[{"name":"body","type":"text","not_null":true}],"search":["body"]}')
    assert_eq "$code" 201 "$storage: the quickstart's table is created in acme"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ka" -H "$J" "$A/notes" \
        -d '[{"body":"hello from acme"},{"body":"bye"}]')
    assert_eq "$code" 201 "$storage: rows inserted"
    assert_eq "$(curl -s -H "Authorization: Bearer $ka" "$A/notes?select=body&body=like.hello*")" \
        '[{"body":"hello from acme"}]' "$storage: the quickstart's filtered read"
    assert_eq "$(curl -s -H "Authorization: Bearer $ka" -H "$J" "$A/query" -d '{"sql":"SELECT count(*) AS n FROM notes"}')" \
        '{"columns":["n"],"rows":[["2"]],"truncated":false}' "$storage: the quickstart's read-only SQL"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $kg" "$A/notes")
    assert_eq "$code" 401 "$storage: globex's key is refused at acme's host"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $kg" \
        "http://globex.localhost:$port/api/notes")
    assert_eq "$code" 404 "$storage: globex has no table notes"
    # What is this demo's, read while it runs (its folders are removed when it stops).
    local sid dir pgdir pm=
    sid=$(ps -o sid= -p "$demo" | tr -d ' ')
    [ "$sid" = "$demo" ] || fatal "$storage: the demo is not a session leader (session '$sid')"
    dir=$(sed -n 's|^ *Logs: \(/[^ ]*\)/tenancyd.log .*|\1|p' "$T/demo-$storage.log")
    [ -n "$dir" ] && [ -d "$dir" ] || fatal "$storage: the banner names no folder of the demo"
    pgdir=$(sed -n 's/^ *PostgreSQL: a throwaway cluster in \([^ ]*\) .*/\1/p' "$T/demo-$storage.log")
    if [ "$storage" = postgres ]; then
        [ -n "$pgdir" ] || fatal "$storage: the banner names no cluster folder"
        pm=$(head -1 "$pgdir/data/postmaster.pid" 2>/dev/null)
        [ -n "$pm" ] || fatal "$storage: no server pid in $pgdir/data/postmaster.pid"
        pm="$pm $(sed 's/^.*) //' "/proc/$pm/stat" | awk '{print $20}')"
    fi
    local running
    running=$(own_left "$sid" "$dir" "$pgdir" "$pm" | wc -l)
    assert_ge "$running" 3 "$storage: the demo's own processes found while it runs (runner, tenancyd, nginx...)"
    kill -TERM "$demo"
    wait_until 15 bash -c "! kill -0 $demo" || fail "$storage: the demo did not stop on SIGTERM"
    local leftover
    [ -z "$pgdir" ] || [ ! -e "$pgdir" ] || fail "$storage: the cluster folder was not removed"
    [ ! -e "$dir" ] || fail "$storage: the demo's folder was not removed"
    leftover=$(own_left "$sid" "$dir" "$pgdir" "$pm")
    [ -z "$leftover" ] || log "$storage: left behind: $(ps -o pid=,args= -p "$(echo $leftover | tr ' ' ,)")"
    assert_eq "$(echo $leftover | wc -w)" 0 "$storage: no process left behind"
    # What is left is this test's own, so it stops it.
    [ -z "$pgdir" ] || [ ! -e "$pgdir" ] || bash "$top_srcdir/tests/pg.sh" stop "$pgdir" > /dev/null 2>&1
    [ -z "$leftover" ] || kill -KILL $leftover 2>/dev/null
    assert_contains "$(cat "$T/demo-$storage.log")" "demo: stopped" "$storage: the demo says it stopped"
}
run_demo sqlite
run_demo postgres
