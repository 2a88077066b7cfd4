/*
 * events.c — the host's event log in shared memory (see events.h).
 *
 * Positions are virtual byte offsets that only grow (head: the oldest kept record, tail:
 * where the next goes); a record's place in the ring is its position modulo the ring size.
 * A record never moves, so a position at or after head always starts a record: the per-tenant
 * links and the feed reader's cursor hint stay valid until their record is evicted.
 *
 * An append makes its record visible last (tail moves after the record and its links are
 * written), so a process killed in the middle leaves at worst an unused id, a skipped
 * sequence number, or a tenant's links half-updated; the next locker sees EOWNERDEAD and
 * rebuilds the tenant table's links from the records between head and tail (repair()).
 *
 * Must not: call anything of fcgi/, allocate on the append path, or hold the lock across
 * anything that may block (the hub's sockets, the registry).
 */
#include "core/first.h"
#include "tenancy/events.h"
#include "core/clock.h"
#include "core/rc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define EV_MAGIC 0x544e4556454e5431ull   /* "TNEVENT1" */
#define POS_NONE UINT64_MAX
#define REC_EVENT 0x45564e54u
#define REC_PAD 0x50414444u
#define LOCK_WAIT_MS 1000

typedef struct ev_tenant {
    int64_t tenant_id;    /* 0: free */
    uint64_t last_id;     /* the last id given (0: none) */
    uint64_t oldest;      /* every id below it was evicted */
    uint64_t first_pos;   /* its oldest record in the ring (POS_NONE: none) */
    uint64_t last_pos;    /* its newest record in the ring (POS_NONE: none) */
} ev_tenant;

typedef struct ev_rec {
    uint32_t size;        /* the whole record, a multiple of 8 */
    uint32_t kind;        /* REC_EVENT or REC_PAD (a pad has only size and kind) */
    int64_t tenant_id;
    uint64_t id;
    uint64_t seq;
    uint64_t origin;
    int64_t time_ms;
    uint64_t next_pos;    /* the same tenant's next record (POS_NONE: none yet) */
    uint32_t chlen;
    uint32_t len;
    /* channel, NUL, data, NUL, padding */
} ev_rec;

struct event_log {
    uint64_t magic;
    pthread_mutex_t mu;
    uint64_t origin;
    int32_t wake_fd;
    int32_t max_tenants;
    int32_t ntenants;
    uint32_t tmask;       /* table slots - 1 */
    uint64_t table_off;
    uint64_t ring_off;
    uint64_t ring_bytes;
    uint64_t map_bytes;   /* event_log_create's mapping (0: the caller's memory) */
    uint64_t head, tail;
    uint64_t seq;
    uint64_t appended, evicted, recovered;
};

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)
#define HEADER_BYTES ALIGN8(sizeof(struct event_log) + 63u)

static uint32_t table_slots(int max_tenants)
{
    uint32_t n = 16;
    while (n < (uint32_t)max_tenants * 2u)
        n <<= 1;
    return n;
}

size_t event_log_bytes(size_t ring_bytes, int max_tenants)
{
    if (max_tenants < 1)
        max_tenants = 1;
    return HEADER_BYTES + (size_t)table_slots(max_tenants) * sizeof(ev_tenant) +
           (ring_bytes & ~(size_t)7u);
}

static ev_tenant *table(event_log *l) { return (ev_tenant *)((char *)l + l->table_off); }

static ev_rec *rec_at(event_log *l, uint64_t pos)
{
    return (ev_rec *)((char *)l + l->ring_off + pos % l->ring_bytes);
}

