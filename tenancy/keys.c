/*
 * keys.c — the API key token's form and hash, and a worker's cache of key answers (see
 * keys.h, which says why SHA-256 is the right hash for these tokens).
 *
 * The cache is set-associative: a fixed array of sets of WAYS slots, each (tenant, hash) in
 * one set, a newcomer taking a free slot of its set or else the answer that expires first.
 * The hashes are uniformly random, so their first bits spread the sets well, and a few ways
 * keep as many keys as there are sets without two of them taking turns in one slot (with
 * one way, a thousand keys in a thousand slots shared slots by the hundreds, each miss a
 * registry read). A flood of unknown tokens can only push answers out (costing a registry
 * lookup each), never grow memory. Must not: allocate after creation, keep a token, or
 * compare hashes but in constant time.
 */
#include "core/first.h"
#include "tenancy/keys.h"
#include "core/rc.h"
#include "core/sha256.h"
#include "core/token.h"

#include <stdlib.h>
#include <string.h>

int key_token_new(char out[KEY_TOKEN_MAX])
{
    memcpy(out, KEY_TOKEN_TAG, 4);
    return token_random_b64url(out + 4, KEY_TOKEN_MAX - 4, KEY_TOKEN_RANDOM);
}

static bool b64url_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

static bool shape(const char *s, size_t len)
{
    if (s == NULL || strncmp(s, KEY_TOKEN_TAG, 4) != 0)
        return false;
    for (size_t i = 4; i < len; i++)
        if (!b64url_char(s[i]))
            return false;
    return s[len] == '\0';
}

bool key_token_shape(const char *s)
{
    /* strnlen first: the loop in shape stops at the NUL of a short string (not a b64 char) */
    return s != NULL && strnlen(s, KEY_TOKEN_LEN + 1) == KEY_TOKEN_LEN && shape(s, KEY_TOKEN_LEN);
}

bool key_prefix_shape(const char *s)
{
    return s != NULL && strnlen(s, KEY_PREFIX_LEN + 1) == KEY_PREFIX_LEN &&
           shape(s, KEY_PREFIX_LEN);
}

void key_token_hash(const char *token, char out[KEY_HASH_MAX])
{
    sha256_hex(token, strlen(token), out);
}

void key_token_prefix(const char *token, char out[KEY_PREFIX_MAX])
{
    memcpy(out, token, KEY_PREFIX_LEN);
    out[KEY_PREFIX_LEN] = '\0';
}

/* ---- the cache ---------------------------------------------------------------------------- */

struct slot {
    bool used;
    int64_t tenant_id;
    char hash[KEY_HASH_MAX];
    int64_t expires_ms;      /* of the cached answer, not of the key */
    key_answer a;
};

#define WAYS 4

struct key_cache {
    struct slot *t;
    uint32_t n;                /* slots: a multiple of WAYS (0: off) */
    int64_t ttl_ms, neg_ttl_ms;
    uint64_t generation;
    bool synced;
};

key_cache *key_cache_create(int entries, int64_t ttl_ms, int64_t negative_ttl_ms)
{
    key_cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    if (entries > 0)
        entries = (entries + WAYS - 1) / WAYS * WAYS;
    if (entries > 0 && (c->t = calloc((size_t)entries, sizeof(*c->t))) == NULL) {
        free(c);
        return NULL;
    }
    c->n = entries > 0 ? (uint32_t)entries : 0;
    c->ttl_ms = ttl_ms;
    c->neg_ttl_ms = negative_ttl_ms;
    return c;
}

void key_cache_destroy(key_cache *c)
{
    if (c == NULL)
        return;
    free(c->t);
    free(c);
}

void key_cache_sync(key_cache *c, uint64_t generation)
{
    if (c->synced && generation == c->generation)
        return;
    if (c->n > 0)
        memset(c->t, 0, (size_t)c->n * sizeof(*c->t));
    c->generation = generation;
    c->synced = true;
}

/* The first slot of the set of (tenant, hash). */
static struct slot *set_of(key_cache *c, int64_t tenant_id, const char *hash)
{
    /* the first 16 hex digits of a uniformly random hash, mixed with the tenant */
    uint64_t h = 0;
    for (int i = 0; i < 16; i++) {
        char x = hash[i];
        h = h << 4 | ((uint64_t)(x >= 'a' ? x - 'a' + 10 : x - '0') & 15);
    }
    h ^= (uint64_t)tenant_id * 0x9e3779b97f4a7c15ull;
    return &c->t[h % (c->n / WAYS) * WAYS];
}

/* The slot holding (tenant, hash) in its set, or NULL. Every way is compared, whole: a
 * hash a client's token chose, so no early exit. */
static struct slot *find(struct slot *set, int64_t tenant_id, const char *hash)
{
    struct slot *hit = NULL;
    for (int i = 0; i < WAYS; i++) {
        bool same = token_equal(set[i].hash, hash);
        if (same && set[i].used && set[i].tenant_id == tenant_id)
            hit = &set[i];
    }
    return hit;
}

key_answer *key_cache_get(key_cache *c, int64_t tenant_id, const char *hash, int64_t now_ms)
{
    if (c->n == 0 || strlen(hash) != KEY_HASH_MAX - 1)
        return NULL;
    struct slot *s = find(set_of(c, tenant_id, hash), tenant_id, hash);
    if (s == NULL)
        return NULL;
    if (now_ms >= s->expires_ms) {
        s->used = false;
        return NULL;
    }
    return &s->a;
}

key_answer *key_cache_put(key_cache *c, int64_t tenant_id, const char *hash,
                          const key_answer *a, int64_t now_ms)
{
    if (c->n == 0 || strlen(hash) != KEY_HASH_MAX - 1)
        return NULL;
    struct slot *set = set_of(c, tenant_id, hash);
    struct slot *s = find(set, tenant_id, hash);
    if (s == NULL) {   /* a free slot, else the answer that expires first */
        s = &set[0];
        for (int i = 1; i < WAYS && s->used; i++)
            if (!set[i].used || set[i].expires_ms < s->expires_ms)
                s = &set[i];
    }
    s->used = true;
    s->tenant_id = tenant_id;
    memcpy(s->hash, hash, KEY_HASH_MAX);
    s->expires_ms = now_ms + (a->found ? c->ttl_ms : c->neg_ttl_ms);
    s->a = *a;
    return &s->a;
}

bool key_cache_touch_due(key_answer *a, int64_t now_ms, int64_t interval_ms)
{
    if (!a->found || (a->touched_ms != 0 && now_ms - a->touched_ms < interval_ms))
        return false;
    a->touched_ms = now_ms;
    return true;
}
