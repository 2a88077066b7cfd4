/*
 * ops_runner.c — the parallel runner of the tenant operations: N forked workers, each doing
 * one task at a time, handed out by the parent, with progress ticks for the caller (the
 * command draws its bar from them, the panel writes its progress file). ops_migrate
 * (ops_migrate.c) and `tenancy tenant create --from-file` (cli/tenant.c) run on it; what a
 * task is belongs to them (ops_runner_ops in ops_runner.h).
 *
 * Shape: the parent forks the workers, gives each a task pipe (a task is its index, 4
 * bytes) and shares one result pipe among them. A worker sets up what it keeps for all its
 * tasks (its own registry and storage connections: a libpq socket or a SQLite handle must
 * never be shared across fork), then reads an index, does the task and writes one
 * fixed-size result (at most PIPE_BUF bytes, so results of several workers never
 * interleave). The parent hands out the next task as a result comes back, so a slow task
 * never holds up the others, and one place decides whether to go on (a canary, stop on
 * error, a signal).
 *
 * Signals: the first SIGINT/SIGTERM stops handing out tasks; workers finish (or, if their
 * ops catch SIGTERM, undo) the task in hand. A second one sends ops->hard_signal to the
 * workers. Workers ignore SIGINT (the terminal sends it to the whole group: the parent
 * decides), and die with the parent (PR_SET_PDEATHSIG, SIGTERM). Signals are blocked
 * across fork, so a child never runs the parent's handler.
 *
 * Must not: touch storage or the registry in the runner's parent (the caller's take() may,
 * on a connection it opened after the fork), or print anything.
 */
#include "core/first.h"
#include "tenancy/ops_runner.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/db.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the wire ------------------------------------------------------------------------------ */

static int write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 1: read all; 0: EOF before anything; -1: error or EOF in the middle. */
static int read_all(int fd, void *p, size_t n)
{
    char *d = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, d + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return got == 0 ? 0 : -1;
        got += (size_t)r;
    }
    return 1;
}

/* A result, aligned for any struct the ops put in it. */
typedef union wire {
    int32_t idx;
    long double align;
    char bytes[OPS_RESULT_MAX];
} wire;

/* ---- a worker ---------------------------------------------------------------------------------- */

static TN_NORETURN void worker_main(const ops_runner *j, int task_fd, int result_fd)
{
    const ops_runner_ops *ops = j->ops;
    if (ops->worker_begin != NULL)
        ops->worker_begin(j->ctx);
    static wire w;
    for (;;) {
        int32_t idx;
        if (read_all(task_fd, &idx, sizeof(idx)) != 1 || idx < 0 || idx >= j->ntasks)
            break;
        memset(&w, 0, ops->result_size);
        w.idx = idx;
        bool more = ops->work(j->ctx, idx, &w);
        if (write_all(result_fd, &w, ops->result_size) < 0 || !more)
            break;
    }
    if (ops->worker_end != NULL)
        ops->worker_end(j->ctx);
    _exit(0);
}

/* ---- the parent -------------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_signals;
static void on_stop(int sig)
{
    (void)sig;
    stop_signals++;
}

/* A progress event: a tick (idx < 0) or the outcome of task idx. */
static void tell(const ops_runner *j, int idx, bool final)
{
    if (j->progress == NULL)
        return;
    ops_progress p = {.done = j->done, .total = j->ntasks, .failed = j->failed,
                      .elapsed_ms = clock_mono_ms() - j->t0, .final = final};
    if (idx >= 0 && j->ops->outcome != NULL)
        j->ops->outcome(j->ctx, idx, &p);
    j->progress(j->progress_ctx, &p);
}

static bool hand_out(ops_runner *j, int w)
{
    if (j->stopped != NULL || j->next >= j->limit || !j->alive[w])
        return false;
    int32_t idx = j->next;
    if (write_all(j->task_fd[w], &idx, sizeof(idx)) < 0) {
        j->alive[w] = false;
        return false;
    }
    j->busy[w] = idx;
    j->next++;
    return true;
}

