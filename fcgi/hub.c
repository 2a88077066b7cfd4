/*
 * hub.c — the stream hub process (see hub.h).
 *
 * One thread, one epoll set: the socket hand-offs arrive on, each stream's connection (read
 * for the web server's FCGI_ABORT_REQUEST or close, written when a write would have
 * blocked), the event feed's wake-up, and a signalfd. A stream costs a fixed struct and its
 * descriptor; bytes a slow client has not taken yet go into a buffer allocated only then,
 * capped by stream.max_buffer (over it the stream gets a last `event: dropped` and ends).
 *
 * Ending a stream. The hub writes an empty FCGI_STDOUT and FCGI_END_REQUEST, as any
 * responder does. A connection the web server asked to keep (FCGI_KEEP_CONN) can then carry
 * another request: the hub passes it back to the workers over the socket they pass kept
 * connections on (handoff.c; under ondemand with no worker the master holds it, as it does
 * for a leaving worker's), and closes its own copy. A connection not kept is closed. A
 * client that went away (read EOF, an error, FCGI_ABORT_REQUEST, a failed write) is closed
 * at once: the web server already gave up on it.
 *
 * Tenants. Every tick, while it holds streams and the host has tenancy, the hub compares the
 * registry generation (tenancy/gen.h, bumped by whoever changes the registry) with the one
 * it last saw; when it moved it fetches the state of each tenant it holds streams of and
 * ends those of a tenant suspended or deleted with `event: end` (`data: tenant suspended`).
 * A tenant's events are only ever written to streams of the same tenant id (the feed looks
 * streams up by tenant).
 *
 * Events. The host's event log (tenancy/events.h) is shared memory the master made before any
 * fork; the hub follows it with a cursor, woken by the log's eventfd, and writes each event to
 * the streams of its tenant that want its channel. A stream that resumes (Last-Event-ID) first
 * gets the events it missed from the log; one whose resume point fell out of the ring gets
 * `event: reset` (the client reloads).
 *
 * Must not: serve a request itself, load the app, touch tenant storage, or block anywhere but
 * in epoll_wait (every socket is non-blocking; the registry is read only when its generation
 * moved).
 */
#include "core/first.h"
#include "fcgi/hub.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/rc.h"
#include "fcgi/proto.h"
#include "fcgi/signals.h"
#include "fcgi/worker.h"
#include "tenancy/events.h"
#include "tenancy/registry.h"
#include "tenancy/lookup.h"
#include "tenancy/tenant.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- pure parts: SSE text and FastCGI records ------------------------------------------- */

void hub_format_event(buf *out, uint64_t id, const char *channel, const char *data, size_t len)
{
    buf_puts(out, "id: ");
    buf_u64(out, id);
    buf_puts(out, "\nevent: ");
    buf_puts(out, channel);
    buf_putc(out, '\n');
    size_t i = 0;
    do {
        size_t j = i;
        while (j < len && data[j] != '\n' && data[j] != '\r')
            j++;
        buf_puts(out, "data: ");
        buf_append(out, data + i, j - i);
        buf_putc(out, '\n');
        if (j < len && data[j] == '\r' && j + 1 < len && data[j + 1] == '\n')
            j++;
        i = j + 1;
    } while (i <= len && !(i == len && len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r')));
    buf_putc(out, '\n');
}

void hub_stdout_records(buf *out, unsigned id, const char *p, size_t len)
{
    do {
        size_t n = len > 65535 ? 65535 : len;
        size_t pad = (8 - n % 8) % 8;
        unsigned char h[8] = {1, FCGI_T_STDOUT, (unsigned char)(id >> 8), (unsigned char)id,
                              (unsigned char)(n >> 8), (unsigned char)n, (unsigned char)pad, 0};
        static const char zeros[8];
        buf_append(out, h, 8);
        buf_append(out, p, n);
        buf_append(out, zeros, pad);
        p += n;
        len -= n;
    } while (len > 0);
}

/* ---- the worker's side: the hand-off ------------------------------------------------------ */

int hub_send(int sock, int fd, const hub_msg *msg)
{
    if (sock < 0)
        return TN_ERR;
    ssize_t n = fd_pass_send(sock, fd, msg, sizeof(*msg));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        /* A burst of subscriptions fills the socket faster than the hub takes them: wait a
         * moment for room (the hub drains it in its next turn) before saying busy. */
        struct pollfd p = {.fd = sock, .events = POLLOUT};
        if (poll(&p, 1, 200) > 0)
            n = fd_pass_send(sock, fd, msg, sizeof(*msg));
    }
    if (n == (ssize_t)sizeof(*msg))
        return TN_OK;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) ? TN_BUSY
                                                                                   : TN_ERR;
}

