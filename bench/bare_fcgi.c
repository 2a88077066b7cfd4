/*
 * bare_fcgi.c — the baseline for `bench/run http`: the smallest prefork libfcgi responder a
 * C programmer would write by hand, answering what apps/hello answers ("hello from <host>").
 *
 *   bare_fcgi SOCKET NPROC      SOCKET is a unix path or ":port" (FCGX_OpenSocket syntax)
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
 * Not part of `make check`: bench/run compiles it with `cc ... -lfcgi`.
 */
#include <errno.h>
#include <fcgiapp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 256

static volatile sig_atomic_t stop;

static void on_stop(int signo)
{
    (void)signo;
    stop = 1;   /* the parent's loop does the work */
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
    FCGX_Request req;
    FCGX_InitRequest(&req, sock, 0);
    char body[512];
    while (FCGX_Accept_r(&req) >= 0) {
        const char *host = FCGX_GetParam("HTTP_HOST", req.envp);
        int n = snprintf(body, sizeof(body),
                         "Content-Type: text/plain; charset=utf-8\r\n\r\nhello from %s\n",
                         host != NULL && host[0] != '\0' ? host : "nowhere");
        if (n < 0 || (size_t)n >= sizeof(body))
            n = (int)strlen(body);
        FCGX_PutStr(body, n, req.out);
        FCGX_Finish_r(&req);
    }
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
    if (argc != 3) {
        fprintf(stderr, "usage: bare_fcgi SOCKET NPROC\n");
        return 2;
    }
    int nproc = atoi(argv[2]);
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
