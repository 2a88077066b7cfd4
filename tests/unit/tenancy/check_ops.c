/*
 * check_ops.c — tenancy/ops, the tenant operations, over real SQLite storage in a temporary
 * folder: create (single and bulk), migrate with its progress events (a failing migration
 * rolls back that tenant only and names it), state changes, delete and restore, domains,
 * settings, export and import, purge, check, what a move refuses before it starts, and
 * `tenancy run` (a command per tenant over real files; its tail buffer, resume file and
 * conninfo as pure functions). Its
 * own program (tests/unit/check_ops): no PostgreSQL needed, so a move that copies (between
 * a SQLite and a PostgreSQL placement) is tests/integration/lifecycle.sh's.
 */
#include "core/first.h"
#include "core/conf.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/lookup.h"
#include "tenancy/ops.h"
#include "tests/unit/check_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OK(expr)                                                                               \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        ck_assert_msg(rc_ == TN_OK, "%s: %s: %s", #expr, tn_rc_str(rc_), err);                 \
    } while (0)

static char dir[256];
static arena *A;
static tenancy_config TC;
static ops_env E;
static char err[2048];

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A tenancy configuration of the temporary folder, a registry made there, a migration. */
static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/check_ops.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[300];
    snprintf(sub, sizeof(sub), "%s/migrations", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    write_file("migrations/0001_notes.sql", "CREATE TABLE notes (id INTEGER PRIMARY KEY, t TEXT);\n");
    A = arena_create(4096);
    memset(&TC, 0, sizeof(TC));
    char text[1024];
    snprintf(text, sizeof(text), "state_dir = %s\nstorage.migrations = migrations\n"
                                 "storage.delete_grace = 1h\n", dir);
    conf_error ce;
    ck_assert_int_eq(conf_parse_text(tenancy_config_table, &TC, "test.conf", text, A,
                                     tenancy_config_placement, &ce), TN_OK);
    OK(tenancy_config_finish(&TC, A, err, sizeof(err)));
    char conf[300];
    snprintf(conf, sizeof(conf), "%s/tenancyd.conf", dir);
    memset(&E, 0, sizeof(E));
    E.tc = &TC;
    E.conf_path = arena_strdup(A, conf);   /* storage.migrations is taken from its folder */
    OK(registry_open(TC.registry_uri, TC.gen_path, &E.reg, err, sizeof(err)));
    OK(registry_init(E.reg, err, sizeof(err)));
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL) {
        unlink(path);
        return;
    }
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        remove_tree(p);
    }
    closedir(d);
    rmdir(path);
}

static void teardown(void)
{
    registry_close(E.reg);
    E.reg = NULL;
    arena_destroy(A);
    remove_tree(dir);
}

static ops_plan *plan(void)
{
    ops_create_opts o = {NULL, false, false, TENANT_ACTIVE};
    ops_plan *p = NULL;
    OK(ops_create_prepare(&E, &o, &p, err, sizeof(err)));
    return p;
}

static void create(const ops_plan *p, const char *slug, const char *domain)
{
    const char *domains[] = {domain};
    registry_new n = {.slug = slug, .name = slug, .state = TENANT_ACTIVE, .domains = domains,
                      .ndomains = domain != NULL ? 1 : 0, .settings = "{}"};
    ops_created out;
    OK(ops_create(&E, p, &n, &out, err, sizeof(err)));
    ck_assert_str_eq(out.mr.to, "0001");
    ck_assert_int_eq(out.mr.applied, 1);
    ck_assert_str_eq(out.kind, "sqlite");
}

static tenant_rec *fetch(const char *slug)
{
    tenant_rec *t = NULL;
    ck_assert_int_eq(registry_fetch(E.reg, LK_SLUG, slug, &t), TN_OK);
    return t;
}

START_TEST(test_create)
{
    ops_plan *p = plan();
    create(p, "alpha", "alpha.example.com");
    tenant_rec *t = fetch("alpha");
    ck_assert_int_eq(t->state, TENANT_ACTIVE);
    struct stat st;
    ck_assert_int_eq(stat(t->storage, &st), 0);   /* its SQLite file */
    free(t);
    /* twice: refused, and the first one is left alone */
    registry_new n = {.slug = "alpha", .name = "x", .state = TENANT_ACTIVE, .settings = "{}"};
    ops_created out;
    ck_assert_int_eq(ops_create(&E, p, &n, &out, err, sizeof(err)), TN_EXISTS);
    t = fetch("alpha");
    ck_assert_str_eq(t->name, "alpha");
    free(t);
    ops_plan_free(p);
    /* a placement this host does not have: refused before anything is made */
    ops_create_opts o = {"nowhere", false, false, TENANT_ACTIVE};
    ck_assert_int_eq(ops_create_prepare(&E, &o, &p, err, sizeof(err)), TN_NOTFOUND);
    ck_assert(strstr(err, "nowhere") != NULL);
}
END_TEST

/* What the progress callback saw. */
typedef struct seen {
    int ticks, finals, tenants, last_done, total, failed;
    char failed_slug[64];
} seen;

