/* check_admin.c — the admin panel in process: SHA-256, its options, random tokens, and
 * admin_handle() over a fake transport with a real registry (routes refused without a
 * session, the headers, a whole login, CSRF, where a login may come from, the __Host-
 * cookie over HTTPS, sessions that end with their password and are swept at a login, the
 * failure counter, the panel's own tables made by the panel, a registry from before
 * admin_sessions.pw_fp), and the audit page (a console entry's start
 * shown with its outcome, running, or the master's line for a worker that died). The
 * "handle" case runs on SQLite; with TENANCY_TEST_PG set (tests/unit/admin/run.sh starts a
 * cluster) "handle_pg" runs the same tests on a PostgreSQL registry. */
#include "core/first.h"
#include "admin/admin.h"
#include "admin/pages.h"
#include "core/conf.h"
#include "tenancy/registry.h"

#include <check.h>
#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- SHA-256 --------------------------------------------------------------------------------- */

START_TEST(test_sha256)
{
    char h[65];
    sha256_hex("", 0, h);
    ck_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, h);
    ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";   /* 56 bytes */
    sha256_hex(two, strlen(two), h);
    ck_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char m[1000];
    memset(m, 'a', sizeof(m));
    sha256_hex(m, sizeof(m), h);
    ck_assert_str_eq(h, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}
END_TEST

START_TEST(test_random_token)
{
    char a[64], b[64];
    ck_assert_int_eq(auth_random_token(a, sizeof(a), 32), TN_OK);
    ck_assert_int_eq(auth_random_token(b, sizeof(b), 32), TN_OK);
    ck_assert_uint_eq(strlen(a), 43);
    ck_assert_str_ne(a, b);
    for (const char *p = a; *p; p++)
        ck_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
    ck_assert_int_eq(auth_random_token(a, 10, 32), TN_INVALID);
}
END_TEST

/* ---- options ---------------------------------------------------------------------------------- */

static int finish_text(const char *text, admin_config *c, tenancy_config *tc, arena *a, char *err)
{
    conf_error cerr;
    memset(c, 0, sizeof(*c));
    memset(tc, 0, sizeof(*tc));
    conf_target t[] = {{tenancy_config_table, tc}, {admin_config_table, c}};
    int rc = conf_parse_text_targets(t, 2, "t.conf", text, a, NULL, &cerr);
    if (rc != TN_OK) {
        snprintf(err, 256, "%.200s", cerr.msg);
        return rc;
    }
    return admin_config_finish(c, tc, a, err, 256);
}

START_TEST(test_config)
{
    arena *a = arena_create(0);
    admin_config c;
    tenancy_config tc;
    char err[256];
    ck_assert_int_eq(finish_text("state_dir = /srv/t\n", &c, &tc, a, err), TN_OK);
    ck_assert(!c.enabled);
    ck_assert_str_eq(c.password_file, "/srv/t/admin.passwd");
    ck_assert_str_eq(c.audit_log, "/srv/t/admin-audit.log");
    ck_assert_int_eq(c.row_cap, 1000);
    ck_assert_int_eq((int)c.session_ttl_ms, 8 * 3600 * 1000);
    ck_assert(netaddr_match_text(c.allowed, "127.0.0.1"));
    ck_assert(!netaddr_match_text(c.allowed, "10.1.2.3"));

    ck_assert_int_eq(finish_text("admin.host = Admin.Example.COM.\nadmin.allow = any\n"
                                 "admin.password_file = /etc/p\n", &c, &tc, a, err), TN_OK);
    ck_assert(c.enabled);
    ck_assert_str_eq(c.host_norm, "admin.example.com");
    ck_assert_str_eq(c.password_file, "/etc/p");
    ck_assert(netaddr_match_text(c.allowed, "10.1.2.3"));

    ck_assert_int_eq(finish_text("admin.host = not_a host\n", &c, &tc, a, err), TN_INVALID);
    ck_assert(strstr(err, "admin.host") != NULL);
    ck_assert_int_eq(finish_text("admin.pg_console_user = x; DROP\n", &c, &tc, a, err),
                     TN_INVALID);
    ck_assert_int_eq(finish_text("admin.pg_console_user = tenancy_console\n", &c, &tc, a, err),
                     TN_INVALID);
    ck_assert(strstr(err, "was removed") != NULL);
    ck_assert_int_eq(finish_text("admin.allow = nonsense/99\n", &c, &tc, a, err), TN_INVALID);
    ck_assert_int_eq(finish_text("admin.row_cap = 0\n", &c, &tc, a, err), TN_INVALID);
    arena_destroy(a);
}
END_TEST

/* ---- admin_handle over a fake transport ------------------------------------------------------ */

typedef struct fake {
    const char *params[32][2];
    int n;
    const char *body;
    size_t off;
    buf out;
} fake;

static const char *f_param(void *tx, const char *name)
{
    fake *f = tx;
    for (int i = f->n - 1; i >= 0; i--)   /* the last one wins (a test's override) */
        if (strcmp(f->params[i][0], name) == 0)
            return f->params[i][1];
    return NULL;
}

