/*
 * scope_mix.c — many tenants through few connections: the wrong-tenant check of schema
 * mode (storage/target.h), used by tests/integration/pgbouncer.sh behind a real PgBouncer
 * in transaction mode, and the round-trip benchmark of the schema scope.
 *
 *   scope_mix setup URI N                  create schemas tn_mix_0..N-1 (each owned by a
 *                                          role of the same name, with a table items
 *                                          holding one row, its own name)
 *   scope_mix run URI N OPS WORKERS [txn]
 *                                          WORKERS processes, each with its own pool (one
 *                                          schema-mode connection, like a tenancyd worker),
 *                                          run OPS operations in all: a random tenant, then
 *                                          SELECT its marker row and current_user, both
 *                                          its own (in an explicit transaction with "txn",
 *                                          where some are also left open, made to fail, SET
 *                                          a session search_path for pool_release to clean
 *                                          up, or read another tenant's table by its
 *                                          qualified name, which the database must refuse)
 *   scope_mix bench URI N ROUNDS           µs per statement: plain (qualified) autocommit,
 *                                          scoped autocommit on one tenant, scoped with a
 *                                          change of tenant each time (and the same with
 *                                          reset_always: a full session wipe each time),
 *                                          begin+select+commit
 *
 * Unlike the other helpers it links the project's core/ and storage/ (it tests them), and
 * loads the PostgreSQL driver as tenancyd does ($TENANCY_PGDRIVER). One line on stdout says
 * what it did ("ops=2000 wrong=0 errors=0 backends=1"); exit 0 when every answer was the
 * tenant's own and nothing failed, 1 otherwise, 2 for a usage error. Every operation is
 * bounded by a 10 s statement timeout and the whole run by an alarm.
 *
 * Must not: build SQL from a value (schema names go through db_quote_ident).
 */
#include "core/first.h"
#include "storage/db.h"
#include "storage/target.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PREFIX "tn_mix_"

static void usage(void)
{
    fprintf(stderr, "usage: scope_mix setup URI N | run URI N OPS WORKERS [txn] | "
                    "bench URI N ROUNDS\n");
    exit(2);
}

static int to_int(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0 || v > 1000000)
        usage();
    return (int)v;
}

static void schema_of(int i, char out[32])
{
    snprintf(out, 32, PREFIX "%d", i);
}

static int setup(const char *uri, int n)
{
    for (int i = 0; i < n; i++) {
        char name[32], err[512];
        schema_of(i, name);
        storage_target t = {.kind = TARGET_PG_SCHEMA, .server = uri, .name = name,
                            .role = name};
        int rc = target_drop(&t, err, sizeof(err));
        if (rc != TN_OK && rc != TN_NOTFOUND) {
            fprintf(stderr, "scope_mix: drop %s: %s\n", name, err);
            return 1;
        }
        tn_db *db = NULL;
        const char *p[] = {name};
        if (target_create(&t, err, sizeof(err)) != TN_OK ||
            target_open(&t, &db, err, sizeof(err)) != TN_OK) {
            fprintf(stderr, "scope_mix: %s: %s\n", name, err);
            return 1;
        }
        if (tn_db_exec(db, "CREATE TABLE items (marker TEXT PRIMARY KEY)", 0, NULL) != TN_OK ||
            tn_db_exec(db, "INSERT INTO items VALUES ($1)", 1, p) != TN_OK) {
            fprintf(stderr, "scope_mix: %s: %s\n", name, tn_db_error(db));
            db_close(db);
            return 1;
        }
        db_close(db);
    }
    printf("setup: %d schemas\n", n);
    return 0;
}

/* ---- run: the wrong-tenant check ------------------------------------------------------------- */

struct tally {
    int ops, wrong, errors;
    int pids[64];
    int npids;
};

static void note_pid(struct tally *t, const char *pid)
{
    int v = pid != NULL ? atoi(pid) : 0;
    for (int i = 0; i < t->npids; i++)
        if (t->pids[i] == v)
            return;
    if (t->npids < 64)
        t->pids[t->npids++] = v;
}

