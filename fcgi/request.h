/*
 * request.h — the host side of a request: builds the tn_request that apps see from a libfcgi
 * request, and writes its response.
 *
 * This is the only place where the app API meets libfcgi. The response is buffered in the
 * worker's output buffer up to `flush_at` bytes so that small responses leave in one write
 * with a Content-Length; larger ones stream. Nothing reaches libfcgi before the first flush,
 * which lets the timeout path (worker.c) answer 504 itself when the app never wrote.
 */
#ifndef TN_FCGI_REQUEST_H
#define TN_FCGI_REQUEST_H

#include <fcgiapp.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/rc.h"

struct tn_request {
    FCGX_Request *fx;
    arena *arena;
    const char *method;
    const char *uri;          /* REQUEST_URI as sent (path and query) */
    const char *path;
    const char *query;
    const char *host;
    char req_id[40];
    int64_t start_ns;
    int64_t max_body;

    int status;
    buf *headers;             /* "Name: value\r\n" lines the app added */
    buf *out;                 /* body not yet handed to libfcgi */
    bool has_content_type;
    bool started;             /* headers handed to libfcgi: status can no longer change */
    bool io_error;            /* the client went away */
    uint64_t bytes_out;       /* body bytes */

    bool body_read;
    const char *body;
    size_t body_len;

    void *tenancy;            /* the tenancy chain's per-request context (tenancy/) */
    const char *stage;        /* chain stage running now, for error lines */
};

/* Fill r from an accepted libfcgi request. Buffers are the worker's, reset here. */
void request_init(tn_request *r, FCGX_Request *fx, arena *a, buf *headers, buf *out,
                  int64_t max_body, const char *req_id, int64_t start_ns);

/* Hand everything buffered to libfcgi (headers with Content-Length when the response was
 * never flushed before). TN_OK or TN_IO. */
int request_finish(tn_request *r);

/* True once any byte went to libfcgi (the status line is then fixed). */
static inline bool request_started(const tn_request *r) { return r->started; }

/* The HTTP reason phrase for a status code ("Not Found"). */
const char *http_reason(int status);

#endif
