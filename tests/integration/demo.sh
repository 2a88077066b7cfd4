#!/bin/bash
# demo.sh — `make demo` as a user runs it: the demo runner prints "ready", the three tenants
# answer with their own name at <slug>.localhost, an unknown one gets the 404 page, and a
# SIGTERM stops everything it started.
. "$(dirname "$0")/lib.sh"
need curl nginx "$TENANCY_CLI"
port=$(free_port)
DEMO_PORT=$port bash "$top_srcdir/apps/demo/demo.sh" "$top_builddir" > "$T/demo.log" 2>&1 &
demo=$!
PIDS+=("$demo")
wait_until 20 grep -q 'ready' "$T/demo.log" || fatal "the demo did not print ready: $(cat "$T/demo.log")"
for t in acme:"Acme Corporation" globex:"Globex Corporation" initech:Initech; do
    slug=${t%%:*} name=${t#*:}
    body=$(curl -s -m 5 "http://$slug.localhost:$port/")
    assert_contains "$body" "\"tenant\":\"$slug\"" "$slug answers as itself"
    assert_contains "$body" "\"name\":\"$name\"" "$slug's name from the context"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://nobody.localhost:$port/")
assert_eq "$code" 404 "an unknown tenant gets 404"
assert_contains "$(curl -s "http://acme.localhost:$port/_theme.css")" "--primary: #d9480f" "acme's theme"
assert_contains "$(curl -s "http://localhost:$port/")" '"platform":true' "the platform page"
kill -TERM "$demo"
wait_until 10 bash -c "! kill -0 $demo" || fail "the demo did not stop on SIGTERM"
leftover=$(pgrep -f "tenancy-demo\." | wc -l)
assert_eq "$leftover" 0 "no process left behind"
assert_contains "$(cat "$T/demo.log")" "demo: stopped" "the demo says it stopped"
