/*
 * audit.c — the audit log (admin.audit_log): every line of it is written here, and read back
 * here for the panel's audit page.
 *
 * One JSON line per entry, flat, every value a string (so the page's reader stays small):
 *   {"time":"2026-12-02T14:43:07Z","id":"3f9c0a7e5b21d4c8","user":"admin",
 *    "client":"127.0.0.1","action":"suspend","tenant":"acme","detail":"state suspended",
 *    "result":"ok","req":"…"}
 * The outcome of the panel's migrate or move is written by the job worker that ran it
 * (audit_job: "by":"job worker", "job": its id), with the user and client of the request
 * that queued it ("started", with the job's id in its detail).
 * A line is written with one write() on an O_APPEND descriptor, so the lines of the workers
 * and of the master never interleave (Linux writes to a regular file under the inode's lock,
 * whatever the size; PIPE_BUF only bounds pipes).
 *
 * A console statement is one entry of two lines with the same id, because the log must show
 * a statement even when it never finishes:
 *  - "phase":"start", written BEFORE the statement runs (the console does not run a statement
 *    whose start line could not be written), result "started", with "len" (bytes) and
 *    "sha256" (hex) of the exact text, and the text itself in "detail": whole up to
 *    AUDIT_SQL_WHOLE, the most the console runs. Whole rather than a prefix, because a
 *    prefix of any size can be filled with padding — blanks, and just as well a comment,
 *    which only a lexer of each SQL dialect could strip, and a wrong lexer would become the
 *    way to hide. Only a text the console refuses as too long is cut ("cut":"yes"): its
 *    first AUDIT_SQL_PREFIX bytes with every whitespace run made one space.
 *  - "phase":"end", after it: result ok, error, refused or timeout, with the rows and the time,
 *    or the error, in "detail"; or, when the worker died under the statement, result "died",
 *    written by the master ("by":"master", admin_audit_died) with how the worker ended.
 * Between the two, the worker keeps the entry's id where its supervisor finds it after a
 * death (admin_env.audit_pending: the scoreboard slot).
 *
 * The audit page shows an entry's start with its outcome, "running" while there is none.
 *
 * Must not: use the panel's per-worker state in admin_audit_died (the master calls it, and
 * it never ran admin_init); write a line in more than one write(); let a logged value reach
 * the page unescaped.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "core/log.h"
#include "core/rc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The whole text is logged up to this (page_console refuses longer ones); past it, a prefix. */
#define AUDIT_SQL_WHOLE 65536
#define AUDIT_SQL_PREFIX 1024
/* The page reads the log's tail: at most this much, and the newest entries in it. */
#define AUDIT_PAGE_BYTES (1024 * 1024)
#define AUDIT_PAGE_LINES 500

/* ---- writing ------------------------------------------------------------------------------- */

/* A fresh entry id: 16 hex digits of getrandom(). Random, not pid + counter, so that ids stay
 * unique across workers, restarts and rotated files read side by side. Should getrandom
 * fail (it does not block: GRND_NONBLOCK), pid, clock and a counter stand in. */
static void new_id(char out[ADMIN_AUDIT_ID_SIZE])
{
    static unsigned counter;
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)ts.tv_nsec ^
            ((uint64_t)++counter << 52);
    }
    snprintf(out, ADMIN_AUDIT_ID_SIZE, "%016llx", (unsigned long long)v);
}

/* `{"time":"…","id":"…"` — the head of every line. */
static void line_begin(buf *l, const char *id)
{
    char ts[40];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    buf_puts(l, "{\"time\":\"");
    buf_puts(l, ts);
    buf_puts(l, "\",\"id\":");
    buf_json_str(l, id);
}

static void kv(buf *l, const char *key, const char *value)
{
    buf_puts(l, ",\"");
    buf_puts(l, key);
    buf_puts(l, "\":");
    buf_json_str(l, value ? value : "");
}

/* Close the line and append it to `path` in one write(). TN_OK, or TN_NOMEM / TN_IO with err
 * set. */
static int line_write(const char *path, buf *l, char *err, size_t errlen)
{
    buf_puts(l, "}\n");
    if (l->oom)
        return tn_errf(err, errlen, TN_NOMEM, "audit log %s: out of memory for a line", path);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return tn_errf(err, errlen, TN_IO, "cannot open the audit log %s: %s", path,
                       strerror(errno));
    ssize_t n = write(fd, l->p, l->len);
    int e = errno;
    close(fd);
    if (n != (ssize_t)l->len)
        return tn_errf(err, errlen, TN_IO, "cannot write the audit log %s: %s", path,
                       n < 0 ? strerror(e) : "short write");
    return TN_OK;
}

