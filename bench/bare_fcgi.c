/*
 * bare_fcgi.c — the baseline for `bench/run http`: the smallest prefork libfcgi responder a
 * C programmer would write by hand, answering what apps/hello answers ("hello from <host>");
 * with a connection string, the HTTP floor of `bench/run load`: the same responder answering
 * what bench/benchapp.c's GET / answers, from the tenant's PostgreSQL schema.
 *
 *   bare_fcgi SOCKET NPROC [CONNINFO]
 *                               SOCKET is a unix path or ":port" (FCGX_OpenSocket syntax)
 *
 * It is deliberately naive, because it stands for "libfcgi with no host around it": one
 * listen socket from FCGX_OpenSocket, NPROC forked children each looping on
 * FCGX_InitRequest / FCGX_Accept_r / FCGX_Finish_r, libfcgi's own defaults for everything
 * (its lingering close, its keep-conn handling that pins a child to an idle connection).
 * tenancyd is measured against this; do not make it smarter than what users write.
 *
 * The parent only supervises: it respawns a child that dies (and says so on stderr, since a
 * death during a measurement spoils it), and on SIGTERM/SIGINT/SIGQUIT stops the children
 * (SIGTERM, then SIGKILL after a second) and exits. Children die with the parent
 * (PR_SET_PDEATHSIG), so a killed benchmark leaves nothing behind.
 *
 * With CONNINFO each child opens one PostgreSQL connection and keeps it. A request's tenant
 * is the first label of its Host (`t5` of t5.localhost), its schema and role `t_` and that
 * label, as `tenancy tenant create` names them; per request the child sends what tenancyd
 * sends for one autocommit query (the path and the role by set_config, then the query, one
 * pipeline, one Sync) and answers {"tenant":"t5","data":"<marker row>"}. No registry, no
 * access log, no pool, no isolation beyond the role: what a hand-written app on libfcgi and
 * libpq costs, so that `load` can show how much of the gap to pgbench the HTTP path itself
 * takes on the same machine. A host whose role or schema does not exist gets 404; a broken
 * connection 503, and the child connects again for the next request.
 *
 * Not part of `make check`: bench/run compiles it with `cc ... -lfcgi -lpq`.
 */
#include <errno.h>
#include <fcgiapp.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 256

static volatile sig_atomic_t stop;
static const char *conninfo;   /* NULL: the hello responder */

static void on_stop(int signo)
{
    (void)signo;
    stop = 1;   /* the parent's loop does the work */
}

/* A connection with an empty search_path, or NULL (said on stderr). */
static PGconn *pg_connect(void)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, "SELECT pg_catalog.set_config('search_path', '', false)");
        bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        if (ok)
            return c;
    }
    fprintf(stderr, "bare_fcgi: cannot connect: %s", PQerrorMessage(c));
    PQfinish(c);
    return NULL;
}

/* The marker row of the tenant named by host's first label into out; the HTTP status. */
static int pg_marker(PGconn **pc, const char *host, char *slug, size_t slen, char *out,
                     size_t olen)
{
    size_t n = strcspn(host, ".:");
    if (n == 0 || n >= slen)
        return 404;
    for (size_t i = 0; i < n; i++)
        if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= '0' && host[i] <= '9') ||
              host[i] == '_' || host[i] == '-'))
            return 404;
    memcpy(slug, host, n);
    slug[n] = '\0';
    char name[72];
    snprintf(name, sizeof(name), "t_%s", slug);
    if (*pc == NULL && (*pc = pg_connect()) == NULL)
        return 503;
    PGconn *c = *pc;
    const char *params[2] = {name, name};
    int status = 200;
    out[0] = '\0';
    if (!PQenterPipelineMode(c) ||
        !PQsendQueryParams(c,
                           "SELECT pg_catalog.set_config('search_path', $1, true), "
                           "pg_catalog.set_config('role', $2, true)",
                           2, NULL, params, NULL, NULL, 0) ||
        !PQsendQueryParams(c, "SELECT tenant FROM marker WHERE id = 1", 0, NULL, NULL, NULL,
                           NULL, 0) ||
        !PQpipelineSync(c))
        status = 503;
    for (int q = 0; q < 2 && status != 503; q++) {   /* each query's result, then its NULL */
        PGresult *r = PQgetResult(c);
        if (r == NULL) {
            status = 503;
            break;
        }
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED)
            status = 404;   /* no such role or schema */
        else if (q == 1 && PQntuples(r) == 1)
            snprintf(out, olen, "%s", PQgetvalue(r, 0, 0));
        PQclear(r);
        while ((r = PQgetResult(c)) != NULL)
            PQclear(r);
    }
    PGresult *r = status == 503 ? NULL : PQgetResult(c);   /* the Sync */
    if (status != 503 && (r == NULL || PQresultStatus(r) != PGRES_PIPELINE_SYNC))
        status = 503;
    PQclear(r);
    if (status == 503 || !PQexitPipelineMode(c) || PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "bare_fcgi: connection lost: %s", PQerrorMessage(c));
        PQfinish(c);
        *pc = NULL;
        return 503;
    }
    return status;
}

