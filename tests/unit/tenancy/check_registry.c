/*
 * check_registry.c — tenancy/registry.c: one suite of cases run against SQLite (a fresh
 * file and generation file per test) and against a real PostgreSQL (TENANCY_TEST_PG; schema
 * "tenancy" dropped before each test), so both backends are held to the same behaviour.
 *
 * Every case also checks the generation file: each successful change bumps it exactly once,
 * and a refused change leaves it (and the registry) as it was.
 *
 * Owns: these cases. Must not: reach into the registry's tables except to prepare or
 * inspect what the API cannot (the stored settings text).
 */
#include "core/first.h"
#include "tenancy/registry.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/gen.h"
#include "tenancy/lookup.h"

#include <check.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- fixtures ------------------------------------------------------------------------------- */

static char tmpdir[256];
static const char *pg_uri;
static bool backend_pg;
static char uri[512], gen_path[512];
static registry *R;
static char err[512];

void registry_tests_init(const char *dir, const char *pg);
void registry_tests_init(const char *dir, const char *pg)
{
    snprintf(tmpdir, sizeof(tmpdir), "%s", dir);
    pg_uri = pg;
}

#define EXPECT(want, expr)                                                                   \
    do {                                                                                     \
        err[0] = '\0';                                                                       \
        int rc_ = (expr);                                                                    \
        ck_assert_msg(rc_ == (want), "%s = %s, want %s: %s", #expr, tn_rc_str(rc_),          \
                      tn_rc_str(want), err);                                                 \
    } while (0)
#define OK(expr) EXPECT(TN_OK, expr)

/* The generation as another process sees it: the file, mapped read-only. */
static uint64_t gen_now(void)
{
    gen_map *g = NULL;
    char e[256];
    ck_assert_msg(gen_open(gen_path, false, false, &g, e, sizeof(e)) == TN_OK, "gen: %s", e);
    uint64_t v = gen_read(g);
    gen_close(g);
    return v;
}

#define GEN_IS(n) ck_assert_int_eq((int64_t)gen_now(), (int64_t)(n))

static void open_registry(void)
{
    int rc = registry_open(uri, gen_path, &R, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "registry_open: %s: %s", tn_rc_str(rc), err);
}

static void setup_sqlite(void)
{
    static int n;
    backend_pg = false;
    n++;
    snprintf(uri, sizeof(uri), "sqlite:%s/r-%ld-%d.db", tmpdir, (long)getpid(), n);
    snprintf(gen_path, sizeof(gen_path), "%s/g-%ld-%d.gen", tmpdir, (long)getpid(), n);
    open_registry();
    OK(registry_init(R, err, sizeof(err)));
}

static void drop_pg_schema(void)
{
    tn_db *d = NULL;
    char e[512];
    ck_assert_msg(db_open(pg_uri, NULL, &d, e, sizeof(e)) == TN_OK, "db_open: %s", e);
    ck_assert_msg(tn_db_exec(d, "DROP SCHEMA IF EXISTS tenancy CASCADE", 0, NULL) == TN_OK,
                  "drop: %s", tn_db_error(d));
    db_close(d);
}

static void setup_pg(void)
{
    static int n;
    backend_pg = true;
    n++;
    snprintf(uri, sizeof(uri), "%s", pg_uri);
    snprintf(gen_path, sizeof(gen_path), "%s/pg-%ld-%d.gen", tmpdir, (long)getpid(), n);
    drop_pg_schema();
    open_registry();
    OK(registry_init(R, err, sizeof(err)));
}

static void teardown(void)
{
    registry_close(R);
    R = NULL;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static int create(const char *slug, const char *name, const char *settings, int nd, ...)
{
    const char *d[8];
    va_list ap;
    va_start(ap, nd);
    for (int i = 0; i < nd && i < 8; i++)
        d[i] = va_arg(ap, const char *);
    va_end(ap);
    registry_new t = {.slug = slug, .name = name, .state = TENANT_ACTIVE, .settings = settings,
                      .domains = d, .ndomains = nd};
    err[0] = '\0';
    return registry_create(R, &t, NULL, err, sizeof(err));
}

/* The tenant by slug or domain; NULL when not found (anything else fails the test). */
static tenant_rec *fetch(int kind, const char *key)
{
    tenant_rec *t = NULL;
    int rc = registry_fetch(R, kind, key, &t);
    ck_assert_msg(rc == TN_OK || rc == TN_NOTFOUND, "fetch %s: %s", key, tn_rc_str(rc));
    return rc == TN_OK ? t : NULL;
}

static bool exists(int kind, const char *key)
{
    tenant_rec *t = fetch(kind, key);
    free(t);
    return t != NULL;
}

/* The settings text exactly as stored. */
static void stored_settings(const char *slug, char *out, size_t n)
{
    const char *p[] = {slug};
    ck_assert_int_eq(db_query_value(registry_db(R), out, n,
                                    "SELECT settings FROM tenants WHERE slug = $1", 1, p),
                     TN_OK);
}

/* registry_show into a small struct. */
typedef struct shown {
    int calls;
    tenant_rec *t;
    int nd;
    char domains[8][128];
    bool primary[8];
} shown;

static int show_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    shown *s = ctx;
    s->calls++;
    s->t = tenant_rec_dup(t);
    s->nd = nd;
    for (int i = 0; i < nd && i < 8; i++) {
        snprintf(s->domains[i], sizeof(s->domains[i]), "%s", d[i].domain);
        s->primary[i] = d[i].primary;
    }
    return TN_OK;
}

static shown show(const char *slug)
{
    shown s;
    memset(&s, 0, sizeof(s));
    OK(registry_show(R, slug, show_cb, &s));
    ck_assert_int_eq(s.calls, 1);
    return s;
}

/* The primary domain of a tenant ("" when none), and how many domains are primary. */
static const char *primary_of(const char *slug, int *nprimary)
{
    static char p[128];
    shown s = show(slug);
    p[0] = '\0';
    *nprimary = 0;
    for (int i = 0; i < s.nd; i++)
        if (s.primary[i]) {
            snprintf(p, sizeof(p), "%s", s.domains[i]);
            (*nprimary)++;
        }
    free(s.t);
    return p;
}

/* ---- init ----------------------------------------------------------------------------------- */

START_TEST(test_init_twice)
{
    GEN_IS(0);   /* init made the file, and did not count as a change */
    OK(registry_ready(R, err, sizeof(err)));
    ck_assert_int_eq(create("acme", "Acme", NULL, 1, "acme.test"), TN_OK);
    GEN_IS(1);
    OK(registry_init(R, err, sizeof(err)));
    registry_close(R);
    open_registry();
    OK(registry_init(R, err, sizeof(err)));
    OK(registry_ready(R, err, sizeof(err)));
    ck_assert(exists(LK_SLUG, "acme"));
    ck_assert(exists(LK_DOMAIN, "acme.test"));
    GEN_IS(1);
    ck_assert_int_eq((int64_t)registry_generation(R), 1);
}
END_TEST

/* The tables, columns and indexes of a registry as text, "table(col!,col,...)[index,u];..."
 * ('!': the column refuses NULL; a primary key counts as such, as PostgreSQL makes it), from
 * the catalog of its backend. SQLite's own bookkeeping table is not the registry's. */
