/*
 * catcache.c — each worker's copy of its tenants' catalogs, so that a request reads one
 * version number instead of the whole catalog, and a read of rows on SQLite usually not even
 * that (the data version, confirmed after its statements: see below).
 *
 * Owns: a direct-mapped table (tenant id → the catalog as last read, in one malloc'd block,
 * with the version it was read at), the version query per dialect, and a hit handed to the
 * request: a read gets the block itself (nothing replaces it before the read ends: only a
 * catalog loaded again, after DDL, does), a write a copy in its own memory (its DDL may load
 * the catalog again while it still holds a table of the old one). Nobody writes into a
 * loaded catalog (dt_catalog_indexes fills a copy of the table).
 *
 * The version changes with every schema change, whoever makes it (this app in any worker,
 * a migration, another host): SQLite's schema_version is bumped by every DDL; on PostgreSQL
 * every DDL on a relation writes new pg_class or pg_attribute rows for it, so the count and
 * the sum of those rows' xmin over the tenant's schema change. A version read before the
 * catalog can only make a stale entry that the next request replaces, never serve one.
 *
 * Must not: hand the cached block to a request that may change the schema, keep more than
 * CACHE_SLOTS entries, or let a read answer on a catalog not confirmed for its snapshot.
 */
#include <stdlib.h>
#include <string.h>

#include "data.h"

#define CACHE_SLOTS 4096
#define VERSION_MAX 64

static const char sqlite_version[] = "PRAGMA schema_version";
static const char pg_version[] =
    "SELECT pg_catalog.count(*)::text || ':' || "
    " COALESCE(pg_catalog.sum(a.xmin::text::bigint), 0)::text || ':' || "
    " COALESCE(pg_catalog.sum(DISTINCT c.xmin::text::bigint), 0)::text "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid "
    "WHERE c.relnamespace = pg_catalog.current_schema()::regnamespace";

static struct entry {
    int64_t tenant_id;      /* 0: empty */
    char version[VERSION_MAX];
    uint64_t dv;            /* SQLite: a data version at which the file had that version
                               (0: none known) */
    int ntables;
    dt_table *tables;       /* one block with every string and array in it */
} cache[CACHE_SLOTS];

static struct entry *slot_of(int64_t tenant_id)
{
    return &cache[(uint64_t)tenant_id % CACHE_SLOTS];
}

/* On SQLite a read's version is read in the transaction its statements then run in: the
 * version's row set is kept open (its statement not reset), so the request's own statements
 * join the read transaction it began instead of each beginning one (a WAL read lock taken
 * and released, and the file's size asked, per transaction). The catalog the request uses
 * is then the one of the snapshot its rows come from. Only for reads: a write must begin
 * its own transaction, and a read transaction open under it would make its upgrade to a
 * write fail whenever another connection committed since. */
void dt_unpin(dt_req *d)
{
    tn_rows_free(d->pinned);
    d->pinned = NULL;
}

int dt_catcache_version(dt_req *d, char *out, size_t n)
{
    dt_unpin(d);
    tn_rows *rows = NULL;
    int rc = tn_db_query(d->db, &rows, d->dialect == REST_SQLITE ? sqlite_version : pg_version,
                         0, NULL);
    if (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        const char *v = tn_rows_get(rows, 0);
        size_t l = v != NULL ? strlen(v) : 0;
        if (l == 0 || l >= n) {
            rc = TN_ERR;
        } else {
            memcpy(out, v, l + 1);
        }
    } else if (rc == TN_DONE) {
        rc = TN_ERR;
    }
    /* The data version of the snapshot the version was read in (the statement began it) */
    if (rc == TN_OK && d->dialect == REST_SQLITE && tn_db_data_version(d->db, &d->dv) != TN_OK)
        d->dv = 0;
    if (rc == TN_OK && d->pin && d->dialect == REST_SQLITE)
        d->pinned = rows;
    else
        tn_rows_free(rows);
    return rc;
}