/* One operation for tenant i on a pooled connection; returns 0 or 1 (wrong) or -1 (error). */
static int one_op(storage_pool *pool, const char *uri, int i, bool txn, int op,
                  struct tally *tl)
{
    char name[32], err[512];
    schema_of(i, name);
    storage_target t = {.kind = TARGET_PG_SCHEMA, .server = uri, .name = name,
                        .statement_timeout_ms = 10000, .role = name};
    tn_db *db = NULL;
    if (pool_acquire(pool, &t, &db, err, sizeof(err)) != TN_OK) {
        fprintf(stderr, "scope_mix: acquire %s: %s\n", name, err);
        return -1;
    }
    int result = 0;
    tn_rows *rows = NULL;
    if (txn && tn_db_begin(db) != TN_OK)
        goto error;
    for (int k = 0; k < (txn ? 2 : 1); k++) {   /* in a transaction: two reads */
        if (tn_db_query(db, &rows,
                        "SELECT marker, pg_catalog.pg_backend_pid()::text, current_user::text "
                        "FROM items", 0, NULL) != TN_OK ||
            tn_rows_next(rows) != TN_OK)
            goto error;
        const char *m = tn_rows_get(rows, 0), *role = tn_rows_get(rows, 2);
        note_pid(tl, tn_rows_get(rows, 1));
        if (m == NULL || strcmp(m, name) != 0 || role == NULL || strcmp(role, name) != 0) {
            if (result == 0)
                fprintf(stderr, "scope_mix: WRONG TENANT: %s read '%s' as role '%s'\n", name,
                        m != NULL ? m : "(null)", role != NULL ? role : "(null)");
            result = 1;
        }
        tn_rows_free(rows);
        rows = NULL;
    }
    if (txn) {
        switch (op % 5) {
        case 1:   /* left open: pool_release rolls it back */
            break;
        case 2:   /* fails, and is left failed */
            tn_db_exec(db, "SELECT * FROM no_such_table", 0, NULL);
            break;
        case 3:   /* a session-level path to another tenant, committed */
            if (tn_db_exec(db, "SET search_path TO " PREFIX "0", 0, NULL) != TN_OK ||
                tn_db_commit(db) != TN_OK)
                goto error;
            break;
        case 4:   /* another tenant's table by its qualified name: the database refuses it
                   * (the tenant's role has no rights on that schema); left failed */
            if (i != 0 && tn_db_exec(db, "SELECT marker FROM " PREFIX "0.items", 0, NULL) !=
                              TN_DENIED) {
                fprintf(stderr, "scope_mix: WRONG TENANT: %s read " PREFIX "0.items (%s)\n",
                        name, tn_db_error(db));
                result = 1;
            }
            break;
        default:
            if (tn_db_commit(db) != TN_OK)
                goto error;
        }
    }
    pool_release(pool, db);
    return result;

error:
    fprintf(stderr, "scope_mix: %s: %s\n", name, tn_db_error(db));
    tn_rows_free(rows);
    pool_release(pool, db);
    return -1;
}

static void worker(const char *uri, int n, int ops, bool txn, unsigned seed, int fd)
{
    storage_pool *pool = pool_create(&(pool_limits){.pg_max_tenants = 100000});
    struct tally t = {0};
    srand(seed);
    for (int op = 0; op < ops; op++) {
        int r = one_op(pool, uri, rand() % n, txn, op, &t);
        t.ops++;
        if (r > 0)
            t.wrong++;
        else if (r < 0)
            t.errors++;
    }
    pool_destroy(pool);
    if (write(fd, &t, sizeof(t)) != (ssize_t)sizeof(t))
        _exit(1);
    _exit(0);
}

static double now_us(void);

static int run(const char *uri, int n, int ops, int workers, bool txn)
{
    double t0 = now_us();
    int fds[2];
    if (pipe(fds) != 0) {
        perror("scope_mix: pipe");
        return 1;
    }
    for (int w = 0; w < workers; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("scope_mix: fork");
            return 1;
        }
        if (pid == 0) {
            close(fds[0]);
            worker(uri, n, ops / workers + (w < ops % workers), txn, 1000u + (unsigned)w,
                   fds[1]);
        }
    }
    close(fds[1]);
    struct tally sum = {0}, t;
    int got = 0;
    while (read(fds[0], &t, sizeof(t)) == (ssize_t)sizeof(t)) {
        got++;
        sum.ops += t.ops;
        sum.wrong += t.wrong;
        sum.errors += t.errors;
        for (int i = 0; i < t.npids; i++) {
            bool seen = false;
            for (int j = 0; j < sum.npids; j++)
                seen = seen || sum.pids[j] == t.pids[i];
            if (!seen && sum.npids < 64)
                sum.pids[sum.npids++] = t.pids[i];
        }
    }
    int status, failed = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
    printf("ops=%d wrong=%d errors=%d workers=%d backends=%d mode=%s seconds=%.2f\n", sum.ops,
           sum.wrong, sum.errors, got, sum.npids,
           txn ? "txn" : "autocommit", (now_us() - t0) / 1e6);
    return sum.wrong == 0 && sum.errors == 0 && failed == 0 && got == workers &&
                   sum.ops == ops
               ? 0
               : 1;
}

