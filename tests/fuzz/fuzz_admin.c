/*
 * fuzz_admin.c — the admin panel's inputs (admin/): whole requests through admin_handle,
 * the way the worker hands them over, with and without a logged-in session.
 *
 * Set-up, once per process: a registry in a temporary SQLite file with two tenants (acme
 * has a storage file with a table, for the schema explorer and the SQL console), the admin
 * options with a short query timeout, and one session written straight into the registry
 * (so that no login, and no yescrypt, runs in the loop).
 *
 * Input: fields separated by NUL bytes: a byte of flags (bits 0-1: GET, POST, HEAD, PUT;
 * bit 2: send the session cookie; bit 3: add the session's CSRF token to the form; bit 4:
 * send Origin: the panel's own), REQUEST_URI, the body, more Cookie text, a User-Agent.
 * POSTs that would change the registry or start a process (/login, /logout, /new, actions)
 * are sent as GETs, so that every input sees the same state and no `tenancy` command runs;
 * the SQL console's POST (read-only by design) is fuzzed.
 *
 * Invariants:
 *   - the status is one the panel documents (no 500 from a malformed input);
 *   - nothing is written into a page unescaped: the marker "<fz" never appears in an HTML
 *     answer, though the input may carry it (the dictionary offers it to the mutator) and
 *     the registry (a tenant's name, a setting) and acme's table (a value, a table name, a
 *     column name) do;
 *   - the response head is well formed (every line "Name: value", no header the input
 *     injected), and a redirect goes to a path of the panel ("/x", never "//x" or a URL);
 *   - a JSON answer is valid JSON.
 */
#include "core/first.h"
#include "admin/admin.h"
#include "admin/config.h"
#include "admin/sessions.h"
#include "core/conf.h"
#include "core/log.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/registry.h"
#include "tenancy/request.h"

#include "fuzz_common.h"

#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define SESSION_ID "fuzzsessionfuzzsessionfuzzsessionfuzzsession01"
#define CSRF "fuzzcsrffuzzcsrffuzzcsrffuzzcsrffuzzcsrf01"
#define HOST "admin.example.com"
#define PW_HASH "$y$j9T$fuzzsaltfuzzsalt$fuzzhashfuzzhashfuzzhashfuzzhashfuzzhas"

static char dir[64];
static tenancy_config tcfg;
static admin_config acfg;
static arena *cfg_arena, *req_arena;
static buf headers, out;

static void status_json(void *ctx, buf *o)
{
    (void)ctx;
    buf_puts(o, "{\"pool\":{\"workers\":1}}");
}

