/*
 * placement.c — tenant to storage target (see placement.h).
 * Must not: open anything (pure mapping), or derive a target from anything but the registry
 * entry and this host's configuration.
 */
#include "core/first.h"
#include "tenancy/placement.h"
#include "core/rc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A tenant's group (login = group): FNV-1a of its storage name, so that it never changes
 * while login_groups does not, and needs nothing but the name. */
int placement_group_of(const char *storage, int groups)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *q = (const unsigned char *)storage; *q; q++) {
        h ^= *q;
        h *= 16777619u;
    }
    return groups > 0 ? (int)(h % (uint32_t)groups) : 0;
}

int placement_target_of(const tenancy_config *c, const char *placement_name,
                        const char *storage, const char *sync_setting, storage_target *out)
{
    memset(out, 0, sizeof(*out));
    const placement *p = tenancy_placement(c, placement_name ? placement_name : "");
    if (p == NULL)
        return TN_NOTFOUND;
    if (storage == NULL || storage[0] == '\0')
        return TN_INVALID;
    out->kind = (target_kind)p->kind;
    out->server = p->server;
    out->name = storage;
    out->sync_normal = sync_setting != NULL && strcmp(sync_setting, "normal") == 0;
    out->busy_timeout_ms = (int)c->busy_timeout_ms;
    out->statement_timeout_ms = (int)p->statement_timeout_ms;
    out->max_tenants = p->max_tenants;
    out->max_backend_bytes = p->max_backend_memory;
    out->reset_always = p->reset_always;
    /* PostgreSQL: the tenant's role is named as its storage (t_<slug>, tenant_<slug>), so a
     * role found on a server is traced to its tenant as its schema or database is. */
    out->role = out->kind == TARGET_SQLITE ? NULL : storage;
    out->login_as_role = p->login == PLACEMENT_LOGIN_TENANT ||
                         (p->login == PLACEMENT_LOGIN_DEFAULT && p->kind == TARGET_PG_DATABASE);
    out->group_role = NULL;
    out->group_verifier = NULL;
    if (p->login == PLACEMENT_LOGIN_GROUP && p->group_roles != NULL && p->login_groups > 0)
        out->group_role = p->group_roles[placement_group_of(storage, p->login_groups)];
    return TN_OK;
}

int placement_target(const tenancy_config *c, const tenant_rec *t, storage_target *out)
{
    return placement_target_of(c, t->placement, t->storage,
                               tenant_setting_get(t, "storage.synchronous"), out);
}

int placement_storage_name(const tenancy_config *c, const placement *p, const char *slug,
                           char *out, size_t outlen)
{
    int n;
    if (p->kind == TARGET_SQLITE) {
        n = snprintf(out, outlen, "%s/%s.db", c->sqlite_dir, slug);
    } else {
        n = snprintf(out, outlen, "%s%s", p->kind == TARGET_PG_SCHEMA ? "t_" : "tenant_", slug);
        for (char *q = out; *q; q++)
            if (*q == '-')
                *q = '_';
    }
    return n < 0 || (size_t)n >= outlen ? TN_TOOBIG : TN_OK;
}
