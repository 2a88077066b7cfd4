/*
 * sqlite_raw.c — the raw sqlite3 floor of bench/run sqlite, and its row counter.
 *
 *   sqlite_raw run DIR PREFIX TENANTS PROCS SECONDS full|normal MAX_OPEN SEED [COUNTS]
 *   sqlite_raw count DIR PREFIX TENANTS [ROWS [WHERE]]
 *   sqlite_raw create DIR PREFIX TENANTS PROCS full|normal
 *   sqlite_raw serve SOCKET DIR PREFIX TENANTS PROCS full|normal MAX_OPEN
 *
 * run: PROCS forked processes, each for SECONDS, pick a random tenant file DIR/PREFIXn.db
 * (n in 1..TENANTS) and insert 20 rows into its items table in one transaction (BEGIN
 * IMMEDIATE, one prepared INSERT reset per row, COMMIT) — what bench/benchapp.c does per
 * POST /insert, minus HTTP, FastCGI and the tenancy chain (a data API table's created_at and
 * updated_at are filled too, as the app fills them). Each process keeps up to
 * MAX_OPEN handles open (WAL, busy_timeout 5 s, synchronous as asked, the statement
 * prepared once per handle), closing the oldest first, as tenancyd's per-worker pool does.
 * Prints one JSON line: transactions, rows, errors, seconds, rows_per_s. With COUNTS, also
 * writes there one line "n transactions" per tenant that committed any, summed over the
 * processes after their timed loops (so the counting costs the loop nothing): bench/run
 * checks every tenant's file against what was committed to it.
 *
 * count: the total of items rows over the TENANTS files, and how many files could not be
 * read; one JSON line. With ROWS, also one line "n rows" per tenant there (-1: unreadable).
 * With WHERE (an SQL condition, the caller's own text), only the rows that meet it.
 *
 * create: the floor of provisioning a data API tenant (bench/run data, S1): PROCS forked
 * processes make the new files DIR/PREFIXn.db for n in 1..TENANTS, each its stripe, as a
 * tenant's table and rows would be made without the host: WAL, synchronous as asked, one
 * transaction with the items table (the columns the data API keeps and the benchmark's)
 * and its 100 rows "PREFIXn-rK". One JSON line: tenants, errors, seconds, per_s.
 *
 * serve: the HTTP floor of bench/run sqlite: the same transaction behind a bare libfcgi
 * responder, PROCS forked processes on one listen socket (FCGX_OpenSocket syntax), each
 * with its own handles as in run. A POST's Host names the tenant (PREFIXn.anything); each
 * line of its body becomes a row (name the line, n its index), in one transaction, and the
 * answer is bench/benchapp.c's, {"tenant":"PREFIXn","inserted":20}; another tenant gets 404,
 * a failed transaction 503. No registry, no log, no pool of workers around it: how much of
 * the raw loop's figure a hand-written FastCGI app keeps once nginx and the load generator
 * share the machine. Runs until SIGTERM (or SIGINT), then stops its processes.
 *
 * Exit status 0, or 1 when anything failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcgiapp.h>
#include <stdbool.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROWS_PER_TX 20

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng;
static uint64_t rnd(void)   /* xorshift64* */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

typedef struct handle {
    sqlite3 *db;
    sqlite3_stmt *ins;
    bool stamped;                /* the table has created_at and updated_at to fill */
    long opened_at;              /* order of opening, for closing the oldest */
} handle;

static handle *H;                /* indexed by tenant number */
static long open_count, open_seq;

static void close_handle(handle *h)
{
    sqlite3_finalize(h->ins);
    sqlite3_close(h->db);
    h->db = NULL;
    h->ins = NULL;
    open_count--;
}