static int f_read(void *tx, char *p, int n)
{
    fake *f = tx;
    size_t left = f->body ? strlen(f->body) - f->off : 0;
    size_t k = left < (size_t)n ? left : (size_t)n;
    memcpy(p, f->body + f->off, k);
    f->off += k;
    return (int)k;
}

static int f_write(void *tx, const char *p, size_t n)
{
    buf_append(&((fake *)tx)->out, p, n);
    return 0;
}

static const tn_transport fake_tp = {f_param, f_read, f_write};

static char dir[128];
static admin_config acfg;
static tenancy_config tcfg;
static arena *cfg_arena;
static char cookie[512];   /* the Cookie header the next request sends */

static void set_param(fake *f, const char *k, const char *v)
{
    f->params[f->n][0] = k;
    f->params[f->n][1] = v;
    f->n++;
}

/* One request: METHOD PATH[?QUERY] from 127.0.0.1 with the current cookies, body (form),
 * and the params of `extra` (name, value, ..., NULL; they override the defaults). The
 * whole response (status line, headers, body) comes back in *resp (malloc'ed). */
static int request_with(const char *method, const char *uri, const char *body,
                        const char *const *extra, char **resp)
{
    static fake f;
    memset(&f, 0, sizeof(f));
    char clen[24];
    const char *q = strchr(uri, '?');
    set_param(&f, "REQUEST_METHOD", method);
    set_param(&f, "REQUEST_URI", uri);
    set_param(&f, "QUERY_STRING", q ? q + 1 : "");
    set_param(&f, "HTTP_HOST", "admin.test");
    set_param(&f, "REMOTE_ADDR", "127.0.0.1");
    if (cookie[0])
        set_param(&f, "HTTP_COOKIE", cookie);
    if (body != NULL) {
        snprintf(clen, sizeof(clen), "%zu", strlen(body));
        set_param(&f, "CONTENT_LENGTH", clen);
        set_param(&f, "CONTENT_TYPE", "application/x-www-form-urlencoded");
        f.body = body;
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i += 2)
        set_param(&f, extra[i], extra[i + 1]);
    arena *a = arena_create(0);
    buf headers = BUF_INIT, out = BUF_INIT;
    tn_request r;
    request_init(&r, &fake_tp, &f, a, &headers, &out, 1 << 20, "test", 0);
    int status = admin_handle(&r);
    request_finish(&r);
    *resp = strdup(f.out.p ? f.out.p : "");
    buf_free(&f.out);
    buf_free(&headers);
    buf_free(&out);
    arena_destroy(a);
    return status;
}

static int request(const char *method, const char *uri, const char *body, const char *extra_k,
                   const char *extra_v, char **resp)
{
    const char *extra[] = {extra_k, extra_v, NULL};
    return request_with(method, uri, body, extra_k ? extra : NULL, resp);
}

/* Keep the Set-Cookie values of a response in `cookie` (name=value; ...). */
static void take_cookies(const char *resp)
{
    for (const char *p = strstr(resp, "Set-Cookie: "); p; p = strstr(p + 1, "Set-Cookie: ")) {
        const char *v = p + 12;
        size_t n = strcspn(v, ";\r");
        char pair[256];
        snprintf(pair, sizeof(pair), "%.*s", (int)n, v);
        char *eq = strchr(pair, '=');
        if (eq == NULL)
            continue;
        /* drop an earlier value of the same name */
        char name[64];
        snprintf(name, sizeof(name), "%.*s=", (int)(eq - pair), pair);
        char rest[512] = "";
        for (char *tok = strtok(cookie, ";"); tok; tok = strtok(NULL, ";")) {
            while (*tok == ' ')
                tok++;
            if (strncmp(tok, name, strlen(name)) != 0 && *tok)
                snprintf(rest + strlen(rest), sizeof(rest) - strlen(rest), "%s%s",
                         rest[0] ? "; " : "", tok);
        }
        snprintf(cookie, sizeof(cookie), "%s%s%s", rest, rest[0] ? "; " : "", pair);
    }
}

static const char *field(const char *html, const char *name, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "name=\"%s\" value=\"", name);
    const char *p = strstr(html, pat);
    if (p == NULL)
        return NULL;
    p += strlen(pat);
    snprintf(out, n, "%.*s", (int)strcspn(p, "\""), p);
    return out;
}

static const char *pg_uri;   /* set by the handle_pg case's fixture */

/* The password file's line for `user` with a new hash of `password` (what `tenancy admin
 * passwd` writes); NULL password: the file without the user. */
static void write_password(const char *user, const char *password)
{
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    ck_assert_ptr_nonnull(cd);
    FILE *f = fopen(acfg.password_file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "someone:$y$j9T$notreal$notreal\n");
    if (password != NULL) {
        ck_assert_ptr_nonnull(crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof(setting)));
        const char *h = crypt_r(password, setting, cd);
        ck_assert(h != NULL && h[0] == '$');
        fprintf(f, "%s:%s\n", user, h);
    }
    fclose(f);
    free(cd);
}

/* A connection of the test's own to the registry (to look at and change tables). */
static registry *test_reg(void)
{
    char err[256];
    registry *reg = NULL;
    ck_assert_int_eq(registry_open(tcfg.registry_uri, NULL, &reg, err, sizeof(err)), TN_OK);
    return reg;
}

