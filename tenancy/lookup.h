/*
 * lookup.h — the per-worker tenant lookup cache.
 *
 * Maps (kind, key) — a domain or a slug — to a tenant record, or to "unknown" (negative
 * entries keep a flood of unknown hosts off the registry). Entries expire after a TTL; the
 * table is bounded and evicts the least recently used of a small random sample when full.
 * Every change to the registry bumps a generation counter shared by all processes of the
 * host (tenancy/gen.h); the chain passes it in at each request, and a new value flushes the
 * whole cache, so all workers see a change by their next request. An entry whose lookup
 * started before a bump is never stored (the stale write-back race).
 *
 * A hit costs a hash, a probe and a compare: no allocation, no system call.
 * One cache per worker; not thread-safe.
 */
#ifndef TN_TENANCY_LOOKUP_H
#define TN_TENANCY_LOOKUP_H

#include <stdbool.h>
#include <stdint.h>

#include "tenancy/tenant.h"

enum lookup_kind { LK_DOMAIN = 0, LK_SLUG = 1 };

typedef struct lookup_cache lookup_cache;

/* Fetch from the registry: TN_OK with a malloc'ed *out (the cache takes it), TN_NOTFOUND,
 * or another error (not cached). */
typedef int (*lookup_fetch_fn)(void *ctx, int kind, const char *key, tenant_rec **out);

typedef struct lookup_stats {
    uint64_t hits, negative_hits, misses, inserts, evictions, flushes, stale_skips;
    uint32_t entries;
} lookup_stats;

/* max_entries 0 turns caching off (every lookup fetches). NULL when out of memory. */
lookup_cache *lookup_create(int max_entries, int64_t ttl_ms, int64_t negative_ttl_ms);
void lookup_destroy(lookup_cache *c);

/* Between requests: free the records retired since the last call, and flush everything
 * when the registry generation moved. */
void lookup_sync(lookup_cache *c, uint64_t generation);

/* Find (kind, key). *out stays owned by the cache and valid until the next lookup_sync
 * (which the chain calls when the next request starts): records evicted or expired in the
 * meantime are freed only then.
 * Returns TN_OK, TN_NOTFOUND, or the fetch error. `gen_now` reads the shared generation
 * again after a fetch so a lookup that raced a change is not cached. */
int lookup_get(lookup_cache *c, int kind, const char *key, int64_t now_ms,
               lookup_fetch_fn fetch, void *ctx, uint64_t (*gen_now)(void *), void *gen_ctx,
               const tenant_rec **out);

/* Drop everything. Only between requests (it frees records handed out). */
void lookup_flush(lookup_cache *c);

void lookup_get_stats(const lookup_cache *c, lookup_stats *s);

#endif