/* ---- the hub process ---------------------------------------------------------------------- */

enum { TAG_SOCK = 1, TAG_SIG, TAG_FEED, TAG_REMOTE };

enum end_why { END_CLIENT, END_TENANT, END_DROPPED, END_STOP, END_LIMIT };

typedef struct sub {
    int fd;
    uint16_t fcgi_id;
    bool keep_conn;
    bool closing;        /* its last records are queued: released once they are written */
    bool gone;           /* the client went away: close without writing */
    bool want_out;       /* EPOLLOUT in the set */
    bool counted;        /* in the per-tenant table (sb_hub) */
    bool dead;           /* released: freed after this turn's events (one may still name it) */
    int64_t tenant_id;
    uint64_t last_id;    /* the last event id written */
    int64_t next_hb_ms;
    int64_t close_by_ms; /* closing: give up on the last bytes then */
    int nchannels;
    char (*channels)[TN_SUB_CHANNEL_MAX + 1];   /* NULL when 0: all */
    buf out;             /* bytes written to nobody yet (empty, no memory, most of the time) */
    size_t out_off;
    unsigned char rh[8]; /* the web server's side: a record header being read */
    int rh_got;
    size_t rskip;        /* content and padding of that record left to skip */
    struct sub *next, *prev;   /* the tenant bucket's list; next: the dead list once released */
    char slug[64];
    char req_id[40];
} sub;

#define NBUCKETS 4096

typedef struct hub {
    const hub_args *a;
    sb_hub *st;
    int ep;
    int sigfd;
    int feed_fd;
    sub *buckets[NBUCKETS];
    sub *dead;           /* released this turn */
    int nsubs;
    bool stopping;
    buf scratch, rec, ev;
    registry *reg;
    uint64_t reg_gen;
    int64_t reg_next_ms;
    log_repeat reg_log;     /* the registry failing to open: logged once a minute */
    /* the feed (the host's event log) */
    event_cursor cursor;
    arena *feed_arena;
    bool feed_more;          /* a turn's worth was read: read on at the next tick */
    events_remote *er;       /* other hosts' events (PostgreSQL registry) */
    int64_t er_next_ms, er_delay_ms;
} hub;

static inline unsigned bucket_of(int64_t tenant_id)
{
    return (unsigned)(((uint64_t)tenant_id * 0x9E3779B97F4A7C15ull) >> 52) & (NBUCKETS - 1);
}

static void sub_link(hub *h, sub *s)
{
    sub **b = &h->buckets[bucket_of(s->tenant_id)];
    s->prev = NULL;
    s->next = *b;
    if (*b)
        (*b)->prev = s;
    *b = s;
}

static void sub_unlink(hub *h, sub *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        h->buckets[bucket_of(s->tenant_id)] = s->next;
    if (s->next)
        s->next->prev = s->prev;
}

static void set_pending(hub *h, int64_t delta)
{
    __atomic_add_fetch(&h->st->bytes_buffered, (uint64_t)delta, __ATOMIC_RELAXED);
}

/* Let go of a stream: pass a kept, cleanly ended connection back to the workers, else close. */
static void sub_release(hub *h, sub *s, bool hand_back)
{
    epoll_ctl(h->ep, EPOLL_CTL_DEL, s->fd, NULL);
    if (hand_back && s->keep_conn && !s->gone && h->a->pool_sock >= 0) {
        handoff_msg m;
        memset(&m, 0, sizeof(m));   /* padding too: it goes to another process */
        m.tag = 'k';
        if (handoff_send(h->a->pool_sock, s->fd, &m))
            sb_inc(&h->st->kept_returned);
    }
    close(s->fd);
    set_pending(h, -(int64_t)(s->out.len - s->out_off));
    buf_free(&s->out);
    sub_unlink(h, s);
    if (s->counted)
        sb_hub_tenant_add(h->st, s->tenant_id, -1);
    __atomic_sub_fetch(&h->st->subscribers, 1, __ATOMIC_RELAXED);
    h->nsubs--;
    s->dead = true;
    s->closing = true;
    s->next = h->dead;
    h->dead = s;
}

