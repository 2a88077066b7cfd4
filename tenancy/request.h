/*
 * request.h — the request object apps see (tn_request), independent of how it arrived.
 *
 * The app API of include/tenancy.h is implemented here once: request accessors, the
 * response buffer (status, headers, body), request-lifetime memory, and the tenant context
 * the chain attaches. Where bytes come from and go to is a transport: fcgi/ provides the
 * FastCGI one; tn_run() and the CLI use a detached one with no client (params are absent,
 * responses are refused). The response is buffered up to 64 KiB so small responses leave in
 * one write with a Content-Length; nothing reaches the transport before the first flush,
 * which lets a timeout still answer 504 when the app wrote nothing.
 *
 * Must not: know FastCGI, keep anything across requests, or log without the request's
 * context.
 */
#ifndef TN_TENANCY_REQUEST_H
#define TN_TENANCY_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/rc.h"
#include "tenancy.h"   /* the app API implemented here */

/* What tn_subscribe asks of the hub, checked by request.c before the transport sees it:
 * channel names valid, `last_id` parsed (has_last false: no resume point). */
#define TN_SUB_MAX_CHANNELS 16
#define TN_SUB_CHANNEL_MAX 64
typedef struct tn_subscription {
    int nchannels;                                  /* 0: all the tenant's channels */
    char channels[TN_SUB_MAX_CHANNELS][TN_SUB_CHANNEL_MAX + 1];
    bool has_last;
    uint64_t last_id;
} tn_subscription;

/* A channel name: [A-Za-z0-9_.:-]{1,64}. */
bool request_channel_valid(const char *name);

typedef struct tn_transport {
    /* A request parameter (CGI-style name) or NULL. */
    const char *(*param)(void *tx, const char *name);
    /* Read up to n body bytes: count, 0 at the end, -1 on error. */
    int (*read)(void *tx, char *buf, int n);
    /* Write response bytes (headers and body as one stream): 0, or -1 when the client is gone. */
    int (*write)(void *tx, const char *p, size_t n);
    /* Send what the transport buffered now (tn_flush): 0, or -1 when the client is gone.
     * NULL: the transport buffers nothing of its own. */
    int (*flush)(void *tx);
    /* Give the connection to the stream hub (tn_subscribe): TN_OK (the transport is
     * detached: nothing more is written), TN_BUSY, TN_ERR, TN_INVALID with r's error set.
     * NULL: this transport cannot hand a request on (TN_ERR). */
    int (*hand_off)(void *tx, tn_request *r, const tn_subscription *sub);
} tn_transport;

struct tenant_rec;


struct tn_request {
    const tn_transport *tp;   /* NULL: detached (no client) */
    void *tx;
    arena *arena;
    const char *method;
    const char *path;         /* the path the handler sees (a path-prefix resolver strips) */
    const char *orig_path;    /* the path as requested */
    const char *mount;        /* the prefix of the app serving it (tn_mount); NULL: no mounts
                               * configured, the one app at the root */
    const char *app;          /* that app's mount name ("" or NULL: the app at the root):
                               * the app tn_job_enqueue queues for */
    const char *query;
    /* HTTP_HOST or SERVER_NAME as sent (a copy: the access log line is written after the
     * transport freed its params), and normalised on first use (request_host: tn_host, the
     * access log, the routing host when it is the same text): most requests never need it. */
    const char *host_raw;
    const char *host;         /* NULL until request_host ran; "" when absent */
    uint16_t host_len;
    bool host_valid;          /* host is a valid name (request_host_normalise said so) */
    const char *route_host;   /* the name the request is routed by (request_route_host) */
    uint16_t route_host_len;
    uint8_t route_state;      /* RH_*: RH_UNSET until request_route_host ran */
    char req_id[40];
    int64_t start_ns;
    int64_t max_body;

    int status;
    buf *headers;
    buf *out;
    bool has_content_type;
    bool started;
    bool io_error;
    bool detached;            /* handed to the stream hub (tn_subscribe): write nothing more */
    uint64_t bytes_out;

    bool body_read;
    const char *body;
    size_t body_len;

