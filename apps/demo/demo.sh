#!/bin/bash
# demo.sh — `make demo`: tenancyd with the demo app behind a real nginx, until Ctrl-C.
#
# Generates its configs in a temporary folder, creates three tenants (acme, globex, initech)
# in a fresh registry with the `tenancy` command, starts tenancyd and nginx (on DEMO_PORT,
# default 8080, loopback; each tenant at <slug>.localhost), prints the URLs to try and a
# line with "ready", and on SIGINT or SIGTERM stops both and removes the folder, leaving no
# process behind.
#
# Each tenant gets storage of its own, migrated from apps/demo/migrations and seeded from
# apps/demo/seed.sql with a row that names it: SQLite files by default, or, with
# DEMO_STORAGE=postgres, a schema each in a throwaway PostgreSQL cluster (tests/pg.sh) that
# the demo starts and stops.
set -eu
builddir=${1:?usage: demo.sh BUILDDIR}
builddir=$(cd "$builddir" && pwd)
# the build tree's PostgreSQL driver (storage/README.md), used if a registry is postgres:
export TENANCY_PGDRIVER=${TENANCY_PGDRIVER:-$builddir/storage/.libs/pgdriver.so}
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
port=${DEMO_PORT:-8080}
storage=${DEMO_STORAGE:-sqlite}
case $storage in
sqlite | postgres) ;;
*) echo "demo: DEMO_STORAGE must be sqlite or postgres, not '$storage'" >&2; exit 1 ;;
esac
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "demo: nginx is not installed (run ./autogen.sh --deps)" >&2; exit 1; }
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo: port $port is in use; try: make demo DEMO_PORT=8081" >&2
    exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/tenancy-demo.XXXXXX")
tn_pid=
ngx_pid=
pg_dir=
stop() {
    trap - INT TERM EXIT
    echo
    echo "demo: stopping"
    [ -n "$ngx_pid" ] && kill -QUIT "$ngx_pid" 2>/dev/null
    [ -n "$tn_pid" ] && kill -QUIT "$tn_pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        alive=0
        for p in $ngx_pid $tn_pid; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.2
    done
    for p in $ngx_pid $tn_pid; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "$pg_dir" ] && bash "$srcdir/tests/pg.sh" stop "$pg_dir" 2>/dev/null
    rm -rf "$dir"
    echo "demo: stopped"
}
trap stop EXIT
trap 'exit 0' INT TERM

cat > "$dir/tenancyd.conf" <<CONF
listen = $dir/tenancyd.sock
app = $builddir/apps/.libs/demo.so
access_log = $dir/access.log
pm = dynamic
pm.max_children = 4
pm.start = 2
state_dir = $dir/state
tenant.resolvers = subdomain
tenant.base_domains = localhost
tenant.central_domains = localhost
admin.host = admin.localhost
admin.cli = $builddir/tenancy/tenancy
storage.migrations = $srcdir/apps/demo/migrations
storage.seed = $srcdir/apps/demo/seed.sql
# The data API (apps/data) beside the demo app: /api/... of each tenant's host.
mount.data.prefix = /api
mount.data.app = $builddir/apps/.libs/data.so
CONF
if [ "$storage" = postgres ]; then
    echo "demo: starting a throwaway PostgreSQL cluster"
    pg_env=$(bash "$srcdir/tests/pg.sh" start tenancy_demo) || {
        echo "demo: PostgreSQL could not be started (run ./autogen.sh --deps)" >&2
        exit 1
    }
    eval "$pg_env"
    pg_dir=$TENANCY_TEST_PG_DIR
    cat >> "$dir/tenancyd.conf" <<CONF
storage.placement = pg
placement.pg.dsn = $TENANCY_TEST_PG
placement.pg.mode = schema
CONF
fi
mkdir -p "$dir/state"
cli() { "$builddir/tenancy/tenancy" -c "$dir/tenancyd.conf" "$@" > /dev/null; }
cli init
cli tenant create acme --name "Acme Corporation" --setting theme.primary=#d9480f
cli tenant create globex --name "Globex Corporation" --setting theme.primary=#1971c2
cli tenant create initech --name "Initech" --setting theme.primary=#2f9e44
# A data API key for each tenant, printed below (made afresh each run, like the password).
declare -A key
for t in acme globex initech; do
    key[$t]=$("$builddir/tenancy/tenancy" -c "$dir/tenancyd.conf" key create "$t" --label demo |
        sed -n 2p)
