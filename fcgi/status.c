/*
 * status.c — status and metrics documents (see status.h).
 * Must not: write to the scoreboard, or block (it runs inside a worker's request).
 */
#include "core/first.h"
#include "fcgi/status.h"
#include "core/clock.h"
#include "fcgi/config.h"

#include <stdio.h>
#include <string.h>

void status_count(const scoreboard *sb, sb_counts *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < SB_SLOTS; i++) {
        int st = __atomic_load_n(&sb->slots[i].state, __ATOMIC_RELAXED);
        if (st == SB_FREE)
            continue;
        c->total++;
        switch (st) {
        case SB_IDLE: c->idle++; break;
        case SB_KEEPALIVE: c->idle++; c->keepalive++; break;
        case SB_READING:
        case SB_RUNNING:
        case SB_FINISHING: c->active++; break;
        case SB_STARTING: c->starting++; break;
        default: break;
        }
    }
}

static void kv_u64(buf *o, const char *k, uint64_t v, bool comma)
{
    if (comma)
        buf_putc(o, ',');
    buf_json_str(o, k);
    buf_putc(o, ':');
    buf_u64(o, v);
}

void status_json(buf *o, scoreboard *sb, const tn_listener *l, const limits *lim,
                 const status_app *apps, int napps)
{
    sb_pool *p = &sb->pool;
    sb_counts c;
    status_count(sb, &c);
    unsigned q = 0, qmax = 0;
    bool have_q = listen_queue(l, &q, &qmax) == 0;
    int64_t now_us = clock_wall_us();
    int64_t now_ns = clock_mono_ns();

    buf_puts(o, "{\"pool\":{\"pm\":");
    buf_json_str(o, config_pm_name(p->pm));
    kv_u64(o, "generation", p->generation, true);
    kv_u64(o, "start_time", (uint64_t)(p->start_wall_us / 1000000), true);
    kv_u64(o, "uptime_s", (uint64_t)((now_us - p->start_wall_us) / 1000000), true);
    kv_u64(o, "accepted", sb_get(&p->accepted), true);
    kv_u64(o, "requests", sb_get(&p->requests), true);
    kv_u64(o, "active", c.active, true);
    kv_u64(o, "idle", c.idle, true);
    kv_u64(o, "keepalive", c.keepalive, true);
    kv_u64(o, "starting", c.starting, true);
    kv_u64(o, "total", c.total, true);
    kv_u64(o, "max_children", (uint64_t)p->max_children, true);
    kv_u64(o, "max_active", p->max_active, true);
    kv_u64(o, "max_children_reached", sb_get(&p->max_children_reached), true);
    buf_puts(o, ",\"listen_queue\":");
    if (have_q)
        buf_u64(o, q);
    else
        buf_puts(o, "null");
    buf_puts(o, ",\"listen_queue_len\":");
    if (have_q)
        buf_u64(o, qmax);
    else
        buf_puts(o, "null");
    if (l->nshards > 0) {
        /* What waits on each shard socket (listen.shards): one long queue is a hot shard. */
        kv_u64(o, "shards", (uint64_t)l->nshards, true);
        buf_puts(o, ",\"shard_queues\":[");
        for (int i = 0; i < l->nshards; i++) {
            tn_listener one = {.fd = l->shard_fd[i], .is_unix = l->is_unix};
            unsigned sq = 0, sqmax = 0;
            if (i > 0)
                buf_putc(o, ',');
            if (listen_queue(&one, &sq, &sqmax) == 0)
                buf_u64(o, sq);
            else
                buf_puts(o, "null");
        }
        buf_putc(o, ']');
    }
    kv_u64(o, "slow_requests", sb_get(&p->slow), true);
    kv_u64(o, "timeouts", sb_get(&p->timeouts), true);
    kv_u64(o, "crashes", sb_get(&p->crashes), true);
    kv_u64(o, "respawns", sb_get(&p->respawns), true);
    buf_puts(o, ",\"brake\":");
    buf_puts(o, __atomic_load_n(&p->brake, __ATOMIC_RELAXED) ? "true" : "false");
    kv_u64(o, "reloads", sb_get(&p->reloads), true);
    kv_u64(o, "reload_failures", sb_get(&p->reload_failures), true);
    kv_u64(o, "rejected_deadline", sb_get(&p->rejected_deadline), true);
    kv_u64(o, "rejected_tenant_limit", sb_get(&p->rejected_tenant_limit), true);
    kv_u64(o, "keepalive_released", sb_get(&p->keepalive_released), true);
    kv_u64(o, "malformed", sb_get(&p->malformed), true);
    kv_u64(o, "get_values", sb_get(&p->get_values), true);
    buf_puts(o, "},\"apps\":[");
    for (int i = 0; i < napps; i++) {
        buf_puts(o, i ? ",{\"name\":" : "{\"name\":");
        buf_json_str(o, apps[i].name);
        buf_puts(o, ",\"version\":");
        buf_json_str(o, apps[i].version);
        buf_puts(o, ",\"mount\":");
        buf_json_str(o, apps[i].mount);
        buf_puts(o, ",\"module\":");
        buf_json_str(o, apps[i].path);
        buf_putc(o, '}');
    }
    buf_puts(o, "],\"workers\":[");
    bool first = true;
    for (int i = 0; i < SB_SLOTS; i++) {
        if (__atomic_load_n(&sb->slots[i].state, __ATOMIC_RELAXED) == SB_FREE)
            continue;
        sb_slot s;
        sb_slot_read(&sb->slots[i], &s);
        if (s.state == SB_FREE)
            continue;
        if (!first)
            buf_putc(o, ',');
        first = false;
        buf_puts(o, "{\"pid\":");
        buf_i64(o, s.pid);
        kv_u64(o, "generation", s.generation, true);
        if (s.shard >= 0)
            kv_u64(o, "shard", (uint64_t)s.shard, true);
        buf_puts(o, ",\"state\":");
        buf_json_str(o, sb_state_name(s.state));
        kv_u64(o, "requests", s.requests, true);
        kv_u64(o, "uptime_s", (uint64_t)((now_ns - s.started_ns) / 1000000000), true);
        bool busy = s.state == SB_READING || s.state == SB_RUNNING || s.state == SB_FINISHING;
        if (busy && s.req_start_ns) {
            buf_puts(o, ",\"request\":{\"method\":");
            buf_json_str(o, s.method);
            buf_puts(o, ",\"uri\":");
            buf_json_str(o, s.uri);
            buf_puts(o, ",\"tenant\":");
            buf_json_str(o, s.tenant[0] ? s.tenant : NULL);
            buf_puts(o, ",\"id\":");
            buf_json_str(o, s.req_id);
            kv_u64(o, "duration_us", (uint64_t)((now_ns - s.req_start_ns) / 1000), true);
            buf_putc(o, '}');
        }
        buf_puts(o, ",\"last_status\":");
        buf_i64(o, s.last_status);
        kv_u64(o, "last_duration_us", (uint64_t)s.last_duration_us, true);
        buf_putc(o, '}');
    }
    buf_puts(o, "],\"tenants\":[");
    limits_entry top[50];
    int nt = limits_top(lim, top, (int)TN_ARRAY_LEN(top));
    for (int i = 0; i < nt; i++) {
        if (i)
            buf_putc(o, ',');
        buf_puts(o, "{\"id\":");
        buf_i64(o, top[i].tenant_id);
        buf_puts(o, ",\"slug\":");
        buf_json_str(o, top[i].slug);
        kv_u64(o, "inflight", (uint64_t)(top[i].inflight > 0 ? top[i].inflight : 0), true);
        kv_u64(o, "max_inflight", (uint64_t)top[i].max_seen, true);
        kv_u64(o, "requests", top[i].requests, true);
        kv_u64(o, "errors", top[i].errors, true);
        kv_u64(o, "rejected", top[i].rejected, true);
        buf_putc(o, '}');
    }
    buf_puts(o, "]}\n");
}

