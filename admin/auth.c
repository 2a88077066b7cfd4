/*
 * auth.c — logins, sessions, CSRF tokens and login throttling for the panel.
 *
 * Passwords: the file admin.password_file holds `user:hash` lines written by `tenancy admin
 * passwd`, the hash being libxcrypt's yescrypt ($y$, salted, slow). A login for an unknown
 * user still runs one yescrypt, so timing does not tell which users exist.
 *
 * Sessions are kept server-side, in the registry's database (the panel's own table, through
 * sessions.c): workers are separate processes and any of them may get the next request, and a
 * stored session can be ended for good (logout, expiry) where a signed cookie stays valid
 * until it expires. The cookie holds 32 random bytes (getrandom); the registry holds only
 * their SHA-256, so reading the registry gives no usable session. Cookies are HttpOnly,
 * SameSite=Strict, Path=/, and over HTTPS Secure and named with the __Host- prefix (read
 * only under that name there), so a page on a sibling host cannot plant one the panel would
 * take. Each session has its own CSRF token (32 random bytes), required on every POST; the
 * login form has its own double-submit token (a short-lived cookie and a form field), and
 * a login POST that says it comes from another site (Origin, else Referer) is refused.
 *
 * A session belongs to its user's password: the session keeps a fingerprint of the user's
 * hash line (the SHA-256 of the hash), and every request compares it with the password
 * file. A new password (`tenancy admin passwd`, which only writes the file) or a user taken
 * out of the file ends the user's sessions: each is deleted when it is refused, and a login
 * sweeps away the others (and the expired ones).
 *
 * Throttling, in the registry's database too (sessions.c) so that it holds across workers and
 * restarts: failures are counted per client address and per account within 15 minutes; from
 * the 5th failure of an address (10th of an account) further attempts are refused with 429
 * for a lock that doubles with each failure (1 minute up to 1 hour; 15 minutes for an
 * account, so that nobody can lock the operators out for long). A refused attempt never
 * runs the password check. A success clears both counters. A failure is counted by one
 * statement (an upsert that adds one and returns the sum), so failures that overlap in
 * several workers are each counted.
 *
 * Must not: log or store a password or a session id; compare secrets with strcmp.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "admin/sessions.h"
#include "core/arena.h"
#include "core/kv.h"
#include "core/log.h"
#include "core/rc.h"
#include "core/token.h"
#include "tenancy/operators.h"

#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COOKIE "tn_admin"
#define LOGIN_COOKIE "tn_admin_login"
/* Browsers keep a __Host- cookie only when it is Secure, has Path=/ and no Domain, and was
 * set by this very host: a tenant's page on a sibling name (acme.example.com beside
 * admin.example.com) can set a cookie for the parent domain, but never one under this name.
 * Plain HTTP cannot carry the prefix (no Secure), so it keeps the bare name there. */
#define HOST_PREFIX "__Host-"
#define WINDOW_S (15 * 60)
#define ADDR_LIMIT 5
#define USER_LIMIT 10
#define ADDR_LOCK_MAX_S 3600
#define USER_LOCK_MAX_S 900

/* ---- small helpers ------------------------------------------------------------------------- */