static void take(ops_runner *j, const wire *res)
{
    if (res->idx < 0 || res->idx >= j->ntasks)
        return;
    j->done++;
    if (j->ops->take(j->ctx, res))
        j->failed++;
    for (int w = 0; w < j->nworkers; w++)
        if (j->busy[w] == res->idx)
            j->busy[w] = -1;
    tell(j, res->idx, false);
}

/* A worker that exited: what it had in hand is lost. */
static void reap(ops_runner *j)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (int w = 0; w < j->nworkers; w++) {
            if (j->pid[w] != pid)
                continue;
            j->alive[w] = false;
            j->pid[w] = 0;
            if (j->busy[w] >= 0) {
                char why[96];
                if (WIFSIGNALED(st))
                    tn_errf(why, sizeof(why), TN_ERR, "its worker was killed by signal %d",
                            WTERMSIG(st));
                else
                    tn_errf(why, sizeof(why), TN_ERR, "its worker exited (status %d)",
                            WEXITSTATUS(st));
                j->ops->lost(j->ctx, j->busy[w], why);
                j->done++;
                j->failed++;
                tell(j, j->busy[w], false);
                j->busy[w] = -1;
            }
        }
    }
}

static int busy_workers(const ops_runner *j)
{
    int n = 0;
    for (int w = 0; w < j->nworkers; w++)
        n += j->alive[w] && j->busy[w] >= 0;
    return n;
}

static int alive_workers(const ops_runner *j)
{
    int n = 0;
    for (int w = 0; w < j->nworkers; w++)
        n += j->alive[w];
    return n;
}

static void hand_out_all(ops_runner *j)
{
    for (int w = 0; w < j->nworkers; w++)
        if (j->busy[w] < 0)
            hand_out(j, w);
}

void ops_runner_run(ops_runner *j, int limit, bool stop_on_error)
{
    j->limit = limit < j->ntasks ? limit : j->ntasks;
    hand_out_all(j);
    while (busy_workers(j) > 0 ||
           (j->stopped == NULL && j->next < j->limit && alive_workers(j) > 0)) {
        if (stop_signals == 1 && j->stopped == NULL)
            j->stopped = "interrupted";
        if (stop_signals >= 2) {   /* the second signal: no waiting */
            for (int w = 0; w < j->nworkers; w++)
                if (j->alive[w] && j->pid[w] > 0)
                    kill(j->pid[w], j->ops->hard_signal);
        }
        struct pollfd pfd = {.fd = j->result_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, 100);
        if (pr > 0 && (pfd.revents & (POLLIN | POLLHUP))) {
            static wire res;
            int got = read_all(j->result_fd, &res, j->ops->result_size);
            if (got == 1) {
                take(j, &res);
                if (stop_on_error && j->failed > 0 && j->stopped == NULL)
                    j->stopped = "stop on error";
            } else if (got == 0) {
                reap(j);
                if (alive_workers(j) == 0)
                    break;
            }
        }
        reap(j);
        hand_out_all(j);
        if (j->ops->idle != NULL)
            j->failed += j->ops->idle(j->ctx);
        tell(j, -1, false);
    }
}