static void count_progress(void *ctx, const ops_progress *p)
{
    seen *s = ctx;
    ck_assert_int_ge(p->done, s->last_done);   /* never backwards */
    s->last_done = p->done;
    s->total = p->total;
    s->failed = p->failed;
    if (p->final)
        s->finals++;
    else if (p->slug == NULL)
        s->ticks++;
    else {
        s->tenants++;
        if (strcmp(p->outcome, "failed") == 0)
            snprintf(s->failed_slug, sizeof(s->failed_slug), "%s", p->slug);
    }
}

START_TEST(test_create_bulk)
{
    ops_plan *p = plan();
    ops_bulk_item v[4];
    memset(v, 0, sizeof(v));
    const char *slugs[] = {"b1", "b2", "b1", "Bad Slug"};
    for (int i = 0; i < 4; i++) {
        v[i].line = i + 1;
        v[i].slug = slugs[i];
        v[i].name = slugs[i];
    }
    registry_new tpl = {.state = TENANT_ACTIVE, .settings = "{}"};
    seen s;
    memset(&s, 0, sizeof(s));
    E.progress = count_progress;
    E.progress_ctx = &s;
    ops_bulk_report rep;
    OK(ops_create_bulk(&E, p, &tpl, v, 4, 2, &rep, err, sizeof(err)));
    E.progress = NULL;
    ck_assert_ptr_nonnull(E.reg);   /* reopened for the flush */
    ck_assert_int_eq(rep.flush_rc, TN_OK);
    ck_assert_int_eq(v[0].status, OPS_B_CREATED);
    ck_assert_int_eq(v[1].status, OPS_B_CREATED);
    ck_assert_int_eq(v[2].status, OPS_B_FAILED);   /* the second b1: names the first line */
    ck_assert_int_eq(v[2].rc, TN_EXISTS);
    ck_assert(strstr(v[2].error, "line 1") != NULL);
    ck_assert_int_eq(v[3].status, OPS_B_FAILED);   /* the registry refuses the slug */
    ck_assert_int_eq(rep.count[OPS_B_CREATED], 2);
    ck_assert_int_eq(rep.count[OPS_B_FAILED], 2);
    ck_assert_int_eq(s.tenants, 3);   /* the tasks: the duplicate never ran */
    ck_assert_int_eq(s.finals, 1);
    ck_assert_int_eq(s.total, 3);
    ck_assert_str_eq(s.failed_slug, "Bad Slug");
    ck_assert_str_eq(v[0].version, "0001");
    for (int i = 0; i < 4; i++)
        ops_bulk_item_clear(&v[i]);
    ops_plan_free(p);
}
END_TEST

/* A table in gamma's storage that the next migration also makes: it fails there only. */
static void sabotage(const char *slug)
{
    tenant_rec *t = fetch(slug);
    char uri[1200];
    snprintf(uri, sizeof(uri), "sqlite:%s", t->storage);
    free(t);
    tn_db *db = NULL;
    OK(db_open(uri, NULL, &db, err, sizeof(err)));
    OK(tn_db_exec(db, "CREATE TABLE tags (id INTEGER)", 0, NULL));
    db_close(db);
}

typedef struct by_version {
    int64_t at_0001, failing_0001, at_0002, failing_0002;
} by_version;

static int version_row(void *ctx, const char *version, int64_t tenants, int64_t failing)
{
    by_version *v = ctx;
    if (strcmp(version, "0001") == 0) {
        v->at_0001 += tenants;
        v->failing_0001 += failing;
    } else if (strcmp(version, "0002") == 0) {
        v->at_0002 += tenants;
        v->failing_0002 += failing;
    }
    return TN_OK;
}

START_TEST(test_migrate)
{
    ops_plan *p = plan();
    create(p, "alpha", NULL);
    create(p, "beta", NULL);
    create(p, "gamma", NULL);
    ops_plan_free(p);
    write_file("migrations/0002_tags.sql", "CREATE TABLE tags (id INTEGER PRIMARY KEY, n TEXT);\n"
                                          "ALTER TABLE notes ADD COLUMN tag INTEGER;\n");
    sabotage("gamma");

    seen s;
    memset(&s, 0, sizeof(s));
    E.progress = count_progress;
    E.progress_ctx = &s;
    ops_migrate_opts o = {.all = true, .jobs = 2};
    ops_migrate_report *r = NULL;
    OK(ops_migrate(&E, &o, &r, err, sizeof(err)));
    E.progress = NULL;
    ck_assert_ptr_nonnull(E.reg);
    ck_assert_int_eq(r->n, 3);
    ck_assert_str_eq(r->latest, "0002");
    ck_assert_int_eq(r->count[OPS_M_MIGRATED], 2);
    ck_assert_int_eq(r->count[OPS_M_FAILED], 1);
    ck_assert_ptr_null(r->stopped);
    for (int i = 0; i < r->n; i++) {
        const ops_migrated *m = &r->v[i];
        if (strcmp(m->slug, "gamma") == 0) {
            ck_assert_int_eq(m->status, OPS_M_FAILED);
            ck_assert_msg(strstr(m->error, "0002_tags.sql") != NULL, "%s", m->error);
            ck_assert_str_eq(m->to, "0001");   /* its file rolled back whole */
        } else {
            ck_assert_int_eq(m->status, OPS_M_MIGRATED);
            ck_assert_str_eq(m->to, "0002");
        }
    }
    ops_migrate_report_free(r);
    /* progress: one event per tenant, the failed one named, one final event */
    ck_assert_int_eq(s.tenants, 3);
    ck_assert_int_eq(s.total, 3);
    ck_assert_int_eq(s.failed, 1);
    ck_assert_int_eq(s.finals, 1);
    ck_assert_str_eq(s.failed_slug, "gamma");
    /* the registry's copies: gamma keeps 0001 with its error, the others are at 0002 */
    by_version v;
    memset(&v, 0, sizeof(v));
    char latest[64];
    OK(ops_migrate_status(&E, latest, sizeof(latest), version_row, &v, err, sizeof(err)));
    ck_assert_int_eq(v.at_0001, 1);
    ck_assert_int_eq(v.failing_0001, 1);
    ck_assert_int_eq(v.at_0002, 2);
    ck_assert_int_eq(v.failing_0002, 0);

    /* again: gamma still fails, the others are current */
    o = (ops_migrate_opts){.slugs = (const char *[]){"alpha", "gamma", "alpha"}, .nslugs = 3};
    OK(ops_migrate(&E, &o, &r, err, sizeof(err)));
    ck_assert_int_eq(r->n, 2);   /* alpha taken once */
    ck_assert_int_eq(r->count[OPS_M_CURRENT], 1);
    ck_assert_int_eq(r->count[OPS_M_FAILED], 1);
    ops_migrate_report_free(r);
    /* a tenant that is not there: refused before anything runs */
    o = (ops_migrate_opts){.slugs = (const char *[]){"nobody"}, .nslugs = 1};
    ck_assert_int_eq(ops_migrate(&E, &o, &r, err, sizeof(err)), TN_NOTFOUND);
    ck_assert_ptr_null(r);
    ck_assert_str_eq(err, "no tenant 'nobody'");
}
END_TEST