static void free_dead(hub *h)
{
    while (h->dead != NULL) {
        sub *s = h->dead;
        h->dead = s->next;
        free(s->channels);
        free(s);
    }
}

static void want_out(hub *h, sub *s, bool on)
{
    if (s->want_out == on)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), .data.ptr = s};
    epoll_ctl(h->ep, EPOLL_CTL_MOD, s->fd, &ev);
    s->want_out = on;
}

/* Write what is waiting. False when the client is gone (the stream is released then). */
static bool sub_flush(hub *h, sub *s)
{
    while (s->out_off < s->out.len) {
        ssize_t w = send(s->fd, s->out.p + s->out_off, s->out.len - s->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want_out(h, s, true);
            return true;
        }
        if (w <= 0) {
            s->gone = true;
            sb_inc(&h->st->ended_client);
            sub_release(h, s, false);
            return false;
        }
        s->out_off += (size_t)w;
        set_pending(h, -w);
    }
    buf_free(&s->out);
    s->out = (buf)BUF_INIT;
    s->out_off = 0;
    want_out(h, s, false);
    if (s->closing) {
        sub_release(h, s, true);
        return false;
    }
    return true;
}

static void sub_finish(hub *h, sub *s, enum end_why why, const char *event, const char *data);

/* Queue FastCGI bytes for s: written at once when nothing waits before them. False when the
 * stream ended meanwhile (gone, or dropped over stream.max_buffer). */
static bool sub_queue(hub *h, sub *s, const char *p, size_t n)
{
    if (s->out.len == s->out_off) {
        ssize_t w = send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            s->gone = true;
            sb_inc(&h->st->ended_client);
            sub_release(h, s, false);
            return false;
        }
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        }
        if (n == 0)
            return true;
    }
    int64_t max = __atomic_load_n(&h->st->max_buffer, __ATOMIC_RELAXED);
    if (!s->closing && (int64_t)(s->out.len - s->out_off + n) > max) {
        /* A slow consumer: what is queued stays (whole records), the rest is not sent. */
        log_warn("req=%s tenant=%s: stream dropped, its client is slow (over stream.max_buffer "
                 "%lld bytes)", s->req_id, s->slug, (long long)max);
        sub_finish(h, s, END_DROPPED, "dropped", "the client did not keep up");
        return false;
    }
    buf_append(&s->out, p, n);
    set_pending(h, (int64_t)n);
    want_out(h, s, true);
    return true;
}

/* Wrap SSE text in STDOUT records and queue it. */
static bool sub_send_text(hub *h, sub *s, const char *text, size_t len)
{
    buf_reset(&h->rec);
    hub_stdout_records(&h->rec, s->fcgi_id, text, len);
    s->next_hb_ms = clock_mono_ms() + __atomic_load_n(&h->st->heartbeat_ms, __ATOMIC_RELAXED);
    return sub_queue(h, s, h->rec.p, h->rec.len);
}

/* End a stream properly: an optional last event, the empty STDOUT, END_REQUEST. */
static void sub_finish(hub *h, sub *s, enum end_why why, const char *event, const char *data)
{
    if (s->closing)
        return;
    s->closing = true;
    s->close_by_ms = clock_mono_ms() + 5000;
    switch (why) {
    case END_TENANT: sb_inc(&h->st->ended_tenant); break;
    case END_DROPPED: sb_inc(&h->st->dropped_slow); break;
    case END_STOP: sb_inc(&h->st->ended_stop); break;
    case END_LIMIT: sb_inc(&h->st->refused_limit); break;
    case END_CLIENT: sb_inc(&h->st->ended_client); break;
    }
    buf_reset(&h->rec);
    if (event != NULL) {
        buf_reset(&h->scratch);
        buf_puts(&h->scratch, "event: ");
        buf_puts(&h->scratch, event);
        buf_puts(&h->scratch, "\ndata: ");
        buf_puts(&h->scratch, data);
        buf_puts(&h->scratch, "\n\n");
        hub_stdout_records(&h->rec, s->fcgi_id, h->scratch.p, h->scratch.len);
    }
    hub_stdout_records(&h->rec, s->fcgi_id, "", 0);
    unsigned char end[16];
    size_t n = fcgi_end_request(end, sizeof(end), s->fcgi_id, 0, FCGI_REQUEST_COMPLETE);
    buf_append(&h->rec, end, n);
    /* Past the cap or not: the last records always go in (the cap only stops new events). */
    buf_append(&s->out, h->rec.p, h->rec.len);
    set_pending(h, (int64_t)h->rec.len);
    sub_flush(h, s);
}

