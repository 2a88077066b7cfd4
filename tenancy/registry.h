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
#include "storage/db.h"
#include "tenancy/tenant.h"

typedef struct registry registry;

/* Connect to `uri` (see storage/db.h); `gen_path` is the host's generation file (NULL:
 * none, for tools that only read). Does not create anything: registry_init does.
 * TN_OK, or TN_IO/TN_INVALID with err set. */
int registry_open(const char *uri, const char *gen_path, registry **out, char *err,
                  size_t errlen);
void registry_close(registry *r);

/* Bulk changes (tenant create --from-file): registry_defer_sync makes this connection's
 * commits stop waiting for the disk one by one (SQLite; nothing changes on PostgreSQL), and
 * registry_flush makes everything committed so far durable, whichever connection committed
 * it (see db_defer_sync). TN_OK, or the storage error with err set. */
int registry_defer_sync(registry *r, char *err, size_t errlen);
int registry_flush(registry *r, char *err, size_t errlen);

/* Create the registry's tables when missing (one schema for SQLite and PostgreSQL; a
 * registry of an earlier layout is left as it is), and the generation file when a path was
 * given (idempotent). Only the registry's own tables: other modules that keep tables in
 * the same database make their own (the panel's: admin/sessions.h). TN_OK, or a storage
 * error, TN_NOMEM or TN_IO (the generation file) with err set. */
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

/* ---- migrations: where each tenant's storage stands (tenancy migrate, tenant create) ----
 * The registry keeps a copy of each tenant's migration version and the last migration error;
 * the version table in the tenant's own storage stays the truth (storage/migrate.h). */

/* Record a tenant's version (the highest applied, "" none) and its last migration error
 * ("" after a success). Unlike every other change it does NOT bump the generation: no worker
 * caches these columns, and a wave over 10,000 tenants must not flush every worker's lookup
 * cache 10,000 times. TN_OK, TN_NOTFOUND, TN_INVALID or a storage error. */
int registry_set_migration(registry *r, const char *slug, const char *version,
                           const char *last_error, char *err, size_t errlen);

/* The same for many tenants in one transaction (tenancy migrate: one commit per batch,
 * not per tenant; no generation bump either). Each entry's rc is set: TN_OK, or
 * TN_NOTFOUND for a slug the registry no longer has (the others are recorded all the
 * same). Returns TN_OK, TN_INVALID, or a storage error with err set (then nothing of the
 * batch is recorded). */
typedef struct registry_migration_update {
    const char *slug, *version, *last_error;
    int rc;
} registry_migration_update;
int registry_set_migrations(registry *r, registry_migration_update *u, int n, char *err,
                            size_t errlen);

/* The last step of provisioning: the version recorded, the last error cleared and the state
 * set (TENANT_ACTIVE, or TENANT_PROVISIONING to keep it unserved), in one transaction that
 * bumps the generation once. TN_OK, TN_NOTFOUND, TN_INVALID or a storage error. */
int registry_provisioned(registry *r, const char *slug, const char *version, int state,
                         char *err, size_t errlen);

typedef struct registry_migration {
    int64_t id;
    const char *slug, *name;
    int state;
    const char *placement, *storage;
    const char *version;      /* migration_version ("" none) */
    const char *last_error;   /* "" when the last migration succeeded */
} registry_migration;

/* fn gets each tenant (strings valid during the call only) and must not use the registry;
 * TN_OK to go on, anything else stops the walk and is returned. */
typedef int (*registry_migration_fn)(void *ctx, const registry_migration *m);

/* Tenants of every state in slug order after `after_slug` ("" or NULL: from the first), at
 * most `limit` (0: 1000), without their domains: one query a page. *count (when not NULL)
 * gets the rows seen. TN_OK or a storage error. */
int registry_migration_list(registry *r, const char *after_slug, int limit,
                            registry_migration_fn fn, void *ctx, int *count);

/* One tenant. TN_NOTFOUND when no such slug. */
int registry_migration_get(registry *r, const char *slug, registry_migration_fn fn, void *ctx);

/* Tenants per migration version, tenants being deleted left out, in ONE query (GROUP BY):
 * fn gets each version in order ("" for tenants never migrated), how many tenants are at it,
 * and how many of those have a last_error. TN_OK or a storage error. */