static void metric(buf *o, const char *name, const char *type, const char *help)
{
    buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value of the text format: backslash, double quote and newline escaped. */
static void label_value(buf *o, const char *v)
{
    for (const char *p = v != NULL ? v : ""; *p != '\0'; p++) {
        if (*p == '\\' || *p == '"')
            buf_putc(o, '\\');
        if (*p == '\n')
            buf_puts(o, "\\n");
        else
            buf_putc(o, *p);
    }
}

void status_metrics(buf *o, scoreboard *sb, const tn_listener *l, const status_app *apps,
                    int napps)
{
    sb_pool *p = &sb->pool;
    sb_counts c;
    status_count(sb, &c);

    metric(o, "tenancy_up", "gauge", "1 when the host answers");
    buf_puts(o, "tenancy_up 1\n");
    metric(o, "tenancy_start_time_seconds", "gauge", "Start time of the master, Unix seconds");
    buf_printf(o, "tenancy_start_time_seconds %lld\n", (long long)(p->start_wall_us / 1000000));
    metric(o, "tenancy_generation", "gauge", "Configuration generation (bumped by each reload)");
    buf_printf(o, "tenancy_generation %u\n", p->generation);

    metric(o, "tenancy_app_info", "gauge", "The apps loaded, by name, version and mount");
    for (int i = 0; i < napps; i++) {
        buf_puts(o, "tenancy_app_info{name=\"");
        label_value(o, apps[i].name);
        buf_puts(o, "\",version=\"");
        label_value(o, apps[i].version);
        buf_puts(o, "\",mount=\"");
        label_value(o, apps[i].mount);
        buf_puts(o, "\"} 1\n");
    }

    metric(o, "tenancy_workers", "gauge", "Worker processes by state");
    buf_printf(o, "tenancy_workers{state=\"active\"} %u\n", c.active);
    buf_printf(o, "tenancy_workers{state=\"idle\"} %u\n", c.idle - c.keepalive);
    buf_printf(o, "tenancy_workers{state=\"keepalive\"} %u\n", c.keepalive);
    buf_printf(o, "tenancy_workers{state=\"starting\"} %u\n", c.starting);
    metric(o, "tenancy_max_children", "gauge", "Configured pm.max_children");
    buf_printf(o, "tenancy_max_children %d\n", p->max_children);
    metric(o, "tenancy_max_active_workers", "gauge", "Most workers busy at once since start");
    buf_printf(o, "tenancy_max_active_workers %u\n", p->max_active);

    unsigned q = 0, qmax = 0;
    if (listen_queue(l, &q, &qmax) == 0) {
        metric(o, "tenancy_listen_queue", "gauge", "Connections waiting to be accepted");
        buf_printf(o, "tenancy_listen_queue %u\n", q);
        metric(o, "tenancy_listen_queue_length", "gauge", "Capacity of the listen queue");
        buf_printf(o, "tenancy_listen_queue_length %u\n", qmax);
    }

    metric(o, "tenancy_accepted_connections_total", "counter", "FastCGI connections accepted");
    buf_printf(o, "tenancy_accepted_connections_total %llu\n",
               (unsigned long long)sb_get(&p->accepted));
    metric(o, "tenancy_requests_total", "counter", "Requests answered, by status class");
    for (int k = 1; k <= 5; k++)
        buf_printf(o, "tenancy_requests_total{code=\"%dxx\"} %llu\n", k,
                   (unsigned long long)sb_get(&p->status_class[k]));

    metric(o, "tenancy_request_duration_seconds", "histogram",
           "Time from the end of reading the params to the end of the response");
    unsigned long long cum = 0;
    for (int b = 0; b < SB_NBUCKETS; b++) {
        cum += sb_get(&p->duration_bucket[b]);
        buf_printf(o, "tenancy_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                   sb_bucket_bounds[b], cum);
    }
    cum += sb_get(&p->duration_bucket[SB_NBUCKETS]);
    buf_printf(o, "tenancy_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    buf_printf(o, "tenancy_request_duration_seconds_sum %.6f\n",
               (double)sb_get(&p->duration_sum_us) / 1e6);
    buf_printf(o, "tenancy_request_duration_seconds_count %llu\n", cum);

    struct {
        const char *name, *help;
        uint64_t *v;
    } counters[] = {
        {"tenancy_slow_requests_total", "Requests that ran past slow_request", &p->slow},
        {"tenancy_request_timeouts_total", "Workers killed by request_timeout", &p->timeouts},
        {"tenancy_worker_crashes_total", "Workers that died abnormally", &p->crashes},
        {"tenancy_worker_respawns_total", "Workers started to replace others", &p->respawns},
        {"tenancy_reloads_total", "Successful reloads", &p->reloads},
        {"tenancy_reload_failures_total", "Reloads refused or rolled back", &p->reload_failures},
        {"tenancy_keepalive_released_total", "FastCGI connections passed to another worker",
         &p->keepalive_released},
        {"tenancy_malformed_streams_total", "FastCGI streams refused as malformed", &p->malformed},
        {"tenancy_max_children_reached_total", "Times a spawn was wanted at pm.max_children",
         &p->max_children_reached},
    };
    for (size_t i = 0; i < TN_ARRAY_LEN(counters); i++) {
        metric(o, counters[i].name, "counter", counters[i].help);
        buf_printf(o, "%s %llu\n", counters[i].name, (unsigned long long)sb_get(counters[i].v));
    }
    metric(o, "tenancy_rejected_requests_total", "counter", "Requests refused before running");
    buf_printf(o, "tenancy_rejected_requests_total{reason=\"deadline\"} %llu\n",
               (unsigned long long)sb_get(&p->rejected_deadline));
    buf_printf(o, "tenancy_rejected_requests_total{reason=\"tenant_limit\"} %llu\n",
               (unsigned long long)sb_get(&p->rejected_tenant_limit));
    metric(o, "tenancy_respawn_brake", "gauge", "1 while the crash-storm brake is engaged");
    buf_printf(o, "tenancy_respawn_brake %u\n", __atomic_load_n(&p->brake, __ATOMIC_RELAXED));
}