/* ---- reads without the version statement (SQLite) -----------------------------------------
 *
 * The data version (tn_db_data_version: no statement, no system call) moves whenever the
 * file changes, schema or data, through this connection or any other. An entry keeps one at
 * which the file had the entry's schema version, as read by the version statement. A read
 * whose connection still gives that data version takes the entry without the statement:
 * nothing changed as of the connection's last transaction. But that transaction may be old,
 * and another connection may have changed the schema since: the data version shows it only
 * once this connection begins its next transaction. So the catalog is confirmed after the
 * fact, against the snapshot of each statement that used it (dt_read_query), before anything
 * is answered: the same data version there means the snapshot is the one the entry was
 * confirmed at. When it moved (a write by anyone, usually), the schema version decides: the
 * version statement, which joins the read transaction of the statement's open row set (kept
 * open until dt_unpin, so the rest of the read joins it too, as on the slow path). When the
 * statement's rows were already over, its transaction ended and the version statement reads
 * a later snapshot; the schema version only grows (every schema change adds one, and the
 * connections' DEFENSIVE setting ignores PRAGMA schema_version = N), so the same version
 * there is also the version of the statement's snapshot. A different one: the rows are
 * dropped unanswered and the request is served again on the slow path (data.c). An answer
 * decided on the catalog alone (no such table, no such column) confirms it first with the
 * version statement (dt_catcache_confirm), unless a statement of the request already did. */

static struct entry *entry_of(dt_req *d)
{
    const tn_tenant *t = tn_tenant_of(d->r);
    struct entry *e = t != NULL ? slot_of(tn_tenant_id(t)) : NULL;
    return e != NULL && e->tenant_id == tn_tenant_id(t) ? e : NULL;
}

int dt_catcache_fast(dt_req *d)
{
    struct entry *e = d->fast ? entry_of(d) : NULL;
    uint64_t dv;
    if (e == NULL || e->dv == 0 || tn_db_data_version(d->db, &dv) != TN_OK || dv != e->dv)
        return TN_NOTFOUND;
    d->tables = e->tables;
    d->ntables = e->ntables;
    d->dv = dv;
    d->unconfirmed = true;
    d->ran = false;
    return TN_OK;
}

/* The catalog in d (the entry's block) against the file. began: a statement has just begun
 * (or joined) the read transaction, so the data version is that snapshot's. */
static int confirm(dt_req *d, bool began)
{
    uint64_t dv;
    if (began && tn_db_data_version(d->db, &dv) == TN_OK && dv == d->dv)
        return TN_OK;
    struct entry *e = entry_of(d);
    char version[VERSION_MAX];
    if (e != NULL && e->tables == d->tables &&
        dt_catcache_version(d, version, sizeof(version)) == TN_OK &&
        strcmp(version, e->version) == 0) {
        e->dv = d->dv;   /* the version statement's snapshot */
        return TN_OK;
    }
    if (e != NULL && e->tables == d->tables)
        e->dv = 0;
    d->unconfirmed = false;
    d->stale = true;
    return TN_AGAIN;
}

int dt_read_query(dt_req *d, tn_rows **rows, const char *sql, int nparams,
                  const char *const *params)
{
    int rc = tn_db_query(d->db, rows, sql, nparams, params);
    if (!d->unconfirmed)
        return rc;
    /* A statement that failed may not have begun a transaction, and its error may be the
     * stale catalog's own (a column gone): the schema version decides then. */
    if (confirm(d, rc == TN_OK) == TN_OK) {
        d->ran = true;
        return rc;
    }
    if (rc == TN_OK) {
        tn_rows_free(*rows);
        *rows = NULL;
    }
    return TN_AGAIN;
}

int dt_catcache_confirm(dt_req *d)
{
    if (d->stale)
        return TN_AGAIN;
    if (!d->unconfirmed || d->ran)
        return TN_OK;
    if (confirm(d, false) != TN_OK)
        return TN_AGAIN;
    d->ran = true;
    return TN_OK;
}