static void describe(registry *reg, char *out, size_t n)
{
    tn_db *db = registry_db(reg);
    bool pg = strcmp(tn_db_backend(db), "postgres") == 0;
    tn_rows *tables = NULL;
    ck_assert_msg(tn_db_query(db, &tables,
                              pg ? "SELECT table_name FROM information_schema.tables WHERE "
                                   "table_schema = 'tenancy' ORDER BY table_name COLLATE \"C\""
                                 : "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                   "name <> 'sqlite_sequence' ORDER BY name",
                              0, NULL) == TN_OK, "%s", tn_db_error(db));
    char names[16][64];
    int nt = 0;
    while (nt < 16 && tn_rows_next(tables) == TN_OK)
        snprintf(names[nt++], sizeof(names[0]), "%s", tn_rows_get(tables, 0));
    tn_rows_free(tables);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < nt; i++) {
        len += (size_t)snprintf(out + len, n - len, "%s(", names[i]);
        const char *p[] = {names[i]};
        tn_rows *cols = NULL;
        ck_assert_msg(tn_db_query(db, &cols,
                                  pg ? "SELECT column_name, is_nullable = 'NO' FROM "
                                       "information_schema.columns WHERE table_schema = "
                                       "'tenancy' AND table_name = $1 ORDER BY ordinal_position"
                                     : "SELECT name, \"notnull\" OR pk > 0 FROM "
                                       "pragma_table_info($1) ORDER BY cid",
                                  1, p) == TN_OK, "%s", tn_db_error(db));
        for (int c = 0; tn_rows_next(cols) == TN_OK; c++) {
            const char *nn = tn_rows_get(cols, 1);
            bool not_null = nn != NULL && (strcmp(nn, "1") == 0 || strcmp(nn, "t") == 0);
            len += (size_t)snprintf(out + len, n - len, "%s%s%s", c ? "," : "",
                                    tn_rows_get(cols, 0), not_null ? "!" : "");
        }
        tn_rows_free(cols);
        len += (size_t)snprintf(out + len, n - len, ")");
        /* the indexes made by name (a key's own index is named by each backend its way):
         * "[name,u,p]" for unique and partial */
        tn_rows *idx = NULL;
        ck_assert_msg(tn_db_query(db, &idx,
                                  pg ? "SELECT c.relname, i.indisunique, i.indpred IS NOT NULL "
                                       "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                                       "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace "
                                       "s ON s.oid = t.relnamespace WHERE s.nspname = 'tenancy' "
                                       "AND t.relname = $1 AND NOT EXISTS (SELECT 1 FROM "
                                       "pg_constraint k WHERE k.conindid = i.indexrelid) "
                                       "ORDER BY c.relname COLLATE \"C\""
                                     : "SELECT name, \"unique\", partial FROM "
                                       "pragma_index_list($1) WHERE origin = 'c' ORDER BY name",
                                  1, p) == TN_OK, "%s", tn_db_error(db));
        while (tn_rows_next(idx) == TN_OK) {
            const char *u = tn_rows_get(idx, 1), *pa = tn_rows_get(idx, 2);
            len += (size_t)snprintf(out + len, n - len, "[%s%s%s]", tn_rows_get(idx, 0),
                                    strcmp(u, "1") == 0 || strcmp(u, "t") == 0 ? ",u" : "",
                                    strcmp(pa, "1") == 0 || strcmp(pa, "t") == 0 ? ",p" : "");
        }
        tn_rows_free(idx);
        len += (size_t)snprintf(out + len, n - len, ";");
        ck_assert_uint_lt(len, n);
    }
}

/* The one schema text makes the same registry on both backends: the same tables, the same
 * columns in the same order, the same NOT NULLs (run in the PostgreSQL case, with a SQLite
 * registry beside it). The panel's tables are not the registry's: init makes none. */
START_TEST(test_same_schema)
{
    char want[8192], got[8192];
    registry *lite = NULL;
    char lite_uri[600];
    snprintf(lite_uri, sizeof(lite_uri), "sqlite:%s/schema-%ld.db", tmpdir, (long)getpid());
    OK(registry_open(lite_uri, NULL, &lite, err, sizeof(err)));
    OK(registry_init(lite, err, sizeof(err)));
    describe(lite, want, sizeof(want));
    registry_close(lite);
    describe(R, got, sizeof(got));
    ck_assert_str_eq(got, want);
    ck_assert_msg(strstr(want, "domains(domain!,tenant_id!,is_primary!)[domains_tenant];") != NULL, "%s", want);
    ck_assert_msg(strstr(want, "tenants(id!,slug!,name!,state!,") != NULL, "%s", want);
    ck_assert_msg(strstr(want, ",deleted_at)") != NULL, "%s", want);
    ck_assert_msg(strstr(want, "[jobs_unique,u,p]") != NULL, "%s", want);
    ck_assert_msg(strstr(want, "job_queues(tenant_key!,") != NULL, "%s", want);
    ck_assert_msg(strstr(want, "job_schedules(id!,") != NULL, "%s", want);
    ck_assert_msg(strstr(want, "admin_") == NULL, "%s", want);
}
END_TEST

/* PostgreSQL: the registry's schema rides with each of its transactions, not on the server
 * session, which behind PgBouncer in transaction mode is another client's between two of
 * them: a search_path set there (here on the registry's own session) changes nothing. */
START_TEST(test_scope_not_session)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    OK(tn_db_exec(registry_db(R), "CREATE TABLE IF NOT EXISTS public.tenants (slug text)", 0,
                  NULL));
    OK(tn_db_exec(registry_db(R), "SELECT pg_catalog.set_config('search_path', 'public', false)",
                  0, NULL));
    tenant_rec *t = fetch(LK_SLUG, "acme");
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, "Acme");
    free(t);
    ck_assert_int_eq(create("beta", "Beta", NULL, 0), TN_OK);
    t = fetch(LK_SLUG, "beta");
    ck_assert_ptr_nonnull(t);
    free(t);
    char v[16];
    OK(db_query_value(registry_db(R), v, sizeof(v), "SELECT count(*) FROM public.tenants", 0,
                      NULL));
    ck_assert_str_eq(v, "0");
    OK(tn_db_exec(registry_db(R), "DROP TABLE public.tenants", 0, NULL));
}
END_TEST

START_TEST(test_not_initialised)
{
    registry_close(R);
    R = NULL;
    if (backend_pg) {
        drop_pg_schema();
    } else {
        snprintf(uri, sizeof(uri), "sqlite:%s/empty-%ld.db", tmpdir, (long)getpid());
    }
    open_registry();
    EXPECT(TN_NOTFOUND, registry_ready(R, err, sizeof(err)));
    ck_assert_str_eq(err, "the registry is not initialised (run 'tenancy init')");
    OK(registry_init(R, err, sizeof(err)));
    OK(registry_ready(R, err, sizeof(err)));
}
END_TEST

/* ---- create and fetch ------------------------------------------------------------------------ */

