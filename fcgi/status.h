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

/* {"pool":{...},"workers":[...],"tenants":[the busiest, with their counters]} */
void status_json(buf *o, scoreboard *sb, const tn_listener *l, const limits *lim);

/* Prometheus text exposition format 0.0.4. */
void status_metrics(buf *o, scoreboard *sb, const tn_listener *l);

#endif
