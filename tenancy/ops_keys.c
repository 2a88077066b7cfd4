/*
 * ops_keys.c — tenants' API keys (see ops.h): make one (the token is shown once and only its
 * hash is kept), list them, revoke one. The command (`tenancy key`) and the panel call these
 * same functions; the host checks a token in tenancy/chain.c (tn_key_check).
 *
 * Each change is one registry transaction that bumps the generation, so a revoke reaches
 * every worker's key cache by its next request.
 *
 * Must not: keep or log a token, print, or check what the registry checks (the label, the
 * tenant: its message is the one returned).
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/rc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEYS_PAGE 500

/* 30d, 12h, 90m, 3600s, 2w: seconds, or -1. */
static int64_t duration_s(const char *t)
{
    char *end;
    if (!isdigit((unsigned char)t[0]))
        return -1;
    long long n = strtoll(t, &end, 10);
    if (n <= 0 || n > 100LL * 365 * 86400 || end[0] == '\0' || end[1] != '\0')
        return -1;
    switch (end[0]) {
    case 's': return n;
    case 'm': return n * 60;
    case 'h': return n * 3600;
    case 'd': return n * 86400;
    case 'w': return n * 7 * 86400;
    default: return -1;
    }
}

/* 2027-01-31 (its start, UTC) or 2027-01-31T12:00:00Z: Unix seconds, or -1. */
static int64_t date_s(const char *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(t, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end == NULL || *end != '\0') {
        memset(&tm, 0, sizeof(tm));
        end = strptime(t, "%Y-%m-%d", &tm);
        if (end == NULL || *end != '\0')
            return -1;
    }
    return (int64_t)timegm(&tm);
}

int ops_key_expiry(const char *text, int64_t now, int64_t *out, char *err, size_t errlen)
{
    int64_t d = duration_s(text), at = d > 0 ? now + d : date_s(text);
    if (at < 0)
        return tn_errf(err, errlen, TN_INVALID,
                       "'%.64s' is neither a duration (30d, 12h, 90m, 3600s, 2w) nor a UTC date "
                       "(2027-01-31 or 2027-01-31T12:00:00Z)", text);
    if (at <= now)
        return tn_errf(err, errlen, TN_INVALID, "'%.64s' is not in the future", text);
    *out = at;
    return TN_OK;
}

int ops_key_create(ops_env *e, const char *slug, const ops_key_opts *o, ops_key_made *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int64_t now = (int64_t)time(NULL), expires = 0;
    if (o->expires != NULL) {
        int rc = ops_key_expiry(o->expires, now, &expires, err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    if (key_token_new(out->token) != TN_OK)
        return tn_errf(err, errlen, TN_IO, "no random bytes for a key (getrandom failed)");
    char hash[KEY_HASH_MAX];
    key_token_hash(out->token, hash);
    key_token_prefix(out->token, out->prefix);
    registry_key_new k = {.slug = slug, .prefix = out->prefix, .hash = hash,
                          .read_only = o->read_only, .label = o->label, .created_at = now,
                          .expires_at = expires};
    int rc = registry_key_create(e->reg, &k, &out->id, err, errlen);
    if (rc != TN_OK) {
        explicit_bzero(out->token, sizeof(out->token));
        return rc;
    }
    out->read_only = o->read_only;
    out->created_at = now;
    out->expires_at = expires;
    return TN_OK;
}

typedef struct list_ctx {
    registry_key_fn fn;
    void *ctx;
    int64_t last;
    bool stop;
} list_ctx;

static int list_cb(void *ctx, const registry_key *k)
{
    list_ctx *l = ctx;
    l->last = k->id;
    int rc = l->fn(l->ctx, k);
    if (rc == TN_DONE)
        l->stop = true;
    return rc;
}

int ops_key_list(ops_env *e, const char *slug, registry_key_fn fn, void *ctx, char *err,
                 size_t errlen)
{
    list_ctx l = {fn, ctx, 0, false};
    for (;;) {
        int n = 0;
        int rc = registry_key_list(e->reg, slug, l.last, KEYS_PAGE, list_cb, &l, &n, err,
                                   errlen);
        if (rc != TN_OK || l.stop || n < KEYS_PAGE)
            return rc;
    }
}

int ops_key_revoke(ops_env *e, const char *slug, const char *which, registry_key *out,
                   bool *already, char *err, size_t errlen)
{
    int64_t id = 0;
    char prefix[KEY_PREFIX_MAX] = "";
    size_t n = which ? strlen(which) : 0;
    if (n > 0 && n <= 18 && strspn(which, "0123456789") == n) {
        id = strtoll(which, NULL, 10);
    } else if (key_prefix_shape(which) || key_token_shape(which)) {
        key_token_prefix(which, prefix);
    } else {
        return tn_errf(err, errlen, TN_INVALID,
                       "'%.64s' is neither a key id nor a key prefix (tnk_ and 8 characters)",
                       which ? which : "");
    }
    if (id == 0 && prefix[0] == '\0')
        return tn_errf(err, errlen, TN_INVALID, "key ids start at 1");
    return registry_key_revoke(e->reg, slug, id, prefix[0] ? prefix : NULL, (int64_t)time(NULL),
                               out, already, err, errlen);
}