int auth_random_token(char *out, size_t outlen, size_t nbytes)
{
    return token_random_b64url(out, outlen, nbytes);
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

/* A cookie's name for this request's scheme: over HTTPS only the __Host- one is set or read,
 * so a bare-named cookie planted from a sibling host is never taken for ours. */
static const char *cookie_name(const adm_req *a, const char *base)
{
    if (!a->https)
        return base;
    return strcmp(base, COOKIE) == 0 ? HOST_PREFIX COOKIE : HOST_PREFIX LOGIN_COOKIE;
}

static const char *get_cookie(adm_req *a, const char *base)
{
    return tn_cookie(a->r, cookie_name(a, base));
}

static void set_cookie(adm_req *a, const char *base, const char *value, int64_t max_age)
{
    char c[256];
    /* No Domain attribute ever: the cookie stays on the panel's own host name. */
    snprintf(c, sizeof(c), "%s=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s",
             cookie_name(a, base), value, (long long)max_age, a->https ? "; Secure" : "");
    tn_add_header(a->r, "Set-Cookie", c);
}

/* True when `url` (an Origin or a Referer) names the panel's host. The port is not
 * compared: the web server may pass the host without it. */
static bool url_is_panel(adm_req *a, const char *url)
{
    const char *o = strstr(url, "://");
    if (o == NULL)
        return false;   /* "null" (a sandboxed or privacy-stripped origin) included */
    o += 3;
    char *host = arena_strndup(a->r->arena, o, strcspn(o, "/?#"));
    if (host == NULL)
        return false;
    const char *h = request_normalise_host(a->r->arena, host);
    return h != NULL && strcmp(h, adm.env.cfg->host_norm) == 0;
}

/* A browser says where a POST comes from: Origin (sent on every POST by current browsers),
 * else Referer (older ones; the panel's Referrer-Policy same-origin keeps it on our own
 * forms). Either, when present, must be the panel. Neither: not a browser's cross-site
 * form, and the tokens still have to match. */
static bool from_panel(adm_req *a)
{
    const char *origin = tn_header(a->r, "Origin");
    if (origin != NULL)
        return url_is_panel(a, origin);
    const char *referer = tn_header(a->r, "Referer");
    if (referer != NULL)
        return url_is_panel(a, referer);
    return true;
}

/* ---- password fingerprints ------------------------------------------------------------------ */

static int stored_hash(const char *user, char *out, size_t outlen);

/* The fingerprint of `user`'s current password: the SHA-256 of the hash line's hash. It
 * changes with every `tenancy admin passwd` (a new salt each time) and cannot be turned back
 * into the hash. TN_OK, TN_NOTFOUND (no such user), TN_IO (the file cannot be read). */
static int user_fingerprint(const char *user, char fp[65])
{
    char hash[512];
    int rc = stored_hash(user, hash, sizeof(hash));
    if (rc == TN_OK)
        sha256_hex(hash, strlen(hash), fp);
    explicit_bzero(hash, sizeof(hash));
    return rc;
}

/* ---- sessions ------------------------------------------------------------------------------ */

/* Whether a session opened under the fingerprint `stored_fp` still holds for `user`:
 * TN_OK, TN_DENIED (the password changed or the user is gone: the session is over for good),
 * TN_IO (the password file cannot be read: refused now, but not ended). A row from before
 * fingerprints existed has '' and matches nobody. */
static int session_holds(const char *user, const char *stored_fp)
{
    char fp[65];
    int rc = user_fingerprint(user, fp);
    if (rc == TN_IO)
        return TN_IO;
    return rc == TN_OK && token_equal(fp, stored_fp) ? TN_OK : TN_DENIED;
}

int auth_session(adm_req *a)
{
    const char *id = get_cookie(a, COOKIE);
    if (id == NULL || !token_ok(id))
        return TN_NOTFOUND;
    char h[65];
    sha256_hex(id, strlen(id), h);
    tn_db *db = registry_db(adm.reg);
    session_rec s;
    int rc = sessions_find(db, h, now_s(), &s);
    if (rc == TN_NOTFOUND)
        return rc;
    if (rc != TN_OK) {
        log_error("admin: reading sessions failed: %s", tn_db_error(db));
        return rc;
    }
    /* The session holds only while its user has the password it was opened with: a new
     * password or a user taken out of the file ends it here, whoever changed the file. */
    rc = session_holds(s.user, s.pw_fp);
    if (rc == TN_OK) {
        a->user = tn_strdup(a->r, s.user);
        a->csrf = tn_strdup(a->r, s.csrf);
        if (a->user == NULL || a->csrf == NULL) {
            a->user = a->csrf = NULL;
            rc = TN_NOMEM;
        }
    } else {
        if (rc == TN_DENIED) {
            log_info("admin: a session of '%s' ended: the password changed or the user was "
                     "removed", s.user);
            if (sessions_end(db, h) != TN_OK)
                log_warn("admin: cannot delete an ended session: %s", tn_db_error(db));
        }
        rc = TN_NOTFOUND;
    }
    explicit_bzero(&s, sizeof(s));   /* the CSRF token */
    return rc;
}

bool auth_csrf_ok(adm_req *a)
{
    const char *t = tn_header(a->r, "X-CSRF-Token");
    if (t == NULL)
        t = adm_form(a, "csrf");
    if (t == NULL || a->csrf == NULL || !token_equal(t, a->csrf))
        return false;
    return from_panel(a);
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
    const char *have = get_cookie(a, LOGIN_COOKIE);
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
    int rc = operators_read_hash(adm.env.cfg->password_file, user, out, outlen);
    if (rc == TN_IO) {
        static bool warned;
        if (!warned) {
            warned = true;
            log_warn("admin: cannot read %s (%s): nobody can log in; set a password with "
                     "'tenancy admin passwd'", adm.env.cfg->password_file, strerror(errno));
        }
    }
    return rc;
}

/* True when `password` is `user`'s; then fp gets the fingerprint of the hash it matched
 * (user_fingerprint), which the session keeps. */
static bool password_ok(const char *user, const char *password, char fp[65])
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
    bool ok = h != NULL && h[0] == '$' && token_equal(h, hash);
    explicit_bzero(&cdata, sizeof(cdata));
    if (ok)
        sha256_hex(hash, strlen(hash), fp);
    explicit_bzero(hash, sizeof(hash));
    return ok;
}