/* The line's fields after the id that every panel line has. */
static void who(buf *l, adm_req *a, const char *action, const char *tenant)
{
    kv(l, "user", a->user);
    kv(l, "client", a->client);
    kv(l, "action", action);
    kv(l, "tenant", tenant);
}

void audit(adm_req *a, const char *action, const char *tenant, const char *detail,
           const char *result)
{
    char id[ADMIN_AUDIT_ID_SIZE], err[512];
    new_id(id);
    buf l = BUF_INIT;
    line_begin(&l, id);
    who(&l, a, action, tenant);
    kv(&l, "detail", detail);
    kv(&l, "result", result);
    kv(&l, "req", tn_request_id(a->r));
    if (line_write(adm.env.cfg->audit_log, &l, err, sizeof(err)) != TN_OK)
        log_error("admin: %s", err);
    buf_free(&l);
}

void audit_job(const char *user, const char *client, const char *req, int64_t job_id,
               const char *action, const char *tenant, const char *detail, const char *result)
{
    char id[ADMIN_AUDIT_ID_SIZE], err[512], jid[24];
    new_id(id);
    snprintf(jid, sizeof(jid), "%lld", (long long)job_id);
    buf l = BUF_INIT;
    line_begin(&l, id);
    kv(&l, "user", user);
    kv(&l, "client", client);
    kv(&l, "action", action);
    kv(&l, "tenant", tenant);
    kv(&l, "detail", detail);
    kv(&l, "result", result);
    kv(&l, "req", req);
    kv(&l, "job", jid);
    kv(&l, "by", "job worker");
    if (line_write(adm.env.cfg->audit_log, &l, err, sizeof(err)) != TN_OK)
        log_error("admin: %s (the outcome of job %s: %s)", err, jid, result);
    buf_free(&l);
}

/* s[0..n) with each run of whitespace made one space and none at either end, appended to
 * out until it holds `limit` bytes (then cut back to whole UTF-8 characters). Returns
 * true when all of s fitted. */
static bool squeeze(buf *out, const char *s, size_t n, size_t limit)
{
    size_t start = out->len;
    bool blank = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            blank = out->len > start;
            continue;
        }
        if (out->len - start + (blank ? 1 : 0) >= limit) {
            size_t keep = utf8_valid_prefix(out->p + start, out->len - start);
            out->len = start + keep;
            if (out->p)
                out->p[out->len] = '\0';
            return false;
        }
        if (blank)
            buf_putc(out, ' ');
        blank = false;
        buf_putc(out, c);
    }
    return true;
}

int audit_sql_start(adm_req *a, const char *tenant, const char *sql, audit_sql *q, char *err,
                    size_t errlen)
{
    size_t n = strlen(sql);
    char hex[65], len[24];
    sha256_hex(sql, n, hex);
    snprintf(len, sizeof(len), "%zu", n);
    new_id(q->id);
    /* Kept before the line is written: a death between the two leaves a completion without
     * its start, which still says a statement was about to run; the other order could leave
     * a start that nothing ever completes. */
    if (adm.env.audit_pending != NULL)
        adm.env.audit_pending(adm.env.audit_ctx, q->id);
    buf l = BUF_INIT;
    line_begin(&l, q->id);
    who(&l, a, "sql", tenant);
    if (n <= AUDIT_SQL_WHOLE) {
        kv(&l, "detail", sql);
    } else {
        buf p = BUF_INIT;
        squeeze(&p, sql, n, AUDIT_SQL_PREFIX);
        kv(&l, "detail", p.p ? p.p : "");
        kv(&l, "cut", "yes");
        buf_free(&p);
    }
    kv(&l, "result", "started");
    kv(&l, "req", tn_request_id(a->r));
    kv(&l, "phase", "start");
    kv(&l, "len", len);
    kv(&l, "sha256", hex);
    int rc = line_write(adm.env.cfg->audit_log, &l, err, errlen);
    buf_free(&l);
    if (rc != TN_OK) {
        log_error("admin: %s: a console query on %s was not run", err, tenant);
        if (adm.env.audit_pending != NULL)
            adm.env.audit_pending(adm.env.audit_ctx, NULL);
    }
    return rc;
}

