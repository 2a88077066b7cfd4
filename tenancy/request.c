/*
 * request.c — the request/response half of the app API (see request.h, include/tenancy.h).
 * Must not: know the transport beyond its three functions, keep anything across requests,
 * or log without the request's context.
 */
#include "core/first.h"
#include "tenancy/request.h"
#include "core/buf.h"
#include "core/kv.h"
#include "core/log.h"
#include "core/rc.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLUSH_AT 65536

TN_HOT const char *http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 300 ? "OK" : status < 400 ? "Redirect" : status < 500 ? "Client Error"
                                                                                 : "Server Error";
    }
}

/* ASCII only, without the C library's locale tables: a host name is ASCII, and the tables
 * are cache lines and a page more for every request to read. */
static inline char lower_ascii(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }
static inline bool digit_ascii(char c) { return c >= '0' && c <= '9'; }
static inline bool xdigit_ascii(char c)
{
    return digit_ascii(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Is out (n bytes, lower case) a name a tenant can have: LDH labels of 1..63 bytes with no
 * hyphen at a label's ends, and not an IPv4 literal? */
static TN_HOT bool host_name_ok(const char *out, size_t n)
{
    size_t label = 0, last = 0;
    for (size_t i = 0; i <= n; i++) {
        char c = out[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || out[i - 1] == '-' || out[i - label] == '-')
                return false;
            label = 0;
            if (c == '.')
                last = i + 1;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
        label++;
    }
    /* An IPv4 literal: browsers (the WHATWG URL rules) and inet_aton() read a name whose last
     * label is a number - decimal, or hexadecimal after 0x - as an address ("1.2.3.4",
     * "0x7f.1", "a.123"), so such a name never reaches us as a host name. */
    const char *tail = out + last;
    size_t k = 0;
    if (tail[0] == '0' && tail[1] == 'x') {
        for (k = 2; xdigit_ascii(tail[k]); k++)
            ;
    } else {
        while (digit_ascii(tail[k]))
            k++;
    }
    return tail[k] != '\0';
}

TN_HOT size_t request_host_normalise(const char *in, char *out, size_t outlen, bool *valid)
{
    *valid = false;
    if (outlen == 0)
        return 0;
    out[0] = '\0';
    if (in == NULL)
        return 0;
    const char *end = in;
    bool literal = in[0] == '[';
    if (literal) {
        /* an IPv6 literal keeps its brackets (and is never a tenant's name) */
        const char *close = str_chr(in, ']');
        end = close != NULL ? close + 1 : in + str_len(in);
    } else {
        while (*end != '\0' && *end != ':')
            end++;
    }
    size_t n = (size_t)(end - in);
    if (n > 0 && end[-1] == '.')
        n--;   /* "acme.example.com." is the same name */
    if (n >= outlen)
        return 0;   /* longer than out: no name (and never a valid one: see request.h) */
    for (size_t i = 0; i < n; i++)
        out[i] = lower_ascii(in[i]);
    out[n] = '\0';
    if (literal || n == 0 || n > 253)
        return n;
    if (*end == ':') {
        /* Only a port may follow. */
        const char *q = end + 1;
        if (*q == '\0')
            return n;
        for (; *q; q++)
            if (!digit_ascii(*q))
                return n;
    }
    *valid = host_name_ok(out, n);
    return n;
}

TN_HOT const char *request_normalise_host(arena *a, const char *h)
{
    if (h == NULL || *h == '\0')
        return "";
    size_t size = str_len(h) + 1;
    char *out = arena_alloc(a, size);
    if (out == NULL)
        return "";
    bool valid;
    request_host_normalise(h, out, size, &valid);
    return out;
}

static const char *param(const tn_request *r, const char *name)
{
    return r->tp ? r->tp->param(r->tx, name) : NULL;
}

TN_HOT void request_init(tn_request *r, const tn_transport *tp, void *tx, arena *a,
                         buf *headers, buf *out, int64_t max_body, const char *req_id,
                         int64_t start_ns)
{
    memset(r, 0, sizeof(*r));
    r->tp = tp;
    r->tx = tx;
    r->arena = a;
    r->headers = headers;
    r->out = out;
    buf_reset(headers);
    buf_reset(out);
    r->max_body = max_body;
    r->start_ns = start_ns;
    r->status = 200;
    str_copy(r->req_id, sizeof(r->req_id), req_id);

    /* Copies: the access log line is written after the transport has freed its params. */
    const char *m = param(r, "REQUEST_METHOD");
    r->method = arena_strdup(a, m ? m : "GET");
    if (r->method == NULL)
        r->method = "GET";
    const char *uri = param(r, "REQUEST_URI");
    const char *q = param(r, "QUERY_STRING");
    if (uri == NULL)
        uri = param(r, "DOCUMENT_URI");
    if (uri == NULL)
        uri = param(r, "SCRIPT_NAME");
    if (uri == NULL || uri[0] == '\0')
        uri = "/";
    const char *qm = str_chr(uri, '?');
    r->path = qm ? arena_strndup(a, uri, (size_t)(qm - uri)) : arena_strdup(a, uri);
    if (r->path == NULL)
        r->path = "/";
    r->orig_path = r->path;
    r->query = q ? q : qm ? qm + 1 : "";
    const char *h = param(r, "HTTP_HOST");
    if (h == NULL || *h == '\0')
        h = param(r, "SERVER_NAME");
    r->host_raw = h != NULL && *h != '\0' ? arena_strdup(a, h) : NULL;
}

TN_HOT const char *request_host(tn_request *r)
{
    if (r->host != NULL)
        return r->host;
    r->host = "";
    if (r->host_raw == NULL)
        return r->host;
    size_t size = str_len(r->host_raw) + 1;
    char *o = arena_alloc(r->arena, size);
    if (o != NULL) {
        r->host_len = (uint16_t)request_host_normalise(r->host_raw, o, size, &r->host_valid);
        r->host = o;
    }
    return r->host;
}

bool request_path_ambiguous(const char *p)
{
    for (const char *s = p; *s != '\0' && *s != '?'; s++) {
        if (*s == '\\')
            return true;
        if (*s == '%' && s[1] != '\0' && s[2] != '\0') {
            char a = s[1], b = (char)(s[2] | 0x20);
            if ((a == '2' && (b == 'e' || b == 'f')) || (a == '5' && b == 'c'))
                return true;
        }
        if (*s == '/' && s[1] == '.') {
            const char *t = s[2] == '.' ? s + 3 : s + 2;
            if (*t == '/' || *t == '\0' || *t == '?')
                return true;
        }
    }
    return false;
}

TN_HOT int request_route_host(tn_request *r, const char *const *params, int nparams)
{
    if (r->route_state != RH_UNSET)
        return r->route_state;
    const char *raw = NULL;
    for (int i = 0; i < nparams && raw == NULL; i++) {
        raw = param(r, params[i]);
        if (raw != NULL && raw[0] == '\0')
            raw = NULL;
    }
    r->route_host = "";
    r->route_state = RH_ABSENT;
    if (raw == NULL)
        return r->route_state;
    /* Most often the routing param holds the same text as the Host request_init already
     * normalised (nginx's $host in TENANT_HOST): one comparison instead of a second pass. */
    if (r->host_raw != NULL && str_eq(raw, r->host_raw)) {
        request_host(r);
        bool ok = r->host_valid && r->host_len > 0;
        r->route_host = ok ? r->host : "";
        r->route_host_len = ok ? r->host_len : 0;
        r->route_state = ok ? RH_OK : RH_INVALID;
        return r->route_state;
    }
    /* The name is never longer than the param; past the longest valid name (253) and its
     * NUL it is invalid anyway. Sized to the name: the request arena stays as small as a
     * request needs. */
    size_t size = str_len(raw) + 1;
    if (size > 254)
        size = 254;
    char *out = arena_alloc(r->arena, size);
    bool valid = false;
    size_t n = out != NULL ? request_host_normalise(raw, out, size, &valid) : 0;
    if (n > 0 && valid) {
        r->route_host = out;
        r->route_host_len = (uint16_t)n;
        r->route_state = RH_OK;
    } else {
        r->route_state = RH_INVALID;
    }
    return r->route_state;
}

void request_init_detached(tn_request *r, arena *a, buf *headers, buf *out)
{
    request_init(r, NULL, NULL, a, headers, out, 0, "detached", 0);
    r->method = "RUN";
}

/* ---- the app API: request side ---------------------------------------------------------- */

const char *tn_method(const tn_request *r) { return r->method; }
const char *tn_path(const tn_request *r) { return r->path; }
const char *tn_query(const tn_request *r) { return r->query; }
const char *tn_mount(const tn_request *r) { return r->mount != NULL ? r->mount : ""; }
/* The request is the caller's own (tn_request is const here only to say the app cannot
 * change it): the normalised host is filled in on first use. */
const char *tn_host(const tn_request *r) { return request_host((tn_request *)r); }
const char *tn_request_id(const tn_request *r) { return r->req_id; }

void request_set_error(tn_request *r, const char *fmt, ...)
{
    if (r->error == NULL && (r->error = arena_alloc(r->arena, REQUEST_ERROR_MAX)) == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    tn_verrf(r->error, REQUEST_ERROR_MAX, TN_ERR, fmt, ap);
    va_end(ap);
}

const char *tn_request_error(const tn_request *r) { return r->error ? r->error : ""; }

TN_HOT const char *tn_param(const tn_request *r, const char *name) { return param(r, name); }

const char *tn_header(const tn_request *r, const char *name)
{
    /* Content-Type and Content-Length travel without the HTTP_ prefix. */
    char key[128];
    size_t n = strlen(name);
    if (n + 6 > sizeof(key))
        return NULL;
    bool bare = (name[0] | 0x20) == 'c' && (strcasecmp(name, "content-type") == 0 ||
                                            strcasecmp(name, "content-length") == 0);
    size_t o = 0;
    if (!bare) {
        memcpy(key, "HTTP_", 5);
        o = 5;
    }
    for (size_t i = 0; i < n; i++) {   /* ASCII upper case: apps ask several per request */
        char c = name[i];
        key[o++] = c == '-' ? '_' : c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
    }
    key[o] = '\0';
    return param(r, key);
}

const char *tn_query_arg(tn_request *r, const char *name)
{
    return kv_form_get(r->query, strlen(r->query), name, r->arena);
}

const char *tn_cookie(tn_request *r, const char *name)
{
    return kv_cookie_get(tn_header(r, "Cookie"), name, r->arena);
}

int tn_body(tn_request *r, const char **data, size_t *len)
{
    if (r->body_read) {
        *data = r->body;
        *len = r->body_len;
        return r->io_error ? TN_IO : TN_OK;
    }
    *data = NULL;
    *len = 0;
    if (r->tp == NULL)
        return TN_OK;   /* detached: no body */
    const char *cl = param(r, "CONTENT_LENGTH");
    long long declared = cl && *cl ? atoll(cl) : 0;
    if (declared < 0)
        return TN_INVALID;
    if (declared > r->max_body)
        return TN_TOOBIG;
    r->body_read = true;
    size_t cap = (size_t)declared;
    char *p = arena_alloc(r->arena, cap + 1);
    if (p == NULL)
        return TN_NOMEM;
    size_t got = 0;
    bool failed = false;
    while (got < cap) {
        int n = r->tp->read(r->tx, p + got, (int)(cap - got > 65536 ? 65536 : cap - got));
        if (n < 0)
            failed = true;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    p[got] = '\0';
    if (got < cap || failed) {
        r->io_error = true;
        return TN_IO;
    }
    r->body = p;
    r->body_len = got;
    *data = p;
    *len = got;
    return TN_OK;
}

void *tn_alloc(tn_request *r, size_t n) { return arena_alloc(r->arena, n); }
char *tn_strdup(tn_request *r, const char *s) { return arena_strdup(r->arena, s); }

char *tn_sprintf(tn_request *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = arena_vsprintf(r->arena, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- the app API: response side --------------------------------------------------------- */

int tn_set_status(tn_request *r, int status)
{
    if (status < 100 || status > 599)
        return TN_INVALID;
    if (r->started)
        return TN_ERR;
    r->status = status;
    return TN_OK;
}

static bool header_text_ok(const char *s, bool is_name)
{
    if (*s == '\0' && is_name)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\r' || c == '\n')
            return false;
        if (is_name && (c <= 0x20 || c == ':' || c >= 0x7f))
            return false;
    }
    return true;
}

int tn_add_header(tn_request *r, const char *name, const char *value)
{
    if (!header_text_ok(name, true) || !header_text_ok(value, false))
        return TN_INVALID;
    if (r->started)
        return TN_ERR;
    char c0 = (char)(name[0] | 0x20);
    if ((c0 == 's' && strcasecmp(name, "Status") == 0) ||
        (c0 == 'c' && strcasecmp(name, "Content-Length") == 0))
        return TN_INVALID;   /* the host owns these */
    if (c0 == 'c' && strcasecmp(name, "Content-Type") == 0)
        r->has_content_type = true;
    buf_puts(r->headers, name);
    buf_append(r->headers, ": ", 2);
    buf_puts(r->headers, value);
    buf_append(r->headers, "\r\n", 2);
    return r->headers->oom ? TN_NOMEM : TN_OK;
}

static TN_HOT int put(tn_request *r, const char *p, size_t n)
{
    if (r->tp == NULL || r->detached || r->tp->write(r->tx, p, n) != 0) {
        r->io_error = true;
        return TN_IO;
    }
    return TN_OK;
}

/* Hand the status line, headers and (when `final`) a Content-Length to libfcgi. */
static TN_HOT int start_response(tn_request *r, bool final)
{
    /* built by hand: this runs for every request, and printf costs more than the rest */
    static const char ok[] = "Status: 200 OK\r\n";
    static const char ctype[] = "Content-Type: text/plain; charset=utf-8\r\n";
    static const char clen[] = "Content-Length: ";
    char head[128];   /* the constants' copies: fixed sizes, so no library call */
    size_t n;
    if (TN_LIKELY(r->status == 200)) {   /* most requests' status line, whole */
        memcpy(head, ok, sizeof(ok) - 1);
        n = sizeof(ok) - 1;
    } else {
        n = str_copy(head, sizeof(head), "Status: ");
        n += str_u64(head + n, (unsigned long long)(r->status > 0 ? r->status : 0));
        head[n++] = ' ';
        n += str_copy(head + n, sizeof(head) - n - 2, http_reason(r->status));
        head[n++] = '\r';
        head[n++] = '\n';
    }
    r->started = true;
    if (put(r, head, n) != TN_OK)
        return TN_IO;
    if (r->headers->len && put(r, r->headers->p, r->headers->len) != TN_OK)
        return TN_IO;
    /* What follows the app's headers, in one piece: the default type, the length, the blank
     * line. */
    n = 0;
    if (!r->has_content_type) {
        memcpy(head, ctype, sizeof(ctype) - 1);
        n = sizeof(ctype) - 1;
    }
    if (final) {
        memcpy(head + n, clen, sizeof(clen) - 1);
        n += sizeof(clen) - 1;
        n += str_u64(head + n, (unsigned long long)r->out->len);
        head[n++] = '\r';
        head[n++] = '\n';
    }
    head[n++] = '\r';
    head[n++] = '\n';
    return put(r, head, n);
}

/* Start the response and send what the buffer holds (tn_write past the buffer, tn_flush,
 * the end of the request). */
static TN_HOT int start_and_send(tn_request *r, bool final)
{
    if (start_response(r, final) != TN_OK)
        return TN_IO;
    if (r->out->len && put(r, r->out->p, r->out->len) != TN_OK)
        return TN_IO;
    buf_reset(r->out);
    return TN_OK;
}

int tn_write(tn_request *r, const void *data, size_t len)
{
    if (r->io_error)
        return TN_IO;
    r->bytes_out += len;
    if (!r->started && r->out->len + len <= FLUSH_AT) {
        buf_append(r->out, data, len);
        return r->out->oom ? TN_NOMEM : TN_OK;
    }
    if (!r->started && start_and_send(r, false) != TN_OK)
        return TN_IO;
    return put(r, data, len);
}

int tn_puts(tn_request *r, const char *s) { return tn_write(r, s, strlen(s)); }

int tn_flush(tn_request *r)
{
    if (r->io_error || r->tp == NULL || r->detached)
        return TN_IO;
    if (!r->started && start_and_send(r, false) != TN_OK)
        return TN_IO;
    if (r->tp->flush != NULL && r->tp->flush(r->tx) != 0) {
        r->io_error = true;
        return TN_IO;
    }
    return TN_OK;
}

/* ---- the app API: streams ----------------------------------------------------------------- */

static const bool channel_byte[256] = {
    ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true,
    ['_'] = true, ['.'] = true, [':'] = true, ['-'] = true,
};

bool request_channel_valid(const char *name)
{
    size_t n = 0;
    for (; name[n] != '\0'; n++)
        if (n >= TN_SUB_CHANNEL_MAX || !channel_byte[(unsigned char)name[n]])
            return false;
    return n > 0;
}

/* An event id as the hub writes it: decimal, 1..20 digits, no sign. */
static bool parse_event_id(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t n = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        if (n >= 20 || v > (UINT64_MAX - (uint64_t)(s[n] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[n] - '0');
    }
    if (n == 0 || s[n] != '\0')
        return false;
    *out = v;
    return true;
}

int tn_subscribe(tn_request *r, const char *const *channels, int nchannels,
                 const char *last_event_id)
{
    if (r->tenant == NULL) {
        request_set_error(r, "a stream belongs to a tenant: this request has none");
        return TN_NOTFOUND;
    }
    if (r->started || r->detached || r->io_error) {
        request_set_error(r, "the response has started: too late to hand the request on");
        return TN_ERR;
    }
    tn_subscription sub;
    memset(&sub, 0, sizeof(sub));
    if (nchannels < 0 || nchannels > TN_SUB_MAX_CHANNELS || (nchannels > 0 && channels == NULL)) {
        request_set_error(r, "a stream takes 0 to %d channels, not %d", TN_SUB_MAX_CHANNELS,
                          nchannels);
        return TN_INVALID;
    }
    for (int i = 0; i < nchannels; i++) {
        if (channels[i] == NULL || !request_channel_valid(channels[i])) {
            request_set_error(r, "not a channel name (1 to 64 of A-Z a-z 0-9 _ . : -)");
            return TN_INVALID;
        }
        str_copy(sub.channels[sub.nchannels++], sizeof(sub.channels[0]), channels[i]);
    }
    const char *last = last_event_id;
    if (last == NULL) {
        last = tn_header(r, "Last-Event-ID");
        if (last != NULL && *last == '\0')
            last = NULL;
    }
    if (last != NULL) {
        if (!parse_event_id(last, &sub.last_id)) {
            request_set_error(r, "not an event id: Last-Event-ID is a decimal number");
            return TN_INVALID;
        }
        sub.has_last = true;
    }
    if (r->tp == NULL || r->tp->hand_off == NULL) {
        request_set_error(r, "this request cannot be handed to a stream hub");
        return TN_ERR;
    }
    int rc = r->tp->hand_off(r->tx, r, &sub);
    if (rc == TN_OK)
        r->detached = true;
    return rc;
}

int tn_printf(tn_request *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!r->started) {
        size_t before = r->out->len;
        buf_vprintf(r->out, fmt, ap);
        va_end(ap);
        if (r->out->oom)
            return TN_NOMEM;
        size_t added = r->out->len - before;
        r->bytes_out += added;
        if (r->out->len > FLUSH_AT) {
            /* Went over the buffering limit: start streaming with what we have. */
            if (start_response(r, false) != TN_OK)
                return TN_IO;
            int rc = put(r, r->out->p, r->out->len);
            buf_reset(r->out);
            return rc;
        }
        return TN_OK;
    }
    char *s = arena_vsprintf(r->arena, fmt, ap);
    va_end(ap);
    if (s == NULL)
        return TN_NOMEM;
    return tn_write(r, s, strlen(s));
}

int tn_send_error(tn_request *r, int status, const char *message)
{
    if (r->started)
        return TN_ERR;
    /* Keep the headers already added (Retry-After, Cache-Control...) but the content type,
     * which describes a body this page replaces. */
    buf *h = r->headers;
    size_t w = 0;
    for (size_t i = 0; i < h->len;) {
        const char *nl = memchr(h->p + i, '\n', h->len - i);
        size_t end = nl ? (size_t)(nl - h->p) + 1 : h->len;
        if (strncasecmp(h->p + i, "Content-Type:", 13) != 0) {
            memmove(h->p + w, h->p + i, end - i);
            w += end - i;
        }
        i = end;
    }
    h->len = w;
    if (h->p != NULL)
        h->p[w] = '\0';
    buf_reset(r->out);
    r->has_content_type = false;
    r->bytes_out = 0;
    if (tn_set_status(r, status) != TN_OK)
        r->status = 500;
    const char *accept = tn_header(r, "Accept");
    buf *o = r->out;
    if (accept != NULL && strstr(accept, "application/json") != NULL &&
        strstr(accept, "text/html") == NULL) {
        tn_add_header(r, "Content-Type", "application/json");
        buf_puts(o, "{\"status\":");
        buf_i64(o, r->status);
        buf_puts(o, ",\"error\":");
        buf_json_str(o, message ? message : http_reason(r->status));
        buf_puts(o, ",\"request_id\":");
        buf_json_str(o, r->req_id);
        buf_puts(o, "}\n");
    } else {
        tn_add_header(r, "Content-Type", "text/html; charset=utf-8");
        buf_printf(o, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%d %s</title>"
                      "<style>body{font:16px/1.5 system-ui,sans-serif;margin:4em auto;"
                      "max-width:36em;color:#222}small{color:#777}</style></head><body><h1>%d %s</h1>",
                   r->status, http_reason(r->status), r->status, http_reason(r->status));
        if (message != NULL) {
            buf_puts(o, "<p>");
            buf_html(o, message);
            buf_puts(o, "</p>");
        }
        buf_puts(o, "<p><small>request ");
        buf_html(o, r->req_id);
        buf_puts(o, "</small></p></body></html>\n");
    }
    r->bytes_out = o->len;
    return o->oom ? TN_NOMEM : TN_OK;
}

TN_HOT int request_finish(tn_request *r)
{
    if (r->detached)
        return TN_OK;   /* the hub answers it */
    if (r->io_error)
        return TN_IO;
    if (!r->started && start_and_send(r, true) != TN_OK)
        return TN_IO;
    return TN_OK;
}

void tn_log(const tn_request *r, int level, const char *fmt, ...)
{
    (void)r;   /* the context prefix is already set for the running request */
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}