/* ---- throttling ------------------------------------------------------------------------------- */

/* Seconds the key is still locked (0: not locked, or the counter cannot be read). */
static int64_t locked_for(tn_db *db, const char *key, int64_t now)
{
    int64_t until;
    if (throttle_locked_until(db, key, &until) != TN_OK)
        return 0;
    return until > now ? until - now : 0;
}

static void note_failure(tn_db *db, const char *key, int limit, int64_t lock_max, int64_t now)
{
    int64_t failures;
    if (throttle_fail(db, key, now, now - WINDOW_S, &failures) != TN_OK) {
        log_error("admin: cannot record a failed login: %s", tn_db_error(db));
        return;
    }
    if (failures < limit)
        return;
    int64_t lock = 60;
    for (int64_t i = limit; i < failures && lock < lock_max; i++)
        lock *= 2;
    if (throttle_lock(db, key, now + (lock < lock_max ? lock : lock_max)) != TN_OK)
        log_error("admin: cannot record a login lock: %s", tn_db_error(db));
}

/* The sweep's view of a session's holder: the current fingerprint of the user's password. */
static int current_fingerprint(void *ctx, const char *user, char fp[65])
{
    (void)ctx;
    return user_fingerprint(user, fp);
}

/* ---- login and logout ------------------------------------------------------------------------ */

int auth_login_post(adm_req *a)
{
    if (adm_registry(a) == NULL)
        return a->r->status;
    tn_db *db = registry_db(adm.reg);
    /* Like every other POST, a login must come from the panel's own page: a foreign site's
     * form would log the browser into an account of the attacker's choosing (login CSRF),
     * and a sibling host could have planted the login cookie the token is checked against. */
    if (!from_panel(a)) {
        audit(a, "login", NULL, "login from another origin", "refused");
        return auth_login_page(a, 403, "This login did not come from the panel's own page.");
    }
    const char *nonce = adm_form(a, "nonce");
    const char *cookie = get_cookie(a, LOGIN_COOKIE);
    if (nonce == NULL || cookie == NULL || !token_ok(nonce) || !token_equal(nonce, cookie)) {
        audit(a, "login", NULL, "login form token missing or wrong", "refused");
        return auth_login_page(a, 403, "The login form expired or did not come from this "
                                       "panel. Please try again.");
    }
    const char *user = adm_form(a, "user");
    const char *password = adm_form(a, "password");
    if (user == NULL || password == NULL || !operators_name_ok(user) || strlen(password) > 1024)
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
        tn_errf(msg, sizeof(msg), TN_BUSY, "Too many failed logins. Try again in %lld s.",
                (long long)wait);
        return auth_login_page(a, 429, msg);
    }
    char fp[65];
    if (!password_ok(user, password, fp)) {
        note_failure(db, kaddr, ADDR_LIMIT, ADDR_LOCK_MAX_S, now);
        note_failure(db, kuser, USER_LIMIT, USER_LOCK_MAX_S, now);
        audit(a, "login", NULL, "wrong user or password", "refused");
        a->user = NULL;
        return auth_login_page(a, 401, "Wrong user name or password.");
    }
    throttle_clear(db, kaddr, kuser);

    char id[64], csrf[64], h[65];
    if (auth_random_token(id, sizeof(id), 32) != TN_OK ||
        auth_random_token(csrf, sizeof(csrf), 32) != TN_OK)
        return send_message(a, 500, "Error", "No random bytes available.");
    sha256_hex(id, strlen(id), h);
    int64_t ttl = adm.env.cfg->session_ttl_ms / 1000;
    /* Expired sessions, and those of a password that changed or a user that is gone, go now:
     * logins are rare, and nothing else scans the table (a refused session is deleted when
     * it comes back; this catches the ones that never do). */
    int swept = sessions_sweep(db, now, current_fingerprint, NULL);
    if (swept < 0)
        log_warn("admin: cannot sweep the ended sessions: %s", tn_db_error(db));
    if (sessions_add(db, h, csrf, user, a->client, now, now + ttl, fp) != TN_OK) {
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
    const char *id = get_cookie(a, COOKIE);
    if (id != NULL && token_ok(id)) {
        char h[65];
        sha256_hex(id, strlen(id), h);
        sessions_end(registry_db(adm.reg), h);
    }
    audit(a, "logout", NULL, "", "ok");
    set_cookie(a, COOKIE, "", 0);
    return send_redirect(a, "/login");
}
