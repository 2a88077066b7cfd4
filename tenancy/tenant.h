/*
 * tenant.h — a tenant as the host sees it: the record read from the registry, its states,
 * and the checks every name passes before it touches a lookup or a path.
 *
 * A tenant_rec is one allocation (the struct and its strings) owned by the lookup cache or
 * by the caller that fetched it; the chain lends it to a request, which reads it through the
 * tn_tenant_* functions of include/tenancy.h (there it is the opaque tn_tenant).
 */
#ifndef TN_TENANCY_TENANT_H
#define TN_TENANCY_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tenant_state {
    TENANT_PROVISIONING = 0,   /* storage being created: 503 */
    TENANT_ACTIVE,             /* served */
    TENANT_MAINTENANCE,        /* 503 with Retry-After */
    TENANT_SUSPENDED,          /* 403 */
    TENANT_MOVING,             /* reads served, writes 503 with Retry-After */
    TENANT_DELETING,           /* 404, as if gone (restorable until purged) */
    TENANT_NSTATES
};

typedef struct tenant_setting {
    const char *key;
    const char *value;
} tenant_setting;

typedef struct tenant_rec {
    int64_t id;
    const char *slug;
    const char *name;
    int state;
    const char *placement;     /* where its storage lives (see storage/) */
    const char *storage;       /* placement detail: a file, a schema, a database */
    int max_workers;           /* 0: the host default (tenant.max_workers) */
    int64_t created_at, updated_at;
    int nsettings;
    const tenant_setting *settings;   /* sorted by key */
    const char *settings_json;        /* as stored */
    size_t size;                      /* bytes of this allocation */
} tenant_rec;

const char *tenant_state_name(int state);
int tenant_state_parse(const char *name);   /* -1 when unknown */

/* A slug: 1–63 of [a-z0-9-], starting with a letter or digit, no "--" at the ends; the
 * same rule as a DNS label, so `<slug>.<base domain>` is always a valid host. */
bool tenant_slug_valid(const char *slug);

/* A host name a tenant can have, normalised: request_host_normalise's name when it says the
 * name is valid (tenancy/request.h has the rule). Returns the normalised length, or 0 when
 * invalid. out must hold at least 254 bytes. */
size_t tenant_host_normalise(const char *in, char *out, size_t outlen);

/* Build one allocation from parts (settings parsed from their JSON text: a flat object of
 * strings, numbers and booleans). NULL when out of memory or when the JSON is not such an
 * object. Free with free(). */
tenant_rec *tenant_rec_new(int64_t id, const char *slug, const char *name, int state,
                           const char *placement, const char *storage, int max_workers,
                           int64_t created_at, int64_t updated_at, const char *settings_json);

/* A copy in one allocation. */
tenant_rec *tenant_rec_dup(const tenant_rec *t);

/* A setting's value or NULL. */
const char *tenant_setting_get(const tenant_rec *t, const char *key);

/* Parse a flat JSON object of string/number/boolean/null values into sorted key/value
 * pairs allocated from `alloc` (called with sizes; returns NULL on failure). A key given
 * twice takes the later value; a null value drops its key (an earlier one too). Numbers and
 * booleans come back as their text. Returns the number of pairs, or -1 when the text is not
 * such an object (nested values, \u0000 and raw control characters are refused). */
int settings_parse(const char *json, tenant_setting **out, void *(*alloc)(void *ctx, size_t),
                   void *ctx);

#endif