/* ---- copying a catalog (no indexes: they are read when asked for) ----------------------- */

typedef struct copier {
    char *p;            /* NULL: measuring */
    size_t used;
} copier;

static void *take(copier *c, size_t n, size_t align)
{
    c->used = (c->used + align - 1) & ~(align - 1);
    void *at = c->p != NULL ? c->p + c->used : NULL;
    c->used += n;
    return at;
}

static const char *take_str(copier *c, const char *s)
{
    size_t n = strlen(s) + 1;
    char *at = take(c, n, 1);
    if (at != NULL)
        memcpy(at, s, n);
    return at;
}

/* Lay out n tables in c (sizes only while c->p is NULL). */
static dt_table *lay_out(copier *c, const dt_table *src, int n)
{
    dt_table *ts = take(c, (size_t)n * sizeof(dt_table), _Alignof(dt_table));
    for (int i = 0; i < n; i++) {
        const dt_table *s = &src[i];
        dt_col *cols = take(c, (size_t)s->ncols * sizeof(dt_col), _Alignof(dt_col));
        const char **search = take(c, (size_t)s->nsearch * sizeof(char *), _Alignof(char *));
        const char *name = take_str(c, s->name);
        for (int j = 0; j < s->ncols; j++) {
            const char *cn = take_str(c, s->cols[j].name);
            if (cols != NULL) {
                cols[j] = s->cols[j];
                cols[j].name = cn;
            }
        }
        for (int j = 0; j < s->nsearch; j++) {
            const char *sn = take_str(c, s->search[j]);
            if (search != NULL)
                search[j] = sn;
        }
        if (ts != NULL)
            ts[i] = (dt_table){.name = name, .ncols = s->ncols, .cols = cols,
                               .nsearch = s->nsearch, .search = s->nsearch ? search : NULL};
    }
    return ts;
}

static size_t measure(const dt_table *src, int n)
{
    copier c = {NULL, 0};
    lay_out(&c, src, n);
    return c.used;
}

int dt_catcache_get(dt_req *d, const char *version)
{
    const tn_tenant *t = tn_tenant_of(d->r);
    struct entry *e = t != NULL ? slot_of(tn_tenant_id(t)) : NULL;
    if (e == NULL || e->tenant_id != tn_tenant_id(t) || strcmp(e->version, version) != 0)
        return TN_NOTFOUND;
    e->dv = d->dv;
    if (d->pin) {
        d->tables = e->tables;
        d->ntables = e->ntables;
        return TN_OK;
    }
    size_t size = measure(e->tables, e->ntables);
    copier c = {tn_alloc(d->r, size ? size : 1), 0};
    if (c.p == NULL)
        return TN_NOMEM;
    d->tables = lay_out(&c, e->tables, e->ntables);
    d->ntables = e->ntables;
    return TN_OK;
}

void dt_catcache_put(dt_req *d, const char *version)
{
    const tn_tenant *t = tn_tenant_of(d->r);
    if (t == NULL || strlen(version) >= VERSION_MAX)
        return;
    struct entry *e = slot_of(tn_tenant_id(t));
    size_t size = measure(d->tables, d->ntables);
    copier c = {malloc(size ? size : 1), 0};
    if (c.p == NULL)
        return;   /* no copy: the next request reads the catalog again */
    free(e->tables);
    e->tables = lay_out(&c, d->tables, d->ntables);
    e->ntables = d->ntables;
    e->tenant_id = tn_tenant_id(t);
    e->dv = d->dv;
    memcpy(e->version, version, strlen(version) + 1);
}

void dt_catcache_fini(void)
{
    for (int i = 0; i < CACHE_SLOTS; i++) {
        free(cache[i].tables);
        cache[i] = (struct entry){0};
    }
}