static bool sub_wants(const sub *s, const char *channel)
{
    if (s->nchannels == 0)
        return true;
    for (int i = 0; i < s->nchannels; i++)
        if (strcmp(s->channels[i], channel) == 0)
            return true;
    return false;
}

/* One event of a tenant to that tenant's streams that want its channel (and have not had it:
 * a replay may have written it already). */
static void deliver(hub *h, int64_t tenant_id, uint64_t id, const char *channel, const char *data,
                    size_t len)
{
    bool formatted = false;
    sub *next;
    for (sub *s = h->buckets[bucket_of(tenant_id)]; s != NULL; s = next) {
        next = s->next;
        if (s->tenant_id != tenant_id || s->closing || id <= s->last_id ||
            !sub_wants(s, channel))
            continue;
        if (!formatted) {
            buf_reset(&h->ev);
            hub_format_event(&h->ev, id, channel, data, len);
            formatted = true;
        }
        s->last_id = id;
        if (sub_send_text(h, s, h->ev.p, h->ev.len))
            sb_inc(&h->st->events_sent);
    }
}

/* ---- the event feed ------------------------------------------------------------------------ *
 * The host's event log (tenancy/events.h), in shared memory the master made before any fork:
 * the hub reads every new event after its cursor when the log's eventfd says something was
 * appended, and hands each to its tenant's streams. A restarted hub starts at the newest
 * event; its clients reconnect with Last-Event-ID and get what they missed from the log
 * (event_log_since). With a PostgreSQL registry the hub also LISTENs for other hosts' events
 * and appends them to the log (events_remote), where the feed finds them like local ones.
 */
static void feed_open(hub *h)
{
    h->feed_fd = -1;
    h->feed_arena = arena_create(0);
    if (h->a->events == NULL || h->feed_arena == NULL)
        return;
    event_log_cursor_now(h->a->events, &h->cursor);
    h->feed_fd = event_log_wake_fd(h->a->events);
    if (h->feed_fd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_FEED};
    epoll_ctl(h->ep, EPOLL_CTL_ADD, h->feed_fd, &ev);
}

/* The feed lost events (the hub fell a whole ring behind): every stream may have missed some,
 * so each gets `event: reset` (the client must reload) and goes on from its tenant's newest. */
static void feed_lost(hub *h, uint64_t lost)
{
    log_warn("the hub fell behind the event log: %llu events lost; every stream is told to "
             "reload (event: reset)", (unsigned long long)lost);
    for (int b = 0; b < NBUCKETS; b++) {
        sub *next;
        for (sub *s = h->buckets[b]; s != NULL; s = next) {
            next = s->next;
            if (s->closing)
                continue;
            s->last_id = event_log_last_id(h->a->events, s->tenant_id);
            static const char reset[] = "event: reset\ndata: events were missed: reload\n\n";
            sub_send_text(h, s, reset, sizeof(reset) - 1);
        }
    }
}

static void feed_read(hub *h)
{
    uint64_t one;
    while (read(h->feed_fd, &one, sizeof(one)) > 0)
        ;   /* the eventfd's count: cleared; the cursor says what is new */
    event_rec recs[64];
    for (int round = 0; round < 64; round++) {
        uint64_t lost = 0;
        arena_reset(h->feed_arena);
        int n = event_log_read(h->a->events, &h->cursor, recs, (int)TN_ARRAY_LEN(recs),
                               h->feed_arena, &lost);
        if (lost > 0)
            feed_lost(h, lost);
        if (n <= 0)
            return;   /* none new, or busy: the next wake-up or tick reads on */
        for (int i = 0; i < n; i++)
            deliver(h, recs[i].tenant_id, recs[i].id, recs[i].channel, recs[i].data,
                    recs[i].len);
        if (n < (int)TN_ARRAY_LEN(recs))
            return;
    }
    /* More than a turn's worth: the rest on the next tick, so that nothing else starves. */
    h->feed_more = true;
}

