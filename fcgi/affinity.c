/*
 * affinity.c — tenant.affinity: each PostgreSQL tenant's requests served by one worker, its
 * home (see tenancyd.conf(5)).
 *
 * Why. A worker's PostgreSQL connection in schema mode serves every tenant that reaches the
 * worker, and its backend keeps the catalog entries of each schema it has met: with
 * thousands of tenants and requests spread at random over the pool, every worker meets
 * every tenant, a backend is replaced at its bound (placement.NAME.max_backend_memory, or
 * max_tenants), and most requests pay for a schema their backend has not cached
 * (bench/README.md, `load`). With a home per tenant, each backend meets only its worker's
 * share of the tenants.
 *
 * When. The chain says whether a tenant's requests are worth sending (chain_peek.affine): its
 * placement is PostgreSQL and tenant.affinity is on, or auto and this worker's pool has
 * closed a connection at its bound (the tenants it serves do not all fit).
 *
 * How. The web server hands a request to whichever worker takes the connection. Before the
 * request is read (its params are peeked, as tenant.queue_wait does), the worker finds the
 * tenant's home among the live workers of its generation, by highest random weight over
 * their numbers (a worker that comes or goes moves only its own share of the tenants), and,
 * when that is another worker, passes the connection to that worker's inbox: a datagram
 * socket pair per worker number that the master made before the first fork (SCM_RIGHTS,
 * the connection unread). The home serves the request; the connection stays with it until
 * the web server's next request on it names a tenant whose home is elsewhere.
 *
 * A tenant busier than one worker must not queue behind its home: the pool counts, per
 * worker number, the connections in its inbox, and each worker those it took from there and
 * has not looked at yet; a request is served where it arrived when its home is
 * AFFINITY_SLACK more of them behind than this worker.
 * A connection that came through the inbox serves its request where it is; one that a worker
 * passed on because a request of its own ran long is not sent back to that worker.
 *
 * Lost nothing: a worker leaving takes what its inbox holds into its table first (served or
 * passed on like its other connections), and the master empties the inbox of a worker number
 * that no live worker has (master.c, inbox_sweep) into the shared handoff socket.
 *
 * Must not: send a connection whose request was read (only peeked ones move), send one
 * being served, or act for a tenant whose placement is SQLite (its files are cheap to keep
 * open per worker, and the handoff would cost every request its system calls).
 */
#include "core/first.h"
#include "core/log.h"
#include "fcgi/worker_int.h"

#include <sys/epoll.h>
#include <unistd.h>

/* The inbox and who may be a home: set up once the worker's epoll set exists. A worker
 * watches its own inbox whatever its configuration says (a generation that turned affinity
 * off may still receive from one that has it on, during a reload); it sends only when its
 * generation wants affinity and another worker could be a home. */
void affinity_setup(worker *w)
{
    const worker_args *a = w->args;
    w->inbox_fd = -1;
    w->affinity_n = 0;
    if (a->ninbox <= 0 || a->inbox == NULL)
        return;
    for (int i = 0; i < a->ninbox; i++)
        if (i != a->index)
            close(a->inbox[i][1]);   /* another number's: never read here */
    if (a->index < a->ninbox) {
        w->inbox_fd = a->inbox[a->index][1];
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = INBOX_TAG};
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->inbox_fd, &ev) < 0) {
            log_warn("cannot watch this worker's affinity inbox (%m): its tenants' requests "
                     "are served where they arrive");
            w->inbox_fd = -1;
        }
    }
    int n = a->ninbox < w->cfg->max_children ? a->ninbox : w->cfg->max_children;
    if (n >= 2 && w->cfg->listen_shards <= 1 && tenancy_affinity_wanted(&w->cfg->tenancy))
        w->affinity_n = n;
}

/* The live workers of this generation whose numbers may be homes (the scoreboard read at
 * most every AFFINITY_LIVE_MS: a request costs a few comparisons, not a read of every slot). */
