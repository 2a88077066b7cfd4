/*
 * check_handler.c — fcgi/handler.c: the worker's ordered list of request handlers. The
 * first handler that claims a request gets it, in the order added; the one without a claim
 * function takes the rest and must come last; init runs in order with each handler's own
 * options, fini in reverse, and a failing init names its handler. In a job worker only the
 * handlers that run host jobs are set up (handlers_init_jobs), and a host job's app name
 * finds its handler (handlers_job) only once that handler is set up. Whether anything on
 * the host can queue a host job (handlers_queue_jobs) is each job handler's own answer.
 *
 * Each case starts with an empty list and no config part (setup), also when the cases run
 * in one process (CK_FORK=no).
 */
#include "core/first.h"
#include "fcgi/handler.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a request over a fake transport ---------------------------------------------------------- */

struct fake {
    const char *host, *uri;
};

static const char *fparam(void *tx, const char *name)
{
    struct fake *f = tx;
    if (strcmp(name, "TENANT_HOST") == 0)
        return f->host;
    if (strcmp(name, "REQUEST_URI") == 0)
        return f->uri;
    return NULL;
}

static int fread_(void *tx, char *p, int n)
{
    (void)tx, (void)p, (void)n;
    return 0;
}

static int fwrite_(void *tx, const char *p, size_t n)
{
    (void)tx, (void)p, (void)n;
    return 0;
}

static const tn_transport fake_tp = {fparam, fread_, fwrite_};

/* The handler the list gives a request for host and uri ("-": none claims it). */
static const char *claimant(const char *host, const char *uri)
{
    static arena *a;
    static buf h, o;
    if (a == NULL)
        a = arena_create(0);
    struct fake f = {host, uri};
    tn_request r;
    request_init(&r, &fake_tp, &f, a, &h, &o, 0, "t", 0);
    const tn_handler *hd = handlers_claim(&r);
    arena_reset(a);
    return hd != NULL ? hd->name : "-";
}

/* ---- three handlers: by path, by routing host, and the rest --------------------------------- */

static char trace[64];   /* what init and fini did, in order */

static void note(const char *what)
{
    size_t n = strlen(trace);
    snprintf(trace + n, sizeof(trace) - n, "%s ", what);
}

static int init_path(const tn_handler_env *env)
{
    (void)env;
    note("+path");
    return TN_OK;
}
static void fini_path(void) { note("-path"); }
static bool claims_path(tn_request *r) { return strncmp(r->path, "/_p/", 4) == 0; }

static const char *const hparams[] = {"TENANT_HOST"};
static int init_host(const tn_handler_env *env)
{
    note(env->conf == NULL ? "+host" : "+host(conf)");
    return TN_OK;
}
static void fini_host(void) { note("-host"); }
static bool claims_host(tn_request *r)
{
    return request_route_host(r, hparams, 1) == RH_OK && strcmp(r->route_host, "panel.test") == 0;
}

static int init_fail(const tn_handler_env *env)
{
    (void)env;
    note("+fail");
    return TN_NOMEM;
}

static int handle(tn_request *r) { return r->status; }

static const tn_handler by_path = {"by path", init_path, fini_path, claims_path, handle};
static const tn_handler by_host = {"by host", init_host, fini_host, claims_host, handle};
static const tn_handler rest = {"the rest", NULL, NULL, NULL, handle};
static const tn_handler failing = {"failing", init_fail, NULL, claims_path, handle};