/* Other hosts' events (PostgreSQL registry): connect, LISTEN, and append what arrives. */
static void remote_check(hub *h, int64_t now)
{
    if (h->a->events == NULL || !events_remote_needed(&h->a->cfg->tenancy) || h->er != NULL ||
        now < h->er_next_ms)
        return;
    char err[256];
    if (events_remote_open(&h->a->cfg->tenancy, h->a->events, &h->er, err, sizeof(err)) !=
        TN_OK) {
        h->er = NULL;
        h->er_delay_ms = h->er_delay_ms == 0 ? 1000 : h->er_delay_ms * 2;
        if (h->er_delay_ms > 30000)
            h->er_delay_ms = 30000;
        h->er_next_ms = now + h->er_delay_ms;
        log_warn("the hub cannot listen for other hosts' events (%s); trying again in %lld ms",
                 err, (long long)h->er_delay_ms);
        return;
    }
    h->er_delay_ms = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_REMOTE};
    epoll_ctl(h->ep, EPOLL_CTL_ADD, events_remote_fd(h->er), &ev);
    /* from here on, other hosts' events reach this host's streams (an operator checking a
     * fleet, and tests, wait for this line) */
    log_info("the hub listens for other hosts' events");
}

static void remote_poll(hub *h)
{
    if (h->er == NULL || events_remote_poll(h->er) != TN_IO)
        return;
    log_warn("the hub lost its registry connection for other hosts' events; reconnecting "
             "(events they send meanwhile are not seen here)");
    epoll_ctl(h->ep, EPOLL_CTL_DEL, events_remote_fd(h->er), NULL);
    events_remote_close(h->er);
    h->er = NULL;
    h->er_delay_ms = 1000;
    h->er_next_ms = clock_mono_ms() + h->er_delay_ms;
}

/* A resuming stream's replay: the events after its Last-Event-ID on its channels, gathered
 * as SSE text while the log is locked (event_log_since's rule: quick, no call back into the
 * log, nothing written to a socket), then sent. */
typedef struct replay {
    const sub *s;
    buf *text;
    uint64_t last;
    uint64_t n;
} replay;

static int replay_one(void *ctx, const event_rec *e)
{
    replay *rp = ctx;
    rp->last = e->id;
    if (!sub_wants(rp->s, e->channel))
        return 0;
    hub_format_event(rp->text, e->id, e->channel, e->data, e->len);
    rp->n++;
    return rp->text->oom ? 1 : 0;
}

/* Where a new stream starts: after its resume point (replaying what it missed), else after
 * its tenant's newest event. False when the stream ended meanwhile. */
static bool start_feed(hub *h, sub *s, const hub_msg *m)
{
    event_log *l = h->a->events;
    if (l == NULL)
        return true;
    if (!m->has_last) {
        s->last_id = event_log_last_id(l, s->tenant_id);
        return true;
    }
    buf_reset(&h->ev);
    replay rp = {.s = s, .text = &h->ev, .last = m->last_id};
    int rc = event_log_since(l, s->tenant_id, m->last_id, replay_one, &rp);
    uint64_t newest = event_log_last_id(l, s->tenant_id);
    if (rc == TN_NOTFOUND || rc == 1 || (rc == TN_OK && m->last_id > newest)) {
        /* A gap (evicted from the ring), too much to copy, or an id this log never gave (a
         * restarted master): the client must reload. */
        s->last_id = event_log_last_id(l, s->tenant_id);
        static const char reset[] = "event: reset\ndata: events were missed: reload\n\n";
        return sub_send_text(h, s, reset, sizeof(reset) - 1);
    }
    if (rc != TN_OK) {
        s->last_id = event_log_last_id(l, s->tenant_id);
        return true;
    }
    s->last_id = rp.last;
    if (rp.n == 0)
        return true;
    __atomic_add_fetch(&h->st->events_sent, rp.n, __ATOMIC_RELAXED);
    return sub_send_text(h, s, h->ev.p, h->ev.len);
}

/* ---- taking a stream ---------------------------------------------------------------------- */

/* Answer a hand-off the hub cannot take (a limit) with 503, then let it go. */
static void refuse(hub *h, sub *s, const char *why)
{
    static const char head[] = "Status: 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                               "Retry-After: 5\r\n\r\n";
    buf_reset(&h->scratch);
    buf_puts(&h->scratch, head);
    buf_puts(&h->scratch, why);
    buf_putc(&h->scratch, '\n');
    buf_reset(&h->rec);
    hub_stdout_records(&h->rec, s->fcgi_id, h->scratch.p, h->scratch.len);
    if (sub_queue(h, s, h->rec.p, h->rec.len))
        sub_finish(h, s, END_LIMIT, NULL, NULL);
}

