/*
 * ops_move.c — ops_move, ops_export and ops_import (see ops.h): a tenant's storage copied to
 * another placement, to a dump, or from one. `tenancy move`, `export` and `import`
 * (cli/move.c) and the panel's move job (through the command) call them.
 *
 * A move (ADR 0015 of tenancy-node, adapted): the tenant goes to state moving (the host
 * serves its reads and answers its writes 503), --drain seconds pass for requests in flight,
 * the source is opened in a transaction that stops writers (SQLite: its write lock;
 * PostgreSQL: SHARE locks on its tables), the target is created and gets the tables, every
 * row is copied in batches, the id generators are set past the largest id, the row counts of
 * every table are compared, and only then the registry switches placement, storage and state
 * in ONE transaction, on condition that the tenant is still moving from where the copy read
 * (registry_switch_storage). The generation bump that goes with it makes every worker drop
 * its cached entry at once. The source is kept unless --drop-source.
 *
 * Where the target's tables come from: when storage.migrations is set and the tenant's
 * version (its tenancy_migrations table) is the folder's latest, the app's migrations make
 * them, exactly as for a tenant created there (so the next migration finds the schema it
 * expects); rows a migration inserted are deleted and the source's rows copied, the version
 * table included. Otherwise (no migrations, a tenant behind or ahead of the folder, or
 * --copy-definitions) the source's own definitions are copied portably (storage/copy.h: what
 * is and is not carried). A table the migrations do not make is created from its definition;
 * a source column missing from a table the migrations make fails the move.
 *
 * Failure at any step (Ctrl-C included): the half-made target is dropped (only a target
 * this run created: an existing one is never touched), the state goes back to what it was,
 * and the message names the step and the table. The source is never written.
 *
 * Progress (the drain, the tables, their rows as they are copied) goes to the caller's
 * callback (ops_progress: note, table, rows); the report says what was copied.
 *
 * Must not: write to a source, build SQL (storage/ does), switch the registry before the
 * counts have been compared, or print.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/db.h"
#include "storage/copy.h"
#include "storage/migrate.h"
#include "storage/target.h"
#include "tenancy/dump.h"
#include "tenancy/lookup.h"
#include "tenancy/placement.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TABLES 4096
#define BIT(s) (1u << (s))

/* ---- interruption ------------------------------------------------------------------------------
 * Ctrl-C (or TERM, HUP) during a copy must still drop the half-made target and restore the
 * state: the handler only records it, the copy loops look at the flag between batches. */

static volatile sig_atomic_t interrupted;
static const int caught[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction saved[TN_ARRAY_LEN(caught)];

static void on_signal(int sig)
{
    interrupted = sig;
}

/* on: record the three signals (the caller's dispositions kept); off: the caller's back. */
static void catch_signals(bool on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < TN_ARRAY_LEN(caught); i++)
        sigaction(caught[i], on ? &sa : &saved[i], on ? &saved[i] : NULL);
}

/* ---- the copy into a target, shared by move and import --------------------------------------- */

typedef struct job {
    ops_env *e;
    const tenancy_config *tc;
    const storage_target *dst;
    bool created;               /* this run created dst (only then is it dropped on failure) */
    tn_db *db;                  /* the target connection */
    bool migrations;            /* the tables came from the app's migrations */
    const char *why_defs;       /* why not (for the report) */
    arena *a;
    ops_copy_table *stats;      /* MAX_TABLES of them, in a */
    int nstats;
    int ntables;                /* the tables to copy (for the progress events) */
    int64_t rows;
    int64_t t0;                 /* clock_mono_ms at the start of the copy */
    const char *notes[OPS_COPY_NOTES];
    int nnotes;
    char step[200];             /* what was being done (for a failure) */
    char err[1024];
    char abort_err[700];        /* "; and the half-made target could not be dropped ..." */
} job;

static void stepf(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stepf(job *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->step, sizeof(j->step), fmt, ap);
    va_end(ap);
}

static void add_note(job *j, const char *s)
{
    if (j->nnotes < (int)TN_ARRAY_LEN(j->notes) && (s = arena_strdup(j->a, s)) != NULL)
        j->notes[j->nnotes++] = s;
}

/* A progress event: a note (a line for a person), or a table's rows so far. */
static void tell_note(const ops_env *e, const char *note)
{
    if (e->progress == NULL)
        return;
    ops_progress p = {0};
    p.note = note;
    e->progress(e->progress_ctx, &p);
}

static void tell_rows(const ops_env *e, const char *table, int64_t done, int64_t want,
                      int64_t start, bool final, int tables_done, int tables)
{
    if (e->progress == NULL)
        return;
    ops_progress p = {0};
    p.done = tables_done;
    p.total = tables;
    p.table = table;
    p.rows = done;
    p.rows_want = want;
    p.elapsed_ms = clock_mono_ms() - start;
    p.table_done = final;
    e->progress(e->progress_ctx, &p);
}

/* The target's connection and its tables' origin. `version` is the source's migration
 * version; `tables` the source's tables (for the rows a migration inserted). */
