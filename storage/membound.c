/*
 * membound.c — the byte bound of a kept schema-mode connection (membound.h).
 *
 * Must not: read the memory inside a tenant's transaction or scope (a tenant's role may not
 * read it, and the figure is the login's concern), or close the connection (the caller owns
 * it).
 */
#include "core/first.h"
#include "storage/membound.h"
#include "core/rc.h"
#include "storage/target.h"

#include <stdlib.h>

void membound_reset(membound *m)
{
    m->looked = 0;
    m->next = 0;
    m->unread = false;
}

void membound_set_max(membound *m, int64_t max)
{
    if (m->max != max)
        m->next = 0;   /* the next read was planned for another bound */
    m->max = max;
}

membound_look membound_check(membound *m, tn_db *db, size_t served, size_t every)
{
    size_t due = m->next > 0 ? m->next : m->looked + every;
    if (m->max <= 0 || m->unread || served < due)
        return MEMBOUND_NOT_DUE;
    m->looked = served;
    m->next = 0;
    char v[32];
    int rc = db_set_schema_scope(db, NULL);
    if (rc == TN_OK)
        rc = db_query_value(db, v, sizeof(v),
                            "SELECT sum(total_bytes)::bigint "
                            "FROM pg_catalog.pg_backend_memory_contexts", 0, NULL);
    if (rc == TN_DENIED) {
        m->unread = true;
        return MEMBOUND_DENIED;
    }
    if (rc != TN_OK)
        return MEMBOUND_FAILED;
    long long bytes = strtoll(v, NULL, 10);
    if (bytes >= m->max)
        return MEMBOUND_REACHED;
    if (bytes > 0 && served > 0) {
        double per_schema = (double)bytes / (double)served;
        double gap = (double)(m->max - bytes) / per_schema / 2;
        if (gap > (double)every)
            m->next = served + (gap < 1e9 ? (size_t)gap : (size_t)1e9);
    }
    return MEMBOUND_UNDER;
}

size_t membound_count(const membound *m, int configured, size_t fallback)
{
    if (configured > 0)
        return (size_t)configured;
    return m->max > 0 && !m->unread ? SIZE_MAX : fallback;
}

size_t membound_run_count(const membound *m, int configured)
{
    return membound_count(m, configured, (size_t)POOL_PG_MAX_TENANTS);
}
