/*
 * limits.c — the shared per-tenant counter table (see limits.h).
 * Must not: take locks or block (it runs on every request), or remove entries (a removal
 * racing an insert in another process would corrupt the probe chains).
 */
#include "core/first.h"
#include "tenancy/limits.h"
#include "core/rc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

/* How long after a tenant reached its cap the workers look at each request's tenant before
 * reading it (limits_contended). */
#define CONTENDED_MS 1000

struct limits {
    /* Read by every worker before every request and written at most twice a second: a cache
     * line of its own, away from the slots each worker writes twice a request (sharing one,
     * every request's read missed the line the other workers' writes had taken). */
    int64_t contended_until_ms;        /* a tenant reached its cap: see limits_contended */
    int32_t wake_fd;                   /* eventfd: a tenant with waiting requests left one */
    int32_t waiting_uncounted;         /* waiting requests of tenants not in the table */
    /* high before serving: the first workers' slots share its cache line and page, where
     * after 8 kB of slots it was a line and a page more for every request */
    int32_t high __attribute__((aligned(64)));   /* 1 + the highest worker slot ever used */
    int64_t serving[LIMITS_WORKERS];   /* the tenant each worker slot is serving (0: none) */
    limits_entry e[LIMITS_SLOTS];
};

limits *limits_create(void)
{
    void *p = mmap(NULL, sizeof(limits), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    limits *l = p;
    /* Without it requests still wait, bounded by tenant.queue_wait, and are looked at again
     * only when it runs out. */
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return l;
}

void limits_destroy(limits *l)
{
    if (l == NULL)
        return;
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    munmap(l, sizeof(*l));
}

int limits_wake_fd(const limits *l) { return l != NULL ? l->wake_fd : -1; }

/* The id itself: registry ids are dense sequence numbers, so consecutive ids take
 * consecutive slots with no collision until they wrap, and a host's tenants share a few
 * pages (28 for 1,000 tenants). A hashed slot put every tenant on a page of its own: a TLB
 * miss on every request, and a page of shared memory per tenant. */
static uint32_t slot_of(int64_t id) { return (uint32_t)((uint64_t)id & (LIMITS_SLOTS - 1)); }

/* The entry of id, claiming a free one when `claim` (and writing slug into it then, so that
 * requests never read the slug's part of the entry). NULL when absent (or no free slot
 * within LIMITS_PROBE of its home: an entry is only ever placed there, so a lookup stops
 * there too, and a full table costs a request LIMITS_PROBE loads, not a scan of it all). */
static TN_HOT limits_entry *find(limits *l, int64_t id, bool claim, const char *slug)
{
    uint32_t i = slot_of(id);
    for (uint32_t n = 0; n < LIMITS_PROBE; n++, i = (i + 1) & (LIMITS_SLOTS - 1)) {
        limits_entry *e = &l->e[i];
        int64_t cur = __atomic_load_n(&e->tenant_id, __ATOMIC_ACQUIRE);
        if (cur == id)
            return e;
        if (cur != 0)
            continue;
        if (!claim)
            return NULL;
        int64_t expected = 0;
        if (__atomic_compare_exchange_n(&e->tenant_id, &expected, id, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            if (slug != NULL)   /* written once; readers tolerate a torn first write */
                memcpy(e->slug, slug, strnlen(slug, sizeof(e->slug) - 1));
            return e;
        }
        if (expected == id)
            return e;   /* another worker claimed it for the same tenant */
    }
    return NULL;
}

/* Workers serving tenant id now, this one included (it published first: see limits.h). */
static TN_HOT int serving_count(limits *l, int64_t id)
{
    int high = __atomic_load_n(&l->high, __ATOMIC_SEQ_CST), n = 0;
    for (int i = 0; i < high; i++)
        if (__atomic_load_n(&l->serving[i], __ATOMIC_SEQ_CST) == id)
            n++;
    return n;
}

bool limits_contended(const limits *l, int64_t now_ms)
{
    return l != NULL && now_ms < __atomic_load_n(&l->contended_until_ms, __ATOMIC_RELAXED);
}

/* Publish that worker serves id, then count: over cap, withdraw (TN_BUSY). At the cap the
 * next request of the tenant would wait: the workers start looking before they read. */
static TN_HOT int claim(limits *l, int worker, int64_t id, int cap, int64_t now_ms)
{
    /* No cap, nothing to count: every worker computes the same cap for a tenant, so none
     * counts the slots of an uncapped one, and publishing would only move the slots' line
     * between the workers' caches twice a request. */
    if (cap <= 0)
        return TN_OK;
    __atomic_store_n(&l->serving[worker], id, __ATOMIC_SEQ_CST);
    int32_t high = __atomic_load_n(&l->high, __ATOMIC_RELAXED);
    while (high < worker + 1 && !__atomic_compare_exchange_n(&l->high, &high, worker + 1, true,
                                                              __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        ;
    int n = serving_count(l, id);
    if (n > cap) {
        __atomic_store_n(&l->serving[worker], 0, __ATOMIC_SEQ_CST);
        return TN_BUSY;
    }
    /* Renewed when half gone: a tenant that stays at its cap keeps the look on without a
     * gap (a request arriving in one would be refused at once), at two stores a second. */
    if (n == cap &&
        __atomic_load_n(&l->contended_until_ms, __ATOMIC_RELAXED) < now_ms + CONTENDED_MS / 2)
        __atomic_store_n(&l->contended_until_ms, now_ms + CONTENDED_MS, __ATOMIC_RELAXED);
    return TN_OK;
}

int limits_try(limits *l, int worker, int64_t id, int cap, int64_t now_ms)
{
    if (l == NULL || id == 0 || worker < 0 || worker >= LIMITS_WORKERS)
        return TN_DECLINED;
    return claim(l, worker, id, cap, now_ms);
}

/* Requests of e's tenant (of a tenant not in the table: e NULL) wait for a worker: wake the
 * workers that hold them. Called after a mark was taken away: by limits_leave at the end of
 * every request, hence TN_HOT, on the request path's pages. */
static TN_HOT void wake_waiters(limits *l, limits_entry *e)
{
    int32_t waiting = e != NULL ? __atomic_load_n(&e->waiting, __ATOMIC_SEQ_CST)
                                : __atomic_load_n(&l->waiting_uncounted, __ATOMIC_SEQ_CST);
    if (waiting > 0 && l->wake_fd >= 0) {
        uint64_t one = 1;
        (void)!write(l->wake_fd, &one, sizeof(one));
    }
}

void limits_unclaim(limits *l, int worker, int64_t id)
{
    int64_t was = id;
    if (l != NULL && id != 0 && worker >= 0 && worker < LIMITS_WORKERS &&
        __atomic_compare_exchange_n(&l->serving[worker], &was, 0, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
        wake_waiters(l, find(l, id, false, NULL));
}

int limits_free(limits *l, int64_t id, int cap)
{
    if (l == NULL || id == 0 || cap <= 0)
        return 1;
    int n = cap - serving_count(l, id);
    return n > 0 ? n : 0;
}

int limits_waiting(limits *l, int64_t id)
{
    limits_entry *e = l != NULL && id != 0 ? find(l, id, false, NULL) : NULL;
    int32_t n = e != NULL ? __atomic_load_n(&e->waiting, __ATOMIC_RELAXED) : 0;
    return n > 0 ? n : 0;
}

void limits_wait(limits *l, int64_t id, int delta)
{
    if (l == NULL || id == 0)
        return;
    limits_entry *e = find(l, id, false, NULL);
    int32_t *w = e != NULL ? &e->waiting : &l->waiting_uncounted;
    if (__atomic_add_fetch(w, delta, __ATOMIC_SEQ_CST) < 0)
        __atomic_store_n(w, 0, __ATOMIC_RELAXED);   /* never below zero */
}

TN_HOT int limits_enter(limits *l, int worker, int64_t id, const char *slug, int cap,
                        int64_t now_ms)
{
    if (l == NULL || id == 0 || worker < 0 || worker >= LIMITS_WORKERS)
        return TN_DECLINED;
    limits_entry *e = find(l, id, true, slug);
    if (claim(l, worker, id, cap, now_ms) == TN_BUSY) {
        if (e != NULL)
            __atomic_add_fetch(&e->rejected, 1, __ATOMIC_RELAXED);
        return TN_BUSY;
    }
    if (e == NULL)
        return TN_DECLINED;
    int32_t now = __atomic_add_fetch(&e->inflight, 1, __ATOMIC_ACQ_REL);
    int32_t max = __atomic_load_n(&e->max_seen, __ATOMIC_RELAXED);
    while (now > max && !__atomic_compare_exchange_n(&e->max_seen, &max, now, true,
                                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    __atomic_store_n(&e->last_ms, now_ms, __ATOMIC_RELAXED);
    return TN_OK;
}

TN_HOT void limits_leave(limits *l, int worker, int64_t id, int status)
{
    if (l == NULL || id == 0)
        return;
    /* The counters first, the worker's mark last: a request admitted in between would
     * otherwise show one more in flight than the cap lets run. */
    limits_entry *e = find(l, id, false, NULL);
    if (e != NULL) {
        if (__atomic_sub_fetch(&e->inflight, 1, __ATOMIC_ACQ_REL) < 0)
            __atomic_store_n(&e->inflight, 0, __ATOMIC_RELAXED);   /* never below zero */
        if (status > 0) {
            __atomic_add_fetch(&e->requests, 1, __ATOMIC_RELAXED);
            if (status >= 500)
                __atomic_add_fetch(&e->errors, 1, __ATOMIC_RELAXED);
        }
    }
    int64_t was = id;   /* only this tenant's mark: the slot may have a new worker by now */
    if (worker >= 0 && worker < LIMITS_WORKERS)
        __atomic_compare_exchange_n(&l->serving[worker], &was, 0, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED);
    wake_waiters(l, e);   /* after the mark is gone: a woken worker finds the share free */
}

void limits_release_worker(limits *l, int worker)
{
    if (l == NULL || worker < 0 || worker >= LIMITS_WORKERS)
        return;
    int64_t id = __atomic_exchange_n(&l->serving[worker], 0, __ATOMIC_SEQ_CST);
    if (id != 0)
        wake_waiters(l, find(l, id, false, NULL));
}

bool limits_get(const limits *l, int64_t id, limits_entry *out)
{
    limits_entry *e = l ? find((limits *)l, id, false, NULL) : NULL;
    if (e == NULL)
        return false;
    memcpy(out, e, sizeof(*out));
    out->slug[sizeof(out->slug) - 1] = '\0';
    return true;
}

static int cmp_requests(const void *a, const void *b)
{
    uint64_t x = ((const limits_entry *)a)->requests, y = ((const limits_entry *)b)->requests;
    return x < y ? 1 : x > y ? -1 : 0;
}

int limits_top(const limits *l, limits_entry *out, int n)
{
    if (l == NULL || n <= 0)
        return 0;
    /* Only the pages of the table that exist: reading the others would make the kernel
     * give them (shared memory has no zero page), 14 MB for a host with a handful of
     * tenants. A page never faulted in holds only free entries. */
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)l & ~(uintptr_t)(pg - 1);
    size_t span = (uintptr_t)(l + 1) - base;
    size_t npages = (span + (size_t)pg - 1) / (size_t)pg;
    unsigned char *res = malloc(npages);
    if (res != NULL && mincore((void *)base, span, res) != 0) {
        free(res);
        res = NULL;   /* look at every page */
    }
    /* Keep the n largest in out: a small insertion set (n is tens). */
    int have = 0;
    for (int i = 0; i < LIMITS_SLOTS; i++) {
        const limits_entry *e = &l->e[i];
        if (res != NULL) {
            uintptr_t a = (uintptr_t)e, z = (uintptr_t)(e + 1) - 1;
            if (!(res[(a - base) / (size_t)pg] & 1) && !(res[(z - base) / (size_t)pg] & 1))
                continue;
        }
        if (__atomic_load_n(&e->tenant_id, __ATOMIC_ACQUIRE) == 0)
            continue;
        if (have < n) {
            memcpy(&out[have++], e, sizeof(*e));
        } else if (e->requests > out[n - 1].requests) {
            memcpy(&out[n - 1], e, sizeof(*e));
        } else {
            continue;
        }
        qsort(out, (size_t)have, sizeof(*out), cmp_requests);
    }
    free(res);
    for (int i = 0; i < have; i++)
        out[i].slug[sizeof(out[i].slug) - 1] = '\0';
    return have;
}
