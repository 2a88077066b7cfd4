/*
 * appcache.h — the per-tenant cache apps use (tn_cache_get/set/del), one per worker.
 *
 * Keys are (tenant id, key bytes): the tenant comes from the request, never from the app,
 * so one tenant cannot name another's entries. Bounded by bytes and entries; the least
 * recently used entry goes first; expired entries are dropped when met. Not shared between
 * workers (each has its own; a value set in one worker is not seen by the others).
 */
#ifndef TN_TENANCY_APPCACHE_H
#define TN_TENANCY_APPCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct appcache appcache;

appcache *appcache_create(size_t max_bytes, int max_entries);
void appcache_destroy(appcache *c);

/* TN_OK with *value pointing into the cache (valid until the next set/del on this cache),
 * or TN_NOTFOUND. */
int appcache_get(appcache *c, int64_t tenant, const char *key, size_t klen, int64_t now_ms,
                 const void **value, size_t *len);
/* expires_ms 0: never. TN_OK, TN_TOOBIG, TN_NOMEM. */
int appcache_set(appcache *c, int64_t tenant, const char *key, size_t klen, const void *value,
                 size_t len, int64_t expires_ms);
int appcache_del(appcache *c, int64_t tenant, const char *key, size_t klen);

size_t appcache_bytes(const appcache *c);
int appcache_entries(const appcache *c);

#endif