static uint32_t home_of(int64_t id, uint32_t mask)
{
    return (uint32_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/* The entry of tenant id; with `claim`, a free one is taken for it (NULL when the table holds
 * max_tenants already). */
static ev_tenant *find(event_log *l, int64_t id, bool claim)
{
    ev_tenant *t = table(l);
    uint32_t i = home_of(id, l->tmask);
    for (uint32_t n = 0; n <= l->tmask; n++, i = (i + 1) & l->tmask) {
        if (t[i].tenant_id == id)
            return &t[i];
        if (t[i].tenant_id == 0) {
            if (!claim || l->ntenants >= l->max_tenants)
                return NULL;
            t[i] = (ev_tenant){.tenant_id = id, .oldest = 1, .first_pos = POS_NONE,
                               .last_pos = POS_NONE};
            l->ntenants++;
            return &t[i];
        }
    }
    return NULL;
}

static uint64_t random_origin(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
        v = (uint64_t)clock_wall_us() ^ ((uint64_t)getpid() << 32);
    return v ? v : 1;
}

/* `zeroed`: mem is fresh from mmap. Its tenant table is then left untouched: writing its
 * zeros would make every page of it (a megabyte at the default size) in a master that may
 * never see an event. */
static int init_log(void *mem, size_t bytes, size_t ring_bytes, int max_tenants, int wake_fd,
                    bool zeroed)
{
    ring_bytes &= ~(size_t)7u;
    if (mem == NULL || max_tenants < 1 || ring_bytes < 4096 ||
        bytes < event_log_bytes(ring_bytes, max_tenants))
        return TN_INVALID;
    uint32_t slots = table_slots(max_tenants);
    if (!zeroed)
        memset(mem, 0, HEADER_BYTES + (size_t)slots * sizeof(ev_tenant));
    event_log *l = mem;
    l->origin = random_origin();
    l->wake_fd = wake_fd;
    l->max_tenants = max_tenants;
    l->tmask = slots - 1;
    l->table_off = HEADER_BYTES;
    l->ring_off = HEADER_BYTES + (uint64_t)slots * sizeof(ev_tenant);
    l->ring_bytes = ring_bytes;
    pthread_mutexattr_t at;
    if (pthread_mutexattr_init(&at) != 0)
        return TN_ERR;
    int rc = TN_ERR;
    if (pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED) == 0 &&
        pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST) == 0 &&
        pthread_mutex_init(&l->mu, &at) == 0)
        rc = TN_OK;
    pthread_mutexattr_destroy(&at);
    if (rc == TN_OK)
        __atomic_store_n(&l->magic, EV_MAGIC, __ATOMIC_RELEASE);
    return rc;
}

int event_log_init(void *mem, size_t bytes, size_t ring_bytes, int max_tenants, int wake_fd)
{
    return init_log(mem, bytes, ring_bytes, max_tenants, wake_fd, false);
}

event_log *event_log_at(void *mem)
{
    event_log *l = mem;
    return l != NULL && __atomic_load_n(&l->magic, __ATOMIC_ACQUIRE) == EV_MAGIC ? l : NULL;
}

event_log *event_log_create(size_t ring_bytes, int max_tenants)
{
    size_t bytes = event_log_bytes(ring_bytes, max_tenants);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0 || init_log(p, bytes, ring_bytes, max_tenants, fd, true) != TN_OK) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        munmap(p, bytes);
        errno = e;
        return NULL;
    }
    event_log *l = p;
    l->map_bytes = bytes;
    return l;
}

void event_log_destroy(event_log *l)
{
    if (l == NULL)
        return;
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    if (l->map_bytes)
        munmap(l, l->map_bytes);
}

int event_log_wake_fd(const event_log *l) { return l ? l->wake_fd : -1; }
uint64_t event_log_origin(const event_log *l) { return l ? l->origin : 0; }

bool event_channel_valid(const char *c)
{
    if (c == NULL)
        return false;
    size_t n = 0;
    for (; c[n]; n++) {
        char ch = c[n];
        if (n >= EVENT_CHANNEL_MAX ||
            !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == ':' || ch == '-'))
            return false;
    }
    return n > 0;
}

/* ---- the lock and its recovery ------------------------------------------------------------ */

/* A record at pos that may be trusted: its size fits between pos and tail, and an event's
 * parts fit in its size. */
static bool rec_sane(event_log *l, uint64_t pos)
{
    const ev_rec *r = rec_at(l, pos);
    uint64_t phys = pos % l->ring_bytes;
    if (r->size < 8 || (r->size & 7u) || phys + r->size > l->ring_bytes || pos + r->size > l->tail)
        return false;
    if (r->kind == REC_PAD)
        return true;
    return r->kind == REC_EVENT && r->size >= sizeof(ev_rec) &&
           (uint64_t)sizeof(ev_rec) + r->chlen + 1 + r->len + 1 <= r->size && r->tenant_id > 0;
}

/* The previous holder died inside the lock: rebuild every tenant's links from the records
 * between head and tail. Ids already given stay given (last_id is only raised), so none is
 * reused; a record cut short ends the ring there. */