/* The first value of a query on the registry into out ("" when none). */
static const char *reg_value(const char *sql, const char *param, char *out, size_t n)
{
    registry *reg = test_reg();
    const char *p[] = {param};
    if (db_query_value(registry_db(reg), out, n, sql, param ? 1 : 0, param ? p : NULL) != TN_OK)
        out[0] = '\0';
    registry_close(reg);
    return out;
}

/* Seconds left of the login lock on a throttle key ("addr:..." or "user:..."), from `now`. */
static int64_t lock_left(const char *key, int64_t now)
{
    char v[64];
    const char *until =
        reg_value("SELECT locked_until FROM admin_throttle WHERE key = $1", key, v, sizeof(v));
    return strtoll(until, NULL, 10) - now;
}

static void reg_exec(const char *sql)
{
    registry *reg = test_reg();
    ck_assert_msg(db_exec_script(registry_db(reg), sql) == TN_OK, "%s: %s", sql,
                  tn_db_error(registry_db(reg)));
    registry_close(reg);
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/check_admin.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cfg_arena = arena_create(0);
    char text[2048], err[256];
    snprintf(text, sizeof(text), "state_dir = %s\nadmin.host = admin.test\n%s%s%s", dir,
             pg_uri ? "registry = " : "", pg_uri ? pg_uri : "", pg_uri ? "\n" : "");
    ck_assert_int_eq(finish_text(text, &acfg, &tcfg, cfg_arena, err), TN_OK);
    /* tenancy_config_finish fills registry_uri and gen_path */
    ck_assert_int_eq(tenancy_config_finish(&tcfg, cfg_arena, err, sizeof(err)), TN_OK);
    registry *reg = NULL;
    ck_assert_int_eq(registry_open(tcfg.registry_uri, tcfg.gen_path, &reg, err, sizeof(err)),
                     TN_OK);
    if (pg_uri != NULL)   /* each test starts from an empty registry, as on SQLite */
        ck_assert_int_eq(tn_db_exec(registry_db(reg), "DROP SCHEMA IF EXISTS tenancy CASCADE",
                                    0, NULL), TN_OK);
    ck_assert_int_eq(registry_init(reg, err, sizeof(err)), TN_OK);
    registry_close(reg);
    /* the password file, as `tenancy admin passwd` writes it */
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    ck_assert_ptr_nonnull(crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof(setting)));
    const char *h = crypt_r("sesame open", setting, cd);
    FILE *f = fopen(acfg.password_file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "admin:%s\n", h);
    fclose(f);
    free(cd);
    admin_env env = {.cfg = &acfg, .tcfg = &tcfg, .config_path = "/nonexistent.conf"};
    ck_assert_int_eq(admin_init(&env), TN_OK);
    cookie[0] = '\0';
}

static void setup_pg(void)
{
    pg_uri = getenv("TENANCY_TEST_PG");
    ck_assert_msg(pg_uri != NULL && pg_uri[0] != '\0', "TENANCY_TEST_PG is not set");
    setup();
}

static void teardown(void)
{
    admin_fini();
    arena_destroy(cfg_arena);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_without_session)
{
    char *r;
    ck_assert(admin_is_host("admin.test"));
    ck_assert(!admin_is_host("acme.test"));
    ck_assert_int_eq(request("GET", "/assets/admin.js", NULL, NULL, NULL, &r), 200);
    ck_assert(strstr(r, "Content-Security-Policy: default-src 'none'; script-src 'self';"));
    ck_assert(strstr(r, "unsafe-inline") == NULL);
    ck_assert(strstr(r, "\"use strict\""));
    free(r);
    const char *pages[] = {"/", "/host", "/t/acme", "/t/acme/sql", "/t/acme/table?name=x",
                           "/audit", "/new"};
    for (size_t i = 0; i < TN_ARRAY_LEN(pages); i++) {
        ck_assert_int_eq(request("GET", pages[i], NULL, NULL, NULL, &r), 303);
        ck_assert_msg(strstr(r, "Location: /login?next=") != NULL, "%s", pages[i]);
        free(r);
    }
    ck_assert_int_eq(request("POST", "/t/acme/action", "action=suspend&confirm=yes", NULL,
                             NULL, &r), 303);
    free(r);
    ck_assert_int_eq(request("GET", "/api/status", NULL, NULL, NULL, &r), 401);
    free(r);
    ck_assert_int_eq(request("GET", "/login", NULL, "REMOTE_ADDR", "192.0.2.1", &r), 403);
    free(r);
}
END_TEST

