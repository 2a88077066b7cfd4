/*
 * pool.c — the per-worker pool of open connections to storage targets (see target.h).
 *
 * A prefork worker serves one request at a time, so the pool is single-threaded and small:
 * a hash of entries by target, an LRU list per class, and the few entries lent out right
 * now. Three classes, because the three placements cost different things:
 *
 *   SQLite files      an LRU of open handles keyed by path. Opening one (open, PRAGMAs,
 *                     schema read) costs many statements on a kept handle, so
 *                     handles are kept, by default enough for a worker to keep a thousand
 *                     tenants open; each holds 3 file descriptors in WAL (the file, -wal,
 *                     -shm), so the bound is sqlite_max_open and also what RLIMIT_NOFILE
 *                     leaves after 64 for everything else (pool_fds_wanted says how many
 *                     the limits want, for the process to raise its soft limit). With that
 *                     many open, each handle's page cache is kept small (sqlite_cache_kib):
 *                     the pages a request reads, not SQLite's 2,000 KiB each.
 *   schema mode       ONE connection per server (and statement timeout) for all its
 *                     tenants (per server and group login for targets with a group_role:
 *                     each logs in as its group, which may take only its group's roles),
 *                     scoped per acquire (db_set_schema_scope: the scope rides with
 *                     each transaction's first statement, and a change of tenant wipes what
 *                     the previous one may have left in the session, in the same round
 *                     trip). A backend caches the catalog of every schema it touches (memory
 *                     it never gives back), so the connection is closed on release once
 *                     it has served the target's max_tenants distinct schemas (when not
 *                     set: none while the byte bound below is read, pg_max_tenants when it
 *                     is off or cannot be read), or once the backend's memory has reached
 *                     the target's max_backend_bytes: a count alone bounds nothing, since a
 *                     schema of forty tables costs a backend forty times what one of one
 *                     table does. The memory is read from the server
 *                     (pg_backend_memory_contexts) first after POOL_PG_MEMORY_EVERY new
 *                     schemas, then less often the further the backend is from its
 *                     bound (membound.h); a login role that may not read it (PostgreSQL wants
 *                     pg_read_all_stats) leaves that connection to the count, and is
 *                     counted (pg_memory_unread). The next acquire connects again.
 *   database mode     an LRU of connections keyed by (server, database), bounded by
 *                     pg_db_max_open: a connection can only ever reach its own database.
 *
 * A PostgreSQL target that cannot be reached is not tried again at once: after a failed
 * connect, acquires of that target fail fast (TN_IO, the last error quoted) until a retry
 * time that backs off from 250 ms, doubling, to 4 s, and a success forgets it. So a server
 * that is down (or not up yet when the host starts) costs its tenants' requests a fast
 * refusal and costs nobody else anything, and it is served again within 4 s of coming back.
 *
 * Release is where a request's state is cut off: an open transaction is rolled back, a
 * connection that is not clean is reset (closed if that fails), the scope is dropped,
 * forgotten row sets are detached, and the error message is cleared (it may quote the
 * tenant's data). An entry lent out is never evicted; the bounds are restored on release.
 *
 * Must not: hand one connection to two acquires at once, keep a connection whose state is
 * not clean, or allocate on the hit path (entries are found without building a key).
 */
#include "core/first.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/target.h"
#include "storage/db_int.h"
#include "storage/membound.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define DEFAULT_PG_DB_MAX_OPEN 8
#define SCHEMA_SERVERS 16    /* schema-mode server connections, for pool_fds_wanted */
#define FD_HEADROOM 64
#define FDS_PER_SQLITE 3
#define DOWN_FIRST_MS 250    /* a target that failed to connect: first retry after */
#define DOWN_MAX_MS 4000     /* ... doubling up to this */
#define DOWN_MAX 32          /* targets remembered as down (then the oldest is forgotten) */

enum { CLASS_SQLITE, CLASS_SCHEMA, CLASS_DATABASE, CLASSES };