typedef struct status_seen {
    int rows;
    int64_t tenants, failing;
} status_seen;

static int status_row(void *ctx, const char *version, int64_t tenants, int64_t failing)
{
    (void)version;
    status_seen *s = ctx;
    s->rows++;
    s->tenants += tenants;
    s->failing += failing;
    return TN_OK;
}

START_TEST(test_migrate_status)
{
    ops_plan *p = plan();
    create(p, "alpha", NULL);
    create(p, "beta", NULL);
    ops_plan_free(p);
    status_seen s;
    memset(&s, 0, sizeof(s));
    char latest[64];
    OK(ops_migrate_status(&E, latest, sizeof(latest), status_row, &s, err, sizeof(err)));
    ck_assert_str_eq(latest, "0001");
    ck_assert_int_eq(s.rows, 1);
    ck_assert_int_eq(s.tenants, 2);
    ck_assert_int_eq(s.failing, 0);
}
END_TEST

START_TEST(test_state_and_restore)
{
    ops_plan *p = plan();
    create(p, "alpha", NULL);
    ops_plan_free(p);
    OK(ops_set_state(&E, "alpha", TENANT_SUSPENDED, err, sizeof(err)));
    tenant_rec *t = fetch("alpha");
    ck_assert_int_eq(t->state, TENANT_SUSPENDED);
    free(t);
    OK(ops_set_state(&E, "alpha", TENANT_DELETING, err, sizeof(err)));
    /* deleted: only a restore brings it back */
    ck_assert_int_eq(ops_set_state(&E, "alpha", TENANT_ACTIVE, err, sizeof(err)), TN_BUSY);
    ck_assert_str_eq(err, "tenant 'alpha' is deleted: 'tenancy tenant restore alpha' brings it "
                          "back");
    ck_assert_int_eq(ops_set_state(&E, "alpha", TENANT_DELETING, err, sizeof(err)), TN_BUSY);
    ck_assert_str_eq(err, "tenant 'alpha' is already deleted");
    OK(ops_restore(&E, "alpha", err, sizeof(err)));
    t = fetch("alpha");
    ck_assert_int_eq(t->state, TENANT_ACTIVE);
    free(t);
    ck_assert_int_eq(ops_set_state(&E, "nobody", TENANT_ACTIVE, err, sizeof(err)),
                     TN_NOTFOUND);
    /* the grace period over: restore refused, and the message says when it ended */
    OK(ops_set_state(&E, "alpha", TENANT_DELETING, err, sizeof(err)));
    TC.delete_grace_ms = 0;
    sleep(1);
    ck_assert_int_eq(ops_restore(&E, "alpha", err, sizeof(err)), TN_TIMEOUT);
    ck_assert_msg(strstr(err, "grace period of tenant 'alpha' ended") != NULL, "%s", err);
}
END_TEST