START_TEST(test_login_and_csrf)
{
    char *r, nonce[80], body[512], csrf[80];
    ck_assert_int_eq(request("GET", "/login", NULL, NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(field(r, "nonce", nonce, sizeof(nonce)));
    take_cookies(r);
    free(r);
    snprintf(body, sizeof(body), "nonce=%s&user=admin&password=wrong", nonce);
    ck_assert_int_eq(request("POST", "/login", body, NULL, NULL, &r), 401);
    free(r);
    snprintf(body, sizeof(body), "nonce=%s&user=admin&password=sesame+open&next=/host", nonce);
    ck_assert_int_eq(request("POST", "/login", body, NULL, NULL, &r), 303);
    ck_assert(strstr(r, "Location: /host"));
    ck_assert(strstr(r, "Set-Cookie: tn_admin="));
    ck_assert(strstr(r, "HttpOnly; SameSite=Strict"));
    take_cookies(r);
    free(r);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    ck_assert(strstr(r, "id=\"fleet\""));
    ck_assert_ptr_nonnull(field(r, "csrf", csrf, sizeof(csrf)));
    free(r);
    /* a POST without the token, with a wrong one, from another origin */
    ck_assert_int_eq(request("POST", "/logout", "x=1", NULL, NULL, &r), 403);
    free(r);
    ck_assert_int_eq(request("POST", "/logout", "csrf=nope", NULL, NULL, &r), 403);
    free(r);
    snprintf(body, sizeof(body), "csrf=%s", csrf);
    ck_assert_int_eq(request("POST", "/logout", body, "HTTP_ORIGIN", "https://evil.test", &r),
                     403);
    free(r);
    ck_assert_int_eq(request("POST", "/logout", body, "HTTP_ORIGIN", "http://admin.test:8080",
                             &r), 303);
    free(r);
    /* the session ended on the server: the same cookie no longer works */
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    free(r);
}
END_TEST

/* GET /login, keep its cookie; the form's nonce into nonce. */
static void login_form(const char *const *extra, char *nonce, size_t n)
{
    char *r;
    ck_assert_int_eq(request_with("GET", "/login", NULL, extra, &r), 200);
    ck_assert_ptr_nonnull(field(r, "nonce", nonce, n));
    take_cookies(r);
    free(r);
}

/* A whole login with `password`, over the scheme of `extra`: the status; cookies kept. */
static int login(const char *password, const char *const *extra)
{
    char *r, nonce[80], body[512];
    login_form(extra, nonce, sizeof(nonce));
    snprintf(body, sizeof(body), "nonce=%s&user=admin&password=%s", nonce, password);
    int st = request_with("POST", "/login", body, extra, &r);
    take_cookies(r);
    free(r);
    return st;
}

/* ---- the audit page: a console entry's start shown with its outcome ----------------------- */

static void log_line(const char *line)
{
    FILE *f = fopen(acfg.audit_log, "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", line);
    fclose(f);
}

/* The page's row of entry `id` (a copy, malloc'ed), or NULL. */
static char *row_of(const char *page, const char *id)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "<tr id=\"audit-%s\">", id);
    const char *p = strstr(page, pat);
    if (p == NULL)
        return NULL;
    ck_assert_ptr_null(strstr(p + 1, pat));   /* one row per entry */
    const char *e = strstr(p, "</tr>");
    ck_assert_ptr_nonnull(e);
    return strndup(p, (size_t)(e - p));
}