void audit_sql_end(adm_req *a, const char *tenant, const audit_sql *q, const char *result,
                   const char *detail)
{
    char err[512];
    buf l = BUF_INIT;
    line_begin(&l, q->id);
    who(&l, a, "sql", tenant);
    kv(&l, "detail", detail);
    kv(&l, "result", result);
    kv(&l, "req", tn_request_id(a->r));
    kv(&l, "phase", "end");
    if (line_write(adm.env.cfg->audit_log, &l, err, sizeof(err)) != TN_OK)
        log_error("admin: %s (the outcome of console entry %s: %s)", err, q->id, result);
    buf_free(&l);
    /* Only now: a death before this line is the master's to report. */
    if (adm.env.audit_pending != NULL)
        adm.env.audit_pending(adm.env.audit_ctx, NULL);
}

int admin_audit_died(const admin_config *cfg, const char *id, const char *req_id,
                     const char *outcome, char *err, size_t errlen)
{
    if (cfg == NULL || cfg->audit_log == NULL || id == NULL || id[0] == '\0')
        return tn_errf(err, errlen, TN_INVALID, "no audit log or no entry id");
    /* Who ran it and on which tenant are on the start line with the same id. */
    buf l = BUF_INIT;
    line_begin(&l, id);
    kv(&l, "user", "");
    kv(&l, "client", "");
    kv(&l, "action", "sql");
    kv(&l, "tenant", "");
    kv(&l, "detail", outcome);
    kv(&l, "result", "died");
    kv(&l, "req", req_id);
    kv(&l, "phase", "end");
    kv(&l, "by", "master");
    int rc = line_write(cfg->audit_log, &l, err, errlen);
    buf_free(&l);
    return rc;
}

/* ---- the page ----------------------------------------------------------------------------- */

/* The value of "key" in one of our own audit lines (flat, string values, our escaping). Every
 * '"' inside a value is escaped, so `"key":` found raw is a key. */
static const char *line_get(adm_req *a, const char *line, const char *key)
{
    char pat[40];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (p == NULL)
        return "";
    p += strlen(pat);
    if (*p != '"')
        return "";
    p++;
    buf v = BUF_INIT;
    for (; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            switch (*p) {
            case 'n': buf_putc(&v, '\n'); break;
            case 't': buf_putc(&v, '\t'); break;
            case 'r': buf_putc(&v, '\r'); break;
            case 'u': {
                /* Control characters and invalid UTF-8 (we escape nothing else as \u):
                 * shown as '?'. */
                buf_putc(&v, '?');
                for (int i = 0; i < 4 && p[1]; i++)
                    p++;
                break;
            }
            default: buf_putc(&v, *p); break;
            }
        } else {
            buf_putc(&v, *p);
        }
    }
    const char *s = tn_strdup(a->r, v.p ? v.p : "");
    buf_free(&v);
    return s ? s : "";
}

static void put_result(buf *o, const char *v)
{
    buf_puts(o, "<span class=\"result result-");
    buf_html(o, v);
    buf_puts(o, "\">");
    buf_html(o, v);
    buf_puts(o, "</span>");
}

/* The detail cell of a console entry: the text as logged, whitespace runs shown as one space
 * (the hash and length are of the exact text), the first AUDIT_SQL_PREFIX bytes and the rest
 * behind a <details>; then the outcome's detail. */
static void put_sql_detail(adm_req *a, const char *start, const char *end)
{
    buf *o = a->out;
    const char *text = line_get(a, start, "detail");
    buf s = BUF_INIT;
    squeeze(&s, text, strlen(text), (size_t)-1);
    const char *shown = s.p ? s.p : "";
    size_t head = utf8_valid_prefix(shown, s.len < AUDIT_SQL_PREFIX ? s.len : AUDIT_SQL_PREFIX);
    buf_puts(o, "<code class=\"audit-sql\">");
    buf_htmln(o, shown, head);
    buf_puts(o, "</code>");
    if (head < s.len) {
        buf_puts(o, "<details class=\"audit-more\"><summary>the whole text</summary><code>");
        buf_htmln(o, shown, s.len);
        buf_puts(o, "</code></details>");
    }
    buf_free(&s);
    buf_puts(o, "<div class=\"audit-meta\">");
    buf_html(o, line_get(a, start, "len"));
    buf_puts(o, " bytes");
    if (strcmp(line_get(a, start, "cut"), "yes") == 0)
        buf_puts(o, " (the log holds the first KiB, whitespace squeezed)");
    buf_puts(o, " · SHA-256 ");
    buf_html(o, line_get(a, start, "sha256"));
    buf_puts(o, "</div>");
    if (end != NULL) {
        const char *d = line_get(a, end, "detail");
        if (d[0]) {
            buf_puts(o, "<div class=\"audit-outcome\">");
            buf_html(o, d);
            buf_puts(o, "</div>");
        }
    }
}