START_TEST(test_create_fetch)
{
    const char *doms[] = {"Acme.Example.COM.", "www.acme.test"};
    registry_new n = {.slug = "acme",
                      .name = "Acme Inc.",
                      .state = TENANT_PROVISIONING,
                      .max_workers = 4,
                      .settings = "{\"theme\":\"dark\",\"color\":\"red\"}",
                      .domains = doms,
                      .ndomains = 2};
    int64_t id = 0;
    OK(registry_create(R, &n, &id, err, sizeof(err)));
    ck_assert_int_gt(id, 0);
    GEN_IS(1);

    tenant_rec *t = fetch(LK_SLUG, "acme");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->id, id);
    ck_assert_str_eq(t->slug, "acme");
    ck_assert_str_eq(t->name, "Acme Inc.");
    ck_assert_int_eq(t->state, TENANT_PROVISIONING);
    ck_assert_str_eq(t->placement, "sqlite");
    ck_assert_str_eq(t->storage, "");
    ck_assert_int_eq(t->max_workers, 4);
    ck_assert_int_gt(t->created_at, 1600000000);
    ck_assert_int_eq(t->created_at, t->updated_at);
    ck_assert_int_eq(t->nsettings, 2);
    ck_assert_str_eq(tenant_setting_get(t, "theme"), "dark");
    ck_assert_str_eq(t->settings_json, "{\"color\":\"red\",\"theme\":\"dark\"}");
    free(t);

    /* by domain: stored normalised, looked up as the chain does (normalised) */
    t = fetch(LK_DOMAIN, "acme.example.com");
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->slug, "acme");
    free(t);
    t = fetch(LK_DOMAIN, "www.acme.test");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->id, id);
    free(t);
    ck_assert(!exists(LK_DOMAIN, "Acme.Example.COM."));
    ck_assert(!exists(LK_DOMAIN, "acme"));
    ck_assert(!exists(LK_SLUG, "acme.example.com"));
    ck_assert(!exists(LK_SLUG, "zz"));

    /* defaults: placement, settings, no domains */
    ck_assert_int_eq(create("globex", "Globex", NULL, 0), TN_OK);
    GEN_IS(2);
    t = fetch(LK_SLUG, "globex");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->state, TENANT_ACTIVE);
    ck_assert_int_eq(t->max_workers, 0);
    ck_assert_str_eq(t->settings_json, "{}");
    ck_assert_int_gt(t->id, id);
    free(t);

    /* a registry without a generation file works, and bumps nothing */
    registry *r2 = NULL;
    OK(registry_open(uri, NULL, &r2, err, sizeof(err)));
    registry_new n3 = {.slug = "initech", .name = "Initech", .state = TENANT_ACTIVE};
    OK(registry_create(r2, &n3, NULL, err, sizeof(err)));
    ck_assert_int_eq((int64_t)registry_generation(r2), 0);
    registry_close(r2);
    GEN_IS(2);
    ck_assert(exists(LK_SLUG, "initech"));
}
END_TEST

START_TEST(test_duplicate_slug)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 1, "acme.test"), TN_OK);
    GEN_IS(1);
    ck_assert_int_eq(create("acme", "Other", NULL, 1, "other.test"), TN_EXISTS);
    ck_assert_str_eq(err, "slug 'acme' is taken");
    GEN_IS(1);
    ck_assert(!exists(LK_DOMAIN, "other.test"));
    tenant_rec *t = fetch(LK_SLUG, "acme");
    ck_assert_str_eq(t->name, "Acme");
    free(t);
}
END_TEST

START_TEST(test_domain_taken)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 1, "shared.test"), TN_OK);
    GEN_IS(1);
    /* the second domain is taken: the whole create is refused */
    ck_assert_int_eq(create("globex", "Globex", NULL, 2, "globex.test", "SHARED.test"),
                     TN_EXISTS);
    ck_assert_str_eq(err, "domain 'shared.test' already belongs to 'acme'");
    GEN_IS(1);
    ck_assert(!exists(LK_SLUG, "globex"));
    ck_assert(!exists(LK_DOMAIN, "globex.test"));
    tenant_rec *t = fetch(LK_DOMAIN, "shared.test");
    ck_assert_str_eq(t->slug, "acme");
    free(t);
    /* ...and the slug is still free */
    ck_assert_int_eq(create("globex", "Globex", NULL, 1, "globex.test"), TN_OK);
    GEN_IS(2);

    /* one domain given twice in one create (also after normalising) */
    ck_assert_int_eq(create("initech", "Initech", NULL, 2, "i.test", "I.TEST."), TN_INVALID);
    ck_assert_str_eq(err, "domain 'i.test' is given twice");
    ck_assert(!exists(LK_SLUG, "initech"));
    GEN_IS(2);

    /* registry_domain_add: the same message */
    EXPECT(TN_EXISTS, registry_domain_add(R, "globex", "shared.test", false, err, sizeof(err)));
    ck_assert_str_eq(err, "domain 'shared.test' already belongs to 'acme'");
    EXPECT(TN_EXISTS, registry_domain_add(R, "globex", "shared.test", true, err, sizeof(err)));
    ck_assert_str_eq(err, "domain 'shared.test' already belongs to 'acme'");
    EXPECT(TN_EXISTS, registry_domain_add(R, "acme", "shared.test", false, err, sizeof(err)));
    ck_assert_str_eq(err, "domain 'shared.test' already belongs to 'acme'");
    int np;
    ck_assert_str_eq(primary_of("globex", &np), "globex.test");
    GEN_IS(2);
}
END_TEST

