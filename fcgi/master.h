/*
 * master.h — the supervisor: owns the listen socket and the scoreboard, forks workers, reaps
 * them, reloads and stops. It never accepts or serves a request and never loads the app.
 */
#ifndef TN_FCGI_MASTER_H
#define TN_FCGI_MASTER_H

#include "fcgi/config.h"

/* What the composition root (main.c) lends the master, so that the master calls into other
 * modules without knowing them. */
typedef struct master_hooks {
    /* A worker ended while its scoreboard slot held a pending audit entry (a console
     * statement it had not finished): close the entry. cfg is the generation that serves,
     * `how` says how the worker ended ("worker 123 died (signal 11, ...)"). Called from the
     * loop after reaping, never from a signal handler. NULL: nothing to close. */
    void (*audit_died)(const tn_config *cfg, const char *audit_id, const char *req_id,
                       const char *how);
} master_hooks;

/* Run until stopped. Takes ownership of cfg; hooks may be NULL. Returns the process exit
 * status (0: a clean stop; 1: could not start). */
int master_run(tn_config *cfg, const char *config_path, const master_hooks *hooks);

#endif
