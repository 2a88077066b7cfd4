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
    for (int i = 0, n = sb_slots_used(sb); i < n; i++) {
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

/* The stream hub (fcgi/hub.h): ,"hub":{running, counters, the tenants with most streams}. */
static void hub_json(buf *o, const sb_hub *h)
{
    int32_t pid = __atomic_load_n(&h->pid, __ATOMIC_ACQUIRE);
    buf_puts(o, ",\"hub\":{\"running\":");
    buf_puts(o, pid ? "true" : "false");
    kv_u64(o, "pid", (uint64_t)(pid > 0 ? pid : 0), true);
    kv_u64(o, "subscribers", sb_get(&h->subscribers), true);
    kv_u64(o, "max_total", (uint64_t)h->max_total, true);
    kv_u64(o, "max_per_tenant", (uint64_t)h->max_per_tenant, true);
    kv_u64(o, "streams", sb_get(&h->streams), true);
    kv_u64(o, "handed_off", sb_get(&h->handed_off), true);
    kv_u64(o, "events_sent", sb_get(&h->events_sent), true);
    kv_u64(o, "heartbeats", sb_get(&h->heartbeats), true);
    kv_u64(o, "bytes_buffered", sb_get(&h->bytes_buffered), true);
    kv_u64(o, "dropped_slow", sb_get(&h->dropped_slow), true);
    kv_u64(o, "ended_client", sb_get(&h->ended_client), true);
    kv_u64(o, "ended_tenant", sb_get(&h->ended_tenant), true);
    kv_u64(o, "ended_stop", sb_get(&h->ended_stop), true);
    kv_u64(o, "refused_limit", sb_get(&h->refused_limit), true);
    kv_u64(o, "kept_returned", sb_get(&h->kept_returned), true);
    kv_u64(o, "restarts", sb_get(&h->restarts), true);
    /* the ten tenants with most streams: one pass over the table, insertion into ten */
    sb_hub_tenant top[10];
    int n = 0;
    for (int i = 0; i < SB_HUB_TENANTS; i++) {
        sb_hub_tenant e = {__atomic_load_n(&h->tenants[i].tenant_id, __ATOMIC_ACQUIRE),
                           __atomic_load_n(&h->tenants[i].subscribers, __ATOMIC_RELAXED), 0};
        if (e.tenant_id == 0 || e.subscribers <= 0)
            continue;
        int k = n < 10 ? n++ : 10;
        while (k > 0 && top[k - 1].subscribers < e.subscribers) {
            if (k < 10)
                top[k] = top[k - 1];
            k--;
        }
        if (k < 10)
            top[k] = e;
    }
    buf_puts(o, ",\"top_tenants\":[");
    for (int i = 0; i < n; i++) {
        buf_puts(o, i ? ",{\"id\":" : "{\"id\":");
        buf_i64(o, top[i].tenant_id);
        kv_u64(o, "subscribers", (uint64_t)top[i].subscribers, true);
        buf_putc(o, '}');
    }
    buf_puts(o, "]}");
}

/* The job workers (fcgi/jobworker.h): ,"jobs":{counters, "workers":[each one]}. */
static const char *const job_state_names[] = {"free", "starting", "idle", "running", "exiting"};

static void jobs_json(buf *o, sb_jobs *j, int64_t now_ns)
{
    buf_puts(o, ",\"jobs\":{\"enqueued\":");
    buf_printf(o, "%llu", (unsigned long long)sb_get(&j->enqueued));
    kv_u64(o, "claimed", sb_get(&j->claimed), true);
    kv_u64(o, "done", sb_get(&j->done), true);
    kv_u64(o, "failed", sb_get(&j->failed), true);
    kv_u64(o, "dead", sb_get(&j->dead), true);
    kv_u64(o, "recovered", sb_get(&j->recovered), true);
    kv_u64(o, "timeouts", sb_get(&j->timeouts), true);
    kv_u64(o, "crashes", sb_get(&j->crashes), true);
    kv_u64(o, "scheduled", sb_get(&j->scheduled), true);
    buf_puts(o, ",\"workers\":[");
    bool first = true;
    for (int i = 0; i < SB_JOB_SLOTS; i++) {
        sb_job_slot *s = &j->slots[i];
        int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
        int st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (pid == 0 || st <= SBJ_FREE || st > SBJ_EXITING)
            continue;
        buf_puts(o, first ? "{\"pid\":" : ",{\"pid\":");
        first = false;
        buf_printf(o, "%d", (int)pid);
        kv_u64(o, "generation", s->generation, true);
        buf_puts(o, ",\"state\":");
        buf_json_str(o, job_state_names[st]);
        kv_u64(o, "jobs", sb_get(&s->jobs), true);
        int64_t id = __atomic_load_n(&s->job_id, __ATOMIC_ACQUIRE);
        if (st == SBJ_RUNNING && id != 0) {
            char t[64], n[64];
            snprintf(t, sizeof(t), "%s", s->tenant);
            snprintf(n, sizeof(n), "%s", s->name);
            kv_u64(o, "job", (uint64_t)id, true);
            buf_puts(o, ",\"tenant\":");
            buf_json_str(o, t);
            buf_puts(o, ",\"name\":");
            buf_json_str(o, n);
            int64_t start = __atomic_load_n(&s->job_start_ns, __ATOMIC_RELAXED);
            kv_u64(o, "running_ms", (uint64_t)((now_ns - start) / 1000000), true);
        }
        buf_putc(o, '}');
    }
    buf_puts(o, "]}");
}

/* The workers' connections open now (their slots'), summed. */
static void storage_open(scoreboard *sb, uint64_t *pg, uint64_t *sqlite)
{
    *pg = *sqlite = 0;
    for (int i = 0, n = sb_slots_used(sb); i < n; i++) {
        const sb_slot *s = &sb->slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == SB_FREE)
            continue;
        *pg += __atomic_load_n(&s->pg_open, __ATOMIC_RELAXED);
        *sqlite += __atomic_load_n(&s->sqlite_open, __ATOMIC_RELAXED);
    }
}

