/* check_admin.c — the admin panel in process: SHA-256, its options, random tokens, and
 * admin_handle() over a fake transport with a real SQLite registry (routes refused without
 * a session, the headers, a whole login, CSRF), and the audit page (a console entry's start
 * shown with its outcome, running, or the master's line for a worker that died). */
#include "core/first.h"
#include "admin/admin.h"
#include "admin/admin_int.h"
#include "core/conf.h"
#include "tenancy/registry.h"

#include <check.h>
#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* One request: METHOD PATH[?QUERY] from 127.0.0.1 with the current cookies, body (form).
 * The whole response (status line, headers, body) comes back in *resp (malloc'ed). */
static int request(const char *method, const char *uri, const char *body, const char *extra_k,
                   const char *extra_v, char **resp)
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
    if (extra_k != NULL)
        set_param(&f, extra_k, extra_v);
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

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/check_admin.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cfg_arena = arena_create(0);
    char text[1024], err[256];
    snprintf(text, sizeof(text), "state_dir = %s\nadmin.host = admin.test\n", dir);
    ck_assert_int_eq(finish_text(text, &acfg, &tcfg, cfg_arena, err), TN_OK);
    /* tenancy_config_finish fills registry_uri and gen_path */
    ck_assert_int_eq(tenancy_config_finish(&tcfg, 4, cfg_arena, err, sizeof(err)), TN_OK);
    registry *reg = NULL;
    ck_assert_int_eq(registry_open(tcfg.registry_uri, tcfg.gen_path, &reg, err, sizeof(err)),
                     TN_OK);
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
    char *r, nonce[80], body[512];
    ck_assert_int_eq(request("GET", "/login", NULL, NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(field(r, "nonce", nonce, sizeof(nonce)));
    take_cookies(r);
    free(r);
    snprintf(body, sizeof(body), "nonce=%s&user=admin&password=sesame+open", nonce);
    ck_assert_int_eq(request("POST", "/login", body, NULL, NULL, &r), 303);
    take_cookies(r);
    free(r);

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

Suite *admin_suite(void);
Suite *admin_suite(void)
{
    Suite *s = suite_create("admin");
    TCase *t = tcase_create("pieces");
    tcase_add_test(t, test_sha256);
    tcase_add_test(t, test_random_token);
    tcase_add_test(t, test_config);
    suite_add_tcase(s, t);
    t = tcase_create("handle");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_without_session);
    tcase_add_test(t, test_login_and_csrf);
    tcase_add_test(t, test_audit_page);
    suite_add_tcase(s, t);
    return s;
}
