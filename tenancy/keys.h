/*
 * keys.h — tenants' API keys: the token's form, its hash, and a worker's cache of answers.
 *
 * A token is `tnk_` followed by 32 random bytes (getrandom) in base64url without padding:
 * 47 characters. The registry keeps only its SHA-256 (hex) and a short prefix that lists show
 * (`tnk_` and the next 8 characters), so a copy of the registry holds no usable key. The
 * token is shown once, when it is made (ops_key_create).
 *
 * Why a fast hash and not yescrypt (as the panel's passwords): a password is guessable, so
 * its hash must make each guess expensive. A token has 256 random bits; no amount of
 * guessing finds one, so a slow hash would add nothing but its cost, and it would be paid on
 * every request of the data API. SHA-256 also makes the hash a lookup key: the registry
 * finds a token by (tenant, hash) in its index, without a salt to read first.
 *
 * The cache: tn_key_check runs on every data API request, so each worker keeps the answers
 * it got (a key, or "no such key") for a short time, bounded, without allocation. It is
 * flushed whenever the registry generation moves (gen.h): every registry change, a revoke
 * included, bumps it, so a revoked key is refused from the next request on, in every worker
 * of the host (and, with a PostgreSQL registry, of every host: watch.h). The TTL only bounds
 * how long an answer lives when no generation is there to flush it. Expiry is checked
 * against the clock at each use, never cached.
 *
 * Must not: keep a token (only hashes reach the cache), compare hashes with memcmp, or
 * touch the registry (the chain does: chain.c).
 */
#ifndef TN_TENANCY_KEYS_H
#define TN_TENANCY_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEY_TOKEN_TAG "tnk_"
#define KEY_TOKEN_RANDOM 32                        /* random bytes in a token */
#define KEY_TOKEN_LEN (4 + 43)                     /* tnk_ + 32 bytes in base64url */
#define KEY_TOKEN_MAX (KEY_TOKEN_LEN + 1)
#define KEY_PREFIX_LEN (4 + 8)                     /* what lists show: tnk_ + 8 characters */
#define KEY_PREFIX_MAX (KEY_PREFIX_LEN + 1)
#define KEY_HASH_MAX 65                            /* SHA-256 in hex, and a NUL */

/* A new token into out. TN_OK, or TN_IO when getrandom failed (nothing is made then). */
int key_token_new(char out[KEY_TOKEN_MAX]);

/* Whether s has a token's form: `tnk_` and 43 base64url characters, nothing more. */
bool key_token_shape(const char *s);

/* Whether s has a prefix's form: `tnk_` and 8 base64url characters. */
bool key_prefix_shape(const char *s);

/* The token's SHA-256 in hex, and its prefix (the token must have the form). */
void key_token_hash(const char *token, char out[KEY_HASH_MAX]);
void key_token_prefix(const char *token, char out[KEY_PREFIX_MAX]);


/* ---- a worker's cache of answers ------------------------------------------------------------ */

typedef struct key_cache key_cache;

/* One answer: for (tenant, hash), the key found (found) or none. */
typedef struct key_answer {
    bool found;
    int64_t key_id;
    unsigned flags;          /* TN_KEY_READ_ONLY */
    int64_t expires_at;      /* Unix seconds; 0: never */
    int64_t revoked_at;      /* Unix seconds; 0: not revoked */
    int64_t touched_ms;      /* when this worker last wrote its last_used_at (0: never) */
} key_answer;

/* entries 0 turns caching off (every check asks the registry). NULL when out of memory. */
key_cache *key_cache_create(int entries, int64_t ttl_ms, int64_t negative_ttl_ms);
void key_cache_destroy(key_cache *c);

/* Flush everything when the registry generation moved since the last call. */
void key_cache_sync(key_cache *c, uint64_t generation);

/* The answer cached for (tenant_id, hash) at now_ms, or NULL. The pointer is valid until the
 * next call on the cache. */
key_answer *key_cache_get(key_cache *c, int64_t tenant_id, const char *hash, int64_t now_ms);

/* Keep an answer (in a free slot of its set, else replacing the answer of that set that
 * expires first). Returns the cached copy, or NULL when caching is off. */
key_answer *key_cache_put(key_cache *c, int64_t tenant_id, const char *hash,
                          const key_answer *a, int64_t now_ms);

/* For a found key: whether its last_used_at is due for a write (at most once every
 * interval_ms per key and worker); marks it written when it is. */
bool key_cache_touch_due(key_answer *a, int64_t now_ms, int64_t interval_ms);

#endif