static int target_begin(job *j, const char *version, bool force_defs, const char *const *tables,
                        int ntables)
{
    stepf(j, "creating the target");
    int rc = target_create(j->dst, j->err, sizeof(j->err));
    if (rc != TN_OK) {
        if (rc == TN_EXISTS)
            rc = tn_errf(j->err, sizeof(j->err), rc, "the %s %.900s already exists: it is not "
                         "overwritten (a kept source, or an orphan: see 'tenancy check')",
                         j->dst->kind == TARGET_SQLITE ? "file" : target_kind_name(j->dst->kind),
                         j->dst->name);
        return rc;
    }
    j->created = true;
    rc = target_open(j->dst, &j->db, j->err, sizeof(j->err));
    if (rc != TN_OK)
        return rc;

    /* The app's migrations, when they give exactly the tenant's version. */
    char mdir[4096] = "";
    if (j->tc->migrations != NULL && j->tc->migrations[0] != '\0')
        ops_conf_path(j->e, j->tc->migrations, mdir, sizeof(mdir));
    j->why_defs = "copied from the source's definitions";
    if (force_defs) {
        j->why_defs = "copied from the source's definitions (--copy-definitions)";
    } else if (mdir[0] != '\0' && version != NULL && version[0] != '\0') {
        migration_set *set = NULL;
        char e[512];
        stepf(j, "reading the migrations");
        if (migrate_load(mdir, &set, e, sizeof(e)) != TN_OK) {
            char n[700];
            snprintf(n, sizeof(n), "storage.migrations not used: %s", e);
            add_note(j, n);
        } else if (strcmp(migrate_latest(set), version) != 0) {
            char n[300];
            snprintf(n, sizeof(n), "the tenant is at migration %.40s, storage.migrations at "
                     "%.40s: tables copied from the source's definitions", version,
                     migrate_latest(set));
            add_note(j, n);
        } else {
            migrate_result res;
            stepf(j, "applying the migrations");
            rc = migrate_apply(j->db, set, &res);
            if (rc != TN_OK) {
                rc = tn_errf(j->err, sizeof(j->err), rc,
                             "migration %s, statement %d (line %d): %s", res.error.file,
                             res.error.statement, res.error.line, res.error.message);
                migrate_free(set);
                return rc;
            }
            j->migrations = true;
            j->why_defs = "made by the app's migrations";
        }
        migrate_free(set);
    }
    stepf(j, "beginning the copy");
    rc = copy_target_begin(j->db, j->err, sizeof(j->err));
    if (rc != TN_OK)
        return rc;
    rc = copy_defer_constraints(j->db, j->err, sizeof(j->err));
    /* Rows a migration inserted go (children first): the source's rows replace them. */
    for (int i = ntables - 1; i >= 0 && rc == TN_OK && j->migrations; i--) {
        copy_table *d = NULL;
        char e[256];
        if (copy_describe(j->db, tables[i], j->a, &d, e, sizeof(e)) != TN_OK)
            continue;   /* not made by the migrations: created from its definition later */
        stepf(j, "emptying table %s", tables[i]);
        rc = copy_clear(j->db, tables[i], j->err, sizeof(j->err));
    }
    return rc;
}

/* The table `def` (the source's definition) in the target: created, or (migrations) checked. */
static int target_table(job *j, const copy_table *def)
{
    if (j->migrations) {
        copy_table *have = NULL;
        char e[512];
        int rc = copy_describe(j->db, def->name, j->a, &have, e, sizeof(e));
        if (rc == TN_OK) {
            for (int i = 0; i < def->ncols; i++) {
                bool found = false;
                for (int k = 0; k < have->ncols && !found; k++)
                    found = strcmp(have->cols[k].name, def->cols[i].name) == 0;
                if (!found) {
                    stepf(j, "checking table %s", def->name);
                    return tn_errf(j->err, sizeof(j->err), TN_INVALID,
                                   "column %s.%s of the source is not in the table the "
                                   "migrations make (the schema was changed outside the "
                                   "migrations): use --copy-definitions",
                                   def->name, def->cols[i].name);
                }
            }
            return TN_OK;
        }
        if (rc != TN_NOTFOUND) {
            stepf(j, "reading table %s in the target", def->name);
            return tn_errf(j->err, sizeof(j->err), rc, "%s", e);
        }
        char n[200];
        snprintf(n, sizeof(n), "%s: not made by the migrations; created from its definition",
                 def->name);
        add_note(j, n);
    }
    /* What the portable definition leaves out (the migrations path has it all). */
    for (int i = 0; i < def->nnotes; i++)
        add_note(j, def->notes[i]);
    stepf(j, "creating table %s", def->name);
    return copy_create(j->db, def, j->err, sizeof(j->err));
}

typedef int (*row_fn)(void *ctx, const char *const **vals, char *err, size_t errlen);