typedef struct pool_entry pool_entry;
struct pool_entry {
    pool_entry *prev, *next;    /* the LRU list of its class, most recent first */
    pool_entry *hnext;          /* the hash chain */
    int cls;
    uint32_t hash;
    char *server;               /* schema and database mode */
    char *name;                 /* SQLite: the path; database mode: the database */
    int timeout_ms;             /* PostgreSQL: statement_timeout (part of the key) */
    bool sync_normal;           /* SQLite: how the handle was opened */
    dev_t dev;                  /* SQLite: the file the handle has open (a file deleted and */
    ino_t ino;                  /* created again at the same path is another tenant's) */
    uint64_t checked_gen;       /* SQLite: the registry generation when the path last named
                                   that file (0: never checked against a generation) */
    int busy_timeout_ms;
    tn_db *db;
    bool in_use;
    /* schema mode: the distinct schemas this backend served (hashes, open addressing) */
    uint64_t session;           /* db->session the set belongs to */
    int max_tenants;            /* closed on release once nseen reaches it (the target's
                                   placement's, from its latest acquire; 0: not set, see
                                   membound_count: none while the byte bound is read) */
    membound mem;               /* ... or once the backend's memory reaches its bound */
    uint64_t *seen;
    size_t nseen, seen_cap;
};

/* A PostgreSQL target (server, and database in database mode) whose connect failed. */
typedef struct pool_down {
    uint32_t hash;
    char *server, *name;
    int64_t retry_ms;           /* no connect before */
    int delay_ms;               /* the current backoff */
    char err[200];              /* the last connect error, quoted while refusing */
} pool_down;

struct storage_pool {
    pool_limits lim;
    pool_down down[DOWN_MAX];
    int ndown;
    long fd_budget;             /* descriptors the pool may hold; LONG_MAX: no limit */
    pool_entry **buckets;
    size_t nbuckets, nentries;
    pool_entry *head[CLASSES], *tail[CLASSES];
    int count[CLASSES];
    pool_entry **busy;          /* lent out now (a request holds one or two) */
    int nbusy, busy_cap;
    pool_stats st;
};

/* ---- creation ---------------------------------------------------------------------------------- */

storage_pool *pool_create(const pool_limits *l)
{
    storage_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    if (l != NULL)
        p->lim = *l;
    if (p->lim.sqlite_max_open <= 0)
        p->lim.sqlite_max_open = POOL_SQLITE_MAX_OPEN;
    if (p->lim.sqlite_cache_kib <= 0)
        p->lim.sqlite_cache_kib = POOL_SQLITE_CACHE_KIB;
    if (p->lim.pg_max_tenants <= 0)
        p->lim.pg_max_tenants = POOL_PG_MAX_TENANTS;
    if (p->lim.pg_db_max_open <= 0)
        p->lim.pg_db_max_open = DEFAULT_PG_DB_MAX_OPEN;
    struct rlimit rl;
    p->fd_budget = LONG_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        p->fd_budget = rl.rlim_cur > FD_HEADROOM ? (long)(rl.rlim_cur - FD_HEADROOM) : 0;
    p->nbuckets = 64;
    p->buckets = calloc(p->nbuckets, sizeof(*p->buckets));
    if (p->buckets == NULL) {
        free(p);
        return NULL;
    }
    return p;
}

long pool_fds_wanted(const pool_limits *l)
{
    long files = l != NULL && l->sqlite_max_open > 0 ? l->sqlite_max_open : POOL_SQLITE_MAX_OPEN;
    long dbs = l != NULL && l->pg_db_max_open > 0 ? l->pg_db_max_open : DEFAULT_PG_DB_MAX_OPEN;
    return files * FDS_PER_SQLITE + dbs + SCHEMA_SERVERS;
}

/* ---- entries: hash, LRU ------------------------------------------------------------------------ */

