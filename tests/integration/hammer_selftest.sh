#!/bin/bash
# hammer_selftest.sh — the load generator that other tests trust, tested against a real nginx
# and against its own parser test server (hammer --selftest-server):
#   - an honest location (return 200 "host=$host") gives 0 wrong answers and exit 0; a lying
#     one (t7.localhost answers as t8, through a map) gives wrong answers and exit 1;
#   - --exact refuses a body that only contains the text; --expect-file gives each tenant
#     its own text (a changed line makes that tenant's answers wrong);
#   - chunked bodies parse: nginx re-chunks a close-delimited upstream answer, and the test
#     server sends chunks with extensions, trailers, one byte at a time, after a 100 Continue;
#   - each error kind is counted as what it is (connect, reset, timeout, parse), statuses are
#     checked against --expect-status, usage errors exit 2;
#   - requests = responses + errors, always; -d 2 stops in about 2 seconds;
#   - --log writes one line per attempt, with its times, status or error, and verdict;
#   - --header and --header-file send each tenant's own header lines (an API key), and
#     --sequential with --expand-body reaches every tenant once with a body of its own.
. "$(dirname "$0")/lib.sh"
need nginx curl
HAMMER=$HELPERS/hammer
need "$HAMMER"

# ---- servers --------------------------------------------------------------------------------
ST_PORT=$(free_port)
"$HAMMER" --selftest-server "$ST_PORT" > "$T/selftest-server.log" 2>&1 &
PIDS+=("$!")
wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ST_PORT" ||
    fatal "the selftest server did not start"

NGINX_PORT=$(free_port)
{ nginx_conf_head; cat <<NGX
    default_type text/plain;
    map \$host \$answer_host { t7.localhost t8.localhost; default \$host; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        listen [::1]:$NGINX_PORT;
        location = /honest { return 200 "host=\$host\n"; }
        location = /lying { return 200 "host=\$answer_host\n"; }
        # No Content-Length upstream: nginx answers an HTTP/1.1 client in chunks.
        location = /chunked {
            proxy_pass http://127.0.0.1:$ST_PORT/eof;
            proxy_set_header Host \$host;
        }
        location / { return 404 "nope\n"; }
    }
}
NGX
} > "$T/nginx.conf"
nginx_launch