START_TEST(test_audit_page)
{
    char *r;
    ck_assert_int_eq(login("sesame+open", NULL), 303);

    /* finished: 310 blanks of padding, then the read */
    char line[2048], pad[311];
    memset(pad, ' ', 310);
    pad[310] = '\0';
    snprintf(line, sizeof(line), "{\"time\":\"2026-01-01T00:00:00Z\",\"id\":\"00000000000000aa\","
             "\"user\":\"admin\",\"client\":\"127.0.0.1\",\"action\":\"sql\",\"tenant\":\"acme\","
             "\"detail\":\"%sSELECT secret FROM vault\",\"result\":\"started\",\"req\":\"r1\","
             "\"phase\":\"start\",\"len\":\"334\",\"sha256\":\"%064d\"}", pad, 7);
    log_line(line);
    /* still running: no completion */
    log_line("{\"time\":\"2026-01-01T00:00:01Z\",\"id\":\"00000000000000bb\",\"user\":\"admin\","
             "\"client\":\"127.0.0.1\",\"action\":\"sql\",\"tenant\":\"acme\","
             "\"detail\":\"SELECT 2\",\"result\":\"started\",\"req\":\"r2\",\"phase\":\"start\","
             "\"len\":\"8\",\"sha256\":\"x\"}");
    log_line("{\"time\":\"2026-01-01T00:00:02Z\",\"id\":\"00000000000000aa\",\"user\":\"admin\","
             "\"client\":\"127.0.0.1\",\"action\":\"sql\",\"tenant\":\"acme\","
             "\"detail\":\"1 row, 0.4 ms\",\"result\":\"ok\",\"req\":\"r1\",\"phase\":\"end\"}");
    /* its worker died: the master's line */
    log_line("{\"time\":\"2026-01-01T00:00:03Z\",\"id\":\"00000000000000cc\",\"user\":\"admin\","
             "\"client\":\"127.0.0.1\",\"action\":\"sql\",\"tenant\":\"acme\","
             "\"detail\":\"SELECT 3\",\"result\":\"started\",\"req\":\"r3\",\"phase\":\"start\","
             "\"len\":\"8\",\"sha256\":\"y\"}");
    char err[256];
    ck_assert_int_eq(admin_audit_died(&acfg, "00000000000000cc", "r3",
                                      "worker 42 died (signal 11, Segmentation fault)", err,
                                      sizeof(err)), TN_OK);
    ck_assert_int_eq(admin_audit_died(&acfg, "", "r3", "x", err, sizeof(err)), TN_INVALID);
    /* an old line, from before entries had ids, still shows */
    log_line("{\"time\":\"2025-01-01T00:00:00Z\",\"user\":\"admin\",\"client\":\"::1\","
             "\"action\":\"suspend\",\"tenant\":\"acme\",\"detail\":\"state suspended\","
             "\"result\":\"ok\",\"req\":\"r0\"}");

    FILE *f = fopen(acfg.audit_log, "r");
    ck_assert_ptr_nonnull(f);
    char last[1024] = "", l[1024];
    while (fgets(l, sizeof(l), f))
        if (strstr(l, "\"by\":\"master\""))
            snprintf(last, sizeof(last), "%s", l);
    fclose(f);
    ck_assert_msg(strstr(last, "\"id\":\"00000000000000cc\"") && strstr(last, "\"result\":\"died\"") &&
                  strstr(last, "\"phase\":\"end\"") && strstr(last, "signal 11") &&
                  strstr(last, "\"req\":\"r3\""), "the master's line: %s", last);

    ck_assert_int_eq(request("GET", "/audit", NULL, NULL, NULL, &r), 200);
    char *row = row_of(r, "00000000000000aa");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(strstr(row, "<code class=\"audit-sql\">SELECT secret FROM vault</code>"), "%s",
                  row);
    ck_assert(strstr(row, "334 bytes"));
    ck_assert(strstr(row, "1 row, 0.4 ms"));
    ck_assert(strstr(row, "result-ok"));
    free(row);
    row = row_of(r, "00000000000000bb");
    ck_assert_ptr_nonnull(row);
    ck_assert(strstr(row, "result-running"));
    free(row);
    row = row_of(r, "00000000000000cc");
    ck_assert_ptr_nonnull(row);
    ck_assert(strstr(row, "SELECT 3"));
    ck_assert(strstr(row, "result-died"));
    ck_assert(strstr(row, "worker 42 died (signal 11"));
    free(row);
    ck_assert(strstr(r, "<td>state suspended</td>") || strstr(r, ">state suspended</td>"));
    /* newest first: the died entry (started last) above the finished one */
    ck_assert(strstr(r, "audit-00000000000000cc") < strstr(r, "audit-00000000000000aa"));
    free(r);
}
END_TEST

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    return strdup(text);
}

/* The CSRF check comes before any route, the API's included: a POST under /api/ without the
 * token is refused there with the API's JSON error and audited, whatever the path would do
 * (an endpoint that takes a POST one day is covered from its first line). */
START_TEST(test_api_post_csrf)
{
    char *r;
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    const char *paths[] = {"/api/tenants", "/api/status", "/api/nothing-here"};
    for (size_t i = 0; i < TN_ARRAY_LEN(paths); i++) {
        ck_assert_int_eq(request("POST", paths[i], "x=1", NULL, NULL, &r), 403);
        ck_assert_msg(strstr(r, "{\"error\":\"missing or wrong CSRF token\"}") != NULL,
                      "%s: %s", paths[i], r);
        free(r);
    }
    char *log = read_file(acfg.audit_log);
    ck_assert_msg(strstr(log, "\"action\":\"csrf_refused\""), "not audited: %s", log);
    free(log);
}
END_TEST

/* Finding: a login POST did not check where it came from (login CSRF). A foreign Origin, or
 * a foreign Referer without an Origin, is refused with 403 and audited; the panel's own is
 * let through. */
START_TEST(test_login_origin)
{
    char *r, nonce[80], body[512];
    login_form(NULL, nonce, sizeof(nonce));
    snprintf(body, sizeof(body), "nonce=%s&user=admin&password=sesame+open", nonce);
    ck_assert_int_eq(request("POST", "/login", body, "HTTP_ORIGIN", "https://evil.test", &r),
                     403);
    ck_assert(strstr(r, "Set-Cookie: tn_admin=") == NULL);
    free(r);
    ck_assert_int_eq(request("POST", "/login", body, "HTTP_ORIGIN", "null", &r), 403);
    free(r);
    ck_assert_int_eq(request("POST", "/login", body, "HTTP_REFERER",
                             "https://evil.test/admin.test/login", &r), 403);
    ck_assert(strstr(r, "Set-Cookie: tn_admin=") == NULL);
    free(r);
    /* a foreign Origin wins over a Referer that looks right */
    const char *both[] = {"HTTP_ORIGIN", "https://admin.test.evil.test", "HTTP_REFERER",
                          "https://admin.test/login", NULL};
    ck_assert_int_eq(request_with("POST", "/login", body, both, &r), 403);
    free(r);
    char *log = read_file(acfg.audit_log);
    ck_assert_msg(strstr(log, "\"action\":\"login\"") && strstr(log, "\"result\":\"refused\""),
                  "not audited: %s", log);
    ck_assert(strstr(log, "\"result\":\"ok\"") == NULL);
    free(log);
    ck_assert_int_eq(request("POST", "/login", body, "HTTP_REFERER",
                             "http://admin.test:8080/login?next=/", &r), 303);
    free(r);
    ck_assert_int_eq(request("POST", "/login", body, "HTTP_ORIGIN", "http://admin.test", &r),
                     303);
    ck_assert(strstr(r, "Set-Cookie: tn_admin="));
    free(r);
}
END_TEST