START_TEST(test_invalid)
{
    char s64[65];
    memset(s64, 'a', 64);
    s64[64] = '\0';
    const char *slugs[] = {"A B", "", "-a", "a-", "Acme", "a_b", "a.b", s64};
    for (size_t i = 0; i < TN_ARRAY_LEN(slugs); i++) {
        ck_assert_int_eq(create(slugs[i], "X", NULL, 0), TN_INVALID);
        ck_assert_ptr_nonnull(strstr(err, "invalid slug"));
    }
    ck_assert_int_eq(create("A B", "X", NULL, 0), TN_INVALID);
    ck_assert_str_eq(err, "invalid slug 'A B': use 1-63 of a-z, 0-9 and '-', not at the ends");
    ck_assert_int_eq(create(NULL, "X", NULL, 0), TN_INVALID);

    const char *domains[] = {"bad domain", "1.2.3.4", "acme.test:80", "[::1]", "", ".x",
                             "a..b", "x_y.test", "0x7f.1"};
    for (size_t i = 0; i < TN_ARRAY_LEN(domains); i++) {
        ck_assert_int_eq(create("acme", "Acme", NULL, 2, "ok.test", domains[i]), TN_INVALID);
        char want[300];
        snprintf(want, sizeof(want), "invalid domain '%s'", domains[i]);
        ck_assert_str_eq(err, want);
    }
    /* names */
    ck_assert_int_eq(create("acme", "", NULL, 0), TN_INVALID);
    ck_assert_int_eq(create("acme", NULL, NULL, 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "two\nlines", NULL, 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "esc\x1b[2J", NULL, 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "bad \xff utf-8", NULL, 0), TN_INVALID);
    char longname[202];
    memset(longname, 'n', 201);
    longname[201] = '\0';
    ck_assert_int_eq(create("acme", longname, NULL, 0), TN_INVALID);
    longname[200] = '\0';
    /* settings */
    ck_assert_int_eq(create("acme", "Acme", "[1]", 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "Acme", "{\"a\":{\"b\":1}}", 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "Acme", "{\"\":\"x\"}", 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "Acme", "{\"k\\n\":\"x\"}", 0), TN_INVALID);
    ck_assert_int_eq(create("acme", "Acme", "{\"k\":\"\xff\"}", 0), TN_INVALID);
    /* states and limits */
    registry_new n = {.slug = "acme", .name = "Acme", .state = TENANT_SUSPENDED};
    EXPECT(TN_INVALID, registry_create(R, &n, NULL, err, sizeof(err)));
    n.state = 99;
    EXPECT(TN_INVALID, registry_create(R, &n, NULL, err, sizeof(err)));
    n.state = TENANT_ACTIVE;
    n.max_workers = -1;
    EXPECT(TN_INVALID, registry_create(R, &n, NULL, err, sizeof(err)));
    n.max_workers = 100001;
    EXPECT(TN_INVALID, registry_create(R, &n, NULL, err, sizeof(err)));
    ck_assert(!exists(LK_SLUG, "acme"));
    ck_assert(!exists(LK_DOMAIN, "ok.test"));
    GEN_IS(0);
    /* the longest name is fine */
    ck_assert_int_eq(create("acme", longname, NULL, 0), TN_OK);
    GEN_IS(1);

    /* invalid input to the other changes */
    EXPECT(TN_INVALID, registry_domain_add(R, "acme", "a b", false, err, sizeof(err)));
    ck_assert_str_eq(err, "invalid domain 'a b'");
    EXPECT(TN_INVALID, registry_domain_add(R, "acme", "acme.test:8080", false, err, sizeof(err)));
    EXPECT(TN_INVALID, registry_domain_remove(R, "a b", err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_state(R, "acme", -1, err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_state(R, "acme", TENANT_NSTATES, err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_max_workers(R, "acme", -1, err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_setting(R, "acme", "", "x", err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_setting(R, "acme", NULL, "x", err, sizeof(err)));
    GEN_IS(1);
}
END_TEST

/* ---- changes -------------------------------------------------------------------------------- */

START_TEST(test_states)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 1, "acme.test"), TN_OK);
    uint64_t g = 1;
    GEN_IS(g);
    for (int st = 0; st < TENANT_NSTATES; st++) {
        OK(registry_set_state(R, "acme", st, err, sizeof(err)));
        GEN_IS(++g);
        tenant_rec *t = fetch(LK_DOMAIN, "acme.test");
        ck_assert_int_eq(t->state, st);
        free(t);
    }
    /* deleting keeps the row (and its domains) until purged */
    OK(registry_set_state(R, "acme", TENANT_DELETING, err, sizeof(err)));
    GEN_IS(++g);
    ck_assert(exists(LK_DOMAIN, "acme.test"));
    char v[32];
    const char *p[] = {"acme"};
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v),
                                    "SELECT deleted_at FROM tenants WHERE slug = $1", 1, p),
                     TN_OK);
    ck_assert_int_gt(atoll(v), 0);
    /* ...and a restore clears deleted_at */
    OK(registry_set_state(R, "acme", TENANT_ACTIVE, err, sizeof(err)));
    GEN_IS(++g);
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v),
                                    "SELECT deleted_at FROM tenants WHERE slug = $1", 1, p),
                     TN_NOTFOUND);

    EXPECT(TN_NOTFOUND, registry_set_state(R, "zz", TENANT_ACTIVE, err, sizeof(err)));
    ck_assert_str_eq(err, "no tenant 'zz'");
    EXPECT(TN_NOTFOUND, registry_set_max_workers(R, "zz", 1, err, sizeof(err)));
    ck_assert_str_eq(err, "no tenant 'zz'");
    EXPECT(TN_NOTFOUND, registry_set_storage(R, "zz", "sqlite", "x.db", err, sizeof(err)));
    ck_assert_str_eq(err, "no tenant 'zz'");
    GEN_IS(g);

    OK(registry_set_storage(R, "acme", "pg-main", "tenant_acme", err, sizeof(err)));
    GEN_IS(++g);
    tenant_rec *t = fetch(LK_SLUG, "acme");
    ck_assert_str_eq(t->placement, "pg-main");
    ck_assert_str_eq(t->storage, "tenant_acme");
    free(t);
}
END_TEST

START_TEST(test_max_workers)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    OK(registry_set_max_workers(R, "acme", 7, err, sizeof(err)));
    GEN_IS(2);
    tenant_rec *t = fetch(LK_SLUG, "acme");
    ck_assert_int_eq(t->max_workers, 7);
    free(t);
    OK(registry_set_max_workers(R, "acme", 0, err, sizeof(err)));
    OK(registry_set_max_workers(R, "acme", 100000, err, sizeof(err)));
    GEN_IS(4);
    EXPECT(TN_INVALID, registry_set_max_workers(R, "acme", 100001, err, sizeof(err)));
    ck_assert_str_eq(err, "max_workers must be between 0 and 100000");
    EXPECT(TN_INVALID, registry_set_max_workers(R, "acme", -5, err, sizeof(err)));
    GEN_IS(4);
    t = fetch(LK_SLUG, "acme");
    ck_assert_int_eq(t->max_workers, 100000);
    free(t);
}
END_TEST

