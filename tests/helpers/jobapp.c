/*
 * jobapp.c — a test app module with a job handler: its jobs read the tenant's own storage
 * and write what they saw there, so a test can tell a job that ran in the wrong tenant, or
 * with a previous job's context left behind, from a right one by exact values.
 *
 * HTTP (any tenant, or a central domain where noted):
 *   POST /enqueue?name=N[&payload=P][&delay=MS][&key=K][&prio=P][&attempts=A][&timeout=MS]
 *        [&tenant=SLUG]      tn_job_enqueue; answers "<rc> <id>" ("ok 12", "exists 12",
 *                            "denied 0"); tenant= is for central requests
 *   POST /enqueue_many?n=N&name=N   N jobs with payloads 1..N; answers "ok N"
 *   POST /schedule?name=N&cron=C[&payload=P]   tn_job_schedule: "<rc> <error>"
 *   POST /unschedule?name=N    tn_job_unschedule: "<rc>"
 *   GET  /log                  the tenant's job_log, one row a line:
 *                              "job_id|name|payload|marker|attempt"
 *   GET  /pids                 the process ids that ran this tenant's jobs, one a line
 *   GET  /pgsleep?s=SECONDS    PostgreSQL: pg_sleep(SECONDS) in the request's storage;
 *                              answers "ok" or "error <the server's message>"
 * Jobs:
 *   record    inserts (job id, name, payload, the marker it read, attempt) into job_log
 *   flaky     payload K: records the attempt, then for attempts <= K begins a transaction,
 *             overwrites the marker and fails (tn_job_fail): the next job must not see it
 *   sleep     payload MS or FIRST/LATER: records, then sleeps MS (FIRST ms on attempt 1,
 *             LATER ms on the attempts after it: a test that kills the first attempt has a
 *             wide window, and the retry ends soon); jobs.timeout stops it
 *   pgsleep   payload SECONDS (PostgreSQL): records, then pg_sleep(SECONDS) in the
 *             tenant's storage; fails with the server's message when it is cancelled
 *   crash     records, then abort()s the job worker
 *   spawn     records, then queues a "record" job from inside the job (payload
 *             "child-of-<id>")
 *   central   no tenant: appends "central <tenant-or-none> <payload>" to the file named by
 *             the environment variable JOBAPP_CENTRAL_FILE
 *   tenancy.* (lifecycle hooks) recorded like record (tenancy.suspended after 0.5 s: the
 *             hooks of a tenant must reach the app in order all the same); tenancy.restored
 *             is then declined (TN_DECLINED), which for a hook means done as TN_OK does
 * Test-only; never installed. Migrations and seed: tests/fixtures/jobapp/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tenancy.h"

static const char *arg(tn_request *r, const char *k, const char *def)
{
    const char *v = tn_query_arg(r, k);
    return v ? v : def;
}

static int handle(tn_request *r)
{
    const char *p = tn_path(r);
    tn_add_header(r, "Content-Type", "text/plain");
    if (strcmp(p, "/enqueue") == 0) {
        tn_job_opts o = {.delay_ms = atoll(arg(r, "delay", "0")),
                         .priority = atoi(arg(r, "prio", "0")),
                         .unique_key = tn_query_arg(r, "key"),
                         .max_attempts = atoi(arg(r, "attempts", "0")),
                         .timeout_ms = atoi(arg(r, "timeout", "0")),
                         .tenant = tn_query_arg(r, "tenant")};
        int64_t id = 0;
        int rc = tn_job_enqueue(r, arg(r, "name", ""), arg(r, "payload", ""), &o, &id);
        return tn_printf(r, "%s %lld\n", rc == TN_OK ? "ok" : tn_rc_str(rc), (long long)id);
    }
    if (strcmp(p, "/enqueue_many") == 0) {
        int n = atoi(arg(r, "n", "0"));
        const char *name = arg(r, "name", "record");
        for (int i = 1; i <= n; i++) {
            char pl[32];
            snprintf(pl, sizeof(pl), "%d", i);
            int rc = tn_job_enqueue(r, name, pl, NULL, NULL);
            if (rc != TN_OK)
                return tn_printf(r, "%s at %d: %s\n", tn_rc_str(rc), i, tn_request_error(r));
        }
        return tn_printf(r, "ok %d\n", n);
    }
    if (strcmp(p, "/schedule") == 0) {
        int rc = tn_job_schedule(r, arg(r, "name", ""), arg(r, "cron", ""),
                                 arg(r, "payload", ""));
        return tn_printf(r, "%s %s\n", rc == TN_OK ? "ok" : tn_rc_str(rc), tn_request_error(r));
    }
    if (strcmp(p, "/unschedule") == 0) {
        int rc = tn_job_unschedule(r, arg(r, "name", ""));
        return tn_printf(r, "%s\n", rc == TN_OK ? "ok" : tn_rc_str(rc));
    }
    if (strcmp(p, "/pids") == 0) {   /* which processes ran this tenant's jobs */
        tn_db *db = tn_db_of(r);
        tn_rows *rows = NULL;
        if (db == NULL || tn_db_query(db, &rows, "SELECT DISTINCT pid FROM job_log ORDER BY pid",
                                      0, NULL) != TN_OK)
            return tn_send_error(r, 503, "storage");
        while (tn_rows_next(rows) == TN_OK)
            tn_printf(r, "%s\n", tn_rows_get(rows, 0));
        tn_rows_free(rows);
        return TN_OK;
    }
    if (strcmp(p, "/pgsleep") == 0) {
        tn_db *db = tn_db_of(r);
        const char *sec[] = {arg(r, "s", "0")};
        if (db == NULL)
            return tn_send_error(r, 503, "storage");
        if (tn_db_exec(db, "SELECT pg_sleep(CAST($1 AS float8))", 1, sec) != TN_OK)
            return tn_printf(r, "error %s\n", tn_db_error(db));
        return tn_printf(r, "ok\n");
    }
    if (strcmp(p, "/log") == 0) {
        tn_db *db = tn_db_of(r);
        tn_rows *rows = NULL;
        if (db == NULL || tn_db_query(db, &rows, "SELECT job_id, name, payload, marker, attempt "
                                                 "FROM job_log ORDER BY job_id, attempt", 0, NULL) != TN_OK)
            return tn_send_error(r, 503, "storage");
        while (tn_rows_next(rows) == TN_OK)
            tn_printf(r, "%s|%s|%s|%s|%s\n", tn_rows_get(rows, 0), tn_rows_get(rows, 1),
                      tn_rows_get(rows, 2), tn_rows_get(rows, 3), tn_rows_get(rows, 4));
        tn_rows_free(rows);
        return TN_OK;
    }
    return tn_send_error(r, 404, "no such path");
}