/* Finding: over HTTPS the session cookie had the bare name, which a tenant's page on a
 * sibling host can shadow. Over HTTPS it is __Host-tn_admin (Secure, Path=/, no Domain), and
 * only that name is read there; over HTTP the bare name, and only it. */
START_TEST(test_cookie_prefix)
{
    const char *https[] = {"HTTPS", "on", NULL};
    ck_assert_int_eq(login("sesame+open", https), 303);
    char *sc = strstr(cookie, "__Host-tn_admin=");
    ck_assert_msg(sc != NULL, "no __Host- session cookie in [%s]", cookie);
    char id[80];
    snprintf(id, sizeof(id), "%.*s", (int)strcspn(sc + 16, ";"), sc + 16);
    char *r;
    /* the Set-Cookie line itself */
    char nonce[80], body[512];
    cookie[0] = '\0';
    login_form(https, nonce, sizeof(nonce));
    ck_assert_ptr_nonnull(strstr(cookie, "__Host-tn_admin_login="));
    snprintf(body, sizeof(body), "nonce=%s&user=admin&password=sesame+open", nonce);
    ck_assert_int_eq(request_with("POST", "/login", body, https, &r), 303);
    const char *line = strstr(r, "Set-Cookie: __Host-tn_admin=");
    ck_assert_msg(line != NULL, "%s", r);
    char one[256];
    snprintf(one, sizeof(one), "%.*s", (int)strcspn(line, "\r\n"), line);
    ck_assert_msg(strstr(one, "; Path=/;") && strstr(one, "; Secure") &&
                  strcasestr(one, "domain") == NULL, "%s", one);
    free(r);

    snprintf(cookie, sizeof(cookie), "__Host-tn_admin=%s", id);
    ck_assert_int_eq(request_with("GET", "/", NULL, https, &r), 200);
    free(r);
    /* over HTTPS the bare name is not ours (a sibling host could have set it) */
    snprintf(cookie, sizeof(cookie), "tn_admin=%s", id);
    ck_assert_int_eq(request_with("GET", "/", NULL, https, &r), 303);
    free(r);
    /* over HTTP only the bare name is read */
    snprintf(cookie, sizeof(cookie), "__Host-tn_admin=%s", id);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    free(r);
    cookie[0] = '\0';
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_ptr_nonnull(strstr(cookie, "tn_admin="));
    ck_assert_ptr_null(strstr(cookie, "__Host-"));
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
}
END_TEST

/* Finding: a session outlived its password. A new password written to the file (without
 * anything deleting the sessions, as when the file is edited by hand) ends the session at
 * its next request, and so does the user's removal; the ended session's row is deleted. */
START_TEST(test_session_ends_with_password)
{
    char *r, v[64];
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
    write_password("admin", "sesame open");   /* the same password, a new hash (salt) */
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    ck_assert(strstr(r, "Location: /login"));
    free(r);
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_sessions", NULL, v, sizeof(v)), "0");
    /* logged in again under the new hash: works; then the user is removed */
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
    ck_assert_int_eq(request("GET", "/api/tenants", NULL, NULL, NULL, &r), 200);
    free(r);
    write_password("admin", NULL);
    ck_assert_int_eq(request("GET", "/api/tenants", NULL, NULL, NULL, &r), 401);
    free(r);
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_sessions", NULL, v, sizeof(v)), "0");
    /* the user back with the same hash line as before is a new password too: a fresh login */
    write_password("admin", "sesame open");
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    free(r);
}
END_TEST

/* A session ends at its expiry even when it comes back with its cookie (a browser that kept
 * the cookie past Max-Age, or a copied cookie): the registry's expiry is the one that counts,
 * and the row of one that has run out is no longer found. */
START_TEST(test_session_expires)
{
    char *r;
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
    reg_exec("UPDATE admin_sessions SET expires_at = created_at");
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    ck_assert(strstr(r, "Location: /login"));
    free(r);
    ck_assert_int_eq(request("GET", "/api/tenants", NULL, NULL, NULL, &r), 401);
    free(r);
}
END_TEST

/* Sessions of an old password that never come back (another browser) do not stay: the next
 * login sweeps them away, and the expired ones with them; the current password's stay. */
START_TEST(test_login_sweeps_ended_sessions)
{
    char *r, v[64];
    /* each login from a browser of its own (a cookie jar of its own) */
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    cookie[0] = '\0';
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    reg_exec("INSERT INTO admin_sessions (id_hash, csrf, username, client, created_at, "
             "expires_at, pw_fp) VALUES ('old', 'c', 'someone', '', 0, 1, 'x')");
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_sessions", NULL, v, sizeof(v)), "3");
    cookie[0] = '\0';
    ck_assert_int_eq(login("sesame+open", NULL), 303);   /* sweeps the expired one only */
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_sessions", NULL, v, sizeof(v)), "3");
    write_password("admin", "sesame open");               /* a new hash: all three ended */
    cookie[0] = '\0';
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_sessions", NULL, v, sizeof(v)), "1");
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
}
END_TEST

