/* check_chain.c — the chain over a real SQLite registry, driven through an in-memory
 * transport: every resolver, central domains, invalid and unknown hosts, states, the
 * per-tenant cap, the theme, the context being empty at start and cleared at the end, and
 * tn_run's refusals. */
#include "core/first.h"
#include "core/rc.h"
#include "tenancy/chain.h"
#include "tenancy/keys.h"
#include "core/token.h"
#include "tenancy/lookup.h"
#include "tenancy/registry.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- an in-memory transport ---------------------------------------------------------------- */

struct fake {
    const char *params[16][2];
    int n;
    buf out;
};

static const char *fparam(void *tx, const char *name)
{
    struct fake *f = tx;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->params[i][0], name) == 0)
            return f->params[i][1];
    return NULL;
}
static int fread_(void *tx, char *p, int n) { (void)tx; (void)p; (void)n; return 0; }
static int fwrite_(void *tx, const char *p, size_t n)
{
    buf_append(&((struct fake *)tx)->out, p, n);
    return 0;
}
static const tn_transport fake_tp = {fparam, fread_, fwrite_};

static char dir[64];
static tenancy_config cfg;
static arena *cfg_arena;
static limits *lim;
static arena *req_arena;
static buf headers, out;

static int handler_seen_ok;
static char handler_path[256];
static char handler_slug[64];

/* When key_token is set, the handler checks it with tn_key_check and keeps what it said. */
static const char *key_token;
static int key_rc;
static unsigned key_flags;
static char key_error[256];

static int handler(tn_request *r)
{
    handler_seen_ok++;
    if (key_token != NULL) {
        key_flags = 99;
        key_rc = tn_key_check(r, key_token, &key_flags);
        snprintf(key_error, sizeof(key_error), "%s", tn_request_error(r));
    }
    snprintf(handler_path, sizeof(handler_path), "%s", tn_path(r));
    const tn_tenant *t = tn_tenant_of(r);
    snprintf(handler_slug, sizeof(handler_slug), "%s", t ? tn_tenant_slug(t) : "-");
    return tn_puts(r, "ok");
}
static const chain_app handler_app = {.handle = handler};