/* What the job saw: the marker of the storage it was given. */
static int record(tn_request *r, const tn_job *j)
{
    tn_db *db = tn_db_of(r);
    if (db == NULL)
        return tn_job_fail(r, "no storage");
    tn_rows *rows = NULL;
    if (tn_db_query(db, &rows, "SELECT tenant FROM marker WHERE id = 1", 0, NULL) != TN_OK)
        return tn_job_fail(r, "marker: %s", tn_db_error(db));
    char marker[128] = "";
    if (tn_rows_next(rows) == TN_OK && tn_rows_get(rows, 0) != NULL)
        snprintf(marker, sizeof(marker), "%s", tn_rows_get(rows, 0));
    tn_rows_free(rows);
    char id[32], attempt[16], pid[16];
    snprintf(id, sizeof(id), "%lld", (long long)j->id);
    snprintf(attempt, sizeof(attempt), "%d", j->attempt);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    const char *pr[] = {id, j->name, j->payload, marker, attempt, pid};
    if (tn_db_exec(db, "INSERT INTO job_log (job_id, name, payload, marker, attempt, pid) "
                       "VALUES ($1, $2, $3, $4, $5, $6)", 6, pr) != TN_OK)
        return tn_job_fail(r, "job_log: %s", tn_db_error(db));
    return TN_OK;
}

static int job(tn_request *r, const tn_job *j)
{
    const char *n = j->name;
    if (strcmp(n, "central") == 0) {
        const char *path = getenv("JOBAPP_CENTRAL_FILE");
        FILE *f = path ? fopen(path, "a") : NULL;
        if (f == NULL)
            return tn_job_fail(r, "no JOBAPP_CENTRAL_FILE");
        const tn_tenant *t = tn_tenant_of(r);
        fprintf(f, "central %s %s\n", t ? tn_tenant_slug(t) : "none", j->payload);
        fclose(f);
        return TN_OK;
    }
    /* a slow hook: a later one of the same tenant must still be told after it */
    if (strcmp(n, "tenancy.suspended") == 0)
        usleep(500 * 1000);
    int rc = record(r, j);
    if (rc != TN_OK)
        return rc;
    if (strcmp(n, "flaky") == 0 && j->attempt <= atoi(j->payload)) {
        tn_db *db = tn_db_of(r);
        tn_db_begin(db);
        const char *bad[] = {"POISONED"};
        tn_db_exec(db, "UPDATE marker SET tenant = $1 WHERE id = 1", 1, bad);
        return tn_job_fail(r, "flaky attempt %d", j->attempt);
    }
    if (strcmp(n, "sleep") == 0) {
        const char *later = strchr(j->payload, '/');
        int ms = j->attempt > 1 && later != NULL ? atoi(later + 1) : atoi(j->payload);
        usleep((useconds_t)ms * 1000);
    }
    if (strcmp(n, "pgsleep") == 0) {
        tn_db *db = tn_db_of(r);
        const char *sec[] = {j->payload};
        if (tn_db_exec(db, "SELECT pg_sleep(CAST($1 AS float8))", 1, sec) != TN_OK)
            return tn_job_fail(r, "pg_sleep: %s", tn_db_error(db));
    }
    if (strcmp(n, "crash") == 0)
        abort();
    if (strcmp(n, "tenancy.restored") == 0)
        return TN_DECLINED;
    if (strcmp(n, "spawn") == 0) {
        char pl[64];
        snprintf(pl, sizeof(pl), "child-of-%lld", (long long)j->id);
        int erc = tn_job_enqueue(r, "record", pl, NULL, NULL);
        if (erc != TN_OK)
            return tn_job_fail(r, "enqueue from a job: %s", tn_rc_str(erc));
    }
    return TN_OK;
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "jobapp",
    .version = "1",
    .handle = handle,
    .job = job,
};