int ops_runner_start(ops_runner *j, const ops_runner_ops *ops, void *ctx, int ntasks,
                     int nworkers, ops_progress_fn progress, void *progress_ctx, char *err,
                     size_t errlen)
{
    memset(j, 0, sizeof(*j));
    j->ops = ops;
    j->ctx = ctx;
    j->ntasks = ntasks;
    j->nworkers = nworkers < ntasks ? nworkers : (ntasks > 0 ? ntasks : 1);
    if (j->nworkers > OPS_JOBS_MAX)
        j->nworkers = OPS_JOBS_MAX;
    j->result_fd = -1;
    for (int w = 0; w < OPS_JOBS_MAX; w++) {
        j->task_fd[w] = -1;
        j->busy[w] = -1;
    }
    j->progress = progress;
    j->progress_ctx = progress_ctx;
    j->t0 = clock_mono_ms();

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    stop_signals = 0;
    sigaction(SIGINT, &sa, &j->old_int);
    sigaction(SIGTERM, &sa, &j->old_term);
    signal(SIGPIPE, SIG_IGN);   /* a worker that died: its task pipe's write fails instead */
    j->started = true;
    if (ntasks == 0)
        return TN_OK;

    if (ops->result_size < sizeof(int32_t) || ops->result_size > sizeof(wire)) {
        return tn_errf(err, errlen, TN_INVALID, "a task's result does not fit the pipe");
    }
    int res[2];
    if (pipe2(res, O_CLOEXEC) < 0)
        return tn_errf(err, errlen, TN_IO, "pipe: %s", strerror(errno));
    j->result_fd = res[0];
    fflush(NULL);
    /* Signals blocked across fork: a child must not run the parent's handler before it has
     * set its own dispositions. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t parent = getpid();
    int rc = TN_OK;
    for (int w = 0; w < j->nworkers; w++) {
        int task[2];
        if (pipe2(task, O_CLOEXEC) < 0) {
            rc = tn_errf(err, errlen, TN_IO, "pipe: %s", strerror(errno));
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(task[0]);
            close(task[1]);
            rc = tn_errf(err, errlen, TN_IO, "fork: %s", strerror(errno));
            break;
        }
        if (pid == 0) {
            signal(SIGINT, SIG_IGN);     /* the parent decides when to stop */
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            signal(SIGPIPE, SIG_DFL);
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            sigprocmask(SIG_SETMASK, &old, NULL);
            if (getppid() != parent)     /* the parent died before prctl */
                _exit(1);
            for (int k = 0; k < w; k++)  /* other workers' pipes */
                close(j->task_fd[k]);
            close(task[1]);
            close(res[0]);
            worker_main(j, task[0], res[1]);
        }
        close(task[0]);
        j->pid[w] = pid;
        j->task_fd[w] = task[1];
        j->busy[w] = -1;
        j->alive[w] = true;
    }
    close(res[1]);   /* EOF once every worker is gone */
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void ops_runner_finish(ops_runner *j)
{
    for (int w = 0; w < j->nworkers; w++)
        if (j->task_fd[w] >= 0) {
            close(j->task_fd[w]);   /* EOF: the worker exits after its task */
            j->task_fd[w] = -1;
        }
    for (int w = 0; w < j->nworkers; w++)
        if (j->pid[w] > 0) {
            int st;
            while (waitpid(j->pid[w], &st, 0) < 0 && errno == EINTR)
                if (stop_signals >= 2)
                    kill(j->pid[w], j->ops->hard_signal);
            j->pid[w] = 0;
        }
    if (j->result_fd >= 0)
        close(j->result_fd);
    j->result_fd = -1;
    tell(j, -1, true);
    if (j->started) {
        sigaction(SIGINT, &j->old_int, NULL);
        sigaction(SIGTERM, &j->old_term, NULL);
        j->started = false;
    }
}

/* ---- what a parallel run needs around the runner ------------------------------------------- */

void ops_flush_now(registry *r)
{
    char ignored[256];   /* a failure here: the parent's ops_flush_all says it */
    if (r != NULL)
        (void)registry_flush(r, ignored, sizeof(ignored));
}

void ops_flush_due(registry *r, int64_t *flushed_ms)
{
    int64_t now = clock_mono_ms();
    if (now - *flushed_ms < OPS_FLUSH_MS)
        return;
    ops_flush_now(r);
    *flushed_ms = now;
}

int ops_flush_all(ops_env *e, char *err, size_t errlen)
{
    int rc = TN_OK;
    if (e->reg == NULL)
        rc = registry_open(e->tc->registry_uri, e->tc->gen_path, &e->reg, err, errlen);
    return rc == TN_OK ? registry_flush(e->reg, err, errlen) : rc;
}

void ops_preload_drivers(const tenancy_config *tc)
{
    char err[256];
    (void)db_preload(tc->registry_uri, err, sizeof(err));
    for (int i = 0; i < tc->nplacements; i++)
        if (tc->placements[i].server != NULL)
            (void)db_preload(tc->placements[i].server, err, sizeof(err));
}