/* Run one request; returns the final status and leaves the body in f->out. */
static int run(struct fake *f, const char *host, const char *path, const char *extra_name,
               const char *extra_value)
{
    f->n = 0;
    buf_reset(&f->out);
    f->params[f->n][0] = "TENANT_HOST";
    f->params[f->n++][1] = host;
    f->params[f->n][0] = "REQUEST_URI";
    f->params[f->n++][1] = path;
    f->params[f->n][0] = "REQUEST_METHOD";
    f->params[f->n++][1] = "GET";
    f->params[f->n][0] = "REMOTE_ADDR";
    f->params[f->n++][1] = "10.0.0.1";
    if (extra_name != NULL) {
        f->params[f->n][0] = extra_name;
        f->params[f->n++][1] = extra_value;
    }
    tn_request r;
    request_init(&r, &fake_tp, f, req_arena, &headers, &out, 1 << 20, "test", 0);
    handler_slug[0] = '\0';
    int rc = chain_run(&r, &handler_app);
    (void)rc;
    request_finish(&r);
    int status = r.status;
    chain_finish(&r, status);
    arena_reset(req_arena);
    return status;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tenancy-chain-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cfg_arena = arena_create(0);
    conf_error cerr;
    /* A fresh struct each time: in one process (CK_FORK=no, make check-valgrind) the
     * placements of the previous test would still be there. */
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(conf_defaults(tenancy_config_table, &cfg, cfg_arena, &cerr), TN_OK);
    cfg.resolvers = "subdomain, host, header, path";
    cfg.base_domains = "example.com";
    cfg.central_domains = "admin.example.com";
    cfg.header_from = "10.0.0.0/8";
    cfg.state_dir = dir;
    cfg.max_workers_text = "1";
    char err[256];
    /* A PostgreSQL placement, never connected to here: tenant.affinity looks at the kind. */
    ck_assert_msg(tenancy_config_placement(&cfg, "placement.pgs.dsn", "postgres:dbname=none",
                                           cfg_arena, err, sizeof(err)) == TN_OK, "%s", err);
    ck_assert_msg(tenancy_config_placement(&cfg, "placement.pgs.mode", "schema", cfg_arena, err,
                                           sizeof(err)) == TN_OK, "%s", err);
    ck_assert_msg(tenancy_config_finish(&cfg, cfg_arena, err, sizeof(err)) == TN_OK, "%s", err);
    registry *reg;
    ck_assert_int_eq(registry_open(cfg.registry_uri, cfg.gen_path, &reg, err, sizeof(err)), TN_OK);
    ck_assert_msg(registry_init(reg, err, sizeof(err)) == TN_OK, "%s", err);
    const char *dom[] = {"shop.acme.test"};
    registry_new t = {.slug = "acme", .name = "Acme", .state = TENANT_ACTIVE,
                      .settings = "{\"theme.primary\":\"#00aa55\",\"theme.x\":\"a;b\"}",
                      .domains = dom, .ndomains = 1};
    ck_assert_msg(registry_create(reg, &t, NULL, err, sizeof(err)) == TN_OK, "%s", err);
    registry_new g = {.slug = "globex", .name = "Globex", .state = TENANT_ACTIVE};
    ck_assert_int_eq(registry_create(reg, &g, NULL, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(registry_set_state(reg, "globex", TENANT_SUSPENDED, err, sizeof(err)), TN_OK);
    registry_new pg = {.slug = "pgco", .name = "PG Co", .placement = "pgs", .storage = "t_pgco",
                       .state = TENANT_ACTIVE};
    ck_assert_int_eq(registry_create(reg, &pg, NULL, err, sizeof(err)), TN_OK);
    registry_new m = {.slug = "moving", .name = "Moving", .state = TENANT_ACTIVE};
    ck_assert_int_eq(registry_create(reg, &m, NULL, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(registry_set_state(reg, "moving", TENANT_MOVING, err, sizeof(err)), TN_OK);
    registry_close(reg);
    lim = limits_create();
    chain_env env = {.cfg = &cfg, .max_children = 4, .lim = lim};
    ck_assert_int_eq(chain_init(&env), TN_OK);
    req_arena = arena_create(0);
}

static void teardown(void)
{
    chain_fini();
    limits_destroy(lim);
    arena_destroy(req_arena);
    arena_destroy(cfg_arena);
    buf_free(&headers);
    buf_free(&out);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_resolvers)
{
    struct fake f = {0};
    ck_assert_int_eq(run(&f, "acme.example.com", "/x", NULL, NULL), 200);
    ck_assert_str_eq(handler_slug, "acme");
    ck_assert_int_eq(run(&f, "ACME.Example.com:8080", "/", NULL, NULL), 200);
    ck_assert_str_eq(handler_slug, "acme");
    ck_assert_int_eq(run(&f, "shop.acme.test", "/", NULL, NULL), 200);   /* host resolver */
    ck_assert_str_eq(handler_slug, "acme");
    ck_assert_int_eq(run(&f, "other.test", "/t/acme/orders/1", NULL, NULL), 200);
    ck_assert_str_eq(handler_slug, "acme");
    ck_assert_str_eq(handler_path, "/orders/1");   /* the prefix is stripped */
    ck_assert_int_eq(run(&f, "other.test", "/t/acme/a.b/..c/.d?x=/../", NULL, NULL), 200);
    ck_assert_str_eq(handler_slug, "acme");   /* dots in names, and the query, are fine */
    ck_assert_int_eq(run(&f, "other.test", "/", "HTTP_X_TENANT", "acme"), 200);   /* header */
    ck_assert_str_eq(handler_slug, "acme");
    /* Central: never a tenant, even when a tenant header says otherwise. */
    ck_assert_int_eq(run(&f, "admin.example.com", "/", "HTTP_X_TENANT", "acme"), 200);
    ck_assert_str_eq(handler_slug, "-");
    /* Central is the whole name only: one that merely starts or ends like it is another
     * host (here nobody's), never served as central. */
    ck_assert_int_eq(run(&f, "admin.example.com.other.test", "/", NULL, NULL), 404);
    ck_assert_int_eq(run(&f, "admin.example.community", "/", NULL, NULL), 404);
    ck_assert_int_eq(run(&f, "xadmin.example.com", "/", NULL, NULL), 404);
    buf_free(&f.out);
}
END_TEST

START_TEST(test_refusals)
{
    struct fake f = {0};
    int before = handler_seen_ok;
    ck_assert_int_eq(run(&f, "nobody.example.com", "/", NULL, NULL), 404);
    ck_assert_int_eq(run(&f, "a.b.example.com", "/", NULL, NULL), 404);   /* two labels */
    ck_assert_int_eq(run(&f, "bad_host.example.com", "/", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "10.1.2.3", "/", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "[::1]", "/", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "globex.example.com", "/", NULL, NULL), 403);   /* suspended */
    /* Paths nginx would normalise differently from the raw one the resolver reads. */
    ck_assert_int_eq(run(&f, "other.test", "/t/../etc/passwd", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/t/globex/../acme/x", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/t/acme/%2E%2e/x", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/t/acme/./x", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/t/acme/x/..", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/t/acme%2Fx", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/t/acme\\x", NULL, NULL), 400);
    ck_assert_int_eq(run(&f, "other.test", "/", "HTTP_X_TENANT", "Bad Slug"), 400);
    ck_assert_int_eq(handler_seen_ok, before);   /* none reached the handler */
    /* A moving tenant serves reads. */
    ck_assert_int_eq(run(&f, "moving.example.com", "/", NULL, NULL), 200);
    buf_free(&f.out);
}
END_TEST

START_TEST(test_header_untrusted_source)
{
    struct fake f = {0};
    /* REMOTE_ADDR 10.0.0.1 is trusted; make one that is not by overriding it first. */
    f.n = 0;
    buf_reset(&f.out);
    const char *p[][2] = {{"REMOTE_ADDR", "192.0.2.9"}, {"TENANT_HOST", "other.test"},
                          {"REQUEST_URI", "/"},         {"HTTP_X_TENANT", "acme"}};
    for (size_t i = 0; i < TN_ARRAY_LEN(p); i++) {
        f.params[i][0] = p[i][0];
        f.params[i][1] = p[i][1];
    }
    f.n = (int)TN_ARRAY_LEN(p);
    tn_request r;
    request_init(&r, &fake_tp, &f, req_arena, &headers, &out, 1 << 20, "test", 0);
    chain_run(&r, &handler_app);
    request_finish(&r);
    ck_assert_int_eq(r.status, 404);
    chain_finish(&r, r.status);
    arena_reset(req_arena);
    buf_free(&f.out);
}
END_TEST

START_TEST(test_cap_and_theme)
{
    /* tenant.max_workers = 1: a second request of acme while one runs is refused. */
    ck_assert_int_eq(limits_enter(lim, 1, 1, "acme", 1, 0), TN_OK);   /* worker slot 1 */
    struct fake f = {0};
    ck_assert_int_eq(run(&f, "acme.example.com", "/", NULL, NULL), 503);
    limits_leave(lim, 1, 1, 200);
    ck_assert_int_eq(run(&f, "acme.example.com", "/", NULL, NULL), 200);
    limits_entry e;
    ck_assert(limits_get(lim, 1, &e));
    ck_assert_int_eq(e.rejected, 1);
    ck_assert_int_eq(e.inflight, 0);
    ck_assert_int_eq(run(&f, "acme.example.com", "/_theme.css", NULL, NULL), 200);
    ck_assert_ptr_nonnull(strstr(f.out.p, "--primary: #00aa55;"));
    ck_assert_ptr_null(strstr(f.out.p, "a;b"));
    buf_free(&f.out);
}
END_TEST

/* A cap of the whole pool or more could never refuse: it is no cap, and an uncapped
 * tenant's requests are counted for the status page without being marked for a cap. */
START_TEST(test_cap_of_whole_pool)
{
    ck_assert_int_eq(tenancy_max_workers(&cfg, 0, 4), 1);   /* this suite: 1 */
    ck_assert_int_eq(tenancy_max_workers(&cfg, 3, 4), 3);
    ck_assert_int_eq(tenancy_max_workers(&cfg, 4, 4), 0);
    ck_assert_int_eq(tenancy_max_workers(&cfg, 9, 4), 0);
    tenancy_config pc = cfg;
    pc.max_workers_abs = 0;
    pc.max_workers_pct = 50;
    ck_assert_int_eq(tenancy_max_workers(&pc, 0, 4), 2);
    ck_assert_int_eq(tenancy_max_workers(&pc, 0, 2), 1);
    ck_assert_int_eq(tenancy_max_workers(&pc, 0, 1), 0);    /* one worker: its whole pool */
    pc.max_workers_pct = 100;
    ck_assert_int_eq(tenancy_max_workers(&pc, 0, 2), 0);
    ck_assert_int_eq(tenancy_max_workers(&pc, 0, 0), 1);    /* no pool known: kept */

    /* Three workers in one uncapped tenant (id 2): admitted and counted, never contended,
     * and no slot marked: a capped request of it by a fourth worker is the only one. */
    for (int w = 0; w < 3; w++)
        ck_assert_int_eq(limits_enter(lim, w, 2, "globex", 0, 5000), TN_OK);
    ck_assert(!limits_contended(lim, 5000));
    limits_entry e;
    ck_assert(limits_get(lim, 2, &e));
    ck_assert_int_eq(e.inflight, 3);
    ck_assert_int_eq(limits_free(lim, 2, 1), 1);
    ck_assert_int_eq(limits_enter(lim, 3, 2, "globex", 1, 5000), TN_OK);
    ck_assert(limits_contended(lim, 5000));   /* that one reached its cap of one */
    for (int w = 0; w < 4; w++)
        limits_leave(lim, w, 2, 200);
    ck_assert(limits_get(lim, 2, &e));
    ck_assert_int_eq(e.inflight, 0);
    ck_assert_int_eq(e.requests, 4);
    ck_assert_int_eq(limits_free(lim, 2, 1), 1);
}
END_TEST

static const char *host_param(void *ctx, const char *name, size_t *len)
{
    if (strcmp(name, "TENANT_HOST") != 0 || *(const char *)ctx == '\0')
        return NULL;
    *len = strlen(ctx);
    return ctx;
}

/* tenant.queue_wait's look before a request is read: the tenant and its cap, found as the
 * chain finds it, with nothing answered; the chain then serves the same request as usual. */
START_TEST(test_peek_tenant)
{
    struct fake f = {0};
    const char *cases[][2] = {{"acme.example.com", "acme"}, {"globex.example.com", NULL},
                              {"admin.example.com", NULL}, {"nobody.example.com", NULL},
                              {"bad host", NULL}};
    for (size_t i = 0; i < TN_ARRAY_LEN(cases); i++) {
        f.n = 0;
        buf_reset(&f.out);
        f.params[f.n][0] = "TENANT_HOST";
        f.params[f.n++][1] = cases[i][0];
        f.params[f.n][0] = "REQUEST_URI";
        f.params[f.n++][1] = "/";
        tn_request r;
        request_init(&r, &fake_tp, &f, req_arena, &headers, &out, 1 << 20, "peek", 0);
        chain_peek pk = {.id = -1, .cap = -1, .affine = true};
        int rc = chain_peek_tenant(&r, 0, &pk);
        if (cases[i][1] != NULL) {
            ck_assert_int_eq(rc, TN_OK);
            ck_assert_int_eq(pk.id, 1);
            ck_assert_int_eq(pk.cap, 1);   /* tenant.max_workers = 1 in this suite */
            ck_assert(!pk.affine);         /* a SQLite tenant is never sent to a home */
        } else {
            /* suspended, central, unknown, invalid: the chain answers those itself */
            ck_assert_msg(rc == TN_NOTFOUND, "%s", cases[i][0]);
            ck_assert_int_eq(pk.id, 0);
        }
        ck_assert_uint_eq(f.out.len, 0);      /* nothing answered */
        ck_assert_uint_eq(out.len, 0);
        arena_reset(req_arena);
    }
    /* From the host param alone: declined here, where a header or a path may name the
     * tenant first (this suite's resolvers); tenancy.sh runs the host-only way. */
    chain_peek hp = {.id = -1, .cap = -1};
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"acme.example.com", 0, &hp),
                     TN_DECLINED);
    ck_assert_int_eq(hp.id, 0);
    int saved_n = cfg.nkinds, saved_k = cfg.kinds[0];
    cfg.nkinds = 1;   /* the host alone names tenants: found from the param's bytes */
    cfg.kinds[0] = RES_SUBDOMAIN;
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"acme.example.com", 0, &hp), TN_OK);
    ck_assert_int_eq(hp.id, 1);
    ck_assert_int_eq(hp.cap, 1);
    ck_assert(!hp.affine);
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"ACME.example.com.", 0, &hp), TN_OK);
    ck_assert_int_eq(hp.id, 1);   /* normalised as the chain does */
    /* A tenant of a PostgreSQL placement: with tenant.affinity = auto (the default) not sent
     * while this worker's pool has closed no connection at its bound (it has not connected
     * at all here); with on, sent to its home, from the lookup and again from the memo; with
     * off, never. */
    ck_assert_int_eq(cfg.affinity, AFFINITY_AUTO);
    ck_assert(!chain_affinity_now());
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"pgco.example.com", 0, &hp), TN_OK);
    ck_assert(!hp.affine);
    ck_assert(hp.id > 1);
    cfg.affinity = AFFINITY_ON;
    ck_assert(chain_affinity_now());
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(chain_peek_host(host_param, (void *)"pgco.example.com", 0, &hp), TN_OK);
        ck_assert(hp.affine);
    }
    cfg.affinity = AFFINITY_OFF;
    ck_assert(!chain_affinity_now());
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"pgco.example.com", 5000, &hp), TN_OK);
    ck_assert(!hp.affine);
    cfg.affinity = AFFINITY_AUTO;
    const char *none[] = {"globex.example.com", "admin.example.com", "nobody.example.com",
                          "bad host", ""};
    for (size_t i = 0; i < TN_ARRAY_LEN(none); i++) {
        ck_assert_msg(chain_peek_host(host_param, (void *)none[i], 0, &hp) == TN_NOTFOUND, "%s",
                      none[i]);
        ck_assert_int_eq(hp.id, 0);
        /* and again, from the memo */
        ck_assert_int_eq(chain_peek_host(host_param, (void *)none[i], 0, &hp), TN_NOTFOUND);
    }
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"acme.example.com", 0, &hp), TN_OK);
    /* The memo's answer holds for its registry generation only: a tenant suspended (or
     * resumed) is answered as it now is at once, at the same instant, not after the memo's
     * time is up. */
    registry *reg;
    char err[256];
    ck_assert_int_eq(registry_open(cfg.registry_uri, cfg.gen_path, &reg, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(registry_set_state(reg, "acme", TENANT_SUSPENDED, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"acme.example.com", 0, &hp),
                     TN_NOTFOUND);
    ck_assert_int_eq(hp.id, 0);
    ck_assert_int_eq(registry_set_state(reg, "acme", TENANT_ACTIVE, err, sizeof(err)), TN_OK);
    registry_close(reg);
    ck_assert_int_eq(chain_peek_host(host_param, (void *)"acme.example.com", 0, &hp), TN_OK);
    ck_assert_int_eq(hp.id, 1);
    cfg.nkinds = saved_n;
    cfg.kinds[0] = saved_k;
    /* The context stays empty: a request right after runs through the chain as usual. */
    ck_assert_int_eq(run(&f, "acme.example.com", "/", NULL, NULL), 200);
    ck_assert_int_eq(run(&f, "nobody.example.com", "/", NULL, NULL), 404);
    buf_free(&f.out);
}
END_TEST

static bool woken(limits *l)
{
    uint64_t v;
    return read(limits_wake_fd(l), &v, sizeof(v)) == (ssize_t)sizeof(v);
}

/* A claim made before the request is read, the room left under a cap, the count of waiting
 * requests, and the wake-up that a request leaving sends only when some wait. */
START_TEST(test_limits_wait_and_wake)
{
    limits *l = limits_create();
    ck_assert_ptr_nonnull(l);
    ck_assert_int_ge(limits_wake_fd(l), 0);
    ck_assert(!limits_contended(l, 100));
    ck_assert_int_eq(limits_enter(l, 0, 5, "t", 2, 100), TN_OK);
    ck_assert(!limits_contended(l, 100));   /* one of two: not at the cap yet */
    ck_assert_int_eq(limits_free(l, 5, 2), 1);
    ck_assert_int_eq(limits_try(l, 1, 5, 2, 100), TN_OK);   /* claims the second place */
    ck_assert(limits_contended(l, 100));    /* at the cap: look before reading for a second */
    ck_assert(limits_contended(l, 1099));
    ck_assert(!limits_contended(l, 1100));
    ck_assert_int_eq(limits_free(l, 5, 2), 0);
    ck_assert_int_eq(limits_try(l, 2, 5, 2, 100), TN_BUSY);
    ck_assert_int_eq(limits_enter(l, 2, 5, "t", 2, 100), TN_BUSY);
    /* the claim is kept by the chain's own limits_enter for the same worker */
    ck_assert_int_eq(limits_enter(l, 1, 5, "t", 2, 100), TN_OK);
    limits_entry e;
    ck_assert(limits_get(l, 5, &e));
    ck_assert_int_eq(e.inflight, 2);
    ck_assert_int_eq(e.rejected, 1);   /* the enter refused; a try counts nothing */

    /* Nobody waits: leaving writes nothing. */
    limits_leave(l, 1, 5, 200);
    ck_assert(!woken(l));
    ck_assert_int_eq(limits_try(l, 1, 5, 2, 100), TN_OK);
    limits_wait(l, 5, 1);
    limits_wait(l, 5, 1);
    ck_assert(limits_get(l, 5, &e));
    ck_assert_int_eq(e.waiting, 2);
    ck_assert(!woken(l));
    /* A claim given back unused (the request went elsewhere) wakes them, as a leave does. */
    limits_unclaim(l, 1, 5);
    ck_assert(woken(l));
    ck_assert_int_eq(limits_free(l, 5, 2), 1);
    limits_unclaim(l, 1, 5);   /* twice: nothing to give back */
    ck_assert(!woken(l));
    limits_leave(l, 0, 5, 200);
    ck_assert(woken(l));
    ck_assert_int_eq(limits_free(l, 5, 2), 2);
    /* A worker that died holding a claim: the master gives its place back. */
    ck_assert_int_eq(limits_try(l, 7, 5, 1, 100), TN_OK);
    ck_assert_int_eq(limits_free(l, 5, 1), 0);
    limits_release_worker(l, 7);
    ck_assert(woken(l));
    ck_assert_int_eq(limits_free(l, 5, 1), 1);
    /* When they stop waiting, leaving is silent again; the count never goes below zero. */
    limits_wait(l, 5, -1);
    limits_wait(l, 5, -1);
    limits_wait(l, 5, -1);
    ck_assert(limits_get(l, 5, &e));
    ck_assert_int_eq(e.waiting, 0);
    ck_assert_int_eq(limits_enter(l, 0, 5, "t", 2, 100), TN_OK);
    limits_leave(l, 0, 5, 200);
    ck_assert(!woken(l));
    /* No cap: always room, nothing claimed to count */
    ck_assert_int_eq(limits_free(l, 5, 0), 1);
    limits_destroy(l);
}
END_TEST

/* kB of shared memory this process has in its pages (RssShmem), -1 if unknown. */
static long rss_shmem_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "RssShmem: %ld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb;
}