START_TEST(test_first_claimant_in_order)
{
    ck_assert_int_eq(handlers_add(&by_host, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_OK);
    ck_assert_str_eq(claimant("other.test", "/x"), "-");   /* nobody takes the rest yet */
    ck_assert_int_eq(handlers_add(&rest, NULL), TN_OK);
    /* both claim it: the one added first wins */
    ck_assert_str_eq(claimant("PANEL.test.:8443", "/_p/status"), "by host");
    ck_assert_str_eq(claimant("other.test", "/_p/status"), "by path");
    ck_assert_str_eq(claimant("panel.test", "/"), "by host");
    ck_assert_str_eq(claimant("other.test", "/"), "the rest");
    ck_assert_str_eq(claimant("[::1]", "/"), "the rest");   /* an invalid host: the chain's */
    ck_assert_str_eq(claimant(NULL, "/"), "the rest");
}
END_TEST

START_TEST(test_nothing_after_the_rest)
{
    ck_assert_int_eq(handlers_add(&rest, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_INVALID);
    ck_assert_str_eq(claimant("other.test", "/_p/x"), "the rest");
}
END_TEST

START_TEST(test_list_is_bounded)
{
    for (int i = 0; i < TN_MAX_HANDLERS; i++)
        ck_assert_int_eq(handlers_add(&by_path, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_INVALID);
}
END_TEST

/* ---- init and fini ----------------------------------------------------------------------------- */

static int part_finish(tn_config *gen, void *obj, char *err, size_t errlen)
{
    (void)gen, (void)obj, (void)err, (void)errlen;
    return TN_OK;
}

struct part_opts {
    int n;
};
static const conf_opt part_table[] = {
    {"test.n", CONF_INT, offsetof(struct part_opts, n), "7", 0, 100, NULL, 0, "a number"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};
static const config_part part = {"test", part_table, sizeof(struct part_opts), part_finish};

static tn_config *load_config(void)
{
    char path[] = "/tmp/tenancyd-handler-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char text[] = "app = /x.so\ntest.n = 42\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    conf_error err;
    tn_config *c = config_load(path, &err);
    unlink(path);
    ck_assert_msg(c != NULL, "%s", err.msg);
    return c;
}

static const struct part_opts *seen_conf;
static int init_conf(const tn_handler_env *env)
{
    seen_conf = env->conf;
    return TN_OK;
}
static const tn_handler with_conf = {"with conf", init_conf, NULL, claims_path, handle};

START_TEST(test_init_order_and_conf)
{
    ck_assert_int_eq(config_add_part(&part), TN_OK);
    tn_config *cfg = load_config();
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&with_conf, &part), TN_OK);
    ck_assert_int_eq(handlers_add(&by_host, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&rest, NULL), TN_OK);
    tn_handler_env base = {.config_path = "x"};
    const char *failed = NULL;
    ck_assert_int_eq(handlers_init(cfg, &base, &failed), TN_OK);
    ck_assert_ptr_null(failed);
    ck_assert_str_eq(trace, "+path +host ");
    ck_assert_ptr_nonnull(seen_conf);
    ck_assert_ptr_eq(seen_conf, config_part_of(cfg, &part));
    ck_assert_int_eq(seen_conf->n, 42);
    handlers_fini();
    ck_assert_str_eq(trace, "+path +host -host -path ");
    handlers_fini();   /* twice: nothing more */
    ck_assert_str_eq(trace, "+path +host -host -path ");
    config_free(cfg);
}
END_TEST

START_TEST(test_failing_init)
{
    ck_assert_int_eq(config_add_part(&part), TN_OK);
    tn_config *cfg = load_config();
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&failing, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&by_host, NULL), TN_OK);
    tn_handler_env base = {0};
    const char *failed = NULL;
    ck_assert_int_eq(handlers_init(cfg, &base, &failed), TN_NOMEM);
    ck_assert_str_eq(failed, "failing");
    /* the one set up before it is finished again; the one after it never started */
    ck_assert_str_eq(trace, "+path +fail -path ");
    config_free(cfg);
}
END_TEST

/* ---- host jobs ------------------------------------------------------------------------------ */

static int init_jobs(const tn_handler_env *env)
{
    (void)env;
    note("+jobs");
    return TN_OK;
}
static void fini_jobs(void) { note("-jobs"); }
static int run_job(const tn_handler_job *j, char *err, size_t errlen)
{
    (void)j, (void)err, (void)errlen;
    return TN_OK;
}
static const tn_handler with_jobs = {"with jobs", init_jobs, fini_jobs, claims_host, handle,
                                     "host.mod", run_job};

