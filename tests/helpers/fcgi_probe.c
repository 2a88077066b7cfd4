/*
 * fcgi_probe.c — a raw-socket FastCGI client that replays one conformance probe against a
 * running host and says whether the host behaved as OUR host must.
 *
 *   fcgi_probe [options] ADDRESS CASE
 *
 * ADDRESS is a unix socket path (anything with a '/', or "unix:PATH") or host:port /
 * [v6]:port. CASE is one of the names in the table at the bottom (`fcgi_probe -h` lists
 * them). The probe prints one line, "CASE: PASS key=value ..." or "CASE: FAIL ...", and
 * exits 0 when the host did what the right-hand side of the research's Appendix A asks
 * (research/fcgi-hosts.md, "Probe recipes"), 1 when it did not (each reason on stderr), 2 on
 * a usage error. The key=value pairs are measurements (milliseconds, statuses) that a test
 * script may assert on further.
 *
 * Why not libfcgi or cgi-fcgi: the cases need streams no well-behaved client sends (half
 * records, impossible lengths, a second BEGIN_REQUEST on a busy connection, ABORT_REQUEST at
 * a chosen moment), and libfcgi is the thing under suspicion. So records are encoded here by
 * hand: an 8-byte header {version 1, type, request id BE16, content length BE16, padding,
 * reserved}, then content and padding; name/value lengths are 1 byte below 128, else 4 bytes
 * big-endian with the top bit set.
 *
 * "Holding" cases (get-values, keep-conn-pin, linger, silent-connect, stalled-params) open
 * -n connections that misbehave and keep them open, then measure a second, well-behaved
 * client: it must be answered within -b ms. With -n equal to pm.max_children every worker
 * can be the target, which is how libfcgi's single-worker defects show in a pool.
 *
 * What the probe cannot see: whether a worker died. A host that refuses a stream and a
 * worker killed by it both close the connection, so for the huge-* cases exit 0 means only
 * "refused, not served"; the caller compares worker pids and the crash counter.
 *
 * Owns: FastCGI record encoding and decoding for tests, and the per-case verdicts.
 * Must not: link libfcgi or any project code (it must stay an independent client), block
 * without a deadline (every socket wait is a poll() bounded by the case's limit and the
 * global -t deadline, with SIGALRM as a last resort), or retry: a case runs once and the
 * first answer is the verdict.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#define PRINTF_LIKE(a, b) __attribute__((format(printf, a, b)))
#else
#define PRINTF_LIKE(a, b)
#endif

enum {
    T_BEGIN = 1, T_ABORT = 2, T_END = 3, T_PARAMS = 4, T_STDIN = 5, T_STDOUT = 6,
    T_STDERR = 7, T_DATA = 8, T_GET_VALUES = 9, T_GET_VALUES_RESULT = 10, T_UNKNOWN_TYPE = 11
};
enum { ROLE_RESPONDER = 1 };
enum { PS_COMPLETE = 0, PS_CANT_MPX = 1, PS_OVERLOADED = 2, PS_UNKNOWN_ROLE = 3 };

#define MAX_HOLDERS 16
#define MAX_CONTENT 65535
#define SLOT_PAUSE_MS 100   /* between holders, so each lands on whichever worker is free */

/* ---- options and verdict ---------------------------------------------------------------- */

static struct {
    const char *addr;
    const char *name;         /* the case */
    int64_t deadline;         /* -t: absolute, monotonic ms */
    int64_t bound;            /* -b: a well-behaved client must be answered within this */
    int64_t close_within;     /* -c: the host must close held connections within this; 0: off */
    int holders;              /* -n */
    const char *uri;          /* -u */
    const char *host;         /* -H */
    int want_status;          /* -s: 0 means any 2xx */
    bool raw_body;            /* -B: print the body instead of the summary (request) */
} opt;

static bool failed;
static char summary[2048];
static size_t summary_len;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Add "key=value" to the one-line result. */
static void note(const char *fmt, ...) PRINTF_LIKE(1, 2);
static void note(const char *fmt, ...)
{
    if (summary_len + 2 >= sizeof(summary))
        return;
    summary[summary_len++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(summary + summary_len, sizeof(summary) - summary_len, fmt, ap);
    va_end(ap);
    if (n > 0)
        summary_len += (size_t)n < sizeof(summary) - summary_len ? (size_t)n
                                                                : sizeof(summary) - summary_len - 1;
}

/* Record that the host did not do what it must; the reason goes to stderr. */
static void fail(const char *fmt, ...) PRINTF_LIKE(1, 2);
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fcgi_probe: %s: ", opt.name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failed = true;
}

/* The last resort when a bug here forgets a deadline: say so and stop. */
static void on_alarm(int signo)
{
    (void)signo;
    static const char msg[] = "fcgi_probe: the global deadline (-t) passed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(1);
}

static void pause_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Milliseconds left until `until`, never past the global deadline; 0 when passed. */
static int left_ms(int64_t until)
{
    if (until > opt.deadline)
        until = opt.deadline;
    int64_t l = until - now_ms();
    return l <= 0 ? 0 : l > 600000 ? 600000 : (int)l;
}

/* ---- an output buffer for building records ---------------------------------------------- */

typedef struct obuf {
    unsigned char *p;
    size_t len, cap;
} obuf;

static void ob_reserve(obuf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL) {
        fprintf(stderr, "fcgi_probe: out of memory\n");
        exit(2);
    }
    b->p = p;
    b->cap = cap;
}