/* The status page's read of the table (limits_top) finds every counted tenant and reads
 * only pages that exist: a host with three tenants does not get the whole table's 14 MB. */
START_TEST(test_limits_top_pages)
{
    limits *l = limits_create();
    ck_assert_ptr_nonnull(l);
    int64_t ids[] = {7, 90001, 123456789};
    for (int k = 0; k < 3; k++)
        for (int n = 0; n <= k; n++) {
            ck_assert_int_eq(limits_enter(l, 0, ids[k], k == 0 ? "a" : k == 1 ? "b" : "c", 0, 0),
                             TN_OK);
            limits_leave(l, 0, ids[k], 200);
        }
    long before = rss_shmem_kb();
    limits_entry top[10];
    int n = limits_top(l, top, 10);
    long after = rss_shmem_kb();
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(top[0].slug, "c");   /* most requests first */
    ck_assert_int_eq(top[0].requests, 3);
    ck_assert_str_eq(top[2].slug, "a");
    if (before >= 0 && after >= 0)
        ck_assert_msg(after - before < 1024, "limits_top faulted in %ld kB", after - before);
    limits_destroy(l);
}
END_TEST

/* More tenants than slots: the first ones are counted, the rest declined (each after at most
 * LIMITS_PROBE slots), and every one is still capped, counted or not. */
