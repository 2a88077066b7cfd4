/*
 * lookup.c — the per-worker lookup cache (see lookup.h).
 *
 * Open addressing with linear probing and backward-shift deletion (no tombstones), capacity
 * a power of two at least twice the bound. Keys are stored inline up to 253 bytes (a host
 * name's maximum). Must not: block, log, or free a record a request may still read.
 */
#include "core/first.h"
#include "tenancy/lookup.h"
#include "core/buf.h"
#include "core/rc.h"

#include <stdlib.h>
#include <string.h>

#define KEY_MAX 254

/* Aligned to a cache line: a hit reads one entry, and with the entry's start on a line's,
 * everything a hit reads (a key of up to 30 bytes included) is in that one line. */
struct __attribute__((aligned(64))) entry {
    uint64_t hash;          /* 0: empty */
    tenant_rec *rec;        /* NULL: a negative entry */
    int64_t expires_ms;
    uint64_t used;          /* access clock for LRU sampling */
    uint8_t kind;
    uint8_t klen;
    char key[KEY_MAX];
};

/* What a hit reads and writes (with the hit counter, st's first field) is in the first
 * cache line: the struct is allocated aligned to one. */
struct __attribute__((aligned(64))) lookup_cache {
    struct entry *t;        /* in t_mem, aligned */
    uint32_t cap;           /* power of two */
    uint32_t max;
    uint64_t generation;
    uint64_t clock;
    uint32_t n;
    uint32_t nretired;
    lookup_stats st;
    void *t_mem;
    int64_t ttl_ms, neg_ttl_ms;
    uint64_t rng;
    tenant_rec **retired;   /* out of the table, maybe still in use: freed at the next sync */
    uint32_t capretired;
};

static TN_HOT uint64_t hash_key(int kind, const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

lookup_cache *lookup_create(int max_entries, int64_t ttl_ms, int64_t negative_ttl_ms)
{
    lookup_cache *c = aligned_alloc(_Alignof(lookup_cache), sizeof(*c));
    if (c == NULL)
        return NULL;
    memset(c, 0, sizeof(*c));
    c->max = max_entries > 0 ? (uint32_t)max_entries : 0;
    c->ttl_ms = ttl_ms;
    c->neg_ttl_ms = negative_ttl_ms;
    c->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)c;
    if (c->max > 0) {
        uint32_t cap = 16;
        while (cap < c->max * 2)
            cap <<= 1;
        /* calloc (its pages come zeroed and untouched, so a big table costs memory only as it
         * fills), one entry more to align the first to a line */
        c->t_mem = calloc(cap + 1, sizeof(struct entry));
        if (c->t_mem == NULL) {
            free(c);
            return NULL;
        }
        uintptr_t a = ((uintptr_t)c->t_mem + _Alignof(struct entry) - 1) &
                      ~(uintptr_t)(_Alignof(struct entry) - 1);
        c->t = (struct entry *)a;
        c->cap = cap;
    }
    return c;
}

/* A record leaves the table during a request: the request may still read it. */
static void retire(lookup_cache *c, tenant_rec *rec)
{
    if (rec == NULL)
        return;
    if (c->nretired == c->capretired) {
        uint32_t cap = c->capretired ? c->capretired * 2 : 16;
        tenant_rec **v = realloc(c->retired, cap * sizeof(*v));
        if (v == NULL) {
            /* Cannot defer: leak rather than free a record a request may be reading. */
            return;
        }
        c->retired = v;
        c->capretired = cap;
    }
    c->retired[c->nretired++] = rec;
}

static void free_retired(lookup_cache *c)
{
    for (uint32_t i = 0; i < c->nretired; i++)
        free(c->retired[i]);
    c->nretired = 0;
}

static void entry_clear(lookup_cache *c, struct entry *e)
{
    retire(c, e->rec);
    e->hash = 0;
    e->rec = NULL;
}

void lookup_flush(lookup_cache *c)
{
    for (uint32_t i = 0; i < c->cap; i++) {
        if (c->t[i].hash == 0)
            continue;
        free(c->t[i].rec);
        c->t[i].hash = 0;
        c->t[i].rec = NULL;
    }
    free_retired(c);
    c->n = 0;
    c->st.flushes++;
}

void lookup_destroy(lookup_cache *c)
{
    if (c == NULL)
        return;
    lookup_flush(c);
    free(c->retired);
    free(c->t_mem);
    free(c);
}

TN_HOT void lookup_sync(lookup_cache *c, uint64_t generation)
{
    free_retired(c);
    if (generation == c->generation)
        return;
    c->generation = generation;
    if (c->n > 0)
        lookup_flush(c);
}