done
# The admin panel's password: a new random one for each demo run, printed below.
admin_pw=$("$builddir/tenancy/tenancy" -c "$dir/tenancyd.conf" admin passwd --generate |
    awk 'NR == 1 {print $NF}')   # line 1: the password; a second may say old sessions end
user=""
[ "$(id -u)" = 0 ] && user="user root;"
mkdir -p "$dir/nginx"
cat > "$dir/nginx.conf" <<NGX
daemon off;
$user
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path $dir/nginx/body;
    fastcgi_temp_path $dir/nginx/fastcgi;
    proxy_temp_path $dir/nginx/proxy;
    uwsgi_temp_path $dir/nginx/uwsgi;
    scgi_temp_path $dir/nginx/scgi;
    upstream tenancy { server unix:$dir/tenancyd.sock; keepalive 8; }
    server {
        listen 127.0.0.1:$port;
        location / {
            include /etc/nginx/fastcgi_params;
            fastcgi_param REQUEST_START \$msec;
            fastcgi_param REQUEST_ID \$request_id;
            fastcgi_param TENANT_HOST \$host;
            fastcgi_param HTTP_PROXY "";
            fastcgi_keep_conn on;
            fastcgi_next_upstream off;
            fastcgi_pass tenancy;
            # the data API's change feed (Server-Sent Events): passed on as it comes
            location /api/subscribe {
                fastcgi_buffering off;
                fastcgi_pass tenancy;
            }
        }
    }
}
NGX

"$builddir/tenancyd" -c "$dir/tenancyd.conf" 2> "$dir/tenancyd.log" &
tn_pid=$!
i=0
until grep -q ' ready: ' "$dir/tenancyd.log" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$tn_pid" 2>/dev/null; then
        echo "demo: tenancyd did not start:" >&2
        cat "$dir/tenancyd.log" >&2
        exit 1
    fi
    sleep 0.1
done
"$nginx" -c "$dir/nginx.conf" -e "$dir/nginx-error.log" &
ngx_pid=$!
i=0
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$ngx_pid" 2>/dev/null; then
        echo "demo: nginx did not start:" >&2
        cat "$dir/nginx-error.log" >&2
        exit 1
    fi
    sleep 0.1
done

cat <<MSG

  tenancy demo: tenancyd (the demo app, and the data API at /api) behind nginx on 127.0.0.1:$port
  Storage: $storage (each tenant's own; "data" in each answer is read from it)${pg_dir:+
  PostgreSQL: a throwaway cluster in $pg_dir (psql -h $pg_dir -U postgres tenancy_demo)}

  Three tenants, each at its own name (browsers and curl send *.localhost to loopback):
    curl http://acme.localhost:$port/
    curl http://globex.localhost:$port/
    curl http://initech.localhost:$port/
    curl http://acme.localhost:$port/_theme.css
    curl http://nobody.localhost:$port/          (an unknown tenant: 404)
  Work outside the request: a job queued by one, run by a job worker in acme's context:
    curl -X POST 'http://acme.localhost:$port/greet?message=hello%20later'
    curl http://acme.localhost:$port/greetings
  The platform itself, and the host's status:
    curl http://localhost:$port/
    curl http://localhost:$port/_tenancy/status
    curl http://localhost:$port/_tenancy/metrics
  The data API of each tenant, under /api (keys made for this run):
    acme:    ${key[acme]}
    globex:  ${key[globex]}
    initech: ${key[initech]}
    K=${key[acme]}; H="Authorization: Bearer \$K"; J="Content-Type: application/json"
    curl -H "\$H" -H "\$J" http://acme.localhost:$port/api/tables -d '{"name":"notes",
      "columns":[{"name":"body","type":"text","not_null":true}],"search":["body"]}'
    curl -H "\$H" -H "\$J" http://acme.localhost:$port/api/notes -d '[{"body":"hello"},{"body":"bye"}]'
    curl -H "\$H" 'http://acme.localhost:$port/api/notes?select=id,body&body=like.h*'
    curl -H "\$H" -H "\$J" http://acme.localhost:$port/api/query -d '{"sql":"SELECT count(*) FROM notes"}'
  The admin panel (user admin, one-time password for this run: $admin_pw):
    http://admin.localhost:$port/

  Logs: $dir/tenancyd.log (errors), $dir/access.log (one JSON line per request)
  Stop with Ctrl-C.

demo: ready on http://localhost:$port/
MSG
# Wait for a signal (or for a server to die).
while kill -0 "$tn_pid" 2>/dev/null && kill -0 "$ngx_pid" 2>/dev/null; do
    sleep 0.5
done
echo "demo: a server exited unexpectedly" >&2
exit 1
