/*
 * config.c — the tenancy option table and its parsed forms (see config.h).
 * Must not: open the registry or any file (this runs in `tenancyd -t` and on reload).
 */
#include "core/first.h"
#include "tenancy/config.h"
#include "storage/target.h"
#include "core/rc.h"
#include "tenancy/tenant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(tenancy_config, f)

static const char *const affinity_names[] = {"off", "auto", "on", NULL};
static const char *const hooks_names[] = {"off", "on", "auto", NULL};   /* HOOKS_* */

const conf_opt tenancy_config_table[] = {
    {"tenant.resolvers", CONF_STR, OFF(resolvers), "", 0, 0, NULL, 0,
     "ordered tenant resolvers: host, subdomain, header, path (empty: no tenancy)"},
    {"tenant.base_domains", CONF_STR, OFF(base_domains), "", 0, 0, NULL, 0,
     "domains whose subdomains name tenants (acme.example.com -> acme)"},
    {"tenant.central_domains", CONF_STR, OFF(central_domains), "", 0, 0, NULL, 0,
     "host names that never resolve to a tenant (the platform's, the admin panel's)"},
    {"tenant.host_params", CONF_STR, OFF(host_params), "TENANT_HOST", 0, 0, NULL, 0,
     "FastCGI params carrying the host, first present wins (set by the web server)"},
    {"tenant.header", CONF_STR, OFF(header), "X-Tenant", 0, 0, NULL, 0,
     "request header naming the tenant (header resolver)"},
    {"tenant.header_from", CONF_STR, OFF(header_from), "", 0, 0, NULL, 0,
     "client addresses whose tenant header is trusted (empty: none)"},
    {"tenant.path_prefix", CONF_STR, OFF(path_prefix), "/t/", 0, 0, NULL, 0,
     "path prefix before the tenant slug (path resolver), stripped for the handler"},
    {"tenant.max_workers", CONF_STR, OFF(max_workers_text), "50%", 0, 0, NULL, 0,
     "most workers one tenant may occupy at once: a number or a percentage of the pool"},
    {"tenant.heavy_nice", CONF_INT, OFF(heavy_nice), "19", 0, 19, NULL, 0,
     "nice increment of a worker serving a tenant wanting more than its share (0: off)"},
    {"tenant.queue_wait", CONF_DURATION, OFF(queue_wait_ms), "5s", 0, 3600000, NULL, 0,
     "how long a request of a tenant at tenant.max_workers waits, holding no worker, before 503"},
    {"tenant.affinity", CONF_ENUM, OFF(affinity), "auto", 0, 0, affinity_names, 0,
     "serve each PostgreSQL tenant's requests in one worker of the pool, its home (its "
     "connection keeps that tenant's catalog warm): off, on, or auto (once a worker's "
     "connection could not keep every tenant it served)"},
    {"registry", CONF_STR, OFF(registry), NULL, 0, 0, NULL, 0,
     "the tenant registry: sqlite:PATH or postgres:CONNINFO (default: the state_dir's)"},
    {"state_dir", CONF_STR, OFF(state_dir), "/var/lib/tenancy", 0, 0, NULL, 0,
     "folder of the default registry, tenant files and the invalidation counter"},
    {"lookup_cache", CONF_BOOL, OFF(lookup_cache), "on", 0, 0, NULL, 0,
     "cache tenant lookups in each worker"},
    {"lookup_cache.ttl", CONF_DURATION, OFF(lookup_cache_ttl_ms), "60s", 0, 86400000, NULL, 0,
     "how long a found tenant stays cached"},
    {"lookup_cache.negative_ttl", CONF_DURATION, OFF(lookup_cache_negative_ttl_ms), "5s", 0,
     86400000, NULL, 0, "how long an unknown host stays cached as unknown"},
    {"lookup_cache.size", CONF_INT, OFF(lookup_cache_size), "10000", 16, 10000000, NULL, 0,
     "most cached lookups per worker"},
    {"app_cache.bytes", CONF_SIZE, OFF(app_cache_bytes), "16M", 0, (long long)1 << 34, NULL, 0,
     "most bytes of the per-tenant app cache in each worker"},
    {"app_cache.entries", CONF_INT, OFF(app_cache_entries), "100000", 16, 100000000, NULL, 0,
     "most entries of the per-tenant app cache in each worker"},
    {"theme.max_age", CONF_DURATION, OFF(theme_max_age_ms), "5m", 0, 86400000, NULL, 0,
     "Cache-Control max-age of /_theme.css"},
    {"storage.placement", CONF_STR, OFF(default_placement), "sqlite", 0, 0, NULL, 0,
     "placement of new tenants: sqlite or a placement.NAME declared here"},
    {"storage.sqlite_dir", CONF_STR, OFF(sqlite_dir_text), NULL, 0, 0, NULL, 0,
     "folder of the tenants' SQLite files (default: state_dir/tenants)"},
    {"storage.sqlite_max_open", CONF_INT, OFF(sqlite_max_open), "1024", 1, 100000, NULL, 0,
     "SQLite files a worker keeps open (least recently used closed first)"},
    {"storage.sqlite_cache_size", CONF_SIZE, OFF(sqlite_cache_bytes), "256k", 16384,
     (long long)1 << 30, NULL, 0, "page cache of each SQLite file a worker keeps open"},
    {"storage.busy_timeout", CONF_DURATION, OFF(busy_timeout_ms), "5s", 0, 3600000, NULL, 0,
     "how long a SQLite statement waits for a lock"},
    {"storage.pg_db_max_open", CONF_INT, OFF(pg_db_max_open), "8", 1, 10000, NULL, 0,
     "database-mode connections a worker keeps open"},
    {"storage.migrations", CONF_STR, OFF(migrations), "", 0, 0, NULL, 0,
     "folder of the app's migration files, applied in name order"},
    {"storage.seed", CONF_STR, OFF(seed), "", 0, 0, NULL, 0,
     "SQL file run once in a new tenant's storage after its migrations"},
    {"storage.template", CONF_STR, OFF(template_slug), "", 0, 0, NULL, 0,
     "tenant whose storage `tenant create --from-template` clones"},
    {"storage.delete_grace", CONF_DURATION, OFF(delete_grace_ms), "168h", 0, 0, NULL, 0,
     "how long a deleted tenant can be restored before `tenancy purge` drops it"},
    {"events.ring_size", CONF_SIZE, OFF(events_ring_size), "8M", 65536, (long long)1 << 32,
     NULL, CONF_RESTART, "bytes of the host's event log (tn_publish), kept in shared memory"},
    {"events.max_tenants", CONF_INT, OFF(events_max_tenants), "10000", 1, 10000000, NULL,
     CONF_RESTART, "most tenants the event log numbers events for"},
    {"events.max_event", CONF_SIZE, OFF(events_max_event), "64k", 1, 16777216, NULL, 0,
     "largest event data tn_publish takes"},
    {"jobs.max_attempts", CONF_INT, OFF(jobs_max_attempts), "5", 1, 1000, NULL, 0,
     "attempts a job gets before it is kept as dead (tn_job_opts.max_attempts overrides)"},
    {"jobs.timeout", CONF_DURATION, OFF(jobs_timeout_ms), "5m", 100, 86400000, NULL, 0,
     "how long one attempt of a job may run before its job worker is stopped"},
    {"jobs.per_tenant", CONF_INT, OFF(jobs_per_tenant), "2", 0, 100000, NULL, 0,
     "most jobs of one tenant running at once on all hosts (0: no cap)"},
    {"jobs.max_backoff", CONF_DURATION, OFF(jobs_max_backoff_ms), "1h", 1000, 604800000, NULL,
     0, "longest wait before a failed job's next attempt (the wait doubles from 1 s)"},
    {"jobs.poll", CONF_DURATION, OFF(jobs_poll_ms), "1s", 10, 60000, NULL, 0,
     "how often an idle job worker looks for jobs queued by another process or host"},
    {"jobs.hooks", CONF_ENUM, OFF(jobs_hooks), "auto", 0, 0, hooks_names, 0,
     "tell the apps' job handlers of tenants created, suspended, resumed, restored, "
     "migrated, moved and deleted (jobs named tenancy.*): on, off, or auto (queued while "
     "some host's job workers run an app with a job handler, or no host's run)"},
    {"jobs.keep", CONF_DURATION, OFF(jobs_keep_ms), "168h", 60000, 31536000000LL, NULL, 0,
     "how long done and cancelled jobs are kept (dead ones stay until retried)"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};

static const char *const kind_names[RES_NKINDS] = {"host", "subdomain", "header", "path"};

const placement *tenancy_placement(const tenancy_config *c, const char *name)
{
    for (int i = 0; i < c->nplacements; i++)
        if (strcmp(c->placements[i].name, name) == 0)
            return &c->placements[i];
    return NULL;
}

static bool placement_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

int tenancy_config_placement(void *obj, const char *key, const char *value, arena *a,
                             char *err, size_t errlen)
{
    tenancy_config *c = obj;
    if (strncmp(key, "placement.", 10) != 0)
        return TN_NOTFOUND;
    const char *name = key + 10;
    const char *dot = strrchr(name, '.');
    if (dot == NULL || !placement_name_ok(name, (size_t)(dot - name))) {
        return tn_errf(err, errlen, TN_INVALID,
                       "%s: expected placement.NAME.dsn|mode|max_tenants|max_backend_memory|"
                       "statement_timeout|session_reset|login|login_groups with NAME of a-z, "
                       "0-9, _ and -",
                       key);
    }
    size_t nl = (size_t)(dot - name);
    const char *field = dot + 1;
    placement *p = NULL;
    for (int i = 0; i < c->nplacements; i++)
        if (strlen(c->placements[i].name) == nl && strncmp(c->placements[i].name, name, nl) == 0)
            p = &c->placements[i];
    if (p == NULL) {
        if (nl == 6 && strncmp(name, "sqlite", 6) == 0) {
            return tn_errf(err, errlen, TN_INVALID, "%s: 'sqlite' is the built-in placement", key);
        }
        if (c->nplacements >= MAX_PLACEMENTS) {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: at most %d placements", key, MAX_PLACEMENTS);
        }
        p = &c->placements[c->nplacements++];
        memset(p, 0, sizeof(*p));
        p->name = arena_strndup(a, name, nl);
        p->kind = TARGET_PG_SCHEMA;
        p->max_tenants = 0;   /* not set: see config.h */
        p->max_backend_memory = POOL_PG_MAX_BACKEND_BYTES;
    }
    if (strcmp(field, "dsn") == 0) {
        if (strncmp(value, "postgres:", 9) != 0 && strncmp(value, "postgresql://", 13) != 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected a postgres: or postgresql:// URI", key);
        }
        p->server = arena_strdup(a, value);
    } else if (strcmp(field, "mode") == 0) {
        if (strcmp(value, "schema") == 0)
            p->kind = TARGET_PG_SCHEMA;
        else if (strcmp(value, "database") == 0)
            p->kind = TARGET_PG_DATABASE;
        else {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected schema or database, got '%s'", key, value);
        }
    } else if (strcmp(field, "max_tenants") == 0) {
        long long v;
        if (conf_parse_int(value, &v) != TN_OK || v < 1 || v > 1000000) {
            return tn_errf(err, errlen, TN_INVALID, "%s: expected a count from 1 to 1000000", key);
        }
        p->max_tenants = (int)v;
    } else if (strcmp(field, "max_backend_memory") == 0) {
        int64_t v;
        if (conf_parse_size(value, &v) != TN_OK || v < 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected a size (e.g. 64M, 512k) or 0 for no bound, got '%s'",
                           key, value);
        }
        p->max_backend_memory = v;
    } else if (strcmp(field, "statement_timeout") == 0) {
        if (conf_parse_duration(value, &p->statement_timeout_ms) != TN_OK) {
            return tn_errf(err, errlen, TN_INVALID, "%s: expected a duration", key);
        }
    } else if (strcmp(field, "session_reset") == 0) {
        if (strcmp(value, "auto") == 0) {
            p->reset_always = false;
        } else if (strcmp(value, "always") == 0) {
            p->reset_always = true;
        } else {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected auto or always, got '%s'", key, value);
        }
    } else if (strcmp(field, "login") == 0) {
        if (strcmp(value, "shared") == 0) {
            p->login = PLACEMENT_LOGIN_SHARED;
        } else if (strcmp(value, "tenant") == 0) {
            p->login = PLACEMENT_LOGIN_TENANT;
        } else if (strcmp(value, "group") == 0) {
            p->login = PLACEMENT_LOGIN_GROUP;
        } else {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected shared, tenant or group, got '%s'", key, value);
        }
    } else if (strcmp(field, "login_groups") == 0) {
        long long v;
        if (conf_parse_int(value, &v) != TN_OK || v < 1 || v > PLACEMENT_GROUPS_MAX) {
            return tn_errf(err, errlen, TN_INVALID, "%s: expected a count from 1 to %d", key,
                           PLACEMENT_GROUPS_MAX);
        }
        p->login_groups = (int)v;
    } else {
        return tn_errf(err, errlen, TN_INVALID,
                       "%s: unknown placement setting '%s' (dsn, mode, max_tenants, "
                       "max_backend_memory, statement_timeout, session_reset, login, "
                       "login_groups)",
                       key, field);
    }
    return TN_OK;
}

