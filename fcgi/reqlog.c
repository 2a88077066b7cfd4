/*
 * reqlog.c — a worker's access log: one JSON line per request, gathered by accesslog.c, and
 * the reopen after a rotation (the master bumps the scoreboard's log generation).
 *
 * Must not: write a line before the request's status and size are final, or keep writing
 * to a rotated file.
 */
#include "core/first.h"
#include "core/log.h"
#include "core/rc.h"
#include "fcgi/worker_int.h"
#include "tenancy/chain.h"
#include "tenancy/tenant.h"

#include <string.h>

/* (Re)open the access log: the lines gathered for the old file are written there first. */
void reqlog_open(worker *w)
{
    const char *p = w->cfg->access_log;
    alarm_alog = NULL;
    alog_close(w->alog);
    w->alog = NULL;
    if (!w->cfg->log_requests || p == NULL || p[0] == '\0' || strcmp(p, "off") == 0)
        return;
    int rc = alog_open(p, (size_t)w->cfg->access_log_buffer, w->cfg->access_log_flush_ms,
                       (size_t)w->cfg->access_log_writeback, &w->alog);
    if (rc == TN_NOMEM)
        log_error("cannot open access_log %s: out of memory", p);
    else if (rc != TN_OK)
        log_error("cannot open access_log %s: %m", p);
    alarm_alog = w->alog;
}

void reqlog_check_reopen(worker *w)
{
    uint32_t g = __atomic_load_n(&w->sb->pool.log_generation, __ATOMIC_RELAXED);
    if (g == w->log_gen)
        return;
    w->log_gen = g;
    log_reopen();
    reqlog_open(w);
}

TN_HOT void reqlog_line(worker *w, const tn_request *r, int status, int64_t us)
{
    reqlog_check_reopen(w);   /* a rotation must not leave this line in the old file */
    if (w->alog == NULL)
        return;
    buf *l = &w->line;
    buf_reset(l);
    char ts[40];
    log_timestamp(ts, sizeof(ts));
    buf_lit(l, "{\"time\":\"");
    buf_append(l, ts, str_len(ts));
    buf_lit(l, "\",\"req\":");
    buf_json_str(l, r->req_id);
    buf_lit(l, ",\"method\":");
    buf_json_str(l, r->method);
    buf_lit(l, ",\"uri\":");
    buf_json_str(l, r->path);
    buf_lit(l, ",\"host\":");
    buf_json_str(l, tn_host(r));
    buf_lit(l, ",\"status\":");
    buf_i64(l, status);
    buf_lit(l, ",\"bytes\":");
    buf_u64(l, r->bytes_out);
    buf_lit(l, ",\"us\":");
    buf_i64(l, us);
    buf_lit(l, ",\"pid\":");
    buf_i64(l, w->slot->pid);
    if (r->mount != NULL) {
        /* With mounts, the app that served it: its prefix ("" the root app); uri is the path
         * it saw. */
        buf_lit(l, ",\"mount\":");
        buf_json_str(l, r->mount);
    }
    if (r->tenant != NULL) {
        buf_lit(l, ",\"tenant\":{\"id\":");
        buf_i64(l, r->tenant->id);
        buf_lit(l, ",\"slug\":");
        buf_json_str(l, r->tenant->slug);
        buf_putc(l, '}');
    }
    if (r->detached)
        buf_lit(l, ",\"stream\":\"handed off\"");   /* the hub answers it from here */
    if (status >= 400) {
        buf_lit(l, ",\"stage\":");
        buf_json_str(l, chain_stage(r));
    }
    buf_lit(l, "}\n");
    if (!l->oom)
        alog_line(w->alog, l->p, l->len, w->now_ns / 1000000);
}
