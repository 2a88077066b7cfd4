/*
 * auth.c — logins, sessions, CSRF tokens and login throttling for the panel.
 *
 * Passwords: the file admin.password_file holds `user:hash` lines written by `tenancy admin
 * passwd`, the hash being libxcrypt's yescrypt ($y$, salted, slow). A login for an unknown
 * user still runs one yescrypt, so timing does not tell which users exist.
 *
 * Sessions are kept server-side, in the registry (table admin_sessions, created by `tenancy
 * init`): workers are separate processes and any of them may get the next request, and a
 * stored session can be ended for good (logout, expiry) where a signed cookie stays valid
 * until it expires. The cookie holds 32 random bytes (getrandom); the registry holds only
 * their SHA-256, so reading the registry gives no usable session. Cookies are HttpOnly,
 * SameSite=Strict, Path=/, and Secure when the request came over HTTPS. Each session has its
 * own CSRF token (32 random bytes), required on every POST; the login form has its own
 * double-submit token (a short-lived cookie and a form field).
 *
 * Throttling, in the registry too (table admin_throttle) so that it holds across workers and
 * restarts: failures are counted per client address and per account within 15 minutes; from
 * the 5th failure of an address (10th of an account) further attempts are refused with 429
 * for a lock that doubles with each failure (1 minute up to 1 hour; 15 minutes for an
 * account, so that nobody can lock the operators out for long). A refused attempt never
 * runs the password check. A success clears both counters.
 *
 * Must not: log or store a password or a session id; compare secrets with strcmp.
 */
#include "core/first.h"
#include "admin/admin_int.h"
#include "core/kv.h"
#include "core/log.h"

#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define COOKIE "tn_admin"
#define LOGIN_COOKIE "tn_admin_login"
#define WINDOW_S (15 * 60)
#define ADDR_LIMIT 5
#define USER_LIMIT 10
#define ADDR_LOCK_MAX_S 3600
#define USER_LOCK_MAX_S 900

/* ---- small helpers ------------------------------------------------------------------------- */

static bool ct_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la == lb ? 0 : 1;
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

int auth_random_token(char *out, size_t outlen, size_t nbytes)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[64];
    if (nbytes > sizeof(raw) || outlen < nbytes * 2)
        return TN_INVALID;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return TN_IO;
        got += (size_t)n;
    }
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < nbytes; i++) {
        acc = acc << 8 | raw[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = b64[(acc << (6 - bits)) & 63];
    out[o] = '\0';
    return TN_OK;
}

static int64_t now_s(void) { return (int64_t)time(NULL); }

static void i64s(char *out, size_t n, int64_t v) { snprintf(out, n, "%lld", (long long)v); }

static bool token_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 40 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

static void set_cookie(adm_req *a, const char *name, const char *value, int64_t max_age)
{
    char c[256];
    snprintf(c, sizeof(c), "%s=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s", name,
             value, (long long)max_age, a->https ? "; Secure" : "");
    tn_add_header(a->r, "Set-Cookie", c);
}

/* ---- sessions ------------------------------------------------------------------------------ */

int auth_session(adm_req *a)
{
    const char *id = tn_cookie(a->r, COOKIE);
    if (id == NULL || !token_ok(id))
        return TN_NOTFOUND;
    char h[65], now[24];
    sha256_hex(id, strlen(id), h);
    i64s(now, sizeof(now), now_s());
    const char *p[] = {h, now};
    tn_rows *rows = NULL;
    int rc = tn_db_query(registry_db(adm.reg), &rows,
                         "SELECT username, csrf FROM admin_sessions WHERE id_hash = $1 AND "
                         "expires_at > $2", 2, p);
    if (rc != TN_OK) {
        log_error("admin: reading sessions failed: %s (is the registry initialised with this "
                  "version? run 'tenancy init')", tn_db_error(registry_db(adm.reg)));
        return rc;
    }
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        a->user = tn_strdup(a->r, tn_rows_get(rows, 0));
        a->csrf = tn_strdup(a->r, tn_rows_get(rows, 1));
        rc = a->user && a->csrf ? TN_OK : TN_NOMEM;
    } else if (rc == TN_DONE) {
        rc = TN_NOTFOUND;
    }
    tn_rows_free(rows);
    return rc;
}