START_TEST(test_domains_settings)
{
    ops_plan *p = plan();
    create(p, "alpha", "a.example.com");
    create(p, "beta", "b.example.com");
    ops_plan_free(p);
    OK(ops_domain_add(&E, "alpha", "A2.Example.com", true, err, sizeof(err)));
    ck_assert_int_eq(ops_domain_add(&E, "beta", "a2.example.com", false, err, sizeof(err)),
                     TN_EXISTS);
    /* the panel's remove names the tenant: another tenant's domain is refused */
    ck_assert_int_eq(ops_domain_remove(&E, "beta", "a2.example.com", err, sizeof(err)),
                     TN_NOTFOUND);
    ck_assert_str_eq(err, "'a2.example.com' is not a domain of 'beta'");
    OK(ops_domain_remove(&E, "alpha", "A2.EXAMPLE.COM", err, sizeof(err)));
    OK(ops_domain_remove(&E, NULL, "b.example.com", err, sizeof(err)));
    ck_assert_int_eq(ops_domain_remove(&E, NULL, "b.example.com", err, sizeof(err)),
                     TN_NOTFOUND);
    OK(ops_setting_set(&E, "alpha", "theme", "dark", err, sizeof(err)));
    tenant_rec *t = fetch("alpha");
    ck_assert_str_eq(tenant_setting_get(t, "theme"), "dark");
    free(t);
    OK(ops_setting_set(&E, "alpha", "theme", NULL, err, sizeof(err)));
    t = fetch("alpha");
    ck_assert_ptr_null(tenant_setting_get(t, "theme"));
    free(t);
    OK(ops_set_max_workers(&E, "alpha", 3, err, sizeof(err)));
    t = fetch("alpha");
    ck_assert_int_eq(t->max_workers, 3);
    free(t);
}
END_TEST


/* A statement on a tenant's own SQLite storage. */
static void on_storage(const char *slug, const char *sql)
{
    tenant_rec *t = fetch(slug);
    char uri[1200];
    snprintf(uri, sizeof(uri), "sqlite:%s", t->storage);
    free(t);
    tn_db *db = NULL;
    OK(db_open(uri, NULL, &db, err, sizeof(err)));
    OK(tn_db_exec(db, sql, 0, NULL));
    db_close(db);
}

static int64_t count_notes(const char *slug)
{
    tenant_rec *t = fetch(slug);
    char uri[1200], v[32] = "";
    snprintf(uri, sizeof(uri), "sqlite:%s", t->storage);
    free(t);
    tn_db *db = NULL;
    OK(db_open(uri, NULL, &db, err, sizeof(err)));
    db_query_value(db, v, sizeof(v), "SELECT count(*) FROM notes", 0, NULL);
    db_close(db);
    return atoll(v);
}

typedef struct tables_seen {
    int notes, tables_done;
} tables_seen;

static void count_tables(void *ctx, const ops_progress *p)
{
    tables_seen *s = ctx;
    if (p->table != NULL && p->table_done)
        s->tables_done++;
    if (p->note != NULL)
        s->notes++;
}

START_TEST(test_export_import)
{
    ops_plan *p = plan();
    create(p, "alpha", "alpha.example.com");
    ops_plan_free(p);
    on_storage("alpha", "INSERT INTO notes (t) VALUES ('one'), ('two'), ('three')");
    OK(ops_setting_set(&E, "alpha", "theme", "dark", err, sizeof(err)));
    char file[400];
    snprintf(file, sizeof(file), "%s/alpha.dump", dir);
    tables_seen s = {0};
    E.progress = count_tables;
    E.progress_ctx = &s;
    ops_exported x;
    OK(ops_export(&E, "alpha", file, NULL, &x, err, sizeof(err)));
    ck_assert_int_eq(x.rows, 4);   /* three notes and the version table's row */
    ck_assert_str_eq(x.version, "0001");
    ck_assert_int_eq(s.tables_done, x.tables);
    ck_assert_int_eq(ops_export(&E, "nobody", file, NULL, &x, err, sizeof(err)), TN_NOTFOUND);

    /* the dump as another tenant; its domains would clash, so without them */
    FILE *f = fopen(file, "r");
    ck_assert_ptr_nonnull(f);
    ops_import_opts o = {"alpha2", NULL, true};
    ops_imported in;
    memset(&s, 0, sizeof(s));
    OK(ops_import(&E, f, file, &o, &in, err, sizeof(err)));
    fclose(f);
    E.progress = NULL;
    ck_assert_str_eq(in.slug, "alpha2");
    ck_assert_str_eq(in.version, "0001");
    ck_assert(in.copy.migrations);   /* its tables made by the app's migrations */
    ck_assert_int_eq(in.copy.rows, 4);
    ck_assert_int_eq(s.tables_done, in.copy.ntables);
    ops_copy_free(&in.copy);
    tenant_rec *t = fetch("alpha2");
    ck_assert_int_eq(t->state, TENANT_ACTIVE);
    ck_assert_str_eq(tenant_setting_get(t, "theme"), "dark");
    free(t);
    ck_assert_int_eq(count_notes("alpha2"), 3);

    /* again: the slug is taken, nothing is made or changed */
    f = fopen(file, "r");
    ck_assert_int_eq(ops_import(&E, f, file, &o, &in, err, sizeof(err)), TN_EXISTS);
    fclose(f);
    ck_assert_int_eq(count_notes("alpha2"), 3);
    /* with its domains, as itself: the registry refuses the slug before any storage */
    f = fopen(file, "r");
    o = (ops_import_opts){NULL, NULL, false};
    ck_assert_int_eq(ops_import(&E, f, file, &o, &in, err, sizeof(err)), TN_EXISTS);
    fclose(f);
}
END_TEST

