/*
 * serve.c — one request of a worker (see worker.h): check, read, hand to the handlers,
 * answer, keep or close.
 *
 * One request. First a peek at the stream (proto.c) answers GET_VALUES, refuses unknown
 * roles and impossible parameter lengths; then libfcgi reads the params from the
 * connection we hand it (FCGX_Accept_r with our fd already set and no listen socket, so it
 * can never block in accept); then the first handler of the list that claims the request
 * (fcgi/handler.h) serves it; then the response is flushed and the connection kept or
 * closed by us, never by libfcgi's 2-second lingering close.
 *
 * Timeouts. Reads have deadlines (SO_RCVTIMEO, set once per connection before the first
 * request whose bytes are not all there yet, and deadlines on connections waiting for the
 * rest of a request header) and cost only the connection. The whole request is bounded by
 * request_timeout from the master, which watches each worker's request start in the
 * scoreboard and sends SIGALRM: the handler (worker.c) answers 504 when the app wrote
 * nothing yet and exits with WORKER_EXIT_TIMEOUT; the master logs the request and kills a
 * worker that overstays. No timer system call is made per request.
 *
 * Must not: touch another connection of the table while a request runs (the handoff thread
 * owns them then), or log without the request context set.
 */
#include "core/first.h"
#include "core/clock.h"
#include "core/kv.h"
#include "core/log.h"
#include "core/rc.h"
#include "fcgi/guard.h"
#include "fcgi/handler.h"
#include "fcgi/hub.h"
#include "fcgi/proto.h"
#include "fcgi/worker_int.h"
#include "tenancy/chain.h"
#include "tenancy/limits.h"
#include "tenancy/tenant.h"

#include <errno.h>
#include <fcgiapp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- the FastCGI transport of tenancy/request.h ------------------------------------------ */

static TN_HOT const char *fx_param(void *tx, const char *name)
{
    return kv_env_get(((FCGX_Request *)tx)->envp, name);
}

static TN_HOT int fx_read(void *tx, char *p, int n)
{
    FCGX_Request *fx = tx;
    int got = FCGX_GetStr(p, n, fx->in);
    if (got == 0 && FCGX_GetError(fx->in) != 0)
        return -1;
    return got;
}

