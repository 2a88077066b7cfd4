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
 * A handler may also run jobs of its own ("host jobs"): jobs queued (tenancy/jobs.h) under
 * an app name of TN_HOST_JOB_PREFIX and the module's name ("host.admin"), which no mount can
 * have (a mount's name has no '.'). The job workers (pm.jobs) set up only the handlers that have
 * a job function (init, in a job worker too) and give each such job to the handler whose
 * job_app it names, outside any tenant's context (no request: the job is the module's own
 * work, such as running the `tenancy` command for the panel).
 *
 * Must not: hold state (a descriptor is constant data; its module keeps its own state per
 * worker, set up by init after the fork).
 */
#ifndef TN_TENANCY_HANDLER_H
#define TN_TENANCY_HANDLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    /* A job was queued: wake this host's idle job workers (NULL: the host has none; they
     * find the job at their next poll, jobs.poll). */
    void (*job_queued)(void *host);
    void *host;                /* the host's context for these */
} tn_handler_env;

/* The app names of host jobs start with this ("host.admin"). */
#define TN_HOST_JOB_PREFIX "host."
#define TN_IS_HOST_JOB_APP(app) (strncmp((app), TN_HOST_JOB_PREFIX, 5) == 0)

/* The most bytes of a progress text (tn_handler_job.progress), as tenancy/jobs.h keeps. */
#define TN_JOB_PROGRESS_MAX 200

/* A host job as its handler gets it: copies, valid during the call. */
typedef struct tn_handler_job {
    int64_t id;
    int64_t tenant_id;         /* 0: central */
    const char *slug;          /* the job's tenant ("" for a central job) */
    const char *app;           /* the handler's job_app */
    const char *name;
    const char *payload;
    int attempt, max_attempts; /* attempt: 1 for the first run */
    /* The running attempt's progress (free text, at most TN_JOB_PROGRESS_MAX bytes): kept in
     * the job's row under the job worker's lease, shown by `tenancy job show` and the
     * panel. */
    void (*progress)(void *host, const char *text);
    void *host;
} tn_handler_job;

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
    /* Host jobs (see above): the app name its jobs are queued under ("host." and a name), and
     * the function a job worker runs one with, under the job's timeout. TN_OK: done;
     * anything else: the attempt failed, err saying why (the job's last_error). NULL: the
     * handler runs no jobs. */
    const char *job_app;
    int (*job)(const tn_handler_job *j, char *err, size_t errlen);
    /* Whether this generation's options (the handler's own, as env->conf would hold them)
     * can queue host jobs at all: a panel that is off queues none. The master starts no job
     * worker on a host where nothing can queue a job. NULL (with job set): always. */
    bool (*queues_jobs)(const void *conf);
} tn_handler;

#endif
