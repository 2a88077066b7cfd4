/*
 * master.h — the supervisor: owns the listen socket and the scoreboard, forks workers, reaps
 * them, reloads and stops. It never accepts or serves a request and never loads the app.
 */
#ifndef TN_FCGI_MASTER_H
#define TN_FCGI_MASTER_H

#include "fcgi/config.h"

/* Run until stopped. Takes ownership of cfg. Returns the process exit status (0: a clean
 * stop; 1: could not start). */
int master_run(tn_config *cfg, const char *config_path);

#endif
