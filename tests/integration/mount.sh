#!/bin/bash
# mount.sh — several apps in one tenancyd, by path prefix (mount.NAME.prefix/app), behind a
# real nginx: each prefix reaches its app, which sees the path after it (tn_path) and its
# prefix (tn_mount); the longest prefix wins on segment boundaries; an app's stages run for
# its own requests only; status, metrics and the access log name the apps; a reload switches
# the mounts; -t refuses a bad mount with file:line and loads every module.
. "$(dirname "$0")/lib.sh"
need curl nginx promtool
MOD=$(cd "$HELPERS" && pwd)/.libs
G1=$MOD/greet_v1.so
G2=$MOD/greet_v2.so

# hello at the root and again at /h2 (one module, loaded once), greet_v1 at /g, greet_v2 at
# /g/v2 (nested: the longer prefix wins). Each greet build adds a stage that marks its
# responses with X-Greet-Stage.
mounts=("mount.h2.prefix = /h2" "mount.h2.app = $HELLO_SO"
        "mount.g.prefix = /g" "mount.g.app = $G1"
        "mount.gv2.prefix = /g/v2" "mount.gv2.app = $G2")
tn_conf "${mounts[@]}"
"$TENANCYD" -c "$T/tenancyd.conf" -t 2>"$T/t.out" && log "ok: -t accepts the mounts" ||
    fail "-t refused the mounts: $(cat "$T/t.out")"
tn_start
nginx_start

assert_eq "$(http /_mount/a)" "mount= path=/_mount/a" "root app: no prefix, the whole path"
assert_eq "$(http /h2/_mount/a/b)" "mount=/h2 path=/_mount/a/b" "/h2: prefix stripped"
assert_eq "$(http /h2/_mount)" "mount=/h2 path=/_mount" "/h2: the rest is the path"
assert_eq "$(http /h2)" "hello from localhost" "/h2 alone: the app sees /"
assert_eq "$(http /h2x/_mount)" "hello from localhost" "/h2x is not under /h2 (segment boundary)"
assert_eq "$(http /g/x g.example)" "v1 from g.example" "/g reaches greet_v1"
assert_eq "$(http /g/v2/x g.example)" "v2 from g.example" "/g/v2 reaches greet_v2 (longest prefix)"
assert_eq "$(http /g/v20 g.example)" "v1 from g.example" "/g/v20 is /g's"
assert_eq "$(http /_tenancy/ping)" "pong" "the host's endpoints keep their precedence"

# Stages: greet_v1's stage runs for /g only, greet_v2's for /g/v2 only, neither for hello.
stage_of() { curl -s -m 10 -o /dev/null -D - "http://127.0.0.1:$NGINX_PORT$1" |
    tr -d '\r' | sed -n 's/^X-Greet-Stage: //Ip' | paste -sd, -; }
assert_eq "$(stage_of /g/x)" "v1" "greet_v1's stage for /g, and only it"
assert_eq "$(stage_of /g/v2/x)" "v2" "greet_v2's stage for /g/v2, and only it"
assert_eq "$(stage_of /_mount)" "" "no greet stage for the root app"
assert_eq "$(stage_of /h2/_mount)" "" "no greet stage for hello at /h2"

# A path nginx normalises differently from the raw one we route by: refused.
code=$(curl -s -m 10 --path-as-is -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$NGINX_PORT/g/../h2/_mount")
assert_eq "$code" 400 "a dot segment is refused when mounts route by the path"

# Status, metrics, the access log.
status=$(http /_tenancy/status)
assert_contains "$status" '"apps":[{"name":"hello","version":"1","mount":"",' "status: the root app"
assert_contains "$status" '{"name":"greet","version":"v2","mount":"/g/v2",' "status: a mounted app"
assert_contains "$status" '"mount":"/h2"' "status: hello's second mount"
http /_tenancy/metrics > "$T/metrics.txt"
assert_contains "$(cat "$T/metrics.txt")" 'tenancy_app_info{name="greet",version="v1",mount="/g"} 1' \
    "metrics: tenancy_app_info"
promtool check metrics < "$T/metrics.txt" > "$T/promtool.log" 2>&1 && log "ok: promtool" ||
    fail "promtool: $(cat "$T/promtool.log")"
access_log_settled
line=$(grep '"uri":"/x"' "$T/access.log" | grep '"mount":"/g/v2"' | head -1)
[ -n "$line" ] && log "ok: the access log names the mount" ||
    fail "no access-log line with mount /g/v2: $(tail -3 "$T/access.log")"

# A reload switches the mounts: /h2 is gone (the root app takes it), /g is greet_v2 now.
tn_conf "mount.g.prefix = /g" "mount.g.app = $G2"
kill -HUP "$TN_PID"
wait_until 10 grep -q 'reloaded: generation 2' "$T/tenancyd.log" || fail "reload did not happen"
assert_eq "$(http /h2/_mount)" "hello from localhost" "after reload: /h2 is the root app's"
assert_eq "$(http /g/x g.example)" "v2 from g.example" "after reload: /g is greet_v2"
assert_eq "$(stage_of /g/x)" "v2" "after reload: greet_v2's stage at /g"
assert_contains "$(http /_tenancy/status)" '"name":"greet","version":"v2","mount":"/g",' \
    "after reload: status shows the new set"

# Mounts alone: no root app, unmatched paths get 404; a mount still answers.
kill -QUIT "$TN_PID"
wait "$TN_PID" 2>/dev/null
tn_conf "app = " "mount.g.prefix = /g" "mount.g.app = $G1"
tn_start
http /nothing > /dev/null
assert_eq "$(last_status)" 404 "no root app: an unmatched path is 404"
assert_eq "$(http /g g.example)" "v1 from g.example" "no root app: the mount answers"

# -t: a malformed mount names file and line; every module is loaded.
printf 'app = %s\npm = static\n\nmount.x.prefix = /x/\nmount.x.app = %s\n' "$HELLO_SO" "$G1" \
    > "$T/bad.conf"
out=$("$TENANCYD" -c "$T/bad.conf" -t 2>&1)
assert_eq "$?" 1 "-t exit status on a bad mount"
assert_contains "$out" "bad.conf:4: mount.x.prefix: '/x/' must not end with '/'" "-t names file:line"
printf 'app = %s\nmount.a.prefix = /a\nmount.a.app = %s\nmount.b.prefix = /a\n' "$HELLO_SO" "$G1" \
    > "$T/dup.conf"
out=$("$TENANCYD" -c "$T/dup.conf" -t 2>&1)
assert_contains "$out" "dup.conf:4: mount.b.prefix: '/a' is mounted already (mount.a)" \
    "-t refuses a prefix mounted twice"
printf 'app = %s\nmount.a.prefix = /a\nmount.a.app = %s/nope.so\n' "$HELLO_SO" "$T" > "$T/noapp.conf"
out=$("$TENANCYD" -c "$T/noapp.conf" -t 2>&1)
assert_eq "$?" 1 "-t exit status when a mounted module does not load"
assert_contains "$out" "mount.a: app $T/nope.so: cannot load" "-t loads every mounted module"

assert_nginx_clean "mounts"