START_TEST(test_move_refused)
{
    ops_plan *p = plan();
    create(p, "alpha", NULL);
    ops_plan_free(p);
    ops_move_opts o = {.to = "sqlite"};
    ops_moved m;
    ck_assert_int_eq(ops_move(&E, "alpha", &o, &m, err, sizeof(err)), TN_INVALID);
    ck_assert_str_eq(err, "tenant 'alpha' is already in placement 'sqlite'");
    o.to = "elsewhere";
    ck_assert_int_eq(ops_move(&E, "alpha", &o, &m, err, sizeof(err)), TN_NOTFOUND);
    ck_assert_int_eq(ops_move(&E, "nobody", &o, &m, err, sizeof(err)), TN_NOTFOUND);
    tenant_rec *t = fetch("alpha");
    ck_assert_int_eq(t->state, TENANT_ACTIVE);   /* nothing changed */
    free(t);
}
END_TEST

typedef struct purge_seen {
    int ok, failed;
    char error[400];
} purge_seen;

static void count_purged(void *ctx, const ops_purged *p)
{
    purge_seen *s = ctx;
    if (p->error != NULL) {
        s->failed++;
        snprintf(s->error, sizeof(s->error), "%s", p->error);
    } else {
        s->ok++;
    }
}

START_TEST(test_delete_purge)
{
    ops_plan *p = plan();
    create(p, "alpha", "alpha.example.com");
    create(p, "beta", NULL);
    ops_plan_free(p);
    tenant_rec *t = fetch("alpha");
    char file[4200];
    snprintf(file, sizeof(file), "%s", t->storage);
    free(t);
    OK(ops_set_state(&E, "alpha", TENANT_DELETING, err, sizeof(err)));
    /* within the grace period: only with `now` */
    purge_seen s = {0};
    const char *slugs[] = {"alpha", "beta"};
    int ok = 0, failed = 0;
    OK(ops_purge(&E, slugs, 1, false, false, count_purged, &s, &ok, &failed));
    ck_assert_int_eq(failed, 1);
    ck_assert_msg(strstr(s.error, "grace period ends") != NULL, "%s", s.error);
    memset(&s, 0, sizeof(s));
    OK(ops_purge(&E, slugs, 2, false, true, count_purged, &s, &ok, &failed));
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(failed, 1);   /* beta is not deleted */
    ck_assert_msg(strstr(s.error, "not deleted") != NULL, "%s", s.error);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), -1);   /* its storage dropped */
    tenant_rec *gone = NULL;
    ck_assert_int_eq(registry_fetch(E.reg, LK_SLUG, "alpha", &gone), TN_NOTFOUND);
    /* its domain and slug are free again */
    p = plan();
    create(p, "alpha", "alpha.example.com");
    ops_plan_free(p);
}
END_TEST

typedef struct problems_seen {
    int n, orphan, missing;
} problems_seen;

static void count_problem(void *ctx, const ops_problem *p)
{
    problems_seen *s = ctx;
    s->n++;
    s->orphan += strcmp(p->kind, "orphan") == 0;
    s->missing += strcmp(p->kind, "missing") == 0;
}

START_TEST(test_check)
{
    ops_plan *p = plan();
    create(p, "alpha", NULL);
    create(p, "beta", NULL);
    ops_plan_free(p);
    problems_seen s = {0};
    ops_checked r;
    OK(ops_check(&E, false, false, count_problem, &s, &r, err, sizeof(err)));
    ck_assert_int_eq(r.tenants, 2);
    ck_assert_int_eq(r.problems, 0);
    /* a file nobody owns, and a tenant whose file is gone */
    write_file("tenants/stray.db", "");
    tenant_rec *t = fetch("beta");
    ck_assert_int_eq(unlink(t->storage), 0);
    free(t);
    memset(&s, 0, sizeof(s));
    OK(ops_check(&E, false, false, count_problem, &s, &r, err, sizeof(err)));
    ck_assert_int_eq(r.problems, 2);
    ck_assert_int_eq(s.orphan, 1);
    ck_assert_int_eq(s.missing, 1);
}
END_TEST

/* API keys: the expiry forms, a key made (its token shown once, its hash kept), listed,
 * revoked by prefix and by a whole token, another tenant's refused. */
typedef struct keys_seen {
    int n, revoked;
    char prefix[16];
} keys_seen;

static int keys_cb(void *ctx, const registry_key *k)
{
    keys_seen *s = ctx;
    s->n++;
    s->revoked += k->revoked_at != 0;
    snprintf(s->prefix, sizeof(s->prefix), "%s", k->prefix);
    return TN_OK;
}