typedef int (*registry_version_fn)(void *ctx, const char *version, int64_t tenants,
                                   int64_t failing);
int registry_migration_status(registry *r, registry_version_fn fn, void *ctx);

/* The underlying connection (the admin panel, migrations and the job store use it). */
tn_db *registry_db(registry *r);

/* After a statement on registry_db(r) failed with TN_IO: roll back what is open, reconnect
 * when the connection broke, and restore the session the registry's statements need (the
 * search_path). Failures are logged; the next statement reports them. */
void registry_reconnect(registry *r);

/* PostgreSQL only: pg_notify(channel, payload) on the registry's connection, so every host
 * that LISTENs gets it (tn_publish's events: tenancy/events.h). Outside a transaction it is
 * sent at once. TN_OK, TN_DECLINED (a SQLite registry: no other host to tell), or a storage
 * error (TN_IO: the connection is lost). */
int registry_notify(registry *r, const char *channel, const char *payload);

/* ---- lifecycle: move, import, delete with a grace period, purge, check --------------------
 * (cli/move.c and cli/lifecycle.c). Same rules as the changes above: one transaction,
 * one generation bump on TN_OK, nothing changed otherwise, a sentence in err.
 *
 * A deleted tenant (state deleting) keeps deleted_at, the time it was deleted; it can be
 * restored until the grace period (storage.delete_grace) has passed. A purge then removes it
 * in three steps, each safe to repeat: (1) registry_tombstone: its domains are released and
 * deleted_at is set to 0, which marks the row as a tombstone: never restorable, never served,
 * but still holding its slug and where its storage is; (2) the CLI drops the storage;
 * (3) registry_purge_tombstone removes the row. A purge cut between the steps leaves a
 * tombstone, which the next `tenancy purge --expired` finishes; the registry never points at
 * storage that is gone, and no storage is left without a row that says where it is. */

typedef struct registry_life {
    int state;
    int64_t updated_at;        /* the last change of the row (a state change included) */
    int64_t deleted_at;        /* state deleting: when; 0 for a tombstone; -1 otherwise */
    char migration_version[64];
} registry_life;

int registry_life_get(registry *r, const char *slug, registry_life *out, char *err,
                      size_t errlen);

/* Change the state only when it is one of `from` (a mask of 1u << state), atomically.
 * *was (may be NULL) gets the state found. TN_BUSY when the state was not in the mask
 * ("tenant 'x' is moving"). Entering deleting records deleted_at; leaving it clears it. */
int registry_set_state_if(registry *r, const char *slug, unsigned from, int to, int *was,
                          char *err, size_t errlen);

/* The end of a move: placement and storage switched and the state set to `state`, in one
 * transaction, only while the tenant is still moving from (from_placement, from_storage).
 * TN_BUSY when it is not (someone resumed, deleted or moved it: the move must be given up). */
int registry_switch_storage(registry *r, const char *slug, const char *from_placement,
                            const char *from_storage, const char *placement,
                            const char *storage, int state, char *err, size_t errlen);

/* Restore a deleted tenant to active when it was deleted after `not_before`. TN_NOTFOUND
 * (no tenant: a purged one is gone), TN_INVALID (not deleted), TN_TIMEOUT (its grace
 * period is over), TN_BUSY (a tombstone: its purge has begun). */
int registry_restore(registry *r, const char *slug, int64_t not_before, char *err,
                     size_t errlen);

/* Purge step 1 (see above) for a tenant deleted at or before `deleted_before` (INT64_MAX:
 * whenever), or already a tombstone (then TN_OK, nothing changed but the generation).
 * TN_INVALID when it is not deleted; TN_TIMEOUT when it was deleted after deleted_before. */
int registry_tombstone(registry *r, const char *slug, int64_t deleted_before, char *err,
                       size_t errlen);

/* Purge step 3: remove a tombstone's row. TN_INVALID for a tenant that is not one. */
int registry_purge_tombstone(registry *r, const char *slug, char *err, size_t errlen);

/* Deleted tenants due for a purge (deleted at or before `deleted_before`; tombstones always
 * are), in slug order after `after_slug`, at most `limit` (0: 100). fn as registry_list's. */
int registry_list_due(registry *r, int64_t deleted_before, const char *after_slug, int limit,
                      int (*fn)(void *ctx, const char *slug), void *ctx);

