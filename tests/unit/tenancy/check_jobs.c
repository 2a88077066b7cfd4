/*
 * check_jobs.c — tenancy/jobs.c: the job store against SQLite (a fresh file per test) and a
 * real PostgreSQL (TENANCY_TEST_PG; schema "tenancy" dropped before each test), one set of
 * cases for both: enqueue, claim, finish; fail, backoff, dead; retry and cancel; unique keys;
 * leases, recover, reap; release (a deferred job) and the hooks' order; priority; the fair
 * claim (one tenant's 10,000 jobs against 100 tenants' one each) and its cost; the
 * per-tenant cap; delayed jobs; several processes claiming at once; schedules; a tenant's
 * purge; a registry made before the job tables (or before job_hosts); which hosts take hooks
 * (jobs.hooks = auto); a session the server ended (PostgreSQL).
 *
 * Times are given to the store (now_ms), never read from the clock, except for the logged
 * figures of the claim's cost.
 *
 * Owns: these cases. Must not: reach into the job tables except to inspect what the API does
 * not show (the queues' rows, the query plans).
 */
#include "core/first.h"
#include "tenancy/jobs.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/registry.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];
static const char *pg_uri;
static bool backend_pg;
static char uri[512];
static registry *R;
static char err[512];

#define T0 1700000000000LL   /* "now" of the cases, in ms */
#define GRACE 5000
#define LEASE_A "lease-aaaaaaaa"
#define LEASE_B "lease-bbbbbbbb"

void jobs_tests_init(const char *dir, const char *pg);
void jobs_tests_init(const char *dir, const char *pg)
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

/* ---- fixtures ------------------------------------------------------------------------------- */

static void open_registry(void)
{
    int rc = registry_open(uri, NULL, &R, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "registry_open: %s: %s", tn_rc_str(rc), err);
}

static void setup_sqlite(void)
{
    static int n;
    backend_pg = false;
    n++;
    snprintf(uri, sizeof(uri), "sqlite:%s/jobs-%ld-%d.db", tmpdir, (long)getpid(), n);
    open_registry();
    OK(registry_init(R, err, sizeof(err)));
    /* thousands of small commits: written, not flushed one by one (the data is thrown away) */
    OK(registry_defer_sync(R, err, sizeof(err)));
}

static void setup_pg(void)
{
    backend_pg = true;
    snprintf(uri, sizeof(uri), "%s", pg_uri);
    tn_db *d = NULL;
    char e[512];
    ck_assert_msg(db_open(pg_uri, NULL, &d, e, sizeof(e)) == TN_OK, "db_open: %s", e);
    ck_assert_msg(tn_db_exec(d, "DROP SCHEMA IF EXISTS tenancy CASCADE", 0, NULL) == TN_OK,
                  "drop: %s", tn_db_error(d));
    db_close(d);
    open_registry();
    OK(registry_init(R, err, sizeof(err)));
}

static void teardown(void)
{
    registry_close(R);
    R = NULL;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static int64_t tenant(const char *slug)
{
    registry_new t = {.slug = slug, .name = slug, .state = TENANT_ACTIVE};
    int64_t id = 0;
    OK(registry_create(R, &t, &id, err, sizeof(err)));
    return id;
}

typedef struct enq_opts {
    int priority;
    const char *key;
    int64_t run_at;
    int max_attempts;   /* 0: 3 */
    const char *name;   /* NULL: "work.item" */
} enq_opts;

static int enqueue_o(int64_t tid, const enq_opts *o, int64_t *id)
{
    job_new j = {.tenant_id = tid, .name = o->name ? o->name : "work.item", .payload = "{}",
                 .priority = o->priority, .unique_key = o->key, .run_at_ms = o->run_at,
                 .max_attempts = o->max_attempts ? o->max_attempts : 3, .timeout_ms = 30000};
    err[0] = '\0';
    return jobs_enqueue(R, &j, T0, id, err, sizeof(err));
}

/* A job of tenant tid queued now; its id. */
static int64_t enqueue(int64_t tid)
{
    int64_t id = 0;
    enq_opts o = {0};
    OK(enqueue_o(tid, &o, &id));
    ck_assert_int_gt(id, 0);
    return id;
}

/* Claim at `now`; the job's id, or 0 when none was ready (then *next, when given). */
static int64_t claim_at(const char *lease, int cap, int64_t now, int64_t *next, job_rec *out)
{
    job_rec j;
    int64_t nx = -1;
    err[0] = '\0';
    int rc = jobs_claim(R, lease, cap, GRACE, now, out ? out : &j, &nx, err, sizeof(err));
    ck_assert_msg(rc == TN_OK || rc == TN_NOTFOUND, "claim: %s: %s", tn_rc_str(rc), err);
    if (next != NULL)
        *next = nx;
    return rc == TN_OK ? (out ? out : &j)->id : 0;
}

/* The next n claims at `now` take exactly the jobs want[0..n) (in any order: the round
 * robin's). */
static void claims_are(int n, const int64_t *want, int64_t now)
{
    bool taken[8] = {false};
    for (int i = 0; i < n; i++) {
        int64_t id = claim_at(LEASE_A, 0, now, NULL, NULL);
        int k = 0;
        while (k < n && (want[k] != id || taken[k]))
            k++;
        ck_assert_msg(k < n, "claim %d took job %lld, not one of those expected", i,
                      (long long)id);
        taken[k] = true;
    }
}

static int64_t claim(const char *lease) { return claim_at(lease, 0, T0, NULL, NULL); }

static job_rec get(int64_t id)
{
    job_rec j;
    OK(jobs_get(R, id, &j, err, sizeof(err)));
    return j;
}

static int64_t count_of(int64_t tid, int state)
{
    int64_t c[JOB_NSTATES];
    OK(jobs_counts(R, tid, c));
    return c[state];
}

/* A single integer from SQL on the registry's connection (inspection only). */
static int64_t sql_int(const char *sql, int n, const char *const *p)
{
    char v[32];
    int rc = db_query_value(registry_db(R), v, sizeof(v), sql, n, p);
    ck_assert_msg(rc == TN_OK || rc == TN_NOTFOUND, "%s: %s", sql, tn_db_error(registry_db(R)));
    return rc == TN_OK ? atoll(v) : -1;
}

/* ---- the basics ------------------------------------------------------------------------------ */

/* jobs_enqueue_many: one transaction; a job's own refusal is its slot's, the others queued. */
START_TEST(test_enqueue_many)
{
    int64_t a = tenant("many-a"), b = tenant("many-b");
    int64_t holder = 0;
    enq_opts hold = {.key = "held", .name = "hold.key"};
    OK(enqueue_o(a, &hold, &holder));
    job_new j[] = {
        {.tenant_id = a, .name = "work.item", .payload = "1", .max_attempts = 3, .timeout_ms = 30000},
        {.tenant_id = 999999, .name = "work.item", .payload = "2", .max_attempts = 3,
         .timeout_ms = 30000},   /* no such tenant */
        {.tenant_id = b, .name = "bad name!", .payload = "3", .max_attempts = 3,
         .timeout_ms = 30000},   /* refused before the transaction */
        {.tenant_id = b, .name = "work.item", .payload = "4", .max_attempts = 3, .timeout_ms = 30000},
        {.tenant_id = a, .name = "work.item", .payload = "5", .unique_key = "held",
         .max_attempts = 3, .timeout_ms = 30000},   /* its key is held by a queued job */
    };
    int rcs[5] = {-1, -1, -1, -1, -1};
    OK(jobs_enqueue_many(R, j, 5, T0, rcs, err, sizeof(err)));
    ck_assert_int_eq(rcs[0], TN_OK);
    ck_assert_int_eq(rcs[1], TN_NOTFOUND);
    ck_assert_int_eq(rcs[2], TN_INVALID);
    ck_assert_int_eq(rcs[3], TN_OK);
    ck_assert_int_eq(rcs[4], TN_EXISTS);
    char v[64];
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v),
                                    "SELECT count(*) || ':' || min(payload) || max(payload) "
                                    "FROM jobs WHERE name = 'work.item'", 0, NULL), TN_OK);
    ck_assert_str_eq(v, "2:14");
    /* both tenants' queues know they have a job ready */
    ck_assert_int_eq(db_query_value(registry_db(R), v, sizeof(v),
                                    "SELECT count(*) FROM job_queues WHERE next_run_at IS NOT NULL",
                                    0, NULL), TN_OK);
    ck_assert_str_eq(v, "2");
}
END_TEST

START_TEST(test_enqueue_claim_finish)
{
    int64_t acme = tenant("acme");
    job_new j = {.tenant_id = acme, .app = "api", .name = "mail.send",
                 .payload = "{\"to\":\"a@b\"}", .priority = 3, .max_attempts = 2,
                 .timeout_ms = 1000};
    int64_t id = 0;
    OK(jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    job_rec g = get(id);
    ck_assert_int_eq(g.state, JOB_QUEUED);
    ck_assert_str_eq(g.slug, "acme");
    ck_assert_str_eq(g.app, "api");
    ck_assert_str_eq(g.name, "mail.send");
    ck_assert_str_eq(g.payload, "{\"to\":\"a@b\"}");
    ck_assert_str_eq(g.unique_key, "");
    ck_assert_str_eq(g.lease, "");
    ck_assert_int_eq(g.priority, 3);
    ck_assert_int_eq(g.attempts, 0);
    ck_assert_int_eq(g.max_attempts, 2);
    ck_assert_int_eq(g.run_at, T0);
    ck_assert_int_eq(g.created_at, T0);
    ck_assert_int_eq(g.started_at, 0);
    ck_assert_int_eq(count_of(acme, JOB_QUEUED), 1);

    job_rec c;
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 10, NULL, &c), id);
    ck_assert_int_eq(c.state, JOB_RUNNING);
    ck_assert_int_eq(c.attempts, 1);
    ck_assert_str_eq(c.lease, LEASE_A);
    ck_assert_str_eq(c.slug, "acme");
    ck_assert_str_eq(c.payload, "{\"to\":\"a@b\"}");
    ck_assert_int_eq(c.started_at, T0 + 10);
    ck_assert_int_eq(c.lease_until, T0 + 10 + 1000 + GRACE);
    int64_t next = -1;
    ck_assert_int_eq(claim_at(LEASE_B, 0, T0 + 10, &next, NULL), 0);
    ck_assert_int_eq(next, 0);   /* nothing queued */
    ck_assert_int_eq(count_of(acme, JOB_RUNNING), 1);

    OK(jobs_finish(R, id, LEASE_A, T0 + 20, err, sizeof(err)));
    g = get(id);
    ck_assert_int_eq(g.state, JOB_DONE);
    ck_assert_int_eq(g.finished_at, T0 + 20);
    ck_assert_str_eq(g.lease, "");
    ck_assert_int_eq(g.lease_until, 0);
    EXPECT(TN_NOTFOUND, jobs_finish(R, id, LEASE_A, T0 + 30, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_get(R, id + 1000, &g, err, sizeof(err)));

    /* a central job: no tenant, no slug */
    j.tenant_id = 0;
    j.app = NULL;
    OK(jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, NULL, &c), id);
    ck_assert_int_eq(c.tenant_id, 0);
    ck_assert_str_eq(c.slug, "");
    ck_assert_str_eq(c.app, "");
    ck_assert_int_eq(count_of(0, JOB_RUNNING), 1);
    ck_assert_int_eq(count_of(acme, JOB_RUNNING), 0);
    ck_assert_int_eq(count_of(-1, JOB_DONE), 1);
}
END_TEST