static void repair(event_log *l)
{
    ev_tenant *t = table(l);
    int n = 0;
    for (uint32_t i = 0; i <= l->tmask; i++) {
        if (t[i].tenant_id == 0)
            continue;
        n++;
        t[i].first_pos = t[i].last_pos = POS_NONE;
        t[i].oldest = t[i].last_id + 1;
    }
    l->ntenants = n;
    if (l->tail < l->head || l->tail - l->head > l->ring_bytes)
        l->tail = l->head;   /* nothing to trust */
    for (uint64_t pos = l->head; pos < l->tail;) {
        if (!rec_sane(l, pos)) {
            l->tail = pos;
            break;
        }
        ev_rec *r = rec_at(l, pos);
        if (r->kind == REC_EVENT) {
            r->next_pos = POS_NONE;
            ev_tenant *e = find(l, r->tenant_id, true);
            if (e != NULL) {
                if (e->first_pos == POS_NONE) {
                    e->first_pos = pos;
                    e->oldest = r->id;
                } else {
                    rec_at(l, e->last_pos)->next_pos = pos;
                }
                e->last_pos = pos;
                if (r->id > e->last_id)
                    e->last_id = r->id;
            }
            if (r->seq > l->seq)
                l->seq = r->seq;
        }
        pos += r->size;
    }
    l->recovered++;
}

static int lock(event_log *l)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += LOCK_WAIT_MS / 1000;
    int e = pthread_mutex_timedlock(&l->mu, &ts);
    if (e == 0)
        return TN_OK;
    if (e == EOWNERDEAD) {
        repair(l);
        if (pthread_mutex_consistent(&l->mu) == 0)
            return TN_OK;
        pthread_mutex_unlock(&l->mu);
        return TN_ERR;
    }
    return e == ETIMEDOUT ? TN_BUSY : TN_ERR;
}

static void unlock(event_log *l) { pthread_mutex_unlock(&l->mu); }

static void wake(event_log *l)
{
    if (l->wake_fd < 0)
        return;
    uint64_t one = 1;
    ssize_t w = write(l->wake_fd, &one, sizeof(one));
    (void)w;   /* full (the hub is behind) or gone: the hub reads the log anyway */
}

/* ---- append --------------------------------------------------------------------------------- */

/* Evict the record at head. */
static void evict_one(event_log *l)
{
    ev_rec *r = rec_at(l, l->head);
    if (r->kind == REC_EVENT) {
        ev_tenant *e = find(l, r->tenant_id, false);
        if (e != NULL && e->first_pos == l->head) {
            e->oldest = r->id + 1;
            e->first_pos = r->next_pos;
            if (e->first_pos == POS_NONE)
                e->last_pos = POS_NONE;
        }
        l->evicted++;
    }
    l->head += r->size;
}

int event_log_append_from(event_log *l, uint64_t origin, int64_t tenant_id,
                          const char *channel, const char *data, size_t len, uint64_t *id)
{
    if (id != NULL)
        *id = 0;
    if (l == NULL || tenant_id <= 0 || channel == NULL || (data == NULL && len > 0))
        return TN_INVALID;
    size_t chlen = strnlen(channel, EVENT_CHANNEL_MAX + 1);
    if (chlen > EVENT_CHANNEL_MAX)
        return TN_INVALID;
    if (len > l->ring_bytes / 4)
        return TN_TOOBIG;
    size_t need = ALIGN8(sizeof(ev_rec) + chlen + 1 + len + 1);
    if (need > l->ring_bytes / 4)
        return TN_TOOBIG;
    int rc = lock(l);
    if (rc != TN_OK)
        return rc;
    ev_tenant *e = find(l, tenant_id, true);
    if (e == NULL) {
        unlock(l);
        return TN_BUSY;
    }
    uint64_t phys = l->tail % l->ring_bytes;
    uint64_t pad = phys + need > l->ring_bytes ? l->ring_bytes - phys : 0;
    while (l->tail + pad + need - l->head > l->ring_bytes)
        evict_one(l);
    if (pad) {
        ev_rec *p = rec_at(l, l->tail);
        p->size = (uint32_t)pad;
        p->kind = REC_PAD;
        l->tail += pad;
    }
    uint64_t pos = l->tail;
    ev_rec *r = rec_at(l, pos);
    uint64_t eid = ++e->last_id;   /* given now: a death below leaves it unused, never reused */
    char *p = (char *)(r + 1);
    memcpy(p, channel, chlen);
    p[chlen] = '\0';
    if (len)
        memcpy(p + chlen + 1, data, len);
    p[chlen + 1 + len] = '\0';
    *r = (ev_rec){.size = (uint32_t)need, .kind = REC_EVENT, .tenant_id = tenant_id, .id = eid,
                  .seq = ++l->seq, .origin = origin, .time_ms = clock_wall_us() / 1000,
                  .next_pos = POS_NONE, .chlen = (uint32_t)chlen, .len = (uint32_t)len};
    if (e->first_pos == POS_NONE) {
        e->first_pos = pos;
        e->oldest = eid;
    } else {
        rec_at(l, e->last_pos)->next_pos = pos;
    }
    e->last_pos = pos;
    l->appended++;
    __atomic_store_n(&l->tail, pos + need, __ATOMIC_RELEASE);
    unlock(l);
    wake(l);
    if (id != NULL)
        *id = eid;
    return TN_OK;
}