static void ob_put(obuf *b, const void *d, size_t n)
{
    ob_reserve(b, n);
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void ob_free(obuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* One record: header, content, padding to a multiple of 8. */
static void put_record(obuf *b, int type, unsigned id, const void *content, size_t len)
{
    unsigned char pad = (unsigned char)((8 - len % 8) % 8);
    unsigned char h[8] = {1, (unsigned char)type, (unsigned char)(id >> 8), (unsigned char)id,
                          (unsigned char)(len >> 8), (unsigned char)len, pad, 0};
    ob_put(b, h, 8);
    ob_put(b, content, len);
    static const unsigned char zeros[8];
    ob_put(b, zeros, pad);
}

/* A whole stream: as many records as the data needs, then the empty record that ends it. */
static void put_stream(obuf *b, int type, unsigned id, const unsigned char *d, size_t len)
{
    while (len > 0) {
        size_t n = len > 65528 ? 65528 : len;
        put_record(b, type, id, d, n);
        d += n;
        len -= n;
    }
    put_record(b, type, id, NULL, 0);
}

static void put_begin(obuf *b, unsigned id, unsigned role, bool keep)
{
    unsigned char body[8] = {(unsigned char)(role >> 8), (unsigned char)role, keep ? 1 : 0};
    put_record(b, T_BEGIN, id, body, sizeof(body));
}

static void put_len(obuf *b, size_t n)
{
    if (n < 128) {
        unsigned char c = (unsigned char)n;
        ob_put(b, &c, 1);
    } else {
        unsigned char c[4] = {(unsigned char)((n >> 24) | 0x80), (unsigned char)(n >> 16),
                              (unsigned char)(n >> 8), (unsigned char)n};
        ob_put(b, c, 4);
    }
}

static void put_nv(obuf *b, const char *name, const char *value, size_t vlen)
{
    size_t nl = strlen(name);
    put_len(b, nl);
    put_len(b, vlen);
    ob_put(b, name, nl);
    ob_put(b, value, vlen);
}

static void put_nvs(obuf *b, const char *name, const char *value)
{
    put_nv(b, name, value, strlen(value));
}

/* The params nginx would send for METHOD URI to HOST (plus CONTENT_LENGTH when body_len). */
static void build_params(obuf *p, const char *method, const char *uri, const char *host,
                         size_t body_len)
{
    char script[512], query[512], num[32];
    const char *q = strchr(uri, '?');
    snprintf(script, sizeof(script), "%.*s", q ? (int)(q - uri) : (int)strlen(uri), uri);
    snprintf(query, sizeof(query), "%s", q ? q + 1 : "");
    put_nvs(p, "GATEWAY_INTERFACE", "CGI/1.1");
    put_nvs(p, "SERVER_SOFTWARE", "fcgi_probe");
    put_nvs(p, "REQUEST_METHOD", method);
    put_nvs(p, "REQUEST_URI", uri);
    put_nvs(p, "SCRIPT_NAME", script);
    put_nvs(p, "DOCUMENT_URI", script);
    put_nvs(p, "QUERY_STRING", query);
    put_nvs(p, "SERVER_PROTOCOL", "HTTP/1.1");
    put_nvs(p, "SERVER_NAME", host);
    put_nvs(p, "SERVER_ADDR", "127.0.0.1");
    put_nvs(p, "SERVER_PORT", "80");
    put_nvs(p, "REMOTE_ADDR", "127.0.0.1");
    put_nvs(p, "REMOTE_PORT", "40000");
    put_nvs(p, "HTTP_HOST", host);
    if (body_len > 0) {
        snprintf(num, sizeof(num), "%zu", body_len);
        put_nvs(p, "CONTENT_LENGTH", num);
        put_nvs(p, "CONTENT_TYPE", "application/octet-stream");
    }
}

/* A complete request: BEGIN, PARAMS (ended), STDIN (ended). `extra` params are appended. */
static void build_request(obuf *b, unsigned id, bool keep, const char *method, const char *uri,
                          const obuf *extra)
{
    obuf p = {0};
    build_params(&p, method, uri, opt.host, 0);
    if (extra != NULL)
        ob_put(&p, extra->p, extra->len);
    put_begin(b, id, ROLE_RESPONDER, keep);
    put_stream(b, T_PARAMS, id, p.p, p.len);
    put_stream(b, T_STDIN, id, NULL, 0);
    ob_free(&p);
}

/* ---- connections -------------------------------------------------------------------------- */

typedef struct conn {
    int fd;
    unsigned char in[2 * (8 + MAX_CONTENT + 255)];
    size_t len;
    bool eof;            /* the host closed (EOF or reset) */
    bool reset;
    int64_t opened_ms;
    int64_t eof_ms;      /* when EOF was first seen */
    size_t stray;        /* bytes drained while waiting for EOF */
} conn;

typedef struct record {
    int type;
    unsigned id;
    size_t len;
    unsigned char content[MAX_CONTENT + 1];
} record;

static int parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sl)
{
    memset(ss, 0, sizeof(*ss));
    const char *path = strncmp(addr, "unix:", 5) == 0 ? addr + 5 : strchr(addr, '/') ? addr : NULL;
    if (path != NULL) {
        struct sockaddr_un *su = (struct sockaddr_un *)ss;
        if (strlen(path) >= sizeof(su->sun_path))
            return -1;
        su->sun_family = AF_UNIX;
        memcpy(su->sun_path, path, strlen(path) + 1);
        *sl = (socklen_t)sizeof(*su);
        return 0;
    }
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || colon[1] == '\0')
        return -1;
    size_t hl = (size_t)(colon - addr);
    if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {
        addr++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || res == NULL)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sl = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Connect within the bound (SO_SNDTIMEO bounds connect() on unix and TCP sockets alike),
 * then switch to non-blocking: every later wait is a poll(). */
static conn *conn_open(void)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (parse_addr(opt.addr, &ss, &sl) < 0) {
        fprintf(stderr, "fcgi_probe: cannot parse the address '%s'\n", opt.addr);
        exit(2);
    }
    conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        fprintf(stderr, "fcgi_probe: out of memory\n");
        exit(2);
    }
    c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail("socket: %s", strerror(errno));
        free(c);
        return NULL;
    }
    int ms = left_ms(now_ms() + opt.bound + 1000);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (ms == 0)
        tv.tv_usec = 1000;
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(c->fd, (struct sockaddr *)&ss, sl) < 0) {
        fail("connect to %s: %s", opt.addr, strerror(errno));
        close(c->fd);
        free(c);
        return NULL;
    }
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    c->opened_ms = now_ms();
    return c;
}

static void conn_close(conn *c)
{
    if (c == NULL)
        return;
    close(c->fd);
    free(c);
}

/* Write all of d within `until`. 0, or -1 (timeout, or the host closed). */
static int send_all(conn *c, const void *d, size_t n, int64_t until)
{
    const unsigned char *p = d;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        struct pollfd pf = {.fd = c->fd, .events = POLLOUT};
        int l = left_ms(until);
        if (l == 0 || poll(&pf, 1, l) <= 0)
            return -1;
    }
    return 0;
}

static int send_ob(conn *c, const obuf *b, int64_t until)
{
    return send_all(c, b->p, b->len, until);
}

/* Read what is there (waiting up to `until`). >0 bytes, 0 EOF, -1 timeout, -2 error. */
static int fill(conn *c, int64_t until)
{
    if (c->eof)
        return 0;
    if (c->len == sizeof(c->in))
        return -2;
    for (;;) {
        ssize_t r = recv(c->fd, c->in + c->len, sizeof(c->in) - c->len, MSG_DONTWAIT);
        if (r > 0) {
            c->len += (size_t)r;
            return (int)r;
        }
        if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE))) {
            c->eof = true;
            c->reset = r < 0;
            c->eof_ms = now_ms();
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -2;
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        int l = left_ms(until);
        if (l == 0)
            return -1;
        int pr = poll(&pf, 1, l);
        if (pr == 0)
            return -1;
        if (pr < 0 && errno != EINTR)
            return -2;
    }
}

enum { RD_OK = 1, RD_EOF = 0, RD_TIMEOUT = -1, RD_ERROR = -2, RD_GARBLED = -3, RD_NOCONN = -4 };

/* The next whole record. RD_OK, RD_EOF (closed, possibly mid-record), RD_TIMEOUT, RD_ERROR,
 * RD_GARBLED (not FastCGI version 1). */
static int next_record(conn *c, record *rec, int64_t until)
{
    for (;;) {
        if (c->len >= 8) {
            if (c->in[0] != 1)
                return RD_GARBLED;
            size_t clen = (size_t)c->in[4] << 8 | c->in[5];
            size_t total = 8 + clen + c->in[6];
            if (c->len >= total) {
                rec->type = c->in[1];
                rec->id = (unsigned)c->in[2] << 8 | c->in[3];
                rec->len = clen;
                memcpy(rec->content, c->in + 8, clen);
                rec->content[clen] = '\0';
                memmove(c->in, c->in + total, c->len - total);
                c->len -= total;
                return RD_OK;
            }
        }
        int r = fill(c, until);
        if (r == 0)
            return RD_EOF;
        if (r < 0)
            return r == -1 ? RD_TIMEOUT : RD_ERROR;
    }
}

/* Has the host closed? Waits up to `until`, counting and discarding what arrives meanwhile.
 * A socket error counts as closed. */
static bool wait_closed(conn *c, int64_t until)
{
    for (;;) {
        c->stray += c->len;
        c->len = 0;
        if (c->eof)
            return true;
        int r = fill(c, until);
        if (r == -1)
            return false;
        if (r == -2) {
            c->eof = true;
            c->eof_ms = now_ms();
        }
    }
}

/* Closed already (no waiting)? */
static bool closed_now(conn *c)
{
    if (c->eof)
        return true;
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE))) {
        c->eof = true;
        c->eof_ms = now_ms();
        return true;
    }
    return false;
}

