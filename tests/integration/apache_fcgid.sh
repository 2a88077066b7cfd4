#!/bin/bash
# apache_fcgid.sh — Apache mod_fcgid spawning tenancyd itself. mod_fcgid creates a private
# unix socket per process, execs the program with it on fd 0 and routes one request at a time
# to it; tenancyd takes it with `listen = inherit` and runs one worker that never recycles by
# itself (mod_fcgid does that: FcgidMaxRequestsPerProcess). Checked: requests answered (Host,
# body, status path, a trusted Host), mod_fcgid's own recycling, the classic AddHandler form,
# and that stopping Apache leaves no tenancyd behind, each having stopped cleanly on SIGTERM.
. "$(dirname "$0")/lib.sh"
need curl apache2 "$TENANCYD"

APACHE_MODULES=${APACHE_MODULES:-/usr/lib/apache2/modules}
[ -r "$APACHE_MODULES/mod_fcgid.so" ] ||
    hard_error "mod_fcgid not found in $APACHE_MODULES (Debian: libapache2-mod-fcgid)"

abspath() { (cd "$(dirname "$1")" && printf '%s/%s' "$(pwd)" "$(basename "$1")"); }
TENANCYD_ABS=$(abspath "$TENANCYD")

# ---- apache ----------------------------------------------------------------------------------

# httpd refuses to serve as root, so under root its children — and the programs mod_fcgid
# spawns — run as an unprivileged account, which must reach the wrapper, tenancyd and the app.
if [ "$(id -u)" = 0 ]; then
    AP_USER=
    for u in www-data nobody; do
        if id -u "$u" >/dev/null 2>&1; then AP_USER=$u; break; fi
    done
    [ -n "$AP_USER" ] || hard_error "running as root, but no www-data or nobody account for Apache"
    AP_GROUP=$(id -gn "$AP_USER")
    chmod 711 "$T"
    need setpriv
    ap_can() {
        setpriv --reuid="$AP_USER" --regid="$AP_GROUP" --clear-groups \
            sh -c 'test -x "$1" && test -r "$2"' sh "$TENANCYD_ABS" "$HELLO_SO"
    }
    # A build tree the account cannot reach (a checkout in a private folder): run copies of
    # the two files from this test's folder instead (tenancyd links no library of the tree).
    if ! ap_can; then
        mkdir -p "$T/bin" && chmod 755 "$T/bin"
        cp "$TENANCYD_ABS" "$T/bin/tenancyd" && cp "$HELLO_SO" "$T/bin/hello.so" &&
            chmod 755 "$T/bin/tenancyd" "$T/bin/hello.so" || fatal "cannot copy tenancyd and hello.so"
        log "the build tree is private to root: running copies from $T/bin"
        TENANCYD_ABS=$T/bin/tenancyd
        HELLO_SO=$T/bin/hello.so
    fi
    ap_can || hard_error "$AP_USER (Apache's User) cannot run $TENANCYD_ABS or read $HELLO_SO"
else
    AP_USER=$(id -un)
    AP_GROUP=$(id -gn)
fi