static handle *get_handle(const char *dir, const char *prefix, long n, long tenants, long max_open,
                          const char *sync)
{
    handle *h = &H[n];
    if (h->db != NULL)
        return h;
    if (open_count >= max_open) {   /* close the oldest open handle */
        long oldest = -1;
        for (long i = 1; i <= tenants; i++)
            if (H[i].db != NULL && (oldest < 0 || H[i].opened_at < H[oldest].opened_at))
                oldest = i;
        if (oldest > 0)
            close_handle(&H[oldest]);
    }
    char path[4096], pragma[128];
    snprintf(path, sizeof(path), "%s/%s%ld.db", dir, prefix, n);
    if (sqlite3_open_v2(path, &h->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_raw: %s: %s\n", path, sqlite3_errmsg(h->db));
        sqlite3_close(h->db);
        h->db = NULL;
        return NULL;
    }
    sqlite3_busy_timeout(h->db, 5000);
    snprintf(pragma, sizeof(pragma), "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;", sync);
    /* A data API table (bench/run data) has created_at and updated_at NOT NULL, which the app
     * fills on every insert: the floor fills them too. */
    h->stamped = sqlite3_table_column_metadata(h->db, NULL, "items", "created_at", NULL, NULL,
                                               NULL, NULL, NULL) == SQLITE_OK;
    if (sqlite3_exec(h->db, pragma, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(h->db, h->stamped ? "INSERT INTO items (name, n, created_at, "
                                               "updated_at) VALUES (?1, ?2, ?3, ?3)"
                                             : "INSERT INTO items (name, n) VALUES (?1, ?2)",
                           -1, &h->ins, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_raw: %s: %s\n", path, sqlite3_errmsg(h->db));
        sqlite3_finalize(h->ins);
        sqlite3_close(h->db);
        h->db = NULL;
        h->ins = NULL;
        return NULL;
    }
    h->opened_at = open_seq++;
    open_count++;
    return h;
}

/* One transaction of count rows named names[i] (n = i), as the app does per request. */
static int one_tx(handle *h, const char *const *names, int count)
{
    if (sqlite3_exec(h->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    char stamp[96] = "";
    if (h->stamped) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (long)(ts.tv_nsec / 1000000) % 1000);
    }
    for (int i = 0; i < count; i++) {
        sqlite3_bind_text(h->ins, 1, names[i], -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(h->ins, 2, i);
        if (h->stamped)
            sqlite3_bind_text(h->ins, 3, stamp, -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(h->ins);
        sqlite3_reset(h->ins);
        if (rc != SQLITE_DONE) {
            sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    if (sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

/* The loop's own rows: "raw K I". */
static int loop_tx(handle *h, long k)
{
    char buf[ROWS_PER_TX][64];
    const char *names[ROWS_PER_TX];
    for (int i = 0; i < ROWS_PER_TX; i++) {
        snprintf(buf[i], sizeof(buf[i]), "raw %ld %d", k, i);
        names[i] = buf[i];
    }
    return one_tx(h, names, ROWS_PER_TX);
}

/* Three descriptors per open handle (the file, -wal, -shm), as tenancyd's workers raise
 * their limit for (up to the hard limit). */
static void raise_nofile(long max_open)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_open * 3 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int run(int argc, char **argv)
{
    if (argc != 10 && argc != 11)
        return 2;
    const char *counts_path = argc == 11 ? argv[10] : NULL;
    const char *dir = argv[2], *prefix = argv[3], *sync = argv[7];
    long tenants = atol(argv[4]), procs = atol(argv[5]), max_open = atol(argv[8]);
    double secs = atof(argv[6]);
    uint64_t seed = strtoull(argv[9], NULL, 10);
    if (tenants < 1 || procs < 1 || secs <= 0 || max_open < 1 ||
        (strcmp(sync, "full") != 0 && strcmp(sync, "normal") != 0))
        return 2;
    raise_nofile(max_open);
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    /* committed transactions per tenant, summed by the processes when they are done */
    long *committed = mmap(NULL, ((size_t)tenants + 1) * sizeof(long), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (committed == MAP_FAILED)
        return 1;
    double t0 = now_s();
    for (long p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            close(fds[0]);
            rng = (seed + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)p * 7919 + 1;
            H = calloc((size_t)tenants + 1, sizeof(*H));
            long *mine = calloc((size_t)tenants + 1, sizeof(long));
            if (H == NULL || mine == NULL)
                _exit(1);
            long tx = 0, err = 0;
            double end = now_s() + secs;
            while (now_s() < end) {
                long n = 1 + (long)(rnd() % (uint64_t)tenants);
                handle *h = get_handle(dir, prefix, n, tenants, max_open, sync);
                if (h == NULL || loop_tx(h, tx) != 0) {
                    err++;
                } else {
                    tx++;
                    mine[n]++;
                }
                if (err > 1000)
                    break;
            }
            for (long i = 1; i <= tenants; i++)
                if (H[i].db != NULL)
                    close_handle(&H[i]);
            for (long i = 1; i <= tenants; i++)
                if (mine[i] > 0)
                    __atomic_fetch_add(&committed[i], mine[i], __ATOMIC_RELAXED);
            char line[128];
            int l = snprintf(line, sizeof(line), "%ld %ld\n", tx, err);
            if (write(fds[1], line, (size_t)l) != l)
                _exit(1);
            _exit(0);
        }
    }
    close(fds[1]);
    long tx = 0, err = 0, a, b;
    FILE *f = fdopen(fds[0], "r");
    while (f != NULL && fscanf(f, "%ld %ld", &a, &b) == 2) {
        tx += a;
        err += b;
    }
    int status, bad = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad++;
    double el = now_s() - t0;
    if (counts_path != NULL) {
        FILE *cf = fopen(counts_path, "w");
        for (long i = 1; cf != NULL && i <= tenants; i++)
            if (committed[i] > 0)
                fprintf(cf, "%ld %ld\n", i, committed[i]);
        if (cf == NULL || fclose(cf) != 0) {
            fprintf(stderr, "sqlite_raw: cannot write %s\n", counts_path);
            bad++;
        }
    }
    printf("{\"transactions\":%ld,\"rows\":%ld,\"errors\":%ld,\"failed_processes\":%d,"
           "\"seconds\":%.3f,\"rows_per_s\":%.1f,\"procs\":%ld,\"max_open\":%ld,\"synchronous\":\"%s\"}\n",
           tx, tx * ROWS_PER_TX, err, bad, el, (double)tx * ROWS_PER_TX / el, procs, max_open, sync);
    return err == 0 && bad == 0 ? 0 : 1;
}

static int count(int argc, char **argv)
{
    if (argc != 5 && argc != 6 && argc != 7)
        return 2;
    char sql[1024];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM items%s%s", argc == 7 ? " WHERE " : "",
             argc == 7 ? argv[6] : "");
    const char *dir = argv[2], *prefix = argv[3];
    long tenants = atol(argv[4]), unreadable = 0;
    int64_t total = 0;
    FILE *rows = NULL;
    if (argc >= 6 && (rows = fopen(argv[5], "w")) == NULL) {
        fprintf(stderr, "sqlite_raw: cannot write %s\n", argv[5]);
        return 1;
    }
    for (long n = 1; n <= tenants; n++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s%ld.db", dir, prefix, n);
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_busy_timeout(db, 5000) == SQLITE_OK &&
            sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            total += sqlite3_column_int64(st, 0);
            if (rows != NULL)
                fprintf(rows, "%ld %" PRId64 "\n", n, (int64_t)sqlite3_column_int64(st, 0));
        } else {
            unreadable++;
            if (rows != NULL)
                fprintf(rows, "%ld -1\n", n);
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
    if (rows != NULL && fclose(rows) != 0) {
        fprintf(stderr, "sqlite_raw: cannot write %s\n", argv[5]);
        unreadable++;
    }
    printf("{\"tenants\":%ld,\"rows\":%" PRId64 ",\"unreadable\":%ld}\n", tenants, total, unreadable);
    return unreadable == 0 ? 0 : 1;
}

static int create_one(const char *dir, const char *prefix, long n, const char *sync)
{
    char path[4096], sql[512];
    snprintf(path, sizeof(path), "%s/%s%ld.db", dir, prefix, n);
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    int ok = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                            SQLITE_OPEN_EXCLUSIVE, NULL) == SQLITE_OK;
    snprintf(sql, sizeof(sql),
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; BEGIN IMMEDIATE;"
             "CREATE TABLE items (id INTEGER PRIMARY KEY, "
             "created_at TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ','now')), "
             "updated_at TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ','now')), "
             "name TEXT NOT NULL, n INTEGER NOT NULL, k TEXT UNIQUE);", sync);
    ok = ok && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK &&
         sqlite3_prepare_v2(db, "INSERT INTO items (name, n) VALUES (?1, ?2)", -1, &ins, NULL) ==
             SQLITE_OK;
    for (int k = 1; ok && k <= 100; k++) {
        char name[96];
        snprintf(name, sizeof(name), "%s%ld-r%d", prefix, n, k);
        sqlite3_bind_text(ins, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(ins, 2, k);
        ok = sqlite3_step(ins) == SQLITE_DONE;
        sqlite3_reset(ins);
    }
    ok = ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    if (!ok)
        fprintf(stderr, "sqlite_raw: %s: %s\n", path, db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_finalize(ins);
    sqlite3_close(db);
    return ok ? 0 : -1;
}

static int create(int argc, char **argv)
{
    if (argc != 7)
        return 2;
    const char *dir = argv[2], *prefix = argv[3], *sync = argv[6];
    long tenants = atol(argv[4]), procs = atol(argv[5]);
    if (tenants < 1 || procs < 1 || (strcmp(sync, "full") != 0 && strcmp(sync, "normal") != 0))
        return 2;
    if (procs > tenants)
        procs = tenants;
    double t0 = now_s();
    for (long p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            int bad = 0;
            for (long n = 1 + p; n <= tenants; n += procs)
                bad += create_one(dir, prefix, n, sync) != 0;
            _exit(bad > 0 ? 1 : 0);
        }
    }
    int status, bad = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad++;
    double el = now_s() - t0;
    printf("{\"tenants\":%ld,\"failed_processes\":%d,\"seconds\":%.3f,\"per_s\":%.1f,"
           "\"procs\":%ld,\"synchronous\":\"%s\"}\n",
           tenants, bad, el, (double)tenants / el, procs, sync);
    return bad == 0 ? 0 : 1;
}

/* ---- serve: the HTTP floor ---------------------------------------------------------------- */

static volatile sig_atomic_t serve_stop;

static void on_serve_stop(int signo)
{
    (void)signo;
    serve_stop = 1;   /* the parent's loop does the work */
}

/* The tenant number of a Host "PREFIXn..." (1..tenants), or 0. */
static long host_tenant(const char *host, const char *prefix, long tenants)
{
    size_t pl = strlen(prefix);
    if (host == NULL || strncmp(host, prefix, pl) != 0)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(host + pl, &end, 10);
    if (errno != 0 || end == host + pl || (*end != '.' && *end != ':' && *end != '\0') ||
        n < 1 || n > tenants)
        return 0;
    return n;
}

static void serve_child(int sock, const char *dir, const char *prefix, long tenants, long max_open,
                        const char *sync)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    H = calloc((size_t)tenants + 1, sizeof(*H));
    if (H == NULL || FCGX_Init() != 0)
        _exit(1);
    FCGX_Request req;
    FCGX_InitRequest(&req, sock, 0);
    static char body[65536];
    enum { MAX_LINES = 1024 };
    const char *names[MAX_LINES];
    while (FCGX_Accept_r(&req) >= 0) {
        long n = host_tenant(FCGX_GetParam("HTTP_HOST", req.envp), prefix, tenants);
        const char *cl = FCGX_GetParam("CONTENT_LENGTH", req.envp);
        long len = cl != NULL ? atol(cl) : 0;
        int status = 200, lines = 0;
        if (n == 0) {
            status = 404;
        } else if (len <= 0 || len >= (long)sizeof(body) || FCGX_GetStr(body, (int)len, req.in) != len) {
            status = 400;
        } else {
            body[len] = '\0';
            char *save = NULL;
            for (char *line = strtok_r(body, "\n", &save); line != NULL && lines < MAX_LINES;
                 line = strtok_r(NULL, "\n", &save))
                names[lines++] = line;
            handle *h = get_handle(dir, prefix, n, tenants, max_open, sync);
            if (lines == 0)
                status = 400;
            else if (h == NULL || one_tx(h, names, lines) != 0)
                status = 503;
        }
        if (status == 200)
            FCGX_FPrintF(req.out, "Content-Type: application/json\r\n\r\n"
                                  "{\"tenant\":\"%s%ld\",\"inserted\":%d}\n", prefix, n, lines);
        else
            FCGX_FPrintF(req.out, "Status: %d\r\nContent-Type: text/plain\r\n\r\nstatus %d\n",
                         status, status);
        FCGX_Finish_r(&req);
    }
    _exit(0);
}

static int serve(int argc, char **argv)
{
    if (argc != 9)
        return 2;
    const char *dir = argv[3], *prefix = argv[4], *sync = argv[7];
    long tenants = atol(argv[5]), procs = atol(argv[6]), max_open = atol(argv[8]);
    if (tenants < 1 || procs < 1 || procs > 256 || max_open < 1 ||
        (strcmp(sync, "full") != 0 && strcmp(sync, "normal") != 0))
        return 2;
    raise_nofile(max_open);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_serve_stop;   /* no SA_RESTART: wait returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (FCGX_Init() != 0)
        return 1;
    int sock = FCGX_OpenSocket(argv[2], 511);
    if (sock < 0) {
        fprintf(stderr, "sqlite_raw: cannot listen on %s\n", argv[2]);
        return 1;
    }
    pid_t kids[256];
    for (long p = 0; p < procs; p++) {
        kids[p] = fork();
        if (kids[p] == 0)
            serve_child(sock, dir, prefix, tenants, max_open, sync);
    }
    fprintf(stderr, "sqlite_raw: serving %s/%s*.db with %ld processes on %s\n", dir, prefix, procs,
            argv[2]);
    int status, bad = 0;
    while (!serve_stop) {   /* a process that dies spoils the measurement: said, not replaced */
        pid_t pid = wait(&status);
        if (pid > 0 && !serve_stop) {
            fprintf(stderr, "sqlite_raw: serving process %d ended (status %d)\n", (int)pid, status);
            bad++;
        } else if (pid < 0 && errno != EINTR) {
            break;
        }
    }
    for (long p = 0; p < procs; p++)
        if (kids[p] > 0)
            kill(kids[p], SIGTERM);
    for (int t = 0; t < 50 && waitpid(-1, &status, WNOHANG) >= 0; t++) {   /* up to 1 s */
        while (waitpid(-1, &status, WNOHANG) > 0)
            ;
        struct timespec tick = {0, 20 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    for (long p = 0; p < procs; p++)
        if (kids[p] > 0)
            kill(kids[p], SIGKILL);
    while (wait(&status) > 0)
        ;
    return bad == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    int rc = 2;
    if (argc > 1 && strcmp(argv[1], "run") == 0)
        rc = run(argc, argv);
    else if (argc > 1 && strcmp(argv[1], "count") == 0)
        rc = count(argc, argv);
    else if (argc > 1 && strcmp(argv[1], "create") == 0)
        rc = create(argc, argv);
    else if (argc > 1 && strcmp(argv[1], "serve") == 0)
        rc = serve(argc, argv);
    if (rc == 2)
        fprintf(stderr, "usage: sqlite_raw run DIR PREFIX TENANTS PROCS SECONDS full|normal "
                        "MAX_OPEN SEED [COUNTS]\n       sqlite_raw count DIR PREFIX TENANTS [ROWS [WHERE]]\n"
                        "       sqlite_raw create DIR PREFIX TENANTS PROCS full|normal\n"
                        "       sqlite_raw serve SOCKET DIR PREFIX TENANTS PROCS full|normal "
                        "MAX_OPEN\n");
    return rc;
}