static void cleanup(void)
{
    admin_fini();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (dir[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "fuzz_admin: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_init("fuzz_admin", TN_LOG_ERROR);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/tenancy-fuzz-adm-XXXXXX", tmp ? tmp : "/tmp");
    FZ_ASSERT(mkdtemp(dir) != NULL, "mkdtemp");
    atexit(cleanup);
    cfg_arena = arena_create(0);
    conf_error cerr;
    char err[512];
    FZ_ASSERT(conf_defaults(tenancy_config_table, &tcfg, cfg_arena, &cerr) == TN_OK, "defaults");
    tcfg.resolvers = "subdomain, host";
    tcfg.base_domains = "example.com";
    tcfg.central_domains = HOST;
    tcfg.state_dir = dir;
    FZ_ASSERT(tenancy_config_finish(&tcfg, cfg_arena, err, sizeof(err)) == TN_OK, "%s", err);
    FZ_ASSERT(conf_defaults(admin_config_table, &acfg, cfg_arena, &cerr) == TN_OK, "defaults");
    acfg.host = HOST;
    acfg.query_timeout_ms = 200;
    acfg.row_cap = 50;
    acfg.cli = "/nonexistent/tenancy";
    FZ_ASSERT(admin_config_finish(&acfg, &tcfg, cfg_arena, err, sizeof(err)) == TN_OK, "%s", err);

    registry *reg;
    FZ_ASSERT(registry_open(tcfg.registry_uri, tcfg.gen_path, &reg, err, sizeof(err)) == TN_OK,
              "%s", err);
    FZ_ASSERT(registry_init(reg, err, sizeof(err)) == TN_OK, "%s", err);
    FZ_ASSERT(mkdir(tcfg.sqlite_dir, 0700) == 0, "mkdir %s", tcfg.sqlite_dir);
    /* Stored values carry the marker too: a page must escape what the registry and the
     * tenant's tables hold, not only what the request says. */
    const char *slugs[] = {"acme", "globex"};
    const char *names[] = {"Acme", "Globex <fz> & Co"};
    for (int i = 0; i < 2; i++) {
        registry_new t = {.slug = slugs[i], .name = names[i], .state = TENANT_ACTIVE,
                          .settings = "{\"theme.primary\":\"#00aa55\",\"note\":\"<fz x>\"}"};
        FZ_ASSERT(registry_create(reg, &t, NULL, err, sizeof(err)) == TN_OK, "%s", err);
    }
    char path[512], uri[600];
    snprintf(path, sizeof(path), "%s/acme.db", tcfg.sqlite_dir);
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    tn_db *db;
    FZ_ASSERT(db_open(uri, &(db_options){.busy_timeout_ms = 1000}, &db, err, sizeof(err)) == TN_OK,
              "%s", err);
    FZ_ASSERT(db_exec_script(db, "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, note "
                                 "BLOB); INSERT INTO items VALUES (1, 'one', x'00ff'), "
                                 "(2, '<b>two</b>', NULL), (3, '<fz row>', '<fz blob>'); "
                                 "CREATE TABLE \"<fz table>\" (\"<fz col>\" TEXT);") == TN_OK,
              "%s", tn_db_error(db));
    db_close(db);
    FZ_ASSERT(registry_set_storage(reg, "acme", "sqlite", path, err, sizeof(err)) == TN_OK, "%s",
              err);
    /* The session, as a login would have stored it (in the panel's table, made first as
     * the panel's first request would). */
    char h[65], fp[65];
    fz_sha256_hex((const unsigned char *)SESSION_ID, strlen(SESSION_ID), h);
    /* A session holds only while its user's password is the one it was opened with: the
     * user's line in the password file, and the fingerprint of its hash in the session. */
    FILE *pw = fopen(acfg.password_file, "w");
    FZ_ASSERT(pw != NULL && fprintf(pw, "fz:%s\n", PW_HASH) > 0 && fclose(pw) == 0,
              "writing %s", acfg.password_file);
    fz_sha256_hex((const unsigned char *)PW_HASH, strlen(PW_HASH), fp);
    FZ_ASSERT(sessions_prepare(registry_db(reg), err, sizeof(err)) == TN_OK, "%s", err);
    FZ_ASSERT(sessions_add(registry_db(reg), h, CSRF, "fz", "127.0.0.1", (int64_t)time(NULL),
                           (int64_t)time(NULL) + 86400 * 365, fp) == TN_OK,
              "%s", tn_db_error(registry_db(reg)));
    registry_close(reg);

    admin_env env = {.cfg = &acfg, .tcfg = &tcfg, .config_path = "/nonexistent/tenancyd.conf",
                     .status_json = status_json};
    FZ_ASSERT(admin_init(&env) == TN_OK, "admin_init");
    req_arena = arena_create(0);
    return 0;
}

/* ---- the in-memory transport -------------------------------------------------------------- */

struct fake {
    const char *params[12][2];
    int n;
    const char *body;
    size_t body_len, body_off;
    buf resp;
};

static const char *fparam(void *tx, const char *name)
{
    struct fake *f = tx;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->params[i][0], name) == 0)
            return f->params[i][1];
    return NULL;
}
static int fread_(void *tx, char *p, int n)
{
    struct fake *f = tx;
    size_t left = f->body_len - f->body_off;
    size_t k = (size_t)n < left ? (size_t)n : left;
    memcpy(p, f->body + f->body_off, k);
    f->body_off += k;
    return (int)k;
}
static int fwrite_(void *tx, const char *p, size_t n)
{
    buf_append(&((struct fake *)tx)->resp, p, n);
    return 0;
}
static const tn_transport fake_tp = {fparam, fread_, fwrite_};

static void add(struct fake *f, const char *name, const char *value)
{
    f->params[f->n][0] = name;
    f->params[f->n++][1] = value;
}