APACHE_PID=
alive() {   # a live process (a zombie that has not been waited for is not)
    local s
    s=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$s" ] && [ "${s#Z}" = "$s" ]
}

# apache_common: the part of every config of this test (what apache_start writes first).
apache_common() {
    cat <<AP
ServerRoot "$T/apache"
ServerName localhost
PidFile "$T/apache/httpd.pid"
DefaultRuntimeDir "$T/apache"
ErrorLog "$T/apache-error.log"
LogLevel warn fcgid:info
User $AP_USER
Group $AP_GROUP
LoadModule mpm_event_module "$APACHE_MODULES/mod_mpm_event.so"
<IfModule !unixd_module>
    LoadModule unixd_module "$APACHE_MODULES/mod_unixd.so"
</IfModule>
LoadModule authz_core_module "$APACHE_MODULES/mod_authz_core.so"
LoadModule mime_module "$APACHE_MODULES/mod_mime.so"
LoadModule headers_module "$APACHE_MODULES/mod_headers.so"
LoadModule fcgid_module "$APACHE_MODULES/mod_fcgid.so"
TypesConfig /dev/null
StartServers 1
ServerLimit 1
ThreadLimit 16
ThreadsPerChild 16
MaxRequestWorkers 16
MinSpareThreads 1
MaxSpareThreads 16
Timeout 20
AP
}

# apache_start BODY_FN PORT_VAR...: take a port into each PORT_VAR, write $T/apache.conf
# (apache_common, then what BODY_FN prints with those ports), check it with apache2 -t, start
# httpd in the foreground and wait until every port answers. When one of the ports was taken
# by someone else meanwhile, start again on other ports.
apache_start() {
    local body_fn=$1 attempt v end up
    shift
    mkdir -p "$T/apache"
    for attempt in 1 2 3; do
        for v in "$@"; do take_port "$v"; done
        { apache_common; "$body_fn"; } > "$T/apache.conf"
        if ! apache2 -t -f "$T/apache.conf" > "$T/apache-t.out" 2>&1; then
            cat "$T/apache-t.out"
            hard_error "generated Apache config is invalid (apache2 -t above; the config is $T/apache.conf)"
        fi
        : > "$T/apache.log"
        apache2 -D FOREGROUND -f "$T/apache.conf" >> "$T/apache.log" 2>&1 &
        APACHE_PID=$!
        PIDS+=("$APACHE_PID")
        end=$((SECONDS + 10))
        up=0
        while [ "$SECONDS" -lt "$end" ] && alive "$APACHE_PID"; do
            up=1
            for v in "$@"; do
                (exec 3<>"/dev/tcp/127.0.0.1/${!v}") 2>/dev/null || { up=0; break; }
            done
            [ "$up" = 1 ] && return 0
            sleep 0.05
        done
        alive "$APACHE_PID" && break
        wait "$APACHE_PID" 2>/dev/null
        APACHE_PID=
        grep -q 'Address already in use' "$T/apache.log" || break
        log "apache (attempt $attempt): a port was taken meanwhile; again on other ports"
    done
    fatal "apache did not start: $(tail -n 5 "$T/apache.log" "$T/apache-error.log" 2>/dev/null)"
}

apache_gone() { ! alive "$APACHE_PID"; }
# Stop httpd and wait for it: lib.sh's cleanup would SIGKILL it after 0.2 s, which leaves its
# children (and so the tenancyd it spawned) behind.
apache_stop() {
    [ -n "$APACHE_PID" ] || return 0
    local kids
    kids=$(pgrep -P "$APACHE_PID")
    kill -TERM "$APACHE_PID" 2>/dev/null
    wait_until 10 apache_gone || kill -KILL "$APACHE_PID" $kids 2>/dev/null
    wait "$APACHE_PID" 2>/dev/null
    APACHE_PID=
}
# tenancyd processes of this test (their command line names this test's own config).
ours() { pgrep -f -- "-c $T/fcgid.conf" 2>/dev/null; }
none_left() { [ -z "$(ours)" ]; }
at_exit() {
    apache_stop
    local p
    for p in $(ours); do kill -KILL "$p" 2>/dev/null; done   # only after a failure
}
# shellcheck disable=SC2154
trap 'rc_=$?; at_exit; (exit $rc_); cleanup' EXIT

# take_port VAR: a port nobody listens on, outside the kernel's ephemeral range (where a
# client connection of anyone on this machine may hold it) and not yet taken by this test.
read -r EPH_LO EPH_HI < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || EPH_LO=32768 EPH_HI=60999
PORTS_TAKEN=
take_port() {
    local p tries=0
    while p=$(free_port); do
        tries=$((tries + 1))
        [[ " $PORTS_TAKEN " == *" $p "* ]] && continue
        [ "$p" -ge "$EPH_LO" ] && [ "$p" -le "$EPH_HI" ] && [ "$tries" -lt 100 ] && continue
        break
    done
    PORTS_TAKEN+=" $p"
    printf -v "$1" '%s' "$p"
}

# get PORT PATH [HOST]: body on stdout, status in last_status (as lib.sh's http).
get() {
    local out
    out=$(curl -s -m 20 -H "Host: ${3:-localhost}" -w '\n%{http_code}' "http://127.0.0.1:$1$2")
    printf '%s' "${out##*$'\n'}" > "$T/.last_status"
    printf '%s' "${out%$'\n'*}"
}

# ---- the program mod_fcgid runs -------------------------------------------------------------------

# pm.max_requests = 0: under mod_fcgid the app must not recycle itself (mod_fcgid may already
# have sent the next request: a 500); FcgidMaxRequestsPerProcess does it instead.
cat > "$T/fcgid.conf" <<EOF
listen = inherit
app = $HELLO_SO
access_log = $T/access.log
pm = static
pm.max_children = 1
pm.max_requests = 0
EOF
cat > "$T/app.fcgi" <<EOF
#!/bin/sh
# mod_fcgid starts this with its listen socket on fd 0; tenancyd adopts it (listen = inherit).
exec "$TENANCYD_ABS" -c "$T/fcgid.conf"
EOF
chmod 755 "$T/app.fcgi"
mkdir -p "$T/www"
cp "$T/app.fcgi" "$T/www/app.fcgi"
chmod -R a+rX "$T/www" "$T/fcgid.conf"
: > "$T/access.log"
[ "$(id -u)" = 0 ] && chown "$AP_USER" "$T/access.log"

# tenancyd's error log is stderr, which mod_fcgid connects to Apache's error log.
fcgid_vhosts() {
    cat <<AP
    FcgidIPCDir "$T/apache/fcgid"
    FcgidProcessTableFile "$T/apache/fcgid_shm"
    FcgidInitialEnv TENANCY_HELLO_TEST_ROUTES 1
    FcgidErrorScanInterval 1
    Listen 127.0.0.1:$P_MAIN
    Listen 127.0.0.1:$P_RECYCLE
    Listen 127.0.0.1:$P_HANDLER
    Listen 127.0.0.1:$P_TRUST
    <VirtualHost 127.0.0.1:$P_MAIN>
        <Location />
            SetHandler fcgid-script
            FcgidWrapper "$T/app.fcgi" virtual
            Options +ExecCGI
            Require all granted
        </Location>
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_RECYCLE>
        FcgidMaxRequestsPerProcess 3
        <Location />
            SetHandler fcgid-script
            FcgidWrapper "$T/app.fcgi" virtual
            Options +ExecCGI
            Require all granted
        </Location>
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_HANDLER>
        DocumentRoot "$T/www"
        <Directory "$T/www">
            Options +ExecCGI
            AddHandler fcgid-script .fcgi
            Require all granted
        </Directory>
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TRUST>
        ServerName default.invalid
        <Location "/">
            Require all denied
        </Location>
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TRUST>
        ServerName tenant.example
        ServerAlias *.saas.example
        <Location />
            SetHandler fcgid-script
            FcgidWrapper "$T/app.fcgi" virtual
            Options +ExecCGI
            Require all granted
        </Location>
    </VirtualHost>
    <VirtualHost 127.0.0.1:$P_TRUST>
        ServerName pinned.example
        ServerAlias alias.pinned.example
        UseCanonicalName On
        RequestHeader set Host "expr=%{SERVER_NAME}"
        <Location />
            SetHandler fcgid-script
            FcgidWrapper "$T/app.fcgi" virtual
            Options +ExecCGI
            Require all granted
        </Location>
    </VirtualHost>
AP
}
apache_start fcgid_vhosts P_MAIN P_RECYCLE P_HANDLER P_TRUST

# ---- requests ---------------------------------------------------------------------------------------

assert_eq "$(get "$P_MAIN" / acme.example.com)" "hello from acme.example.com" "hello through mod_fcgid"
assert_eq "$(last_status)" 200 "status 200"
assert_eq "$(get "$P_MAIN" / ACME.Example.COM:8080)" "hello from acme.example.com" \
    "raw Host header lower-cased, port dropped"
# mod_fcgid refuses bodies over FcgidMaxRequestLen (128 KiB by default).
head -c 60000 /dev/urandom | base64 -w0 > "$T/body"
got=$(curl -s -m 20 --data-binary @"$T/body" "http://127.0.0.1:$P_MAIN/echo")
[ "$got" = "$(cat "$T/body")" ] && log "ok: 80 KB body echoed" || fail "echoed body differs (${#got} bytes back)"
status=$(get "$P_MAIN" /_tenancy/status)
assert_eq "$(last_status)" 200 "status path answered through mod_fcgid"
assert_contains "$status" '"max_children":1' "status: the one worker mod_fcgid expects"
assert_contains "$(cat "$T/apache-error.log")" "listening on inherit" \
    "tenancyd took the socket from fd 0 (its log is in Apache's error log)"

# The classic form: a .fcgi file under a folder with ExecCGI.
assert_eq "$(get "$P_HANDLER" /app.fcgi handler.example)" "hello from handler.example" \
    "AddHandler fcgid-script .fcgi"

# Trusted Host, as doc/examples/apache-fcgid.conf sets it: the first vhost refuses names no
# vhost has, so what reaches tenancyd is a vhost's name up to case and port (which tenancyd
# drops); RequestHeader can pin the vhost's ServerName.
assert_eq "$(get "$P_TRUST" / Shop.SaaS.example:8080)" "hello from shop.saas.example" "trusted Host: ServerAlias"
get "$P_TRUST" / evil.example > /dev/null
assert_eq "$(last_status)" 403 "a Host no vhost names is refused"
access_log_settled
assert_eq "$(grep -c '"host":"evil.example"' "$T/access.log")" 0 "... and never reaches tenancyd"
assert_eq "$(get "$P_TRUST" / ALIAS.pinned.example)" "hello from pinned.example" \
    "RequestHeader set Host pins the vhost's ServerName"

# mod_fcgid recycles after FcgidMaxRequestsPerProcess (3): nine requests, all answered, by
# at least three processes, the retired ones told to stop with SIGTERM.
codes=""
for i in $(seq 1 9); do
    codes+="$(curl -s -o /dev/null -m 20 -H "Host: recycle$i.example" -w '%{http_code}' \
        "http://127.0.0.1:$P_RECYCLE/") "
done
assert_eq "$codes" "$(printf '200 %.0s' $(seq 1 9))" "requests across mod_fcgid's recycling"
access_log_settled
procs=$(grep '"host":"recycle' "$T/access.log" | grep -o '"pid":[0-9]*' | sort -u | wc -l)
assert_ge "$procs" 3 "distinct tenancyd processes served the recycled class"
stopped_count() { grep -c 'tenancyd\[[0-9]*\] info: stopped' "$T/apache-error.log"; }
recycled_gone() { [ "$(stopped_count)" -ge 3 ]; }
if wait_until 10 recycled_gone; then
    log "ok: mod_fcgid stopped the recycled processes (SIGTERM), each cleanly"
else
    fail "recycled processes did not stop: $(stopped_count) 'stopped' lines"
fi

# ---- stop ---------------------------------------------------------------------------------------------

started=$(grep -c 'tenancyd\[[0-9]*\] info: starting:' "$T/apache-error.log")
assert_ge "$started" 6 "tenancyd instances mod_fcgid started"
[ -n "$(ours)" ] || fail "no tenancyd running before Apache stops"
apache_stop
if wait_until 5 none_left; then
    log "ok: no tenancyd left after Apache stopped"
else
    fail "tenancyd processes left after Apache stopped: $(ps -o pid=,ppid=,args= -p "$(ours | paste -sd,)")"
fi
stopped=$(grep -c 'tenancyd\[[0-9]*\] info: stopped' "$T/apache-error.log")
assert_eq "$stopped" "$started" "every tenancyd stopped cleanly on mod_fcgid's SIGTERM"
exited_ok=$(grep -c 'terminated by calling exit(), return code: 0' "$T/apache-error.log")
assert_eq "$exited_ok" "$started" "mod_fcgid saw every tenancyd exit with status 0"