/* Copy the rows of one table from `next` (TN_OK per row, TN_DONE at the end). */
static int target_rows(job *j, const copy_table *def, int64_t want, row_fn next, void *ctx)
{
    stepf(j, "copying table %s", def->name);
    copy_writer *w = NULL;
    int rc = copy_write_open(j->db, def, &w, j->err, sizeof(j->err));
    if (rc != TN_OK)
        return rc;
    int64_t start = clock_mono_ms(), n = 0;
    const char *const *vals;
    while ((rc = next(ctx, &vals, j->err, sizeof(j->err))) == TN_OK) {
        rc = copy_write_row(w, vals, j->err, sizeof(j->err));
        if (rc != TN_OK)
            break;
        if (++n % 500 == 0) {
            tell_rows(j->e, def->name, n, want, start, false, j->nstats, j->ntables);
            if (interrupted) {
                rc = tn_errf(j->err, sizeof(j->err), TN_TIMEOUT,
                             "interrupted (signal %d)", (int)interrupted);
                break;
            }
        }
    }
    if (rc == TN_DONE)
        rc = copy_write_flush(w, j->err, sizeof(j->err));
    copy_write_close(w);
    if (rc != TN_OK)
        return rc;
    tell_rows(j->e, def->name, n, want, start, true, j->nstats + 1, j->ntables);
    if (want >= 0 && n != want) {
        return tn_errf(j->err, sizeof(j->err), TN_INVALID,
                       "%lld rows read, %lld expected", (long long)n, (long long)want);
    }
    /* The target's own definition says which columns generate ids (the migrations' or the
     * copied one). */
    copy_table *have = NULL;
    stepf(j, "setting the ids of table %s", def->name);
    rc = copy_describe(j->db, def->name, j->a, &have, j->err, sizeof(j->err));
    if (rc == TN_OK)
        rc = copy_fix_ids(j->db, have, j->err, sizeof(j->err));
    if (rc == TN_OK && j->nstats < MAX_TABLES) {
        ops_copy_table *s = &j->stats[j->nstats++];
        s->name = arena_strdup(j->a, def->name);
        s->rows = n;
        s->ms = clock_mono_ms() - start;
        j->rows += n;
    }
    return rc;
}

/* Commit, then compare each table's count in the target with `want` (the source's). */
static int target_commit(job *j, const int64_t *want)
{
    stepf(j, "committing the copy");
    int rc = tn_db_commit(j->db);
    if (rc != TN_OK) {
        return tn_errf(j->err, sizeof(j->err), rc, "%s", tn_db_error(j->db));
    }
    for (int i = 0; i < j->nstats; i++) {
        int64_t n = -1;
        stepf(j, "verifying table %s", j->stats[i].name);
        rc = copy_count(j->db, j->stats[i].name, &n, j->err, sizeof(j->err));
        if (rc != TN_OK)
            return rc;
        if (n != want[i]) {
            return tn_errf(j->err, sizeof(j->err), TN_INVALID,
                           "the target holds %lld rows, the source %lld",
                           (long long)n, (long long)want[i]);
        }
    }
    return TN_OK;
}

/* After a failure: nothing of the target is left (when this run made it). The error of the
 * failure stays in j->err; a failing drop goes to j->abort_err. */
static void target_abort(job *j)
{
    if (j->db != NULL) {
        tn_db_rollback(j->db);
        db_close(j->db);
        j->db = NULL;
    }
    if (j->created) {
        char e[512];
        int rc = target_drop(j->dst, e, sizeof(e));
        if (rc != TN_OK && rc != TN_NOTFOUND)
            tn_errf(j->abort_err, sizeof(j->abort_err), rc, "; and the half-made target could "
                    "not be dropped (%.300s): remove the %s %.200s by hand", e,
                    target_kind_name(j->dst->kind), j->dst->name);
        j->created = false;
    }
}

/* SQLite files the CLI makes as root belong to the workers' user, as `tenancy init` does. */
static int give_target(job *j)
{
    if (j->dst->kind != TARGET_SQLITE)
        return TN_OK;
    uid_t uid;
    gid_t gid;
    int rc = ops_workers_owner(j->e, &uid, &gid, j->err, sizeof(j->err));
    if (rc != TN_OK || uid == (uid_t)-1)
        return rc;
    static const char *const suffix[] = {"", "-wal", "-shm"};
    for (size_t k = 0; k < TN_ARRAY_LEN(suffix) && rc == TN_OK; k++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s%s", j->dst->name, suffix[k]);
        rc = ops_give(path, uid, gid, k == 0, j->err, sizeof(j->err));
    }
    return rc;
}

/* TN_OK, or TN_NOMEM with err set. */
static int job_init(job *j, ops_env *e, const storage_target *dst, char *err, size_t errlen)
{
    memset(j, 0, sizeof(*j));
    j->e = e;
    j->tc = e->tc;
    j->dst = dst;
    j->a = arena_create(0);
    j->stats = j->a != NULL ? arena_calloc(j->a, MAX_TABLES * sizeof(*j->stats)) : NULL;
    j->t0 = clock_mono_ms();
    return j->stats != NULL ? TN_OK : tn_errf(err, errlen, TN_NOMEM, "out of memory");
}

/* The copy's report, handed to the caller with the arena (ops_copy_free). */
static void job_report(job *j, ops_copy_report *r)
{
    r->a = j->a;
    j->a = NULL;
    r->tables = j->stats;
    r->ntables = j->nstats;
    r->rows = j->rows;
    r->ms = clock_mono_ms() - j->t0;
    r->migrations = j->migrations;
    r->why_defs = j->why_defs;
    for (int i = 0; i < j->nnotes; i++)
        r->notes[i] = j->notes[i];
    r->nnotes = j->nnotes;
}