static bool has(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

/* One request through admin_handle, as the worker hands it over; the answer is in f->resp
 * and r->status. */
static int serve(struct fake *f, tn_request *r, const char *method, const char *uri,
                 const char *cookie, const char *body, const char *ua, bool origin)
{
    char len[24];
    add(f, "REQUEST_METHOD", method);
    add(f, "REQUEST_URI", uri);
    add(f, "TENANT_HOST", HOST);
    add(f, "HTTP_HOST", HOST);
    add(f, "REMOTE_ADDR", "127.0.0.1");
    add(f, "HTTP_COOKIE", cookie);
    add(f, "HTTP_USER_AGENT", ua);
    if (origin)
        add(f, "HTTP_ORIGIN", "http://" HOST);
    if (strcmp(method, "POST") == 0) {
        f->body = body;
        f->body_len = strlen(body);
        snprintf(len, sizeof(len), "%zu", f->body_len);
        add(f, "CONTENT_LENGTH", len);
        add(f, "CONTENT_TYPE", "application/x-www-form-urlencoded");
    }
    request_init(r, &fake_tp, f, req_arena, &headers, &out, 1 << 16, "fuzz", 0);
    int st = admin_handle(r);
    request_finish(r);
    return st;
}

/* Once, before the first input: the session the inputs send must be a logged-in one, or
 * every page behind the login (the fleet, the schema explorer, the SQL console) would go
 * unfuzzed while the runs still pass. The fleet page answers 200 and names the tenants. */
static void check_session(void)
{
    struct fake f = {.n = 0, .resp = BUF_INIT};
    tn_request r;
    serve(&f, &r, "GET", "/", "tn_admin=" SESSION_ID, "", "", false);
    FZ_ASSERT(r.status == 200 && f.resp.p != NULL && has(f.resp.p, f.resp.len, "Globex"),
              "the fuzzed session is not logged in: GET / answered %d:\n%.*s", r.status,
              (int)(f.resp.len < 600 ? f.resp.len : 600), f.resp.p ? f.resp.p : "");
    buf_free(&f.resp);
    arena_reset(req_arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool checked;
    if (!checked) {
        check_session();
        checked = true;
    }
    char *copy = fz_copy(data, size, true);
    const char *field[5] = {"", "/", "", "", ""};
    int nf = 0;
    for (size_t i = 0; nf < 5;) {
        field[nf++] = copy + i;
        i += strlen(copy + i) + 1;
        if (i > size)
            break;
    }
    unsigned flags = (unsigned char)field[0][0];
    static const char *const methods[] = {"GET", "POST", "HEAD", "PUT"};
    const char *method = methods[flags & 3];
    const char *uri = field[1][0] ? field[1] : "/";

    /* Routes that would change the registry or start a process are read, not posted. */
    size_t pl = strcspn(uri, "?");
    if (strcmp(method, "POST") == 0 &&
        !(pl > 7 && strncmp(uri, "/t/", 3) == 0 && strncmp(uri + pl - 4, "/sql", 4) == 0))
        method = "GET";

    char cookie[4200], body[8300];
    snprintf(cookie, sizeof(cookie), "%s%s", (flags & 4) ? "tn_admin=" SESSION_ID "; " : "",
             field[3]);
    snprintf(body, sizeof(body), "%s%s", (flags & 8) ? "csrf=" CSRF "&" : "", field[2]);
    struct fake f = {.n = 0, .resp = BUF_INIT};
    tn_request r;
    int st = serve(&f, &r, method, uri, cookie, body, field[4], flags & 16);

    static const int ok[] = {200, 303, 304, 400, 401, 403, 404, 405, 413, 429, 503};
    bool known = false;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        known |= r.status == ok[i];
    FZ_ASSERT(known, "%s %s: status %d (admin_handle said %d)", method, uri, r.status, st);

    const char *resp = f.resp.p ? f.resp.p : "";
    size_t rl = f.resp.len;
    /* The head: "Name: value" lines up to the blank line. */
    const char *end = memmem(resp, rl, "\r\n\r\n", 4);
    FZ_ASSERT(end != NULL, "%s %s: no end of headers", method, uri);
    const char *body_start = end + 4;
    bool json = false, html = false;
    for (const char *l = resp; l < end;) {
        const char *e = memmem(l, (size_t)(end - l) + 2, "\r\n", 2);
        FZ_ASSERT(e != NULL, "a header line without CRLF");
        const char *colon = memchr(l, ':', (size_t)(e - l));
        FZ_ASSERT(colon != NULL && colon > l && colon[1] == ' ', "a malformed header line: %.*s",
                  (int)(e - l), l);
        for (const char *c = l; c < e; c++)
            FZ_ASSERT(*c != '\n' && *c != '\r' && *c != '\0', "a control byte in a header");
        for (const char *c = l; c < colon; c++)
            FZ_ASSERT((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '-',
                      "an odd header name: %.*s", (int)(colon - l), l);
        if ((size_t)(colon - l) == 8 && strncasecmp(l, "Location", 8) == 0) {
            const char *v = colon + 2;
            FZ_ASSERT(v[0] == '/' && v[1] != '/' && v[1] != '\\',
                      "%s %s: a redirect off the panel: %.*s", method, uri, (int)(e - v), v);
        }
        if ((size_t)(colon - l) == 12 && strncasecmp(l, "Content-Type", 12) == 0 &&
            strncmp(colon + 2, "application/json", 16) == 0)
            json = true;
        if ((size_t)(colon - l) == 12 && strncasecmp(l, "Content-Type", 12) == 0 &&
            strncmp(colon + 2, "text/html", 9) == 0)
            html = true;
        l = e + 2;
    }
    if (html)
        FZ_ASSERT(!has(body_start, (size_t)(resp + rl - body_start), "<fz"),
                  "%s %s: something came into the page unescaped:\n%.*s", method, uri,
                  (int)(rl < 3000 ? rl : 3000), resp);
    if (json && strcmp(method, "HEAD") != 0)
        FZ_ASSERT(fz_json_valid(body_start, (size_t)(resp + rl - body_start), false),
                  "%s %s: invalid JSON: %.*s", method, uri, (int)(rl < 2000 ? rl : 2000), resp);
    buf_free(&f.resp);
    arena_reset(req_arena);
    free(copy);
    return 0;
}