/* Split a comma/space list into an arena array. */
static int split(const char *text, arena *a, const char ***out)
{
    int n = 0;
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        if (*p == ',' || *p == ' ')
            cap++;
    const char **v = arena_alloc(a, cap * sizeof(*v));
    char *copy = arena_strdup(a, text);
    if (v == NULL || copy == NULL)
        return -1;
    char *save = NULL;
    for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save))
        v[n++] = t;
    *out = v;
    return n;
}

int tenancy_config_finish(tenancy_config *c, arena *a, char *err, size_t errlen)
{
    const char **names;
    int n = split(c->resolvers, a, &names);
    if (n < 0)
        goto oom;
    c->nkinds = 0;
    for (int i = 0; i < n; i++) {
        int k = -1;
        for (int j = 0; j < RES_NKINDS; j++)
            if (strcmp(names[i], kind_names[j]) == 0)
                k = j;
        if (k < 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "tenant.resolvers: unknown resolver '%s' (host, subdomain, "
                           "header, path)", names[i]);
        }
        for (int j = 0; j < c->nkinds; j++)
            if (c->kinds[j] == k) {
                return tn_errf(err, errlen, TN_INVALID,
                               "tenant.resolvers: '%s' is listed twice", names[i]);
            }
        c->kinds[c->nkinds++] = k;
    }
    c->enabled = c->nkinds > 0;

    const char **bases;
    n = split(c->base_domains, a, &bases);
    if (n < 0)
        goto oom;
    c->bases = arena_alloc(a, (size_t)(n + 1) * sizeof(char *));
    c->nbases = 0;
    for (int i = 0; i < n; i++) {
        char norm[256];
        if (tenant_host_normalise(bases[i], norm, sizeof(norm)) == 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "tenant.base_domains: '%s' is not a host name", bases[i]);
        }
        c->bases[c->nbases++] = arena_sprintf(a, ".%s", norm);
    }
    bool wants_sub = false, wants_path = false, wants_header = false;
    for (int i = 0; i < c->nkinds; i++) {
        wants_sub = wants_sub || c->kinds[i] == RES_SUBDOMAIN;
        wants_path = wants_path || c->kinds[i] == RES_PATH;
        wants_header = wants_header || c->kinds[i] == RES_HEADER;
    }
    if (wants_sub && c->nbases == 0) {
        return tn_errf(err, errlen, TN_INVALID,
                       "tenant.resolvers has 'subdomain' but tenant.base_domains is empty");
    }

    const char **cent;
    n = split(c->central_domains, a, &cent);
    if (n < 0)
        goto oom;
    c->centrals = arena_alloc(a, (size_t)(n + 1) * sizeof(char *));
    c->ncentrals = 0;
    for (int i = 0; i < n; i++) {
        char norm[256];
        if (tenant_host_normalise(cent[i], norm, sizeof(norm)) == 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "tenant.central_domains: '%s' is not a host name", cent[i]);
        }
        c->centrals[c->ncentrals++] = arena_strdup(a, norm);
    }

    c->nhparams = split(c->host_params, a, &c->hparams);
    if (c->nhparams < 0)
        goto oom;
    if (c->enabled && c->nhparams == 0) {
        return tn_errf(err, errlen, TN_INVALID,
                       "tenant.host_params is empty: no way to learn the host");
    }

    /* "X-Tenant" -> "HTTP_X_TENANT" */
    size_t hl = strlen(c->header);
    char *hp = arena_alloc(a, hl + 6);
    if (hp == NULL)
        goto oom;
    memcpy(hp, "HTTP_", 5);
    for (size_t i = 0; i < hl; i++) {
        char ch = c->header[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '-')) {
            return tn_errf(err, errlen, TN_INVALID,
                           "tenant.header: '%s' is not a header name", c->header);
        }
        hp[5 + i] = ch == '-' ? '_' : (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
    }
    hp[5 + hl] = '\0';
    c->header_param = hp;
    if (netaddr_list_parse(c->header_from[0] ? c->header_from : "0.0.0.0/32", a,
                           &c->header_trusted, err, errlen) != TN_OK)
        return TN_INVALID;
    if (wants_header && c->header_from[0] == '\0') {
        return tn_errf(err, errlen, TN_INVALID,
                       "tenant.resolvers has 'header' but tenant.header_from is empty: "
                       "the header would be trusted from anyone");
    }

    size_t pl = strlen(c->path_prefix);
    if (wants_path && (pl < 2 || c->path_prefix[0] != '/' || c->path_prefix[pl - 1] != '/')) {
        return tn_errf(err, errlen, TN_INVALID,
                       "tenant.path_prefix must start and end with '/': '%s'",
                       c->path_prefix);
    }

    c->registry_uri = c->registry ? c->registry
                                  : arena_sprintf(a, "sqlite:%s/control.db", c->state_dir);
    c->sqlite_dir = c->sqlite_dir_text && c->sqlite_dir_text[0]
                        ? c->sqlite_dir_text
                        : arena_sprintf(a, "%s/tenants", c->state_dir);
    /* The built-in placement, and every declared one complete. */
    for (int i = 0; i < c->nplacements; i++) {
        placement *p = &c->placements[i];
        if (p->server == NULL) {
            return tn_errf(err, errlen, TN_INVALID, "placement.%s has no dsn", p->name);
        }
        if (p->login_groups > 0 && p->login != PLACEMENT_LOGIN_GROUP) {
            return tn_errf(err, errlen, TN_INVALID,
                           "placement.%s.login_groups: only with login = group", p->name);
        }
        if (p->login != PLACEMENT_LOGIN_GROUP)
            continue;
        if (p->kind != TARGET_PG_SCHEMA) {
            return tn_errf(err, errlen, TN_INVALID,
                           "placement.%s.login = group: schema mode only (a database's "
                           "connections are its tenant's already)", p->name);
        }
        if (p->login_groups == 0)
            p->login_groups = PLACEMENT_GROUPS_DEFAULT;
        /* role names: a placement name's '-' is not an identifier's */
        p->group_roles = arena_alloc(a, (size_t)p->login_groups * sizeof(*p->group_roles));
        if (p->group_roles == NULL)
            goto oom;
        for (int g = 0; g < p->login_groups; g++) {
            char *r = arena_sprintf(a, "tn_%s_%d", p->name, g);
            if (r == NULL)
                goto oom;
            for (char *q = r; *q; q++)
                if (*q == '-')
                    *q = '_';
            p->group_roles[g] = r;
        }
    }
    if (c->nplacements < MAX_PLACEMENTS + 1 && tenancy_placement(c, "sqlite") == NULL) {
        if (c->nplacements == MAX_PLACEMENTS) {
            return tn_errf(err, errlen, TN_INVALID, "too many placements");
        }
        placement *p = &c->placements[c->nplacements++];
        memset(p, 0, sizeof(*p));
        p->name = "sqlite";
        p->kind = TARGET_SQLITE;
    }
    if (tenancy_placement(c, c->default_placement) == NULL) {
        return tn_errf(err, errlen, TN_INVALID,
                       "storage.placement: no placement '%s' (sqlite, or declare "
                       "placement.%s.dsn)", c->default_placement, c->default_placement);
    }
    c->gen_path = arena_sprintf(a, "%s/registry.gen", c->state_dir);
    c->role_key_path = arena_sprintf(a, "%s/role.key", c->state_dir);

    const char *mw = c->max_workers_text;
    char *end;
    long v = strtol(mw, &end, 10);
    if (end == mw || v < 0 || (*end != '\0' && strcmp(end, "%") != 0) ||
        (*end == '%' && v > 100)) {
        return tn_errf(err, errlen, TN_INVALID,
                       "tenant.max_workers: expected a number or a percentage, got '%s'",
                       mw);
    }
    c->max_workers_pct = *end == '%' ? (int)v : 0;
    c->max_workers_abs = *end == '%' ? 0 : (int)v;
    return TN_OK;
oom:
    return tn_errf(err, errlen, TN_NOMEM, "out of memory");
}

bool tenancy_affinity_wanted(const tenancy_config *c)
{
    if (c->affinity == AFFINITY_OFF || !c->enabled)
        return false;
    for (int i = 0; i < c->nplacements; i++)
        if (c->placements[i].kind != TARGET_SQLITE)
            return true;
    return false;
}

TN_HOT int tenancy_max_workers(const tenancy_config *c, int own, int max_children)
{
    int n = own > 0 ? own : c->max_workers_abs;   /* 0: no limit */
    if (own <= 0 && c->max_workers_pct > 0) {
        n = (max_children * c->max_workers_pct + 99) / 100;   /* rounded up */
        n = n < 1 ? 1 : n;
    }
    /* A cap of the whole pool never binds: no request could be refused or wait for it. */
    return max_children > 0 && n >= max_children ? 0 : n;
}
