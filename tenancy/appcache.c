/*
 * appcache.c — per-worker, per-tenant key/value cache (see appcache.h).
 * Chained hash buckets plus an LRU list through the entries. Must not: let a lookup match
 * an entry of another tenant (the tenant id is part of every comparison).
 */
#include "core/first.h"
#include "tenancy/appcache.h"
#include "core/rc.h"

#include <stdlib.h>
#include <string.h>

struct ent {
    struct ent *hnext;             /* bucket chain */
    struct ent *prev, *next;       /* LRU: head = most recent */
    uint64_t hash;
    int64_t tenant;
    int64_t expires_ms;
    size_t klen, vlen;
    unsigned char data[];          /* key then value */
};

struct appcache {
    struct ent **buckets;
    size_t nbuckets;               /* power of two */
    struct ent *head, *tail;
    size_t bytes, max_bytes;
    int entries, max_entries;
};

static uint64_t hash(int64_t tenant, const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)tenant * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    return h;
}

appcache *appcache_create(size_t max_bytes, int max_entries)
{
    appcache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    size_t nb = 64;
    while (nb < (size_t)max_entries && nb < (1u << 22))
        nb <<= 1;
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (c->buckets == NULL) {
        free(c);
        return NULL;
    }
    c->nbuckets = nb;
    c->max_bytes = max_bytes;
    c->max_entries = max_entries;
    return c;
}

static size_t ent_size(const struct ent *e) { return sizeof(*e) + e->klen + e->vlen; }

static void lru_unlink(appcache *c, struct ent *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_front(appcache *c, struct ent *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (c->tail == NULL)
        c->tail = e;
}

static struct ent **slot(appcache *c, uint64_t h) { return &c->buckets[h & (c->nbuckets - 1)]; }

static void remove_ent(appcache *c, struct ent *e)
{
    struct ent **pp = slot(c, e->hash);
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(c, e);
    c->bytes -= ent_size(e);
    c->entries--;
    free(e);
}

void appcache_destroy(appcache *c)
{
    if (c == NULL)
        return;
    while (c->head)
        remove_ent(c, c->head);
    free(c->buckets);
    free(c);
}

static struct ent *find(appcache *c, int64_t tenant, const char *k, size_t n, uint64_t h)
{
    for (struct ent *e = *slot(c, h); e; e = e->hnext)
        if (e->hash == h && e->tenant == tenant && e->klen == n && memcmp(e->data, k, n) == 0)
            return e;
    return NULL;
}

int appcache_get(appcache *c, int64_t tenant, const char *key, size_t klen, int64_t now_ms,
                 const void **value, size_t *len)
{
    uint64_t h = hash(tenant, key, klen);
    struct ent *e = find(c, tenant, key, klen, h);
    if (e == NULL)
        return TN_NOTFOUND;
    if (e->expires_ms && e->expires_ms <= now_ms) {
        remove_ent(c, e);
        return TN_NOTFOUND;
    }
    lru_unlink(c, e);
    lru_front(c, e);
    *value = e->data + e->klen;
    *len = e->vlen;
    return TN_OK;
}

int appcache_set(appcache *c, int64_t tenant, const char *key, size_t klen, const void *value,
                 size_t len, int64_t expires_ms)
{
    size_t need = sizeof(struct ent) + klen + len;
    if (need > c->max_bytes || c->max_entries <= 0)
        return TN_TOOBIG;
    uint64_t h = hash(tenant, key, klen);
    struct ent *old = find(c, tenant, key, klen, h);
    if (old != NULL)
        remove_ent(c, old);
    while (c->tail != NULL && (c->bytes + need > c->max_bytes || c->entries >= c->max_entries))
        remove_ent(c, c->tail);
    struct ent *e = malloc(need);
    if (e == NULL)
        return TN_NOMEM;
    e->hash = h;
    e->tenant = tenant;
    e->expires_ms = expires_ms;
    e->klen = klen;
    e->vlen = len;
    memcpy(e->data, key, klen);
    if (len)
        memcpy(e->data + klen, value, len);
    struct ent **pp = slot(c, h);
    e->hnext = *pp;
    *pp = e;
    lru_front(c, e);
    c->bytes += need;
    c->entries++;
    return TN_OK;
}

int appcache_del(appcache *c, int64_t tenant, const char *key, size_t klen)
{
    struct ent *e = find(c, tenant, key, klen, hash(tenant, key, klen));
    if (e == NULL)
        return TN_NOTFOUND;
    remove_ent(c, e);
    return TN_OK;
}

size_t appcache_bytes(const appcache *c) { return c->bytes; }
int appcache_entries(const appcache *c) { return c->entries; }