/* Remove slot i and shift the following cluster back (linear probing). */
static void remove_at(lookup_cache *c, uint32_t i)
{
    entry_clear(c, &c->t[i]);
    c->n--;
    uint32_t mask = c->cap - 1;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (c->t[j].hash == 0)
            return;
        uint32_t home = (uint32_t)c->t[j].hash & mask;
        /* Move j into the hole i when its home is not in (i, j]. */
        bool move = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (move) {
            c->t[i] = c->t[j];
            c->t[j].hash = 0;
            c->t[j].rec = NULL;
            i = j;
        }
    }
}

static TN_HOT struct entry *find(lookup_cache *c, uint64_t h, int kind, const char *key,
                                 size_t n, uint32_t *slot)
{
    uint32_t mask = c->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        struct entry *e = &c->t[i];
        if (e->hash == 0) {
            *slot = i;
            return NULL;
        }
        if (e->hash == h && e->kind == kind && e->klen == n && mem_eq(e->key, key, n)) {
            *slot = i;
            return e;
        }
    }
}

static void evict_one(lookup_cache *c)
{
    /* The least recently used of 8 random occupied slots. */
    uint32_t best = UINT32_MAX;
    for (int tries = 0, found = 0; found < 8 && tries < 256; tries++) {
        c->rng ^= c->rng << 13;
        c->rng ^= c->rng >> 7;
        c->rng ^= c->rng << 17;
        uint32_t i = (uint32_t)c->rng & (c->cap - 1);
        if (c->t[i].hash == 0)
            continue;
        found++;
        if (best == UINT32_MAX || c->t[i].used < c->t[best].used)
            best = i;
    }
    if (best != UINT32_MAX) {
        remove_at(c, best);
        c->st.evictions++;
    }
}

/* A miss of lookup_get (h: the key's hash): fetched, and stored unless caching is off or the
 * registry changed meanwhile. Apart from the hit path, so that a hit runs through a few
 * consecutive lines of code instead of jumping over this. */
static __attribute__((noinline)) int lookup_miss(lookup_cache *c, int kind, const char *key,
                                                 size_t n, uint64_t h, int64_t now_ms,
                                                 lookup_fetch_fn fetch, void *ctx,
                                                 uint64_t (*gen_now)(void *), void *gen_ctx,
                                                 const tenant_rec **out)
{
    uint32_t slot = 0;
    c->st.misses++;
    uint64_t gen_before = c->generation;
    tenant_rec *rec = NULL;
    int rc = fetch(ctx, kind, key, &rec);
    if (rc != TN_OK && rc != TN_NOTFOUND)
        return rc;
    if (c->max == 0 || (gen_now != NULL && gen_now(gen_ctx) != gen_before)) {
        /* Caching off, or the registry changed while we read it: use, do not store. The
         * record lives until the next sync, like one that was evicted. */
        if (rc == TN_OK) {
            if (c->max > 0)
                c->st.stale_skips++;
            retire(c, rec);
            *out = rec;
        }
        return rc;
    }
    if (c->n >= c->max)
        evict_one(c);
    find(c, h, kind, key, n, &slot);   /* the slot may have moved after an eviction */
    struct entry *e = &c->t[slot];
    e->hash = h;
    e->kind = (uint8_t)kind;
    e->klen = (uint8_t)n;
    memcpy(e->key, key, n);
    e->rec = rec;
    e->expires_ms = now_ms + (rc == TN_OK ? c->ttl_ms : c->neg_ttl_ms);
    e->used = ++c->clock;
    c->n++;
    c->st.inserts++;
    *out = rec;
    return rc;
}

TN_HOT int lookup_get(lookup_cache *c, int kind, const char *key, int64_t now_ms,
                      lookup_fetch_fn fetch, void *ctx, uint64_t (*gen_now)(void *),
                      void *gen_ctx, const tenant_rec **out)
{
    *out = NULL;
    size_t n = str_len(key);
    if (n >= KEY_MAX)
        return TN_NOTFOUND;
    uint64_t h = hash_key(kind, key, n);
    if (TN_LIKELY(c->max > 0)) {
        uint32_t slot = 0;
        struct entry *e = find(c, h, kind, key, n, &slot);
        if (TN_LIKELY(e != NULL && e->expires_ms > now_ms)) {
            e->used = ++c->clock;
            if (e->rec == NULL) {
                c->st.negative_hits++;
                return TN_NOTFOUND;
            }
            c->st.hits++;
            *out = e->rec;
            return TN_OK;
        }
        if (e != NULL)
            remove_at(c, slot);   /* expired */
    }
    return lookup_miss(c, kind, key, n, h, now_ms, fetch, ctx, gen_now, gen_ctx, out);
}

void lookup_get_stats(const lookup_cache *c, lookup_stats *s)
{
    *s = c->st;
    s->entries = c->n;
}