/* ---- responses ----------------------------------------------------------------------------- */

typedef struct response {
    obuf out;               /* STDOUT of our request id */
    size_t err_bytes;       /* STDERR of our request id */
    bool ended;
    uint32_t app_status;
    int proto_status;
    int other_end_id;       /* an END_REQUEST for another id (mpx), or -1 */
    int other_proto;
    int http_status;        /* from "Status:"; 200 when headers came without one; -1: none */
    const unsigned char *body;
    size_t body_len;
    int64_t ms;             /* from the call to the END_REQUEST */
    int rc;                 /* RD_OK when ended, else why not */
} response;

#define RESPONSE_INIT {.other_end_id = -1, .http_status = -1, .rc = RD_NOCONN}

static void parse_http(response *r)
{
    r->http_status = -1;
    r->body = NULL;
    r->body_len = 0;
    const unsigned char *p = r->out.p;
    size_t n = r->out.len;
    if (n == 0)
        return;
    size_t hend = 0, skip = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] == '\n' && p[i + 1] == '\n') {
            hend = i;
            skip = 2;
            break;
        }
        if (i + 3 < n && memcmp(p + i, "\r\n\r\n", 4) == 0) {
            hend = i;
            skip = 4;
            break;
        }
    }
    if (skip == 0)
        return;
    r->http_status = 200;
    for (size_t i = 0; i < hend;) {
        size_t e = i;
        while (e < hend && p[e] != '\n')
            e++;
        if (e - i > 7 && strncasecmp((const char *)p + i, "Status:", 7) == 0)
            r->http_status = atoi((const char *)p + i + 7);
        i = e + 1;
    }
    r->body = p + hend + skip;
    r->body_len = n - hend - skip;
}

/* Read the response to request `id` until its END_REQUEST (or EOF, timeout, garbage). */
static int read_response(conn *c, unsigned id, int64_t until, response *r)
{
    static record rec;
    int64_t t0 = now_ms();
    memset(r, 0, sizeof(*r));
    r->other_end_id = -1;
    r->http_status = -1;
    for (;;) {
        int rc = next_record(c, &rec, until);
        if (rc != RD_OK) {
            r->rc = rc;
            break;
        }
        if (rec.type == T_END && rec.len >= 8) {
            uint32_t app = (uint32_t)rec.content[0] << 24 | (uint32_t)rec.content[1] << 16 |
                           (uint32_t)rec.content[2] << 8 | rec.content[3];
            if (rec.id == id) {
                r->ended = true;
                r->app_status = app;
                r->proto_status = rec.content[4];
                r->rc = RD_OK;
                break;
            }
            r->other_end_id = (int)rec.id;
            r->other_proto = rec.content[4];
        } else if (rec.type == T_STDOUT && rec.id == id) {
            ob_put(&r->out, rec.content, rec.len);
        } else if (rec.type == T_STDERR && rec.id == id) {
            r->err_bytes += rec.len;
        }
    }
    r->ms = now_ms() - t0;
    parse_http(r);
    return r->rc;
}

static const char *rc_text(int rc)
{
    switch (rc) {
    case RD_OK: return "ok";
    case RD_EOF: return "the host closed the connection";
    case RD_TIMEOUT: return "no answer in time";
    case RD_ERROR: return "socket error";
    case RD_GARBLED: return "the host sent something that is not FastCGI";
    case RD_NOCONN: return "could not connect";
    default: return "?";
    }
}

/* Did `r` answer a request successfully (END_REQUEST complete, wanted HTTP status)? */
static bool served(const response *r)
{
    if (!r->ended || r->proto_status != PS_COMPLETE)
        return false;
    if (opt.want_status)
        return r->http_status == opt.want_status;
    return r->http_status >= 200 && r->http_status < 300;
}