START_TEST(test_limits_table_full)
{
    limits *l = limits_create();
    ck_assert_ptr_nonnull(l);
    int counted = 0, declined = 0;
    int64_t uncounted = 0;
    for (int64_t id = 1; id <= LIMITS_SLOTS + 2000; id++) {
        int rc = limits_enter(l, 0, id, "t", 0, 0);
        ck_assert(rc == TN_OK || rc == TN_DECLINED);
        if (rc == TN_OK) {
            counted++;
        } else {
            declined++;
            uncounted = id;
        }
        limits_leave(l, 0, id, 200);
    }
    ck_assert_int_ge(counted, LIMITS_SLOTS * 9 / 10);
    ck_assert_int_le(counted, LIMITS_SLOTS);
    ck_assert_int_ge(declined, 2000);
    limits_entry e;
    ck_assert(limits_get(l, 1, &e));
    ck_assert_int_eq(e.requests, 1);
    ck_assert_int_eq(limits_enter(l, 0, 1, "t", 1, 0), TN_OK);
    ck_assert_int_eq(limits_enter(l, 1, 1, "t", 1, 0), TN_BUSY);   /* its cap still holds */
    limits_leave(l, 0, 1, 200);
    /* a tenant the table has no room for: admitted uncounted, and capped all the same */
    ck_assert(!limits_get(l, uncounted, &e));
    ck_assert_int_eq(limits_enter(l, 3, uncounted, "u", 2, 0), TN_DECLINED);
    ck_assert_int_eq(limits_enter(l, 4, uncounted, "u", 2, 0), TN_DECLINED);
    ck_assert_int_eq(limits_enter(l, 5, uncounted, "u", 2, 0), TN_BUSY);
    limits_leave(l, 4, uncounted, 200);
    ck_assert_int_eq(limits_enter(l, 5, uncounted, "u", 2, 0), TN_DECLINED);
    limits_leave(l, 3, uncounted, 200);
    limits_leave(l, 5, uncounted, 200);
    /* a dead worker's slot given back by the master frees its place */
    ck_assert_int_eq(limits_enter(l, 6, uncounted, "u", 1, 0), TN_DECLINED);
    ck_assert_int_eq(limits_enter(l, 7, uncounted, "u", 1, 0), TN_BUSY);
    limits_leave(l, 6, uncounted, 0);
    ck_assert_int_eq(limits_enter(l, 7, uncounted, "u", 1, 0), TN_DECLINED);
    limits_leave(l, 7, uncounted, 200);
    limits_destroy(l);
}
END_TEST