START_TEST(test_job_workers_set_up_job_handlers_only)
{
    ck_assert_int_eq(config_add_part(&part), TN_OK);
    tn_config *cfg = load_config();
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&with_jobs, NULL), TN_OK);
    ck_assert_int_eq(handlers_add(&rest, NULL), TN_OK);
    ck_assert_ptr_null(handlers_job("host.mod"));   /* not set up yet */
    tn_handler_env base = {0};
    const char *failed = NULL;
    ck_assert_int_eq(handlers_init_jobs(cfg, &base, &failed), TN_OK);
    ck_assert_str_eq(trace, "+jobs ");
    ck_assert_ptr_eq(handlers_job("host.mod"), &with_jobs);
    ck_assert_ptr_null(handlers_job("host.other"));
    ck_assert_ptr_null(handlers_job(""));
    handlers_fini();
    ck_assert_str_eq(trace, "+jobs -jobs ");
    ck_assert_ptr_null(handlers_job("host.mod"));
    /* a worker sets every handler up, the job one included, and finishes them in reverse */
    trace[0] = '\0';
    ck_assert_int_eq(handlers_init(cfg, &base, &failed), TN_OK);
    ck_assert_str_eq(trace, "+path +jobs ");
    handlers_fini();
    ck_assert_str_eq(trace, "+path +jobs -jobs -path ");
    config_free(cfg);
}
END_TEST

/* Whether anything can queue a host job: none without a job handler; a job handler without
 * a predicate always; one with a predicate as its own options say (test.n = 42 here). */
static bool queues_if_42(const void *conf)
{
    const struct part_opts *o = conf;
    return o != NULL && o->n == 42;
}
static bool queues_never(const void *conf)
{
    (void)conf;
    return false;
}
static const tn_handler jobs_42 = {"jobs 42", NULL, NULL, claims_host, handle, "host.a", run_job,
                                   queues_if_42};
static const tn_handler jobs_off = {"jobs off", NULL, NULL, claims_path, handle, "host.b",
                                    run_job, queues_never};

START_TEST(test_queue_jobs)
{
    ck_assert_int_eq(config_add_part(&part), TN_OK);
    tn_config *cfg = load_config();
    ck_assert(!handlers_queue_jobs(cfg));   /* no handler */
    ck_assert_int_eq(handlers_add(&by_path, NULL), TN_OK);
    ck_assert(!handlers_queue_jobs(cfg));   /* none runs jobs */
    ck_assert_int_eq(handlers_add(&jobs_off, &part), TN_OK);
    ck_assert(!handlers_queue_jobs(cfg));   /* its options say no */
    ck_assert_int_eq(handlers_add(&jobs_42, &part), TN_OK);
    ck_assert(handlers_queue_jobs(cfg));    /* test.n = 42 */
    handlers_clear();
    ck_assert_int_eq(handlers_add(&jobs_42, NULL), TN_OK);
    ck_assert(!handlers_queue_jobs(cfg));   /* no options of its own: the predicate says no */
    handlers_clear();
    ck_assert_int_eq(handlers_add(&with_jobs, NULL), TN_OK);
    ck_assert(handlers_queue_jobs(cfg));    /* no predicate: always */
    config_free(cfg);
}
END_TEST

static void setup(void)
{
    handlers_clear();
    config_clear_parts();
    trace[0] = '\0';
    seen_conf = NULL;
}

static void teardown(void)
{
    handlers_clear();
    config_clear_parts();
}

Suite *handler_suite(void);
Suite *handler_suite(void)
{
    Suite *s = suite_create("handler");
    TCase *tc = tcase_create("list");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_first_claimant_in_order);
    tcase_add_test(tc, test_nothing_after_the_rest);
    tcase_add_test(tc, test_list_is_bounded);
    tcase_add_test(tc, test_init_order_and_conf);
    tcase_add_test(tc, test_failing_init);
    tcase_add_test(tc, test_job_workers_set_up_job_handlers_only);
    tcase_add_test(tc, test_queue_jobs);
    suite_add_tcase(s, tc);
    return s;
}