START_TEST(test_settings)
{
    char s[1024];
    /* created with keys out of order, a number, a duplicate, a null: stored canonical */
    ck_assert_int_eq(create("acme", "Acme", "{\"z\":\"1\",\"b\":2,\"a\":\"x\",\"a\":\"y\",\"n\":null}",
                            0),
                     TN_OK);
    stored_settings("acme", s, sizeof(s));
    ck_assert_str_eq(s, "{\"a\":\"y\",\"b\":\"2\",\"z\":\"1\"}");
    GEN_IS(1);

    /* merge order: new keys land in sorted position */
    OK(registry_set_setting(R, "acme", "m", "middle", err, sizeof(err)));
    OK(registry_set_setting(R, "acme", "0", "first", err, sizeof(err)));
    OK(registry_set_setting(R, "acme", "zz", "last", err, sizeof(err)));
    GEN_IS(4);
    stored_settings("acme", s, sizeof(s));
    ck_assert_str_eq(s, "{\"0\":\"first\",\"a\":\"y\",\"b\":\"2\",\"m\":\"middle\",\"z\":\"1\","
                        "\"zz\":\"last\"}");
    /* overwrite keeps one key */
    OK(registry_set_setting(R, "acme", "m", "again", err, sizeof(err)));
    stored_settings("acme", s, sizeof(s));
    ck_assert_str_eq(s, "{\"0\":\"first\",\"a\":\"y\",\"b\":\"2\",\"m\":\"again\",\"z\":\"1\","
                        "\"zz\":\"last\"}");
    /* unset: first, middle, last */
    OK(registry_set_setting(R, "acme", "0", NULL, err, sizeof(err)));
    OK(registry_set_setting(R, "acme", "m", NULL, err, sizeof(err)));
    OK(registry_set_setting(R, "acme", "zz", NULL, err, sizeof(err)));
    GEN_IS(8);
    stored_settings("acme", s, sizeof(s));
    ck_assert_str_eq(s, "{\"a\":\"y\",\"b\":\"2\",\"z\":\"1\"}");
    /* unsetting a key that is not there is an error and changes nothing */
    EXPECT(TN_NOTFOUND, registry_set_setting(R, "acme", "nope", NULL, err, sizeof(err)));
    ck_assert_str_eq(err, "tenant 'acme' has no setting 'nope'");
    EXPECT(TN_NOTFOUND, registry_set_setting(R, "zz", "a", "b", err, sizeof(err)));
    ck_assert_str_eq(err, "no tenant 'zz'");
    EXPECT(TN_NOTFOUND, registry_set_setting(R, "zz", "a", NULL, err, sizeof(err)));
    GEN_IS(8);

    /* values that need escaping round-trip through the stored JSON */
    const char *tricky = "quote\" back\\ nl\n tab\t ctl\x01 utf8 \xc3\xa9 \xf0\x9f\x98\x80 </script>";
    OK(registry_set_setting(R, "acme", "tricky key \xc3\xa9", tricky, err, sizeof(err)));
    tenant_rec *t = fetch(LK_SLUG, "acme");
    ck_assert_str_eq(tenant_setting_get(t, "tricky key \xc3\xa9"), tricky);
    ck_assert_int_eq(t->nsettings, 4);
    for (int i = 1; i < t->nsettings; i++)
        ck_assert_int_lt(strcmp(t->settings[i - 1].key, t->settings[i].key), 0);
    free(t);
    /* an empty value is a value */
    OK(registry_set_setting(R, "acme", "empty", "", err, sizeof(err)));
    t = fetch(LK_SLUG, "acme");
    ck_assert_str_eq(tenant_setting_get(t, "empty"), "");
    free(t);
    GEN_IS(10);

    /* limits */
    char key[130], val[8194];
    memset(key, 'k', 129);
    key[129] = '\0';
    EXPECT(TN_INVALID, registry_set_setting(R, "acme", key, "v", err, sizeof(err)));
    key[128] = '\0';
    OK(registry_set_setting(R, "acme", key, "v", err, sizeof(err)));
    memset(val, 'v', 8193);
    val[8193] = '\0';
    EXPECT(TN_INVALID, registry_set_setting(R, "acme", "big", val, err, sizeof(err)));
    val[8192] = '\0';
    OK(registry_set_setting(R, "acme", "big", val, err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_setting(R, "acme", "bad", "\xc3(", err, sizeof(err)));
    EXPECT(TN_INVALID, registry_set_setting(R, "acme", "a\tb", "x", err, sizeof(err)));
    GEN_IS(12);
}
END_TEST

START_TEST(test_domains)
{
    int np;
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    ck_assert_int_eq(create("globex", "Globex", NULL, 1, "globex.test"), TN_OK);
    GEN_IS(2);
    /* the first domain of a tenant becomes primary */
    OK(registry_domain_add(R, "acme", "b.acme.test", false, err, sizeof(err)));
    ck_assert_str_eq(primary_of("acme", &np), "b.acme.test");
    ck_assert_int_eq(np, 1);
    OK(registry_domain_add(R, "acme", "A.acme.test.", false, err, sizeof(err)));
    ck_assert_str_eq(primary_of("acme", &np), "b.acme.test");
    ck_assert_int_eq(np, 1);
    GEN_IS(4);
    ck_assert(exists(LK_DOMAIN, "a.acme.test"));
    /* --primary moves it */
    OK(registry_domain_add(R, "acme", "c.acme.test", true, err, sizeof(err)));
    ck_assert_str_eq(primary_of("acme", &np), "c.acme.test");
    ck_assert_int_eq(np, 1);
    /* ...also onto a domain the tenant already has */
    OK(registry_domain_add(R, "acme", "a.acme.test", true, err, sizeof(err)));
    ck_assert_str_eq(primary_of("acme", &np), "a.acme.test");
    ck_assert_int_eq(np, 1);
    GEN_IS(6);
    ck_assert_str_eq(primary_of("globex", &np), "globex.test");   /* untouched */
    /* show lists the primary first, then by name */
    shown s = show("acme");
    ck_assert_int_eq(s.nd, 3);
    ck_assert_str_eq(s.domains[0], "a.acme.test");
    ck_assert_str_eq(s.domains[1], "b.acme.test");
    ck_assert_str_eq(s.domains[2], "c.acme.test");
    free(s.t);

    EXPECT(TN_NOTFOUND, registry_domain_add(R, "zz", "z.test", false, err, sizeof(err)));
    ck_assert_str_eq(err, "no tenant 'zz'");
    ck_assert(!exists(LK_DOMAIN, "z.test"));
    GEN_IS(6);

    /* remove; removing the primary promotes the first remaining by name */
    OK(registry_domain_remove(R, "c.acme.test", err, sizeof(err)));
    ck_assert(!exists(LK_DOMAIN, "c.acme.test"));
    ck_assert_str_eq(primary_of("acme", &np), "a.acme.test");
    OK(registry_domain_remove(R, "A.ACME.test", err, sizeof(err)));
    ck_assert_str_eq(primary_of("acme", &np), "b.acme.test");
    ck_assert_int_eq(np, 1);
    GEN_IS(8);
    EXPECT(TN_NOTFOUND, registry_domain_remove(R, "c.acme.test", err, sizeof(err)));
    ck_assert_str_eq(err, "no domain 'c.acme.test'");
    GEN_IS(8);
    OK(registry_domain_remove(R, "b.acme.test", err, sizeof(err)));
    ck_assert_str_eq(primary_of("acme", &np), "");
    ck_assert_int_eq(np, 0);
    /* a removed domain is free for another tenant */
    OK(registry_domain_add(R, "globex", "b.acme.test", false, err, sizeof(err)));
    tenant_rec *t = fetch(LK_DOMAIN, "b.acme.test");
    ck_assert_str_eq(t->slug, "globex");
    free(t);
    GEN_IS(10);
}
END_TEST

START_TEST(test_purge)
{
    ck_assert_int_eq(create("acme", "Acme", "{\"a\":\"1\"}", 2, "acme.test", "www.acme.test"),
                     TN_OK);
    ck_assert_int_eq(create("globex", "Globex", NULL, 1, "globex.test"), TN_OK);
    GEN_IS(2);
    OK(registry_purge(R, "acme", err, sizeof(err)));
    GEN_IS(3);
    ck_assert(!exists(LK_SLUG, "acme"));
    ck_assert(!exists(LK_DOMAIN, "acme.test"));
    ck_assert(!exists(LK_DOMAIN, "www.acme.test"));
    ck_assert(exists(LK_DOMAIN, "globex.test"));
    char v[32];
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v), "SELECT count(*) FROM domains",
                                    0, NULL),
                     TN_OK);
    ck_assert_str_eq(v, "1");
    EXPECT(TN_NOTFOUND, registry_purge(R, "acme", err, sizeof(err)));
    ck_assert_str_eq(err, "no tenant 'acme'");
    GEN_IS(3);
    /* slug and domains can be used again */
    ck_assert_int_eq(create("acme", "Acme 2", NULL, 1, "acme.test"), TN_OK);
    tenant_rec *t = fetch(LK_DOMAIN, "acme.test");
    ck_assert_str_eq(t->name, "Acme 2");
    ck_assert_str_eq(t->settings_json, "{}");
    free(t);
    GEN_IS(4);
}
END_TEST


/* ---- API keys --------------------------------------------------------------------------------- */

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HASH_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