/* libfcgi's own printf is never used (it has no %zu and silently stops): bytes only. */
static TN_HOT int fx_write(void *tx, const char *p, size_t n)
{
    FCGX_Request *fx = tx;
    while (n > 0) {
        int chunk = n > 1 << 30 ? 1 << 30 : (int)n;
        if (FCGX_PutStr(p, chunk, fx->out) != chunk)
            return -1;
        p += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

/* tn_flush: what libfcgi buffered leaves now, as STDOUT records. The head is out, so a
 * timeout can no longer answer 504 (it would land inside this response): from here the
 * SIGALRM path only exits, and the web server sees the response cut short. */
static int fx_flush(void *tx)
{
    FCGX_Request *fx = tx;
    alarm_may_answer = 0;
    return FCGX_FFlush(fx->out) == 0 ? 0 : -1;
}

/* The request being served, for fx_hand_off (one at a time per process). */
static worker *serving_w;
static int serving_fd = -1;

static bool drain_stdin(FCGX_Request *fx);

/* tn_subscribe: pass the connection to the stream hub (hub.h). Nothing was written to it
 * yet (request.c checks that the response has not started, and libfcgi sends nothing
 * before a flush), and the request's STDIN must have been read to its end, so the hub
 * starts on a record boundary: the web server sends nothing more on the connection until
 * the response ends. The limits are checked here first so that the app can answer 503
 * itself; the hub checks them again (it answers 503 when a race got past this). */
static int fx_hand_off(void *tx, tn_request *r, const tn_subscription *sub)
{
    FCGX_Request *fx = tx;
    worker *w = serving_w;
    sb_hub *h = &w->sb->hub;
    if (w->args->hub_sock < 0 || __atomic_load_n(&h->pid, __ATOMIC_ACQUIRE) == 0) {
        request_set_error(r, "no stream hub is running (stream.hub)");
        return TN_ERR;
    }
    if ((int64_t)__atomic_load_n(&h->subscribers, __ATOMIC_RELAXED) >=
            __atomic_load_n(&h->max_total, __ATOMIC_RELAXED) ||
        sb_hub_tenant_count(h, r->tenant->id) >= __atomic_load_n(&h->max_per_tenant,
                                                                 __ATOMIC_RELAXED)) {
        sb_inc(&h->refused_limit);
        request_set_error(r, "too many streams (stream.max_total or stream.max_per_tenant)");
        return TN_BUSY;
    }
    if (!drain_stdin(fx)) {
        request_set_error(r, "the request body was not read to its end: cannot hand it on");
        return TN_ERR;
    }
    hub_msg m;
    memset(&m, 0, sizeof(m));
    m.magic = HUB_MSG_MAGIC;
    m.fcgi_id = (uint16_t)fx->requestId;
    m.keep_conn = fx->keepConnection != 0;
    m.has_last = sub->has_last;
    m.last_id = sub->last_id;
    m.tenant_id = r->tenant->id;
    m.started_ms = r->start_ns / 1000000;
    str_copy(m.slug, sizeof(m.slug), r->tenant->slug);
    str_copy(m.req_id, sizeof(m.req_id), r->req_id);
    m.nchannels = sub->nchannels;
    memcpy(m.channels, sub->channels, sizeof(m.channels));
    /* From the send on, the connection is the hub's: a request_timeout alarm must not write
     * its 504 into the hub's stream (it only exits now). */
    alarm_may_answer = 0;
    int rc = hub_send(w->args->hub_sock, serving_fd, &m);
    if (rc == TN_OK) {
        sb_inc(&h->handed_off);
        return TN_OK;
    }
    alarm_may_answer = 1;   /* still ours: a timeout may answer 504 again */
    request_set_error(r, rc == TN_BUSY ? "the stream hub's queue is full"
                                       : "cannot reach the stream hub");
    if (rc == TN_BUSY)
        sb_inc(&h->refused_limit);
    return rc;
}

static const tn_transport fcgi_transport = {fx_param, fx_read, fx_write, fx_flush, fx_hand_off};

/* REQUEST_START ("1733150000.123", nginx $msec) older than queue_timeout? */
static bool past_queue_deadline(worker *w, tn_request *r)
{
    if (w->cfg->queue_timeout_ms <= 0)
        return false;
    const char *s = tn_param(r, "REQUEST_START");
    if (s == NULL || *s < '0' || *s > '9')
        return false;
    /* Seconds, then up to three digits of milliseconds, by hand: strtod costs more than the
     * rest of this check, and it runs for every request. */
    int64_t ms = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 15; s++, digits++)
        ms = ms * 10 + (*s - '0');
    if (*s >= '0' && *s <= '9')
        return false;   /* implausibly far in the future: not a time */
    ms *= 1000;
    if (*s == '.') {
        int scale = 100;
        for (s++; *s >= '0' && *s <= '9'; s++, scale /= 10)
            ms += scale * (*s - '0');
    }
    if (ms <= 0)
        return false;
    return clock_wall_us() / 1000 - ms > w->cfg->queue_timeout_ms;
}

/* The bytes a request id from the web server may hold: [0-9A-Za-z_-]. */
static const bool id_byte[256] = {
    ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true, ['-'] = true, ['_'] = true,
};

static TN_HOT void make_req_id(worker *w, char *out, size_t n, FCGX_Request *fx)
{
    const char *given = kv_env_get(fx->envp, "REQUEST_ID");
    if (given != NULL) {
        /* at most 64 of them, then the NUL (one pass, no strlen) */
        size_t l = 0, max = n - 1 < 64 ? n - 1 : 64;
        while (l <= max && id_byte[(unsigned char)given[l]])
            l++;
        if (l > 0 && l <= max && given[l] == '\0') {
            memcpy(out, given, l + 1);
            return;
        }
    }
    /* "<pid>-<counter>" in hex, without printf (this runs for every request nginx sent no
     * id with) */
    char tmp[40];
    size_t k = str_x64(tmp, (uint32_t)w->slot->pid);
    tmp[k++] = '-';
    k += str_x64(tmp + k, ++w->req_counter);
    tmp[k] = '\0';
    str_copy(out, n, tmp);
}

/* Hand the request to the first handler that claims it (fcgi/handler.h: the panel, the
 * host's endpoints, the chain and the app, in the order the composition root added them).
 * Returns the final HTTP status. */
static TN_HOT int run_request(worker *w, tn_request *r)
{
    if (past_queue_deadline(w, r)) {
        sb_inc(&w->sb->pool.rejected_deadline);
        tn_add_header(r, "Retry-After", "1");
        tn_send_error(r, 503, "the request waited in the queue longer than queue_timeout");
        return r->status;
    }
    const tn_handler *h = handlers_claim(r);
    if (TN_UNLIKELY(h == NULL)) {
        tn_send_error(r, 404, "no handler serves this request");
        return r->status;
    }
    return h->handle(r);
}

/* Prepare the async-signal-safe 504 for this request id. */
static void prepare_timeout_reply(unsigned req_id, int fd)
{
    static const char text[] = "Status: 504 Gateway Timeout\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 33\r\n\r\nthe request ran past its timeout\n";
    size_t n = fcgi_simple_response(alarm_reply, sizeof(alarm_reply), req_id, text,
                                    sizeof(text) - 1);
    alarm_reply_len = (sig_atomic_t)n;
    alarm_fd = fd;
}

/* Every read libfcgi makes on this connection gives up after request_timeout. Set before a
 * request is served unless all of it is already in the socket buffer (most GETs: then no
 * read can block, and the system call is saved); once per connection. */
static void arm_read_timeout(const worker *w, struct conn *c)
{
    if (c->rcvtimeo || w->cfg->request_timeout_ms <= 0)
        return;
    struct timeval tv = {(time_t)(w->cfg->request_timeout_ms / 1000),
                         (suseconds_t)(w->cfg->request_timeout_ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    c->rcvtimeo = true;
}

/* Look at what a readable connection holds, without waiting. Returns TN_OK when a whole
 * request header is there (*req_id set; *whole when its STDIN is there too), TN_AGAIN when a
 * record was answered or skipped (look again), TN_DECLINED when more bytes are needed,
 * TN_DONE when the connection was answered and must close, TN_ERR to close it. */
static TN_HOT int precheck(worker *w, int fd, unsigned *req_id, bool *whole)
{
    ssize_t n = recv(fd, w->peek, w->peek_size, MSG_PEEK | MSG_DONTWAIT);
    w->peek_len = n > 0 ? (size_t)n : 0;
    if (n == 0)
        return TN_ERR;   /* the peer closed */
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? TN_DECLINED : TN_ERR;
    fp_result res;
    switch (fcgi_precheck(w->peek, (size_t)n, (size_t)w->cfg->max_params,
                          (size_t)n == w->peek_size, &res)) {
    case FP_READY:
        *req_id = res.req_id;
        *whole = res.stdin_done;
        return TN_OK;
    case FP_NEED_MORE:
        return TN_DECLINED;
    case FP_SKIP:
        /* The whole record is in the socket buffer: read it off. */
        return recv(fd, w->peek, res.consume, MSG_WAITALL) == (ssize_t)res.consume ? TN_AGAIN
                                                                                     : TN_ERR;
    case FP_MGMT: {
        unsigned char reply[256];
        size_t len;
        if (res.mgmt_type == FCGI_T_GET_VALUES) {
            len = fcgi_get_values_result(reply, sizeof(reply), w->peek + res.mgmt_off,
                                         res.mgmt_len, (unsigned)w->cfg->max_children,
                                         (unsigned)w->cfg->max_children);
            sb_inc(&w->sb->pool.get_values);
        } else {
            len = fcgi_unknown_type(reply, sizeof(reply), res.mgmt_type);
        }
        if (recv(fd, w->peek, res.consume, MSG_WAITALL) != (ssize_t)res.consume)
            return TN_ERR;
        if (len == 0 || write(fd, reply, len) != (ssize_t)len)
            return TN_ERR;
        return TN_AGAIN;
    }
    case FP_BAD_ROLE: {
        unsigned char reply[16];
        size_t len = fcgi_end_request(reply, sizeof(reply), res.req_id, 0, FCGI_UNKNOWN_ROLE);
        (void)!recv(fd, w->peek, res.consume, MSG_WAITALL);
        (void)!write(fd, reply, len);
        log_warn("refused a FastCGI request with role %u (only responder, authorizer and "
                 "filter exist)", res.role);
        return TN_DONE;
    }
    case FP_MALFORMED:
        sb_inc(&w->sb->pool.malformed);
        log_warn("refused a malformed FastCGI stream: %s", res.why);
        return TN_ERR;
    case FP_TOO_BIG: {
        /* The web server gets an answer it can pass on (a bare close would be its 502); the
         * rest of the request is never read, so the connection closes after it. */
        static const char text[] = "Status: 431 Request Header Fields Too Large\r\n"
                                   "Content-Type: text/plain\r\nContent-Length: 40\r\n\r\n"
                                   "the request headers are over max_params\n";
        unsigned char reply[256];
        size_t len = fcgi_simple_response(reply, sizeof(reply), res.req_id, text, sizeof(text) - 1);
        sb_inc(&w->sb->pool.malformed);
        log_warn("refused a FastCGI request: %s (max_params %lld): answered 431", res.why,
                 (long long)w->cfg->max_params);
        if (len > 0)
            (void)!write(fd, reply, len);
        return TN_DONE;
    }
    }
    return TN_ERR;
}

/* Read what the app left of the request body, so the kept connection starts the next
 * request on a record boundary. False when it could not (too much left, or an error). */
static bool drain_stdin(FCGX_Request *fx)
{
    char scratch[8192];
    size_t drained = 0;
    while (drained < (8u << 20)) {
        int n = FCGX_GetStr(scratch, sizeof(scratch), fx->in);
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
    return FCGX_HasSeenEOF(fx->in) && FCGX_GetError(fx->in) == 0;
}

/* After a request, what the worker's storage pool did during it (connections opened, closed
 * at a bound, evicted) is added to the host's counts for the status page and the metrics,
 * and the connections it holds are written to its slot. A worker whose pool has closed its
 * PostgreSQL connection at its bound a second time serves more tenants than one backend
 * keeps (the first close is how tenant.affinity = auto learns that they do not all fit, and
 * after it each worker serves its share): said once per host, with what to change. */
static void storage_publish(worker *w)
{
    uint64_t uses = chain_storage_uses();
    if (uses == w->storage_uses)
        return;   /* the request touched no storage: nothing changed */
    w->storage_uses = uses;
    chain_storage now;
    if (chain_storage_stats(&now) != TN_OK)
        return;
    const chain_storage *seen = &w->storage_seen;
    sb_storage *t = &w->sb->storage;
#define ADD_DELTA(f)                                                                        \
    if (now.f != seen->f)                                                                  \
        __atomic_fetch_add(&t->f, now.f - seen->f, __ATOMIC_RELAXED);
    SB_STORAGE_COUNTERS(ADD_DELTA)
#undef ADD_DELTA
    __atomic_store_n(&w->slot->pg_open, now.pg_open, __ATOMIC_RELAXED);
    __atomic_store_n(&w->slot->sqlite_open, now.sqlite_open, __ATOMIC_RELAXED);
    uint64_t closed = now.pg_closed_memory + now.pg_closed_tenants;
    if (closed >= 2 && seen->pg_closed_memory + seen->pg_closed_tenants < 2 &&
        __atomic_exchange_n(&t->warned, 1, __ATOMIC_RELAXED) == 0) {
        bool memory = now.pg_closed_memory > seen->pg_closed_memory;
        log_warn("a worker closed its PostgreSQL connection at placement.NAME.%s a second "
                   "time: the tenants it serves do not fit in one backend, whose cached "
                   "catalog a new one reads again for each of them; raise that bound or add "
                   "workers (with tenant.affinity each serves a smaller share); the status "
                   "page counts these closes in storage.%s (said once)",
                   memory ? "max_backend_memory" : "max_tenants",
                   memory ? "pg_closed_memory" : "pg_closed_tenants");
    }
    w->storage_seen = now;
    /* what this worker's pool found, for the generation's other workers (generation_crowded) */
    if (w->affinity_n > 0 && !w->crowd_told && chain_affinity_now()) {
        w->crowd_told = true;
        __atomic_store_n(&w->sb->pool.crowded_generation, w->slot->generation, __ATOMIC_RELAXED);
    }
}

/* The request was handed to the stream hub (fx_hand_off): the hub answers it on the same
 * connection, so this process writes nothing more — no flush, no END_REQUEST (libfcgi's
 * FCGX_Finish_r would write both: it gets no descriptor to write to) — and closes only its
 * own copy of the descriptor (a plain close: a shutdown would end the hub's stream too). The
 * scoreboard and the access log count it as a 200 handed off. Returns false: the connection
 * is no longer this worker's. */
static bool finish_detached(worker *w, tn_request *r, int fd, int64_t t0)
{
    FCGX_Request *fx = &w->fx;
    sb_set_state(w->sb, w->slot, SB_FINISHING);
    fx->ipcFd = -1;
    fx->keepConnection = 1;
    FCGX_Finish_r(fx);
    guard_end();
    fx->ipcFd = -1;
    close(fd);
    alarm_armed = 0;
    w->now_ns = clock_mono_ns();
    int64_t us = (w->now_ns - t0) / 1000;
    sb_request_end(w->sb, w->slot, 200, us);
    reqlog_line(w, r, 200, us);
    chain_finish(r, 200);
    log_set_context(NULL);
    storage_publish(w);
    arena_reset(w->req_arena);
    w->served++;
    serving_w = NULL;
    serving_fd = -1;
    return false;
}

/* Serve the request whose header precheck() found complete on fd (whole: all of it, STDIN's
 * end too). Returns true when the connection stays open (kept); false when it was closed. */
static TN_HOT bool serve_one(worker *w, int fd, unsigned req_id, bool whole, int64_t t0)
{
    const tn_config *cfg = w->cfg;
    int64_t timeout = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 3600000;
    int64_t deadline = t0 / 1000000 + timeout;

    (void)deadline;
    /* From here the master may stop this request at request_timeout (see on_alarm). Reads
     * libfcgi makes either find their bytes there already or are bounded by SO_RCVTIMEO
     * (arm_read_timeout). */
    if (cfg->request_timeout_ms > 0) {
        prepare_timeout_reply(req_id, fd);
        alarm_may_answer = 1;
        alarm_armed = 1;
        if (master_gone)   /* it died before alarm_armed was set: on_master_gone did not arm */
            arm_master_gone_timer();
    }
    sb_reading_begin(w->sb, w->slot, t0);

    FCGX_Request *fx = &w->fx;
    fx->ipcFd = fd;
    fx->keepConnection = 1;   /* so the Finish inside Accept never closes our fd */
    guard_begin(fd);
    int rc = FCGX_Accept_r(fx);
    if (rc < 0) {
        guard_end();
        /* libfcgi closed the connection already (its TryAgain path) and then failed to
         * accept on our deliberately invalid listen socket: nothing more to do. */
        fx->ipcFd = -1;
        alarm_armed = 0;
        __atomic_store_n(&w->slot->req_start_ns, 0, __ATOMIC_RELEASE);
        log_warn("libfcgi could not read the request header (%s); connection closed",
                 rc == -EBADF ? "stream error" : strerror(-rc));
        return false;
    }
    bool keep = fx->keepConnection != 0;

    char rid[40];
    make_req_id(w, rid, sizeof(rid), fx);
    tn_request r;
    request_init(&r, &fcgi_transport, fx, w->req_arena, &w->headers, &w->out, cfg->max_body, rid,
                 t0);
    sb_request_begin(w->slot, r.method, r.path, rid);
    char ctx[96];
    memcpy(ctx, "req=", 4);
    str_copy(ctx + 4, sizeof(ctx) - 4, rid);
    log_set_context(ctx);

    sb_set_state(w->sb, w->slot, SB_RUNNING);
    serving_w = w;
    serving_fd = fd;
    int status = run_request(w, &r);
    alarm_may_answer = 0;   /* from here on the response belongs to libfcgi */
    if (TN_UNLIKELY(r.detached))
        return finish_detached(w, &r, fd, t0);
    sb_set_state(w->sb, w->slot, SB_FINISHING);
    request_finish(&r);
    if (r.io_error) {
        status = 499;   /* as nginx logs it: the client closed the connection */
        log_info("the client went away before the response was complete");
    }
    if (keep && !r.io_error && !drain_stdin(fx))
        keep = false;

    fx->keepConnection = 1;   /* libfcgi must not close: we decide below */
    FCGX_Finish_r(fx);
    if (guard_end()) {
        keep = false;
        sb_inc(&w->sb->pool.malformed);
        log_warn("refused a FastCGI management record inside a request's stream (libfcgi "
                 "would have parsed it): connection closed");
    }
    alarm_armed = 0;
    w->now_ns = clock_mono_ns();   /* the one clock read of a request (t0 is the last one) */
    int64_t us = (w->now_ns - t0) / 1000;
    sb_request_end(w->sb, w->slot, status, us);
    reqlog_line(w, &r, status, us);
    chain_finish(&r, status);   /* the tenant context ends here, on every path */
    log_set_context(NULL);
    storage_publish(w);
    arena_reset(w->req_arena);
    w->served++;

    if (fx->ipcFd < 0)
        return false;   /* libfcgi closed it after a stream error */
    fx->ipcFd = -1;
    /* Kept even when this worker is about to leave: the web server has it back in its cache
     * and may be writing the next request already. A leaving worker passes it on. */
    if (keep && cfg->keepalive_timeout_ms > 0)
        return true;
    conn_close_fd(w, fd, whole);
    return false;
}

/* ---- tenant.queue_wait: a request waits for its tenant's worker unread ------------------ */

static TN_HOT const char *pe_param(void *tx, const char *name)
{
    return kv_env_get(tx, name);
}

static const tn_transport peek_transport = {pe_param, NULL, NULL, NULL, NULL};

struct raw_params {
    const unsigned char *p;
    size_t len;
};

static const char *raw_param(void *ctx, const char *name, size_t *len)
{
    const struct raw_params *rp = ctx;
    return fcgi_param_find(rp->p, rp->len, name, len);
}

/* The tenant of the request whose header the last pre-check saw, from its params (nothing is
 * read off the connection): false when there is no active tenant. */
static bool peek_who(worker *w, int64_t now, chain_peek *out)
{
    struct peek_env *pe = &w->pe;
    if (pe->raw == NULL) {   /* first use: a worker needs it only for these looks */
        pe->raw = malloc(w->peek_size);
        pe->text = malloc(w->peek_size + 2 * PEEK_ENV_MAX);
        pe->arena = arena_create(4096);
        if (pe->raw == NULL || pe->text == NULL || pe->arena == NULL) {
            free(pe->raw);
            free(pe->text);
            arena_destroy(pe->arena);
            pe->raw = NULL;
            return false;
        }
    }
    const unsigned char *content;
    long joined = fcgi_params_join(w->peek, w->peek_len, pe->raw, w->peek_size, &content);
    if (joined < 0)
        return false;
    /* Most hosts name tenants by the host alone: its param is found in the params' bytes,
     * with no environment and no request built. */
    struct raw_params rp = {content, (size_t)joined};
    int rc = chain_peek_host(raw_param, &rp, now, out);
    if (rc != TN_DECLINED)
        return rc == TN_OK;
    if (fcgi_params_env(w->peek, w->peek_len, pe->raw, w->peek_size, pe->text,
                        w->peek_size + 2 * PEEK_ENV_MAX, pe->env, PEEK_ENV_MAX) < 0)
        return false;
    tn_request r;
    request_init(&r, &peek_transport, pe->env, pe->arena, &pe->headers, &pe->out, 0, "peek",
                 now * 1000000);
    bool found = chain_peek_tenant(&r, now, out) == TN_OK;
    arena_reset(pe->arena);
    return found;
}

/* The same for tenant.queue_wait: false also when the tenant has no cap to wait for. */
static bool peek_tenant(worker *w, int64_t now, int64_t *id, int *cap)
{
    chain_peek pk;
    if (!peek_who(w, now, &pk))
        return false;
    *id = pk.id;
    *cap = pk.cap;
    return pk.cap > 0;
}

/* tenant.affinity = auto: whether another worker of this generation found that the tenants
 * do not all fit; if so the chain learns it, and this worker sends from now on. */
static bool generation_crowded(worker *w)
{
    uint32_t g = __atomic_load_n(&w->sb->pool.crowded_generation, __ATOMIC_RELAXED);
    if (g == 0 || g != w->slot->generation)
        return false;
    chain_affinity_learn();
    return chain_affinity_now();
}

/* tenant.affinity (affinity.c): true when the request was sent to its tenant's home worker
 * and the connection is no longer this worker's. */
static TN_HOT bool route_home(worker *w, struct conn *c, int64_t now)
{
    if (w->affinity_n == 0 || w->leaving || c->wait_tenant != 0)
        return false;
    int avoid = c->avoid - 1;   /* this request only, as stay */
    c->avoid = 0;
    if (c->stay) {
        c->stay = false;
        return false;
    }
    if (!chain_affinity_now() && !generation_crowded(w))
        return false;   /* (auto, every tenant fits): no look at the tenant at all */
    chain_peek pk;
    return peek_who(w, now, &pk) && pk.affine && affinity_send_home(w, c, pk.id, avoid, now);
}

/* Before a request is read: TN_OK to serve it now (*claimed: the tenant whose share was
 * claimed for it, 0 when none was), TN_AGAIN when it was left waiting for a worker of its
 * tenant (tenant.queue_wait; see tenancyd.conf(5)). Only while some tenant is at its cap. */
static TN_HOT int admit_early(worker *w, struct conn *c, int64_t now, int64_t *claimed,
                              bool *heavy)
{
    *claimed = 0;
    *heavy = false;
    int64_t wait = w->cfg->tenancy.queue_wait_ms;
    limits *l = w->args->lim;
    if (TN_LIKELY(c->wait_tenant == 0) && (wait <= 0 || !limits_contended(l, now)))
        return TN_OK;
    int64_t id = 0;
    int cap = 0;
    if (w->leaving || (c->wait_tenant != 0 && now >= c->wait_until_ms) ||
        !peek_tenant(w, now, &id, &cap)) {
        conn_unwait(w, c);   /* served now: a tenant still at its cap gets its 503 */
        return TN_OK;
    }
    int rc = limits_try(l, w->args->slot, id, cap, now);
    if (rc != TN_BUSY) {
        *claimed = rc == TN_OK ? id : 0;
        /* A tenant that wants more than its share: this request waited, or others wait.
         * (Taking the last place alone says nothing: with a cap of one every request does.) */
        *heavy = rc == TN_OK && (c->wait_tenant != 0 || limits_waiting(l, id) > 0);
        conn_unwait(w, c);
        return TN_OK;
    }
    /* The wait is not the request's time: request_timeout (and the access log's time) start
     * when it is read, as for a request that waited in the listen queue. */
    if (c->wait_tenant != id) {
        conn_unwait(w, c);
        conn_wait_begin(w, c, id, cap, now + wait);
    }
    c->deadline_ms = c->wait_until_ms;
    /* A request of the tenant may have ended between the try and the count that its
     * wake-up reads: look again rather than wait for the next one. */
    if (limits_free(l, id, cap) > 0)
        mark_ready(w, c);
    return TN_AGAIN;
}

/* Before a request of a tenant that wants more than its share (one that keeps the pool
 * busy, whose requests are often slow ones: writes queued on one SQLite file), the
 * other connections this worker holds go to the idle workers at once, so that no other
 * tenant's request comes in on them behind this one. Waiting requests stay: every worker
 * that holds some is woken when their tenant has room. */
static void pass_held_before_heavy(worker *w, int keep_fd)
{
    if (__atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED) <= 0)
        return;
    for (int i = w->nconns - 1; i >= 0; i--) {
        struct conn *o = &w->conns[i];
        if (o->fd == keep_fd || o->serving || o->wait_tenant != 0)
            continue;
        if (!conn_hand_off(w, o, true))
            return;   /* the queue is full: the rest stay */
    }
}

/* A connection epoll reported readable: check it, and serve it when a request is there.
 * The connection is removed from the table while served and put back when kept. */
TN_HOT void serve_conn(worker *w, struct conn *c, int64_t now)
{
    c->ready = false;
    for (;;) {
        unsigned req_id = 0;
        bool whole = false;
        int rc = precheck(w, c->fd, &req_id, &whole);
        if (rc == TN_AGAIN)
            continue;   /* answered or skipped a record: there may be more */
        if (rc == TN_DECLINED) {
            /* Nothing yet, or part of a request: wait beside the others, a partial request
             * bounded by request_timeout from its first byte. */
            if (c->req_start_ms == 0 && conn_has_input(c->fd)) {
                c->req_start_ms = now;
                c->deadline_ms = conn_header_deadline(w, now);
            }
            conn_register(w, c);
            return;
        }
        if (rc != TN_OK) {
            conn_close(w, c);
            return;
        }
        if (c->routed)
            affinity_unqueue(w, c);   /* its request is being looked at */
        if (route_home(w, c, now))
            return;
        int64_t claimed = 0;
        bool heavy = false;
        if (admit_early(w, c, now, &claimed, &heavy) == TN_AGAIN) {
            conn_register(w, c);
            return;
        }
        /* Served in place: the connection stays in the table (and in the epoll set if it
         * was there), marked so that nothing releases it meanwhile. */
        int fd = c->fd;
        if (TN_UNLIKELY(heavy)) {
            pass_held_before_heavy(w, fd);
            c = conn_find(w, fd);   /* passing moves entries of the table */
        }
        /* From the last clock read: the end of the previous request or of the wait that
         * found this one, microseconds ago (the accept and the pre-check count in). */
        int64_t t0 = c->req_start_ms ? c->req_start_ms * 1000000 : w->now_ns;
        if (!whole)
            arm_read_timeout(w, c);
        c->serving = true;
        /* The master wakes the handoff thread only for a worker that holds others. */
        __atomic_store_n(&w->slot->held, (uint32_t)(w->nconns - 1 - w->nwaiting),
                         __ATOMIC_RELAXED);
        /* A tenant that wants more than its share yields the CPU to the others while this
         * request runs (tenant.heavy_nice). */
        if (TN_UNLIKELY(heavy)) {
            __atomic_store_n(&w->slot->heavy, 1, __ATOMIC_RELAXED);
            if (w->nice_heavy != w->nice_base)
                setpriority(PRIO_PROCESS, 0, w->nice_heavy);
        }
        pthread_mutex_unlock(&w->conns_mu);
        bool keep = serve_one(w, fd, req_id, whole, t0);
        limits_unclaim(w->args->lim, w->args->slot, claimed);   /* no-op once the chain left */
        if (TN_UNLIKELY(heavy)) {
            __atomic_store_n(&w->slot->heavy, 0, __ATOMIC_RELAXED);
            if (w->nice_heavy != w->nice_base)
                setpriority(PRIO_PROCESS, 0, w->nice_base);
        }
        pthread_mutex_lock(&w->conns_mu);
        c = conn_find(w, fd);   /* the handoff thread may have moved entries meanwhile */
        if (c == NULL)
            return;   /* cannot happen: serving connections are never released */
        if (!keep) {
            conn_forget(w, c);   /* serve_one closed it */
            return;
        }
        int64_t t = w->now_ns / 1000000;   /* serve_one's end */
        c->serving = false;
        c->kept = true;
        c->req_start_ms = 0;
        c->deadline_ms = t + w->cfg->keepalive_timeout_ms;
        conn_register(w, c);
        return;
    }
}