bool auth_csrf_ok(adm_req *a)
{
    const char *t = tn_header(a->r, "X-CSRF-Token");
    if (t == NULL)
        t = adm_form(a, "csrf");
    if (t == NULL || a->csrf == NULL || !ct_equal(t, a->csrf))
        return false;
    /* A browser says where a request comes from (Origin): it must be the panel's host. The
     * port is not compared: the web server may pass the host without it. */
    const char *origin = tn_header(a->r, "Origin");
    if (origin != NULL) {
        const char *o = strstr(origin, "://");
        if (o == NULL)
            return false;
        const char *h = request_normalise_host(a->r->arena, o + 3);
        if (h == NULL || strcmp(h, adm.env.cfg->host_norm) != 0)
            return false;
    }
    return true;
}

/* ---- the login page -------------------------------------------------------------------------- */

/* `next` from the query or the form, when it is a path of the panel (never another site). */
static const char *safe_next(adm_req *a)
{
    const char *n = adm_form(a, "next");
    if (n == NULL || n[0] != '/' || n[1] == '/' || n[1] == '\\' || strncmp(n, "/login", 6) == 0)
        return "/";
    /* No control character at all: browsers drop tabs and newlines from a URL, so "/\t/x"
     * would be "//x", another site. */
    for (const char *p = n; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return "/";
    return n;
}

int auth_login_page(adm_req *a, int status, const char *msg)
{
    /* One token per browser, kept while it is valid: a second login page (another tab, a
     * redirect the browser followed meanwhile) must not invalidate the first form. */
    char nonce[64];
    const char *have = tn_cookie(a->r, LOGIN_COOKIE);
    if (have != NULL && token_ok(have)) {
        snprintf(nonce, sizeof(nonce), "%s", have);
    } else {
        if (auth_random_token(nonce, sizeof(nonce), 32) != TN_OK)
            return send_message(a, 500, "Error", "No random bytes available.");
        set_cookie(a, LOGIN_COOKIE, nonce, 1800);
    }
    buf *o = a->out;
    buf_reset(o);
    buf_puts(o, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                "<title>Log in · tenancy admin</title><link rel=\"icon\" href=\"data:,\">"
                "<link rel=\"stylesheet\" href=\"/assets/admin.css?v=");
    buf_puts(o, adm.css_etag);
    buf_puts(o, "\"><script src=\"/assets/admin.js?v=");
    buf_puts(o, adm.js_etag);
    buf_puts(o, "\" defer></script></head><body class=\"login\"><main class=\"login-box\">"
                "<div class=\"brand big\">tenancy<span>admin</span></div>");
    if (msg != NULL) {
        buf_puts(o, "<p class=\"error\" role=\"alert\">");
        buf_html(o, msg);
        buf_puts(o, "</p>");
    }
    buf_puts(o, "<form method=\"post\" action=\"/login\" class=\"stack\" id=\"login-form\">"
                "<input type=\"hidden\" name=\"nonce\" value=\"");
    buf_html(o, nonce);
    buf_puts(o, "\"><input type=\"hidden\" name=\"next\" value=\"");
    buf_html(o, safe_next(a));
    buf_puts(o, "\"><label>User <input name=\"user\" id=\"user\" autocomplete=\"username\" "
                "value=\"admin\" required></label>"
                "<label>Password <input type=\"password\" name=\"password\" id=\"password\" "
                "autocomplete=\"current-password\" required autofocus></label>"
                "<button type=\"submit\" class=\"primary\">Log in</button></form>"
                "<p class=\"hint\">Set a password with <code>tenancy admin passwd</code>.</p>"
                "</main></body></html>\n");
    return send_html(a, status);
}

/* ---- passwords ------------------------------------------------------------------------------- */

static struct crypt_data cdata;   /* large: one per process */

/* The stored hash of `user` from the password file into out; TN_NOTFOUND when the user or
 * the file is missing. */
static int stored_hash(const char *user, char *out, size_t outlen)
{
    FILE *f = fopen(adm.env.cfg->password_file, "re");
    if (f == NULL) {
        static bool warned;
        if (!warned) {
            warned = true;
            log_warn("admin: cannot read %s (%s): nobody can log in; set a password with "
                     "'tenancy admin passwd'", adm.env.cfg->password_file, strerror(errno));
        }
        return TN_NOTFOUND;
    }
    char line[1024];
    int rc = TN_NOTFOUND;
    size_t ul = strlen(user);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, user, ul) == 0 && line[ul] == ':') {
            snprintf(out, outlen, "%s", line + ul + 1);
            rc = TN_OK;
            break;
        }
    }
    fclose(f);
    return rc;
}