/* A body excerpt for the one-line result: quoted, escaped, at most 120 bytes. */
static void note_body(const response *r)
{
    char b[512];
    size_t o = 0;
    b[o++] = '"';
    for (size_t i = 0; i < r->body_len && i < 120 && o + 6 < sizeof(b); i++) {
        unsigned char ch = r->body[i];
        if (ch == '\n') {
            b[o++] = '\\';
            b[o++] = 'n';
        } else if (ch == '"' || ch == '\\') {
            b[o++] = '\\';
            b[o++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            o += (size_t)snprintf(b + o, sizeof(b) - o, "\\x%02x", ch);
        } else {
            b[o++] = (char)ch;
        }
    }
    if (r->body_len > 120 && o + 4 < sizeof(b))
        b[o++] = '.', b[o++] = '.', b[o++] = '.';
    b[o++] = '"';
    b[o] = '\0';
    note("body=%s", b);
}

/* One plain request on a fresh connection. Returns its duration in ms (or -1 when it was not
 * answered within `limit` ms); *ok says whether it was served. */
static int64_t plain_request(const char *uri, int64_t limit, bool *ok, response *out)
{
    response tmp = RESPONSE_INIT;
    response *r = out ? out : &tmp;
    *ok = false;
    int64_t t0 = now_ms();
    conn *c = conn_open();
    if (c == NULL)
        return -1;
    obuf b = {0};
    build_request(&b, 1, false, "GET", uri, NULL);
    int64_t until = t0 + limit;
    int rc = send_ob(c, &b, until) == 0 ? read_response(c, 1, until, r) : RD_EOF;
    ob_free(&b);
    conn_close(c);
    int64_t ms = now_ms() - t0;
    *ok = rc == RD_OK && served(r);
    if (out == NULL)
        ob_free(&tmp.out);
    return rc == RD_TIMEOUT ? -1 : ms;
}

/* The well-behaved second client of the holding cases: must be served within -b. We wait a
 * few seconds longer than the bound so a failure reports how long it really took. */
static void second_client(void)
{
    bool ok;
    int64_t ms = plain_request("/", opt.bound + 4000, &ok, NULL);
    if (ms < 0) {
        note("other_ms=timeout");
        fail("a second client was not answered within %lld ms", (long long)(opt.bound + 4000));
        return;
    }
    note("other_ms=%lld", (long long)ms);
    if (!ok)
        fail("a second client was not served (the host closed or answered an error)");
    else if (ms > opt.bound)
        fail("a second client waited %lld ms (bound %lld ms): a held connection pinned the "
             "workers", (long long)ms, (long long)opt.bound);
}

/* Read whatever is there without waiting (counted as stray); notes EOF when it comes. */
static void drain_now(conn *c)
{
    while (!c->eof) {
        c->stray += c->len;
        c->len = 0;
        ssize_t r = recv(c->fd, c->in, sizeof(c->in), MSG_DONTWAIT);
        if (r > 0) {
            c->len = (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        c->eof = true;   /* EOF, reset or another error: the connection is gone */
        c->eof_ms = now_ms();
    }
}

/* Wait for the host to close each held connection within -c of its `since` (when -c is set),
 * watching all of them at once so each close is timed when it happens. Reports the slowest. */
static void expect_closed(conn **cs, int n, const int64_t *since, int64_t within, const char *why)
{
    if (within <= 0)
        return;
    for (;;) {
        struct pollfd pf[MAX_HOLDERS];
        int open = 0;
        int64_t until = 0;
        for (int i = 0; i < n; i++) {
            if (cs[i] == NULL)
                continue;
            drain_now(cs[i]);
            if (cs[i]->eof || now_ms() >= since[i] + within)
                continue;
            pf[open].fd = cs[i]->fd;
            pf[open].events = POLLIN;
            pf[open].revents = 0;
            open++;
            if (since[i] + within > until)
                until = since[i] + within;
        }
        int l = open ? left_ms(until) : 0;
        if (l == 0 || (poll(pf, (nfds_t)open, l) < 0 && errno != EINTR))
            break;
    }
    int64_t worst = 0;
    int late = 0;
    for (int i = 0; i < n; i++) {
        if (cs[i] == NULL)
            continue;
        int64_t ms = cs[i]->eof ? cs[i]->eof_ms - since[i] : INT64_MAX;
        if (ms > within)
            late++;
        else if (ms > worst)
            worst = ms;
    }
    if (late == 0) {
        note("closed_ms=%lld", (long long)worst);
    } else {
        note("closed_ms=never");
        fail("%d held connection(s) not closed within %lld ms (%s)", late, (long long)within, why);
    }
}

/* ---- the cases ------------------------------------------------------------------------------ */

/* request: one plain responder request; prints the HTTP status and the body. */
static void case_request(void)
{
    response r = RESPONSE_INIT;
    bool ok;
    int64_t ms = plain_request(opt.uri, opt.bound + 4000, &ok, &r);
    if (opt.raw_body && r.body != NULL)
        fwrite(r.body, 1, r.body_len, stdout);
    note("status=%d", r.http_status);
    note("ms=%lld", (long long)(ms < 0 ? r.ms : ms));
    if (!opt.raw_body)
        note_body(&r);
    if (r.rc == RD_NOCONN)
        ;   /* conn_open said why */
    else if (!r.ended)
        fail("no END_REQUEST: %s", rc_text(r.rc));
    else if (!ok)
        fail("not served: protocolStatus %d, HTTP status %d", r.proto_status, r.http_status);
    else if (ms < 0 || ms > opt.bound)
        fail("answered in %lld ms, over the bound of %lld ms", (long long)ms,
             (long long)opt.bound);
    ob_free(&r.out);
}

/* get-values: FCGI_GET_VALUES on fresh connections that then stay idle. The host must
 * answer promptly, with FCGI_MPXS_CONNS=0, and a held connection must not pin a worker. */
static void case_get_values(void)
{
    static record rec;
    conn *cs[MAX_HOLDERS] = {0};
    int64_t since[MAX_HOLDERS];
    int64_t worst = 0;
    bool values_noted = false;
    for (int i = 0; i < opt.holders; i++) {
        if (i > 0)
            pause_ms(SLOT_PAUSE_MS);
        cs[i] = conn_open();
        if (cs[i] == NULL)
            goto out;
        obuf nv = {0}, b = {0};
        put_nvs(&nv, "FCGI_MAX_CONNS", "");
        put_nvs(&nv, "FCGI_MAX_REQS", "");
        put_nvs(&nv, "FCGI_MPXS_CONNS", "");
        put_record(&b, T_GET_VALUES, 0, nv.p, nv.len);
        int64_t t0 = now_ms();
        int rc = send_ob(cs[i], &b, t0 + opt.bound) == 0 ? next_record(cs[i], &rec, t0 + opt.bound)
                                                         : RD_EOF;
        ob_free(&nv);
        ob_free(&b);
        since[i] = now_ms();
        if (since[i] - t0 > worst)
            worst = since[i] - t0;
        if (rc != RD_OK) {
            fail("connection %d: no FCGI_GET_VALUES_RESULT within %lld ms: %s", i + 1,
                 (long long)opt.bound, rc_text(rc));
            continue;
        }
        if (rec.type != T_GET_VALUES_RESULT || rec.id != 0) {
            fail("connection %d: expected FCGI_GET_VALUES_RESULT (10) for id 0, got type %d "
                 "id %u", i + 1, rec.type, rec.id);
            continue;
        }
        /* Parse name=value pairs. */
        const char *want[] = {"FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS"};
        bool seen[3] = {false, false, false};
        size_t k = 0;
        while (k < rec.len) {
            size_t l[2];
            for (int j = 0; j < 2; j++) {
                if (k >= rec.len) {
                    l[j] = 0;
                    continue;
                }
                if (rec.content[k] & 0x80) {
                    l[j] = k + 4 <= rec.len ? ((size_t)(rec.content[k] & 0x7f) << 24 |
                                              (size_t)rec.content[k + 1] << 16 |
                                              (size_t)rec.content[k + 2] << 8 | rec.content[k + 3])
                                           : rec.len;
                    k += 4;
                } else {
                    l[j] = rec.content[k++];
                }
            }
            if (k > rec.len || l[0] > rec.len - k || l[1] > rec.len - k - l[0]) {
                fail("connection %d: a malformed name-value pair in the result", i + 1);
                break;
            }
            const char *name = (const char *)rec.content + k;
            const char *val = name + l[0];
            for (int j = 0; j < 3; j++) {
                if (l[0] != strlen(want[j]) || memcmp(name, want[j], l[0]) != 0)
                    continue;
                seen[j] = true;
                char v[32];
                snprintf(v, sizeof(v), "%.*s", (int)(l[1] < 31 ? l[1] : 31), val);
                if (!values_noted)
                    note("%s=%s", want[j], v);
                char *end;
                long n = strtol(v, &end, 10);
                if (*v == '\0' || *end != '\0')
                    fail("%s is not a number: '%s'", want[j], v);
                else if (j == 2 && n != 0)
                    fail("FCGI_MPXS_CONNS=%ld, but the host does not multiplex", n);
                else if (j < 2 && n < 1)
                    fail("%s=%ld: must be at least 1", want[j], n);
            }
            k += l[0] + l[1];
        }
        values_noted = true;
        for (int j = 0; j < 3; j++)
            if (!seen[j])
                fail("the result omits %s", want[j]);
    }
    note("reply_ms=%lld", (long long)worst);
    pause_ms(SLOT_PAUSE_MS);
    second_client();
    expect_closed(cs, opt.holders, since, opt.close_within, "an idle connection after "
                  "FCGI_GET_VALUES");
out:
    for (int i = 0; i < opt.holders; i++)
        conn_close(cs[i]);
}

/* keep-conn-pin: requests with FCGI_KEEP_CONN (two in a row on each connection, which must
 * both be served), then the connections stay idle. A second client must be served
 * meanwhile; each held connection must then either serve another request or have been
 * released (closed); with -c, an idle kept connection must be closed within that time. */
static void case_keep_conn_pin(void)
{
    conn *cs[MAX_HOLDERS] = {0};
    int64_t since[MAX_HOLDERS];
    int reused = 0, released = 0;
    for (int i = 0; i < opt.holders; i++) {
        if (i > 0)
            pause_ms(SLOT_PAUSE_MS);
        cs[i] = conn_open();
        if (cs[i] == NULL)
            goto out;
        for (unsigned k = 1; k <= 2; k++) {
            obuf b = {0};
            build_request(&b, k, true, "GET", "/", NULL);
            response r = RESPONSE_INIT;
            int64_t until = now_ms() + opt.bound;
            int rc = send_ob(cs[i], &b, until) == 0 ? read_response(cs[i], k, until, &r) : RD_EOF;
            ob_free(&b);
            ob_free(&r.out);
            if (rc != RD_OK || !served(&r)) {
                fail("connection %d: kept request %u of 2 was not served: %s", i + 1, k,
                     rc == RD_OK ? "bad status" : rc_text(rc));
                goto out;
            }
        }
    }
    note("kept=%d", opt.holders);
    pause_ms(SLOT_PAUSE_MS);
    second_client();
    /* Each held connection: a second request on it, unless the host released it. */
    for (int i = 0; i < opt.holders; i++) {
        if (closed_now(cs[i])) {
            released++;
            since[i] = now_ms();
            continue;
        }
        obuf b = {0};
        build_request(&b, 1, true, "GET", "/", NULL);
        response r = RESPONSE_INIT;
        int64_t until = now_ms() + opt.bound;
        int rc = send_ob(cs[i], &b, until) == 0 ? read_response(cs[i], 1, until, &r) : RD_EOF;
        ob_free(&b);
        since[i] = now_ms();
        if (rc == RD_OK && served(&r))
            reused++;
        else if (rc == RD_EOF && r.out.len == 0)
            released++;   /* closed before our request was read: a release that raced us */
        else
            fail("connection %d: a second request on the kept connection: %s", i + 1,
                 rc == RD_OK ? "not served" : rc_text(rc));
        ob_free(&r.out);
    }
    note("reused=%d released=%d", reused, released);
    expect_closed(cs, opt.holders, since, opt.close_within, "an idle kept connection must "
                  "close after keepalive_timeout");
out:
    for (int i = 0; i < opt.holders; i++)
        conn_close(cs[i]);
}

/* partial-beside-slow (two workers, keepalive_timeout on): a connection whose request is only
 * partly there when its worker starts a slow request on another connection is passed, with
 * its first-byte time, to the worker that becomes idle, and the rest of its request is then
 * served at once, not after the slow one. The slow request on c0 keeps one worker busy, so
 * that c2 (half a request) and c1 (the slow request beside it) both land on the other; when
 * c0's request ends, that worker is idle while c1's runs. */
static void case_partial_beside_slow(void)
{
    conn *c0 = NULL, *c1 = NULL, *c2 = NULL;
    obuf b0 = {0}, b1 = {0}, b2 = {0};
    response r0 = RESPONSE_INIT, r1 = RESPONSE_INIT, r2 = RESPONSE_INIT;
    int64_t until = now_ms() + opt.bound + 8000;
    build_request(&b0, 1, true, "GET", "/sleep?ms=600", NULL);
    build_request(&b1, 1, true, "GET", "/sleep?ms=1700", NULL);
    build_request(&b2, 1, true, "GET", "/", NULL);
    size_t half = b2.len / 2;
    int rc;
    if ((c0 = conn_open()) == NULL || send_ob(c0, &b0, until) != 0)
        goto not_sent;
    pause_ms(SLOT_PAUSE_MS);
    if ((c2 = conn_open()) == NULL || send_all(c2, b2.p, half, until) != 0)
        goto not_sent;
    pause_ms(SLOT_PAUSE_MS);
    if ((c1 = conn_open()) == NULL || send_ob(c1, &b1, until) != 0)
        goto not_sent;
    rc = read_response(c0, 1, until, &r0);
    if (rc != RD_OK || !served(&r0)) {
        fail("the first slow request was not served: %s", rc_text(rc));
        goto out;
    }
    pause_ms(150);   /* the master sees the idle worker and asks the busy one to pass c2 */
    int64_t t_rest = now_ms();
    if (send_all(c2, b2.p + half, b2.len - half, until) != 0) {
        fail("could not send the rest of the partial request");
        goto out;
    }
    rc = read_response(c2, 1, until, &r2);
    int64_t done2 = now_ms();
    note("partial_ms=%lld", (long long)(done2 - t_rest));
    if (rc != RD_OK || !served(&r2)) {
        fail("the partial request was not served: %s", rc_text(rc));
        goto out;
    }
    rc = read_response(c1, 1, until, &r1);
    if (rc != RD_OK || !served(&r1)) {
        fail("the slow request beside it was not served: %s", rc_text(rc));
        goto out;
    }
    /* c1's response was read after c2's: it was there already if c2 waited for it */
    if (done2 - t_rest > opt.bound)
        fail("the rest of a partial request waited %lld ms (bound %lld): it was left behind "
             "the slow request on its worker", (long long)(done2 - t_rest),
             (long long)opt.bound);
    goto out;
not_sent:
    fail("could not open the three connections and send their requests");
out:
    ob_free(&b0);
    ob_free(&b1);
    ob_free(&b2);
    ob_free(&r0.out);
    ob_free(&r1.out);
    ob_free(&r2.out);
    conn_close(c0);
    conn_close(c1);
    conn_close(c2);
}

/* serve-order: one worker serves the requests waiting on its kept connections in the order
 * they came. Needs pm.max_children = 1 (every connection on one worker) and the hello app's
 * test routes. Three kept connections are served once each (order-a, -b, -c), a slow request
 * then holds the worker, and the next requests are written on c, b and a, 50 ms apart. All
 * must be answered; the caller reads the order they were served in from the access log (c,
 * b, a: the order they came, not the order the connections were last used). */
static void case_serve_order(void)
{
    static const char *const hosts[3] = {"order-a.example", "order-b.example", "order-c.example"};
    conn *k[3] = {NULL, NULL, NULL}, *w = NULL;
    obuf req[3] = {{0}}, slow = {0};
    response r = RESPONSE_INIT;
    int64_t until = now_ms() + 8000;
    const char *host = opt.host;
    int rc;
    for (int i = 0; i < 3; i++) {
        opt.host = hosts[i];
        build_request(&req[i], 1, true, "GET", "/", NULL);
    }
    opt.host = host;
    build_request(&slow, 1, false, "GET", "/sleep?ms=500", NULL);
    for (int i = 0; i < 3; i++) {
        if ((k[i] = conn_open()) == NULL || send_ob(k[i], &req[i], until) != 0)
            goto not_sent;
        rc = read_response(k[i], 1, until, &r);
        ob_free(&r.out);
        if (rc != RD_OK || !served(&r)) {
            fail("the first request on connection %d was not served: %s", i, rc_text(rc));
            goto out;
        }
    }
    if ((w = conn_open()) == NULL || send_ob(w, &slow, until) != 0)
        goto not_sent;
    pause_ms(150);   /* the slow request runs: the next ones wait on their connections */
    for (int i = 2; i >= 0; i--) {
        if (send_ob(k[i], &req[i], until) != 0)
            goto not_sent;
        pause_ms(50);
    }
    rc = read_response(w, 1, until, &r);
    ob_free(&r.out);
    if (rc != RD_OK || !served(&r)) {
        fail("the slow request was not served: %s", rc_text(rc));
        goto out;
    }
    for (int i = 2; i >= 0; i--) {
        rc = read_response(k[i], 1, until, &r);
        ob_free(&r.out);
        if (rc != RD_OK || !served(&r)) {
            fail("the second request on connection %d was not served: %s", i, rc_text(rc));
            goto out;
        }
    }
    goto out;
not_sent:
    fail("could not open the connections and send their requests");
out:
    for (int i = 0; i < 3; i++) {
        ob_free(&req[i]);
        conn_close(k[i]);
    }
    ob_free(&slow);
    conn_close(w);
}

/* linger: requests without FCGI_KEEP_CONN whose clients do not close after END_REQUEST. The
 * host must close its side promptly (-c, default -b) and serve a second client meanwhile. */
static void case_linger(void)
{
    conn *cs[MAX_HOLDERS] = {0};
    int64_t since[MAX_HOLDERS];
    int64_t close_within = opt.close_within > 0 ? opt.close_within : opt.bound;
    for (int i = 0; i < opt.holders; i++) {
        if (i > 0)
            pause_ms(SLOT_PAUSE_MS);
        cs[i] = conn_open();
        if (cs[i] == NULL)
            goto out;
        obuf b = {0};
        build_request(&b, 1, false, "GET", "/", NULL);
        response r = RESPONSE_INIT;
        int64_t until = now_ms() + opt.bound;
        int rc = send_ob(cs[i], &b, until) == 0 ? read_response(cs[i], 1, until, &r) : RD_EOF;
        ob_free(&b);
        ob_free(&r.out);
        since[i] = now_ms();
        if (rc != RD_OK || !served(&r)) {
            fail("connection %d: the request was not served: %s", i + 1, rc_text(rc));
            goto out;
        }
        /* Time the host's close as it happens (ours stays open); judged below. */
        (void)wait_closed(cs[i], since[i] + close_within);
    }
    second_client();
    expect_closed(cs, opt.holders, since, close_within, "the host must close a finished "
                  "non-keep connection");
out:
    for (int i = 0; i < opt.holders; i++)
        conn_close(cs[i]);
}

/* silent-connect: connections that send nothing. A second client must be served meanwhile;
 * with -c the host must close the silent ones within that time. */
static void case_silent_connect(void)
{
    conn *cs[MAX_HOLDERS] = {0};
    int64_t since[MAX_HOLDERS];
    for (int i = 0; i < opt.holders; i++) {
        if (i > 0)
            pause_ms(SLOT_PAUSE_MS);
        cs[i] = conn_open();
        if (cs[i] == NULL)
            goto out;
        since[i] = cs[i]->opened_ms;
    }
    pause_ms(SLOT_PAUSE_MS);
    second_client();
    expect_closed(cs, opt.holders, since, opt.close_within, "a silent connection must be "
                  "closed after a bounded time");
out:
    for (int i = 0; i < opt.holders; i++)
        conn_close(cs[i]);
}

/* unknown-role: BEGIN_REQUEST with role 7 (and the rest of a request). The host must answer
 * END_REQUEST{FCGI_UNKNOWN_ROLE} for that id, and send no output for it. */
static void case_unknown_role(void)
{
    conn *c = conn_open();
    if (c == NULL)
        return;
    obuf p = {0}, b = {0};
    build_params(&p, "GET", "/", opt.host, 0);
    put_begin(&b, 1, 7, false);
    put_stream(&b, T_PARAMS, 1, p.p, p.len);
    put_stream(&b, T_STDIN, 1, NULL, 0);
    response r = RESPONSE_INIT;
    int64_t until = now_ms() + opt.bound;
    int rc = send_ob(c, &b, until) == 0 ? read_response(c, 1, until, &r) : RD_EOF;
    note("ms=%lld", (long long)r.ms);
    if (rc != RD_OK) {
        note("proto_status=none");
        fail("no END_REQUEST for a role-7 request: %s", rc_text(rc));
    } else {
        note("proto_status=%d", r.proto_status);
        if (r.proto_status != PS_UNKNOWN_ROLE)
            fail("END_REQUEST has protocolStatus %d, want FCGI_UNKNOWN_ROLE (3)",
                 r.proto_status);
        if (r.out.len > 0)
            fail("the host ran a role-7 request (%zu bytes of STDOUT)", r.out.len);
    }
    ob_free(&p);
    ob_free(&b);
    ob_free(&r.out);
    conn_close(c);
}

/* mpx: BEGIN id 1 (keep), BEGIN id 2, then the rest of id 1. The host must refuse id 2 with
 * END_REQUEST{FCGI_CANT_MPX_CONN} and serve id 1. */
static void case_mpx(void)
{
    conn *c = conn_open();
    if (c == NULL)
        return;
    obuf p = {0}, b = {0};
    build_params(&p, "GET", "/", opt.host, 0);
    put_begin(&b, 1, ROLE_RESPONDER, true);
    put_begin(&b, 2, ROLE_RESPONDER, true);
    put_stream(&b, T_PARAMS, 1, p.p, p.len);
    put_stream(&b, T_STDIN, 1, NULL, 0);
    response r = RESPONSE_INIT;
    int64_t until = now_ms() + opt.bound;
    int rc = send_ob(c, &b, until) == 0 ? read_response(c, 1, until, &r) : RD_EOF;
    /* END_REQUEST for id 2 may come after id 1's answer. */
    if (rc == RD_OK && r.other_end_id < 0) {
        static record rec;
        while (next_record(c, &rec, until) == RD_OK) {
            if (rec.type == T_END && rec.len >= 8 && rec.id == 2) {
                r.other_end_id = 2;
                r.other_proto = rec.content[4];
                break;
            }
        }
    }
    note("id1_status=%d", r.http_status);
    if (r.other_end_id == 2)
        note("id2_proto_status=%d", r.other_proto);
    else
        note("id2_proto_status=none");
    if (rc != RD_OK || !served(&r))
        fail("request id 1 was not served: %s", rc == RD_OK ? "bad status" : rc_text(rc));
    if (r.other_end_id != 2)
        fail("no END_REQUEST for the second request id on a busy connection");
    else if (r.other_proto != PS_CANT_MPX)
        fail("END_REQUEST for id 2 has protocolStatus %d, want FCGI_CANT_MPX_CONN (1)",
             r.other_proto);
    ob_free(&p);
    ob_free(&b);
    ob_free(&r.out);
    conn_close(c);
}

/* abort-mid-stdin: a POST whose body stops halfway, then ABORT_REQUEST. The host must end
 * the request promptly with END_REQUEST (not wait for the rest of the body until a timeout). */
static void case_abort_mid_stdin(void)
{
    conn *c = conn_open();
    if (c == NULL)
        return;
    enum { DECLARED = 65536, SENT = 1000 };
    static unsigned char part[SENT];
    memset(part, 'a', sizeof(part));
    obuf p = {0}, b = {0}, a = {0};
    build_params(&p, "POST", opt.uri ? opt.uri : "/echo", opt.host, DECLARED);
    put_begin(&b, 1, ROLE_RESPONDER, false);
    put_stream(&b, T_PARAMS, 1, p.p, p.len);
    put_record(&b, T_STDIN, 1, part, sizeof(part));
    put_record(&a, T_ABORT, 1, NULL, 0);
    int64_t until = now_ms() + opt.bound;
    response r = RESPONSE_INIT;
    int rc = RD_EOF;
    if (send_ob(c, &b, until) == 0) {
        pause_ms(SLOT_PAUSE_MS);   /* the app is now waiting for the rest of the body */
        int64_t t_abort = now_ms();
        if (send_ob(c, &a, t_abort + opt.bound) == 0)
            rc = read_response(c, 1, t_abort + opt.bound, &r);
        note("end_ms=%lld", (long long)(now_ms() - t_abort));
    }
    note("status=%d", r.http_status);
    if (rc != RD_OK)
        fail("no END_REQUEST within %lld ms of ABORT_REQUEST: %s", (long long)opt.bound,
             rc_text(rc));
    else if (r.http_status >= 200 && r.http_status < 300 && r.body_len == DECLARED)
        fail("the host answered the aborted request as if the whole body had arrived");
    ob_free(&p);
    ob_free(&b);
    ob_free(&a);
    ob_free(&r.out);
    conn_close(c);
}

/* abort-after-stdin: a complete keep-conn request (by default hello's /sleep?ms=400), and
 * ABORT_REQUEST while it runs. The host must send END_REQUEST for it (finishing it or cutting
 * it short), and the connection must stay usable: an ABORT that arrives as the request ends
 * is a record for an inactive request id, which the spec (3.3) says to ignore. */
static void case_abort_after_stdin(void)
{
    conn *c = conn_open();
    if (c == NULL)
        return;
    const char *uri = opt.uri ? opt.uri : "/sleep?ms=400";
    obuf b = {0}, a = {0};
    build_request(&b, 1, true, "GET", uri, NULL);
    put_record(&a, T_ABORT, 1, NULL, 0);
    response r = RESPONSE_INIT;
    int rc = RD_EOF;
    int64_t until = now_ms() + opt.bound + 5000;
    if (send_ob(c, &b, until) == 0) {
        pause_ms(SLOT_PAUSE_MS);
        int64_t t_abort = now_ms();
        if (send_ob(c, &a, until) == 0)
            rc = read_response(c, 1, until, &r);
        note("end_ms=%lld", (long long)(now_ms() - t_abort));
    }
    note("status=%d", r.http_status);
    ob_free(&r.out);
    if (rc != RD_OK) {
        fail("no END_REQUEST after ABORT_REQUEST: %s", rc_text(rc));
        goto out;
    }
    /* The same connection, a new request. */
    obuf b2 = {0};
    build_request(&b2, 1, true, "GET", "/", NULL);
    until = now_ms() + opt.bound;
    rc = send_ob(c, &b2, until) == 0 ? read_response(c, 1, until, &r) : RD_EOF;
    ob_free(&b2);
    note("reuse=%s", rc == RD_OK && served(&r) ? "served" : rc == RD_EOF ? "closed" : "failed");
    if (rc != RD_OK || !served(&r))
        fail("the next request on the kept connection after ABORT_REQUEST was not served (%s): "
             "a record for a finished request id must be ignored, not treated as an error",
             rc_text(rc));
    ob_free(&r.out);
out:
    ob_free(&b);
    ob_free(&a);
    conn_close(c);
}

/* unread-body: a keep-conn POST of 64 KB to a URI whose handler does not read the body (by
 * default "/", which hello answers without reading), then a second request on the same
 * connection. The rest of the first request's STDIN belongs to an inactive request id once
 * END_REQUEST is sent; the spec (3.3) says to ignore it, so the second request must be served. */
static void case_unread_body(void)
{
    enum { BODY = 65536 };
    static unsigned char body[BODY];
    memset(body, 'b', sizeof(body));
    conn *c = conn_open();
    if (c == NULL)
        return;
    obuf p = {0}, b = {0}, b2 = {0};
    build_params(&p, "POST", opt.uri ? opt.uri : "/", opt.host, BODY);
    put_begin(&b, 1, ROLE_RESPONDER, true);
    put_stream(&b, T_PARAMS, 1, p.p, p.len);
    put_stream(&b, T_STDIN, 1, body, BODY);
    response r = RESPONSE_INIT;
    int64_t until = now_ms() + opt.bound;
    int rc = send_ob(c, &b, until) == 0 ? read_response(c, 1, until, &r) : RD_EOF;
    note("status=%d", r.http_status);
    ob_free(&r.out);
    if (rc != RD_OK || !served(&r)) {
        fail("the POST was not served: %s", rc == RD_OK ? "bad status" : rc_text(rc));
        goto out;
    }
    build_request(&b2, 1, true, "GET", "/", NULL);
    until = now_ms() + opt.bound;
    rc = send_ob(c, &b2, until) == 0 ? read_response(c, 1, until, &r) : RD_EOF;
    note("reuse=%s", rc == RD_OK && served(&r) ? "served" : rc == RD_EOF ? "closed" : "failed");
    if (rc != RD_OK || !served(&r))
        fail("the next request on the kept connection was not served (%s): the unread rest of "
             "a finished request's body must be ignored, not treated as an error", rc_text(rc));
    ob_free(&r.out);
out:
    ob_free(&p);
    ob_free(&b);
    ob_free(&b2);
    conn_close(c);
}

/* big-param: a 100 KB parameter value, which spans several PARAMS records. Must be served. */
static void case_big_param(void)
{
    enum { BIG = 100 * 1024 };
    char *v = malloc(BIG);
    if (v == NULL)
        exit(2);
    memset(v, 'x', BIG);
    obuf extra = {0}, b = {0};
    put_nv(&extra, "HTTP_X_BIG", v, BIG);
    free(v);
    build_request(&b, 1, false, "GET", opt.uri ? opt.uri : "/", &extra);
    conn *c = conn_open();
    if (c != NULL) {
        response r = RESPONSE_INIT;
        int64_t until = now_ms() + opt.bound;
        int rc = send_ob(c, &b, until) == 0 ? read_response(c, 1, until, &r) : RD_EOF;
        note("status=%d ms=%lld", r.http_status, (long long)r.ms);
        if (rc != RD_OK || !served(&r))
            fail("a request with a 100 KB parameter was not served: %s",
                 rc == RD_OK ? "bad status" : rc_text(rc));
        ob_free(&r.out);
        conn_close(c);
    }
    ob_free(&extra);
    ob_free(&b);
}

/* Send `first`, optionally wait and send `second`, then require that the host refuses: it
 * closes the connection within -b without having served anything. */
static void expect_refused(const obuf *first, const obuf *second, int64_t gap_ms)
{
    conn *c = conn_open();
    if (c == NULL)
        return;
    int64_t until = now_ms() + opt.bound + gap_ms;
    bool sent = send_ob(c, first, until) == 0;
    if (sent && second != NULL) {
        pause_ms(gap_ms);
        sent = send_ob(c, second, until) == 0;
    }
    int64_t t0 = now_ms();
    response r = RESPONSE_INIT;
    int rc = read_response(c, 1, t0 + opt.bound, &r);
    if (rc == RD_OK)   /* answered: whatever it said, the host must then close */
        rc = wait_closed(c, t0 + opt.bound) ? RD_EOF : RD_TIMEOUT;
    note("closed_ms=%lld", rc == RD_EOF ? (long long)(now_ms() - t0) : -1LL);
    if (r.ended)
        note("proto_status=%d status=%d", r.proto_status, r.http_status);
    if (rc == RD_TIMEOUT)
        fail("the host neither refused nor closed within %lld ms%s", (long long)opt.bound,
             sent ? "" : " (and stopped reading)");
    else if (r.http_status >= 200 && r.http_status < 300)
        fail("the host served a request it must refuse (HTTP %d)", r.http_status);
    ob_free(&r.out);
    conn_close(c);
}

static const unsigned char huge_lengths[8] = {0xFF, 0xFF, 0xFF, 0xF0, 0x80, 0x00, 0x00, 0x0E};

/* huge-declared-len: PARAMS declaring nameLen 0x7FFFFFF0 and valueLen 0x0E (the sum
 * overflows an int in libfcgi's ReadParams). The host must refuse it before libfcgi sees it. */
static void case_huge_declared_len(void)
{
    obuf b = {0};
    put_begin(&b, 1, ROLE_RESPONDER, false);
    put_record(&b, T_PARAMS, 1, huge_lengths, sizeof(huge_lengths));
    expect_refused(&b, NULL, 0);
    ob_free(&b);
}

/* huge-split: the same lengths, the name length itself split across two PARAMS records
 * sent 150 ms apart (so the host sees the first alone). */
static void case_huge_split(void)
{
    obuf b1 = {0}, b2 = {0};
    put_begin(&b1, 1, ROLE_RESPONDER, false);
    put_record(&b1, T_PARAMS, 1, huge_lengths, 2);
    put_record(&b2, T_PARAMS, 1, huge_lengths + 2, sizeof(huge_lengths) - 2);
    expect_refused(&b1, &b2, 150);
    ob_free(&b1);
    ob_free(&b2);
}

/* huge-late: the same lengths after 17 KB of valid parameters (past what a host may inspect
 * with one small peek). The host must still refuse. */
static void case_huge_late(void)
{
    enum { PAD = 17000 };
    char *v = malloc(PAD);
    if (v == NULL)
        exit(2);
    memset(v, 'p', PAD);
    obuf p = {0}, b = {0};
    put_nv(&p, "HTTP_X_PAD", v, PAD);
    free(v);
    put_begin(&b, 1, ROLE_RESPONDER, false);
    put_record(&b, T_PARAMS, 1, p.p, p.len);
    put_record(&b, T_PARAMS, 1, huge_lengths, sizeof(huge_lengths));
    expect_refused(&b, NULL, 0);
    ob_free(&p);
    ob_free(&b);
}

/* huge-interleaved: BEGIN id 1, BEGIN id 2 (a multiplexing attempt), then PARAMS id 1 with the
 * same lengths. The host must still refuse id 1 (id 2 may get CANT_MPX_CONN). */
static void case_huge_interleaved(void)
{
    obuf b = {0};
    put_begin(&b, 1, ROLE_RESPONDER, false);
    put_begin(&b, 2, ROLE_RESPONDER, false);
    put_record(&b, T_PARAMS, 1, huge_lengths, sizeof(huge_lengths));
    expect_refused(&b, NULL, 0);
    ob_free(&b);
}

/* stalled-params: BEGIN, then a PARAMS record of which only part arrives, then silence. The
 * host must close within -c (request_timeout plus slack) and serve a second client meanwhile. */
static void case_stalled_params(void)
{
    conn *cs[MAX_HOLDERS] = {0};
    int64_t since[MAX_HOLDERS];
    obuf p = {0}, b = {0};
    build_params(&p, "GET", "/", opt.host, 0);
    put_begin(&b, 1, ROLE_RESPONDER, false);
    put_record(&b, T_PARAMS, 1, p.p, p.len);
    size_t half = 8 + 8 + p.len / 2;   /* BEGIN whole, PARAMS header, half the content */
    for (int i = 0; i < opt.holders; i++) {
        if (i > 0)
            pause_ms(SLOT_PAUSE_MS);
        cs[i] = conn_open();
        if (cs[i] == NULL)
            goto out;
        if (send_all(cs[i], b.p, half, now_ms() + opt.bound) < 0) {
            fail("connection %d: could not send the partial record", i + 1);
            goto out;
        }
        since[i] = now_ms();
    }
    pause_ms(SLOT_PAUSE_MS);
    second_client();
    expect_closed(cs, opt.holders, since, opt.close_within, "a stalled request must be closed "
                  "within request_timeout");
out:
    for (int i = 0; i < opt.holders; i++)
        conn_close(cs[i]);
    ob_free(&p);
    ob_free(&b);
}

/* garbage: an HTTP request on the FastCGI socket. The host must close within -b. */
static void case_garbage(void)
{
    conn *c = conn_open();
    if (c == NULL)
        return;
    static const char req[] = "GET / HTTP/1.1\r\nHost: probe.example\r\nConnection: close\r\n\r\n";
    int64_t t0 = now_ms();
    if (send_all(c, req, sizeof(req) - 1, t0 + opt.bound) < 0 && !closed_now(c))
        fail("could not send");
    bool closed = wait_closed(c, t0 + opt.bound);
    note("closed_ms=%lld bytes_back=%zu", closed ? (long long)(c->eof_ms - t0) : -1LL, c->stray);
    if (!closed)
        fail("the host did not close a non-FastCGI stream within %lld ms", (long long)opt.bound);
    conn_close(c);
}

/* ---- main ------------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    void (*run)(void);
    const char *what;
} cases[] = {
    {"request", case_request, "a plain responder request (-u, -H, -s, -B)"},
    {"get-values", case_get_values, "FCGI_GET_VALUES answered promptly; held: no pinning"},
    {"keep-conn-pin", case_keep_conn_pin, "idle FCGI_KEEP_CONN connections do not pin workers"},
    {"partial-beside-slow", case_partial_beside_slow,
     "half a request on a worker that starts a slow one: passed on"},
    {"serve-order", case_serve_order,
     "requests waiting on one worker's kept connections served in the order they came"},
    {"linger", case_linger, "a client that does not close after END_REQUEST"},
    {"silent-connect", case_silent_connect, "connections that send nothing"},
    {"unknown-role", case_unknown_role, "role 7 gets END_REQUEST{FCGI_UNKNOWN_ROLE}"},
    {"mpx", case_mpx, "a second BEGIN_REQUEST on a busy connection: CANT_MPX_CONN"},
    {"abort-mid-stdin", case_abort_mid_stdin, "ABORT_REQUEST while the body is read"},
    {"abort-after-stdin", case_abort_after_stdin, "ABORT_REQUEST while the request runs"},
    {"unread-body", case_unread_body, "a kept connection after a body the app did not read"},
    {"big-param", case_big_param, "a 100 KB parameter across PARAMS records"},
    {"huge-declared-len", case_huge_declared_len, "nameLen 0x7FFFFFF0 + valueLen 0x0E refused"},
    {"huge-split", case_huge_split, "the same, split across two PARAMS records"},
    {"huge-late", case_huge_late, "the same after 17 KB of valid params"},
    {"huge-interleaved", case_huge_interleaved, "the same after a second BEGIN_REQUEST"},
    {"stalled-params", case_stalled_params, "half a PARAMS record, then silence"},
    {"garbage", case_garbage, "an HTTP request sent to the FastCGI socket"},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fcgi_probe [-t SEC] [-b MS] [-c MS] [-n N] [-u URI] [-H HOST] [-s CODE]\n"
            "                  [-B] ADDRESS CASE\n"
            "  ADDRESS  unix socket path (or unix:PATH), host:port or [v6]:port\n"
            "  -t SEC   global deadline for the whole run (default 30)\n"
            "  -b MS    a well-behaved client must be answered within this (default 1000)\n"
            "  -c MS    held connections must be closed by the host within this (default: not\n"
            "           checked, except linger: -b)\n"
            "  -n N     connections a holding case opens (default 1, at most %d)\n"
            "  -u URI   request URI (request, big-param, abort-*, unread-body)\n"
            "  -H HOST  the Host the requests name (default probe.example)\n"
            "  -s CODE  the HTTP status request must get (default: any 2xx)\n"
            "  -B       request: print the body on stdout instead of the result line\n"
            "cases:\n", MAX_HOLDERS);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        fprintf(f, "  %-18s %s\n", cases[i].name, cases[i].what);
}

static long num_arg(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "fcgi_probe: bad number '%s' (%ld..%ld)\n", s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long total_s = 30;
    opt.bound = 1000;
    opt.holders = 1;
    opt.host = "probe.example";
    int ch;
    while ((ch = getopt(argc, argv, "t:b:c:n:u:H:s:Bh")) != -1) {
        switch (ch) {
        case 't': total_s = num_arg(optarg, 1, 3600); break;
        case 'b': opt.bound = num_arg(optarg, 1, 600000); break;
        case 'c': opt.close_within = num_arg(optarg, 1, 600000); break;
        case 'n': opt.holders = (int)num_arg(optarg, 1, MAX_HOLDERS); break;
        case 'u': opt.uri = optarg; break;
        case 'H': opt.host = optarg; break;
        case 's': opt.want_status = (int)num_arg(optarg, 100, 599); break;
        case 'B': opt.raw_body = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (argc - optind != 2) {
        usage(stderr);
        return 2;
    }
    opt.addr = argv[optind];
    opt.name = argv[optind + 1];
    void (*run)(void) = NULL;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(cases[i].name, opt.name) == 0)
            run = cases[i].run;
    if (run == NULL) {
        fprintf(stderr, "fcgi_probe: no case '%s'\n", opt.name);
        usage(stderr);
        return 2;
    }
    if (run == case_request && opt.uri == NULL)
        opt.uri = "/";

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)total_s + 2);   /* the backstop; the polls use the deadline itself */
    opt.deadline = now_ms() + total_s * 1000;

    run();

    if (!(run == case_request && opt.raw_body)) {
        printf("%s: %s%s\n", opt.name, failed ? "FAIL" : "PASS", summary);
    }
    fflush(stdout);
    return failed ? 1 : 0;
}