    /* The tenant context: set by the chain for this request only (see tenancy/chain.h). */
    const struct tenant_rec *tenant;   /* NULL: a central request */
    bool central;                      /* matched a central domain */
    bool tenant_counted;               /* admitted by limits_enter: limits_leave is owed */
    const char *stage;                 /* the chain stage running, for error lines */
    tn_db *db;                         /* the tenant's storage, when the chain gave one */
    int stmt_timeout_ms;               /* a job's: PostgreSQL's statement_timeout for its
                                        * storage in place of the placement's (0: the
                                        * placement's, as for a request) */

    /* The message of the last app API call that failed with one to give (tn_key_check,
     * tn_db_query_sandboxed), for tn_request_error. Allocated from the request arena when
     * first set: a pointer keeps request_init's memset as small as before, and most requests
     * never fail a call. NULL: none. */
    char *error;
};

/* Fill r for a request arriving over transport tp. Buffers are the caller's (reused across
 * requests), reset here. */
void request_init(tn_request *r, const tn_transport *tp, void *tx, arena *a, buf *headers,
                  buf *out, int64_t max_body, const char *req_id, int64_t start_ns);

/* A request with no client, for work outside HTTP (tn_run, the CLI). */
void request_init_detached(tn_request *r, arena *a, buf *headers, buf *out);

/* Hand everything buffered to the transport (with Content-Length when nothing was flushed
 * before). TN_OK or TN_IO. */
int request_finish(tn_request *r);

static inline bool request_started(const tn_request *r) { return r->started; }

/* The one host-name normaliser. Lower-cases ASCII, drops the port and one trailing dot; a
 * bracketed IPv6 literal is kept whole, brackets included. Writes the name and its NUL into
 * out and returns its length (0 and "" when in is NULL or the name does not fit in outlen).
 * *valid says whether the name is one a tenant can have: LDH labels of 1-63 bytes (xn--
 * punycode included), 253 bytes in all, nothing but digits after a ':', and no IP literal
 * (a name whose last label is a decimal or 0x-hexadecimal number counts as one, as it does
 * for browsers and inet_aton). Every host name of the host goes through it: the request's
 * (below), the registry's domains, central and base domains, admin.host. */
size_t request_host_normalise(const char *in, char *out, size_t outlen, bool *valid);

/* request_host_normalise into the arena, whatever its validity; "" for NULL or "". */
const char *request_normalise_host(arena *a, const char *h);

/* How the request's routing host came out. */
enum { RH_UNSET = 0, RH_OK, RH_ABSENT, RH_INVALID };

/* The host the request is routed by: the first non-empty of `params` (tenant.host_params),
 * through request_host_normalise. Computed on the first call and kept on the request
 * (r->route_host and its length, r->route_state), so the worker's routing, the panel's claim and the
 * chain's identification read one name; later calls return what the first found (they pass
 * the same params: the generation's). RH_OK (r->route_host is the valid name), RH_ABSENT
 * (no param set) or RH_INVALID (r->route_host is ""). */
int request_route_host(tn_request *r, const char *const *params, int nparams);

/* The request's Host (HTTP_HOST, else SERVER_NAME) normalised, computed once: tn_host's. */
const char *request_host(tn_request *r);

/* A path the web server may read differently from us: a "." or ".." segment, or an encoded
 * dot, slash or backslash. nginx matches its locations (and their access rules) on the
 * normalised path while we route by the raw one (the tenant path prefix, the mounts), so
 * /t/globex/../acme/x passes nginx's rule for /t/acme/ and would name globex: such a path is
 * refused by whatever routes by it, never resolved. */
bool request_path_ambiguous(const char *p);

/* Set the request's error message (tn_request_error), through tn_verrf; replaces the one
 * before. Out of request memory the message is lost (tn_request_error then says ""). */
#define REQUEST_ERROR_MAX 512
void request_set_error(tn_request *r, const char *fmt, ...) TN_PRINTF(2, 3);

/* The HTTP reason phrase for a status code ("Not Found"). */
const char *http_reason(int status);

#endif
