#!/bin/bash
# hammer_selftest.sh — the load generator that other tests trust, tested against a real nginx
# and against its own parser test server (hammer --selftest-server):
#   - an honest location (return 200 "host=$host") gives 0 wrong answers and exit 0; a lying
#     one (t7.localhost answers as t8, through a map) gives wrong answers and exit 1;
#   - chunked bodies parse: nginx re-chunks a close-delimited upstream answer, and the test
#     server sends chunks with extensions, trailers, one byte at a time, after a 100 Continue;
#   - each error kind is counted as what it is (connect, reset, timeout, parse), statuses are
#     checked against --expect-status, usage errors exit 2;
#   - requests = responses + errors, always; -d 2 stops in about 2 seconds.
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
mkdir -p "$T/nginx"
user=""
[ "$(id -u)" = 0 ] && user="user root;"
cat > "$T/nginx.conf" <<NGX
daemon off;
$user
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    default_type text/plain;
    client_body_temp_path $T/nginx/body;
    fastcgi_temp_path $T/nginx/fastcgi;
    proxy_temp_path $T/nginx/proxy;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
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
nginx -t -c "$T/nginx.conf" -e "$T/nginx-error.log" >/dev/null 2>&1 ||
    hard_error "nginx config is invalid: $(nginx -t -c "$T/nginx.conf" -e "$T/nginx-error.log" \
        2>&1)"
nginx -c "$T/nginx.conf" -e "$T/nginx-error.log" >> "$T/nginx.log" 2>&1 &
PIDS+=("$!")
wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NGINX_PORT" || fatal "nginx did not start"

# ---- helpers --------------------------------------------------------------------------------
# ham NAME ARGS...: run hammer, JSON in $T/NAME.json, stderr in $T/NAME.err, exit status in
# RC, wall time in MS (milliseconds); also checks that every request was accounted for once.
RC=0
MS=0
ham() {
    local name=$1 t0=${EPOCHREALTIME/./}
    shift
    "$HAMMER" --json "$T/$name.json" "$@" 2> "$T/$name.err"
    RC=$?
    MS=$(((${EPOCHREALTIME/./} - t0) / 1000))
    if [ "$RC" -ne 2 ]; then
        local sum=$(($(jget "$name" responses) + $(jget "$name" connect) + $(jget "$name" reset) +
            $(jget "$name" timeout) + $(jget "$name" parse)))
        [ "$sum" = "$(jget "$name" requests)" ] ||
            fail "$name: requests $(jget "$name" requests) != responses + errors $sum"
    fi
}
# jget NAME KEY: a number from $T/NAME.json (hammer writes each key once, unambiguously)
jget() {
    local v
    v=$(grep -o "\"$2\": [0-9.]*" "$T/$1.json" | head -1)
    printf '%s' "${v##* }"
}
H=(-p "$NGINX_PORT" -H 't%d.localhost')
S=(-p "$ST_PORT" -H 't%d.localhost')

# ---- the wrong-tenant checker ---------------------------------------------------------------
ham honest "${H[@]}" -N 100 -c 20 -n 3000 -u /honest -e $'host=%h\n'
assert_eq "$RC" 0 "honest: exit status"
assert_eq "$(jget honest requests)" 3000 "honest: requests"
assert_eq "$(jget honest 200)" 3000 "honest: 3000 answers 200"
assert_eq "$(jget honest wrong)" 0 "honest: no wrong answer"

ham lying "${H[@]}" -N 10 -c 20 -n 2000 -u /lying -e $'host=%h\n'
assert_eq "$RC" 1 "lying: exit status"
assert_eq "$(jget lying 200)" 2000 "lying: 2000 answers 200"
w=$(jget lying wrong)
# t7 is drawn 10% of the time: 200 expected, sd 13.
assert_ge "$w" 100 "lying: wrong answers counted"
assert_ge 350 "$w" "lying: only t7's answers are wrong"
assert_contains "$(cat "$T/lying.err")" \
    'Host t7.localhost: expected "host=t7.localhost\n", got 200 "host=t8.localhost\n"' \
    "lying: the first wrong answer is shown"

# ---- chunked bodies ---------------------------------------------------------------------------
assert_contains "$(curl -si -m 10 -H 'Host: t3.localhost' "http://127.0.0.1:$NGINX_PORT/chunked")" \
    "Transfer-Encoding: chunked" "nginx answers /chunked in chunks"
ham ngx_chunked "${H[@]}" -N 10 -c 5 -n 200 -u /chunked -e $'host=%h\n'
assert_eq "$RC" 0 "chunked through nginx: exit status"
assert_eq "$(jget ngx_chunked wrong)" 0 "chunked through nginx: no wrong answer"
assert_eq "$(jget ngx_chunked 200)" 200 "chunked through nginx: 200 answers"