static int key_create(const char *slug, const char *prefix, const char *hash, bool ro,
                      int64_t expires, int64_t *id)
{
    registry_key_new k = {.slug = slug, .prefix = prefix, .hash = hash, .read_only = ro,
                          .label = "test", .created_at = 1000, .expires_at = expires};
    err[0] = '\0';
    return registry_key_create(R, &k, id, err, sizeof(err));
}

typedef struct keys_seen {
    int n;
    int64_t ids[16];
    char slugs[16][64], prefixes[16][16];
} keys_seen;

static int keys_cb(void *ctx, const registry_key *k)
{
    keys_seen *s = ctx;
    if (s->n < 16) {
        s->ids[s->n] = k->id;
        snprintf(s->slugs[s->n], sizeof(s->slugs[0]), "%s", k->slug);
        snprintf(s->prefixes[s->n], sizeof(s->prefixes[0]), "%s", k->prefix);
    }
    s->n++;
    return TN_OK;
}

static int64_t key_count(void)
{
    char v[32];
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v),
                                    "SELECT count(*) FROM api_keys", 0, NULL), TN_OK);
    return atoll(v);
}

/* Create, find by (tenant, hash) only, list by tenant and all, revoke by id and prefix (the
 * generation bumped by each change, not by a find or a touch), the guard of last_used_at,
 * the keys gone with their tenant. */
START_TEST(test_keys)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    ck_assert_int_eq(create("globex", "Globex", NULL, 0), TN_OK);
    GEN_IS(2);
    int64_t a = 0, b = 0, c = 0;
    OK(key_create("acme", "tnk_AAAAAAAA", HASH_A, false, 0, &a));
    OK(key_create("acme", "tnk_BBBBBBBB", HASH_B, true, 5000, &b));
    OK(key_create("globex", "tnk_CCCCCCCC", HASH_C, false, 0, &c));
    GEN_IS(5);
    ck_assert(a > 0 && b > a && c > b);
    /* refusals change nothing */
    EXPECT(TN_NOTFOUND, key_create("nobody", "tnk_DDDDDDDD", HASH_C, false, 0, NULL));
    EXPECT(TN_EXISTS, key_create("acme", "tnk_DDDDDDDD", HASH_C, false, 0, NULL));
    EXPECT(TN_INVALID, key_create("acme", "tnk_bad", HASH_C, false, 0, NULL));
    EXPECT(TN_INVALID, key_create("acme", "tnk_DDDDDDDD", "abc", false, 0, NULL));
    EXPECT(TN_INVALID, key_create("acme", "tnk_DDDDDDDD", HASH_C "0", false, 0, NULL));
    EXPECT(TN_INVALID, key_create("acme", "tnk_DDDDDDDD", HASH_C, false, 999, NULL));
    registry_key_new bad = {.slug = "acme", .prefix = "tnk_DDDDDDDD", .hash = HASH_C,
                            .label = "a\nb", .created_at = 1};
    EXPECT(TN_INVALID, registry_key_create(R, &bad, NULL, err, sizeof(err)));
    GEN_IS(5);
    ck_assert_int_eq(key_count(), 3);

    /* found by (tenant, hash) only: another tenant's key is not found */
    registry_key k;
    tenant_rec *acme = fetch(LK_SLUG, "acme"), *globex = fetch(LK_SLUG, "globex");
    OK(registry_key_find(R, acme->id, HASH_B, &k));
    ck_assert_int_eq(k.id, b);
    ck_assert(k.read_only);
    ck_assert_int_eq(k.expires_at, 5000);
    ck_assert_int_eq(k.revoked_at, 0);
    EXPECT(TN_NOTFOUND, registry_key_find(R, globex->id, HASH_B, &k));
    EXPECT(TN_NOTFOUND, registry_key_find(R, acme->id, HASH_C, &k));
    OK(registry_key_find(R, globex->id, HASH_C, &k));

    /* lists */
    keys_seen s;
    memset(&s, 0, sizeof(s));
    int n = 0;
    OK(registry_key_list(R, "acme", 0, 0, keys_cb, &s, &n, err, sizeof(err)));
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(s.prefixes[0], "tnk_AAAAAAAA");
    ck_assert_str_eq(s.slugs[1], "acme");
    memset(&s, 0, sizeof(s));
    OK(registry_key_list(R, NULL, a, 1, keys_cb, &s, &n, err, sizeof(err)));   /* paged */
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.ids[0], b);
    memset(&s, 0, sizeof(s));
    OK(registry_key_list(R, NULL, b, 0, keys_cb, &s, NULL, err, sizeof(err)));
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.slugs[0], "globex");
    EXPECT(TN_NOTFOUND, registry_key_list(R, "nobody", 0, 0, keys_cb, &s, NULL, err, sizeof(err)));
    GEN_IS(5);

    /* revoke: by id, by prefix; only the tenant's own; again is TN_OK, already */
    bool already = true;
    OK(registry_key_revoke(R, "acme", a, NULL, 2000, &k, &already, err, sizeof(err)));
    ck_assert(!already);
    ck_assert_int_eq(k.revoked_at, 2000);
    ck_assert_str_eq(k.prefix, "tnk_AAAAAAAA");
    GEN_IS(6);
    OK(registry_key_revoke(R, "acme", 0, "tnk_AAAAAAAA", 3000, &k, &already, err, sizeof(err)));
    ck_assert(already);
    ck_assert_int_eq(k.revoked_at, 2000);
    EXPECT(TN_NOTFOUND, registry_key_revoke(R, "acme", c, NULL, 3000, NULL, NULL, err,
                                            sizeof(err)));
    EXPECT(TN_NOTFOUND, registry_key_revoke(R, "acme", 0, "tnk_CCCCCCCC", 3000, NULL, NULL,
                                            err, sizeof(err)));
    EXPECT(TN_INVALID, registry_key_revoke(R, "acme", 0, "nope", 3000, NULL, NULL, err,
                                           sizeof(err)));
    OK(registry_key_find(R, globex->id, HASH_C, &k));
    ck_assert_int_eq(k.revoked_at, 0);
    OK(registry_key_find(R, acme->id, HASH_A, &k));
    ck_assert_int_eq(k.revoked_at, 2000);

    /* last_used_at: written, then not again within the interval; no generation bump */
    uint64_t g = gen_now();
    OK(registry_key_touch(R, b, 10000, 60));
    OK(registry_key_find(R, acme->id, HASH_B, &k));
    ck_assert_int_eq(k.last_used_at, 10000);
    OK(registry_key_touch(R, b, 10030, 60));
    OK(registry_key_find(R, acme->id, HASH_B, &k));
    ck_assert_int_eq(k.last_used_at, 10000);
    OK(registry_key_touch(R, b, 10060, 60));
    OK(registry_key_find(R, acme->id, HASH_B, &k));
    ck_assert_int_eq(k.last_used_at, 10060);
    GEN_IS(g);

    /* the keys go with their tenant */
    OK(registry_purge(R, "acme", err, sizeof(err)));
    ck_assert_int_eq(key_count(), 1);
    free(acme);
    free(globex);
}
END_TEST

/* A registry made before the keys' table: reads answer "no keys", the first create makes
 * the table, and `tenancy init` again leaves the keys alone. */