static bool password_ok(const char *user, const char *password)
{
    char hash[512];
    bool known = stored_hash(user, hash, sizeof(hash)) == TN_OK && hash[0] == '$';
    if (!known) {
        /* Spend the same time as a real check. */
        static char dummy[256];
        if (dummy[0] == '\0') {
            char setting[CRYPT_GENSALT_OUTPUT_SIZE];
            if (crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof(setting)) != NULL) {
                const char *h = crypt_r("not a password", setting, &cdata);
                if (h != NULL && h[0] == '$')
                    snprintf(dummy, sizeof(dummy), "%s", h);
            }
        }
        if (dummy[0] != '\0')
            (void)crypt_r(password, dummy, &cdata);
        return false;
    }
    const char *h = crypt_r(password, hash, &cdata);
    bool ok = h != NULL && h[0] == '$' && ct_equal(h, hash);
    explicit_bzero(&cdata, sizeof(cdata));
    return ok;
}

/* ---- throttling ------------------------------------------------------------------------------- */

/* Seconds the key is still locked (0: not locked). */
static int64_t locked_for(tn_db *db, const char *key, int64_t now)
{
    char v[32];
    const char *p[] = {key};
    if (db_query_value(db, v, sizeof(v), "SELECT locked_until FROM admin_throttle WHERE key = $1",
                       1, p) != TN_OK)
        return 0;
    int64_t until = atoll(v);
    return until > now ? until - now : 0;
}

static void note_failure(tn_db *db, const char *key, int limit, int64_t lock_max, int64_t now)
{
    const char *p[] = {key};
    int64_t failures = 0, first = now;
    tn_rows *rows = NULL;
    if (tn_db_query(db, &rows, "SELECT failures, first_at FROM admin_throttle WHERE key = $1", 1,
                    p) == TN_OK) {
        if (tn_rows_next(rows) == TN_OK) {
            failures = atoll(tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "0");
            first = atoll(tn_rows_get(rows, 1) ? tn_rows_get(rows, 1) : "0");
        }
        tn_rows_free(rows);
    }
    if (now - first > WINDOW_S) {
        failures = 0;
        first = now;
    }
    failures++;
    int64_t until = 0;
    if (failures >= limit) {
        int64_t lock = 60;
        for (int64_t i = limit; i < failures && lock < lock_max; i++)
            lock *= 2;
        until = now + (lock < lock_max ? lock : lock_max);
    }
    char f[24], fa[24], u[24];
    i64s(f, sizeof(f), failures);
    i64s(fa, sizeof(fa), first);
    i64s(u, sizeof(u), until);
    const char *q[] = {key, f, fa, u};
    if (tn_db_exec(db,
                   "INSERT INTO admin_throttle (key, failures, first_at, locked_until) "
                   "VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET "
                   "failures = excluded.failures, first_at = excluded.first_at, "
                   "locked_until = excluded.locked_until", 4, q) != TN_OK)
        log_error("admin: cannot record a failed login: %s", tn_db_error(db));
}

static void clear_failures(tn_db *db, const char *k1, const char *k2)
{
    const char *p[] = {k1, k2};
    tn_db_exec(db, "DELETE FROM admin_throttle WHERE key = $1 OR key = $2", 2, p);
}

/* ---- login and logout ------------------------------------------------------------------------ */

