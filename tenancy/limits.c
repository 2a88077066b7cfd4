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
#include <sys/mman.h>
#include <unistd.h>

struct limits {
    /* high before serving: the first workers' slots share its cache line and page, where
     * after 8 kB of slots it was a line and a page more for every request */
    int32_t high;                      /* 1 + the highest worker slot ever used */
    int64_t serving[LIMITS_WORKERS];   /* the tenant each worker slot is serving (0: none) */
    limits_entry e[LIMITS_SLOTS];
};

limits *limits_create(void)
{
    void *p = mmap(NULL, sizeof(limits), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void limits_destroy(limits *l)
{
    if (l != NULL)
        munmap(l, sizeof(*l));
}

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

TN_HOT int limits_enter(limits *l, int worker, int64_t id, const char *slug, int cap,
                        int64_t now_ms)
{
    if (l == NULL || id == 0 || worker < 0 || worker >= LIMITS_WORKERS)
        return TN_DECLINED;
    __atomic_store_n(&l->serving[worker], id, __ATOMIC_SEQ_CST);
    int32_t high = __atomic_load_n(&l->high, __ATOMIC_RELAXED);
    while (high < worker + 1 && !__atomic_compare_exchange_n(&l->high, &high, worker + 1, true,
                                                              __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        ;
    limits_entry *e = find(l, id, true, slug);
    if (cap > 0 && serving_count(l, id) > cap) {
        __atomic_store_n(&l->serving[worker], 0, __ATOMIC_SEQ_CST);
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