START_TEST(test_keys)
{
    int64_t at = 0;
    OK(ops_key_expiry("30d", 1000, &at, err, sizeof(err)));
    ck_assert_int_eq(at, 1000 + 30 * 86400);
    OK(ops_key_expiry("2w", 0, &at, err, sizeof(err)));
    ck_assert_int_eq(at, 14 * 86400);
    OK(ops_key_expiry("90m", 0, &at, err, sizeof(err)));
    ck_assert_int_eq(at, 5400);
    OK(ops_key_expiry("2027-01-31", 0, &at, err, sizeof(err)));
    ck_assert_int_eq(at, 1801353600);
    OK(ops_key_expiry("2027-01-31T12:00:00Z", 0, &at, err, sizeof(err)));
    ck_assert_int_eq(at, 1801353600 + 43200);
    const char *bad[] = {"", "0d", "-1d", "30", "30x", "d", "2027-13-01", "2027-01-31T12:00",
                         "tomorrow"};
    for (size_t i = 0; i < TN_ARRAY_LEN(bad); i++)
        ck_assert_int_eq(ops_key_expiry(bad[i], 0, &at, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(ops_key_expiry("2020-01-01", 1801353600, &at, err, sizeof(err)), TN_INVALID);

    ops_plan *p = plan();
    create(p, "acme", NULL);
    create(p, "globex", NULL);
    ops_plan_free(p);
    ops_key_opts o = {.read_only = true, .label = "ci", .expires = "1h"};
    ops_key_made m, m2, g;
    OK(ops_key_create(&E, "acme", &o, &m, err, sizeof(err)));
    ck_assert(key_token_shape(m.token));
    ck_assert(m.read_only);
    ck_assert_int_eq(m.expires_at, m.created_at + 3600);
    ck_assert_int_eq(strncmp(m.token, m.prefix, KEY_PREFIX_LEN), 0);
    ops_key_opts plain = {0};
    OK(ops_key_create(&E, "acme", &plain, &m2, err, sizeof(err)));
    OK(ops_key_create(&E, "globex", &plain, &g, err, sizeof(err)));
    ck_assert_int_eq(ops_key_create(&E, "nobody", &plain, &m2, err, sizeof(err)), TN_NOTFOUND);
    ck_assert_str_eq(m2.token, "");   /* no token given out for a key that was not made */
    ops_key_opts past = {.expires = "2001-01-01"};
    ck_assert_int_eq(ops_key_create(&E, "acme", &past, &m2, err, sizeof(err)), TN_INVALID);

    /* the registry holds the hash, never the token */
    char hash[KEY_HASH_MAX], v[128];
    key_token_hash(m.token, hash);
    const char *hp[] = {hash};
    ck_assert_int_eq(db_query_value(registry_db(E.reg), v, sizeof(v),
                                    "SELECT prefix FROM api_keys WHERE token_hash = $1", 1, hp),
                     TN_OK);
    ck_assert_str_eq(v, m.prefix);

    keys_seen s = {0};
    OK(ops_key_list(&E, "acme", keys_cb, &s, err, sizeof(err)));
    ck_assert_int_eq(s.n, 2);
    memset(&s, 0, sizeof(s));
    OK(ops_key_list(&E, NULL, keys_cb, &s, err, sizeof(err)));
    ck_assert_int_eq(s.n, 3);

    registry_key k;
    bool already = true;
    OK(ops_key_revoke(&E, "acme", m.prefix, &k, &already, err, sizeof(err)));
    ck_assert(!already);
    ck_assert_int_eq(k.id, m.id);
    OK(ops_key_revoke(&E, "acme", m.token, &k, &already, err, sizeof(err)));   /* a token */
    ck_assert(already);
    char gid[24];
    snprintf(gid, sizeof(gid), "%lld", (long long)g.id);
    ck_assert_int_eq(ops_key_revoke(&E, "acme", gid, &k, &already, err, sizeof(err)),
                     TN_NOTFOUND);
    ck_assert_int_eq(ops_key_revoke(&E, "acme", g.prefix, &k, &already, err, sizeof(err)),
                     TN_NOTFOUND);
    ck_assert_int_eq(ops_key_revoke(&E, "acme", "0", &k, &already, err, sizeof(err)),
                     TN_INVALID);
    ck_assert_int_eq(ops_key_revoke(&E, "acme", "tnk_x", &k, &already, err, sizeof(err)),
                     TN_INVALID);
    memset(&s, 0, sizeof(s));
    OK(ops_key_list(&E, NULL, keys_cb, &s, err, sizeof(err)));
    ck_assert_int_eq(s.revoked, 1);
}
END_TEST

/* ---- tenancy run (ops_run.c) ---------------------------------------------------------------- */

START_TEST(test_run_tail)
{
    ops_tail t;
    char out[16];
    ck_assert_int_eq(ops_tail_init(&t, 8), TN_OK);
    ops_tail_add(&t, "abc", 3);
    ck_assert_uint_eq(ops_tail_copy(&t, out), 3);
    ck_assert_int_eq(memcmp(out, "abc", 3), 0);
    ops_tail_add(&t, "defgh", 5);                  /* exactly full */
    ck_assert_uint_eq(ops_tail_copy(&t, out), 8);
    ck_assert_int_eq(memcmp(out, "abcdefgh", 8), 0);
    ops_tail_add(&t, "ij", 2);                     /* wraps: the oldest two go */
    ck_assert_uint_eq(ops_tail_copy(&t, out), 8);
    ck_assert_int_eq(memcmp(out, "cdefghij", 8), 0);
    ops_tail_add(&t, "0123456789xyz", 13);         /* more than it holds at once */
    ck_assert_uint_eq(ops_tail_copy(&t, out), 8);
    ck_assert_int_eq(memcmp(out, "56789xyz", 8), 0);
    ck_assert_int_eq(t.total, 23);
    for (int i = 0; i < 100; i++)                  /* many small writes around the ring */
        ops_tail_add(&t, i % 2 ? "b" : "a", 1);
    ck_assert_uint_eq(ops_tail_copy(&t, out), 8);
    ck_assert_int_eq(memcmp(out, "abababab", 8), 0);
    ops_tail_free(&t);

    /* Cut inside a character: from the next whole one (x, then € in 3 bytes, é in 2). */
    static const char *const s3 = "x\xe2\x82\xac\xc3\xa9";
    ck_assert_int_eq(ops_tail_init(&t, 5), TN_OK);
    ops_tail_add(&t, s3, 6);                       /* the kept 5 start on € */
    ck_assert_uint_eq(ops_tail_copy(&t, out), 5);
    ck_assert_int_eq(memcmp(out, s3 + 1, 5), 0);
    ops_tail_free(&t);
    for (size_t cap = 3; cap <= 4; cap++) {        /* start inside €: from é */
        ck_assert_int_eq(ops_tail_init(&t, cap), TN_OK);
        ops_tail_add(&t, s3, 6);
        ck_assert_uint_eq(ops_tail_copy(&t, out), 2);
        ck_assert_int_eq(memcmp(out, "\xc3\xa9", 2), 0);
        ops_tail_free(&t);
    }
    ck_assert_int_eq(ops_tail_init(&t, 4), TN_OK);
    ops_tail_add(&t, "\xe2\x82\xac", 3);           /* nothing dropped: kept whole */
    ck_assert_uint_eq(ops_tail_copy(&t, out), 3);
    ops_tail_free(&t);
    ck_assert_int_eq(ops_tail_init(&t, 0), TN_OK); /* keeps nothing, counts all */
    ops_tail_add(&t, "abc", 3);
    ck_assert_uint_eq(ops_tail_copy(&t, out), 0);
    ck_assert_int_eq(t.total, 3);
    ops_tail_free(&t);
}
END_TEST

START_TEST(test_run_resume_parse)
{
    const char *argv[] = {"echo $TENANCY_SLUG"}, *other[] = {"echo", "$TENANCY_SLUG"};
    char key[65], key2[65];
    ops_run_key(argv, 1, key);
    ops_run_key(other, 2, key2);
    ck_assert_str_ne(key, key2);   /* words apart: "a b" is not "a" "b" */
    char text[1024];
    int64_t *ids = NULL;
    int n = -1;
    snprintf(text, sizeof(text), "tenancy-run 1 %s\n# echo $TENANCY_SLUG\n"
                                 "ok 12 acme\nfailed 3 beta\nok 7 gamma\nok 12 acme\n"
                                 "timeout 9 delta\nerror 10 eps\nkilled 11 zeta\nok 3 beta\n"
                                 "ok 44 cut-sh", key);
    OK(ops_run_resume_parse(text, strlen(text), key, &ids, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 3);   /* 3, 7, 12: sorted, once each; the cut line not taken */
    ck_assert_int_eq(ids[0], 3);
    ck_assert_int_eq(ids[1], 7);
    ck_assert_int_eq(ids[2], 12);
    free(ids);
    /* Any key when none is given; another command's key refused. */
    OK(ops_run_resume_parse(text, strlen(text), NULL, &ids, &n, err, sizeof(err)));
    free(ids);
    ck_assert_int_eq(ops_run_resume_parse(text, strlen(text), key2, &ids, &n, err, sizeof(err)),
                     TN_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "another command"));
    ck_assert_ptr_null(ids);
    /* Empty: nothing done. A header alone: nothing done. */
    OK(ops_run_resume_parse("", 0, key, &ids, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    snprintf(text, sizeof(text), "tenancy-run 1 %s\n", key);
    OK(ops_run_resume_parse(text, strlen(text), key, &ids, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    /* Not a resume file; a bad line. */
    static const char *const bad[] = {"hello\n", "tenancy-run 1 abc\n", "ok 1 a\n"};
    for (size_t i = 0; i < TN_ARRAY_LEN(bad); i++)
        ck_assert_int_eq(ops_run_resume_parse(bad[i], strlen(bad[i]), NULL, &ids, &n, err,
                                              sizeof(err)), TN_INVALID);
    static const char *const lines[] = {"ok x acme\n", "done 1 acme\n", "ok 1\n", "ok 1 \n",
                                        "ok  1 acme\n"};
    for (size_t i = 0; i < TN_ARRAY_LEN(lines); i++) {
        snprintf(text, sizeof(text), "tenancy-run 1 %s\n%s", key, lines[i]);
        ck_assert_msg(ops_run_resume_parse(text, strlen(text), key, &ids, &n, err,
                                           sizeof(err)) == TN_INVALID, "%s", lines[i]);
        ck_assert_ptr_nonnull(strstr(err, "line 2"));
    }
}
END_TEST

START_TEST(test_run_pg_dsn)
{
    char out[512];
    OK(ops_run_pg_dsn("host='/tmp/x y' dbname='app' user='t_a' password='p\\'w\\\\d'", "t_a",
                      NULL, out, sizeof(out)));
    ck_assert_str_eq(out, "host='/tmp/x y' dbname='app' user='t_a' password='p\\'w\\\\d' "
                          "options='-c search_path=t_a'");
    /* options of the placement's own are kept, ours after them; bare values too */
    OK(ops_run_pg_dsn("options='-c statement_timeout=5s' host = h port=5432", "t_b", "t_b",
                      out, sizeof(out)));
    ck_assert_str_eq(out, "host='h' port='5432' options='-c statement_timeout=5s "
                          "-c search_path=t_b -c role=t_b'");
    OK(ops_run_pg_dsn("dbname='tenant_c' user='tenant_c'", NULL, NULL, out, sizeof(out)));
    ck_assert_str_eq(out, "dbname='tenant_c' user='tenant_c'");
    ck_assert_int_eq(ops_run_pg_dsn("host='unterminated", "s", NULL, out, sizeof(out)),
                     TN_INVALID);
    ck_assert_int_eq(ops_run_pg_dsn("=x", "s", NULL, out, sizeof(out)), TN_INVALID);
    ck_assert_int_eq(ops_run_pg_dsn("host=h", "s", NULL, out, 10), TN_TOOBIG);
}
END_TEST

typedef struct ran_seen {
    int n, ok, failed;
    char out[8][512];
    char slug[8][64];
} ran_seen;

static void ran_cb(void *ctx, const ops_ran *r)
{
    ran_seen *s = ctx;
    if (s->n < 8) {
        snprintf(s->slug[s->n], sizeof(s->slug[0]), "%s", r->slug);
        snprintf(s->out[s->n], sizeof(s->out[0]), "%.*s", (int)r->output_len, r->output);
    }
    s->n++;
    s->ok += r->status == OPS_R_OK;
    s->failed += r->status == OPS_R_FAILED;
}

/* Over real SQLite tenants: each command sees its own tenant, and its file. */
START_TEST(test_run_sqlite)
{
    ops_plan *p = plan();
    create(p, "alpha", NULL);
    create(p, "beta", NULL);
    create(p, "gamma", NULL);
    ops_plan_free(p);
    OK(ops_set_state(&E, "gamma", TENANT_SUSPENDED, err, sizeof(err)));
    OK(ops_setting_set(&E, "beta", "k", "v", err, sizeof(err)));
    const char *argv[] = {"printf '%s|%s|%s|%s' \"$TENANCY_SLUG\" \"$TENANCY_STATE\" "
                          "\"$TENANCY_SETTINGS\" \"$TENANCY_STORAGE\"; "
                          "[ \"$TENANCY_SLUG\" != beta ]"};
    ops_run_opts o = {.argv = argv, .argc = 1, .jobs = 2, .tail = OPS_RUN_TAIL};
    ran_seen s;
    memset(&s, 0, sizeof(s));
    ops_run_report rep;
    OK(ops_run(&E, &o, ran_cb, &s, &rep, err, sizeof(err)));
    ck_assert_int_eq(s.n, 2);   /* the active ones */
    ck_assert_int_eq(rep.count[OPS_R_OK], 1);
    ck_assert_int_eq(rep.count[OPS_R_FAILED], 1);
    ck_assert_ptr_null(rep.stopped);
    for (int i = 0; i < 2; i++) {
        char want[600];
        tenant_rec *t = fetch(s.slug[i]);
        snprintf(want, sizeof(want), "%s|active|%s|%s", t->slug, t->settings_json, t->storage);
        ck_assert_str_eq(s.out[i], want);
        free(t);
    }
    /* --state suspended, a resume file: done once, then skipped */
    char resume[300];
    snprintf(resume, sizeof(resume), "%s/run.state", dir);
    const char *argv2[] = {"true"};
    ops_run_opts o2 = {.argv = argv2, .argc = 1, .states = 1u << TENANT_SUSPENDED,
                       .resume = resume};
    memset(&s, 0, sizeof(s));
    OK(ops_run(&E, &o2, ran_cb, &s, &rep, err, sizeof(err)));
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.slug[0], "gamma");
    memset(&s, 0, sizeof(s));
    OK(ops_run(&E, &o2, ran_cb, &s, &rep, err, sizeof(err)));
    ck_assert_int_eq(s.n, 0);
    ck_assert_int_eq(rep.skipped_done, 1);
    /* refused before anything runs */
    const char *named[] = {"alpha", "nosuch"};
    ops_run_opts o3 = {.argv = argv2, .argc = 1, .slugs = named, .nslugs = 2};
    ck_assert_int_eq(ops_run(&E, &o3, ran_cb, &s, &rep, err, sizeof(err)), TN_NOTFOUND);
    o3.nslugs = 1;
    o3.placement = "nowhere";
    ck_assert_int_eq(ops_run(&E, &o3, ran_cb, &s, &rep, err, sizeof(err)), TN_NOTFOUND);
    ops_run_opts o4 = {.argv = argv2, .argc = 1, .states = 1u << TENANT_DELETING};
    ck_assert_int_eq(ops_run(&E, &o4, ran_cb, &s, &rep, err, sizeof(err)), TN_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("sqlite");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_create);
    tcase_add_test(tc, test_create_bulk);
    tcase_add_test(tc, test_migrate);
    tcase_add_test(tc, test_migrate_status);
    tcase_add_test(tc, test_state_and_restore);
    tcase_add_test(tc, test_domains_settings);
    tcase_add_test(tc, test_export_import);
    tcase_add_test(tc, test_move_refused);
    tcase_add_test(tc, test_delete_purge);
    tcase_add_test(tc, test_check);
    tcase_add_test(tc, test_keys);
    tcase_add_test(tc, test_run_sqlite);
    suite_add_tcase(s, tc);
    TCase *pure = tcase_create("run");
    tcase_add_test(pure, test_run_tail);
    tcase_add_test(pure, test_run_resume_parse);
    tcase_add_test(pure, test_run_pg_dsn);
    suite_add_tcase(s, pure);
    Suite *all[] = {s};
    return run_suites(all, 1);
}
