/*
 * jobworker.h — a job worker: the second class of worker in the pool (`pm.jobs`), which runs
 * the apps' jobs from the registry's queue (tenancy/jobs.h) and never serves HTTP.
 *
 * The master starts pm.jobs of them per generation, restarts one that dies (with the crash
 * backoff), replaces one after pm.max_jobs jobs, and on a reload starts the new
 * generation's and lets the old ones finish the job in hand. A job worker loads the same
 * apps as the HTTP workers, claims jobs fairly across tenants, and runs each in its tenant's
 * context (chain_run_job: storage scope set, released and asserted empty after) under
 * jobs.timeout: past it, the worker exits (an app's code cannot be interrupted safely), the
 * master sees why, and the job's lease is handed to the replacement, which queues the job
 * again at once. Index 0 also queues due schedules, reaps expired leases and prunes. A job of
 * a host module (app "host.NAME": the panel's migrate and move) goes to that module's
 * handler (tenancy/handler.h), which the job worker sets up after the apps.
 */
#ifndef TN_FCGI_JOBWORKER_H
#define TN_FCGI_JOBWORKER_H

#include <stdbool.h>
#include <sys/types.h>

#include "fcgi/config.h"
#include "fcgi/scoreboard.h"
#include "tenancy/events.h"

enum {
    JOB_EXIT_OK = 0,        /* recycled or asked to stop */
    JOB_EXIT_INIT = 2,      /* an app failed to load or init */
    JOB_EXIT_TIMEOUT = 3,   /* the job in hand passed its timeout */
    JOB_EXIT_SETUP = 4      /* privileges, the registry's handle */
};

#define JOB_ORPHANS_MAX 8

typedef struct jobworker_args {
    const tn_config *cfg;
    scoreboard *sb;
    event_log *events;
    int index;              /* its entry in sb->jobs.slots */
    unsigned generation;
    int number;             /* 0..pm.jobs-1 within its generation (0 does the chores) */
    pid_t master_pid;
    int nclose;
    int close_fds[8 + 3 * (TN_MAX_SHARDS + 1)];
    /* Leases of job workers that died holding a job: queued again first thing. */
    int norphans;
    char orphans[JOB_ORPHANS_MAX][48];
    char orphan_why[JOB_ORPHANS_MAX][160];
    /* The first job worker a master starts: every job this host left running (its leases
     * start with host_key) is queued again, since none of its workers can be alive. */
    bool recover_host;
} jobworker_args;

/* This host's lease prefix (12 characters): the machine's name and the configuration
 * file's path, hashed, so two tenancyd on one machine with one registry never take each
 * other's leases. */
void jobworker_host_key(const tn_config *cfg, char out[13]);

/* Run a job worker; never returns. */
TN_NORETURN void jobworker_main(const jobworker_args *a);

#endif