int event_log_append(event_log *l, int64_t tenant_id, const char *channel, const char *data,
                     size_t len, uint64_t *id)
{
    return event_log_append_from(l, l ? l->origin : 0, tenant_id, channel, data, len, id);
}

/* ---- reading -------------------------------------------------------------------------------- */

static void fill(const ev_rec *r, event_rec *out)
{
    const char *p = (const char *)(r + 1);
    *out = (event_rec){.tenant_id = r->tenant_id, .id = r->id, .seq = r->seq,
                       .origin = r->origin, .time_ms = r->time_ms, .channel = p,
                       .data = p + r->chlen + 1, .len = r->len};
}

int event_log_cursor_now(event_log *l, event_cursor *c)
{
    int rc = lock(l);
    if (rc != TN_OK)
        return rc;
    c->seq = l->seq;
    c->pos = l->tail;
    unlock(l);
    return TN_OK;
}

int event_log_read(event_log *l, event_cursor *c, event_rec *out, int n, arena *a,
                   uint64_t *lost)
{
    if (lost != NULL)
        *lost = 0;
    int rc = lock(l);
    if (rc != TN_OK)
        return rc;
    uint64_t pos = c->pos >= l->head && c->pos <= l->tail ? c->pos : l->head;
    int got = 0;
    while (got < n && pos < l->tail) {
        ev_rec *r = rec_at(l, pos);
        if (r->kind == REC_EVENT && r->seq > c->seq) {
            char *copy = arena_alloc(a, r->chlen + 1 + r->len + 1);
            if (copy == NULL) {
                if (got == 0)
                    got = TN_NOMEM;
                break;
            }
            if (lost != NULL && r->seq > c->seq + 1)
                *lost += r->seq - c->seq - 1;
            memcpy(copy, r + 1, r->chlen + 1 + r->len + 1);
            fill(r, &out[got]);
            out[got].channel = copy;
            out[got].data = copy + r->chlen + 1;
            got++;
            c->seq = r->seq;
        }
        pos += r->size;
    }
    c->pos = pos;
    unlock(l);
    return got;
}

int event_log_since(event_log *l, int64_t tenant_id, uint64_t after,
                    int (*fn)(void *ctx, const event_rec *e), void *ctx)
{
    int rc = lock(l);
    if (rc != TN_OK)
        return rc;
    ev_tenant *e = find(l, tenant_id, false);
    rc = TN_OK;
    if (e == NULL) {
        if (after > 0)
            rc = TN_NOTFOUND;   /* ids from another life of the log */
        goto done;
    }
    if (after > e->last_id || after + 1 < e->oldest) {
        rc = TN_NOTFOUND;
        goto done;
    }
    /* A bound on the walk: a broken link must not loop. */
    uint64_t budget = l->ring_bytes / sizeof(ev_rec) + 1;
    for (uint64_t pos = e->first_pos; pos != POS_NONE && budget-- > 0;) {
        if (pos < l->head || pos >= l->tail)
            break;
        ev_rec *r = rec_at(l, pos);
        if (r->kind != REC_EVENT || r->tenant_id != tenant_id)
            break;   /* never another tenant's record */
        if (r->id > after) {
            event_rec er;
            fill(r, &er);
            int stop = fn(ctx, &er);
            if (stop != 0) {
                rc = stop;
                goto done;
            }
        }
        pos = r->next_pos;
    }
done:
    unlock(l);
    return rc;
}

uint64_t event_log_last_id(event_log *l, int64_t tenant_id)
{
    if (lock(l) != TN_OK)
        return 0;
    ev_tenant *e = find(l, tenant_id, false);
    uint64_t v = e ? e->last_id : 0;
    unlock(l);
    return v;
}

void event_log_get_stats(event_log *l, event_log_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (lock(l) != TN_OK)
        return;
    *out = (event_log_stats){.appended = l->appended, .evicted = l->evicted,
                             .recovered = l->recovered, .seq = l->seq,
                             .ring_bytes = l->ring_bytes, .used_bytes = l->tail - l->head,
                             .tenants = l->ntenants, .max_tenants = l->max_tenants};
    unlock(l);
}