/* Whether the registry has `table` ("1") or not ("0"). */
static const char *has_table(const char *table, char *v, size_t n)
{
    return reg_value(pg_uri ? "SELECT count(*) FROM information_schema.tables WHERE "
                              "table_schema = 'tenancy' AND table_name = $1"
                            : "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                              "name = $1",
                     table, v, n);
}

/* The panel's tables are its own: `tenancy init` (registry_init) makes neither, and the
 * panel makes both when it first opens the registry. */
START_TEST(test_panel_tables)
{
    char *r, v[64];
    ck_assert_str_eq(has_table("admin_sessions", v, sizeof(v)), "0");
    ck_assert_str_eq(has_table("admin_throttle", v, sizeof(v)), "0");
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    free(r);
    ck_assert_str_eq(has_table("admin_sessions", v, sizeof(v)), "1");
    ck_assert_str_eq(has_table("admin_throttle", v, sizeof(v)), "1");
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
}
END_TEST

/* A registry of the previous layout, where an older `tenancy init` made the panel's tables,
 * admin_sessions from before pw_fp: the panel adds the column when it opens the registry,
 * logins work, and a session row from then (pw_fp '') is refused. `tenancy init` again
 * leaves the panel's tables and their rows alone. */
START_TEST(test_registry_upgrade)
{
    char *r, v[64];
    reg_exec("CREATE TABLE admin_sessions (id_hash TEXT PRIMARY KEY, csrf TEXT NOT NULL, "
             "username TEXT NOT NULL, client TEXT NOT NULL, created_at BIGINT NOT NULL, "
             "expires_at BIGINT NOT NULL);"
             "CREATE TABLE admin_throttle (key TEXT PRIMARY KEY, failures BIGINT NOT NULL, "
             "first_at BIGINT NOT NULL, locked_until BIGINT NOT NULL)");
    /* an old session: its id is 43 'A's */
    char h[65], row[512];
    const char *id = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    sha256_hex(id, strlen(id), h);
    snprintf(row, sizeof(row), "INSERT INTO admin_sessions VALUES ('%s', 'c', 'admin', "
             "'127.0.0.1', 0, 9999999999)", h);
    reg_exec(row);
    snprintf(cookie, sizeof(cookie), "tn_admin=%s", id);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 303);
    free(r);
    ck_assert_str_eq(reg_value(pg_uri ? "SELECT count(*) FROM information_schema.columns WHERE "
                                        "table_schema = 'tenancy' AND table_name = "
                                        "'admin_sessions' AND column_name = $1"
                                      : "SELECT count(*) FROM pragma_table_info('admin_sessions') "
                                        "WHERE name = $1",
                               "pw_fp", v, sizeof(v)), "1");
    cookie[0] = '\0';
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
    /* `tenancy init` again: the session stays and still opens the panel */
    char err[256];
    registry *reg = test_reg();
    ck_assert_int_eq(registry_init(reg, err, sizeof(err)), TN_OK);
    registry_close(reg);
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_sessions", NULL, v, sizeof(v)), "1");
    ck_assert_int_eq(request("GET", "/", NULL, NULL, NULL, &r), 200);
    free(r);
}
END_TEST

/* The failure counter's one statement, on this backend: each wrong password adds one to the
 * address and to the account, and the 5th locks the address. (That parallel failures are
 * each counted is tests/integration/admin_http.sh's: it needs several workers.) */
START_TEST(test_failure_count)
{
    char v[64];
    for (int i = 1; i <= 5; i++) {
        ck_assert_int_eq(login("wrong", NULL), 401);
        char want[8];
        snprintf(want, sizeof(want), "%d", i);
        ck_assert_str_eq(reg_value("SELECT failures FROM admin_throttle WHERE key = $1",
                                   "addr:127.0.0.1", v, sizeof(v)), want);
        ck_assert_str_eq(reg_value("SELECT failures FROM admin_throttle WHERE key = $1",
                                   "user:admin", v, sizeof(v)), want);
    }
    ck_assert_int_eq(login("sesame+open", NULL), 429);
    /* an old window starts again at the next failure */
    reg_exec("UPDATE admin_throttle SET first_at = 0, locked_until = 0");
    ck_assert_int_eq(login("wrong", NULL), 401);
    ck_assert_str_eq(reg_value("SELECT failures FROM admin_throttle WHERE key = $1",
                               "addr:127.0.0.1", v, sizeof(v)), "1");
    ck_assert_int_eq(login("sesame+open", NULL), 303);
    ck_assert_str_eq(reg_value("SELECT count(*) FROM admin_throttle", NULL, v, sizeof(v)), "0");
}
END_TEST

/* A login form token the panel never issued opens nothing, even when the form and the cookie
 * carry the same value: a cookie planted by a sibling host, or one left empty, is not a
 * token, and its match with the form proves nothing. */
