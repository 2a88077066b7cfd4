/*
 * jobs_raw.c — the raw floor of bench/run jobs: the SQL of a job, in a loop, with no queue.
 *
 *   jobs_raw DIR PREFIX TENANTS JOBS
 *
 * For job k (0..JOBS-1), tenant PREFIXn with n = k % TENANTS + 1: the file DIR/PREFIXn.db,
 * kept open (WAL, synchronous FULL, busy_timeout 5 s, as tenancyd opens a tenant's file), its
 * marker read (SELECT tenant FROM marker WHERE id = 1) and one row inserted into job_log in
 * its own transaction: what tests/helpers/jobapp.c's "record" job does, minus the job queue,
 * the job worker and the tenancy chain. One process, as the host's default pm.jobs = 1.
 * Prints one JSON line: jobs, errors, seconds, jobs_per_s. Exit status 0, or 1 on an error.
 */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: jobs_raw DIR PREFIX TENANTS JOBS\n");
        return 2;
    }
    const char *dir = argv[1], *prefix = argv[2];
    int tenants = atoi(argv[3]);
    long jobs = atol(argv[4]);
    if (tenants < 1 || jobs < 1)
        return 2;
    sqlite3 **db = calloc((size_t)tenants, sizeof(*db));
    sqlite3_stmt **sel = calloc((size_t)tenants, sizeof(*sel));
    sqlite3_stmt **ins = calloc((size_t)tenants, sizeof(*ins));
    if (db == NULL || sel == NULL || ins == NULL)
        return 1;
    long errors = 0;
    double t0 = now_s();
    for (long k = 0; k < jobs; k++) {
        int n = (int)(k % tenants);
        if (db[n] == NULL) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s%d.db", dir, prefix, n + 1);
            if (sqlite3_open_v2(path, &db[n], SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
                sqlite3_exec(db[n], "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;",
                             NULL, NULL, NULL) != SQLITE_OK ||
                sqlite3_busy_timeout(db[n], 5000) != SQLITE_OK ||
                sqlite3_prepare_v2(db[n], "SELECT tenant FROM marker WHERE id = 1", -1, &sel[n],
                                   NULL) != SQLITE_OK ||
                sqlite3_prepare_v2(db[n], "INSERT INTO job_log (job_id, name, payload, marker, "
                                          "attempt) VALUES (?1, 'record', ?2, ?3, 1)",
                                   -1, &ins[n], NULL) != SQLITE_OK) {
                fprintf(stderr, "jobs_raw: %s: %s\n", path, sqlite3_errmsg(db[n]));
                return 1;
            }
        }
        char marker[128] = "";
        if (sqlite3_step(sel[n]) == SQLITE_ROW)
            snprintf(marker, sizeof(marker), "%s", (const char *)sqlite3_column_text(sel[n], 0));
        sqlite3_reset(sel[n]);
        char payload[32];
        snprintf(payload, sizeof(payload), "%ld", k);
        sqlite3_bind_int64(ins[n], 1, k + 1);
        sqlite3_bind_text(ins[n], 2, payload, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(ins[n], 3, marker, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(ins[n]) != SQLITE_DONE)
            errors++;
        sqlite3_reset(ins[n]);
    }
    double secs = now_s() - t0;
    for (int n = 0; n < tenants; n++) {
        sqlite3_finalize(sel[n]);
        sqlite3_finalize(ins[n]);
        sqlite3_close(db[n]);
    }
    printf("{\"jobs\":%ld,\"errors\":%ld,\"seconds\":%.3f,\"jobs_per_s\":%.1f}\n", jobs, errors,
           secs, secs > 0 ? (double)jobs / secs : 0.0);
    return errors ? 1 : 0;
}