int auth_login_post(adm_req *a)
{
    if (adm_registry(a) == NULL)
        return a->r->status;
    tn_db *db = registry_db(adm.reg);
    const char *nonce = adm_form(a, "nonce");
    const char *cookie = tn_cookie(a->r, LOGIN_COOKIE);
    if (nonce == NULL || cookie == NULL || !token_ok(nonce) || !ct_equal(nonce, cookie)) {
        audit(a, "login", NULL, "login form token missing or wrong", "refused");
        return auth_login_page(a, 403, "The login form expired or did not come from this "
                                       "panel. Please try again.");
    }
    const char *user = adm_form(a, "user");
    const char *password = adm_form(a, "password");
    if (user == NULL || password == NULL || !admin_user_name_ok(user) || strlen(password) > 1024)
        return auth_login_page(a, 400, "Enter a user name and a password.");

    int64_t now = now_s();
    char kaddr[128], kuser[128];
    snprintf(kaddr, sizeof(kaddr), "addr:%s", a->client);
    snprintf(kuser, sizeof(kuser), "user:%s", user);
    int64_t wait = locked_for(db, kaddr, now);
    int64_t w2 = locked_for(db, kuser, now);
    if (w2 > wait)
        wait = w2;
    a->user = user;   /* for the audit line: who tried */
    if (wait > 0) {
        char ra[24], msg[160];
        i64s(ra, sizeof(ra), wait);
        tn_add_header(a->r, "Retry-After", ra);
        audit(a, "login", NULL, "throttled", "refused");
        a->user = NULL;
        snprintf(msg, sizeof(msg), "Too many failed logins. Try again in %lld s.",
                 (long long)wait);
        return auth_login_page(a, 429, msg);
    }
    if (!password_ok(user, password)) {
        note_failure(db, kaddr, ADDR_LIMIT, ADDR_LOCK_MAX_S, now);
        note_failure(db, kuser, USER_LIMIT, USER_LOCK_MAX_S, now);
        audit(a, "login", NULL, "wrong user or password", "refused");
        a->user = NULL;
        return auth_login_page(a, 401, "Wrong user name or password.");
    }
    clear_failures(db, kaddr, kuser);

    char id[64], csrf[64], h[65], created[24], expires[24];
    if (auth_random_token(id, sizeof(id), 32) != TN_OK ||
        auth_random_token(csrf, sizeof(csrf), 32) != TN_OK)
        return send_message(a, 500, "Error", "No random bytes available.");
    sha256_hex(id, strlen(id), h);
    int64_t ttl = adm.env.cfg->session_ttl_ms / 1000;
    i64s(created, sizeof(created), now);
    i64s(expires, sizeof(expires), now + ttl);
    const char *p[] = {h, csrf, user, a->client, created, expires};
    /* Expired sessions go now (logins are rare; nothing else scans the table). */
    const char *np[] = {created};
    tn_db_exec(db, "DELETE FROM admin_sessions WHERE expires_at <= $1", 1, np);
    if (tn_db_exec(db,
                   "INSERT INTO admin_sessions (id_hash, csrf, username, client, created_at, "
                   "expires_at) VALUES ($1, $2, $3, $4, $5, $6)", 6, p) != TN_OK) {
        log_error("admin: cannot store a session: %s", tn_db_error(db));
        adm_registry_failed(a);
        return send_message(a, 503, "Error", "The session could not be stored.");
    }
    set_cookie(a, COOKIE, id, ttl);
    set_cookie(a, LOGIN_COOKIE, "", 0);
    audit(a, "login", NULL, "", "ok");
    return send_redirect(a, safe_next(a));
}

int auth_logout(adm_req *a)
{
    const char *id = tn_cookie(a->r, COOKIE);
    if (id != NULL && token_ok(id)) {
        char h[65];
        sha256_hex(id, strlen(id), h);
        const char *p[] = {h};
        tn_db_exec(registry_db(adm.reg), "DELETE FROM admin_sessions WHERE id_hash = $1", 1, p);
    }
    audit(a, "logout", NULL, "", "ok");
    set_cookie(a, COOKIE, "", 0);
    return send_redirect(a, "/login");
}
