/*
 * config.h — the tenancy options of tenancyd.conf (their own table, parsed into the same
 * generation as the host's options), and the parsed forms the chain uses.
 */
#ifndef TN_TENANCY_CONFIG_H
#define TN_TENANCY_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/conf.h"
#include "core/netaddr.h"

/* tenant.affinity: never; once the worker's connections no longer hold every tenant it
 * serves (auto); always. */
enum { AFFINITY_OFF = 0, AFFINITY_AUTO, AFFINITY_ON };
/* jobs.hooks: auto queues a lifecycle hook unless every host whose job workers said so
 * lately runs no app with a job handler (jobs_hooks_wanted, tenancy/jobs.h). */
enum { HOOKS_OFF = 0, HOOKS_ON, HOOKS_AUTO };

enum resolver_kind { RES_HOST = 0, RES_SUBDOMAIN, RES_HEADER, RES_PATH, RES_NKINDS };

/* A named place for tenants' storage: the built-in "sqlite" (a file per tenant under
 * storage.sqlite_dir) or a PostgreSQL server declared with placement.NAME.* keys. */
typedef struct placement {
    const char *name;
    int kind;                     /* target_kind (storage/target.h) */
    const char *server;           /* PostgreSQL URI; NULL for sqlite */
    int max_tenants;              /* schema mode: recycle a connection after this many
                                     schemas; 0 (not set): only the byte bound when it
                                     applies, else POOL_PG_MAX_TENANTS (storage/pool.c,
                                     membound_count; membound_run_count for a CLI run) */
    int64_t max_backend_memory;   /* schema mode: ... or once its backend holds this many
                                     bytes (0: no byte bound) */
    int64_t statement_timeout_ms;
    bool reset_always;            /* session_reset = always */
    int login;                    /* PLACEMENT_LOGIN_*: who the requests' connections log in as */
    int login_groups;             /* login = group: how many group logins (0: not set) */
    const char **group_roles;     /* login = group: their names, tn_<placement>_<i> (finish) */
} placement;

/* placement.NAME.login: the requests' connections log in as the host's own role, a member of
 * every tenant role, and SET LOCAL ROLE per transaction (shared: one connection serves every
 * tenant of the server), or as each tenant's own role (tenant: a connection per tenant, and
 * nothing that runs on it can take another identity), or (schema mode) as one of
 * login_groups group logins, each a member of its share of the tenant roles (group: a
 * connection per group, and PostgreSQL's check of each SET ROLE, which lists every role the
 * login may become, stays as small as a group). Default: shared in schema mode, tenant in
 * database mode (its connections are per tenant already). */
enum {
    PLACEMENT_LOGIN_DEFAULT = 0,
    PLACEMENT_LOGIN_SHARED,
    PLACEMENT_LOGIN_TENANT,
    PLACEMENT_LOGIN_GROUP
};
#define PLACEMENT_GROUPS_DEFAULT 8
#define PLACEMENT_GROUPS_MAX 64

#define MAX_PLACEMENTS 16

typedef struct tenancy_config {
    /* as written */
    const char *resolvers;
    const char *base_domains;
    const char *central_domains;
    const char *host_params;
    const char *header;
    const char *header_from;
    const char *path_prefix;
    const char *registry;
    const char *state_dir;
    const char *max_workers_text;
    int64_t queue_wait_ms;        /* tenant.queue_wait: 0 answers 503 at once */
    int affinity;                 /* tenant.affinity: AFFINITY_* */
    int heavy_nice;               /* tenant.heavy_nice: 0 off */
    bool lookup_cache;
    int64_t lookup_cache_ttl_ms;
    int64_t lookup_cache_negative_ttl_ms;
    int lookup_cache_size;
    int64_t app_cache_bytes;
    int app_cache_entries;
    int64_t theme_max_age_ms;
    const char *default_placement;
    const char *sqlite_dir_text;
    int sqlite_max_open;
    int64_t sqlite_cache_bytes;   /* storage.sqlite_cache_size: each pooled handle's page cache */
    int64_t busy_timeout_ms;
    int pg_db_max_open;
    const char *migrations;       /* folder of the app's migration files ("": none) */
    const char *seed;             /* SQL file run once when a tenant is created ("": none) */
    const char *template_slug;    /* tenant cloned by `tenant create --from-template` */
    int64_t delete_grace_ms;
    int64_t events_ring_size;     /* the host's event log (tenancy/events.h) */
    int events_max_tenants;
    int64_t events_max_event;
    /* jobs (tenancy/jobs.h; the job workers are the host's pm.jobs) */
    int jobs_max_attempts;
    int64_t jobs_timeout_ms;
    int jobs_per_tenant;
    int64_t jobs_max_backoff_ms;
    int64_t jobs_poll_ms;
    int64_t jobs_keep_ms;
    int jobs_hooks;   /* HOOKS_OFF, HOOKS_ON, HOOKS_AUTO */

    /* placements (placement.NAME.KEY lines, plus the built-in "sqlite") */
    placement placements[MAX_PLACEMENTS];
    int nplacements;

    /* parsed (tenancy_config_finish) */
    bool enabled;                 /* at least one resolver */
    int kinds[RES_NKINDS];
    int nkinds;
    const char **bases;           /* ".example.com" (leading dot) */
    int nbases;
    const char **centrals;
    int ncentrals;
    const char **hparams;
    int nhparams;
    const char *header_param;     /* "HTTP_X_TENANT" */
    netaddr_list *header_trusted;
    const char *registry_uri;     /* registry, or sqlite:<state_dir>/control.db */
    const char *gen_path;         /* <state_dir>/registry.gen */
    const char *role_key_path;    /* <state_dir>/role.key: PostgreSQL tenant roles' passwords
                                     are derived from it (tenancy/rolekey.c) */
    int max_workers_abs;          /* 0: no limit */
    int max_workers_pct;          /* 0: absolute */
    const char *sqlite_dir;       /* storage.sqlite_dir, or <state_dir>/tenants */
} tenancy_config;

extern const conf_opt tenancy_config_table[];

/* The conf_unknown_fn for placement.NAME.KEY lines (obj is the tenancy_config). */
int tenancy_config_placement(void *obj, const char *key, const char *value, arena *a,
                             char *err, size_t errlen);

/* A placement by name, or NULL. */
const placement *tenancy_placement(const tenancy_config *c, const char *name);

/* Parse the text options into their forms (a percentage of tenant.max_workers is resolved
 * later, by tenancy_max_workers). TN_OK or TN_INVALID with a message naming the option. */
int tenancy_config_finish(tenancy_config *c, arena *a, char *err, size_t errlen);

/* tenant.affinity may apply on this host: it is not off, tenants are identified, and a
 * placement is a PostgreSQL one (the only kind whose tenants it sends to a home worker). */
bool tenancy_affinity_wanted(const tenancy_config *c);

/* The per-tenant worker cap for a tenant whose own cap is `own` (0: the default); 0 for
 * none, which a cap of max_children or more is too (it could never refuse a request). */
int tenancy_max_workers(const tenancy_config *c, int own, int max_children);

#endif
