/*
 * move.c — `tenancy move`, `tenancy export` and `tenancy import`: a tenant's storage
 * copied to another placement, to a dump file, or from one.
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
 * Must not: write to a source, build SQL (storage/ does), or switch the registry before the
 * counts have been compared.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"
#include "core/rc.h"
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

static void on_signal(int sig)
{
    interrupted = sig;
}

static void catch_signals(bool on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on ? on_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ---- the copy into a target, shared by move and import --------------------------------------- */

typedef struct tstat {
    const char *name;
    int64_t rows;
    int64_t ms;
} tstat;

typedef struct job {
    cli *c;
    const tenancy_config *tc;
    const storage_target *dst;
    bool created;               /* this run created dst (only then is it dropped on failure) */
    tn_db *db;                  /* the target connection */
    bool migrations;            /* the tables came from the app's migrations */
    const char *why_defs;       /* why not (for the report) */
    arena *a;
    tstat stats[MAX_TABLES];
    int nstats;
    int64_t rows;
    int64_t t0;                 /* clock_mono_ms at the start of the copy */
    bool progress;              /* stderr is a terminal */
    const char *notes[64];
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

static double rate(int64_t rows, int64_t ms)
{
    return ms > 0 ? (double)rows * 1000.0 / (double)ms : (double)rows * 1000.0;
}

/* On a terminal: one line per table, rewritten as rows arrive (at most 10 times a second). */
static void progress(job *j, const char *table, int64_t done, int64_t want, int64_t start,
                     bool final)
{
    static int64_t last;
    if (!j->progress)
        return;
    int64_t now = clock_mono_ms();
    if (!final && now - last < 100)
        return;
    last = now;
    fprintf(stderr, "\r  %-28.28s %10lld", table, (long long)done);
    if (want >= 0)
        fprintf(stderr, " / %-10lld", (long long)want);
    fprintf(stderr, " rows %10.0f rows/s%s", rate(done, now - start), final ? "\n" : "");
    fflush(stderr);
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
            snprintf(j->err, sizeof(j->err), "the %s %.900s already exists: it is not "
                     "overwritten (a kept source, or an orphan: see 'tenancy check')",
                     j->dst->kind == TARGET_SQLITE ? "file" : target_kind_name(j->dst->kind),
                     j->dst->name);
        return rc;
    }
    j->created = true;
    rc = copy_target_open(j->dst, &j->db, j->err, sizeof(j->err));
    if (rc != TN_OK)
        return rc;

    /* The app's migrations, when they give exactly the tenant's version. */
    char mdir[4096] = "";
    if (j->tc->migrations != NULL && j->tc->migrations[0] != '\0') {
        ops_env e;
        cli_ops_env(j->c, &e);
        ops_conf_path(&e, j->tc->migrations, mdir, sizeof(mdir));
    }
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
                snprintf(j->err, sizeof(j->err), "migration %s, statement %d (line %d): %s",
                         res.error.file, res.error.statement, res.error.line,
                         res.error.message);
                migrate_free(set);
                return rc;
            }
            j->migrations = true;
            j->why_defs = "made by the app's migrations";
        }
        migrate_free(set);
    }
    stepf(j, "beginning the copy");
    rc = tn_db_begin(j->db);
    if (rc != TN_OK) {
        snprintf(j->err, sizeof(j->err), "%s", tn_db_error(j->db));
        return rc;
    }
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
                    snprintf(j->err, sizeof(j->err),
                             "column %s.%s of the source is not in the table the migrations "
                             "make (the schema was changed outside the migrations): use "
                             "--copy-definitions", def->name, def->cols[i].name);
                    return TN_INVALID;
                }
            }
            return TN_OK;
        }
        if (rc != TN_NOTFOUND) {
            stepf(j, "reading table %s in the target", def->name);
            snprintf(j->err, sizeof(j->err), "%s", e);
            return rc;
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
            progress(j, def->name, n, want, start, false);
            if (interrupted) {
                snprintf(j->err, sizeof(j->err), "interrupted (signal %d)", (int)interrupted);
                rc = TN_TIMEOUT;
                break;
            }
        }
    }
    if (rc == TN_DONE)
        rc = copy_write_flush(w, j->err, sizeof(j->err));
    copy_write_close(w);
    if (rc != TN_OK)
        return rc;
    progress(j, def->name, n, want, start, true);
    if (want >= 0 && n != want) {
        snprintf(j->err, sizeof(j->err), "%lld rows read, %lld expected", (long long)n,
                 (long long)want);
        return TN_INVALID;
    }
    /* The target's own definition says which columns generate ids (the migrations' or the
     * copied one). */
    copy_table *have = NULL;
    stepf(j, "setting the ids of table %s", def->name);
    rc = copy_describe(j->db, def->name, j->a, &have, j->err, sizeof(j->err));
    if (rc == TN_OK)
        rc = copy_fix_ids(j->db, have, j->err, sizeof(j->err));
    if (rc == TN_OK && j->nstats < MAX_TABLES) {
        tstat *s = &j->stats[j->nstats++];
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
        snprintf(j->err, sizeof(j->err), "%s", tn_db_error(j->db));
        return rc;
    }
    for (int i = 0; i < j->nstats; i++) {
        int64_t n = -1;
        stepf(j, "verifying table %s", j->stats[i].name);
        rc = copy_count(j->db, j->stats[i].name, &n, j->err, sizeof(j->err));
        if (rc != TN_OK)
            return rc;
        if (n != want[i]) {
            snprintf(j->err, sizeof(j->err), "the target holds %lld rows, the source %lld",
                     (long long)n, (long long)want[i]);
            return TN_INVALID;
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
            snprintf(j->abort_err, sizeof(j->abort_err), "; and the half-made target could not "
                     "be dropped (%.300s): remove the %s %.200s by hand", e,
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
    ops_env oe;
    cli_ops_env(j->c, &oe);
    int rc = ops_workers_owner(&oe, &uid, &gid, j->err, sizeof(j->err));
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

static void job_init(job *j, cli *c, const storage_target *dst)
{
    memset(j, 0, sizeof(*j));
    j->c = c;
    j->tc = &c->cfg->tenancy;
    j->dst = dst;
    j->a = arena_create(0);
    j->progress = !c->json && isatty(STDERR_FILENO) == 1;
    j->t0 = clock_mono_ms();
}

static void job_free(job *j)
{
    if (j->db != NULL)
        db_close(j->db);
    arena_destroy(j->a);
}

/* The report of a copy: per table lines (text) or "tables", "rows"... members (JSON). */
static void report(job *j)
{
    cli *c = j->c;
    int64_t ms = clock_mono_ms() - j->t0;
    if (c->json) {
        buf *b = &c->out;
        buf_puts(b, ",\"tables\":[");
        for (int i = 0; i < j->nstats; i++) {
            buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
            buf_json_str(b, j->stats[i].name);
            buf_puts(b, ",\"rows\":");
            buf_i64(b, j->stats[i].rows);
            buf_printf(b, ",\"seconds\":%.3f}", (double)j->stats[i].ms / 1000.0);
        }
        buf_puts(b, "],\"rows\":");
        buf_i64(b, j->rows);
        buf_printf(b, ",\"seconds\":%.3f,\"rows_per_second\":%.0f", (double)ms / 1000.0,
                   rate(j->rows, ms));
        buf_puts(b, ",\"schema\":");
        buf_json_str(b, j->migrations ? "migrations" : "definitions");
        buf_puts(b, ",\"notes\":[");
        for (int i = 0; i < j->nnotes; i++) {
            if (i)
                buf_putc(b, ',');
            buf_json_str(b, j->notes[i]);
        }
        buf_putc(b, ']');
        return;
    }
    for (int i = 0; i < j->nstats; i++)
        printf("  %-30s %10lld rows\n", j->stats[i].name, (long long)j->stats[i].rows);
    printf("%d table%s, %lld rows in %.2f s (%.0f rows/s); tables %s\n", j->nstats,
           j->nstats == 1 ? "" : "s", (long long)j->rows, (double)ms / 1000.0,
           rate(j->rows, ms), j->why_defs);
    for (int i = 0; i < j->nnotes; i++)
        printf("note: %s\n", j->notes[i]);
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
                snprintf(err, errlen, "cannot read the migration version: %s", e.message);
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

int cli_move(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    const char *to = cli_opt(a, "--to");
    int drain = 2;
    int rc = cli_opt_int(c, a, "--drain", 0, 3600, &drain);
    if (rc != 0)
        return rc;
    if (to == NULL)
        return cli_usage(c, "'move' needs --to PLACEMENT");
    bool drop = cli_opt(a, "--drop-source") != NULL;
    bool force_defs = cli_opt(a, "--copy-definitions") != NULL;
    const tenancy_config *tc = &c->cfg->tenancy;

    tenant_rec *t = NULL;
    rc = registry_fetch(c->reg, LK_SLUG, slug, &t);
    if (rc == TN_NOTFOUND)
        return cli_fail(c, rc, "no tenant '%s'", slug);
    if (rc != TN_OK)
        return cli_fail(c, rc, "cannot read tenant '%s': %s", slug, tn_rc_str(rc));
    const placement *dp = tenancy_placement(tc, to);
    storage_target src, dst;
    char dstname[4200], w1[4300], w2[4300], err[1024];
    int status = 0;
    if (dp == NULL) {
        status = cli_fail(c, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared with "
                                          "placement.%s.dsn in tenancyd.conf)", to, to);
        goto out;
    }
    if (strcmp(t->placement, to) == 0) {
        status = cli_fail(c, TN_INVALID, "tenant '%s' is already in placement '%s'", slug, to);
        goto out;
    }
    rc = placement_target(tc, t, &src);
    if (rc != TN_OK) {
        status = cli_fail(c, rc, rc == TN_NOTFOUND
                                     ? "tenant '%s' is in placement '%s', which this host's "
                                       "configuration does not declare"
                                     : "tenant '%s' has no storage yet (placement '%s')",
                          slug, t->placement);
        goto out;
    }
    if (placement_storage_name(tc, dp, slug, dstname, sizeof(dstname)) != TN_OK ||
        placement_target_of(tc, to, dstname, tenant_setting_get(t, "storage.synchronous"),
                            &dst) != TN_OK) {
        status = cli_fail(c, TN_TOOBIG, "no storage name for '%s' in placement '%s'", slug, to);
        goto out;
    }
    char dst_pw[OPS_VERIFIER_MAX];
    ops_role_verifier(&c->cfg->tenancy, &dst, dst_pw);
    where_text(&src, w1, sizeof(w1));
    where_text(&dst, w2, sizeof(w2));
    bool exists = false;
    rc = target_exists(&src, &exists, err, sizeof(err));
    if (rc != TN_OK || !exists) {
        status = cli_fail(c, rc != TN_OK ? rc : TN_NOTFOUND, "the storage of '%s' (%s): %s",
                          slug, w1, rc != TN_OK ? err : "missing");
        goto out;
    }

    /* From here on a failure restores the state. */
    int prev = -1;
    rc = registry_set_state_if(c->reg, slug,
                               BIT(TENANT_ACTIVE) | BIT(TENANT_MAINTENANCE) | BIT(TENANT_SUSPENDED),
                               TENANT_MOVING, &prev, err, sizeof(err));
    if (rc != TN_OK) {
        status = cli_fail(c, rc, rc == TN_BUSY ? "cannot move: %s (only an active, suspended "
                                                 "or maintenance tenant moves)" : "%s", err);
        goto out;
    }
    catch_signals(true);
    job j;
    job_init(&j, c, &dst);
    tables tl = {.a = j.a};
    int64_t want[MAX_TABLES];
    tn_db *sdb = NULL;
    if (j.progress)
        fprintf(stderr, "tenant '%s' is moving (writes answer 503); waiting %d s for requests "
                        "in flight\n", slug, drain);
    for (int s = 0; s < drain * 10 && !interrupted; s++)
        usleep(100000);
    if (interrupted) {
        stepf(&j, "draining");
        snprintf(j.err, sizeof(j.err), "interrupted (signal %d)", (int)interrupted);
        rc = TN_TIMEOUT;
        goto failed;
    }
    stepf(&j, "opening the source");
    rc = copy_source_open(&src, true, &sdb, j.err, sizeof(j.err));
    if (rc == TN_OK) {
        stepf(&j, "listing the source's tables");
        rc = target_tables(sdb, &src, table_cb, &tl);
        if (rc != TN_OK)
            snprintf(j.err, sizeof(j.err), "%s", tl.full ? "too many tables" : tn_db_error(sdb));
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
    if (rc == TN_OK)
        rc = target_begin(&j, version, force_defs, tl.names, tl.n);
    if (j.progress && rc == TN_OK)
        fprintf(stderr, "copying %d table%s from %s to %s\n", tl.n, tl.n == 1 ? "" : "s",
                t->placement, to);
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
        snprintf(j.err, sizeof(j.err), "interrupted (signal %d)", (int)interrupted);
        rc = TN_TIMEOUT;
    }
    if (rc == TN_OK) {
        stepf(&j, "switching the registry");
        rc = registry_switch_storage(c->reg, slug, t->placement, t->storage, to, dstname, prev,
                                     j.err, sizeof(j.err));
    }
    if (rc != TN_OK)
        goto failed;

    /* Switched: the writers the source's locks held back would now write where nobody reads;
     * the host sends new requests to the target already (the generation was bumped). */
    copy_source_close(sdb);
    sdb = NULL;
    catch_signals(false);
    db_close(j.db);
    j.db = NULL;
    char derr[1024] = "";
    int drc = TN_OK;
    if (drop) {
        drc = target_drop(&src, derr, sizeof(derr));
        if (drc == TN_NOTFOUND)
            drc = TN_OK;
    }
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"slug\":");
        buf_json_str(&c->out, slug);
        buf_puts(&c->out, ",\"from\":{\"placement\":");
        buf_json_str(&c->out, t->placement);
        buf_puts(&c->out, ",\"kind\":");
        buf_json_str(&c->out, target_kind_name(src.kind));
        buf_puts(&c->out, ",\"storage\":");
        buf_json_str(&c->out, t->storage);
        buf_puts(&c->out, "},\"to\":{\"placement\":");
        buf_json_str(&c->out, to);
        buf_puts(&c->out, ",\"kind\":");
        buf_json_str(&c->out, target_kind_name(dst.kind));
        buf_puts(&c->out, ",\"storage\":");
        buf_json_str(&c->out, dstname);
        buf_puts(&c->out, "},\"state\":");
        buf_json_str(&c->out, tenant_state_name(prev));
        report(&j);
        buf_puts(&c->out, drop && drc == TN_OK ? ",\"source_dropped\":true}"
                                               : ",\"source_dropped\":false}");
    } else {
        printf("moved '%s' from %s (%s) to %s (%s); it is %s again\n", slug, t->placement, w1,
               to, w2, tenant_state_name(prev));
        report(&j);
        if (drop && drc == TN_OK)
            printf("source dropped: %s\n", w1);
        else if (!drop)
            printf("source kept: %s ('tenancy check' reports it as an orphan until it is "
                   "removed)\n", w1);
    }
    job_free(&j);
    if (drc != TN_OK) {
        c->keep_out = true;
        status = cli_fail(c, drc, "moved, but the source could not be dropped: %s", derr);
    }
    goto out;

failed:;
    /* The target goes first (never a registry pointing at it: the switch is the last
     * step), then the source's locks, then the state. */
    target_abort(&j);
    copy_source_close(sdb);
    catch_signals(false);
    char serr[512];
    int was = -1;
    int src2 = registry_set_state_if(c->reg, slug, BIT(TENANT_MOVING), prev, &was, serr,
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
    status = cli_fail(c, rc, "move of '%s' to %s failed while %s: %s%s%s", slug, to, j.step,
                      j.err, j.abort_err, tail);
    job_free(&j);
out:
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
        snprintf(err, errlen, "out of memory");
        return TN_NOMEM;
    }
    if (b->len > 0 && fwrite(b->p, 1, b->len, f) != b->len) {
        snprintf(err, errlen, "cannot write the dump: %s", strerror(errno));
        return TN_IO;
    }
    buf_reset(b);
    return TN_OK;
}

int cli_export(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    const char *file = cli_opt(a, "-o");
    if (file != NULL && (file[0] == '\0' || strcmp(file, "-") == 0))
        file = NULL;
    if (file == NULL && c->json)
        return cli_usage(c, "--json needs -o FILE (without it the dump is standard output)");
    const tenancy_config *tc = &c->cfg->tenancy;
    tenant_rec *t = NULL;
    int rc = registry_fetch(c->reg, LK_SLUG, slug, &t);
    if (rc == TN_NOTFOUND)
        return cli_fail(c, rc, "no tenant '%s'", slug);
    if (rc != TN_OK)
        return cli_fail(c, rc, "cannot read tenant '%s': %s", slug, tn_rc_str(rc));
    int status = 0;
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
        status = cli_fail(c, TN_NOMEM, "out of memory");
        goto out;
    }
    rc = placement_target(tc, t, &src);
    if (rc != TN_OK) {
        status = cli_fail(c, rc, rc == TN_NOTFOUND
                                     ? "tenant '%s' is in placement '%s', which this host's "
                                       "configuration does not declare"
                                     : "tenant '%s' has no storage yet (placement '%s')",
                          slug, t->placement);
        goto out;
    }
    rc = registry_show(c->reg, slug, domains_cb, &dc);
    if (rc == TN_OK)
        rc = registry_life_get(c->reg, slug, &life, err, sizeof(err));
    if (rc != TN_OK)
        goto failed;
    step = "opening the storage";
    rc = copy_source_open(&src, false, &sdb, err, sizeof(err));
    if (rc == TN_OK) {
        step = "listing the tables";
        rc = target_tables(sdb, &src, table_cb, &tl);
        if (rc != TN_OK)
            snprintf(err, sizeof(err), "%s", tl.full ? "too many tables" : tn_db_error(sdb));
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
            snprintf(err, sizeof(err), "cannot create %s: %s", tmp, strerror(errno));
            step = "opening the output";
            tmp[0] = '\0';
            rc = TN_IO;
            goto failed;
        }
    } else {
        f = stdout;
    }
    dump_header h = {.slug = t->slug, .name = t->name, .state = tenant_state_name(t->state),
                     .max_workers = t->max_workers, .settings = t->settings_json,
                     .domains = dc.d, .ndomains = dc.n, .migration_version = version,
                     .placement = t->placement, .backend = tn_db_backend(sdb),
                     .exported_at = (int64_t)time(NULL), .tables = tl.names,
                     .ntables = tl.n};
    dump_put_header(&b, &h);
    int64_t total = 0, start = clock_mono_ms();
    bool prog = !c->json && file != NULL && isatty(STDERR_FILENO) == 1;
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
            if (prog && n % 2000 == 0) {
                fprintf(stderr, "\r  %-28.28s %10lld / %-10lld rows", def->name, (long long)n,
                        (long long)want);
                fflush(stderr);
            }
        }
        copy_read_close(r);
        if (rc == TN_DONE) {
            rc = TN_OK;
            if (n != want) {
                snprintf(err, sizeof(err), "%lld rows read, %lld counted", (long long)n,
                         (long long)want);
                rc = TN_INVALID;
            }
        }
        if (prog && rc == TN_OK)
            fprintf(stderr, "\r  %-28.28s %10lld rows %10.0f rows/s\n", def->name,
                    (long long)n, rate(n, clock_mono_ms() - tstart));
        total += n;
        if (rc != TN_OK) {
            char e2[1100];
            snprintf(e2, sizeof(e2), "table %.64s: %.900s", tl.names[i], err);
            snprintf(err, sizeof(err), "%.1000s", e2);
        }
    }
    if (rc == TN_OK) {
        dump_put_end(&b, tl.n, total);
        step = "writing the dump";
        rc = drain_buf(&b, f, err, sizeof(err));
    }
    if (rc == TN_OK && fflush(f) != 0) {
        snprintf(err, sizeof(err), "cannot write the dump: %s", strerror(errno));
        rc = TN_IO;
    }
    if (rc == TN_OK && file != NULL) {
        if (fsync(fileno(f)) != 0 || fclose(f) != 0) {
            snprintf(err, sizeof(err), "cannot write %s: %s", file, strerror(errno));
            rc = TN_IO;
        } else if (rename(tmp, file) != 0) {
            snprintf(err, sizeof(err), "cannot rename %s to %s: %s", tmp, file,
                     strerror(errno));
            rc = TN_IO;
        } else {
            tmp[0] = '\0';
        }
        f = NULL;
    }
    if (rc != TN_OK)
        goto failed;
    int64_t ms = clock_mono_ms() - start;
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"slug\":");
        buf_json_str(&c->out, slug);
        buf_puts(&c->out, ",\"file\":");
        buf_json_str(&c->out, file);
        buf_printf(&c->out, ",\"tables\":%d,\"rows\":%lld,\"migration_version\":", tl.n,
                   (long long)total);
        buf_json_str(&c->out, version);
        buf_printf(&c->out, ",\"seconds\":%.3f}", (double)ms / 1000.0);
    } else if (file != NULL) {
        printf("exported '%s' to %s: %d table%s, %lld rows in %.2f s (%.0f rows/s)\n", slug,
               file, tl.n, tl.n == 1 ? "" : "s", (long long)total, (double)ms / 1000.0,
               rate(total, ms));
    }
    goto out;

