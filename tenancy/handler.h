/*
 * handler.h — a request handler as a host runs it: the descriptor a module hands the
 * composition root, which adds it to the worker's ordered list (fcgi/handler.h).
 *
 * A worker asks each handler in turn whether it claims the request (by its routing host,
 * request_route_host, or its path) and gives the request to the first that does; the one
 * without a claim function takes every request and comes last (the tenancy chain). The
 * descriptor lives here, beside tn_request, so that a module below the host (admin/) can
 * export one without knowing fcgi/.
 *
 * Must not: hold state (a descriptor is constant data; its module keeps its own state per
 * worker, set up by init after the fork).
 */
#ifndef TN_TENANCY_HANDLER_H
#define TN_TENANCY_HANDLER_H

#include <stdbool.h>

#include "core/buf.h"
#include "tenancy/request.h"

/* The most a pending id (tn_handler_env.keep_pending) may take, its NUL included. */
#define TN_PENDING_ID_SIZE 17

/* What the host gives a handler when its worker starts. Pointers outlive the worker's
 * generation. */
typedef struct tn_handler_env {
    const void *conf;          /* the handler's own options in this generation (NULL: none) */
    const char *config_path;   /* the configuration file the generation was read from */
    /* The host's status document (JSON: workers, pools, per-tenant counters) appended to
     * out. */
    void (*status_json)(void *host, buf *out);
    /* Keep `id` (at most TN_PENDING_ID_SIZE with its NUL; NULL: forget it) where the host's supervisor looks when
     * the worker dies, so that a handler's pending entry is closed even then (the
     * composition root wires what the supervisor does with it). */
    void (*keep_pending)(void *host, const char *id);
    void *host;                /* the host's context for both */
} tn_handler_env;

typedef struct tn_handler {
    const char *name;                             /* for log lines: "admin panel" */
    /* Per worker, after the fork, in list order. TN_OK, or an error: the worker does not
     * start. NULL: nothing to set up. */
    int (*init)(const tn_handler_env *env);
    /* Undo init, in reverse order (only after init succeeded): when a later handler's init
     * fails, and in a host that keeps its process (tests). A worker leaves with _exit
     * without it. NULL: none. */
    void (*fini)(void);
    /* True when the request is this handler's. NULL: every request (the last handler). */
    bool (*claims)(tn_request *r);
    /* Serve the request completely (errors included). Returns the HTTP status sent. */
    int (*handle)(tn_request *r);
} tn_handler;

#endif