static void homes_refresh(worker *w, int64_t now)
{
    if (now < w->homes_until_ms)
        return;
    w->homes_until_ms = now + AFFINITY_LIVE_MS;
    w->nhomes = 0;
    uint32_t gen = w->slot->generation;
    for (int i = 0, n = sb_slots_used(w->sb); i < n && w->nhomes < TN_AFFINITY_MAX; i++) {
        const sb_slot *s = sb_slot_at(w->sb, i);
        if (__atomic_load_n(&s->generation, __ATOMIC_RELAXED) != gen ||
            !__atomic_load_n(&s->ready, __ATOMIC_RELAXED))
            continue;
        uint8_t st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
        uint32_t idx = __atomic_load_n(&s->index, __ATOMIC_RELAXED);
        if (st >= SB_IDLE && st <= SB_FINISHING && idx < (uint32_t)w->affinity_n) {
            w->home_slot[w->nhomes] = (uint16_t)i;
            w->homes[w->nhomes++] = (uint8_t)idx;
        }
    }
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Highest random weight: the position in homes of tenant id's home (-1: none). */
static int home_pos(const uint8_t *homes, int n, int64_t id)
{
    int best = -1;
    uint64_t top = 0;
    uint64_t t = mix64((uint64_t)id);
    for (int i = 0; i < n; i++) {
        uint64_t h = mix64(t ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(homes[i] + 1)));
        if (best < 0 || h > top) {
            best = i;
            top = h;
        }
    }
    return best;
}

/* The home of tenant id among the n worker numbers in homes (-1: none). A number that comes
 * or goes moves only the tenants whose home it is or becomes. */
int affinity_home(const uint8_t *homes, int n, int64_t id)
{
    int i = home_pos(homes, n, id);
    return i < 0 ? -1 : homes[i];
}

/* How far behind a worker is in what was sent to it: its number's inbox, and what it took
 * from there and has not looked at yet. */
static int64_t behind(const worker *w, int idx, const sb_slot *s)
{
    if (idx < 0 || idx >= TN_AFFINITY_MAX)
        return 0;
    int32_t q = __atomic_load_n(&w->sb->pool.affine_queued[idx], __ATOMIC_RELAXED);
    return (q > 0 ? q : 0) + __atomic_load_n(&s->affine_pending, __ATOMIC_RELAXED);
}

/* Send c, whose request (of tenant id, not read yet) this worker was about to serve, to the
 * tenant's home, unless that is worker number `avoid` (the busy one that passed c here).
 * True when it went: the connection is no longer in this worker's table. */
bool affinity_send_home(worker *w, struct conn *c, int64_t id, int avoid, int64_t now)
{
    homes_refresh(w, now);
    int pos = home_pos(w->homes, w->nhomes, id);
    if (pos < 0)
        return false;
    int home = w->homes[pos], me = w->args->index;
    if (home == me || home == avoid)
        return false;
    const sb_slot *hs = sb_slot_at(w->sb, w->home_slot[pos]);
    int32_t *q = &w->sb->pool.affine_queued[home];
    if (behind(w, home, hs) > behind(w, me, w->slot) + AFFINITY_SLACK) {
        sb_inc(&w->sb->pool.affinity_spilled);
        return false;
    }
    __atomic_fetch_add(q, 1, __ATOMIC_RELAXED);
    if (!conn_pass(w, c, w->args->inbox[home][0], 0)) {
        __atomic_fetch_sub(q, 1, __ATOMIC_RELAXED);
        sb_inc(&w->sb->pool.affinity_spilled);   /* its inbox is full: served here */
        return false;
    }
    sb_inc(&w->sb->pool.affinity_sent);
    return true;
}

/* The request of a connection that came through the inbox is being looked at (or the
 * connection leaves the table first): this worker is no longer behind by it. */
void affinity_unqueue(worker *w, struct conn *c)
{
    c->routed = false;
    __atomic_fetch_sub(&w->slot->affine_pending, 1, __ATOMIC_RELAXED);
}

/* Take what the inbox holds, while the table has room: each is looked at at once, and served
 * here whatever its tenant. */
void affinity_take(worker *w, int64_t now)
{
    while (w->inbox_fd >= 0 && w->nconns < w->max_conns) {
        handoff_msg msg;
        int fd = handoff_recv(w->inbox_fd, &msg);
        if (fd < 0)
            return;
        __atomic_fetch_sub(&w->sb->pool.affine_queued[w->args->index], 1, __ATOMIC_RELAXED);
        struct conn *c = conn_take_passed(w, fd, &msg, now);
        if (c == NULL)
            continue;   /* cannot happen: the table had room */
        c->routed = true;
        __atomic_fetch_add(&w->slot->affine_pending, 1, __ATOMIC_RELAXED);
        c->stay = true;
    }
}