START_TEST(test_keys_upgrade)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    ck_assert_int_eq(tn_db_exec(registry_db(R), "DROP TABLE api_keys", 0, NULL), TN_OK);
    tenant_rec *acme = fetch(LK_SLUG, "acme");
    registry_key k;
    EXPECT(TN_NOTFOUND, registry_key_find(R, acme->id, HASH_A, &k));
    keys_seen s;
    memset(&s, 0, sizeof(s));
    OK(registry_key_list(R, "acme", 0, 0, keys_cb, &s, NULL, err, sizeof(err)));
    ck_assert_int_eq(s.n, 0);
    EXPECT(TN_NOTFOUND, registry_key_revoke(R, "acme", 1, NULL, 1, NULL, NULL, err, sizeof(err)));
    OK(key_create("acme", "tnk_AAAAAAAA", HASH_A, false, 0, NULL));
    OK(registry_key_find(R, acme->id, HASH_A, &k));
    OK(registry_init(R, err, sizeof(err)));
    ck_assert_int_eq(key_count(), 1);
    free(acme);
}
END_TEST

/* The catalogue read that tells whether the keys' table is there fails (here: an authorizer
 * of the test's own refuses it, on SQLite): the revoke stops with that error and revokes
 * nothing, as it would for a failure of any of its other statements. */
static int no_catalogue(void *ud, int action, const char *a1, const char *a2, const char *db,
                        const char *trigger)
{
    (void)ud, (void)a2, (void)db, (void)trigger;
    return action == SQLITE_READ && a1 != NULL &&
                   (strcmp(a1, "sqlite_master") == 0 || strcmp(a1, "sqlite_schema") == 0)
               ? SQLITE_DENY
               : SQLITE_OK;
}

START_TEST(test_key_revoke_check_fails)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    int64_t a = 0;
    OK(key_create("acme", "tnk_AAAAAAAA", HASH_A, false, 0, &a));
    tenant_rec *acme = fetch(LK_SLUG, "acme");
    sqlite3 *h = tn_db_native(registry_db(R));
    ck_assert_int_eq(sqlite3_set_authorizer(h, no_catalogue, NULL), SQLITE_OK);
    err[0] = '\0';
    int rc = registry_key_revoke(R, "acme", a, NULL, 2000, NULL, NULL, err, sizeof(err));
    /* no authorizer for the rest of the test: the registry is closed after it */
    ck_assert_int_eq(sqlite3_set_authorizer(h, NULL, NULL), SQLITE_OK);
    ck_assert_msg(rc != TN_OK && rc != TN_NOTFOUND, "revoke = %s: %s", tn_rc_str(rc), err);
    ck_assert_msg(strstr(err, "registry: ") == err, "%s", err);
    registry_key k;
    OK(registry_key_find(R, acme->id, HASH_A, &k));
    ck_assert_int_eq(k.revoked_at, 0);
    GEN_IS(2);
    free(acme);
}
END_TEST

START_TEST(test_show)
{
    ck_assert_int_eq(create("acme", "Acme", "{\"k\":\"v\"}", 2, "acme.test", "alias.test"), TN_OK);
    shown s = show("acme");
    ck_assert_str_eq(s.t->slug, "acme");
    ck_assert_str_eq(s.t->name, "Acme");
    ck_assert_str_eq(tenant_setting_get(s.t, "k"), "v");
    ck_assert_int_eq(s.nd, 2);
    ck_assert_str_eq(s.domains[0], "acme.test");
    ck_assert(s.primary[0]);
    ck_assert_str_eq(s.domains[1], "alias.test");
    ck_assert(!s.primary[1]);
    free(s.t);
    shown none;
    memset(&none, 0, sizeof(none));
    EXPECT(TN_NOTFOUND, registry_show(R, "zz", show_cb, &none));
    ck_assert_int_eq(none.calls, 0);
    GEN_IS(1);
}
END_TEST

/* ---- list ------------------------------------------------------------------------------------ */

typedef struct page {
    int n;
    char first[64], last[64];
    char primary[64];
} page;

static int page_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    page *p = ctx;
    if (p->n == 0)
        snprintf(p->first, sizeof(p->first), "%s", t->slug);
    else
        ck_assert_int_lt(strcmp(p->last, t->slug), 0);   /* slug order */
    snprintf(p->last, sizeof(p->last), "%s", t->slug);
    if (nd > 0 && d[0].primary)
        snprintf(p->primary, sizeof(p->primary), "%s", d[0].domain);
    p->n++;
    return TN_OK;
}

static page list(int state, const char *search, const char *after, int limit, int64_t *total)
{
    page p;
    memset(&p, 0, sizeof(p));
    OK(registry_list(R, state, search, after, limit, page_cb, &p, total));
    return p;
}

START_TEST(test_list_paging)
{
    for (int i = 0; i < 250; i++) {
        char slug[16], name[32], dom[32];
        snprintf(slug, sizeof(slug), "t%03d", i);
        snprintf(name, sizeof(name), "Tenant %03d", i);
        snprintf(dom, sizeof(dom), "t%03d.test", i);
        ck_assert_int_eq(create(slug, name, NULL, 1, dom), TN_OK);
    }
    GEN_IS(250);
    int64_t total = 0;
    /* keyset paging: 100 + 100 + 50, nothing missed, nothing twice */
    page p = list(-1, NULL, NULL, 100, &total);
    ck_assert_int_eq(total, 250);
    ck_assert_int_eq(p.n, 100);
    ck_assert_str_eq(p.first, "t000");
    ck_assert_str_eq(p.last, "t099");
    ck_assert_str_eq(p.primary, "t099.test");
    p = list(-1, "", "t099", 100, &total);
    ck_assert_int_eq(total, 250);
    ck_assert_int_eq(p.n, 100);
    ck_assert_str_eq(p.first, "t100");
    ck_assert_str_eq(p.last, "t199");
    p = list(-1, NULL, "t199", 100, &total);
    ck_assert_int_eq(p.n, 50);
    ck_assert_str_eq(p.first, "t200");
    ck_assert_str_eq(p.last, "t249");
    p = list(-1, NULL, "t249", 100, &total);
    ck_assert_int_eq(p.n, 0);
    ck_assert_int_eq(total, 250);
    /* a cursor that is not a slug still works (keyset) */
    p = list(-1, NULL, "t0995", 10, NULL);
    ck_assert_str_eq(p.first, "t100");
    /* the default limit is 100 */
    p = list(-1, NULL, NULL, 0, NULL);
    ck_assert_int_eq(p.n, 100);

    /* the state filter */
    for (int i = 0; i < 250; i += 10) {
        char slug[16];
        snprintf(slug, sizeof(slug), "t%03d", i);
        OK(registry_set_state(R, slug, TENANT_SUSPENDED, err, sizeof(err)));
    }
    GEN_IS(275);
    p = list(TENANT_SUSPENDED, NULL, NULL, 10, &total);
    ck_assert_int_eq(total, 25);
    ck_assert_int_eq(p.n, 10);
    ck_assert_str_eq(p.first, "t000");
    ck_assert_str_eq(p.last, "t090");
    p = list(TENANT_SUSPENDED, NULL, "t090", 100, &total);
    ck_assert_int_eq(p.n, 15);
    ck_assert_str_eq(p.first, "t100");
    p = list(TENANT_ACTIVE, NULL, NULL, 1000, &total);
    ck_assert_int_eq(total, 225);
    ck_assert_int_eq(p.n, 225);
    p = list(TENANT_MAINTENANCE, NULL, NULL, 10, &total);
    ck_assert_int_eq(total, 0);
    ck_assert_int_eq(p.n, 0);

    /* search: slug or name, any case; with the state filter */
    p = list(-1, "t01", NULL, 100, &total);
    ck_assert_int_eq(total, 10);
    ck_assert_str_eq(p.first, "t010");
    ck_assert_str_eq(p.last, "t019");
    p = list(-1, "TENANT 12", NULL, 100, &total);
    ck_assert_int_eq(total, 10);
    ck_assert_str_eq(p.first, "t120");
    p = list(TENANT_SUSPENDED, "t12", NULL, 100, &total);
    ck_assert_int_eq(total, 1);
    ck_assert_str_eq(p.first, "t120");
    p = list(-1, "nothing like it", NULL, 100, &total);
    ck_assert_int_eq(total, 0);
    ck_assert_int_eq(p.n, 0);
}
END_TEST