static void take(hub *h, int fd, const hub_msg *m)
{
    sub *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        close(fd);
        return;
    }
    s->fd = fd;
    s->fcgi_id = m->fcgi_id;
    s->keep_conn = m->keep_conn != 0;
    s->tenant_id = m->tenant_id;
    s->out = (buf)BUF_INIT;
    memcpy(s->slug, m->slug, sizeof(s->slug));
    s->slug[sizeof(s->slug) - 1] = '\0';
    memcpy(s->req_id, m->req_id, sizeof(s->req_id));
    s->req_id[sizeof(s->req_id) - 1] = '\0';
    int nch = m->nchannels < 0 ? 0 : m->nchannels > TN_SUB_MAX_CHANNELS ? TN_SUB_MAX_CHANNELS
                                                                        : m->nchannels;
    if (nch > 0 && (s->channels = malloc((size_t)nch * sizeof(*s->channels))) != NULL) {
        memcpy(s->channels, m->channels, (size_t)nch * sizeof(*s->channels));
        for (int i = 0; i < nch; i++)
            s->channels[i][TN_SUB_CHANNEL_MAX] = '\0';
        s->nchannels = nch;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = s};
    if (epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        free(s->channels);
        free(s);
        return;
    }
    sub_link(h, s);
    h->nsubs++;
    __atomic_add_fetch(&h->st->subscribers, 1, __ATOMIC_RELAXED);
    sb_inc(&h->st->streams);
    int32_t max_total = __atomic_load_n(&h->st->max_total, __ATOMIC_RELAXED);
    int32_t max_tenant = __atomic_load_n(&h->st->max_per_tenant, __ATOMIC_RELAXED);
    s->counted = sb_hub_tenant_add(h->st, s->tenant_id, 1);
    if (h->nsubs > max_total || !s->counted ||
        sb_hub_tenant_count(h->st, s->tenant_id) > max_tenant) {
        log_warn("req=%s tenant=%s: stream refused: %s", s->req_id, s->slug,
                 h->nsubs > max_total ? "stream.max_total reached"
                                      : "stream.max_per_tenant reached");
        refuse(h, s, "too many streams: try again later");
        return;
    }
    static const char head[] = "Status: 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\n\r\n"
                               "retry: 2000\n\n";
    if (!sub_send_text(h, s, head, sizeof(head) - 1))
        return;
    if (!start_feed(h, s, m))
        return;
    log_debug("req=%s tenant=%s: stream taken (%d channels, from event %llu)", s->req_id, s->slug,
              s->nchannels, (unsigned long long)s->last_id);
}

static void take_handoffs(hub *h)
{
    for (int k = 0; k < 256; k++) {
        hub_msg m;
        memset(&m, 0, sizeof(m));
        int fd;
        ssize_t got = fd_pass_recv(h->a->sock, &m, sizeof(m), &fd);
        if (got < 0)
            return;
        if (fd < 0)
            continue;
        if (got != (ssize_t)sizeof(m) || m.magic != HUB_MSG_MAGIC || m.tenant_id <= 0) {
            log_warn("the hub got a hand-off it cannot read: connection closed");
            close(fd);
            continue;
        }
        take(h, fd, &m);
    }
}

/* ---- the web server's side ------------------------------------------------------------------ */

/* Read what the web server sent on a stream's connection: FCGI_ABORT_REQUEST for it, or its
 * close. False when the stream was released. */