START_TEST(test_refusals)
{
    int64_t acme = tenant("acme");
    ck_assert(job_name_valid("a"));
    ck_assert(job_name_valid("mail.send:v2_x-y"));
    ck_assert(job_name_valid("tenancy.created"));
    ck_assert(!job_name_valid(NULL));
    ck_assert(!job_name_valid(""));
    ck_assert(!job_name_valid("Mail"));
    ck_assert(!job_name_valid("1abc"));
    ck_assert(!job_name_valid("a b"));
    ck_assert(!job_name_valid("a/b"));
    char name[80];
    memset(name, 'a', sizeof(name));
    name[64] = '\0';
    ck_assert(job_name_valid(name));
    name[64] = 'a';
    name[65] = '\0';
    ck_assert(!job_name_valid(name));
    for (int s = 0; s < JOB_NSTATES; s++)
        ck_assert_int_eq(job_state_parse(job_state_name(s)), s);
    ck_assert_str_eq(job_state_name(JOB_CANCELLED), "cancelled");
    ck_assert_int_eq(job_state_parse("later"), -1);
    ck_assert_int_eq(job_state_parse(NULL), -1);

    int64_t id = 0;
    job_new j = {.tenant_id = acme, .name = "Bad", .max_attempts = 1, .timeout_ms = 1};
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    ck_assert_msg(strstr(err, "job name 'Bad'") != NULL, "%s", err);
    j.name = "ok";
    j.priority = 101;
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    ck_assert_msg(strstr(err, "priority") != NULL, "%s", err);
    j.priority = -100;
    j.max_attempts = 0;
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    j.max_attempts = 1;
    j.timeout_ms = 0;
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    j.timeout_ms = 1;
    j.app = "a b";
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    j.app = JOB_APP_ALL;
    j.payload = "\xff\xfe";
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    char *big = malloc(JOB_PAYLOAD_MAX + 2);
    memset(big, 'x', JOB_PAYLOAD_MAX + 1);
    big[JOB_PAYLOAD_MAX + 1] = '\0';
    j.payload = big;
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    big[JOB_PAYLOAD_MAX] = '\0';   /* exactly the limit */
    OK(jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    ck_assert_int_eq((int64_t)strlen(get(id).payload), JOB_PAYLOAD_MAX);
    free(big);
    j.payload = NULL;
    char key[JOB_KEY_MAX + 2];
    memset(key, 'k', sizeof(key) - 1);
    key[JOB_KEY_MAX + 1] = '\0';
    j.unique_key = key;
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    j.unique_key = NULL;
    j.tenant_id = -2;
    EXPECT(TN_INVALID, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    j.tenant_id = acme + 100;
    EXPECT(TN_NOTFOUND, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    ck_assert_msg(strstr(err, "no tenant") != NULL, "%s", err);
    /* a tenant being deleted takes hooks only */
    OK(registry_set_state(R, "acme", TENANT_DELETING, err, sizeof(err)));
    j.tenant_id = acme;
    EXPECT(TN_NOTFOUND, jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    ck_assert_msg(strstr(err, "being deleted") != NULL, "%s", err);
    j.name = "tenancy.deleted";
    OK(jobs_enqueue(R, &j, T0, &id, err, sizeof(err)));
    /* leases */
    job_rec c;
    EXPECT(TN_INVALID, jobs_claim(R, "short", 0, 0, T0, &c, NULL, err, sizeof(err)));
    EXPECT(TN_INVALID, jobs_claim(R, "bad lease!", 0, 0, T0, &c, NULL, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_finish(R, id, "x", T0, err, sizeof(err)));
    /* list arguments */
    ck_assert_int_eq(jobs_list(R, -1, -1, 0, 0, NULL, NULL), TN_INVALID);
}
END_TEST

/* ---- failures, retries, cancel ------------------------------------------------------------- */

START_TEST(test_fail_backoff_dead)
{
    int64_t acme = tenant("acme");
    int64_t id = 0;
    enq_opts o = {.max_attempts = 3};
    OK(enqueue_o(acme, &o, &id));
    bool dead = true;
    int64_t now = T0;
    for (int attempt = 1; attempt <= 3; attempt++) {
        job_rec c;
        ck_assert_int_eq(claim_at(LEASE_A, 0, now, NULL, &c), id);
        ck_assert_int_eq(c.attempts, attempt);
        char why[32];
        snprintf(why, sizeof(why), "boom %d", attempt);
        OK(jobs_fail(R, id, LEASE_A, why, now, 60000, &dead, err, sizeof(err)));
        job_rec g = get(id);
        ck_assert_str_eq(g.last_error, why);
        ck_assert_str_eq(g.lease, "");
        if (attempt < 3) {
            ck_assert(!dead);
            ck_assert_int_eq(g.state, JOB_QUEUED);
            int64_t base = 1000LL << (attempt - 1);   /* 1 s, 2 s */
            ck_assert_int_ge(g.run_at, now + base);
            ck_assert_int_le(g.run_at, now + base + base / 10);
            /* not claimed before its time, and the caller is told when */
            int64_t next = 0;
            ck_assert_int_eq(claim_at(LEASE_A, 0, g.run_at - 1, &next, NULL), 0);
            ck_assert_int_eq(next, g.run_at);
            now = g.run_at;
        } else {
            ck_assert(dead);
            ck_assert_int_eq(g.state, JOB_DEAD);
            ck_assert_int_eq(g.finished_at, now);
        }
    }
    int64_t next = -1;
    ck_assert_int_eq(claim_at(LEASE_A, 0, now + 100000, &next, NULL), 0);
    ck_assert_int_eq(next, 0);
    ck_assert_int_eq(count_of(acme, JOB_DEAD), 1);
    /* a dead job stays until it is retried: pruning takes only done and cancelled ones */
    int pruned = -1;
    OK(jobs_prune(R, now + 100000, &pruned, err, sizeof(err)));
    ck_assert_int_eq(pruned, 0);
    ck_assert_int_eq(get(id).state, JOB_DEAD);
    /* failing a dead job is not possible */
    EXPECT(TN_NOTFOUND, jobs_fail(R, id, LEASE_A, "x", now, 0, NULL, err, sizeof(err)));

    /* the cap on the backoff, and the error cut to JOB_ERROR_MAX */
    o.max_attempts = 9;
    OK(enqueue_o(acme, &o, &id));
    char longerr[3000];
    memset(longerr, 'e', sizeof(longerr) - 1);
    longerr[sizeof(longerr) - 1] = '\0';
    now = T0;
    for (int attempt = 1; attempt <= 4; attempt++) {
        ck_assert_int_eq(claim_at(LEASE_A, 0, now, NULL, NULL), id);
        OK(jobs_fail(R, id, LEASE_A, longerr, now, 1500, &dead, err, sizeof(err)));
        job_rec g = get(id);
        int64_t base = attempt == 1 ? 1000 : 1500;
        ck_assert_int_ge(g.run_at, now + base);
        ck_assert_int_le(g.run_at, now + base + base / 10);
        ck_assert_int_eq((int64_t)strlen(g.last_error), JOB_ERROR_MAX);
        now = g.run_at;
    }
}
END_TEST

START_TEST(test_retry_cancel)
{
    int64_t acme = tenant("acme"), globex = tenant("globex");
    int64_t id = enqueue(acme);
    EXPECT(TN_NOTFOUND, jobs_cancel(R, id, globex, T0, err, sizeof(err)));   /* not its job */
    EXPECT(TN_NOTFOUND, jobs_cancel(R, id, 0, T0, err, sizeof(err)));        /* not central */
    EXPECT(TN_NOTFOUND, jobs_cancel(R, id + 99, -1, T0, err, sizeof(err)));
    EXPECT(TN_INVALID, jobs_retry(R, id, -1, T0, err, sizeof(err)));         /* queued */
    OK(jobs_cancel(R, id, acme, T0 + 5, err, sizeof(err)));
    job_rec g = get(id);
    ck_assert_int_eq(g.state, JOB_CANCELLED);
    ck_assert_int_eq(g.finished_at, T0 + 5);
    EXPECT(TN_INVALID, jobs_cancel(R, id, -1, T0, err, sizeof(err)));
    /* the queue knows: nothing to claim, nothing to wait for */
    int64_t next = -1;
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, &next, NULL), 0);
    ck_assert_int_eq(next, 0);

    OK(jobs_retry(R, id, acme, T0 + 50, err, sizeof(err)));
    g = get(id);
    ck_assert_int_eq(g.state, JOB_QUEUED);
    ck_assert_int_eq(g.attempts, 0);
    ck_assert_int_eq(g.run_at, T0 + 50);
    ck_assert_int_eq(g.finished_at, 0);
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 50, NULL, NULL), id);
    EXPECT(TN_BUSY, jobs_cancel(R, id, -1, T0, err, sizeof(err)));
    EXPECT(TN_INVALID, jobs_retry(R, id, -1, T0, err, sizeof(err)));
    /* a done job ran: it is neither retried nor cancelled, and stays as it ended */
    OK(jobs_finish(R, id, LEASE_A, T0 + 55, err, sizeof(err)));
    EXPECT(TN_INVALID, jobs_retry(R, id, -1, T0 + 56, err, sizeof(err)));
    EXPECT(TN_INVALID, jobs_cancel(R, id, -1, T0 + 56, err, sizeof(err)));
    g = get(id);
    ck_assert_int_eq(g.state, JOB_DONE);
    ck_assert_int_eq(g.attempts, 1);
    ck_assert_int_eq(g.finished_at, T0 + 55);

    /* a dead job comes back with its attempts at 0 */
    int64_t d = 0;
    enq_opts o = {.max_attempts = 1};
    OK(enqueue_o(globex, &o, &d));
    ck_assert_int_eq(claim_at(LEASE_B, 0, T0 + 60, NULL, NULL), d);
    bool dead = false;
    OK(jobs_fail(R, d, LEASE_B, "no", T0 + 60, 0, &dead, err, sizeof(err)));
    ck_assert(dead);
    EXPECT(TN_NOTFOUND, jobs_retry(R, d, acme, T0, err, sizeof(err)));
    OK(jobs_retry(R, d, -1, T0 + 70, err, sizeof(err)));
    ck_assert_int_eq(get(d).attempts, 0);
    job_rec c;
    ck_assert_int_eq(claim_at(LEASE_B, 0, T0 + 70, NULL, &c), d);
    ck_assert_int_eq(c.attempts, 1);
    ck_assert_str_eq(c.last_error, "no");   /* the last failure stays visible */
}
END_TEST

START_TEST(test_unique_key)
{
    int64_t acme = tenant("acme"), globex = tenant("globex");
    int64_t a = 0, b = 0;
    enq_opts o = {.key = "invoice:7"};
    OK(enqueue_o(acme, &o, &a));
    EXPECT(TN_EXISTS, enqueue_o(acme, &o, &b));
    ck_assert_int_eq(b, a);
    ck_assert_msg(strstr(err, "unique key") != NULL, "%s", err);
    ck_assert_int_eq(count_of(acme, JOB_QUEUED), 1);   /* nothing added */
    /* held while running */
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, NULL, NULL), a);
    OK(enqueue_o(globex, &o, &b));   /* another tenant's key is another key */
    ck_assert_int_ne(b, a);
    OK(enqueue_o(0, &o, &b));        /* and a central one */
    ck_assert_str_eq(get(a).unique_key, "invoice:7");
    ck_assert_int_eq(get(a).state, JOB_RUNNING);
    EXPECT(TN_EXISTS, enqueue_o(acme, &o, &b));
    ck_assert_int_eq(b, a);
    /* and free again once done */
    OK(jobs_finish(R, a, LEASE_A, T0, err, sizeof(err)));
    OK(enqueue_o(acme, &o, &b));
    ck_assert_int_ne(b, a);
    /* a cancelled job frees it; retrying it while another holds the key is refused */
    OK(jobs_cancel(R, b, acme, T0, err, sizeof(err)));
    int64_t c = 0;
    OK(enqueue_o(acme, &o, &c));
    EXPECT(TN_EXISTS, jobs_retry(R, b, acme, T0, err, sizeof(err)));
    ck_assert_msg(strstr(err, "holds its unique key") != NULL, "%s", err);
    ck_assert_int_eq(get(b).state, JOB_CANCELLED);
    /* no key: never a conflict */
    enq_opts none = {0};
    OK(enqueue_o(acme, &none, &a));
    OK(enqueue_o(acme, &none, &b));
    enq_opts empty = {.key = ""};
    OK(enqueue_o(acme, &empty, &a));
    OK(enqueue_o(acme, &empty, &b));
}
END_TEST

