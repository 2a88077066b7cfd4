/*
 * placement.h — from a tenant's registry entry to its storage target, and the storage name
 * a new tenant gets.
 *
 * The registry keeps, per tenant, the placement's name ("sqlite" or a placement.NAME of
 * tenancyd.conf) and the storage name inside it (a file, a schema, a database), fixed when
 * the storage was created: renaming a tenant or changing the folder later never points a
 * tenant at another's data.
 */
#ifndef TN_TENANCY_PLACEMENT_H
#define TN_TENANCY_PLACEMENT_H

#include <stddef.h>

#include "storage/target.h"
#include "tenancy/config.h"
#include "tenancy/tenant.h"

/* The target of tenant t. TN_OK; TN_NOTFOUND when its placement is not configured on this
 * host; TN_INVALID when it has no storage yet. */
int placement_target(const tenancy_config *c, const tenant_rec *t, storage_target *out);

/* The same from the parts (for tools that have no tenant_rec). */
int placement_target_of(const tenancy_config *c, const char *placement_name,
                        const char *storage, const char *sync_setting, storage_target *out);

/* login = group: the group (0 to groups - 1) of the tenant whose storage is `storage`. */
int placement_group_of(const char *storage, int groups);

/* The storage name a tenant `slug` gets in placement p: SQLite <sqlite_dir>/<slug>.db,
 * schema t_<slug> and database tenant_<slug> ('-' becoming '_', which slugs never hold, so
 * the mapping cannot collide). TN_OK or TN_TOOBIG. */
int placement_storage_name(const tenancy_config *c, const placement *p, const char *slug,
                           char *out, size_t outlen);

#endif