/* ---- API keys (tenancy/keys.h): a tenant's bearer tokens, kept as SHA-256 hashes ----------
 * Create and revoke follow the rules above (one transaction, one generation bump on TN_OK, so
 * every worker's key cache is flushed by its next request). A registry made before the keys'
 * table gets it at its first key create; until then every read answers "no keys". */

typedef struct registry_key {
    int64_t id, tenant_id;
    const char *slug;            /* the tenant's */
    const char *prefix;          /* "tnk_" and 8 characters: what a person sees */
    const char *label;           /* "" when none */
    bool read_only;
    int64_t created_at;
    int64_t expires_at;          /* Unix seconds; 0: never */
    int64_t revoked_at;          /* 0: not revoked */
    int64_t last_used_at;        /* 0: never used (written at most once a minute) */
} registry_key;

typedef struct registry_key_new {
    const char *slug;
    const char *prefix, *hash;   /* key_token_prefix, key_token_hash of the token */
    bool read_only;
    const char *label;           /* NULL: ""; at most 200 bytes of UTF-8, no control chars */
    int64_t created_at;
    int64_t expires_at;          /* 0: never */
} registry_key_new;

/* TN_OK with *id (may be NULL), TN_NOTFOUND (no such tenant), TN_INVALID (a prefix or hash
 * of the wrong form, a bad label, an expiry not after creation), TN_EXISTS (the hash is
 * there already), or a storage error. */
int registry_key_create(registry *r, const registry_key_new *k, int64_t *id, char *err,
                        size_t errlen);

/* fn gets each key (strings valid during the call only) and must not use the registry;
 * TN_OK to go on, TN_DONE to stop, anything else stops the list and is returned. */
typedef int (*registry_key_fn)(void *ctx, const registry_key *k);

/* The keys of one tenant (slug) or of all (slug NULL: by tenant slug then id), in id order
 * after `after_id`, at most `limit` (0: 100): one query a page. *count (may be NULL) gets the
 * rows seen. TN_OK, TN_NOTFOUND (no such tenant), or a storage error with err set. */
int registry_key_list(registry *r, const char *slug, int64_t after_id, int limit,
                      registry_key_fn fn, void *ctx, int *count, char *err, size_t errlen);

/* Revoke one key of tenant slug, named by its id (id > 0) or its prefix (id 0), at `now`.
 * A key already revoked keeps its revoked_at and gives TN_OK with *already true. *out (may be
 * NULL) gets the key after the change (its strings are the registry's until its next call).
 * TN_NOTFOUND (no such tenant, or no such key of it), TN_INVALID (a prefix several keys
 * share: the id then), or a storage error. */
int registry_key_revoke(registry *r, const char *slug, int64_t id, const char *prefix,
                        int64_t now, registry_key *out, bool *already, char *err,
                        size_t errlen);

/* The key of tenant_id whose token has this hash, revoked and expired ones included (the
 * caller decides): TN_OK with *out (slug, prefix and label are NULL), TN_NOTFOUND, or a
 * storage error (logged). Reads nothing but that row. */
int registry_key_find(registry *r, int64_t tenant_id, const char *hash, registry_key *out);

/* Record that the key was used at `now`, unless it was within the last min_interval_s
 * seconds (a guard that holds across workers and hosts). Like registry_set_migration it does
 * NOT bump the generation: no answer depends on it. TN_OK or a storage error (logged). */
int registry_key_touch(registry *r, int64_t id, int64_t now, int64_t min_interval_s);

/* ---- the job store's tables (tenancy/jobs.h) ----------------------------------------------
 * jobs, job_queues and job_schedules are part of the registry's schema: registry_init makes
 * them, and a registry made before them gets them from `tenancy init` run again or from the
 * store's first call (registry_jobs_prepare), as api_keys. */

/* Make the job tables when one is missing; the catalog is asked once per handle. TN_OK, or
 * a storage error with err set. */
int registry_jobs_prepare(registry *r, char *err, size_t errlen);

/* The handle's buffer for the strings of the job store's records (jobs_get, jobs_claim):
 * reset by the store's next call on this handle, freed by registry_close. */
struct buf;
struct buf *registry_jobs_text(registry *r);

#endif