static bool sub_read(hub *h, sub *s)
{
    unsigned char b[512];
    for (;;) {
        ssize_t n = recv(s->fd, b, sizeof(b), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (n <= 0) {
            s->gone = true;
            if (!s->closing)
                sb_inc(&h->st->ended_client);
            sub_release(h, s, false);
            return false;
        }
        for (ssize_t i = 0; i < n;) {
            if (s->rskip > 0) {
                size_t k = (size_t)(n - i) < s->rskip ? (size_t)(n - i) : s->rskip;
                s->rskip -= k;
                i += (ssize_t)k;
                continue;
            }
            s->rh[s->rh_got++] = b[i++];
            if (s->rh_got < 8)
                continue;
            s->rh_got = 0;
            unsigned type = s->rh[1], id = (unsigned)s->rh[2] << 8 | s->rh[3];
            s->rskip = ((size_t)s->rh[4] << 8 | s->rh[5]) + s->rh[6];
            if (type == FCGI_T_ABORT && id == s->fcgi_id && !s->closing) {
                /* The client went away: the web server wants END_REQUEST and no more. */
                s->keep_conn = false;
                sb_inc(&h->st->ended_client);
                s->closing = true;
                unsigned char end[16];
                size_t len = fcgi_end_request(end, sizeof(end), s->fcgi_id, 0,
                                              FCGI_REQUEST_COMPLETE);
                buf_append(&s->out, end, len);
                set_pending(h, (int64_t)len);
                s->close_by_ms = clock_mono_ms() + 1000;
                return sub_flush(h, s);
            }
        }
    }
}

/* ---- the tick: heartbeats, deadlines, the registry ------------------------------------------- */

static int tenant_gone(hub *h, sub *s)
{
    tenant_rec *t = NULL;
    int rc = registry_fetch(h->reg, LK_SLUG, s->slug, &t);
    int verdict = 0;
    if (rc == TN_NOTFOUND)
        verdict = 2;
    else if (rc == TN_OK && t != NULL && t->id != s->tenant_id)
        verdict = 2;   /* purged and the slug taken again */
    else if (rc == TN_OK && t != NULL &&
             (t->state == TENANT_SUSPENDED || t->state == TENANT_DELETING))
        verdict = t->state == TENANT_SUSPENDED ? 1 : 2;
    free(t);
    return verdict;
}

static void check_tenants(hub *h, int64_t now)
{
    /* Only streams of tenants can be ended by the registry: a hub holding none, or serving
     * a host without tenancy (whose registry need not exist), has nothing to read there. */
    if (h->nsubs == 0 || !h->a->cfg->tenancy.enabled || now < h->reg_next_ms)
        return;
    h->reg_next_ms = now + 500;
    bool opened = false;
    if (h->reg == NULL) {
        char err[256];
        const tenancy_config *tc = &h->a->cfg->tenancy;
        unsigned held;
        if (registry_open(tc->registry_uri, tc->gen_path, &h->reg, err, sizeof(err)) != TN_OK) {
            if (log_repeat_due(&h->reg_log, err, now, &held))
                log_warn("the hub cannot open the registry (%s): streams of suspended tenants "
                         "are not ended until it can (%u more tries failed so since the last "
                         "such line)", err, held);
            h->reg = NULL;
            h->reg_next_ms = now + 5000;
            return;
        }
        if (log_repeat_clear(&h->reg_log))
            log_info("the hub opened the registry");
        opened = true;
    }
    /* Just opened: the streams it holds came before it looked, and a tenant suspended in
     * between (a restarted hub's reconnecting clients, a first stream) would never be seen
     * again by the generation alone, so every stream is checked once. */
    uint64_t g = registry_generation(h->reg);
    if (g == h->reg_gen && !opened)
        return;
    h->reg_gen = g;
    /* Each tenant once per pass: its first stream decides for all of them. */
    int64_t seen[256];
    int verdicts[256];
    int nseen = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        sub *next;
        for (sub *s = h->buckets[b]; s != NULL; s = next) {
            next = s->next;
            if (s->closing)
                continue;
            int v = -1;
            for (int i = 0; i < nseen; i++)
                if (seen[i] == s->tenant_id)
                    v = verdicts[i];
            if (v < 0) {
                v = tenant_gone(h, s);
                if (nseen < 256) {
                    seen[nseen] = s->tenant_id;
                    verdicts[nseen++] = v;
                }
            }
            if (v > 0) {
                log_info("req=%s tenant=%s: stream ended: the tenant was %s", s->req_id, s->slug,
                         v == 1 ? "suspended" : "deleted");
                /* the next in this bucket may be released by this call only if it is s */
                sub_finish(h, s, END_TENANT, "end", v == 1 ? "tenant suspended" : "tenant deleted");
            }
        }
    }
}

static void tick(hub *h, int64_t now)
{
    for (int b = 0; b < NBUCKETS; b++) {
        sub *next;
        for (sub *s = h->buckets[b]; s != NULL; s = next) {
            next = s->next;
            if (s->closing) {
                if (now >= s->close_by_ms) {
                    s->gone = true;
                    sub_release(h, s, false);
                }
                continue;
            }
            if (now >= s->next_hb_ms) {
                static const char beat[] = ": hb\n\n";
                if (sub_send_text(h, s, beat, sizeof(beat) - 1))
                    sb_inc(&h->st->heartbeats);
            }
        }
    }
    check_tenants(h, now);
    remote_check(h, now);
    if (h->feed_more) {
        h->feed_more = false;
        feed_read(h);
    }
}