/* ---- bench: the cost of the scope ---------------------------------------------------------- */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

enum { PLAIN, SCOPED, SWITCHING, SWITCHING_WIPE, SCOPED_TXN, PLAIN_TXN, MODES };
static const char *const mode_names[MODES] = {"plain", "scoped", "switching", "switching_wipe",
                                              "scoped_txn", "plain_txn"};

/* One timed operation of a mode; returns its µs, or -1. */
static double bench_op(tn_db *db, int mode, int i, int n, const char *qualified)
{
    char v[64], name[32];
    double t0 = now_us();
    int rc = TN_OK;
    switch (mode) {
    case PLAIN:   /* an unscoped autocommit statement */
        rc = db_query_value(db, v, sizeof(v), qualified, 0, NULL);
        break;
    case SCOPED:  /* a scoped autocommit statement, the same tenant as the last one */
        rc = db_query_value(db, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
        break;
    case SWITCHING:        /* another tenant each time (a clean statement: no wipe) */
    case SWITCHING_WIPE:   /* the same with reset_always: DISCARD ALL rides along */
        schema_of(i % n, name);
        db_set_schema_scope(db, name);
        rc = db_query_value(db, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
        break;
    case SCOPED_TXN:  /* begin (deferred) + select + commit: two round trips */
    case PLAIN_TXN:   /* begin + select + commit unscoped: three */
        if ((rc = tn_db_begin(db)) == TN_OK &&
            (rc = db_query_value(db, v, sizeof(v),
                                 mode == PLAIN_TXN ? qualified : "SELECT marker FROM items", 0,
                                 NULL)) == TN_OK)
            rc = tn_db_commit(db);
        break;
    default:
        break;
    }
    return rc == TN_OK ? now_us() - t0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Blocks of 100 operations per mode in turn (the first of a block, which may pay a change
 * of mode, is not counted), so that a busy moment of the machine hits every mode alike. */
static int bench(const char *uri, int n, int rounds)
{
    tn_db *db = NULL, *wiping = NULL;
    char err[512], sql[128], q[72];
    if (db_open(uri, NULL, &db, err, sizeof(err)) != TN_OK ||
        db_open(uri, &(db_options){.reset_always = true}, &wiping, err, sizeof(err)) != TN_OK) {
        fprintf(stderr, "scope_mix: %s\n", err);
        db_close(db);
        return 1;
    }
    db_quote_ident(PREFIX "0", q, sizeof(q));
    snprintf(sql, sizeof(sql), "SELECT marker FROM %s.items", q);
    double *us[MODES];
    int count[MODES] = {0}, blocks = (rounds + 98) / 99;
    for (int m = 0; m < MODES; m++)
        us[m] = calloc((size_t)blocks * 100, sizeof(double));
    for (int b = 0; b < blocks; b++) {
        for (int m = 0; m < MODES; m++) {
            tn_db *on = m == SWITCHING_WIPE ? wiping : db;
            db_set_schema_scope(on, m == PLAIN || m == PLAIN_TXN ? NULL : PREFIX "0");
            for (int i = 0; i < 100; i++) {
                double t = bench_op(on, m, b * 100 + i, n, sql);
                if (t < 0) {
                    fprintf(stderr, "scope_mix: %s: %s\n", mode_names[m], tn_db_error(on));
                    db_close(db);
                    db_close(wiping);
                    return 1;
                }
                if (i > 0)
                    us[m][count[m]++] = t;
            }
        }
    }
    printf("ops_per_mode=%d", count[0]);
    for (int m = 0; m < MODES; m++) {
        double sum = 0;
        for (int i = 0; i < count[m]; i++)
            sum += us[m][i];
        qsort(us[m], (size_t)count[m], sizeof(double), cmp_double);
        printf(" %s_p50_us=%.1f %s_mean_us=%.1f", mode_names[m], us[m][count[m] / 2],
               mode_names[m], sum / count[m]);
        free(us[m]);
    }
    printf("\n");
    db_close(db);
    db_close(wiping);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        usage();
    alarm(600);   /* a deadline for the whole run */
    const char *uri = argv[2];
    int n = to_int(argv[3]);
    if (strcmp(argv[1], "setup") == 0 && argc == 4)
        return setup(uri, n);
    if (strcmp(argv[1], "run") == 0 && (argc == 6 || argc == 7)) {
        bool txn = argc == 7 && strcmp(argv[6], "txn") == 0;
        if (argc == 7 && !txn)
            usage();
        return run(uri, n, to_int(argv[4]), to_int(argv[5]), txn);
    }
    if (strcmp(argv[1], "bench") == 0 && argc == 5)
        return bench(uri, n, to_int(argv[4]));
    usage();
}
