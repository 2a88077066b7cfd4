/*
 * handler.h — the ordered list of request handlers a worker runs (tenancy/handler.h has the
 * descriptor).
 *
 * The composition root (fcgi/main.c) adds the handlers before the master starts, each with
 * the config part that holds its options; every worker inherits the list through fork, sets
 * each handler up after it (handlers_init) and asks them in order which one claims a
 * request. This folder brings two of its own (fcgi/route.h): the host's endpoints and the
 * tenancy chain with the app; any other (the admin panel) comes from the root.
 *
 * Must not: name a module above fcgi/, or change after the first worker is forked.
 */
#ifndef TN_FCGI_HANDLER_H
#define TN_FCGI_HANDLER_H

#include "fcgi/config.h"
#include "tenancy/handler.h"

/* Most handlers one worker runs. */
#define TN_MAX_HANDLERS 8

/* Add h after the handlers already there; its init gets the struct of `part` in the
 * worker's generation as env->conf (NULL part: NULL conf). TN_OK, or TN_INVALID when
 * TN_MAX_HANDLERS are there already or a handler without a claim function (which takes
 * every request) is there already: nothing after it could ever be reached. */
int handlers_add(const tn_handler *h, const config_part *part);

/* Per worker, after the fork: each init in order, with `base` plus the handler's own
 * options of cfg. TN_OK, or the first failing init's code with *failed set to that
 * handler's name (the handlers set up before it are finished again). */
int handlers_init(const tn_config *cfg, const tn_handler_env *base, const char **failed);

/* Per job worker, after the fork: the init of each handler that runs host jobs (a job
 * function), as handlers_init does for a worker. */
int handlers_init_jobs(const tn_config *cfg, const tn_handler_env *base, const char **failed);

/* Whether a handler that runs host jobs can queue one under cfg (its queues_jobs). */
bool handlers_queue_jobs(const tn_config *cfg);

/* The handler whose host jobs are queued under `app` ("host.admin"), set up by
 * handlers_init_jobs; NULL when none. */
const tn_handler *handlers_job(const char *app);

/* Finish every handler set up, in reverse order (a worker does not: it leaves with _exit). */
void handlers_fini(void);

/* Forget every handler (finishing those set up): for the unit tests that run several cases
 * in one process (CK_FORK=no); the daemon never calls it. */
void handlers_clear(void);

/* The first handler that claims r; NULL when none does (no handler without a claim
 * function was added). */
const tn_handler *handlers_claim(tn_request *r);

#endif
