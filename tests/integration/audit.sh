#!/bin/bash
# audit.sh — the SQL console's entries in the audit log (admin.audit_log) cannot be hidden,
# through a real nginx and tenancyd on a SQLite tenant:
#   - padding hides nothing: a query of 310 spaces then `SELECT secret FROM vault` is logged
#     whole, with its length and the SHA-256 of its exact text (the old line kept the first
#     300 bytes, all blanks); a query longer than the console takes (64 KiB) is refused and
#     still logged by its length, hash and a visible prefix; a query that cannot be logged
#     (the log cannot be written) is not run;
#   - the entry is written before the statement runs: while a runaway query still runs, its
#     start line is in the log and the audit page shows it "running"; a query that finishes
#     gets a second line with the same id and its outcome (rows, ms);
#   - a worker that dies under a statement cannot leave it unexplained: SIGKILL and SIGSEGV
#     sent to the worker running the query, and request_timeout (after a reload), each leave
#     the start line and a completion written by the master ("died", the signal), shown on
#     the audit page beside the query.
# The test signals only the worker its own tenancyd runs (found in the status JSON, checked
# to be a child of that tenancyd).
. "$(dirname "$0")/lib.sh"
# A worker is sent SIGSEGV on purpose here, and the test checks how its death is handled: in a
# sanitizer build (tests/sanitizers.sh) AddressSanitizer would take the signal, report it and
# abort (signal 6) instead. Not handled, it ends the worker as in any other build.
export ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0"
need curl nginx sqlite3 sha256sum "$TENANCY_CLI"

PASSWORD='correct horse battery'
mkdir -p "$T/state"
tn_conf "app = $DEMO_SO" "pm.max_children = 2" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" "admin.host = admin.localhost" \
    "admin.query_timeout = 120s" "request_timeout = 0" "status_path = /status" \
    "storage.migrations = $top_srcdir/apps/demo/migrations"
tn_cli init > /dev/null || fatal "tenancy init failed"
printf '%s\n' "$PASSWORD" | tn_cli admin passwd --stdin > /dev/null || fatal "admin passwd failed"
tn_cli tenant create lite --name "Lite Co" > /dev/null || fatal "create lite"
sqlite3 "$T/state/tenants/lite.db" "CREATE TABLE vault (secret TEXT);
  INSERT INTO vault VALUES ('the launch code');" || fatal "lite data"
tn_start
nginx_start

U=http://127.0.0.1:$NGINX_PORT
AH='Host: admin.localhost'
JAR=$T/jar
AUDIT=$T/state/admin-audit.log

req() {   # req METHOD PATH [curl args...]: status on stdout, body in $T/body
    local m=$1 p=$2
    shift 2
    curl -s -m 30 -X "$m" -H "$AH" -b "$JAR" -c "$JAR" -o "$T/body" -w '%{http_code}' "$@" "$U$p"
}
body() { cat "$T/body"; }
panel_login "$PASSWORD"
TOKEN=$PANEL_TOKEN

# The SQL text travels in a file, byte for byte (curl --data-urlencode name@file).
sqlfile() { printf '%s' "$1" > "$T/q.sql"; }
sql_file() {   # sql_file [curl args...]: POST $T/q.sql to the console -> status
    req POST /t/lite/sql --data-urlencode "csrf=$TOKEN" --data-urlencode "sql@$T/q.sql" \
        --data-urlencode "format=html" "$@"
}
field() {   # field KEY < line: the value of a flat string field of one audit line
    sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"
}
lines_of() { grep -F "\"id\":\"$1\"" "$AUDIT" || true; }
audit_row() {   # audit_row ID: the audit page's row of that entry
    req GET /audit > /dev/null
    tr -d '\n' < "$T/body" | sed -n "s#.*\\(<tr id=\"audit-$1\".*\\)#\\1#p" | sed 's#</tr>.*#</tr>#'
}

# ---- padding hides nothing ----------------------------------------------------------------------------
pad=$(printf '%310s' '')
sqlfile "${pad}SELECT secret FROM vault"
assert_eq "$(sql_file)" 200 "the padded query runs"
assert_contains "$(body)" 'the launch code' "and reads the secret"
line=$(grep -F 'SELECT secret FROM vault' "$AUDIT" | head -1)
assert_contains "$line" "\"detail\":\"${pad}SELECT secret FROM vault\"" \
    "the audit line holds the whole text, padding and all (not its first 300 bytes)"
assert_eq "$(field len <<< "$line")" 334 "the audit line gives the text's length in bytes"
assert_eq "$(field sha256 <<< "$line")" "$(sha256sum < "$T/q.sql" | cut -d' ' -f1)" \
    "the audit line gives the SHA-256 of the exact text"
id=$(field id <<< "$line")
[ -n "$id" ] && log "ok: the entry has an id ($id)" || fail "the entry has no id"
pair=$(lines_of "$id")
assert_eq "$(wc -l <<< "$pair")" 2 "two lines carry that id: the start and the completion"
assert_eq "$(head -1 <<< "$pair" | field phase)" start "the start line comes first"
assert_eq "$(tail -1 <<< "$pair" | field phase)" end "the completion comes after it"
assert_eq "$(tail -1 <<< "$pair" | field result)" ok "the completion says ok"
assert_contains "$(tail -1 <<< "$pair" | field detail)" "1 row" "and how many rows"
assert_contains "$(tail -1 <<< "$pair" | field detail)" " ms" "and how long"

# A query over the console's 64 KiB is refused, and logged by its length, hash and a prefix in
# which whitespace runs are collapsed (so padding cannot push the statement out of sight).
{ printf '%70000s' ''; printf 'SELECT secret FROM vault'; } > "$T/q.sql"
assert_eq "$(sql_file)" 413 "a query over 64 KiB is refused"
line=$(grep -F '"len":"70024"' "$AUDIT" | head -1)
assert_eq "$(field sha256 <<< "$line")" "$(sha256sum < "$T/q.sql" | cut -d' ' -f1)" \
    "the refused query is logged by the SHA-256 of its text"