/* Ends the pool object and adds "storage": what the workers' storage pools did (opened,
 * closed at a bound, evicted for room) and hold now. */
static void storage_json(buf *o, scoreboard *sb)
{
    sb_storage *t = &sb->storage;
    uint64_t pg, sqlite;
    storage_open(sb, &pg, &sqlite);
    buf_puts(o, "},\"storage\":{\"pg_open\":");
    buf_u64(o, pg);
    kv_u64(o, "sqlite_open", sqlite, true);
#define STORAGE_KV(f) kv_u64(o, #f, sb_get(&t->f), true);
    SB_STORAGE_COUNTERS(STORAGE_KV)
#undef STORAGE_KV
    buf_putc(o, '}');
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
    kv_u64(o, "affinity_sent", sb_get(&p->affinity_sent), true);
    kv_u64(o, "affinity_spilled", sb_get(&p->affinity_spilled), true);
    kv_u64(o, "malformed", sb_get(&p->malformed), true);
    kv_u64(o, "get_values", sb_get(&p->get_values), true);
    storage_json(o, sb);
    buf_puts(o, ",\"apps\":[");
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
    for (int i = 0, n = sb_slots_used(sb); i < n; i++) {
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
        kv_u64(o, "pg_open", s.pg_open, true);
        kv_u64(o, "sqlite_open", s.sqlite_open, true);
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
        kv_u64(o, "waiting", (uint64_t)(top[i].waiting > 0 ? top[i].waiting : 0), true);
        buf_putc(o, '}');
    }
    buf_putc(o, ']');
    hub_json(o, &sb->hub);
    jobs_json(o, &sb->jobs, now_ns);
    buf_puts(o, "}\n");
}