static void job_free(job *j)
{
    if (j->db != NULL)
        db_close(j->db);
    arena_destroy(j->a);
}

void ops_copy_free(ops_copy_report *r)
{
    arena_destroy(r->a);
    memset(r, 0, sizeof(*r));
}

/* ---- reading a source ------------------------------------------------------------------------ */

typedef struct tables {
    const char *names[MAX_TABLES];
    int n;
    arena *a;
    bool full;
} tables;

static int table_cb(void *ctx, const char *name)
{
    tables *t = ctx;
    if (t->n == MAX_TABLES) {
        t->full = true;
        return TN_TOOBIG;
    }
    if ((t->names[t->n] = arena_strdup(t->a, name)) == NULL)
        return TN_NOMEM;
    t->n++;
    return TN_OK;
}

/* The source's migration version: its version table's, "" without one. */
static int source_version(tn_db *src, const tables *t, char *out, size_t outlen, char *err,
                          size_t errlen)
{
    out[0] = '\0';
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->names[i], "tenancy_migrations") == 0) {
            migrate_error e;
            int rc = migrate_current(src, out, outlen, &e);
            if (rc != TN_OK)
                rc = tn_errf(err, errlen, rc, "cannot read the migration version: %s",
                             e.message);
            return rc;
        }
    return TN_OK;
}

typedef struct reader_ctx {
    copy_reader *r;
} reader_ctx;

static int reader_next(void *ctx, const char *const **vals, char *err, size_t errlen)
{
    return copy_read_next(((reader_ctx *)ctx)->r, vals, err, errlen);
}

static const char *where_text(const storage_target *t, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s %s", t->kind == TARGET_SQLITE ? "file" : target_kind_name(t->kind),
             t->name);
    return out;
}

/* ---- move ------------------------------------------------------------------------------------- */