# ---- helpers --------------------------------------------------------------------------------
# ham NAME ARGS...: run hammer with --json $T/NAME.json (stderr in $T/NAME.err). Sets RC (exit
# status), MS (wall time, ms) and J[key] (every number of the JSON: hammer writes each key
# once), and checks that every request was accounted for exactly once. No forks beyond
# hammer's own: the machine may be busy with other builds.
RC=0
MS=0
declare -A J
ham() {
    local name=$1 t0=${EPOCHREALTIME/./} s=""
    shift
    "$HAMMER" --json "$T/$name.json" "$@" 2> "$T/$name.err"
    RC=$?
    MS=$(((${EPOCHREALTIME/./} - t0) / 1000))
    J=()
    [ -f "$T/$name.json" ] && IFS= read -r -d '' s < "$T/$name.json"
    while [[ $s =~ \"([A-Za-z0-9_]+)\":\ ([0-9.]+)(.*) ]]; do
        J[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
        s=${BASH_REMATCH[3]}
    done
    if [ "$RC" -ne 2 ]; then
        local sum=$((J[responses] + J[connect] + J[reset] + J[timeout] + J[parse]))
        [ "$sum" = "${J[requests]}" ] ||
            fail "$name: requests ${J[requests]} != responses + errors $sum"
    fi
}
H=(-p "$NGINX_PORT" -H 't%d.localhost')
S=(-p "$ST_PORT" -H 't%d.localhost')

# ---- the wrong-tenant checker ---------------------------------------------------------------
ham honest "${H[@]}" -N 100 -c 20 -n 3000 -u /honest -e $'host=%h\n'
assert_eq "$RC" 0 "honest: exit status"
assert_eq "${J[requests]}:${J[200]}:${J[wrong]}" 3000:3000:0 "honest: 3000 answers 200, none wrong"

ham lying "${H[@]}" -N 10 -c 20 -n 2000 -u /lying -e $'host=%h\n' --seed 7
assert_eq "$RC" 1 "lying: exit status"
assert_eq "${J[200]}" 2000 "lying: 2000 answers 200"
# t7 is drawn 10% of the time: about 200 wrong answers (sd 13).
assert_ge "${J[wrong]}" 100 "lying: wrong answers counted"
assert_ge 350 "${J[wrong]}" "lying: only t7's answers are wrong"
assert_contains "$(< "$T/lying.err")" \
    'Host t7.localhost: expected "host=t7.localhost\n", got 200 "host=t8.localhost\n"' \
    "lying: the first wrong answer is shown"
# --tenant-counts: the same run tenant by tenant; only t7's answers are not right
ham lying_tc "${H[@]}" -N 10 -c 20 -n 2000 -u /lying -e $'host=%h\n' --seed 7 --tenant-counts "$T/tc.txt"
tc=$(awk '{ n++; ok += $2; other += $3; un += $4; if ($3 > 0) bad = bad " " $1 } END { printf "%d:%d:%d:%d:%s", n, ok, other, un, bad }' "$T/tc.txt")
assert_eq "$tc" "10:$((2000 - J[wrong])):${J[wrong]}:0: 7" "tenant counts: 10 tenants, the wrong answers all t7's"
ham slow_tc "${S[@]}" -N 3 -c 2 -n 4 -u /slow --timeout 300 --tenant-counts "$T/tc-slow.txt"
assert_eq "$(awk '{ ok += $2; un += $4 } END { print ok ":" un }' "$T/tc-slow.txt")" "0:4" \
    "tenant counts: timeouts are unanswered"
ham lying_t7 -p "$NGINX_PORT" -H t7.localhost -c 5 -n 100 -u /lying -e $'host=%h\n'
assert_eq "$RC:${J[wrong]}" 1:100 "lying to t7 only: 100 of 100 wrong"
ham lying_t6 -p "$NGINX_PORT" -H t6.localhost -c 5 -n 100 -u /lying -e $'host=%h\n'
assert_eq "$RC:${J[wrong]}" 0:0 "honest to t6: none wrong"

# ---- chunked bodies ---------------------------------------------------------------------------
assert_contains "$(curl -si -m 10 -H 'Host: t3.localhost' "http://127.0.0.1:$NGINX_PORT/chunked")" \
    "Transfer-Encoding: chunked" "nginx answers /chunked in chunks"
ham ngx_chunked "${H[@]}" -N 10 -c 5 -n 100 -u /chunked -e $'host=%h\n'
assert_eq "$RC:${J[200]}:${J[wrong]}" 0:100:0 "chunked through nginx: 100 right answers"

for p in /cl /chunked /trickle /continue /eof /close; do
    n=100
    [ "$p" = /trickle ] && n=20
    [ "$p" = /eof ] || [ "$p" = /close ] && n=40
    ham "st${p//\//_}" "${S[@]}" -N 20 -c 4 -n "$n" -u "$p" -e $'host=%h\n'
    assert_eq "$RC:${J[200]}:${J[wrong]}" "0:$n:0" "$p: $n right answers"
done
assert_eq "${J[connects]}" 40 "Connection: close: one connection per request"
ham st_lie "${S[@]}" -N 10 -c 4 -n 100 -u /lie -e $'host=%h\n' --seed 7
assert_eq "$RC" 1 "chunked lie: exit status"
assert_ge "${J[wrong]}" 1 "chunked lie: wrong answers counted"

# ---- exact bodies, per-tenant texts from a file -------------------------------------------------
# --exact: the body must be the text. "host=t" is in every answer but is none of them.
ham ex_prefix "${S[@]}" -N 5 -c 2 -n 40 -u /cl -e 'host=t' --exact
assert_eq "$RC:${J[wrong]}" 1:40 "--exact: a body that only contains the text is wrong"
for i in 1 2 3 4 5 6 7 8 9 10; do echo "host=t$i.localhost"; done > "$T/expect"
ham ex_file "${S[@]}" -N 10 -c 4 -n 100 -u /chunked --expect-file "$T/expect" --exact
assert_eq "$RC:${J[200]}:${J[wrong]}" 0:100:0 "--expect-file --exact: 100 right answers"
sed -i 's/^host=t4\./host=t4x./' "$T/expect"
ham ex_file4 "${S[@]}" -N 10 -c 4 -n 100 -u /cl --expect-file "$T/expect" --exact --seed 7
assert_eq "$RC" 1 "--expect-file: one tenant's text changed, exit status"
assert_ge "${J[wrong]}" 1 "--expect-file: that tenant's answers are wrong"
assert_contains "$(< "$T/ex_file4.err")" 'expected "host=t4x.localhost\n", got 200 "host=t4.localhost\n"' \
    "--expect-file: the wrong answer is shown with its line"

# ---- headers and bodies of each tenant's own ------------------------------------------------------
# /headers answers the header lines it got (but Host, User-Agent, Content-Length, Connection).
ham hdr "${S[@]}" -N 20 -c 4 -n 100 -u /headers --header 'X-Tenant: t%d' \
    --header 'Content-Type:application/json' -e $'X-Tenant: t%d\nContent-Type: application/json\n' --exact
assert_eq "$RC:${J[200]}:${J[wrong]}" 0:100:0 "--header: every request, %d as its tenant"
for i in $(seq 1 20); do echo "Authorization: Bearer key-$i-$RANDOM"; done > "$T/keys"
ham hdr_file "${S[@]}" -N 20 -c 4 -n 200 -u /headers --header-file "$T/keys" --expect-file "$T/keys" --exact
assert_eq "$RC:${J[200]}:${J[wrong]}" 0:200:0 "--header-file: line d goes with tenant d's requests"
sed 's/$/\r/' "$T/keys" > "$T/keys-crlf"
ham hdr_crlf "${S[@]}" -N 20 -c 4 -n 100 -u /headers --header-file "$T/keys-crlf" --expect-file "$T/keys" --exact
assert_eq "$RC:${J[wrong]}" 0:0 "--header-file: CRLF lines are sent as the same header"
sed '4s/Bearer key-/Bearer kex-/' "$T/keys" > "$T/keys4"
ham hdr_file4 "${S[@]}" -N 20 -c 4 -n 200 -u /headers --header-file "$T/keys4" --expect-file "$T/keys" --exact --seed 7 \
    --tenant-counts "$T/tc-hdr.txt"
assert_eq "$RC" 1 "--header-file: one tenant's line changed, exit status"
assert_eq "$(awk '$3 > 0 { printf "%s ", $1 }' "$T/tc-hdr.txt")" "4 " "--header-file: only tenant 4's answers differ"
ham hdr_post "${S[@]}" -N 20 -c 4 -n 50 -m POST -u /cl -b 'x=1' --header-file "$T/keys" --header 'Prefer: return=minimal'
assert_eq "$RC:${J[200]}" 0:50 "--header-file with a POST body: framing intact"
ham seq "${S[@]}" -N 50 -c 4 -n 50 --sequential -m POST -u /echo -b '{"name":"t%d","pct":"5%%"}' --expand-body \
    -e '{"name":"t%d","pct":"5%%"}' --exact --tenant-counts "$T/tc-seq.txt"
assert_eq "$RC:${J[200]}:${J[wrong]}" 0:50:0 "--expand-body: each tenant's body is its own"
assert_eq "$(awk '$2 == 1 && $3 == 0 && $4 == 0 { n++ } END { print n + 0 }' "$T/tc-seq.txt")" 50 \
    "--sequential -n 50 -N 50: each tenant exactly once"
ham seq2 "${S[@]}" -N 7 -c 3 -n 70 --sequential -u /cl --tenant-counts "$T/tc-seq2.txt"
assert_eq "$(awk '{ printf "%s:%s ", $1, $2 }' "$T/tc-seq2.txt")" "1:10 2:10 3:10 4:10 5:10 6:10 7:10 " \
    "--sequential -n 70 -N 7: ten rounds of the fleet"

# ---- errors by kind ---------------------------------------------------------------------------
for spec in /bad:parse /badchunk:parse /extra:parse /short:reset /reset:reset; do
    p=${spec%%:*} kind=${spec##*:}
    ham "err${p//\//_}" "${S[@]}" -c 2 -n 10 -u "$p"
    assert_eq "$RC:${J[$kind]}" "1:10" "$p: 10 $kind errors, exit 1"
done
ham slow "${S[@]}" -c 2 -n 4 -u /slow --timeout 300
assert_eq "$RC:${J[timeout]}" "1:4" "/slow: 4 timeouts, exit 1"
assert_ge "$MS" 550 "/slow: two rounds of 300 ms timeouts ($MS ms)"
assert_ge 1500 "$MS" "/slow: the timeouts end the run in time ($MS ms)"
ham refused -p "$(free_port)" -c 2 -n 10
assert_eq "$RC:${J[connect]}" "1:10" "nobody listening: 10 connect errors"
ham maxerr "${S[@]}" -c 2 -d 10 -u /bad --max-errors 20
assert_eq "$RC" 1 "--max-errors: exit status"
assert_contains "$(< "$T/maxerr.json")" '"stopped_by": "max-errors"' "--max-errors stops the run"
assert_ge 3000 "$MS" "--max-errors stops early ($MS ms)"

# ---- statuses -----------------------------------------------------------------------------------
ham missing "${H[@]}" -c 2 -n 20 -u /missing
assert_eq "$RC:${J[404]}:${J[unexpected_status]}" "1:20:20" "404 is unexpected by default"
ham missing404 "${H[@]}" -c 2 -n 20 -u /missing --expect-status 404
assert_eq "$RC" 0 "--expect-status 404 accepts 404"
ham st503 "${S[@]}" -c 2 -n 20 -u /status/503 --expect-status 5xx
assert_eq "$RC:${J[503]}" "0:20" "--expect-status 5xx accepts 503"

# ---- connections, addresses, duration -----------------------------------------------------------
ham noka "${H[@]}" -N 50 -c 10 -n 300 -u /honest -e $'host=%h\n' --keepalive off
assert_eq "$RC:${J[connects]}" "0:300" "--keepalive off: one connection per request"
ham v6 -a ::1 "${H[@]}" -N 50 -c 10 -n 500 -u /honest -e $'host=%h\n'
assert_eq "$RC:${J[200]}" "0:500" "over IPv6"
ham post "${H[@]}" -c 4 -n 100 -u /honest -m POST -b 'x=1' -e 'host='
assert_eq "$RC:${J[200]}" "0:100" "POST with a body"

ham duration "${H[@]}" -N 1000 -c 50 -d 2 -u /honest -e $'host=%h\n'
assert_eq "$RC" 0 "-d 2: exit status"
assert_ge "$MS" 1990 "-d 2 runs 2 s ($MS ms)"
assert_ge 2500 "$MS" "-d 2 stops in about 2 s ($MS ms)"
assert_contains "$(< "$T/duration.json")" '"stopped_by": "duration"' "-d 2 stopped by duration"
assert_ge "${J[requests]}" 1000 "-d 2: requests made"
assert_ge "${J[p95]}" "${J[p50]}" "latency: p95 at least p50"
assert_ge "${J[p99]}" "${J[p95]}" "latency: p99 at least p95"
log "-d 2 at -c 50: $(< "$T/duration.err")"

# ---- --log: one line per attempt ----------------------------------------------------------------
# logged NAME: "START END WHAT RESULT" counts of $T/NAME.log as "WHAT:RESULT=N ..." (sorted),
# after checking that each line is well formed and that its times lie within the run.
logged() {
    awk -v t0="$LOG_T0" -v t1="$LOG_T1" '
        NF != 4 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/ || $1 > $2 || $1 < t0 || $2 > t1 {
            print "bad line " NR ": " $0; next }
        { n[$3 ":" $4]++ }
        END { for (k in n) print k "=" n[k] }' "$T/$1.log" | sort | paste -sd' ' -
}
LOG_T0=$(($(date +%s%3N) - 1))
ham log_lying "${H[@]}" -N 10 -c 4 -n 200 -u /lying -e $'host=%h\n' --seed 7 --log "$T/log_lying.log"
wrong=${J[wrong]}
ham log_reset "${S[@]}" -c 2 -n 10 -u /reset --log "$T/log_reset.log"
ham log_404 "${H[@]}" -c 2 -n 10 -u /honest --expect-status 404 --log "$T/log_404.log"
LOG_T1=$(($(date +%s%3N) + 1))
assert_ge "$wrong" 1 "--log: the lying run had wrong answers"
assert_eq "$(logged log_lying)" "200:ok=$((200 - wrong)) 200:wrong=$wrong" \
    "--log: a line per answer, right and wrong apart, within the run"
assert_eq "$(logged log_reset)" "reset:error=10" "--log: a line per error, by kind"
assert_eq "$(logged log_404)" "200:unexpected=10" "--log: an unexpected status"

# ---- usage errors -------------------------------------------------------------------------------
for args in "-p $NGINX_PORT" "-n 10" "-p $NGINX_PORT -n 10 -a 10.1.2.3" \
    "-p $NGINX_PORT -n 10 -H t%x" "-p $NGINX_PORT -n 10 -e %q" "-p $NGINX_PORT -d 0" \
    "-p $NGINX_PORT -n 10 --keepalive maybe" "-p $NGINX_PORT -n 10 --bogus" \
    "-p $NGINX_PORT -n 10 --exact" "-p $NGINX_PORT -n 10 -N 11 --expect-file $T/expect" \
    "-p $NGINX_PORT -n 10 -e x --expect-file $T/expect" "-p $NGINX_PORT -n 10 --header Host:x" \
    "-p $NGINX_PORT -n 10 --header content-length:5" "-p $NGINX_PORT -n 10 --header nocolon" \
    "-p $NGINX_PORT -n 10 --header :v" "-p $NGINX_PORT -n 10 --header X:%q" \
    "-p $NGINX_PORT -n 10 -N 21 --header-file $T/keys" "-p $NGINX_PORT -n 10 --expand-body" \
    "-p $NGINX_PORT -n 10 -b %q --expand-body"; do
    # shellcheck disable=SC2086
    "$HAMMER" $args > /dev/null 2>&1
    assert_eq "$?" 2 "usage error: hammer $args"
done
if "$HAMMER" --help | grep -q -- '--expect-status'; then log "ok: --help"; else fail "--help"; fi
