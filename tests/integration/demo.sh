#!/bin/bash
# demo.sh — `make demo` as a user runs it: the demo runner prints "ready", the three tenants
# answer with their own name at <slug>.localhost, an unknown one gets the 404 page, and a
# SIGTERM stops everything it started.
. "$(dirname "$0")/lib.sh"
need curl nginx "$TENANCY_CLI"
run_demo() {
    local storage=$1 port
    port=$(free_port)
    log "--- DEMO_STORAGE=$storage"
    DEMO_PORT=$port DEMO_STORAGE=$storage bash "$top_srcdir/apps/demo/demo.sh" "$top_builddir" \
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
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://nobody.localhost:$port/")
    assert_eq "$code" 404 "$storage: an unknown tenant gets 404"
    assert_contains "$(curl -s "http://acme.localhost:$port/_theme.css")" "--primary: #d9480f" "$storage: acme's theme"
    assert_contains "$(curl -s "http://localhost:$port/")" '"platform":true' "$storage: the platform page"
    kill -TERM "$demo"
    wait_until 15 bash -c "! kill -0 $demo" || fail "$storage: the demo did not stop on SIGTERM"
    local leftover pgdir
    pgdir=$(sed -n 's/^ *PostgreSQL: a throwaway cluster in \([^ ]*\) .*/\1/p' "$T/demo-$storage.log")
    leftover=$(pgrep -f "tenancy-demo\.${pgdir:+|$pgdir}" | wc -l)
    [ "$storage" = sqlite ] || [ -n "$pgdir" ] || fail "$storage: the banner names no cluster folder"
    [ -z "$pgdir" ] || [ ! -e "$pgdir" ] || fail "$storage: the cluster folder was not removed"
    assert_eq "$leftover" 0 "$storage: no process left behind"
    assert_contains "$(cat "$T/demo-$storage.log")" "demo: stopped" "$storage: the demo says it stopped"
}
run_demo sqlite
run_demo postgres