int ops_move(ops_env *e, const char *slug, const ops_move_opts *o, ops_moved *out, char *err,
             size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *to = o->to;
    const tenancy_config *tc = e->tc;
    tenant_rec *t = NULL;
    int rc = registry_fetch(e->reg, LK_SLUG, slug, &t);
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, rc, "no tenant '%s'", slug);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "cannot read tenant '%s': %s", slug, tn_rc_str(rc));
    const placement *dp = tenancy_placement(tc, to);
    storage_target src, dst;
    char dstname[4200], why[1024];
    int status = TN_OK;
    job j;
    bool have_job = false;
    if (dp == NULL) {
        status = tn_errf(err, errlen, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared "
                         "with placement.%s.dsn in tenancyd.conf)", to, to);
        goto out;
    }
    if (strcmp(t->placement, to) == 0) {
        status = tn_errf(err, errlen, TN_INVALID, "tenant '%s' is already in placement '%s'",
                         slug, to);
        goto out;
    }
    rc = placement_target(tc, t, &src);
    if (rc != TN_OK) {
        status = rc == TN_NOTFOUND
                     ? tn_errf(err, errlen, rc, "tenant '%s' is in placement '%s', which this "
                               "host's configuration does not declare", slug, t->placement)
                     : tn_errf(err, errlen, rc, "tenant '%s' has no storage yet (placement "
                               "'%s')", slug, t->placement);
        goto out;
    }
    if (placement_storage_name(tc, dp, slug, dstname, sizeof(dstname)) != TN_OK ||
        placement_target_of(tc, to, dstname, tenant_setting_get(t, "storage.synchronous"),
                            &dst) != TN_OK) {
        status = tn_errf(err, errlen, TN_TOOBIG, "no storage name for '%s' in placement '%s'",
                         slug, to);
        goto out;
    }
    /* a copy may take longer than a request: the placement's timeout is the requests' */
    src.statement_timeout_ms = dst.statement_timeout_ms = 0;
    ops_verifiers dst_pw;
    ops_role_verifier(tc, &dst, &dst_pw);
    snprintf(out->from_placement, sizeof(out->from_placement), "%s", t->placement);
    snprintf(out->from_storage, sizeof(out->from_storage), "%s", t->storage);
    out->from_kind = target_kind_name(src.kind);
    where_text(&src, out->from_where, sizeof(out->from_where));
    snprintf(out->to_storage, sizeof(out->to_storage), "%s", dstname);
    out->to_kind = target_kind_name(dst.kind);
    where_text(&dst, out->to_where, sizeof(out->to_where));
    bool exists = false;
    rc = target_exists(&src, &exists, why, sizeof(why));
    if (rc != TN_OK || !exists) {
        status = tn_errf(err, errlen, rc != TN_OK ? rc : TN_NOTFOUND,
                         "the storage of '%s' (%s): %s", slug, out->from_where,
                         rc != TN_OK ? why : "missing");
        goto out;
    }
    rc = job_init(&j, e, &dst, err, errlen);
    have_job = true;
    if (rc != TN_OK) {
        status = rc;
        goto out;
    }

    /* From here on a failure restores the state. */
    int prev = -1;
    rc = registry_set_state_if(e->reg, slug,
                               BIT(TENANT_ACTIVE) | BIT(TENANT_MAINTENANCE) | BIT(TENANT_SUSPENDED),
                               TENANT_MOVING, &prev, why, sizeof(why));
    if (rc != TN_OK) {
        status = rc == TN_BUSY ? tn_errf(err, errlen, rc, "cannot move: %s (only an active, "
                                         "suspended or maintenance tenant moves)", why)
                               : tn_errf(err, errlen, rc, "%s", why);
        goto out;
    }
    out->state = prev;
    interrupted = 0;
    catch_signals(true);
    tables tl = {.a = j.a};
    int64_t want[MAX_TABLES];
    tn_db *sdb = NULL;
    char note[600];
    snprintf(note, sizeof(note), "tenant '%s' is moving (writes answer 503); waiting %d s for "
             "requests in flight", slug, o->drain_s);
    tell_note(e, note);
    for (int s = 0; s < o->drain_s * 10 && !interrupted; s++)
        usleep(100000);
    if (interrupted) {
        stepf(&j, "draining");
        rc = tn_errf(j.err, sizeof(j.err), TN_TIMEOUT, "interrupted (signal %d)", (int)interrupted);
        goto failed;
    }
    stepf(&j, "opening the source");
    rc = copy_source_open(&src, true, &sdb, j.err, sizeof(j.err));
    if (rc == TN_OK) {
        stepf(&j, "listing the source's tables");
        rc = target_tables(sdb, &src, table_cb, &tl);
        if (rc != TN_OK)
            rc = tn_errf(j.err, sizeof(j.err), rc, "%s",
                         tl.full ? "too many tables" : tn_db_error(sdb));
    }
    for (int i = 0; i < tl.n && rc == TN_OK; i++) {
        stepf(&j, "locking table %s of the source", tl.names[i]);
        rc = copy_lock(sdb, tl.names[i], j.err, sizeof(j.err));
    }
    char version[MIGRATE_VERSION_MAX + 32] = "";
    if (rc == TN_OK) {
        stepf(&j, "reading the source's migration version");
        rc = source_version(sdb, &tl, version, sizeof(version), j.err, sizeof(j.err));
    }
    j.ntables = tl.n;
    if (rc == TN_OK)
        rc = target_begin(&j, version, o->copy_definitions, tl.names, tl.n);
    if (rc == TN_OK) {
        snprintf(note, sizeof(note), "copying %d table%s from %s to %s", tl.n,
                 tl.n == 1 ? "" : "s", t->placement, to);
        tell_note(e, note);
    }
    for (int i = 0; i < tl.n && rc == TN_OK; i++) {
        copy_table *def = NULL;
        stepf(&j, "reading the definition of table %s", tl.names[i]);
        rc = copy_describe(sdb, tl.names[i], j.a, &def, j.err, sizeof(j.err));
        if (rc == TN_OK) {
            stepf(&j, "counting the rows of table %s", tl.names[i]);
            rc = copy_count(sdb, tl.names[i], &want[i], j.err, sizeof(j.err));
        }
        if (rc == TN_OK)
            rc = target_table(&j, def);
        if (rc == TN_OK) {
            reader_ctx rx = {NULL};
            stepf(&j, "reading table %s", tl.names[i]);
            rc = copy_read_open(sdb, def, &rx.r, j.err, sizeof(j.err));
            if (rc == TN_OK)
                rc = target_rows(&j, def, want[i], reader_next, &rx);
            copy_read_close(rx.r);
        }
    }
    if (rc == TN_OK)
        rc = target_commit(&j, want);
    if (rc == TN_OK) {
        stepf(&j, "giving the file to the workers' user");
        rc = give_target(&j);
    }
    if (rc == TN_OK && interrupted) {
        rc = tn_errf(j.err, sizeof(j.err), TN_TIMEOUT, "interrupted (signal %d)", (int)interrupted);
    }
    if (rc == TN_OK) {
        stepf(&j, "switching the registry");
        rc = registry_switch_storage(e->reg, slug, t->placement, t->storage, to, dstname, prev,
                                     j.err, sizeof(j.err));
    }
    if (rc != TN_OK)
        goto failed;

    {
        char hp[300];
        snprintf(hp, sizeof(hp), "{\"from\":\"%s\",\"to\":\"%s\"}", t->placement, to);
        ops_hook_told(e, slug, "moved", hp);
    }
    /* Switched: the writers the source's locks held back would now write where nobody reads;
     * the host sends new requests to the target already (the generation was bumped). */
    copy_source_close(sdb);
    sdb = NULL;
    catch_signals(false);
    db_close(j.db);
    j.db = NULL;
    out->drop_rc = TN_OK;
    if (o->drop_source) {
        out->drop_rc = target_drop(&src, out->drop_err, sizeof(out->drop_err));
        if (out->drop_rc == TN_NOTFOUND)
            out->drop_rc = TN_OK;
        out->source_dropped = out->drop_rc == TN_OK;
    }
    job_report(&j, &out->copy);
    goto out;

