/*
 * registry.h — the tenant registry (the control store): tenants, their domains, states and
 * settings, in SQLite (`control.db`, the embedded default) or in PostgreSQL (schema
 * `tenancy`, shared by several hosts). One code path above the storage driver layer.
 *
 * Reads are point lookups (a domain, a slug) and paged lists; nothing ever scans the whole
 * registry, so a host with 100,000 tenants starts as fast as one with 3. Every change runs
 * in one transaction that either happens entirely or not at all, then bumps the shared
 * generation (gen.h) and, on PostgreSQL, sends NOTIFY tenancy_registry so other hosts'
 * caches drop it too. Errors name what was wrong ("slug 'acme' is taken").
 */
#ifndef TN_TENANCY_REGISTRY_H
#define TN_TENANCY_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rc.h"
#include "tenancy/tenant.h"

typedef struct registry registry;

/* Connect to `uri` (see storage/db.h); `gen_path` is the host's generation file (NULL:
 * none, for tools that only read). Does not create anything: registry_init does.
 * TN_OK, or TN_IO/TN_INVALID with err set. */
int registry_open(const char *uri, const char *gen_path, registry **out, char *err,
                  size_t errlen);
void registry_close(registry *r);

/* Create the tables when missing, and the generation file when a path was given
 * (idempotent). */
int registry_init(registry *r, char *err, size_t errlen);

/* TN_OK when registry_init has run on this database; TN_NOTFOUND ("the registry is not
 * initialised (run 'tenancy init')") when not, TN_IO when it cannot be reached. Changes
 * nothing (tools check this before their first statement). */
int registry_ready(registry *r, char *err, size_t errlen);

/* The lookup cache's fetch function (ctx = registry): kind LK_DOMAIN or LK_SLUG. */
int registry_fetch(void *ctx, int kind, const char *key, tenant_rec **out);

/* The generation counter now (0 without a generation file). */
uint64_t registry_generation(void *ctx);

typedef struct registry_new {
    const char *slug;
    const char *name;
    const char *placement;   /* NULL: "sqlite" */
    const char *storage;     /* NULL: "" (filled when storage is provisioned) */
    int state;               /* TENANT_ACTIVE or TENANT_PROVISIONING */
    int max_workers;         /* 0: the host default */
    const char *settings;    /* NULL: "{}"; a flat JSON object (see below) */
    const char *const *domains;   /* created in the same transaction; the first is primary */
    int ndomains;
} registry_new;

/* Each change returns TN_OK, TN_EXISTS, TN_NOTFOUND, TN_INVALID or a storage error, with
 * a sentence in err; nothing is changed unless it returns TN_OK, and each TN_OK bumps the
 * generation exactly once.
 *
 * Checks: a slug passes tenant_slug_valid; a name is 1-200 bytes of UTF-8 without control
 * characters; a new tenant is TENANT_ACTIVE or TENANT_PROVISIONING; max_workers is 0-100000;
 * a domain passes tenant_host_normalise, has no port, and is stored normalised (a domain
 * given twice is TN_INVALID). Settings are stored as a flat JSON object with unique keys
 * sorted by byte and every value a string (numbers and booleans given at create keep their
 * text); keys are 1-128 bytes of UTF-8 without control characters, values at most 8192
 * bytes of UTF-8.
 *
 * A tenant always has a primary domain while it has domains: the first one created or added
 * becomes primary; adding with `primary` moves it (also onto a domain the tenant already
 * has); removing the primary promotes the tenant's first remaining domain by name.
 * Removing a setting the tenant does not have is TN_NOTFOUND. */
int registry_create(registry *r, const registry_new *t, int64_t *id, char *err, size_t errlen);
int registry_set_state(registry *r, const char *slug, int state, char *err, size_t errlen);
int registry_set_storage(registry *r, const char *slug, const char *placement,
                         const char *storage, char *err, size_t errlen);
int registry_set_max_workers(registry *r, const char *slug, int max_workers, char *err,
                             size_t errlen);
int registry_set_setting(registry *r, const char *slug, const char *key, const char *value,
                         char *err, size_t errlen);   /* value NULL: remove the key */
int registry_domain_add(registry *r, const char *slug, const char *domain, bool primary,
                        char *err, size_t errlen);
int registry_domain_remove(registry *r, const char *domain, char *err, size_t errlen);
/* Remove the tenant and its domains for good. */
int registry_purge(registry *r, const char *slug, char *err, size_t errlen);

/* One tenant with its domains (for show). */
typedef struct registry_domain {
    const char *domain;
    bool primary;
} registry_domain;

typedef int (*registry_list_fn)(void *ctx, const tenant_rec *t, const registry_domain *d,
                                int nd);

/* Tenants in slug order, optionally filtered by state (-1: all) and a slug/name substring
 * (ASCII case ignored; % and _ match themselves), after `after_slug` (keyset paging), at
 * most `limit` (0: 100). fn returns TN_OK to go on, TN_DONE to stop (then the list returns
 * TN_OK), anything else to fail with that. *total gets the count matching the filter (not
 * the page) when not NULL, -1 when it could not be counted. */
int registry_list(registry *r, int state, const char *search, const char *after_slug,
                  int limit, registry_list_fn fn, void *ctx, int64_t *total);

/* The tenant and its domains. TN_NOTFOUND when no such slug. */
int registry_show(registry *r, const char *slug, registry_list_fn fn, void *ctx);

/* The underlying connection (the admin panel and migrations use it). */
tn_db *registry_db(registry *r);

#endif