static void metric(buf *o, const char *name, const char *type, const char *help)
{
    buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Counters without labels, each with its HELP and TYPE lines. */
typedef struct named_counter {
    const char *name, *help;
    uint64_t *v;
} named_counter;

static void counters_out(buf *o, const named_counter *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        metric(o, c[i].name, "counter", c[i].help);
        buf_printf(o, "%s %llu\n", c[i].name, (unsigned long long)sb_get(c[i].v));
    }
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

/* The storage pools' counts as metrics, labelled by kind (and by reason for the closes). */
static void storage_metrics(buf *o, scoreboard *sb)
{
    sb_storage *t = &sb->storage;
    uint64_t pg, sqlite;
    storage_open(sb, &pg, &sqlite);
    metric(o, "tenancy_storage_open", "gauge",
           "Connections (PostgreSQL) and handles (SQLite) the workers' pools hold");
    buf_printf(o, "tenancy_storage_open{kind=\"postgresql\"} %llu\n", (unsigned long long)pg);
    buf_printf(o, "tenancy_storage_open{kind=\"sqlite\"} %llu\n", (unsigned long long)sqlite);
    metric(o, "tenancy_storage_opened_total", "counter",
           "PostgreSQL connections and SQLite handles the workers' pools opened");
    buf_printf(o, "tenancy_storage_opened_total{kind=\"postgresql\"} %llu\n",
               (unsigned long long)sb_get(&t->pg_connects));
    buf_printf(o, "tenancy_storage_opened_total{kind=\"sqlite\"} %llu\n",
               (unsigned long long)sb_get(&t->sqlite_opens));
    metric(o, "tenancy_storage_closed_total", "counter",
           "Connections and handles closed at a bound (max_tenants, max_backend_memory) or "
           "for room (pg_db_max_open, sqlite_max_open)");
    struct {
        const char *kind, *reason;
        uint64_t *v;
    } closed[] = {
        {"postgresql", "max_tenants", &t->pg_closed_tenants},
        {"postgresql", "max_backend_memory", &t->pg_closed_memory},
        {"postgresql", "pg_db_max_open", &t->pg_evicted},
        {"sqlite", "sqlite_max_open", &t->sqlite_evicted},
    };
    for (size_t i = 0; i < TN_ARRAY_LEN(closed); i++)
        buf_printf(o, "tenancy_storage_closed_total{kind=\"%s\",reason=\"%s\"} %llu\n",
                   closed[i].kind, closed[i].reason, (unsigned long long)sb_get(closed[i].v));
    const named_counter counters[] = {
        {"tenancy_storage_sqlite_hits_total",
         "Requests that found their tenant's SQLite handle open", &t->sqlite_hits},
        {"tenancy_storage_pg_connect_failures_total", "PostgreSQL connects that failed",
         &t->pg_unreachable},
        {"tenancy_storage_pg_refused_total",
         "Requests refused at once while their PostgreSQL server was backed off", &t->pg_refused},
        {"tenancy_storage_memory_reads_total",
         "Reads of a backend's memory for placement.NAME.max_backend_memory", &t->memory_reads},
        {"tenancy_storage_resets_total",
         "Connections a request left in a transaction or with session state, cleaned",
         &t->resets},
    };
    counters_out(o, counters, TN_ARRAY_LEN(counters));
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

    const named_counter counters[] = {
        {"tenancy_slow_requests_total", "Requests that ran past slow_request", &p->slow},
        {"tenancy_request_timeouts_total", "Workers killed by request_timeout", &p->timeouts},
        {"tenancy_worker_crashes_total", "Workers that died abnormally", &p->crashes},
        {"tenancy_worker_respawns_total", "Workers started to replace others", &p->respawns},
        {"tenancy_reloads_total", "Successful reloads", &p->reloads},
        {"tenancy_reload_failures_total", "Reloads refused or rolled back", &p->reload_failures},
        {"tenancy_keepalive_released_total", "FastCGI connections passed to another worker",
         &p->keepalive_released},
        {"tenancy_affinity_sent_total", "Requests sent to their tenant's home worker",
         &p->affinity_sent},
        {"tenancy_affinity_spilled_total",
         "Requests served where they arrived because their tenant's home was too far behind",
         &p->affinity_spilled},
        {"tenancy_malformed_streams_total", "FastCGI streams refused as malformed", &p->malformed},
        {"tenancy_max_children_reached_total", "Times a spawn was wanted at pm.max_children",
         &p->max_children_reached},
    };
    counters_out(o, counters, TN_ARRAY_LEN(counters));
    storage_metrics(o, sb);
    metric(o, "tenancy_rejected_requests_total", "counter", "Requests refused before running");
    buf_printf(o, "tenancy_rejected_requests_total{reason=\"deadline\"} %llu\n",
               (unsigned long long)sb_get(&p->rejected_deadline));
    buf_printf(o, "tenancy_rejected_requests_total{reason=\"tenant_limit\"} %llu\n",
               (unsigned long long)sb_get(&p->rejected_tenant_limit));
    sb_hub *h = &sb->hub;
    const named_counter hub_counters[] = {
        {"tenancy_hub_streams_total", "Streams the hub took", &h->streams},
        {"tenancy_hub_events_sent_total", "Events written to streams", &h->events_sent},
        {"tenancy_hub_heartbeats_total", "Heartbeats written to idle streams", &h->heartbeats},
        {"tenancy_hub_dropped_slow_total", "Streams ended over stream.max_buffer", &h->dropped_slow},
        {"tenancy_hub_ended_client_total", "Streams whose client went away", &h->ended_client},
        {"tenancy_hub_ended_tenant_total", "Streams ended: tenant suspended or deleted",
         &h->ended_tenant},
        {"tenancy_hub_refused_total", "Streams refused over a limit", &h->refused_limit},
        {"tenancy_hub_restarts_total", "Stream hubs started after the first", &h->restarts},
    };
    counters_out(o, hub_counters, TN_ARRAY_LEN(hub_counters));
    metric(o, "tenancy_hub_subscribers", "gauge", "Open streams");
    buf_printf(o, "tenancy_hub_subscribers %llu\n", (unsigned long long)sb_get(&h->subscribers));
    metric(o, "tenancy_hub_bytes_buffered", "gauge", "Bytes waiting for slow stream clients");
    buf_printf(o, "tenancy_hub_bytes_buffered %llu\n",
               (unsigned long long)sb_get(&h->bytes_buffered));
    metric(o, "tenancy_hub_up", "gauge", "1 while the stream hub runs");
    buf_printf(o, "tenancy_hub_up %d\n", __atomic_load_n(&h->pid, __ATOMIC_ACQUIRE) ? 1 : 0);
    sb_jobs *jb = &sb->jobs;
    const named_counter job_counters[] = {
        {"tenancy_jobs_enqueued_total", "Jobs queued by this host", &jb->enqueued},
        {"tenancy_jobs_claimed_total", "Job attempts started", &jb->claimed},
        {"tenancy_jobs_done_total", "Jobs done", &jb->done},
        {"tenancy_jobs_failed_total", "Job attempts that failed", &jb->failed},
        {"tenancy_jobs_dead_total", "Jobs kept as dead (attempts used up)", &jb->dead},
        {"tenancy_jobs_recovered_total", "Jobs of dead workers or expired leases queued again",
         &jb->recovered},
        {"tenancy_jobs_timeouts_total", "Job attempts stopped at their timeout", &jb->timeouts},
        {"tenancy_job_worker_crashes_total", "Job workers that died", &jb->crashes},
    };
    counters_out(o, job_counters, TN_ARRAY_LEN(job_counters));
    int jrun = 0, jup = 0;
    for (int i = 0; i < SB_JOB_SLOTS; i++) {
        int st = __atomic_load_n(&jb->slots[i].state, __ATOMIC_ACQUIRE);
        jup += st == SBJ_IDLE || st == SBJ_RUNNING;
        jrun += st == SBJ_RUNNING;
    }
    metric(o, "tenancy_job_workers", "gauge", "Job workers ready or running a job");
    buf_printf(o, "tenancy_job_workers %d\n", jup);
    metric(o, "tenancy_job_workers_busy", "gauge", "Job workers running a job");
    buf_printf(o, "tenancy_job_workers_busy %d\n", jrun);
    metric(o, "tenancy_respawn_brake", "gauge", "1 while the crash-storm brake is engaged");
    buf_printf(o, "tenancy_respawn_brake %u\n", __atomic_load_n(&p->brake, __ATOMIC_RELAXED));
}