failed:;
    /* The target goes first (never a registry pointing at it: the switch is the last
     * step), then the source's locks, then the state. */
    target_abort(&j);
    copy_source_close(sdb);
    catch_signals(false);
    char serr[512];
    int was = -1;
    int src2 = registry_set_state_if(e->reg, slug, BIT(TENANT_MOVING), prev, &was, serr,
                                     sizeof(serr));
    char tail[700];
    if (src2 == TN_OK)
        snprintf(tail, sizeof(tail), "; the source is untouched and '%s' is %s again", slug,
                 tenant_state_name(prev));
    else if (src2 == TN_BUSY)
        snprintf(tail, sizeof(tail), "; the source is untouched; '%s' is %s (changed during "
                 "the move)", slug, tenant_state_name(was));
    else
        snprintf(tail, sizeof(tail), "; the source is untouched, but the state could not be "
                 "restored (%s): run 'tenancy tenant resume %s'", serr, slug);
    status = tn_errf(err, errlen, rc, "move of '%s' to %s failed while %s: %s%s%s", slug, to,
                     j.step, j.err, j.abort_err, tail);
out:
    if (have_job)
        job_free(&j);
    free(t);
    return status;
}
/* ---- export ----------------------------------------------------------------------------------- */

typedef struct dom_ctx {
    dump_domain d[64];
    int n;
    arena *a;
} dom_ctx;

static int domains_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    (void)t;
    dom_ctx *x = ctx;
    for (int i = 0; i < nd && x->n < 64; i++) {
        x->d[x->n].domain = arena_strdup(x->a, d[i].domain);
        x->d[x->n].primary = d[i].primary;
        if (x->d[x->n].domain != NULL)
            x->n++;
    }
    return TN_OK;
}

/* Write b to f and empty it. */
static int drain_buf(buf *b, FILE *f, char *err, size_t errlen)
{
    if (b->oom) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    if (b->len > 0 && fwrite(b->p, 1, b->len, f) != b->len) {
        return tn_errf(err, errlen, TN_IO, "cannot write the dump: %s", strerror(errno));
    }
    buf_reset(b);
    return TN_OK;
}

int ops_export(ops_env *e, const char *slug, const char *file, FILE *stream,
               ops_exported *out, char *errout, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const tenancy_config *tc = e->tc;
    tenant_rec *t = NULL;
    int rc = registry_fetch(e->reg, LK_SLUG, slug, &t);
    if (rc == TN_NOTFOUND)
        return tn_errf(errout, errlen, rc, "no tenant '%s'", slug);
    if (rc != TN_OK)
        return tn_errf(errout, errlen, rc, "cannot read tenant '%s': %s", slug, tn_rc_str(rc));
    int status = TN_OK;
    storage_target src;
    char err[1024] = "", tmp[4200] = "";
    FILE *f = NULL;
    tn_db *sdb = NULL;
    buf b = BUF_INIT;
    arena *ar = arena_create(0);
    dom_ctx dc = {.a = ar};
    tables tl = {.a = ar};
    registry_life life;
    const char *step = "reading the registry";
    if (ar == NULL) {
        status = tn_errf(errout, errlen, TN_NOMEM, "out of memory");
        goto out;
    }
    rc = placement_target(tc, t, &src);
    if (rc != TN_OK) {
        status = rc == TN_NOTFOUND
                     ? tn_errf(errout, errlen, rc, "tenant '%s' is in placement '%s', which "
                               "this host's configuration does not declare", slug, t->placement)
                     : tn_errf(errout, errlen, rc, "tenant '%s' has no storage yet (placement "
                               "'%s')", slug, t->placement);
        goto out;
    }
    rc = registry_show(e->reg, slug, domains_cb, &dc);
    if (rc == TN_OK)
        rc = registry_life_get(e->reg, slug, &life, err, sizeof(err));
    if (rc != TN_OK)
        goto failed;
    step = "opening the storage";
    src.statement_timeout_ms = 0;   /* an export may take longer than a request */
    rc = copy_source_open(&src, false, &sdb, err, sizeof(err));
    if (rc == TN_OK) {
        step = "listing the tables";
        rc = target_tables(sdb, &src, table_cb, &tl);
        if (rc != TN_OK)
            rc = tn_errf(err, sizeof(err), rc, "%s",
                         tl.full ? "too many tables" : tn_db_error(sdb));
    }
    char version[MIGRATE_VERSION_MAX + 32] = "";
    if (rc == TN_OK) {
        step = "reading the migration version";
        rc = source_version(sdb, &tl, version, sizeof(version), err, sizeof(err));
        if (rc == TN_OK && version[0] == '\0')
            snprintf(version, sizeof(version), "%s", life.migration_version);
    }
    if (rc != TN_OK)
        goto failed;
    if (file != NULL) {
        /* Beside the file, renamed over it at the end: a failed export leaves no file. */
        snprintf(tmp, sizeof(tmp), "%s.tmp%ld", file, (long)getpid());
        f = fopen(tmp, "w");
        if (f == NULL) {
            rc = tn_errf(err, sizeof(err), TN_IO, "cannot create %s: %s", tmp, strerror(errno));
            step = "opening the output";
            tmp[0] = '\0';
            goto failed;
        }
    } else {
        f = stream;
    }
    dump_header h = {.slug = t->slug, .name = t->name, .state = tenant_state_name(t->state),
                     .max_workers = t->max_workers, .settings = t->settings_json,
                     .domains = dc.d, .ndomains = dc.n, .migration_version = version,
                     .placement = t->placement, .backend = tn_db_backend(sdb),
                     .exported_at = (int64_t)time(NULL), .tables = tl.names,
                     .ntables = tl.n};
    dump_put_header(&b, &h);
    int64_t total = 0, start = clock_mono_ms();
    for (int i = 0; i < tl.n && rc == TN_OK; i++) {
        copy_table *def = NULL;
        copy_reader *r = NULL;
        int64_t want = 0, n = 0, tstart = clock_mono_ms();
        step = "reading a table's definition";
        rc = copy_describe(sdb, tl.names[i], ar, &def, err, sizeof(err));
        if (rc == TN_OK)
            rc = copy_count(sdb, tl.names[i], &want, err, sizeof(err));
        if (rc != TN_OK)
            break;
        dump_put_table(&b, def, want);
        step = "reading a table";
        rc = copy_read_open(sdb, def, &r, err, sizeof(err));
        const char *const *vals;
        while (rc == TN_OK && (rc = copy_read_next(r, &vals, err, sizeof(err))) == TN_OK) {
            rc = dump_put_row(&b, def, vals, err, sizeof(err));
            n++;
            if (rc == TN_OK && b.len > 1 << 16)
                rc = drain_buf(&b, f, err, sizeof(err));
            if (n % 2000 == 0)
                tell_rows(e, def->name, n, want, tstart, false, i, tl.n);
        }
        copy_read_close(r);
        if (rc == TN_DONE) {
            rc = TN_OK;
            if (n != want) {
                rc = tn_errf(err, sizeof(err), TN_INVALID,
                             "%lld rows read, %lld counted", (long long)n, (long long)want);
            }
        }
        if (rc == TN_OK)
            tell_rows(e, def->name, n, want, tstart, true, i + 1, tl.n);
        total += n;
        if (rc != TN_OK) {
            char cause[sizeof(err)];
            str_copy(cause, sizeof(cause), err);   /* err is written over with it */
            rc = tn_errf(err, sizeof(err), rc, "table %.64s: %.900s", tl.names[i], cause);
        }
    }
    if (rc == TN_OK) {
        dump_put_end(&b, tl.n, total);
        step = "writing the dump";
        rc = drain_buf(&b, f, err, sizeof(err));
    }
    if (rc == TN_OK && fflush(f) != 0) {
        rc = tn_errf(err, sizeof(err), TN_IO, "cannot write the dump: %s", strerror(errno));
    }
    if (rc == TN_OK && file != NULL) {
        if (fsync(fileno(f)) != 0 || fclose(f) != 0) {
            rc = tn_errf(err, sizeof(err), TN_IO, "cannot write %s: %s", file, strerror(errno));
        } else if (rename(tmp, file) != 0) {
            rc = tn_errf(err, sizeof(err), TN_IO, "cannot rename %s to %s: %s", tmp, file,
                         strerror(errno));
        } else {
            tmp[0] = '\0';
        }
        f = NULL;
    }
    if (rc != TN_OK)
        goto failed;
    out->tables = tl.n;
    out->rows = total;
    snprintf(out->version, sizeof(out->version), "%s", version);
    out->ms = clock_mono_ms() - start;
    goto out;

failed:
    status = tn_errf(errout, errlen, rc, "export of '%s' failed while %s: %s%s", slug, step,
                     err, file != NULL ? " (no file written)" : "");
out:
    if (f != NULL && f != stream)
        fclose(f);
    if (tmp[0] != '\0')
        unlink(tmp);
    copy_source_close(sdb);
    buf_free(&b);
    arena_destroy(ar);
    free(t);
    return status;
}