/* ---- leases, recover, reap ------------------------------------------------------------------- */

START_TEST(test_lease_rules)
{
    int64_t acme = tenant("acme");
    int64_t id = enqueue(acme);
    job_rec c;
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, NULL, &c), id);
    int64_t until = c.lease_until;
    ck_assert_int_eq(until, T0 + 30000 + GRACE);
    EXPECT(TN_NOTFOUND, jobs_finish(R, id, LEASE_B, T0, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_fail(R, id, LEASE_B, "x", T0, 0, NULL, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_progress(R, id, LEASE_B, "1/2", err, sizeof(err)));
    OK(jobs_progress(R, id, LEASE_A, "1/2 tenants", err, sizeof(err)));
    ck_assert_str_eq(get(id).progress, "1/2 tenants");
    char longp[400];
    memset(longp, 'p', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    OK(jobs_progress(R, id, LEASE_A, longp, err, sizeof(err)));
    ck_assert_int_eq((int64_t)strlen(get(id).progress), 200);
    /* the lease has not passed yet (it holds through lease_until itself): nothing to reap */
    int n = -1;
    OK(jobs_reap(R, until, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(get(id).state, JOB_RUNNING);
    /* it has: queued again at once, the attempt counted */
    OK(jobs_reap(R, until + 1, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 1);
    job_rec g = get(id);
    ck_assert_int_eq(g.state, JOB_QUEUED);
    ck_assert_int_eq(g.run_at, until + 1);
    ck_assert_str_eq(g.last_error, "lease expired");
    ck_assert_str_eq(g.lease, "");
    /* the first worker comes back: its lease is stale */
    EXPECT(TN_NOTFOUND, jobs_finish(R, id, LEASE_A, until + 2, err, sizeof(err)));
    ck_assert_int_eq(claim_at(LEASE_B, 0, until + 2, NULL, &c), id);
    ck_assert_int_eq(c.attempts, 2);
    ck_assert_str_eq(c.progress, "");   /* cleared by the claim */
    EXPECT(TN_NOTFOUND, jobs_finish(R, id, LEASE_A, until + 3, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_progress(R, id, LEASE_A, "x", err, sizeof(err)));
    OK(jobs_finish(R, id, LEASE_B, until + 3, err, sizeof(err)));
}
END_TEST

START_TEST(test_recover_reap)
{
    int64_t acme = tenant("acme");
    int64_t a = enqueue(acme);
    ck_assert_int_eq(claim(LEASE_A), a);
    int n = -1;
    OK(jobs_recover(R, LEASE_B, "worker 2 died", T0 + 1, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    OK(jobs_recover(R, LEASE_A, "worker 1 died (signal 9)", T0 + 1, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 1);
    job_rec g = get(a);
    ck_assert_int_eq(g.state, JOB_QUEUED);
    ck_assert_int_eq(g.run_at, T0 + 1);   /* no backoff */
    ck_assert_str_eq(g.last_error, "worker 1 died (signal 9)");
    OK(jobs_recover(R, LEASE_A, "again", T0 + 2, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    OK(jobs_recover(R, "x", "bad lease", T0 + 2, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    /* the last attempt: dead */
    int64_t last = 0;
    enq_opts one = {.max_attempts = 1};
    OK(enqueue_o(acme, &one, &last));
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 2, NULL, NULL), a);
    ck_assert_int_eq(claim_at(LEASE_B, 0, T0 + 2, NULL, NULL), last);
    OK(jobs_recover(R, LEASE_B, "killed", T0 + 3, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(get(last).state, JOB_DEAD);
    /* reap: only the expired leases, each counted */
    int64_t b = enqueue(acme), c = enqueue(0);
    claims_are(2, (int64_t[]){b, c}, T0 + 100000);
    /* a: lease until T0 + 2 + 35 s; b, c: T0 + 135 s */
    OK(jobs_reap(R, T0 + 100000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(get(a).state, JOB_QUEUED);
    ck_assert_int_eq(get(b).state, JOB_RUNNING);
    OK(jobs_reap(R, T0 + 200000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(count_of(-1, JOB_RUNNING), 0);
    ck_assert_int_eq(count_of(-1, JOB_QUEUED), 3);
}
END_TEST

/* A cancel reads its tenant's queue again at once: a claim, which looks at a few queues only
 * (CLAIM_TRIES), never spends them on queues whose jobs were all cancelled, so the ready job
 * of a fifth tenant is claimed past four such. */
START_TEST(test_cancel_empties_queue)
{
    for (int i = 0; i < 4; i++) {
        char slug[16];
        snprintf(slug, sizeof(slug), "gone%d", i);
        int64_t t = tenant(slug);
        OK(jobs_cancel(R, enqueue(t), t, T0, err, sizeof(err)));
    }
    int64_t ready = enqueue(tenant("ready"));
    ck_assert_int_eq(claim(LEASE_A), ready);
}
END_TEST

/* ---- deferral, the hooks' order ------------------------------------------------------------ */

/* jobs_release: a claimed job whose tenant is not active goes back to queued until the given
 * time, its attempt not counted, on its last attempt too (it never started). */
START_TEST(test_release)
{
    int64_t acme = tenant("acme");
    int64_t id = 0;
    enq_opts one = {.max_attempts = 1};
    OK(enqueue_o(acme, &one, &id));
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, NULL, NULL), id);
    EXPECT(TN_NOTFOUND, jobs_release(R, id, LEASE_B, "waiting", T0 + 10000, T0, err,
                                     sizeof(err)));
    OK(jobs_release(R, id, LEASE_A, "waiting: tenant 'acme' is not active", T0 + 10000, T0, err,
                    sizeof(err)));
    job_rec g = get(id);
    ck_assert_int_eq(g.state, JOB_QUEUED);
    ck_assert_int_eq(g.attempts, 0);
    ck_assert_int_eq(g.run_at, T0 + 10000);
    ck_assert_str_eq(g.last_error, "waiting: tenant 'acme' is not active");
    ck_assert_str_eq(g.lease, "");
    /* not before its time, and the caller is told when */
    int64_t next = 0;
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 9999, &next, NULL), 0);
    ck_assert_int_eq(next, T0 + 10000);
    /* a cap of 1: it no longer counts as running */
    job_rec c;
    ck_assert_int_eq(claim_at(LEASE_A, 1, T0 + 10000, NULL, &c), id);
    ck_assert_int_eq(c.attempts, 1);
}
END_TEST

/* jobs_hook_waits: a tenant's hooks reach the app one at a time, in the order queued; a hook
 * waits only for an earlier hook of its own tenant that is queued or running, not for itself,
 * its tenant's other jobs or another tenant's hooks. */
START_TEST(test_hook_waits)
{
    int64_t acme = tenant("acme"), globex = tenant("globex");
    int64_t other = enqueue(acme);   /* an ordinary job, queued before the hooks */
    job_new h = {.tenant_id = globex, .app = JOB_APP_ALL, .name = "tenancy.created",
                 .max_attempts = 3, .timeout_ms = 30000};
    int64_t g1 = 0, a1 = 0, a2 = 0;
    OK(jobs_enqueue(R, &h, T0, &g1, err, sizeof(err)));
    h.tenant_id = acme;
    h.name = "tenancy.suspended";
    OK(jobs_enqueue(R, &h, T0, &a1, err, sizeof(err)));
    h.name = "tenancy.resumed";
    OK(jobs_enqueue(R, &h, T0, &a2, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_hook_waits(R, acme, a1, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_hook_waits(R, globex, g1, err, sizeof(err)));
    /* the second hook waits while the first is queued, then while it runs */
    OK(jobs_hook_waits(R, acme, a2, err, sizeof(err)));
    claims_are(3, (int64_t[]){other, g1, a1}, T0);
    OK(jobs_hook_waits(R, acme, a2, err, sizeof(err)));
    /* the first ended: the second goes, though the ordinary job still runs */
    OK(jobs_finish(R, a1, LEASE_A, T0 + 1, err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_hook_waits(R, acme, a2, err, sizeof(err)));
    ck_assert_int_eq(get(other).state, JOB_RUNNING);
}
END_TEST

/* ---- the claim's order --------------------------------------------------------------------- */

START_TEST(test_priority)
{
    int64_t acme = tenant("acme");
    int64_t ids[5];
    int prio[5] = {0, 10, -5, 10, 100};
    for (int i = 0; i < 5; i++) {
        enq_opts o = {.priority = prio[i]};
        OK(enqueue_o(acme, &o, &ids[i]));
    }
    int64_t want[5] = {ids[4], ids[1], ids[3], ids[0], ids[2]};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(claim(LEASE_A), want[i]);
    ck_assert_int_eq(claim(LEASE_A), 0);
}
END_TEST

/* Three busy tenants claimed within one millisecond still take turns: a tenant's turn moves
 * past its last one even when the clock has not. */
START_TEST(test_round_robin)
{
    int64_t t[3] = {tenant("acme"), tenant("globex"), tenant("initech")};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++)
            enqueue(t[k]);
    int64_t prev = -1;
    int per[3] = {0};
    for (int i = 0; i < 12; i++) {
        job_rec c;
        ck_assert_int_gt(claim_at(LEASE_A, 0, T0, NULL, &c), 0);
        ck_assert_int_ne(c.tenant_id, prev);
        prev = c.tenant_id;
        for (int k = 0; k < 3; k++)
            if (t[k] == c.tenant_id)
                per[k]++;
        /* after each full round, each tenant has had exactly as many turns */
        if (i % 3 == 2)
            ck_assert(per[0] == per[1] && per[1] == per[2]);
    }
}
END_TEST

/* Mean ms of n claims (each finished) at T0. */
static double time_claims(int n)
{
    int64_t t = clock_mono_ns();
    for (int i = 0; i < n; i++) {
        job_rec c;
        ck_assert_int_gt(claim_at(LEASE_A, 0, T0, NULL, &c), 0);
        OK(jobs_finish(R, c.id, LEASE_A, T0, err, sizeof(err)));
    }
    return (double)(clock_mono_ns() - t) / 1e6 / n;
}

/* One tenant with 10,000 queued jobs and 100 with one each: the 100 are all served within
 * the first 101 claims. The claim's cost with a backlog of 100 and of 10,000 is logged (a
 * figure, not an assertion: the machine decides the numbers, the index their ratio). */
START_TEST(test_fairness)
{
    int64_t s = tenant("aaa-small");
    for (int i = 0; i < 100; i++)
        enqueue(s);
    double few = time_claims(100);   /* drains it */

    int64_t a = tenant("aab-big");
    int64_t t = clock_mono_ns();
    for (int i = 0; i < 10000; i++)
        enqueue(a);
    double enq_ms = (double)(clock_mono_ns() - t) / 1e6 / 10000;
    int64_t small[100];
    for (int i = 0; i < 100; i++) {
        char slug[16];
        snprintf(slug, sizeof(slug), "t%03d", i);
        small[i] = tenant(slug);
        enqueue(small[i]);
    }
    bool served[100] = {false};
    int from_a = 0;
    for (int i = 0; i < 101; i++) {
        job_rec c;
        ck_assert_int_gt(claim_at(LEASE_A, 0, T0, NULL, &c), 0);
        OK(jobs_finish(R, c.id, LEASE_A, T0, err, sizeof(err)));
        if (c.tenant_id == a) {
            from_a++;
            continue;
        }
        for (int k = 0; k < 100; k++)
            if (small[k] == c.tenant_id) {
                ck_assert(!served[k]);
                served[k] = true;
            }
    }
    for (int k = 0; k < 100; k++)
        ck_assert_msg(served[k], "tenant t%03d was not served within 101 claims", k);
    ck_assert_int_eq(from_a, 1);
    ck_assert_int_eq(count_of(a, JOB_QUEUED), 9999);
    double big = time_claims(200);
    fprintf(stderr, "check_jobs (%s): enqueue %.3f ms; claim+finish %.3f ms with 100 queued, "
            "%.3f ms with 10,000 queued\n", backend_pg ? "postgres" : "sqlite", enq_ms, few, big);
}
END_TEST

/* jobs_finish_claim: the finish first, in the claim's transaction. With a cap of one the
 * tenant's next job can only be claimed if its first is already done; a finish whose lease
 * was taken back is told apart and the claim goes on; with nothing to claim the finish is
 * committed all the same. */
START_TEST(test_finish_claim)
{
    int64_t a = tenant("acme");
    int64_t j1 = enqueue(a), j2 = enqueue(a);
    ck_assert_int_eq(claim_at(LEASE_A, 1, T0, NULL, NULL), j1);
    job_done d = {.id = j1, .at_ms = T0 + 5};
    job_rec c;
    int64_t next = -1;
    OK(jobs_finish_claim(R, &d, LEASE_A, 1, GRACE, T0 + 7, &c, &next, err, sizeof(err)));
    ck_assert(d.recorded);
    ck_assert_int_eq(d.rc, TN_OK);
    ck_assert_int_eq(c.id, j2);
    job_rec g = get(j1);
    ck_assert_int_eq(g.state, JOB_DONE);
    ck_assert_int_eq(g.finished_at, T0 + 5);   /* when it ended, not when the claim ran */
    ck_assert_int_eq(get(j2).started_at, T0 + 7);
    /* j2's lease taken back (its worker counted as dead): its finish is refused, the claim
     * of j3 goes on */
    int64_t j3 = enqueue(a);
    int n = 0;
    OK(jobs_recover(R, LEASE_A, "worker died", T0 + 8, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 1);
    d = (job_done){.id = j2, .at_ms = T0 + 9};
    OK(jobs_finish_claim(R, &d, LEASE_A, 1, GRACE, T0 + 9, &c, NULL, err, sizeof(err)));
    ck_assert(d.recorded);
    ck_assert_int_eq(d.rc, TN_NOTFOUND);
    ck_assert_msg(c.id == j2 || c.id == j3, "claimed job %lld", (long long)c.id);
    ck_assert_int_eq(get(c.id).state, JOB_RUNNING);
    /* nothing left to claim but the other: then nothing at all; the finishes still commit */
    int64_t other = c.id == j2 ? j3 : j2;
    d = (job_done){.id = c.id, .at_ms = T0 + 10};
    OK(jobs_finish_claim(R, &d, LEASE_A, 1, GRACE, T0 + 10, &c, NULL, err, sizeof(err)));
    ck_assert_int_eq(c.id, other);
    d = (job_done){.id = other, .at_ms = T0 + 11};
    EXPECT(TN_NOTFOUND, jobs_finish_claim(R, &d, LEASE_A, 1, GRACE, T0 + 11, &c, &next, err,
                                          sizeof(err)));
    ck_assert(d.recorded);
    ck_assert_int_eq(d.rc, TN_OK);
    ck_assert_int_eq(next, 0);
    ck_assert_int_eq(count_of(a, JOB_DONE), 3);
    ck_assert_int_eq(count_of(a, JOB_RUNNING), 0);
}
END_TEST

START_TEST(test_cap)
{
    int64_t a = tenant("acme"), b = tenant("globex");
    for (int i = 0; i < 5; i++)
        enqueue(a);
    enqueue(b);
    job_rec c[4];
    ck_assert_int_gt(claim_at(LEASE_A, 2, T0, NULL, &c[0]), 0);
    ck_assert_int_eq(c[0].tenant_id, a);
    ck_assert_int_gt(claim_at(LEASE_A, 2, T0, NULL, &c[1]), 0);
    ck_assert_int_eq(c[1].tenant_id, b);
    ck_assert_int_gt(claim_at(LEASE_A, 2, T0, NULL, &c[2]), 0);
    ck_assert_int_eq(c[2].tenant_id, a);
    /* A has 2 running: at the cap; its queued jobs are ready (next <= now) but wait */
    int64_t next = 0;
    ck_assert_int_eq(claim_at(LEASE_A, 2, T0, &next, NULL), 0);
    ck_assert_int_eq(next, T0);
    ck_assert_int_eq(count_of(a, JOB_RUNNING), 2);
    /* without a cap it is served */
    ck_assert_int_gt(claim_at(LEASE_A, 0, T0, NULL, &c[3]), 0);
    ck_assert_int_eq(c[3].tenant_id, a);
    ck_assert_int_eq(claim_at(LEASE_A, 3, T0, NULL, NULL), 0);
    /* one ends (finished, failed, recovered alike): room again */
    OK(jobs_finish(R, c[0].id, LEASE_A, T0, err, sizeof(err)));
    ck_assert_int_gt(claim_at(LEASE_A, 3, T0, NULL, &c[0]), 0);
    ck_assert_int_eq(c[0].tenant_id, a);
    OK(jobs_fail(R, c[2].id, LEASE_A, "x", T0, 0, NULL, err, sizeof(err)));
    ck_assert_int_gt(claim_at(LEASE_A, 3, T0, NULL, &c[2]), 0);
    ck_assert_int_eq(count_of(a, JOB_RUNNING), 3);
    char as[24];
    snprintf(as, sizeof(as), "%lld", (long long)a);
    const char *p[] = {as};
    ck_assert_int_eq(sql_int("SELECT running FROM job_queues WHERE tenant_key = $1", 1, p), 3);
}
END_TEST

START_TEST(test_delayed)
{
    int64_t a = tenant("acme"), b = tenant("globex");
    int64_t late = 0;
    enq_opts o = {.run_at = T0 + 5000, .priority = 50};
    OK(enqueue_o(a, &o, &late));
    int64_t next = 0;
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, &next, NULL), 0);
    ck_assert_int_eq(next, T0 + 5000);
    /* a ready job of A behind its delayed one of higher priority, and one of B */
    int64_t now_a = enqueue(a), now_b = enqueue(b);
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 1, NULL, NULL), now_a);
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 1, NULL, NULL), now_b);
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 4999, &next, NULL), 0);
    ck_assert_int_eq(next, T0 + 5000);
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 5000, NULL, NULL), late);
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0 + 9999999, &next, NULL), 0);
    ck_assert_int_eq(next, 0);
    /* two tenants wait, the later queued first: the caller is told the earlier time */
    int64_t x = T0 + 10000000;
    enq_opts ob = {.run_at = x + 9000}, oa = {.run_at = x + 5000};
    OK(enqueue_o(b, &ob, &late));
    OK(enqueue_o(a, &oa, &late));
    ck_assert_int_eq(claim_at(LEASE_A, 0, x, &next, NULL), 0);
    ck_assert_int_eq(next, x + 5000);
}
END_TEST

/* ---- several processes at once ----------------------------------------------------------- */

#define DRAIN_JOBS 2000
#define DRAIN_PROCS 4

/* A child: claim and finish until nothing is queued; each claimed id written to fd. */
static int drain(int fd, int k)
{
    registry *r = NULL;
    char e[512];
    if (registry_open(uri, NULL, &r, e, sizeof(e)) != TN_OK)
        return 2;
    char lease[32];
    snprintf(lease, sizeof(lease), "drain-%d-%ld", k, (long)getpid());
    int idle = 0;
    while (idle < 2000) {
        job_rec j;
        int64_t next = 0;
        int rc = jobs_claim(r, lease, 0, 0, T0, &j, &next, e, sizeof(e));
        if (rc == TN_NOTFOUND) {
            if (next == 0)
                break;   /* nothing queued any more */
            idle++;      /* ready, but another process holds its tenant: again */
            usleep(200);
            continue;
        }
        if (rc != TN_OK) {
            fprintf(stderr, "drain %d: claim: %s\n", k, e);
            return 3;
        }
        int64_t id = j.id;
        if (write(fd, &id, sizeof(id)) != (ssize_t)sizeof(id))
            return 4;
        if (jobs_finish(r, id, lease, T0, e, sizeof(e)) != TN_OK) {
            fprintf(stderr, "drain %d: finish %lld: %s\n", k, (long long)id, e);
            return 5;
        }
    }
    registry_close(r);
    return idle < 2000 ? 0 : 6;
}

START_TEST(test_concurrent_claims)
{
    int64_t tids[11] = {0};
    for (int i = 1; i < 11; i++) {
        char slug[16];
        snprintf(slug, sizeof(slug), "c%02d", i);
        tids[i] = tenant(slug);
    }
    for (int i = 0; i < DRAIN_JOBS; i++)
        enqueue(tids[i % 11]);
    int fds[DRAIN_PROCS][2];
    pid_t pids[DRAIN_PROCS];
    for (int k = 0; k < DRAIN_PROCS; k++) {
        ck_assert_int_eq(pipe(fds[k]), 0);
        pids[k] = fork();
        if (pids[k] == 0) {
            close(fds[k][0]);
            _exit(drain(fds[k][1], k));
        }
        ck_assert_int_ge(pids[k], 0);
        close(fds[k][1]);
    }
    static int seen[DRAIN_JOBS * 4];
    memset(seen, 0, sizeof(seen));
    int64_t min_id = INT64_MAX, total = 0;
    int per[DRAIN_PROCS] = {0};
    int64_t *ids = calloc(DRAIN_JOBS * 2, sizeof(*ids));
    for (int k = 0; k < DRAIN_PROCS; k++) {
        int64_t id;
        while (read(fds[k][0], &id, sizeof(id)) == (ssize_t)sizeof(id)) {
            ck_assert_int_lt(total, DRAIN_JOBS * 2);
            ids[total++] = id;
            per[k]++;
            if (id < min_id)
                min_id = id;
        }
        close(fds[k][0]);
    }
    for (int k = 0; k < DRAIN_PROCS; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(pids[k], &st, 0), pids[k]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "drain %d ended with %d", k, st);
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t slot = ids[i] - min_id;
        ck_assert_int_lt(slot, DRAIN_JOBS * 4);
        ck_assert_msg(seen[slot] == 0, "job %lld claimed twice", (long long)ids[i]);
        seen[slot]++;
    }
    free(ids);
    ck_assert_int_eq(total, DRAIN_JOBS);   /* each exactly once, none lost */
    ck_assert_int_eq(count_of(-1, JOB_DONE), DRAIN_JOBS);
    ck_assert_int_eq(count_of(-1, JOB_QUEUED), 0);
    fprintf(stderr, "check_jobs (%s): %d processes drained %d jobs: %d/%d/%d/%d each\n",
            backend_pg ? "postgres" : "sqlite", DRAIN_PROCS, DRAIN_JOBS, per[0], per[1], per[2],
            per[3]);
}
END_TEST

/* ---- lists, counts, prune -------------------------------------------------------------------- */

typedef struct listed {
    int n;
    int64_t ids[64];
    char slugs[64][16];
    int stop_at;
} listed;

static int list_cb(void *ctx, const job_rec *j)
{
    listed *l = ctx;
    if (l->n < 64) {
        l->ids[l->n] = j->id;
        snprintf(l->slugs[l->n], sizeof(l->slugs[0]), "%s", j->slug);
    }
    l->n++;
    /* the callback may use the registry: the page was read first */
    job_rec g;
    char e[256];
    if (jobs_get(R, j->id, &g, e, sizeof(e)) != TN_OK)
        return TN_IO;
    return l->stop_at > 0 && l->n == l->stop_at ? TN_DONE : TN_OK;
}

static int list_count_cb(void *ctx, const job_rec *j)
{
    (void)j;
    ((listed *)ctx)->n++;
    return TN_OK;
}

static listed list(int64_t tid, int state, int64_t before, int limit)
{
    listed l;
    memset(&l, 0, sizeof(l));
    ck_assert_int_eq(jobs_list(R, tid, state, before, limit, list_cb, &l), TN_OK);
    return l;
}

START_TEST(test_list_counts_prune)
{
    int64_t a = tenant("acme"), b = tenant("globex");
    int64_t ja[6], jb[2], jc[2];
    for (int i = 0; i < 6; i++)
        ja[i] = enqueue(a);
    for (int i = 0; i < 2; i++)
        jb[i] = enqueue(b);
    for (int i = 0; i < 2; i++)
        jc[i] = enqueue(0);
    /* each tenant's jobs are claimed in order, the tenants in turn: two rounds of three */
    claims_are(3, (int64_t[]){ja[0], jb[0], jc[0]}, T0);
    OK(jobs_finish(R, ja[0], LEASE_A, T0 + 10, err, sizeof(err)));
    OK(jobs_finish(R, jb[0], LEASE_A, T0 + 10, err, sizeof(err)));
    OK(jobs_finish(R, jc[0], LEASE_A, T0 + 20, err, sizeof(err)));
    OK(jobs_cancel(R, ja[5], a, T0 + 30, err, sizeof(err)));
    claims_are(3, (int64_t[]){ja[1], jb[1], jc[1]}, T0);
    OK(jobs_finish(R, ja[1], LEASE_A, T0 + 20, err, sizeof(err)));
    ck_assert_int_eq(claim_at(LEASE_A, 0, T0, NULL, NULL), ja[2]);   /* only A has any left */
    /* A: 2 done, 1 cancelled, 1 running, 2 queued; B and central: 1 done, 1 running */

    int64_t c[JOB_NSTATES];
    OK(jobs_counts(R, a, c));
    ck_assert_int_eq(c[JOB_QUEUED], 2);
    ck_assert_int_eq(c[JOB_RUNNING], 1);
    ck_assert_int_eq(c[JOB_DONE], 2);
    ck_assert_int_eq(c[JOB_CANCELLED], 1);
    ck_assert_int_eq(c[JOB_DEAD], 0);
    OK(jobs_counts(R, -1, c));
    ck_assert_int_eq(c[JOB_DONE], 4);
    ck_assert_int_eq(c[JOB_RUNNING], 3);
    ck_assert_int_eq(c[JOB_DONE] + c[JOB_QUEUED] + c[JOB_RUNNING] + c[JOB_CANCELLED], 10);
    OK(jobs_counts(R, 0, c));
    ck_assert_int_eq(c[JOB_DONE], 1);
    ck_assert_int_eq(c[JOB_RUNNING], 1);

    /* newest first, every filter, paged by id */
    listed l = list(-1, -1, 0, 100);
    ck_assert_int_eq(l.n, 10);
    ck_assert_int_eq(l.ids[0], jc[1]);
    ck_assert_int_eq(l.ids[9], ja[0]);
    l = list(a, -1, 0, 4);
    ck_assert_int_eq(l.n, 4);
    ck_assert_int_eq(l.ids[0], ja[5]);
    ck_assert_int_eq(l.ids[3], ja[2]);
    ck_assert_str_eq(l.slugs[0], "acme");
    l = list(a, -1, ja[2], 4);
    ck_assert_int_eq(l.n, 2);
    ck_assert_int_eq(l.ids[0], ja[1]);
    ck_assert_int_eq(l.ids[1], ja[0]);
    l = list(a, JOB_DONE, 0, 10);
    ck_assert_int_eq(l.n, 2);
    ck_assert_int_eq(l.ids[0], ja[1]);
    l = list(a, JOB_DONE, ja[1], 10);   /* the next page starts after ja[1], without it */
    ck_assert_int_eq(l.n, 1);
    ck_assert_int_eq(l.ids[0], ja[0]);
    l = list(-1, JOB_DONE, 0, 10);
    ck_assert_int_eq(l.n, 4);
    l = list(-1, JOB_DONE, ja[1], 10);
    ck_assert_int_eq(l.n, 1);
    ck_assert_int_eq(l.ids[0], ja[0]);
    l = list(0, -1, 0, 10);
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.slugs[0], "");
    l = list(0, JOB_RUNNING, 0, 10);
    ck_assert_int_eq(l.n, 1);
    ck_assert_int_eq(l.ids[0], jc[1]);
    listed stop;
    memset(&stop, 0, sizeof(stop));
    stop.stop_at = 2;
    ck_assert_int_eq(jobs_list(R, -1, -1, 0, 10, list_cb, &stop), TN_DONE);
    ck_assert_int_eq(stop.n, 2);

    /* prune: done and cancelled before the time; dead, queued and running stay */
    int n = -1;
    OK(jobs_prune(R, T0 + 15, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 2);   /* ja[0], jb[0] */
    OK(jobs_prune(R, T0 + 1000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 3);   /* ja[1], jc[0], ja[5] */
    OK(jobs_counts(R, -1, c));
    ck_assert_int_eq(c[JOB_DONE] + c[JOB_CANCELLED], 0);
    ck_assert_int_eq(c[JOB_QUEUED] + c[JOB_RUNNING], 5);
}
END_TEST

/* ---- schedules ------------------------------------------------------------------------------- */

typedef struct sched_seen {
    int n;
    job_schedule s[8];
    char text[8][5][64];
} sched_seen;

static int sched_cb(void *ctx, const job_schedule *s)
{
    sched_seen *x = ctx;
    if (x->n < 8) {
        x->s[x->n] = *s;
        const char *f[5] = {s->slug, s->app, s->name, s->cron, s->payload};
        for (int i = 0; i < 5; i++)
            snprintf(x->text[x->n][i], sizeof(x->text[0][0]), "%s", f[i]);
    }
    x->n++;
    return TN_OK;
}

static sched_seen schedules(int64_t tid)
{
    sched_seen x;
    memset(&x, 0, sizeof(x));
    ck_assert_int_eq(jobs_schedule_list(R, tid, sched_cb, &x), TN_OK);
    return x;
}

/* 2023-11-14 22:13:20 UTC is T0; times below are built from it. */
#define T0_NEXT_3AM (1700000000000LL + ((24 - 22) * 3600 + 3 * 3600 - 13 * 60 - 20) * 1000LL)

START_TEST(test_schedules)
{
    int64_t a = tenant("acme");
    int64_t sid = 0, sid2 = 0;
    OK(jobs_schedule_set(R, a, "", "report.daily", "0 3 * * *", "{\"k\":1}", T0, &sid, err,
                         sizeof(err)));
    ck_assert_int_gt(sid, 0);
    sched_seen x = schedules(a);
    ck_assert_int_eq(x.n, 1);
    ck_assert_int_eq(x.s[0].next_run_at, T0_NEXT_3AM);   /* 2023-11-15 03:00 UTC */
    ck_assert_int_eq(x.s[0].last_run_at, 0);
    ck_assert_str_eq(x.text[0][0], "acme");
    ck_assert_str_eq(x.text[0][2], "report.daily");
    ck_assert_str_eq(x.text[0][3], "0 3 * * *");
    ck_assert_str_eq(x.text[0][4], "{\"k\":1}");
    /* the same (tenant, app, name) is replaced, not added */
    OK(jobs_schedule_set(R, a, "", "report.daily", "30 3 * * *", "{\"k\":2}", T0, &sid2, err,
                         sizeof(err)));
    ck_assert_int_eq(sid2, sid);
    x = schedules(a);
    ck_assert_int_eq(x.n, 1);
    ck_assert_str_eq(x.text[0][3], "30 3 * * *");
    ck_assert_int_eq(x.s[0].next_run_at, T0_NEXT_3AM + 30 * 60000);
    /* refusals */
    EXPECT(TN_INVALID, jobs_schedule_set(R, a, "", "report.daily", "0 25 * * *", NULL, T0, &sid2,
                                         err, sizeof(err)));
    ck_assert_str_eq(err, "cron: field 2 (hour): 25 is outside 0-23");
    EXPECT(TN_INVALID, jobs_schedule_set(R, a, "", "Bad", "@daily", NULL, T0, &sid2, err,
                                         sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_schedule_set(R, a + 50, "", "x", "@daily", NULL, T0, &sid2, err,
                                          sizeof(err)));
    /* a central one beside it, every five minutes */
    int64_t cid = 0;
    OK(jobs_schedule_set(R, 0, "", "cleanup", "*/5 * * * *", NULL, T0, &cid, err, sizeof(err)));
    ck_assert_int_eq(schedules(-1).n, 2);
    ck_assert_int_eq(schedules(0).n, 1);
    ck_assert_str_eq(schedules(0).text[0][0], "");

    /* nothing due yet */
    int n = -1;
    OK(jobs_schedules_due(R, T0, 10, 3, 60000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    /* the central one is due at 22:15 */
    int64_t t1 = T0 + (100 * 1000);   /* 22:15:00 */
    OK(jobs_schedules_due(R, t1, 10, 3, 60000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 1);
    job_rec c;
    ck_assert_int_eq(claim_at(LEASE_A, 0, t1, NULL, &c) > 0, 1);
    ck_assert_str_eq(c.name, "cleanup");
    ck_assert_int_eq(c.schedule_id, cid);
    char ukey[40];
    snprintf(ukey, sizeof(ukey), "schedule:%lld", (long long)cid);
    ck_assert_str_eq(c.unique_key, ukey);
    ck_assert_int_eq(c.max_attempts, 3);
    ck_assert_int_eq(c.timeout_ms, 60000);
    x = schedules(0);
    ck_assert_int_eq(x.s[0].next_run_at, t1 + 5 * 60000);
    ck_assert_int_eq(x.s[0].last_run_at, t1);
    /* its next time comes while the job still runs: not stacked, but the time moves on */
    OK(jobs_schedules_due(R, t1 + 5 * 60000, 10, 3, 60000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    x = schedules(0);
    ck_assert_int_eq(x.s[0].next_run_at, t1 + 10 * 60000);
    ck_assert_int_eq(x.s[0].last_run_at, t1);
    OK(jobs_finish(R, c.id, LEASE_A, t1, err, sizeof(err)));
    /* after a day of downtime: each schedule once, then from now on */
    int64_t later = t1 + 24 * 3600 * 1000LL + 7 * 60000;   /* 22:22 the next day */
    OK(jobs_schedules_due(R, later, 10, 3, 60000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(count_of(-1, JOB_QUEUED), 2);
    x = schedules(-1);
    ck_assert_int_eq(x.s[0].next_run_at, T0_NEXT_3AM + 24 * 3600 * 1000LL + 30 * 60000);
    ck_assert_int_eq(x.s[1].next_run_at, later + 3 * 60000);   /* 22:25 */
    OK(jobs_schedules_due(R, later, 10, 3, 60000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);
    /* a tenant being deleted: its time passes without a job */
    OK(registry_set_state(R, "acme", TENANT_DELETING, err, sizeof(err)));
    int64_t much_later = later + 3 * 24 * 3600 * 1000LL;
    OK(jobs_schedules_due(R, much_later, 10, 3, 60000, &n, err, sizeof(err)));
    ck_assert_int_eq(n, 0);   /* and the central one's last job is still queued */
    x = schedules(-1);
    ck_assert_int_gt(x.s[0].next_run_at, much_later);
    ck_assert_int_gt(x.s[1].next_run_at, much_later);
    ck_assert_int_eq(count_of(a, JOB_QUEUED), 1);
    /* remove */
    OK(jobs_schedule_remove(R, a, "", "report.daily", err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_schedule_remove(R, a, "", "report.daily", err, sizeof(err)));
    EXPECT(TN_NOTFOUND, jobs_schedule_remove(R, 0, "x", "cleanup", err, sizeof(err)));
    OK(jobs_schedule_remove(R, 0, NULL, "cleanup", err, sizeof(err)));
    ck_assert_int_eq(schedules(-1).n, 0);
}
END_TEST

/* Several processes run the schedules' pass at once: each due schedule queues one job. */
START_TEST(test_schedules_concurrent)
{
    for (int i = 0; i < 40; i++) {
        char slug[16];
        snprintf(slug, sizeof(slug), "s%02d", i);
        int64_t t = tenant(slug);
        OK(jobs_schedule_set(R, t, "", "tick", "* * * * *", NULL, T0, NULL, err, sizeof(err)));
    }
    pid_t pids[4];
    for (int k = 0; k < 4; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            registry *r = NULL;
            char e[512];
            int total = 0, n = 0;
            if (registry_open(uri, NULL, &r, e, sizeof(e)) != TN_OK)
                _exit(2);
            for (int round = 0; round < 20; round++) {
                if (jobs_schedules_due(r, T0 + 60000, 3, 3, 1000, &n, e, sizeof(e)) != TN_OK) {
                    fprintf(stderr, "due: %s\n", e);
                    _exit(3);
                }
                total += n;
            }
            registry_close(r);
            _exit(total > 255 ? 255 : total);
        }
        ck_assert_int_ge(pids[k], 0);
    }
    int sum = 0;
    for (int k = 0; k < 4; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(pids[k], &st, 0), pids[k]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) < 200);
        sum += WEXITSTATUS(st);
    }
    ck_assert_int_eq(sum, 40);
    ck_assert_int_eq(count_of(-1, JOB_QUEUED), 40);
}
END_TEST

/* ---- the tenant's purge, an older registry -------------------------------------------------- */

START_TEST(test_purge_cascade)
{
    int64_t a = tenant("acme"), b = tenant("globex");
    int64_t ja = enqueue(a);
    enqueue(a);
    int64_t jb = enqueue(b);
    ck_assert_int_eq(claim(LEASE_A), ja);
    OK(jobs_schedule_set(R, a, "", "tick", "@hourly", NULL, T0, NULL, err, sizeof(err)));
    OK(registry_set_state(R, "acme", TENANT_DELETING, err, sizeof(err)));
    OK(registry_purge(R, "acme", err, sizeof(err)));
    job_rec g;
    EXPECT(TN_NOTFOUND, jobs_get(R, ja, &g, err, sizeof(err)));
    ck_assert_int_eq(count_of(a, JOB_QUEUED) + count_of(a, JOB_RUNNING), 0);
    ck_assert_int_eq(schedules(-1).n, 0);
    char as[24];
    snprintf(as, sizeof(as), "%lld", (long long)a);
    const char *p[] = {as};
    ck_assert_int_eq(sql_int("SELECT count(*) FROM job_queues WHERE tenant_key = $1", 1, p), 0);
    /* the running job's worker finds nothing to finish; the others go on */
    EXPECT(TN_NOTFOUND, jobs_finish(R, ja, LEASE_A, T0, err, sizeof(err)));
    ck_assert_int_eq(claim(LEASE_A), jb);
}
END_TEST

START_TEST(test_older_registry)
{
    tenant("acme");
    tn_db *db = registry_db(R);
    ck_assert_int_eq(tn_db_exec(db, "DROP TABLE job_schedules", 0, NULL), TN_OK);
    ck_assert_int_eq(tn_db_exec(db, "DROP TABLE job_queues", 0, NULL), TN_OK);
    ck_assert_int_eq(tn_db_exec(db, "DROP TABLE jobs", 0, NULL), TN_OK);
    registry_close(R);
    open_registry();
    int64_t c[JOB_NSTATES];
    OK(jobs_counts(R, -1, c));   /* the first call makes the tables */
    ck_assert_int_eq(c[JOB_QUEUED], 0);
    int64_t id = enqueue(0);
    ck_assert_int_eq(claim(LEASE_A), id);
    OK(registry_init(R, err, sizeof(err)));   /* `tenancy init` again: the jobs stay */
    ck_assert_int_eq(count_of(-1, JOB_RUNNING), 1);
    /* a registry made after the other job tables but before job_hosts */
    ck_assert_int_eq(tn_db_exec(registry_db(R), "DROP TABLE job_hosts", 0, NULL), TN_OK);
    registry_close(R);
    open_registry();
    bool wanted = false;
    OK(jobs_hooks_wanted(R, T0, &wanted, err, sizeof(err)));
    ck_assert(wanted);
    OK(jobs_host_say(R, "host-a", LEASE_A, false, T0, err, sizeof(err)));
    ck_assert_int_eq(count_of(-1, JOB_RUNNING), 1);
}
END_TEST

/* ---- which hosts take hooks (jobs.hooks = auto) -------------------------------------------- */

static bool wanted_at(int64_t now)
{
    bool w = false;
    OK(jobs_hooks_wanted(R, now, &w, err, sizeof(err)));
    return w;
}

START_TEST(test_hosts)
{
    const int64_t stale = JOBS_HOST_STALE_MS;
    ck_assert_msg(wanted_at(T0), "no host said anything: a hook waits for whichever apps start");
    OK(jobs_host_say(R, "host-a", LEASE_A, false, T0, err, sizeof(err)));
    ck_assert_msg(!wanted_at(T0 + 1000), "the one host runs no app with a job handler");
    OK(jobs_host_say(R, "host-b", LEASE_B, true, T0, err, sizeof(err)));
    ck_assert_msg(wanted_at(T0 + 1000), "another host's app takes hooks");
    /* host-b stops saying; host-a goes on */
    OK(jobs_host_say(R, "host-a", LEASE_A, false, T0 + stale, err, sizeof(err)));
    ck_assert_msg(wanted_at(T0 + stale), "host-b's row is still fresh");
    ck_assert_msg(!wanted_at(T0 + stale + 1), "host-b's row is stale: it no longer counts");
    /* a reload of host-a: the new generation's worker says first, then the old one stops */
    OK(jobs_host_say(R, "host-a", "lease-new", false, T0 + stale + 2, err, sizeof(err)));
    OK(jobs_host_gone(R, "host-a", LEASE_A, err, sizeof(err)));
    ck_assert_msg(!wanted_at(T0 + stale + 3), "the new worker's row stays");
    OK(jobs_host_say(R, "host-a", "lease-new", true, T0 + stale + 4, err, sizeof(err)));
    ck_assert_msg(wanted_at(T0 + stale + 4), "host-a's apps take hooks after the reload");
    OK(jobs_host_say(R, "host-a", "lease-new", false, T0 + stale + 5, err, sizeof(err)));
    ck_assert(!wanted_at(T0 + stale + 5));
    /* host-a stops: its row goes, and with no host saying anything hooks are queued again */
    OK(jobs_host_gone(R, "host-a", "lease-new", err, sizeof(err)));
    ck_assert_msg(wanted_at(T0 + stale + 6), "no host runs job workers");
    ck_assert_int_eq(sql_int("SELECT count(*) FROM job_hosts", 0, NULL), 1);   /* host-b's */
    /* a row a day old is deleted by the next say */
    OK(jobs_host_say(R, "host-c", "lease-c", false, T0 + 25LL * 3600 * 1000, err, sizeof(err)));
    ck_assert_int_eq(sql_int("SELECT count(*) FROM job_hosts WHERE host = 'host-c'", 0, NULL), 1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM job_hosts", 0, NULL), 1);
    ck_assert(!wanted_at(T0 + 25LL * 3600 * 1000));
}
END_TEST

/* ---- a lost session (PostgreSQL) ----------------------------------------------------------- */

/* The server ends the registry's session, as a restart or a pooler's timeout would; the pid
 * is gone when this returns (pg_terminate_backend's timeout waits for it). */
static void end_session(void)
{
    char pid[32], done[8];
    OK(db_query_value(registry_db(R), pid, sizeof(pid), "SELECT pg_backend_pid()", 0, NULL));
    tn_db *d = NULL;
    char e[512];
    ck_assert_msg(db_open(pg_uri, NULL, &d, e, sizeof(e)) == TN_OK, "db_open: %s", e);
    const char *p[] = {pid};
    int rc = db_query_value(d, done, sizeof(done),
                            "SELECT pg_terminate_backend(CAST($1 AS INTEGER), 10000)", 1, p);
    ck_assert_msg(rc == TN_OK && strcmp(done, "t") == 0, "terminate %s: %s", pid,
                  tn_db_error(d));
    db_close(d);
}

/* The call that meets the lost session fails with TN_IO and leaves the connection reset, so
 * the same call at once works: each of the store's statements outside a transaction, and
 * one that runs in a transaction. */
#define AFTER_LOSS(want, expr)                                                               \
    do {                                                                                     \
        end_session();                                                                       \
        EXPECT(TN_IO, expr);                                                                 \
        EXPECT(want, expr);                                                                  \
    } while (0)

START_TEST(test_lost_session)
{
    int64_t a = tenant("acme");
    int64_t id = enqueue(a);
    job_rec g;
    int64_t c[JOB_NSTATES];
    listed l = {0};
    sched_seen x = {0};
    int n = 0;
    AFTER_LOSS(TN_NOTFOUND, jobs_progress(R, id, LEASE_A, "1/2", err, sizeof(err)));
    AFTER_LOSS(TN_NOTFOUND, jobs_schedule_remove(R, a, "", "none", err, sizeof(err)));
    AFTER_LOSS(TN_OK, jobs_prune(R, T0, &n, err, sizeof(err)));
    AFTER_LOSS(TN_OK, jobs_get(R, id, &g, err, sizeof(err)));
    AFTER_LOSS(TN_OK, jobs_list(R, a, -1, 0, 10, list_count_cb, &l));
    AFTER_LOSS(TN_OK, jobs_counts(R, a, c));
    AFTER_LOSS(TN_OK, jobs_schedule_list(R, a, sched_cb, &x));
    AFTER_LOSS(TN_OK, jobs_cancel(R, id, a, T0, err, sizeof(err)));
    ck_assert_int_eq(count_of(a, JOB_CANCELLED), 1);
}
END_TEST

/* ---- what each call costs: the same with 100 and with 10,000 jobs queued ------------------
 * Every statement of jobs.c as it is, with its parameters, measured where the database counts:
 * SQLite per statement (sqlite3_stmt_status: the virtual machine's steps, the steps of full
 * table scans, the sorts; read at the end of each statement through the trace hook on the
 * registry's own connection); PostgreSQL per table (pg_stat_user_tables and _indexes: the
 * rows of the jobs table read by sequential and by index scans, and the sequential scans;
 * flushed by pg_stat_force_next_flush and read on a second connection). A call whose cost
 * grows with the backlog, or that reads the jobs table whole, fails. */

typedef struct cost {
    int64_t work;   /* SQLite: VM steps; PostgreSQL: rows of jobs read */
    int64_t full;   /* full scans: steps (SQLite), sequential scans of jobs (PostgreSQL) */
    int64_t sort;   /* SQLite: sorts */
} cost;

static cost spent;          /* SQLite: since the last measure_begin */
static tn_db *stats_db;     /* PostgreSQL: the connection the counters are read on */
static cost pg_mark;

static int trace_cb(unsigned type, void *ctx, void *p, void *x)
{
    (void)ctx;
    (void)x;
    if (type == SQLITE_TRACE_PROFILE) {
        sqlite3_stmt *st = p;
        spent.work += sqlite3_stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 1);
        spent.full += sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 1);
        spent.sort += sqlite3_stmt_status(st, SQLITE_STMTSTATUS_SORT, 1);
    }
    return 0;
}

/* PostgreSQL: the jobs table's counters now (the registry's connection flushes its own
 * first: a backend reports them when it goes idle, at once when asked to). */
static cost pg_counters(void)
{
    ck_assert_int_eq(tn_db_exec(registry_db(R), "SELECT pg_stat_force_next_flush()", 0, NULL),
                     TN_OK);
    tn_rows *rows = NULL;
    ck_assert_msg(tn_db_query(stats_db, &rows,
                              "SELECT seq_scan, seq_tup_read + (SELECT COALESCE(sum(idx_tup_read), "
                              "0) FROM pg_stat_user_indexes i WHERE i.relid = t.relid) FROM "
                              "pg_stat_user_tables t WHERE schemaname = 'tenancy' AND relname = "
                              "'jobs'", 0, NULL) == TN_OK, "%s", tn_db_error(stats_db));
    ck_assert_int_eq(tn_rows_next(rows), TN_OK);
    cost c = {atoll(tn_rows_get(rows, 1)), atoll(tn_rows_get(rows, 0)), 0};
    tn_rows_free(rows);
    return c;
}

static void measure_begin(void)
{
    if (backend_pg)
        pg_mark = pg_counters();
    else
        spent = (cost){0, 0, 0};
}

static cost measure_end(void)
{
    if (!backend_pg)
        return spent;
    cost now = pg_counters();
    return (cost){now.work - pg_mark.work, now.full - pg_mark.full, 0};
}

/* n queued jobs of tenant tid in one transaction (the backlog, not what is measured). */
static void backlog(int64_t tid, int n)
{
    tn_db *db = registry_db(R);
    char t[24], now[24];
    snprintf(t, sizeof(t), "%lld", (long long)tid);
    snprintf(now, sizeof(now), "%lld", (long long)T0);
    const char *p[] = {t, now};
    ck_assert_int_eq(tn_db_begin(db), TN_OK);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tn_db_exec(db, "INSERT INTO jobs (tenant_id, name, max_attempts, "
                                    "timeout_ms, run_at, created_at) VALUES ($1, 'bulk', 3, "
                                    "30000, $2, $2)", 2, p), TN_OK);
    ck_assert_int_eq(tn_db_commit(db), TN_OK);
}

#define NOPS 14
static const char *const op_names[NOPS] = {
    "claim", "finish", "enqueue", "enqueue (key)", "enqueue (key held)", "fail", "cancel",
    "retry", "progress", "recover", "reap", "get", "list (tenant)", "list (tenant, queued)"};

/* Claim until a job of tenant tid comes (the round robin alternates); the last claim is
 * measured into *c when c is given. */
static void claim_of(int64_t tid, const char *lease, job_rec *j, cost *c)
{
    for (;;) {
        measure_begin();
        ck_assert_int_gt(claim_at(lease, 0, T0, NULL, j), 0);
        if (c != NULL)
            *c = measure_end();
        if (j->tenant_id == tid)
            return;
        OK(jobs_finish(R, j->id, lease, T0, err, sizeof(err)));
    }
}

/* Each operation once on tenant tid's jobs; what each cost into c. */
static void run_ops(int64_t tid, const char *lease, cost c[NOPS])
{
    int64_t id = 0, keep = 0;
    job_rec j;
    int n;
    listed l;
    enq_opts plain = {0}, keyed = {.key = lease};   /* a key of its own each run */
    memset(c, 0, sizeof(cost) * NOPS);
#define MEASURE(op, expr)                                                                    \
    do {                                                                                     \
        measure_begin();                                                                     \
        expr;                                                                                \
        c[op] = measure_end();                                                               \
    } while (0)
    claim_of(tid, lease, &j, &c[0]);
    MEASURE(1, OK(jobs_finish(R, j.id, lease, T0, err, sizeof(err))));
    MEASURE(2, OK(enqueue_o(tid, &plain, &id)));
    MEASURE(3, OK(enqueue_o(tid, &keyed, &keep)));
    MEASURE(4, EXPECT(TN_EXISTS, enqueue_o(tid, &keyed, &id)));
    claim_of(tid, lease, &j, NULL);
    MEASURE(5, OK(jobs_fail(R, j.id, lease, "x", T0, 0, NULL, err, sizeof(err))));
    MEASURE(6, OK(jobs_cancel(R, keep, tid, T0, err, sizeof(err))));
    MEASURE(7, OK(jobs_retry(R, keep, tid, T0, err, sizeof(err))));
    claim_of(tid, lease, &j, NULL);
    MEASURE(8, OK(jobs_progress(R, j.id, lease, "1/2", err, sizeof(err))));
    MEASURE(9, OK(jobs_recover(R, lease, "gone", T0, &n, err, sizeof(err))));
    ck_assert_int_eq(n, 1);
    MEASURE(10, OK(jobs_reap(R, T0, &n, err, sizeof(err))));
    MEASURE(11, OK(jobs_get(R, keep, &j, err, sizeof(err))));
    memset(&l, 0, sizeof(l));
    MEASURE(12, ck_assert_int_eq(jobs_list(R, tid, -1, 0, 20, list_count_cb, &l), TN_OK));
    MEASURE(13, ck_assert_int_eq(jobs_list(R, tid, JOB_QUEUED, 0, 20, list_count_cb, &l), TN_OK));
#undef MEASURE
}

START_TEST(test_cost)
{
    int64_t p = tenant("few"), q = tenant("many");
    backlog(p, 100);
    backlog(q, 10000);
    enqueue(p);   /* their queues, through the API */
    enqueue(q);
    /* a few running jobs that are not this test's, as a worker pool would have */
    for (int i = 0; i < 4; i++)
        ck_assert_int_gt(claim_at(LEASE_B, 0, T0, NULL, NULL), 0);
    sqlite3 *h = NULL;
    if (backend_pg) {
        ck_assert_msg(db_open(pg_uri, NULL, &stats_db, err, sizeof(err)) == TN_OK, "%s", err);
    } else {
        h = tn_db_native(registry_db(R));
        ck_assert_int_eq(sqlite3_trace_v2(h, SQLITE_TRACE_PROFILE, trace_cb, NULL), SQLITE_OK);
    }
    cost few[NOPS], many[NOPS];
    /* once first: a statement's first run pays for things its later runs do not */
    run_ops(p, "lease-warm0000", few);
    run_ops(p, "lease-few00000", few);
    run_ops(q, "lease-many0000", many);
    if (h != NULL)
        sqlite3_trace_v2(h, 0, NULL, NULL);
    db_close(stats_db);
    stats_db = NULL;
    const char *unit = backend_pg ? "rows of jobs read" : "VM steps";
    for (int i = 0; i < NOPS; i++) {
        fprintf(stderr, "check_jobs (%s): %-22s %5lld %s with 100 queued, %5lld with 10,000\n",
                backend_pg ? "postgres" : "sqlite", op_names[i], (long long)few[i].work, unit,
                (long long)many[i].work);
        /* PostgreSQL counts the index entries a scan read, those of dead row versions too:
         * the run's own updates leave a few dozen, which a scan or autovacuum may or may not
         * have cleared by the time the other run reads past them. A scan that grew with
         * the backlog would read thousands. */
        long long slack = backend_pg ? 50 : 20;
        ck_assert_msg(many[i].work <= few[i].work + few[i].work / 10 + slack,
                      "%s: %lld %s with 10,000 queued, %lld with 100", op_names[i],
                      (long long)many[i].work, unit, (long long)few[i].work);
        ck_assert_msg(many[i].full == 0 && few[i].full == 0, "%s scans the jobs table",
                      op_names[i]);
        if (i < 12)   /* a tenant's list of every state sorts its few merged rows */
            ck_assert_msg(many[i].sort == 0, "%s sorts", op_names[i]);
    }
}
END_TEST

Suite *jobs_suite(bool pg);
Suite *jobs_suite(bool pg)
{
    Suite *s = suite_create(pg ? "jobs-postgres" : "jobs-sqlite");
    TCase *tc = tcase_create(pg ? "postgres" : "sqlite");
    tcase_add_checked_fixture(tc, pg ? setup_pg : setup_sqlite, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_enqueue_claim_finish);
    tcase_add_test(tc, test_enqueue_many);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_fail_backoff_dead);
    tcase_add_test(tc, test_retry_cancel);
    tcase_add_test(tc, test_cancel_empties_queue);
    tcase_add_test(tc, test_unique_key);
    tcase_add_test(tc, test_lease_rules);
    tcase_add_test(tc, test_recover_reap);
    tcase_add_test(tc, test_release);
    tcase_add_test(tc, test_hook_waits);
    tcase_add_test(tc, test_priority);
    tcase_add_test(tc, test_round_robin);
    tcase_add_test(tc, test_cap);
    tcase_add_test(tc, test_finish_claim);
    tcase_add_test(tc, test_delayed);
    tcase_add_test(tc, test_list_counts_prune);
    tcase_add_test(tc, test_schedules);
    tcase_add_test(tc, test_purge_cascade);
    tcase_add_test(tc, test_older_registry);
    tcase_add_test(tc, test_hosts);
    if (pg)   /* a SQLite registry has no session to lose */
        tcase_add_test(tc, test_lost_session);
    suite_add_tcase(s, tc);
    /* Backlogs of 10,000 jobs and several processes: tagged "slow", which valgrind.sh leaves
     * out (under valgrind they take minutes, and a forked child reports the memory it
     * inherited as lost). The cases above run every line of jobs.c they run. */
    TCase *big = tcase_create(pg ? "postgres-big" : "sqlite-big");
    tcase_add_checked_fixture(big, pg ? setup_pg : setup_sqlite, teardown);
    tcase_set_timeout(big, 180);
    tcase_set_tags(big, "slow");
    tcase_add_test(big, test_fairness);
    tcase_add_test(big, test_cost);
    tcase_add_test(big, test_concurrent_claims);
    tcase_add_test(big, test_schedules_concurrent);
    suite_add_tcase(s, big);
    return s;
}