static void child(int sock)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    /* Back to the defaults: libfcgi's FCGX_Init then installs its own SIGTERM handler. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    if (FCGX_Init() != 0) {
        fprintf(stderr, "bare_fcgi: FCGX_Init failed\n");
        _exit(1);
    }
    PGconn *pg = conninfo != NULL ? pg_connect() : NULL;
    FCGX_Request req;
    FCGX_InitRequest(&req, sock, 0);
    char body[512], slug[64], data[256];
    while (FCGX_Accept_r(&req) >= 0) {
        const char *host = FCGX_GetParam("HTTP_HOST", req.envp);
        int n;
        if (conninfo == NULL) {
            n = snprintf(body, sizeof(body),
                         "Content-Type: text/plain; charset=utf-8\r\n\r\nhello from %s\n",
                         host != NULL && host[0] != '\0' ? host : "nowhere");
        } else {
            int status = pg_marker(&pg, host != NULL ? host : "", slug, sizeof(slug), data,
                                   sizeof(data));
            if (status == 200)
                n = snprintf(body, sizeof(body),
                             "Content-Type: application/json\r\n\r\n"
                             "{\"tenant\":\"%s\",\"data\":\"%s\"}\n",
                             slug, data);
            else
                n = snprintf(body, sizeof(body), "Status: %d\r\nContent-Type: text/plain\r\n\r\n"
                             "%s\n", status, status == 404 ? "no such tenant" : "unavailable");
        }
        if (n < 0 || (size_t)n >= sizeof(body))
            n = (int)strlen(body);
        FCGX_PutStr(body, n, req.out);
        FCGX_Finish_r(&req);
    }
    PQfinish(pg);
    _exit(0);
}

static pid_t spawn(int sock)
{
    pid_t pid = fork();
    if (pid == 0)
        child(sock);
    if (pid < 0)
        perror("bare_fcgi: fork");
    return pid;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: bare_fcgi SOCKET NPROC [CONNINFO]\n");
        return 2;
    }
    int nproc = atoi(argv[2]);
    conninfo = argc == 4 ? argv[3] : NULL;
    if (nproc < 1 || nproc > MAX_PROCS) {
        fprintf(stderr, "bare_fcgi: NPROC must be 1..%d\n", MAX_PROCS);
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;   /* no SA_RESTART: waitpid returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);

    if (FCGX_Init() != 0) {
        fprintf(stderr, "bare_fcgi: FCGX_Init failed\n");
        return 1;
    }
    int sock = FCGX_OpenSocket(argv[1], 511);   /* exits from inside libfcgi on failure */
    if (sock < 0) {
        fprintf(stderr, "bare_fcgi: cannot listen on %s\n", argv[1]);
        return 1;
    }

    pid_t kids[MAX_PROCS];
    for (int i = 0; i < nproc; i++)
        kids[i] = spawn(sock);
    fprintf(stderr, "bare_fcgi: %d processes on %s\n", nproc, argv[1]);

    while (!stop) {
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < nproc; i++) {
            if (kids[i] != pid)
                continue;
            if (WIFSIGNALED(st))
                fprintf(stderr, "bare_fcgi: child %d died from signal %d; respawning\n",
                        (int)pid, WTERMSIG(st));
            else
                fprintf(stderr, "bare_fcgi: child %d exited with %d; respawning\n", (int)pid,
                        WEXITSTATUS(st));
            if (!stop)
                kids[i] = spawn(sock);
        }
    }

    for (int i = 0; i < nproc; i++)
        if (kids[i] > 0)
            kill(kids[i], SIGTERM);
    struct timespec tick = {0, 20 * 1000 * 1000};
    for (int t = 0; t < 50; t++) {   /* up to 1 s for a graceful exit */
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        int alive = 0;
        for (int i = 0; i < nproc; i++)
            if (kids[i] > 0 && kill(kids[i], 0) == 0)
                alive++;
        if (alive == 0)
            return 0;
        nanosleep(&tick, NULL);
    }
    for (int i = 0; i < nproc; i++)
        if (kids[i] > 0)
            kill(kids[i], SIGKILL);
    while (waitpid(-1, NULL, 0) > 0)
        ;
    return 0;
}