/* ---- import ----------------------------------------------------------------------------------- */

typedef struct dump_ctx {
    dump_reader *r;
} dump_ctx;

static int dump_next(void *ctx, const char *const **vals, char *err, size_t errlen)
{
    return dump_next_row(((dump_ctx *)ctx)->r, vals, err, errlen);
}

int ops_import(ops_env *e, FILE *f, const char *label, const ops_import_opts *o,
               ops_imported *out, char *errout, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const tenancy_config *tc = e->tc;
    const char *pname = o->placement;
    if (pname == NULL)
        pname = tc->default_placement;
    const placement *p = tenancy_placement(tc, pname);
    if (p == NULL)
        return tn_errf(errout, errlen, TN_NOTFOUND, "no placement '%s' (sqlite, or one "
                       "declared with placement.%s.dsn in tenancyd.conf)", pname, pname);
    char err[1024];
    dump_reader *r = NULL;
    int rc = dump_open(f, &r, err, sizeof(err));
    if (rc != TN_OK)
        return tn_errf(errout, errlen, rc, "%s: %s", label, err);
    const dump_header *h = dump_header_of(r);
    const char *slug = o->slug;
    if (slug == NULL)
        slug = h->slug;
    int status = TN_OK;
    storage_target dst;
    char *name = out->storage;
    size_t namelen = sizeof(out->storage);
    job j;
    rc = job_init(&j, e, &dst, errout, errlen);
    if (rc != TN_OK) {
        status = rc;
        goto out;
    }
    int64_t want[MAX_TABLES];
    if (h->ntables > MAX_TABLES) {
        status = tn_errf(errout, errlen, TN_TOOBIG, "%s: more than %d tables", label,
                         MAX_TABLES);
        goto out;
    }
    if (!tenant_slug_valid(slug)) {
        status = tn_errf(errout, errlen, TN_INVALID, "invalid slug '%s': use 1-63 of a-z, 0-9 "
                         "and '-', not at the ends", slug);
        goto out;
    }
    if (placement_storage_name(tc, p, slug, name, namelen) != TN_OK ||
        placement_target_of(tc, pname, name, NULL, &dst) != TN_OK) {
        status = tn_errf(errout, errlen, TN_TOOBIG, "no storage name for '%s' in placement "
                         "'%s'", slug, pname);
        goto out;
    }
    dst.statement_timeout_ms = 0;   /* an import may take longer than a request */
    snprintf(out->slug, sizeof(out->slug), "%s", slug);
    snprintf(out->placement, sizeof(out->placement), "%s", pname);
    out->kind = target_kind_name(dst.kind);
    snprintf(out->version, sizeof(out->version), "%s",
             h->migration_version ? h->migration_version : "");
    ops_verifiers dst_pw;
    ops_role_verifier(tc, &dst, &dst_pw);
    /* The sync setting of the dump's tenant, as placement_target would read it. */
    {
        tenant_rec *tmp = tenant_rec_new(0, slug, "x", 0, "", "", 0, 0, 0, h->settings);
        dst.sync_normal = tmp != NULL && tenant_setting_get(tmp, "storage.synchronous") != NULL &&
                          strcmp(tenant_setting_get(tmp, "storage.synchronous"), "normal") == 0;
        free(tmp);
    }
    bool exists = false;
    rc = target_exists(&dst, &exists, err, sizeof(err));
    if (rc != TN_OK || exists) {
        status = tn_errf(errout, errlen, rc != TN_OK ? rc : TN_EXISTS,
                         "the storage for '%s' (%s %s): %s", slug, target_kind_name(dst.kind),
                         name, rc != TN_OK ? err : "already exists: it is not overwritten");
        goto out;
    }
    /* The registry first: it reserves the slug and the domains (a conflict stops the import
     * before any storage is made), in state provisioning (the host answers 503). */
    const char *doms[64];
    int nd = 0;
    for (int pass = 0; pass < 2 && !o->no_domains; pass++)   /* the primary one first */
        for (int i = 0; i < h->ndomains && nd < 64; i++)
            if (h->domains[i].primary == (pass == 0))
                doms[nd++] = h->domains[i].domain;
    registry_new n = {.slug = slug, .name = h->name, .placement = pname, .storage = name,
                      .state = TENANT_PROVISIONING, .max_workers = h->max_workers,
                      .settings = h->settings, .domains = doms, .ndomains = nd};
    rc = registry_create(e->reg, &n, NULL, err, sizeof(err));
    if (rc != TN_OK) {
        status = tn_errf(errout, errlen, rc, "%s", err);
        goto out;
    }
    interrupted = 0;
    catch_signals(true);
    j.ntables = h->ntables;
    rc = target_begin(&j, h->migration_version, false, h->tables, h->ntables);
    for (int i = 0; rc == TN_OK; i++) {
        copy_table *def = NULL;
        int64_t rows = 0;
        stepf(&j, "reading the dump");
        rc = dump_next_table(r, j.a, &def, &rows, j.err, sizeof(j.err));
        if (rc == TN_DONE) {
            rc = TN_OK;
            break;
        }
        if (rc == TN_OK) {
            want[i] = rows;   /* i < h->ntables <= MAX_TABLES: dump_next_table checks that */
            rc = target_table(&j, def);
        }
        if (rc == TN_OK) {
            dump_ctx dx = {r};
            rc = target_rows(&j, def, rows, dump_next, &dx);
        }
    }
    if (rc == TN_OK)
        rc = target_commit(&j, want);
    if (rc == TN_OK) {
        stepf(&j, "giving the file to the workers' user");
        rc = give_target(&j);
    }
    if (rc == TN_OK && interrupted) {
        rc = tn_errf(j.err, sizeof(j.err), TN_TIMEOUT, "interrupted (signal %d)", (int)interrupted);
    }
    if (rc == TN_OK && h->migration_version != NULL && h->migration_version[0] != '\0') {
        stepf(&j, "recording the migration version");
        rc = registry_set_migration(e->reg, slug, h->migration_version, "", j.err,
                                    sizeof(j.err));
    }
    if (rc == TN_OK) {
        stepf(&j, "activating the tenant");
        rc = registry_set_state_if(e->reg, slug, BIT(TENANT_PROVISIONING), TENANT_ACTIVE, NULL,
                                   j.err, sizeof(j.err));
    }
    catch_signals(false);
    if (rc != TN_OK) {
        target_abort(&j);
        char perr[512];
        int prc = registry_purge(e->reg, slug, perr, sizeof(perr));
        status = tn_errf(errout, errlen, rc, "import of '%s' failed while %s: %s%s%s%s", slug,
                         j.step, j.err, j.abort_err,
                         prc == TN_OK ? "; nothing was kept" : "; and its registry entry could "
                         "not be removed: ", prc == TN_OK ? "" : perr);
        goto out;
    }
    job_report(&j, &out->copy);
out:
    job_free(&j);
    dump_close(r);
    return status;
}