for p in /cl /chunked /trickle /continue /eof /close; do
    n=100
    [ "$p" = /trickle ] && n=20
    ham "st$(tr / _ <<< "$p")" "${S[@]}" -N 20 -c 4 -n "$n" -u "$p" -e $'host=%h\n'
    assert_eq "$RC:$(jget "st$(tr / _ <<< "$p")" 200)" "0:$n" "$p: $n right answers"
done
assert_eq "$(jget st_close connects)" 100 "Connection: close: one connection per request"
ham st_lie "${S[@]}" -N 10 -c 4 -n 300 -u /lie -e $'host=%h\n'
assert_eq "$RC" 1 "chunked lie: exit status"
assert_ge "$(jget st_lie wrong)" 1 "chunked lie: wrong answers counted"

# ---- errors by kind ---------------------------------------------------------------------------
for spec in /bad:parse /badchunk:parse /extra:parse /short:reset /reset:reset; do
    p=${spec%%:*} kind=${spec##*:}
    ham "err$(tr / _ <<< "$p")" "${S[@]}" -c 3 -n 30 -u "$p"
    assert_eq "$RC:$(jget "err$(tr / _ <<< "$p")" "$kind")" "1:30" "$p: 30 $kind errors, exit 1"
done
ham slow "${S[@]}" -c 2 -n 4 -u /slow --timeout 300
assert_eq "$RC:$(jget slow timeout)" "1:4" "/slow: 4 timeouts, exit 1"
assert_ge "$MS" 550 "/slow: two rounds of 300 ms timeouts ($MS ms)"
assert_ge 1500 "$MS" "/slow: the timeouts end the run in time ($MS ms)"
ham refused -p "$(free_port)" -c 2 -n 10
assert_eq "$RC:$(jget refused connect)" "1:10" "nobody listening: 10 connect errors"
ham maxerr "${S[@]}" -c 2 -d 10 -u /bad --max-errors 20
assert_eq "$RC" 1 "--max-errors: exit status"
assert_contains "$(cat "$T/maxerr.json")" '"stopped_by": "max-errors"' "--max-errors stops the run"
assert_ge 3000 "$MS" "--max-errors stops early ($MS ms)"

# ---- statuses -----------------------------------------------------------------------------------
ham missing "${H[@]}" -c 2 -n 20 -u /missing
assert_eq "$RC:$(jget missing 404):$(jget missing unexpected_status)" "1:20:20" \
    "404 is unexpected by default"
ham missing404 "${H[@]}" -c 2 -n 20 -u /missing --expect-status 404
assert_eq "$RC" 0 "--expect-status 404 accepts 404"
ham st503 "${S[@]}" -c 2 -n 20 -u /status/503 --expect-status 5xx
assert_eq "$RC:$(jget st503 503)" "0:20" "--expect-status 5xx accepts 503"

# ---- connections, addresses, duration -----------------------------------------------------------
ham noka "${H[@]}" -N 50 -c 10 -n 500 -u /honest -e $'host=%h\n' --keepalive off
assert_eq "$RC:$(jget noka connects)" "0:500" "--keepalive off: one connection per request"
ham v6 -a ::1 "${H[@]}" -N 50 -c 10 -n 500 -u /honest -e $'host=%h\n'
assert_eq "$RC:$(jget v6 200)" "0:500" "over IPv6"
ham post "${H[@]}" -c 4 -n 100 -u /honest -m POST -b 'x=1' -e 'host='
assert_eq "$RC:$(jget post 200)" "0:100" "POST with a body"

ham duration "${H[@]}" -N 1000 -c 50 -d 2 -u /honest -e $'host=%h\n'
assert_eq "$RC" 0 "-d 2: exit status"
assert_ge "$MS" 1990 "-d 2 runs 2 s ($MS ms)"
assert_ge 2500 "$MS" "-d 2 stops in about 2 s ($MS ms)"
assert_contains "$(cat "$T/duration.json")" '"stopped_by": "duration"' "-d 2 stopped by duration"
assert_ge "$(jget duration requests)" 1000 "-d 2: requests made"
log "-d 2 at -c 50: $(tail -n 1 "$T/duration.err")"

# ---- usage errors -------------------------------------------------------------------------------
for args in "-p $NGINX_PORT" "-n 10" "-p $NGINX_PORT -n 10 -a 10.1.2.3" \
    "-p $NGINX_PORT -n 10 -H t%x" "-p $NGINX_PORT -n 10 -e %q" "-p $NGINX_PORT -d 0" \
    "-p $NGINX_PORT -n 10 --keepalive maybe" "-p $NGINX_PORT -n 10 --bogus"; do
    # shellcheck disable=SC2086
    "$HAMMER" $args > /dev/null 2>&1
    assert_eq "$?" 2 "usage error: hammer $args"
done
if "$HAMMER" --help | grep -q -- '--expect-status'; then log "ok: --help"; else fail "--help"; fi