START_TEST(test_list_search_literal)
{
    ck_assert_int_eq(create("pct", "100% real", NULL, 0), TN_OK);
    ck_assert_int_eq(create("under", "snake_case", NULL, 0), TN_OK);
    ck_assert_int_eq(create("back", "back\\slash", NULL, 0), TN_OK);
    ck_assert_int_eq(create("plain", "Plain", NULL, 0), TN_OK);
    ck_assert_int_eq(create("snakexcase", "snakeXcase", NULL, 0), TN_OK);
    int64_t total;
    page p = list(-1, "%", NULL, 100, &total);
    ck_assert_int_eq(total, 1);
    ck_assert_str_eq(p.first, "pct");
    p = list(-1, "_", NULL, 100, &total);
    ck_assert_int_eq(total, 1);
    ck_assert_str_eq(p.first, "under");
    p = list(-1, "snake_case", NULL, 100, &total);
    ck_assert_int_eq(total, 1);
    ck_assert_str_eq(p.first, "under");
    p = list(-1, "0%", NULL, 100, &total);
    ck_assert_int_eq(total, 1);
    p = list(-1, "\\", NULL, 100, &total);
    ck_assert_int_eq(total, 1);
    ck_assert_str_eq(p.first, "back");
    p = list(-1, "'", NULL, 100, &total);
    ck_assert_int_eq(total, 0);
    p = list(-1, NULL, NULL, 100, &total);
    ck_assert_int_eq(total, 5);
}
END_TEST

static int stop_after_two(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    (void)t, (void)d, (void)nd;
    int *n = ctx;
    return ++*n == 2 ? TN_DONE : TN_OK;
}

static int fail_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    (void)ctx, (void)t, (void)d, (void)nd;
    return TN_IO;
}

START_TEST(test_list_callback)
{
    for (int i = 0; i < 5; i++) {
        char slug[8];
        snprintf(slug, sizeof(slug), "s%d", i);
        ck_assert_int_eq(create(slug, slug, NULL, 0), TN_OK);
    }
    int n = 0;
    OK(registry_list(R, -1, NULL, NULL, 10, stop_after_two, &n, NULL));
    ck_assert_int_eq(n, 2);
    EXPECT(TN_IO, registry_list(R, -1, NULL, NULL, 10, fail_cb, NULL, NULL));
}
END_TEST

/* ---- migrations: a batch of copies in one transaction ----------------------------------------- */

static void migration_is(const char *slug, const char *version, const char *error)
{
    char v[64];
    const char *p[] = {slug};
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v),
                                    "SELECT migration_version || '/' || last_error FROM tenants "
                                    "WHERE slug = $1", 1, p),
                     TN_OK);
    char want[64];
    snprintf(want, sizeof(want), "%s/%s", version, error);
    ck_assert_str_eq(v, want);
}

/* Every row of the batch is written, a slug that is gone is marked and does not stop the
 * others, and the generation does not move (no worker caches these columns). */
START_TEST(test_set_migrations)
{
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    ck_assert_int_eq(create("beta", "Beta", NULL, 0), TN_OK);
    GEN_IS(2);
    registry_migration_update u[] = {{"acme", "0003", "", -1},
                                     {"gone", "0003", "", -1},
                                     {"beta", "0002", "0003_x.sql: boom", -1}};
    OK(registry_set_migrations(R, u, 3, err, sizeof(err)));
    ck_assert_int_eq(u[0].rc, TN_OK);
    ck_assert_int_eq(u[1].rc, TN_NOTFOUND);
    ck_assert_int_eq(u[2].rc, TN_OK);
    migration_is("acme", "0003", "");
    migration_is("beta", "0002", "0003_x.sql: boom");
    GEN_IS(2);
    registry_migration_update bad[] = {{"acme", NULL, "", -1}};
    EXPECT(TN_INVALID, registry_set_migrations(R, bad, 1, err, sizeof(err)));
    OK(registry_set_migrations(R, NULL, 0, err, sizeof(err)));
}
END_TEST

/* ---- the generation ------------------------------------------------------------------------- */

/* A reader first (a read-only mapping), then a change through the same handle: the bump must
 * go through a writable mapping (it used to crash on the read-only one). */
START_TEST(test_generation_reader_then_writer)
{
    registry_close(R);
    R = NULL;
    open_registry();
    ck_assert_int_eq((int64_t)registry_generation(R), 0);
    ck_assert_int_eq(create("acme", "Acme", NULL, 0), TN_OK);
    ck_assert_int_eq((int64_t)registry_generation(R), 1);
    GEN_IS(1);
    /* and a missing generation file is created by the first change */
    registry_close(R);
    R = NULL;
    unlink(gen_path);
    open_registry();
    ck_assert_int_eq((int64_t)registry_generation(R), 0);
    OK(registry_set_max_workers(R, "acme", 2, err, sizeof(err)));
    GEN_IS(1);
}
END_TEST

/* ---- the suites ------------------------------------------------------------------------------ */

Suite *registry_suite(bool pg);
Suite *registry_suite(bool pg)
{
    Suite *s = suite_create(pg ? "registry-postgres" : "registry-sqlite");
    TCase *tc = tcase_create(pg ? "postgres" : "sqlite");
    tcase_add_checked_fixture(tc, pg ? setup_pg : setup_sqlite, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_init_twice);
    tcase_add_test(tc, test_not_initialised);
    tcase_add_test(tc, test_create_fetch);
    tcase_add_test(tc, test_duplicate_slug);
    tcase_add_test(tc, test_domain_taken);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_states);
    tcase_add_test(tc, test_max_workers);
    tcase_add_test(tc, test_settings);
    tcase_add_test(tc, test_domains);
    tcase_add_test(tc, test_purge);
    tcase_add_test(tc, test_keys);
    tcase_add_test(tc, test_keys_upgrade);
    tcase_add_test(tc, test_show);
    tcase_add_test(tc, test_list_paging);
    tcase_add_test(tc, test_list_search_literal);
    tcase_add_test(tc, test_list_callback);
    tcase_add_test(tc, test_set_migrations);
    tcase_add_test(tc, test_generation_reader_then_writer);
    if (pg) {
        tcase_add_test(tc, test_same_schema);
        tcase_add_test(tc, test_scope_not_session);
    }
    else
        tcase_add_test(tc, test_key_revoke_check_fails);
    suite_add_tcase(s, tc);
    return s;
}