int page_audit(adm_req *a)
{
    buf *o = a->out;
    page_begin(a, "Audit log", "audit", NULL);
    buf_puts(o, "<header class=\"page-head\"><h1>Audit log</h1><span class=\"count\">the most "
                "recent entries first</span></header>");
    int fd = open(adm.env.cfg->audit_log, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        buf_puts(o, "<p class=\"muted\">Nothing logged yet.</p>");
        page_end(a);
        return send_html(a, 200);
    }
    struct stat st;
    size_t want = AUDIT_PAGE_BYTES;
    off_t from = 0;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size > want)
        from = st.st_size - (off_t)want;
    char *text = tn_alloc(a->r, want + 1);
    ssize_t n = text ? pread(fd, text, want, from) : -1;
    close(fd);
    if (text == NULL)
        return send_message(a, 500, "Error", "out of memory");
    if (n < 0)
        n = 0;
    text[n] = '\0';
    char *start = text;
    if (from > 0) {   /* drop the partial first line */
        char *nl = strchr(text, '\n');
        start = nl ? nl + 1 : text + n;
    }
    /* Lines, oldest first, the newest AUDIT_PAGE_LINES of them. */
    const char *lines[AUDIT_PAGE_LINES];
    int nl = 0;
    for (char *p = start; *p;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = '\0';
        if (*p) {
            if (nl == AUDIT_PAGE_LINES) {
                memmove(lines, lines + 1, sizeof(lines) - sizeof(lines[0]));
                nl--;
            }
            lines[nl++] = p;
        }
        if (!e)
            break;
        p = e + 1;
    }
    /* Pair each console start with the first completion of its id after it; a completion so
     * paired is shown in its start's row, not on its own. */
    const char *ids[AUDIT_PAGE_LINES], *phases[AUDIT_PAGE_LINES];
    int end_of[AUDIT_PAGE_LINES];
    bool paired[AUDIT_PAGE_LINES];
    for (int i = 0; i < nl; i++) {
        ids[i] = line_get(a, lines[i], "id");
        phases[i] = line_get(a, lines[i], "phase");
        end_of[i] = -1;
        paired[i] = false;
    }
    for (int i = 0; i < nl; i++) {
        if (strcmp(phases[i], "start") != 0 || ids[i][0] == '\0')
            continue;
        for (int j = i + 1; j < nl; j++)
            if (!paired[j] && strcmp(phases[j], "end") == 0 && strcmp(ids[j], ids[i]) == 0) {
                end_of[i] = j;
                paired[j] = true;
                break;
            }
    }
    buf_puts(o, "<div class=\"table-wrap\"><table class=\"grid\" id=\"audit\"><thead><tr>"
                "<th>When</th><th>Who</th><th>From</th><th>Action</th><th>Tenant</th>"
                "<th>Detail</th><th>Result</th></tr></thead><tbody>");
    for (int i = nl - 1; i >= 0; i--) {
        if (paired[i])
            continue;
        bool sql = strcmp(phases[i], "start") == 0;
        const char *end = sql && end_of[i] >= 0 ? lines[end_of[i]] : NULL;
        static const char *const keys[] = {"time", "user", "client", "action", "tenant"};
        if (ids[i][0]) {
            buf_puts(o, "<tr id=\"audit-");
            buf_html(o, ids[i]);
            buf_puts(o, "\">");
        } else {
            buf_puts(o, "<tr>");   /* a line written before entries had ids */
        }
        for (size_t k = 0; k < TN_ARRAY_LEN(keys); k++) {
            buf_puts(o, "<td>");
            buf_html(o, line_get(a, lines[i], keys[k]));
            buf_puts(o, "</td>");
        }
        buf_puts(o, "<td class=\"mono detail\">");
        if (sql)
            put_sql_detail(a, lines[i], end);
        else
            buf_html(o, line_get(a, lines[i], "detail"));
        buf_puts(o, "</td><td>");
        /* No outcome yet: the statement runs (a dead worker's is written by the master). */
        put_result(o, sql ? (end ? line_get(a, end, "result") : "running")
                          : line_get(a, lines[i], "result"));
        buf_puts(o, "</td></tr>");
    }
    buf_puts(o, "</tbody></table></div>");
    page_end(a);
    return send_html(a, 200);
}