failed:
    status = cli_fail(c, rc, "export of '%s' failed while %s: %s%s", slug, step, err,
                      file != NULL ? " (no file written)" : "");
out:
    if (f != NULL && f != stdout)
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

int cli_import(cli *c, const cli_args *a)
{
    const char *file = a->pos[0];
    const tenancy_config *tc = &c->cfg->tenancy;
    const char *pname = cli_opt(a, "--placement");
    bool no_domains = cli_opt(a, "--no-domains") != NULL;
    if (pname == NULL)
        pname = tc->default_placement;
    const placement *p = tenancy_placement(tc, pname);
    if (p == NULL)
        return cli_fail(c, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared with "
                                        "placement.%s.dsn in tenancyd.conf)", pname, pname);
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (f == NULL)
        return cli_fail(c, errno == ENOENT ? TN_NOTFOUND : TN_IO, "cannot open %s: %s", file,
                        strerror(errno));
    char err[1024];
    dump_reader *r = NULL;
    int rc = dump_open(f, &r, err, sizeof(err));
    if (rc != TN_OK) {
        if (f != stdin)
            fclose(f);
        return cli_fail(c, rc, "%s: %s", file, err);
    }
    const dump_header *h = dump_header_of(r);
    const char *slug = cli_opt(a, "--slug");
    if (slug == NULL)
        slug = h->slug;
    int status = 0;
    storage_target dst;
    char name[4200];
    job j;
    job_init(&j, c, &dst);
    int64_t want[MAX_TABLES];
    if (h->ntables > MAX_TABLES) {
        status = cli_fail(c, TN_TOOBIG, "%s: more than %d tables", file, MAX_TABLES);
        goto out;
    }
    if (!tenant_slug_valid(slug)) {
        status = cli_fail(c, TN_INVALID, "invalid slug '%s': use 1-63 of a-z, 0-9 and '-', "
                                         "not at the ends", slug);
        goto out;
    }
    if (placement_storage_name(tc, p, slug, name, sizeof(name)) != TN_OK ||
        placement_target_of(tc, pname, name, NULL, &dst) != TN_OK) {
        status = cli_fail(c, TN_TOOBIG, "no storage name for '%s' in placement '%s'", slug,
                          pname);
        goto out;
    }
    char dst_pw[OPS_VERIFIER_MAX];
    ops_role_verifier(&c->cfg->tenancy, &dst, dst_pw);
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
        status = cli_fail(c, rc != TN_OK ? rc : TN_EXISTS, "the storage for '%s' (%s %s): %s",
                          slug, target_kind_name(dst.kind), name,
                          rc != TN_OK ? err : "already exists: it is not overwritten");
        goto out;
    }
    /* The registry first: it reserves the slug and the domains (a conflict stops the import
     * before any storage is made), in state provisioning (the host answers 503). */
    const char *doms[64];
    int nd = 0;
    for (int pass = 0; pass < 2 && !no_domains; pass++)   /* the primary one first */
        for (int i = 0; i < h->ndomains && nd < 64; i++)
            if (h->domains[i].primary == (pass == 0))
                doms[nd++] = h->domains[i].domain;
    registry_new n = {.slug = slug, .name = h->name, .placement = pname, .storage = name,
                      .state = TENANT_PROVISIONING, .max_workers = h->max_workers,
                      .settings = h->settings, .domains = doms, .ndomains = nd};
    rc = registry_create(c->reg, &n, NULL, err, sizeof(err));
    if (rc != TN_OK) {
        status = cli_fail(c, rc, "%s", err);
        goto out;
    }
    catch_signals(true);
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
        snprintf(j.err, sizeof(j.err), "interrupted (signal %d)", (int)interrupted);
        rc = TN_TIMEOUT;
    }
    if (rc == TN_OK && h->migration_version != NULL && h->migration_version[0] != '\0') {
        stepf(&j, "recording the migration version");
        rc = registry_set_migration(c->reg, slug, h->migration_version, "", j.err,
                                    sizeof(j.err));
    }
    if (rc == TN_OK) {
        stepf(&j, "activating the tenant");
        rc = registry_set_state_if(c->reg, slug, BIT(TENANT_PROVISIONING), TENANT_ACTIVE, NULL,
                                   j.err, sizeof(j.err));
    }
    catch_signals(false);
    if (rc != TN_OK) {
        target_abort(&j);
        char perr[512];
        int prc = registry_purge(c->reg, slug, perr, sizeof(perr));
        status = cli_fail(c, rc, "import of '%s' failed while %s: %s%s%s%s", slug, j.step,
                          j.err, j.abort_err,
                          prc == TN_OK ? "; nothing was kept" : "; and its registry entry could "
                          "not be removed: ", prc == TN_OK ? "" : perr);
        goto out;
    }
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"slug\":");
        buf_json_str(&c->out, slug);
        buf_puts(&c->out, ",\"placement\":");
        buf_json_str(&c->out, pname);
        buf_puts(&c->out, ",\"storage\":");
        buf_json_str(&c->out, name);
        buf_puts(&c->out, ",\"migration_version\":");
        buf_json_str(&c->out, h->migration_version ? h->migration_version : "");
        report(&j);
        buf_putc(&c->out, '}');
    } else {
        printf("imported '%s' into %s (%s %s); it is active\n", slug, pname,
               dst.kind == TARGET_SQLITE ? "file" : target_kind_name(dst.kind), name);
        report(&j);
    }
out:
    job_free(&j);
    dump_close(r);
    if (f != stdin)
        fclose(f);
    return status;
}
