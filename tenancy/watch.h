/*
 * watch.h — the registry watcher: carries registry changes made on other hosts to this one.
 *
 * With a PostgreSQL registry shared by several hosts, every change sends
 * NOTIFY tenancy_registry (registry.c). The master of each host runs one watcher process
 * that LISTENs and bumps this host's generation file (gen.h) on each notification, so every
 * worker drops its lookup cache by its next request. After a lost connection it reconnects
 * with a growing delay (1 s to 30 s) and bumps once more, since notifications sent meanwhile
 * are gone. With a SQLite registry there is nothing to watch (all writers share the file).
 */
#ifndef TN_TENANCY_WATCH_H
#define TN_TENANCY_WATCH_H

#include <signal.h>

#include "tenancy/config.h"

/* True when this configuration needs a watcher. */
bool watch_needed(const tenancy_config *cfg);

/* Run until *stop becomes non-zero. Returns 0. */
int watch_run(const tenancy_config *cfg, volatile sig_atomic_t *stop);

#endif