/* ---- the process ------------------------------------------------------------------------- */

static void stop_all(hub *h)
{
    for (int b = 0; b < NBUCKETS; b++) {
        sub *next;
        for (sub *s = h->buckets[b]; s != NULL; s = next) {
            next = s->next;
            if (!s->closing)
                sub_finish(h, s, END_STOP, NULL, NULL);
        }
    }
}

TN_NORETURN void hub_main(const hub_args *a)
{
    signals_reset_child();
    for (int i = 0; i < a->nclose; i++)
        if (a->close_fds[i] >= 0)
            close(a->close_fds[i]);
    log_set_pid();
    log_set_context("hub");
    /* A descriptor per stream: as many as the hard limit allows (raised while still root). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* The workers' user: the hub holds client connections and reads the registry, as they
     * do. Before the death signal, which a change of user clears. */
    if (worker_drop_privileges(a->cfg) != TN_OK)
        _exit(WORKER_EXIT_SETUP);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_NAME, "tenancyd-hub");

    /* Zero already (BSS, never touched by the master the hub was forked from): clearing it
     * would fault in every page of its tables. */
    static hub hh;
    hub *h = &hh;
    h->a = a;
    h->st = &a->sb->hub;
    h->scratch = (buf)BUF_INIT;
    h->rec = (buf)BUF_INIT;
    h->ev = (buf)BUF_INIT;
    h->ep = epoll_create1(EPOLL_CLOEXEC);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    h->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (h->ep < 0 || h->sigfd < 0) {
        log_error("the hub cannot set up epoll or its signals: %m");
        _exit(WORKER_EXIT_SETUP);
    }
    if (getppid() != a->master_pid)
        _exit(0);   /* the master died before PR_SET_PDEATHSIG was set */
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_SOCK};
    epoll_ctl(h->ep, EPOLL_CTL_ADD, a->sock, &ev);
    ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = TAG_SIG};
    epoll_ctl(h->ep, EPOLL_CTL_ADD, h->sigfd, &ev);
    feed_open(h);
    __atomic_store_n(&h->st->pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    log_info("stream hub started (at most %d streams, %d per tenant)", h->st->max_total,
             h->st->max_per_tenant);

    int64_t stop_by = 0;
    int64_t next_tick = clock_mono_ms() + 1000;
    struct epoll_event evs[256];
    for (;;) {
        int64_t now = clock_mono_ms();
        if (h->stopping && (h->nsubs == 0 || now >= stop_by))
            break;
        int timeout = (int)(next_tick - now);
        if (timeout < 0)
            timeout = 0;
        int n = epoll_wait(h->ep, evs, (int)TN_ARRAY_LEN(evs), timeout);
        if (n < 0 && errno != EINTR) {
            log_error("the hub's epoll_wait: %m");
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == TAG_SOCK) {
                if (!h->stopping)
                    take_handoffs(h);
                continue;
            }
            if (tag == TAG_SIG) {
                struct signalfd_siginfo si;
                while (read(h->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGQUIT ||
                        si.ssi_signo == SIGINT) {
                        if (!h->stopping) {
                            h->stopping = true;
                            stop_by = clock_mono_ms() + 2000;
                            log_info("stream hub stopping: ending %d streams", h->nsubs);
                            stop_all(h);
                        }
                    } else if (si.ssi_signo == SIGUSR1) {
                        log_reopen();
                    }
                }
                continue;
            }
            if (tag == TAG_FEED) {
                feed_read(h);
                continue;
            }
            if (tag == TAG_REMOTE) {
                remote_poll(h);
                continue;
            }
            /* A stream: released ones stay allocated until the turn ends (free_dead), so
             * the pointer is valid here even when something before released it. */
            sub *s = evs[i].data.ptr;
            uint32_t e = evs[i].events;
            if (s->dead)
                continue;
            if ((e & EPOLLOUT) && !sub_flush(h, s))
                continue;
            if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                sub_read(h, s);
        }
        now = clock_mono_ms();
        if (now >= next_tick) {
            tick(h, now);
            next_tick = now + 250;
        }
        free_dead(h);
    }
    __atomic_store_n(&h->st->pid, 0, __ATOMIC_RELEASE);
    if (h->reg != NULL)
        registry_close(h->reg);
    if (h->er != NULL)
        events_remote_close(h->er);
    log_info("stream hub stopped");
    _exit(0);
}