START_TEST(test_login_token_shape)
{
    char *r, body[512];
    const char *const planted[] = {"", "x", "not a token"};
    for (size_t i = 0; i < TN_ARRAY_LEN(planted); i++) {
        snprintf(cookie, sizeof(cookie), "tn_admin_login=%s", planted[i]);
        snprintf(body, sizeof(body), "nonce=%s&user=admin&password=sesame+open", planted[i]);
        ck_assert_int_eq(request("POST", "/login", body, NULL, NULL, &r), 403);
        ck_assert_msg(strstr(r, "Set-Cookie: tn_admin=") == NULL, "planted [%s]: %s",
                      planted[i], r);
        free(r);
    }
}
END_TEST

/* The account's own lock: failures spread over several addresses, none of which reaches the
 * address limit, lock the account once they reach the account limit; then the right password
 * from an address that never failed is refused too (a guesser that changes address is held
 * back by the account's counter alone). */
START_TEST(test_account_lock)
{
    static const char *const from[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
    char err[256];   /* the panel lets in more than one address of this machine */
    ck_assert_int_eq(netaddr_list_parse("127.0.0.0/8", cfg_arena, &acfg.allowed, err,
                                        sizeof(err)), TN_OK);
    for (int i = 0; i < 10; i++) {   /* the account limit, under the address limit each */
        const char *extra[] = {"REMOTE_ADDR", from[i % 3], NULL};
        cookie[0] = '\0';
        ck_assert_int_eq(login("wrong", extra), 401);
    }
    const char *fresh[] = {"REMOTE_ADDR", "127.0.0.5", NULL};
    cookie[0] = '\0';
    ck_assert_int_eq(login("sesame+open", fresh), 429);
    ck_assert_ptr_null(strstr(cookie, "tn_admin="));
}
END_TEST

/* The address's lock doubles with each failure past the limit: a failure once the first lock
 * has run out locks for twice as long as the first lock did. */
START_TEST(test_lock_doubles)
{
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(login("wrong", NULL), 401);
    int64_t first = lock_left("addr:127.0.0.1", time(NULL));
    ck_assert_msg(first > 0 && first <= 60, "the first lock: %lld s", (long long)first);
    /* the first lock has run out, the failures are still in the window */
    reg_exec("UPDATE admin_throttle SET locked_until = 0");
    ck_assert_int_eq(login("wrong", NULL), 401);
    int64_t second = lock_left("addr:127.0.0.1", time(NULL));
    /* twice the first lock, less the few seconds a slow run may take between the two reads */
    ck_assert_msg(second > 90 && second <= 120, "the second lock: %lld s", (long long)second);
}
END_TEST

/* The doubling stops at each lock's ceiling: an hour for an address, 15 minutes for an
 * account (so that a stranger's guesses never lock the operators out for long), however many
 * failures the window holds. */
START_TEST(test_lock_ceilings)
{
    ck_assert_int_eq(login("wrong", NULL), 401);
    /* many failures in the window already, and no lock in force */
    reg_exec("UPDATE admin_throttle SET failures = 30, locked_until = 0");
    ck_assert_int_eq(login("wrong", NULL), 401);
    int64_t now = time(NULL);
    int64_t addr = lock_left("addr:127.0.0.1", now);
    int64_t user = lock_left("user:admin", now);
    /* at the ceiling, less a margin for a slow run */
    ck_assert_msg(addr > 3500 && addr <= 3600, "the address's lock: %lld s", (long long)addr);
    ck_assert_msg(user > 800 && user <= 900, "the account's lock: %lld s", (long long)user);
}
END_TEST

Suite *admin_suite(void);
Suite *admin_suite(void)
{
    Suite *s = suite_create("admin");
    TCase *t = tcase_create("pieces");
    tcase_add_test(t, test_sha256);
    tcase_add_test(t, test_random_token);
    tcase_add_test(t, test_config);
    suite_add_tcase(s, t);
    /* The same tests on each backend: SQLite always; PostgreSQL when run.sh gives one. */
    for (int pg = 0; pg < 2; pg++) {
        if (pg && getenv("TENANCY_TEST_PG") == NULL)
            break;
        t = tcase_create(pg ? "handle_pg" : "handle");
        tcase_add_checked_fixture(t, pg ? setup_pg : setup, teardown);
        tcase_set_timeout(t, 30);
        tcase_add_test(t, test_without_session);
        tcase_add_test(t, test_login_and_csrf);
        tcase_add_test(t, test_api_post_csrf);
        tcase_add_test(t, test_login_origin);
        tcase_add_test(t, test_cookie_prefix);
        tcase_add_test(t, test_session_ends_with_password);
        tcase_add_test(t, test_session_expires);
        tcase_add_test(t, test_login_sweeps_ended_sessions);
        tcase_add_test(t, test_panel_tables);
        tcase_add_test(t, test_registry_upgrade);
        tcase_add_test(t, test_failure_count);
        tcase_add_test(t, test_login_token_shape);
        tcase_add_test(t, test_account_lock);
        tcase_add_test(t, test_lock_doubles);
        tcase_add_test(t, test_lock_ceilings);
        tcase_add_test(t, test_audit_page);
        suite_add_tcase(s, t);
    }
    return s;
}