/* Four processes enter and leave one tenant with a cap of 2 as fast as they can, counting in
 * shared memory how many are inside at once: never more than the cap (the publish-then-count
 * of limits.h), and they do get in. */
START_TEST(test_limits_cap_concurrent)
{
    limits *l = limits_create();
    ck_assert_ptr_nonnull(l);
    struct shared {
        int inside, worst, admitted[4];
    } *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            for (int i = 0; i < 20000; i++) {
                if (limits_enter(l, 10 + k, 77777, "c", 2, 0) == TN_BUSY)
                    continue;
                int now = __atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
                int w = __atomic_load_n(&sh->worst, __ATOMIC_RELAXED);
                while (now > w && !__atomic_compare_exchange_n(&sh->worst, &w, now, false,
                                                                __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
                    ;
                sh->admitted[k]++;
                for (volatile int spin = 0; spin < 100; spin++)   /* a request, briefly */
                    ;
                __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
                limits_leave(l, 10 + k, 77777, 200);
            }
            _exit(0);
        }
        ck_assert_int_ge(kids[k], 0);
    }
    for (int k = 0; k < 4; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ck_assert_int_le(sh->worst, 2);
    /* progress, not fairness: a process that loses every race to the others may be refused
     * each time (two entering at once may both refuse; the cap is what is guaranteed) */
    int total = 0;
    for (int k = 0; k < 4; k++)
        total += sh->admitted[k];
    ck_assert_int_gt(total, 4000);   /* of 80,000 tries; about 19,000 seen */
    limits_entry e;
    ck_assert(limits_get(l, 77777, &e));
    ck_assert_int_eq(e.inflight, 0);
    ck_assert_int_le(e.max_seen, 2);
    munmap(sh, sizeof(*sh));
    limits_destroy(l);
}
END_TEST

static int during_run(tn_request *r, void *arg)
{
    (void)arg;
    /* Inside a tenant's work, acting for another tenant is refused. */
    ck_assert_int_eq(tn_run("acme", during_run, NULL), TN_DENIED);
    return tn_tenant_of(r) != NULL && strcmp(tn_tenant_slug(tn_tenant_of(r)), "acme") == 0
               ? TN_OK
               : TN_ERR;
}

/* Two apps behind one chain (fcgi/route.c's pick, reduced): /api goes to the second. Each
 * app's init adds a stage; a stage runs for its own app's requests only. */
static int stage_runs[2];
static char mount_seen[64];
static int count_stage(tn_request *r, void *arg)
{
    (void)r;
    stage_runs[(intptr_t)arg]++;
    return TN_OK;
}
static int deny_stage(tn_request *r, void *arg)
{
    (void)arg;
    tn_send_error(r, 401, "no key");
    return TN_DONE;
}
static int mount_handler(tn_request *r)
{
    snprintf(mount_seen, sizeof(mount_seen), "%s", tn_mount(r));
    return handler(r);
}
static chain_app app_root = {.handle = mount_handler}, app_api = {.handle = mount_handler};
static const chain_app *pick_two(void *ctx, tn_request *r)
{
    (void)ctx;
    if (strncmp(r->path, "/api", 4) == 0 && (r->path[4] == '\0' || r->path[4] == '/')) {
        r->mount = "/api";
        r->path = r->path[4] ? r->path + 4 : "/";
        return &app_api;
    }
    r->mount = "";
    return &app_root;
}

START_TEST(test_stages_per_app)
{
    chain_fini();
    chain_env env = {.cfg = &cfg, .max_children = 4, .lim = lim, .pick = pick_two};
    ck_assert_int_eq(chain_init(&env), TN_OK);
    ck_assert_int_eq(tn_stage_add("outside", count_stage, NULL), TN_ERR);   /* init only */
    chain_stages_open(&app_root);
    ck_assert_int_eq(tn_stage_add("root-count", count_stage, (void *)0), TN_OK);
    chain_stages_close(&app_root);
    chain_stages_open(&app_api);
    ck_assert_int_eq(tn_stage_add("api-count", count_stage, (void *)1), TN_OK);
    ck_assert_int_eq(tn_stage_add("api-auth", deny_stage, NULL), TN_OK);
    chain_stages_close(&app_api);
    ck_assert_int_eq(app_root.nstages, 1);
    ck_assert_int_eq(app_api.first_stage, 1);
    ck_assert_int_eq(app_api.nstages, 2);

    struct fake f = {0};
    stage_runs[0] = stage_runs[1] = 0;
    /* The root app: its stage only, never the api's auth stage. */
    ck_assert_int_eq(run(&f, "acme.example.com", "/apix/1", NULL, NULL), 200);
    ck_assert_str_eq(handler_path, "/apix/1");
    ck_assert_str_eq(mount_seen, "");
    ck_assert_int_eq(stage_runs[0], 1);
    ck_assert_int_eq(stage_runs[1], 0);
    /* The api: its two stages, the second answers; the root's stage does not run. */
    ck_assert_int_eq(run(&f, "acme.example.com", "/api/x", NULL, NULL), 401);
    ck_assert_int_eq(stage_runs[0], 1);
    ck_assert_int_eq(stage_runs[1], 1);
    /* The tenant path prefix first, then the mount: /t/acme/api/x is acme's /api, path /x. */
    chain_stages_open(&app_api);   /* the api without its auth stage, for the next request */
    ck_assert_int_eq(tn_stage_add("api-count2", count_stage, (void *)1), TN_OK);
    chain_stages_close(&app_api);
    ck_assert_int_eq(run(&f, "other.test", "/t/acme/api/x", NULL, NULL), 200);
    ck_assert_str_eq(handler_slug, "acme");
    ck_assert_str_eq(handler_path, "/x");
    ck_assert_str_eq(mount_seen, "/api");
    ck_assert_int_eq(stage_runs[0], 1);
    ck_assert_int_eq(stage_runs[1], 2);
    buf_free(&f.out);
}
END_TEST

static int runs_seen;

static int count_run(tn_request *r, void *arg)
{
    (void)r;
    (void)arg;
    runs_seen++;
    return TN_OK;
}

START_TEST(test_tn_run)
{
    ck_assert_int_eq(tn_run("acme", during_run, NULL), TN_OK);
    ck_assert_int_eq(tn_run("nobody", during_run, NULL), TN_NOTFOUND);
    ck_assert_int_eq(tn_run("../x", during_run, NULL), TN_NOTFOUND);
    /* A tenant being deleted is answered as unknown, and nothing runs in its context (its
     * storage is only kept for the grace period). */
    registry *reg;
    char err[256];
    ck_assert_int_eq(registry_open(cfg.registry_uri, cfg.gen_path, &reg, err, sizeof(err)), TN_OK);
    registry_new d = {.slug = "doomed", .name = "Doomed", .state = TENANT_ACTIVE};
    ck_assert_msg(registry_create(reg, &d, NULL, err, sizeof(err)) == TN_OK, "%s", err);
    runs_seen = 0;
    ck_assert_int_eq(tn_run("doomed", count_run, NULL), TN_OK);
    ck_assert_int_eq(runs_seen, 1);
    ck_assert_msg(registry_set_state(reg, "doomed", TENANT_DELETING, err, sizeof(err)) == TN_OK,
                  "%s", err);
    registry_close(reg);
    ck_assert_int_eq(tn_run("doomed", count_run, NULL), TN_NOTFOUND);
    ck_assert_int_eq(runs_seen, 1);
}
END_TEST

START_TEST(test_context_must_be_empty)
{
    /* A request that starts while another's context is still set stops the process. */
    struct fake f = {0};
    f.params[0][0] = "TENANT_HOST";
    f.params[0][1] = "acme.example.com";
    f.n = 1;
    tn_request r1, r2;
    request_init(&r1, &fake_tp, &f, req_arena, &headers, &out, 1 << 20, "a", 0);
    chain_run(&r1, &handler_app);
    /* no chain_finish(&r1): the next request must not run */
    request_init(&r2, &fake_tp, &f, req_arena, &headers, &out, 1 << 20, "b", 0);
    chain_run(&r2, &handler_app);
}
END_TEST

/* A key made in the registry as `tenancy key create` makes it: the token into tok. */
static int64_t make_key(const char *slug, bool ro, int64_t created, int64_t expires,
                        char tok[KEY_TOKEN_MAX])
{
    registry *reg;
    char err[256], hash[KEY_HASH_MAX], prefix[KEY_PREFIX_MAX];
    ck_assert_int_eq(key_token_new(tok), TN_OK);
    ck_assert(key_token_shape(tok));
    key_token_hash(tok, hash);
    key_token_prefix(tok, prefix);
    ck_assert_int_eq(registry_open(cfg.registry_uri, cfg.gen_path, &reg, err, sizeof(err)), TN_OK);
    registry_key_new k = {.slug = slug, .prefix = prefix, .hash = hash, .read_only = ro,
                          .created_at = created, .expires_at = expires};
    int64_t id = 0;
    ck_assert_msg(registry_key_create(reg, &k, &id, err, sizeof(err)) == TN_OK, "%s", err);
    registry_close(reg);
    return id;
}

static int check_key(const char *host, const char *token)
{
    struct fake f = {0};
    key_token = token;
    key_rc = -100;
    key_error[0] = '\0';
    ck_assert_int_eq(run(&f, host, "/", NULL, NULL), 200);
    key_token = NULL;
    buf_free(&f.out);
    return key_rc;
}

/* tn_key_check: the request's own tenant's live keys only; its flags; another tenant's key,
 * a revoked, an expired, a malformed one and a central request refused with a reason; a
 * revoke seen by the next request although the answer was cached; last_used_at recorded. */
START_TEST(test_key_check)
{
    int64_t now = (int64_t)time(NULL);
    char rw[KEY_TOKEN_MAX], ro[KEY_TOKEN_MAX], other[KEY_TOKEN_MAX], old[KEY_TOKEN_MAX];
    int64_t rw_id = make_key("acme", false, now, 0, rw);
    make_key("acme", true, now, now + 3600, ro);
    make_key("moving", false, now, 0, other);
    make_key("acme", false, now - 100, now - 1, old);

    ck_assert_int_eq(check_key("acme.example.com", rw), TN_OK);
    ck_assert_uint_eq(key_flags, 0);
    ck_assert_int_eq(check_key("acme.example.com", rw), TN_OK);   /* now from the cache */
    ck_assert_int_eq(check_key("acme.example.com", ro), TN_OK);
    ck_assert_uint_eq(key_flags, TN_KEY_READ_ONLY);
    ck_assert_int_eq(check_key("acme.example.com", other), TN_DENIED);
    ck_assert_uint_eq(key_flags, 0);
    ck_assert_str_eq(key_error, "unknown API key");
    ck_assert_int_eq(check_key("moving.example.com", other), TN_OK);
    ck_assert_int_eq(check_key("moving.example.com", rw), TN_DENIED);
    ck_assert_int_eq(check_key("acme.example.com", old), TN_DENIED);
    ck_assert_str_eq(key_error, "this API key has expired");
    ck_assert_int_eq(check_key("acme.example.com", "tnk_short"), TN_INVALID);
    ck_assert_int_eq(check_key("acme.example.com", ""), TN_INVALID);
    char bad[KEY_TOKEN_MAX];
    memcpy(bad, rw, sizeof(bad));
    bad[10] = '!';
    ck_assert_int_eq(check_key("acme.example.com", bad), TN_INVALID);
    ck_assert_int_eq(check_key("admin.example.com", rw), TN_NOTFOUND);
    ck_assert_str_ne(key_error, "");

    /* revoked (as `tenancy key revoke`: a registry change, a generation bump) */
    registry *reg;
    char err[256];
    ck_assert_int_eq(registry_open(cfg.registry_uri, cfg.gen_path, &reg, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(registry_key_revoke(reg, "acme", rw_id, NULL, now, NULL, NULL, err,
                                         sizeof(err)), TN_OK);
    ck_assert_int_eq(check_key("acme.example.com", rw), TN_DENIED);
    ck_assert_str_eq(key_error, "this API key was revoked");
    ck_assert_int_eq(check_key("acme.example.com", ro), TN_OK);

    /* last_used_at of a key used */
    char hash[KEY_HASH_MAX];
    key_token_hash(ro, hash);
    tenant_rec *t = NULL;
    ck_assert_int_eq(registry_fetch(reg, LK_SLUG, "acme", &t), TN_OK);
    registry_key k;
    ck_assert_int_eq(registry_key_find(reg, t->id, hash, &k), TN_OK);
    ck_assert(k.last_used_at >= now);
    free(t);
    registry_close(reg);
}
END_TEST

/* The token's form and the constant-time comparison. */
START_TEST(test_key_token)
{
    char a[KEY_TOKEN_MAX], b[KEY_TOKEN_MAX], p[KEY_PREFIX_MAX];
    ck_assert_int_eq(key_token_new(a), TN_OK);
    ck_assert_int_eq(key_token_new(b), TN_OK);
    ck_assert_uint_eq(strlen(a), KEY_TOKEN_LEN);
    ck_assert_str_ne(a, b);
    ck_assert(key_token_shape(a));
    key_token_prefix(a, p);
    ck_assert(key_prefix_shape(p));
    ck_assert(!key_token_shape(p));
    ck_assert(!key_prefix_shape(a));
    char longer[KEY_TOKEN_MAX + 1];
    snprintf(longer, sizeof(longer), "%sA", a);
    ck_assert(!key_token_shape(longer));
    ck_assert(!key_token_shape("xyz_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    ck_assert(key_token_shape("tnk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    ck_assert(token_equal(a, a));
    ck_assert(!token_equal(a, b));
    ck_assert(!token_equal(a, p));
    ck_assert(!token_equal("", a));
    char h[KEY_HASH_MAX];
    key_token_hash("tnk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", h);
    ck_assert_uint_eq(strlen(h), 64);
}
END_TEST

/* The cache: answers per (tenant, hash), flushed by a new generation, expired by the TTL. */
START_TEST(test_key_cache)
{
    key_cache *c = key_cache_create(64, 1000, 100);
    const char *h1 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    key_cache_sync(c, 1);
    key_answer a = {.found = true, .key_id = 7, .flags = TN_KEY_READ_ONLY};
    ck_assert_ptr_nonnull(key_cache_put(c, 1, h1, &a, 0));
    ck_assert_ptr_nonnull(key_cache_get(c, 1, h1, 999));
    ck_assert_ptr_null(key_cache_get(c, 2, h1, 0));        /* another tenant */
    ck_assert_ptr_null(key_cache_get(c, 1, h1, 1000));     /* past its TTL */
    ck_assert_ptr_nonnull(key_cache_put(c, 1, h1, &a, 0));
    key_cache_sync(c, 1);
    ck_assert_ptr_nonnull(key_cache_get(c, 1, h1, 0));
    key_cache_sync(c, 2);
    ck_assert_ptr_null(key_cache_get(c, 1, h1, 0));        /* flushed by the generation */
    key_answer none = {.found = false};
    key_answer *n = key_cache_put(c, 1, h1, &none, 0);
    ck_assert(!key_cache_touch_due(n, 0, 60000));
    ck_assert_ptr_null(key_cache_get(c, 1, h1, 100));      /* a negative answer lives less */
    key_answer *p = key_cache_put(c, 1, h1, &a, 0);
    ck_assert(key_cache_touch_due(p, 5, 60000));
    ck_assert(!key_cache_touch_due(p, 60004, 60000));
    ck_assert(key_cache_touch_due(p, 60005, 60000));
    key_cache_destroy(c);
    /* Two sets of four ways (tenant 0: a set is picked by the first 16 hex digits alone):
     * four keys of one set all stay, a fifth replaces the one that expires first. */
    c = key_cache_create(8, 1000, 100);
    key_cache_sync(c, 1);
    char hk[5][65];
    for (int i = 0; i < 5; i++) {
        memset(hk[i], 'a', 64);
        hk[i][64] = '\0';
        hk[i][15] = (char)('0' + 2 * i);   /* even: all in set 0 */
        ck_assert_ptr_nonnull(key_cache_put(c, 0, hk[i], &a, i == 4 ? 20 : 10 - i));
    }
    for (int i = 0; i < 5; i++)
        if (i == 3)   /* put at 7, the first to expire */
            ck_assert_ptr_null(key_cache_get(c, 0, hk[i], 50));
        else
            ck_assert_ptr_nonnull(key_cache_get(c, 0, hk[i], 50));
    key_cache_destroy(c);
    /* One set of four ways: every tenant's answers share it, so only the tenant compared in
     * the slot keeps one tenant's key from answering for another (the set alone may not). */
    c = key_cache_create(4, 1000, 100);
    key_cache_sync(c, 1);
    ck_assert_ptr_nonnull(key_cache_put(c, 1, h1, &a, 0));
    ck_assert_ptr_null(key_cache_get(c, 2, h1, 0));
    ck_assert_ptr_nonnull(key_cache_get(c, 1, h1, 0));
    key_cache_destroy(c);
    key_cache *off = key_cache_create(0, 1000, 100);
    ck_assert_ptr_null(key_cache_put(off, 1, h1, &a, 0));
    ck_assert_ptr_null(key_cache_get(off, 1, h1, 0));
    key_cache_destroy(off);
}
END_TEST

Suite *chain_suite(void);
Suite *chain_suite(void)
{
    Suite *s = suite_create("chain");
    TCase *tc = tcase_create("chain");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_resolvers);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_header_untrusted_source);
    tcase_add_test(tc, test_cap_and_theme);
    tcase_add_test(tc, test_cap_of_whole_pool);
    tcase_add_test(tc, test_peek_tenant);
    tcase_add_test(tc, test_limits_wait_and_wake);
    tcase_add_test(tc, test_limits_table_full);
    tcase_add_test(tc, test_limits_top_pages);
    tcase_add_test(tc, test_limits_cap_concurrent);
    tcase_add_test(tc, test_stages_per_app);
    tcase_add_test(tc, test_tn_run);
    tcase_add_test(tc, test_key_check);
    tcase_add_test(tc, test_key_token);
    tcase_add_test(tc, test_key_cache);
    suite_add_tcase(s, tc);
    /* Expects the process to abort: fork mode only (tagged, so that CK_FORK=no runs such as
     * `make check-valgrind` leave it out with CK_EXCLUDE_TAGS=fork). The fixture runs in the
     * parent (unchecked): the aborted child never reaches a teardown, and a checked one left
     * the test's temp folder behind at every run. */
    tc = tcase_create("context");
    tcase_set_tags(tc, "fork");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test_raise_signal(tc, test_context_must_be_empty, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
