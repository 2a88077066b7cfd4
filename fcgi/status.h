/*
 * status.h — the status (JSON) and metrics (Prometheus text) documents, built from the
 * scoreboard by whichever worker is asked.
 */
#ifndef TN_FCGI_STATUS_H
#define TN_FCGI_STATUS_H

#include "core/buf.h"
#include "fcgi/listen.h"
#include "fcgi/scoreboard.h"
#include "tenancy/limits.h"

/* Counts of workers by kind, from one pass over the slots. */
typedef struct sb_counts {
    unsigned total, idle, active, keepalive, starting;
} sb_counts;

void status_count(const scoreboard *sb, sb_counts *c);

/* An app the answering worker loaded: its tn_app name and version, its mount ("" at the
 * root) and its module's path. The master loads no app, so these come from the worker that
 * answers (during a reload, its own generation's). */
typedef struct status_app {
    const char *name, *version, *mount, *path;
} status_app;

/* {"pool":{...},"apps":[...],"workers":[...],"tenants":[the busiest, with their counters]} */
void status_json(buf *o, scoreboard *sb, const tn_listener *l, const limits *lim,
                 const status_app *apps, int napps);

/* Prometheus text exposition format 0.0.4 (the apps as tenancy_app_info). */
void status_metrics(buf *o, scoreboard *sb, const tn_listener *l, const status_app *apps,
                    int napps);

#endif
