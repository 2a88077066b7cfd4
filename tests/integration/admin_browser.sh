#!/bin/bash
# admin_browser.sh — the admin panel in a real headless Chromium: starts tenancyd (the demo
# app, the panel on admin.localhost) and nginx with a few tenants that have storage, then
# runs tests/browser/admin.test.js (playwright-core driving Debian's /usr/bin/chromium; see
# tests/browser/README.md). Screenshots are kept in tests/browser/artifacts/ of the build
# tree. Chromium, node and the npm package are required: missing, this is a hard error.
. "$(dirname "$0")/lib.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
BROWSER_DIR=$top_srcdir/tests/browser
need curl nginx sqlite3 node "$CHROMIUM" "$TENANCY_CLI"
# playwright-core from tests/browser/node_modules, or from TENANCY_BROWSER_MODULES (make
# distcheck sets it: the tree it unpacks has no node_modules).
MODULES=${TENANCY_BROWSER_MODULES:-$BROWSER_DIR/node_modules}
[ -d "$MODULES/playwright-core" ] ||
    hard_error "playwright-core is not installed: run ./autogen.sh --deps (npm ci in tests/browser)"
export NODE_PATH=$MODULES
ARTIFACTS=$(cd "$top_builddir" && pwd)/tests/browser/artifacts
rm -rf "$ARTIFACTS"
mkdir -p "$ARTIFACTS"

PASSWORD=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
mkdir -p "$T/state"
tn_conf "app = $DEMO_SO" "pm.max_children = 3" \
    "state_dir = $T/state" "tenant.resolvers = subdomain" "tenant.base_domains = localhost" \
    "tenant.max_workers = 100%" \
    "admin.host = admin.localhost" "admin.cli = $(cd "$top_builddir" && pwd)/tenancy/tenancy"
tn_cli init > /dev/null || fatal "tenancy init failed"
printf '%s\n' "$PASSWORD" | tn_cli admin passwd --stdin > /dev/null || fatal "admin passwd failed"
for t in lite acme globex initech umbrella; do
    tn_cli tenant create "$t" --name "${t^} Corporation" --domain "www.$t.example" > /dev/null ||
        fatal "creating $t failed"
done
tn_cli tenant create xss --name '<img src=x onerror=alert("name")>' > /dev/null || fatal "create xss"
tn_cli tenant maintenance umbrella > /dev/null
sqlite3 "$T/state/tenants/lite.db" "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL DEFAULT 0);
  CREATE INDEX items_name ON items(name);
  CREATE TABLE notes (id INTEGER PRIMARY KEY, item_id INTEGER REFERENCES items(id), body TEXT);
  WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 120)
  INSERT INTO items (name, price) SELECT 'item ' || x, x * 1.5 FROM c;
  INSERT INTO notes (item_id, body) VALUES (1, 'first'), (2, NULL);" || fatal "lite data"
sqlite3 "$T/state/tenants/xss.db" "CREATE TABLE \"<script>alert('table')</script>\" (v TEXT);
  CREATE TABLE things (id INTEGER PRIMARY KEY, \"\"\"><img src=x onerror=alert('col')>\" TEXT, v TEXT);
  INSERT INTO things (v) VALUES ('<img src=x onerror=alert(\"cell\")>'), ('\"><script>alert(1)</script>');" ||
    fatal "xss data"
tn_start
nginx_start
# Some traffic for the host charts.
for i in $(seq 1 40); do
    for t in acme globex lite; do http / "$t.localhost" > /dev/null; done
done

log "browser: $("$CHROMIUM" --version 2>/dev/null | head -1); node $(node --version)"
ADMIN_URL="http://admin.localhost:$NGINX_PORT" TENANT_URL="http://lite.localhost:$NGINX_PORT" \
    ADMIN_PASSWORD="$PASSWORD" ARTIFACTS="$ARTIFACTS" CHROMIUM="$CHROMIUM" \
    timeout 180 node "$BROWSER_DIR/admin.test.js" 2>&1 | tee "$T/browser.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail "the browser run failed (exit $rc)"
n=$(ls "$ARTIFACTS"/*.png 2>/dev/null | wc -l)
assert_ge "$n" 10 "screenshots kept in $ARTIFACTS"