static uint32_t fnv(uint32_t h, const char *s)
{
    for (; s != NULL && *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    h ^= 0xff;   /* a separator, so ("ab", "c") and ("a", "bc") differ */
    return h * 16777619u;
}

static uint32_t key_hash(int cls, const char *server, const char *name, int timeout_ms)
{
    uint32_t h = 2166136261u ^ (uint32_t)cls;
    h = fnv(h * 16777619u, server);
    h = fnv(h, name);
    return (h ^ (uint32_t)timeout_ms) * 16777619u;
}

/* Equal, NULL equal only to NULL (buf.h's str_eq takes two strings). */
static bool same_str(const char *a, const char *b)
{
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

static pool_entry *find(storage_pool *p, int cls, const char *server, const char *name,
                        int timeout_ms, uint32_t h)
{
    for (pool_entry *e = p->buckets[h & (p->nbuckets - 1)]; e != NULL; e = e->hnext)
        if (e->hash == h && e->cls == cls && e->timeout_ms == timeout_ms &&
            same_str(e->server, server) && same_str(e->name, name))
            return e;
    return NULL;
}

static void lru_unlink(storage_pool *p, pool_entry *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        p->head[e->cls] = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        p->tail[e->cls] = e->prev;
    e->prev = e->next = NULL;
}

static void lru_front(storage_pool *p, pool_entry *e)
{
    e->prev = NULL;
    e->next = p->head[e->cls];
    if (e->next != NULL)
        e->next->prev = e;
    else
        p->tail[e->cls] = e;
    p->head[e->cls] = e;
}

static void grow_buckets(storage_pool *p)
{
    size_t n = p->nbuckets * 2;
    pool_entry **b = calloc(n, sizeof(*b));
    if (b == NULL)
        return;   /* longer chains, still correct */
    for (size_t i = 0; i < p->nbuckets; i++) {
        pool_entry *e = p->buckets[i];
        while (e != NULL) {
            pool_entry *next = e->hnext;
            e->hnext = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(p->buckets);
    p->buckets = b;
    p->nbuckets = n;
}

static void insert(storage_pool *p, pool_entry *e)
{
    if (p->nentries >= p->nbuckets)
        grow_buckets(p);
    size_t b = e->hash & (p->nbuckets - 1);
    e->hnext = p->buckets[b];
    p->buckets[b] = e;
    p->nentries++;
    p->count[e->cls]++;
    lru_front(p, e);
}

/* Close an entry's connection and forget it. */
static void drop(storage_pool *p, pool_entry *e)
{
    pool_entry **pp = &p->buckets[e->hash & (p->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(p, e);
    p->nentries--;
    p->count[e->cls]--;
    db_close(e->db);
    free(e->server);
    free(e->name);
    free(e->seen);
    free(e);
}

/* Evict the least recently used idle entry of a class; false when all are lent out. */
static bool evict_one(storage_pool *p, int cls)
{
    for (pool_entry *e = p->tail[cls]; e != NULL; e = e->prev) {
        if (!e->in_use) {
            drop(p, e);
            p->st.evictions++;
            if (cls == CLASS_DATABASE)
                p->st.pg_evictions++;
            return true;
        }
    }
    return false;
}

static long fds_held(const storage_pool *p)
{
    return (long)p->count[CLASS_SQLITE] * FDS_PER_SQLITE + p->count[CLASS_SCHEMA] +
           p->count[CLASS_DATABASE];
}

/* Bring each class within its bound and all of them within the descriptor budget, by
 * evicting idle entries (SQLite first: they are the cheapest to reopen and hold three). */
static void trim(storage_pool *p)
{
    while (p->count[CLASS_SQLITE] > p->lim.sqlite_max_open && evict_one(p, CLASS_SQLITE))
        ;
    while (p->count[CLASS_DATABASE] > p->lim.pg_db_max_open && evict_one(p, CLASS_DATABASE))
        ;
    while (fds_held(p) > p->fd_budget &&
           (evict_one(p, CLASS_SQLITE) || evict_one(p, CLASS_DATABASE)))
        ;
}

/* Room for one more entry of cls (needing `fds` descriptors), or TN_BUSY when every
 * entry that could make room is lent out and the descriptor budget would be exceeded. A
 * count bound is soft while entries are lent out (a request that needs two files gets
 * them); the descriptor budget is not (EMFILE would fail something else). */
static int make_room(storage_pool *p, int cls, int max, long fds, char *err, size_t errlen)
{
    while (p->count[cls] >= max && evict_one(p, cls))
        ;
    while (fds_held(p) + fds > p->fd_budget &&
           (evict_one(p, CLASS_SQLITE) || evict_one(p, CLASS_DATABASE)))
        ;
    if (fds_held(p) + fds > p->fd_budget)
        return tn_errf(err, errlen, TN_BUSY,
                       "pool: no file descriptors left (RLIMIT_NOFILE less %d) for another "
                       "connection",
                       FD_HEADROOM);
    return TN_OK;
}

/* ---- schema mode: the distinct schemas a backend has served ------------------------------------ */

static uint64_t hash64(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h != 0 ? h : 1;   /* 0 marks a free slot */
}

/* Add a schema to the set (a 64-bit hash stands for the name: a collision would only
 * recycle a little later). */
static void seen_add(pool_entry *e, const char *schema)
{
    if (e->db->session != e->session) {   /* reconnected: a new backend, an empty cache */
        e->session = e->db->session;
        e->nseen = 0;
        membound_reset(&e->mem);   /* and its memory is to be read again */
        if (e->seen != NULL)
            memset(e->seen, 0, e->seen_cap * sizeof(*e->seen));
    }
    if ((e->nseen + 1) * 2 > e->seen_cap) {
        size_t cap = e->seen_cap ? e->seen_cap * 2 : 32;
        uint64_t *n = calloc(cap, sizeof(*n));
        if (n == NULL)
            return;   /* uncounted: the bound comes a little later */
        for (size_t i = 0; i < e->seen_cap; i++) {
            if (e->seen[i] == 0)
                continue;
            size_t j = e->seen[i] & (cap - 1);
            while (n[j] != 0)
                j = (j + 1) & (cap - 1);
            n[j] = e->seen[i];
        }
        free(e->seen);
        e->seen = n;
        e->seen_cap = cap;
    }
    uint64_t h = hash64(schema);
    size_t j = h & (e->seen_cap - 1);
    while (e->seen[j] != 0) {
        if (e->seen[j] == h)
            return;
        j = (j + 1) & (e->seen_cap - 1);
    }
    e->seen[j] = h;
    e->nseen++;
}

/* ---- PostgreSQL targets that are down: back off ------------------------------------------------ */

static pool_down *down_find(storage_pool *p, uint32_t h, const char *server, const char *name)
{
    for (int i = 0; i < p->ndown; i++)
        if (p->down[i].hash == h && same_str(p->down[i].server, server) &&
            same_str(p->down[i].name, name))
            return &p->down[i];
    return NULL;
}

static void down_forget(storage_pool *p, pool_down *d)
{
    free(d->server);
    free(d->name);
    *d = p->down[--p->ndown];
}

/* A connect to the target failed: refuse it until the next retry time, backing off. */
static void down_note(storage_pool *p, uint32_t h, const char *server, const char *name,
                      const char *err)
{
    pool_down *d = down_find(p, h, server, name);
    if (d == NULL) {
        if (p->ndown == DOWN_MAX)
            down_forget(p, &p->down[0]);
        d = &p->down[p->ndown];
        memset(d, 0, sizeof(*d));
        d->hash = h;
        d->server = server != NULL ? strdup(server) : NULL;
        d->name = name != NULL ? strdup(name) : NULL;
        if ((server != NULL && d->server == NULL) || (name != NULL && d->name == NULL)) {
            free(d->server);
            free(d->name);
            return;   /* not remembered: retried at once next time, still correct */
        }
        p->ndown++;
    }
    d->delay_ms = d->delay_ms == 0 ? DOWN_FIRST_MS
                  : d->delay_ms * 2 > DOWN_MAX_MS ? DOWN_MAX_MS
                                                  : d->delay_ms * 2;
    d->retry_ms = clock_mono_ms() + d->delay_ms;
    str_copy(d->err, sizeof(d->err), err != NULL ? err : "");
    p->st.pg_down++;
}

/* ---- acquire and release ----------------------------------------------------------------------- */

static int lend(storage_pool *p, pool_entry *e, tn_db **out, char *err, size_t errlen)
{
    if (p->nbusy == p->busy_cap) {
        int cap = p->busy_cap ? p->busy_cap * 2 : 4;
        pool_entry **b = realloc(p->busy, (size_t)cap * sizeof(*b));
        if (b == NULL)
            return tn_errf(err, errlen, TN_NOMEM, "pool: out of memory");
        p->busy = b;
        p->busy_cap = cap;
    }
    p->busy[p->nbusy++] = e;
    e->in_use = true;
    lru_unlink(p, e);
    lru_front(p, e);
    *out = e->db;
    return TN_OK;
}

static pool_entry *new_entry(int cls, uint32_t h, const char *server, const char *name,
                             int timeout_ms)
{
    pool_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->cls = cls;
    e->hash = h;
    e->timeout_ms = timeout_ms;
    e->server = server != NULL ? strdup(server) : NULL;
    e->name = name != NULL ? strdup(name) : NULL;
    if ((server != NULL && e->server == NULL) || (name != NULL && e->name == NULL)) {
        free(e->server);
        free(e->name);
        free(e);
        return NULL;
    }
    return e;
}

static uint64_t generation(const storage_pool *p)
{
    return p->lim.generation != NULL ? p->lim.generation(p->lim.generation_ctx) : 0;
}

static int open_sqlite(storage_pool *p, const storage_target *t, pool_entry *e, char *err,
                       size_t errlen)
{
    size_t n = strlen(t->name) + 32;
    char *uri = malloc(n);
    if (uri == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "pool: out of memory");
    snprintf(uri, n, "sqlite:%s?mode=rw", t->name);   /* never creates a tenant's file */
    db_options o = {.busy_timeout_ms = t->busy_timeout_ms, .sync_normal = t->sync_normal,
                    .cache_kib = p->lim.sqlite_cache_kib};
    uint64_t gen = generation(p);   /* before the stat: a bump during it means check again */
    int rc = db_open(uri, &o, &e->db, err, errlen);
    free(uri);
    struct stat st;
    if (rc == TN_IO && stat(t->name, &st) != 0)
        rc = tn_errf(err, errlen, TN_NOTFOUND, "%s does not exist", t->name);
    if (rc == TN_OK && stat(t->name, &st) != 0)
        rc = tn_errf(err, errlen, TN_NOTFOUND, "%s does not exist", t->name);
    if (rc == TN_OK) {
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        e->checked_gen = gen;
        e->sync_normal = t->sync_normal;
        e->busy_timeout_ms = e->db->opt.busy_timeout_ms;
        p->st.sqlite_opens++;
    }
    return rc;
}

static int open_pg(storage_pool *p, const storage_target *t, pool_entry *e, char *err,
                   size_t errlen)
{
    db_options o = {.statement_timeout_ms = t->statement_timeout_ms};
    int rc;
    if (e->cls == CLASS_SCHEMA && t->group_role == NULL) {
        rc = db_open(t->server, &o, &e->db, err, errlen);
    } else {
        /* A connection of one tenant's: its database (database mode), and/or a login as its
         * role (login_as_role: a schema-mode tenant then gets a connection of its own too).
         * Its scope is set once: a tenant's database keeps its tables in its public schema
         * (see target.c). Or a group login's (schema mode), scoped per acquire as the
         * server's is. */
        bool db_mode = t->kind == TARGET_PG_DATABASE;
        const char *user = e->cls == CLASS_SCHEMA ? t->group_role
                           : t->login_as_role    ? t->role
                                                 : NULL;
        rc = target_login(t->server, db_mode ? t->name : NULL, user, p->lim.role_password,
                          p->lim.role_password_ctx, &o, &e->db, err, errlen);
        if (rc == TN_OK && e->cls != CLASS_SCHEMA &&
            (rc = db_set_scope(e->db, db_mode ? "public" : t->name, t->role)) != TN_OK)
            tn_errf(err, errlen, rc, "%s", tn_db_error(e->db));
    }
    if (rc == TN_OK) {
        p->st.pg_connects++;
        e->session = e->db->session;
    }
    return rc;
}

/* Whether a kept entry still reaches its target. PostgreSQL: the backend still exists (a move
 * or a delete drops a database WITH FORCE; a server restarts), one poll(2), no round trip.
 *
 * SQLite: the path still names the file the handle has open. After a purge, or a move that
 * dropped its source, and a new tenant at the same path, the old handle would read a deleted
 * file: another tenant's data. A stat(2) of the path says so, but it walks the path on every
 * request; so it is made only when the registry generation moved since the last check that
 * found the file in place (checked_gen), and a generation of 0 (none, or not known) always
 * checks. That is enough because a tenant's request reaches this path only through the
 * registry, and every operation that takes the file away from its path changes the registry
 * and bumps the generation after the file is gone or before any tenant can be served from
 * the path again: a purge unlinks the file between its tombstone and the removal of its row
 * (each bumps); a move switches the registry (a bump) and drops the source after, and any
 * tenant placed at that path afterwards comes from a create (a bump when its row is
 * written, before its file exists, and one when it is provisioned) or a move back (a bump
 * when it starts). So when the generation is the one of a check that found the file in
 * place, no tenant has been placed at the path since, and the handle is the path's file or
 * one that no request can be routed to. What this does not see is a file replaced by hand
 * under a running host without any registry change; the next change of the registry
 * (whatever it is) makes every handle check again. The generation is read before the stat,
 * so a bump that races with the check is seen at the next acquire. */
static bool entry_current(storage_pool *p, pool_entry *e)
{
    if (e->cls != CLASS_SQLITE)
        return e->db->drv->alive == NULL || e->db->drv->alive(e->db);
    uint64_t gen = generation(p);
    if (gen != 0 && gen == e->checked_gen)
        return true;
    p->st.sqlite_checks++;
    struct stat st;
    if (stat(e->name, &st) != 0 || st.st_dev != e->dev || st.st_ino != e->ino)
        return false;
    e->checked_gen = gen;
    return true;
}

/* The SQLite handle's options must be the target's (a tenant may change its sync mode). */
static bool sqlite_options_match(const pool_entry *e, const storage_target *t)
{
    int busy = t->busy_timeout_ms == 0 ? 5000 : t->busy_timeout_ms < 0 ? 0 : t->busy_timeout_ms;
    return e->sync_normal == t->sync_normal && e->busy_timeout_ms == busy;
}

int pool_acquire(storage_pool *p, const storage_target *t, tn_db **out, char *err,
                 size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (out != NULL)
        *out = NULL;
    if (p == NULL || t == NULL || out == NULL || t->name == NULL || t->name[0] == '\0')
        return tn_errf(err, errlen, TN_INVALID, "pool_acquire: no pool, target or name");
    int cls;
    const char *server = NULL, *name = NULL;
    int timeout = t->statement_timeout_ms > 0 ? t->statement_timeout_ms : 0;
    switch (t->kind) {
    case TARGET_SQLITE:
        cls = CLASS_SQLITE;
        name = t->name;
        timeout = 0;
        break;
    case TARGET_PG_SCHEMA:
        /* logged in as its own role, a tenant's connection is its own, like a database's;
         * a group login's is shared by its group's tenants (keyed by the group's name) */
        cls = t->login_as_role && t->role != NULL ? CLASS_DATABASE : CLASS_SCHEMA;
        server = t->server;
        name = cls == CLASS_DATABASE ? t->name : t->group_role;
        break;
    case TARGET_PG_DATABASE:
        cls = CLASS_DATABASE;
        server = t->server;
        name = t->name;
        break;
    default:
        return tn_errf(err, errlen, TN_INVALID, "pool_acquire: unknown target kind");
    }
    if (cls != CLASS_SQLITE) {
        char q[72];
        const char *b = db_uri_backend(server);
        if (b == NULL || strcmp(b, "postgres") != 0)
            return tn_errf(err, errlen, TN_INVALID, "pool_acquire: not a PostgreSQL server URI");
        if (db_quote_ident(t->name, q, sizeof(q)) != TN_OK)
            return tn_errf(err, errlen, TN_INVALID, "pool_acquire: '%s' is not a valid name",
                           t->name);
    }
    p->st.acquires++;
    uint32_t h = key_hash(cls, server, name, timeout);
    pool_entry *e = find(p, cls, server, name, timeout, h);
    if (e != NULL && e->in_use)
        return tn_errf(err, errlen, TN_BUSY, "pool_acquire: that connection is already lent out "
                                          "(release it first)");
    if (e != NULL && cls == CLASS_SQLITE && !sqlite_options_match(e, t)) {
        drop(p, e);   /* reopened below with the target's options */
        e = NULL;
    }
    if (e != NULL && !entry_current(p, e)) {
        drop(p, e);   /* gone, or another file now: opened afresh below (or not found) */
        p->st.stale++;
        e = NULL;
    }
    int rc;
    pool_down *down = NULL;
    if (e == NULL && cls != CLASS_SQLITE && p->ndown > 0 &&
        (down = down_find(p, h, server, name)) != NULL) {
        int64_t left = down->retry_ms - clock_mono_ms();
        if (left > 0) {
            p->st.pg_refused++;
            return tn_errf(err, errlen, TN_IO, "%s (not tried again for %lld ms)", down->err,
                           (long long)left);
        }
    }
    if (e == NULL) {
        rc = make_room(p, cls,
                       cls == CLASS_SQLITE     ? p->lim.sqlite_max_open
                       : cls == CLASS_DATABASE ? p->lim.pg_db_max_open
                                               : INT_MAX,
                       cls == CLASS_SQLITE ? FDS_PER_SQLITE : 1, err, errlen);
        if (rc != TN_OK)
            return rc;
        e = new_entry(cls, h, server, name, timeout);
        if (e == NULL)
            return tn_errf(err, errlen, TN_NOMEM, "pool: out of memory");
        rc = cls == CLASS_SQLITE ? open_sqlite(p, t, e, err, errlen)
                                 : open_pg(p, t, e, err, errlen);
        if (cls != CLASS_SQLITE && rc == TN_IO)
            down_note(p, h, server, name, err);
        else if (down != NULL)
            down_forget(p, down);
        if (rc != TN_OK) {
            db_close(e->db);
            free(e->server);
            free(e->name);
            free(e);
            return rc;
        }
        insert(p, e);
    } else if (cls == CLASS_SQLITE) {
        p->st.sqlite_hits++;
    }
    if (cls != CLASS_SQLITE)
        e->db->opt.reset_always = t->reset_always;   /* read at each change of scope */
    if (cls == CLASS_SCHEMA) {
        rc = db_set_scope(e->db, t->name, t->role);
        if (rc != TN_OK)
            return tn_errf(err, errlen, rc, "%s", tn_db_error(e->db));
        seen_add(e, t->name);
        e->max_tenants = t->max_tenants;
        membound_set_max(&e->mem, t->max_backend_bytes);
    }
    return lend(p, e, out, err, errlen);
}

/* Schema mode, on release (the connection clean and unscoped): whether the backend's memory
 * has reached the entry's bound, read when due (membound.h), counted. */
static bool backend_too_big(storage_pool *p, pool_entry *e)
{
    size_t every = p->lim.pg_memory_every > 0 ? (size_t)p->lim.pg_memory_every
                                               : POOL_PG_MEMORY_EVERY;
    membound_look look = membound_check(&e->mem, e->db, e->nseen, every);
    if (look != MEMBOUND_NOT_DUE)
        p->st.pg_memory_looks++;
    if (look == MEMBOUND_DENIED)
        p->st.pg_memory_unread++;
    return look == MEMBOUND_REACHED;
}

void pool_release(storage_pool *p, tn_db *db)
{
    if (p == NULL || db == NULL)
        return;
    int i = 0;
    while (i < p->nbusy && p->busy[i]->db != db)
        i++;
    if (i == p->nbusy)
        return;   /* not lent out by this pool */
    pool_entry *e = p->busy[i];
    p->busy[i] = p->busy[--p->nbusy];
    e->in_use = false;

    bool keep = true, dirty = false;
    db_txn st = db->drv->txn_state(db);
    if (db->in_txn || st == DB_TXN_OPEN || st == DB_TXN_FAILED) {
        dirty = true;
        tn_db_rollback(db);
    }
    if (!db_is_clean(db)) {
        dirty = true;
        keep = db_reset(db) == TN_OK;
    }
    if (dirty)
        p->st.resets++;
    db_rows_detach_all(db);
    if (keep && e->cls == CLASS_SCHEMA)
        keep = db_set_schema_scope(db, NULL) == TN_OK;
    /* the server must say idle: no transaction, no half-read result */
    if (keep && !db_is_clean(db))
        keep = false;
    if (keep && e->cls == CLASS_SCHEMA && e->db->session == e->session &&
        e->nseen >= membound_count(&e->mem, e->max_tenants, (size_t)p->lim.pg_max_tenants)) {
        keep = false;
        p->st.pg_recycles++;
    } else if (keep && e->cls == CLASS_SCHEMA && backend_too_big(p, e)) {
        keep = false;
        p->st.pg_recycles++;
        p->st.pg_memory_recycles++;
    }
    if (keep && e->cls == CLASS_SCHEMA && !db_is_clean(db))
        keep = false;   /* the memory's read left it otherwise (it never should) */
    db->err[0] = '\0';   /* it may quote the tenant's data */
    db->changes = 0;
    if (!keep)
        drop(p, e);
    trim(p);
}

uint64_t pool_uses(const storage_pool *p)
{
    return p != NULL ? p->st.acquires : 0;
}

void pool_get_stats(const storage_pool *p, pool_stats *s)
{
    if (s == NULL)
        return;
    memset(s, 0, sizeof(*s));
    if (p == NULL)
        return;
    *s = p->st;
    s->sqlite_open = p->count[CLASS_SQLITE];
    s->pg_open = p->count[CLASS_SCHEMA] + p->count[CLASS_DATABASE];
}

void pool_destroy(storage_pool *p)
{
    if (p == NULL)
        return;
    while (p->ndown > 0)
        down_forget(p, &p->down[0]);
    for (int c = 0; c < CLASSES; c++)
        while (p->head[c] != NULL)
            drop(p, p->head[c]);
    free(p->busy);
    free(p->buckets);
    free(p);
}