assert_eq "$(field detail <<< "$line")" "SELECT secret FROM vault" \
    "its visible prefix shows the statement behind the padding"
assert_eq "$(field cut <<< "$line")" yes "and says it is cut"
assert_eq "$(lines_of "$(field id <<< "$line")" | tail -1 | field result)" refused \
    "its completion says refused"

# A query that cannot be put on record is not run (the log is made a folder for a moment).
mv "$AUDIT" "$AUDIT.kept" && mkdir "$AUDIT"
sqlfile "SELECT secret FROM vault -- unlogged"
assert_eq "$(sql_file)" 503 "a query whose start line cannot be written is refused"
case $(body) in
*'the launch code'*) fail "the query ran although it could not be logged" ;;
*) log "ok: and not run" ;;
esac
rmdir "$AUDIT" && mv "$AUDIT.kept" "$AUDIT"
assert_contains "$(grep 'was not run' "$T/tenancyd.log")" "admin-audit.log" \
    "the error log says why"

# ---- written before the statement runs; a dying worker's statement is closed by the master ----
status_pid() {   # the pid of the worker of this tenancyd running a console query ("" if none)
    local pid
    pid=$(curl -s -m 5 "$U/status" | grep -o '{"pid":[0-9]*,[^{]*"request":{"method":"POST","uri":"/t/lite/sql"' |
        head -1 | sed 's/{"pid":\([0-9]*\),.*/\1/')
    [ -n "$pid" ] && tn_workers | grep -qx "$pid" && echo "$pid"
}
# runaway TAG: start a query that runs until something stops it (admin.query_timeout is
# 120 s); sets RUN_ID once its start line is in the log, RUN_CURL to the client's pid.
runaway() {
    sqlfile "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c -- $1"
    sql_file -m 60 > "$T/runaway-$1.status" 2>&1 &
    RUN_CURL=$!
    RUN_ID=
    if wait_until 10 grep -q -F -- "-- $1" "$AUDIT"; then
        RUN_ID=$(grep -F -- "-- $1" "$AUDIT" | head -1 | field id)
    fi
}

# ended LABEL SECONDS: once the query's client has its answer, the completion line the
# master writes for $RUN_ID within SECONDS (in $end), which must say the worker died.
ended() {
    wait "$RUN_CURL" 2>/dev/null
    wait_until "$2" bash -c "grep -F '\"id\":\"$RUN_ID\"' '$AUDIT' | grep -q '\"phase\":\"end\"'"
    end=$(lines_of "$RUN_ID" | grep '"phase":"end"')
    assert_eq "$(field result <<< "$end")" died "$1: the completion says the worker died"
}

runaway kill9
if [ -z "$RUN_ID" ]; then
    fail "SIGKILL: no start line while the query runs"
else
    log "ok: SIGKILL: the start line is in the log while the query runs ($RUN_ID)"
fi
kill -0 "$RUN_CURL" 2>/dev/null && log "ok: the query was still running then" ||
    fail "the query was not running any more"
pid=$(status_pid)
assert_eq "$(lines_of "$RUN_ID" | grep -c '"phase":"end"')" 0 "no completion while it runs"
assert_contains "$(audit_row "$RUN_ID")" 'result-running' "the audit page shows the query running"
if [ -n "$pid" ]; then
    kill -KILL "$pid"
    ended SIGKILL 5
    assert_contains "$(field detail <<< "$end")" "signal 9" "SIGKILL: with the signal"
    assert_contains "$(field detail <<< "$end")" "worker $pid" "SIGKILL: and the worker's pid"
    assert_eq "$(field by <<< "$end")" master "SIGKILL: written by the master"
    row=$(audit_row "$RUN_ID")
    assert_contains "$row" 'result-died' "the audit page shows the query with its worker's death"
    assert_contains "$row" 'signal 9' "and the signal"
else
    fail "SIGKILL: no worker of this tenancyd runs the query (status JSON)"
    kill "$RUN_CURL" 2>/dev/null
fi

runaway segv
pid=$(status_pid)
if [ -n "$RUN_ID" ] && [ -n "$pid" ]; then
    kill -SEGV "$pid"
    ended SIGSEGV 5
    assert_contains "$(field detail <<< "$end")" "signal 11" "SIGSEGV: with the signal"
else
    fail "SIGSEGV: no start line ('$RUN_ID') or no worker running the query ('$pid')"
    kill "$RUN_CURL" 2>/dev/null
fi

# request_timeout (a reload sets it): the worker answers 504 and exits, or is killed; the
# master closes the entry either way.
tn_conf "app = $DEMO_SO" "pm.max_children = 2" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" "admin.host = admin.localhost" \
    "admin.query_timeout = 120s" "request_timeout = 2s" "status_path = /status" \
    "storage.migrations = $top_srcdir/apps/demo/migrations"
kill -HUP "$TN_PID"
wait_until 10 grep -q ' reloaded: ' "$T/tenancyd.log" || fatal "the reload did not finish"
runaway timeout
if [ -n "$RUN_ID" ]; then
    ended request_timeout 8
    assert_contains "$(field detail <<< "$end")" "request_timeout" "request_timeout: named"
else
    fail "request_timeout: no start line"
    kill "$RUN_CURL" 2>/dev/null
fi
starts=$(grep -c '"phase":"start"' "$AUDIT")
ends=$(grep -c '"phase":"end"' "$AUDIT")
assert_eq "$ends" "$starts" "every console entry that started was completed ($starts)"
