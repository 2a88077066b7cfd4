/*
 * ops_runner.h — the parallel runner of the tenant operations (ops_runner.c): N forked
 * workers, each doing one task at a time, handed out by the parent. `ops_migrate` and the
 * bulk create (`tenancy tenant create --from-file`) run on it; what a task is belongs to
 * them (ops_runner_ops).
 *
 * Must not: be included outside the tenant operations (tenancy/ops_*.c) and their one
 * remaining caller, the bulk create of cli/tenant.c.
 */
#ifndef TN_TENANCY_OPS_RUNNER_H
#define TN_TENANCY_OPS_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tenancy/ops.h"

#define OPS_RESULT_MAX 4096   /* a result is written whole in one write (PIPE_BUF) */

/* What a task is. Tasks are the indexes 0..ntasks-1; a worker is a forked child that keeps
 * what it sets up in worker_begin (its own registry and storage connections) for all its
 * tasks. A result is result_size bytes (<= OPS_RESULT_MAX) and starts with the task's
 * int32_t index, set by the runner. */
typedef struct ops_runner_ops {
    size_t result_size;
    void (*worker_begin)(void *ctx);                       /* in the worker; may be NULL */
    bool (*work)(void *ctx, int idx, void *result);        /* in the worker: the result is
                                                              zeroed but for its index; false
                                                              ends the worker once it is sent */
    void (*worker_end)(void *ctx);                         /* in the worker; may be NULL */
    bool (*take)(void *ctx, const void *result);           /* in the parent: true = failed */
    void (*lost)(void *ctx, int idx, const char *why);     /* in the parent: its worker died
                                                              with it in hand (a failure) */
    void (*outcome)(void *ctx, int idx, ops_progress *p);  /* in the parent, after take or
                                                              lost: the task's slug, outcome
                                                              and error for the progress
                                                              event; may be NULL */
    int (*idle)(void *ctx);                                /* in the parent, once the workers
                                                              have their next tasks: slow
                                                              bookkeeping that should not hold
                                                              them up; returns tasks that
                                                              turned failed; may be NULL */
    int hard_signal;   /* what a second SIGINT/SIGTERM sends the workers */
} ops_runner_ops;

typedef struct ops_runner {
    const ops_runner_ops *ops;
    void *ctx;
    int ntasks, nworkers;
    pid_t pid[OPS_JOBS_MAX];
    int task_fd[OPS_JOBS_MAX];
    int busy[OPS_JOBS_MAX];      /* the task in hand, -1 when idle */
    bool alive[OPS_JOBS_MAX];
    int result_fd;
    int next;                    /* the next task to hand out; those from here were not */
    int limit;                   /* hand out tasks below this index only (a canary) */
    int done, failed;
    const char *stopped;         /* why the run stopped early, NULL when it did not */
    ops_progress_fn progress;    /* ticks while running, and a final one; may be NULL */
    void *progress_ctx;
    int64_t t0;
    bool started;
    struct sigaction old_int, old_term;
} ops_runner;

/* Install the stop handlers (SIGINT, SIGTERM) and fork min(nworkers, ntasks) workers. The
 * caller's registry connection must be closed first (a worker opens its own; the caller
 * may open one again once they are forked). progress gets ticks (slug NULL). TN_OK, or
 * TN_IO with err set (ops_runner_finish still ends the ones started). */
int ops_runner_start(ops_runner *j, const ops_runner_ops *ops, void *ctx, int ntasks,
                     int nworkers, ops_progress_fn progress, void *progress_ctx, char *err,
                     size_t errlen);
/* Hand out tasks [j->next, limit) until all came back or the run stopped (a signal, stop on
 * error, no worker left), with a progress tick at each turn. May be called again (after a
 * canary). */
void ops_runner_run(ops_runner *j, int limit, bool stop_on_error);
/* End the workers (each after the task in hand), the final tick, restore the handlers. */
void ops_runner_finish(ops_runner *j);


#endif
