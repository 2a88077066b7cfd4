/*
 * worker.c — the worker process (see worker.h): signals, set-up after the fork, the loop
 * over the connections it holds, and leaving.
 *
 * The files of a worker (worker_int.h): the connection table (conn.c), passing connections
 * to other workers and the thread that does it while a request runs (handoff.c), one
 * request (serve.c), the access-log line (reqlog.c), fcgi's own request handlers (route.c).
 * Which handler serves a request is the composition root's list (fcgi/handler.h), set up
 * here after the fork, before the app is loaded.
 *
 * Signals. SIGTERM/SIGQUIT/SIGINT are blocked except while waiting in epoll_pwait, so a
 * stop request is seen between requests and never interrupts one. SIGUSR2 is the
 * parent-death signal: the master is gone, so the worker stops too, and a request in
 * progress gets half a second more (on_master_gone). SIGALRM is request_timeout (on_alarm).
 *
 * Must not: touch the master's state, write to another worker's slot, or log without the
 * request context set.
 */
#include "core/first.h"
#include "fcgi/worker.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/sched.h"
#include "core/rc.h"
#include "fcgi/accesslog.h"
#include "fcgi/app.h"
#include "fcgi/guard.h"
#include "fcgi/handler.h"
#include "fcgi/signals.h"
#include "fcgi/worker_int.h"
#include "tenancy/chain.h"

#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- signal handlers (record only; SIGALRM is the one exception, see below) ------------ */

static volatile sig_atomic_t stop_requested;
/* What the SIGALRM handler needs, written before a request's bytes are read (serve.c). */
volatile sig_atomic_t alarm_fd = -1;
volatile sig_atomic_t alarm_may_answer;
volatile sig_atomic_t alarm_armed;
unsigned char alarm_reply[256];
volatile sig_atomic_t alarm_reply_len;
alog *volatile alarm_alog;   /* its gathered lines are written before the exit */

static void on_stop(int signo)
{
    (void)signo;
    stop_requested = 1;
}

/* request_timeout passed: the master, which watches every request's start time in the
 * scoreboard, sends SIGALRM (no timer per request: it would cost two system calls each).
 * The worker may be inside app code holding any lock, so the only safe ways out are
 * async-signal-safe ones: write the prepared 504 when nothing was sent yet, then _exit. A
 * stray alarm that arrives after the request ended (the master read the scoreboard just
 * before) is ignored. The master logs the request. */
static void on_alarm(int signo)
{
    (void)signo;
    if (!alarm_armed)
        return;
    if (alarm_may_answer && alarm_fd >= 0 && alarm_reply_len > 0)
        (void)!write(alarm_fd, alarm_reply, (size_t)alarm_reply_len);
    alog_flush(alarm_alog);   /* no line is being added: that happens after alarm_armed = 0 */
    _exit(WORKER_EXIT_TIMEOUT);
}

/* The master died (PR_SET_PDEATHSIG). Nobody is left to enforce request_timeout, and the
 * worker must not outlive its master by more than a moment: a stuck orphan would hold its
 * storage (a SQLite write lock, say) against the next master's workers. Between requests it
 * stops at once: the SIGTERM sent here stays pending until epoll_pwait unblocks it, so it
 * cannot be lost in the gap before the wait. In a request, the request gets
 * MASTER_GONE_GRACE_MS more, then SIGALRM takes the timeout path above (a 504 when nothing
 * was sent yet, then exit). serve_one (serve.c) arms the same timer when master_gone was set
 * just before its request armed the alarm. */
#define MASTER_GONE_GRACE_MS 500
volatile sig_atomic_t master_gone;

void arm_master_gone_timer(void)
{
    struct itimerval it;
    memset(&it, 0, sizeof(it));
    it.it_value.tv_sec = MASTER_GONE_GRACE_MS / 1000;
    it.it_value.tv_usec = (MASTER_GONE_GRACE_MS % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, NULL);   /* a system call: async-signal-safe in practice */
}

static void on_master_gone(int signo)
{
    (void)signo;
    int saved = errno;
    master_gone = 1;
    stop_requested = 1;
    kill(getpid(), SIGTERM);
    if (alarm_armed)
        arm_master_gone_timer();
    errno = saved;
}

static void install_handlers(worker *w)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;   /* a stray alarm must not fail a read inside libfcgi */
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_flags = 0;
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);   /* logs are reopened through the scoreboard */
    sa.sa_handler = on_master_gone;   /* the parent-death signal (worker_main) */
    sigaction(SIGUSR2, &sa, NULL);

    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGQUIT);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_SETMASK, &block, NULL);
    sigemptyset(&w->wait_mask);
}


int worker_drop_privileges(const tn_config *cfg)
{
    if (cfg->user == NULL || geteuid() != 0)
        return TN_OK;
    struct passwd *pw = getpwnam(cfg->user);
    if (pw == NULL) {
        log_error("user: no such user '%s'", cfg->user);
        return TN_ERR;
    }
    gid_t gid = pw->pw_gid;
    if (cfg->group != NULL) {
        struct group *gr = getgrnam(cfg->group);
        if (gr == NULL) {
            log_error("group: no such group '%s'", cfg->group);
            return TN_ERR;
        }
        gid = gr->gr_gid;
    }
    if (setgid(gid) < 0 || initgroups(pw->pw_name, gid) < 0 || setuid(pw->pw_uid) < 0) {
        log_error("cannot switch to user %s: %m", cfg->user);
        return TN_ERR;
    }
    prctl(PR_SET_DUMPABLE, 1);   /* keep core dumps possible after setuid */
    return TN_OK;
}

/* tenant.heavy_nice: a worker lowers its priority for a request of a tenant that wants more
 * than its share (serve.c), and must be able to raise it again afterwards, which an
 * unprivileged process may do only down to 20 - RLIMIT_NICE. So before it drops root (or
 * with CAP_SYS_RESOURCE) the worker raises that limit to what its own nice value needs;
 * then it tries the round trip once. Without the right (a host started as a user with the
 * default limit of 0 and no LimitNICE=) the setting stays off and says so. */
static void heavy_nice_allow(worker *w)
{
    w->nice_base = w->nice_heavy = getpriority(PRIO_PROCESS, 0);
    if (w->cfg->tenancy.heavy_nice <= 0)
        return;
    struct rlimit rl;
    rlim_t need = (rlim_t)(20 - w->nice_base);
    if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = need;
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
            rl.rlim_max = need;
        (void)setrlimit(RLIMIT_NICE, &rl);
    }
}

static void heavy_nice_check(worker *w)
{
    if (w->cfg->tenancy.heavy_nice <= 0 || w->nice_base >= 19)
        return;
    int heavy = w->nice_base + w->cfg->tenancy.heavy_nice;
    if (heavy > 19)
        heavy = 19;
    /* Lowering is always allowed, raising again is not: look before trying, or a worker
     * could be left at the lower priority for good. */
    struct rlimit rl;
    bool may = geteuid() == 0 || (getrlimit(RLIMIT_NICE, &rl) == 0 &&
                                  (rl.rlim_cur == RLIM_INFINITY ||
                                   rl.rlim_cur >= (rlim_t)(20 - w->nice_base)));
    if (may && setpriority(PRIO_PROCESS, 0, heavy) == 0) {
        if (setpriority(PRIO_PROCESS, 0, w->nice_base) == 0) {
            w->nice_heavy = heavy;
            return;
        }
        log_error("tenant.heavy_nice: cannot raise this worker's priority again: it stays "
                  "at nice %d", heavy);
        return;
    }
    if (w->args->index == 0)
        log_warn("tenant.heavy_nice: off, this worker may not raise its priority again after "
                 "lowering it; start tenancyd as root, or allow it (systemd: LimitNICE=%d)",
                 20 - w->nice_base);
}

static uint64_t jittered_limit(const tn_config *cfg)
{
    if (cfg->max_requests <= 0)
        return 0;
    uint64_t base = (uint64_t)cfg->max_requests;
    uint64_t spread = base * (uint64_t)cfg->max_requests_jitter / 100;
    if (spread == 0)
        return base;
    unsigned seed = (unsigned)getpid() ^ (unsigned)clock_mono_ns();
    uint64_t r = (uint64_t)rand_r(&seed) % (2 * spread + 1);
    return base - spread + r;
}

/* Turns in a row that may skip epoll_pwait (see worker_loop). */
#define FAST_ACCEPT_STREAK 16

/* The wait of the loop's epoll_pwait (ms; -1: none yet) shortened to `left` ms from now, 0
 * when that moment is past. A minute at most: the loop looks again then. */
static void wait_at_most(int *timeout, int64_t left)
{
    int t = left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
    if (*timeout < 0 || t < *timeout)
        *timeout = t;
}

static void worker_loop(worker *w)
{
    const tn_config *cfg = w->cfg;
    struct epoll_event evs[32];
    w->now_ns = clock_mono_ns();
    w->idle_since_ms = w->now_ns / 1000000;
    /* Under load, a worker that just served a connection it accepted usually finds the
     * next one already waiting: it tries accept() first and skips epoll_pwait, holding
     * nothing else meanwhile (no kept connection to watch). At most FAST_ACCEPT_STREAK
     * turns in a row, so that a stop signal (delivered only inside epoll_pwait) still gets
     * in under constant load. */
    int streak = 0;
    bool accepted = false;
    while (!stop_requested) {
        if (w->max_requests && w->served >= w->max_requests) {
            log_info("recycling after %llu requests (pm.max_requests)",
                     (unsigned long long)w->served);
            w->recycled = true;
            break;
        }
        reqlog_check_reopen(w);
        conn_set_intake(w);
        int64_t now = w->now_ns / 1000000;
        handoff_resume(w, now);
        if (accepted && w->nconns == 0 && streak < FAST_ACCEPT_STREAK) {
            streak++;
            /* Its shard first (only this worker's share takes those), then the main one. */
            accepted = (w->args->shard_fd >= 0 && conn_accept(w, w->args->shard_fd, now)) ||
                       conn_accept(w, w->args->lis->fd, now);
            if (accepted) {
                serve_conn(w, &w->conns[w->nconns - 1], now);
                w->idle_since_ms = w->now_ns / 1000000;
            }
            continue;
        }
        streak = 0;
        accepted = false;
        int timeout = -1;
        bool any_ready = false;
        for (int i = 0; i < w->nconns; i++) {
            any_ready = any_ready || w->conns[i].ready;
            wait_at_most(&timeout, w->conns[i].deadline_ms - now);
        }
        /* Kept connections do not keep an ondemand worker alive: idle is idle. */
        if (cfg->pm == PM_ONDEMAND)
            wait_at_most(&timeout, w->idle_since_ms + cfg->idle_timeout_ms - now);
        if (w->handoff_out)   /* to put the handoff socket back in time */
            wait_at_most(&timeout, w->balance_hold_ms - now);
        int64_t due = alog_due(w->alog);   /* gathered access-log lines: written in time */
        if (due >= 0)
            wait_at_most(&timeout, due - now);
        if (any_ready)
            timeout = 0;
        /* Idle is what the master reads before it has a busy worker pass its other
         * connections on (hand_off_held): a worker is idle only when it is about to
         * block. So one holding kept connections first looks without waiting, and under
         * load it finds the next request there and never shows idle between two requests.
         * One that holds none (connections not kept) skips that system call. */
        int n = w->nconns > 0 ? epoll_pwait(w->ep, evs, (int)TN_ARRAY_LEN(evs), 0, &w->wait_mask)
                              : 0;
        if (n == 0 && timeout != 0) {
            handoff_publish_held(w);   /* what a busy worker compares with (handoff_balance) */
            sb_set_state(w->sb, w->slot, w->nconns ? SB_KEEPALIVE : SB_IDLE);
            n = epoll_pwait(w->ep, evs, (int)TN_ARRAY_LEN(evs), timeout, &w->wait_mask);
            w->now_ns = clock_mono_ns();
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_error("epoll_pwait: %m");
            break;
        }
        now = w->now_ns / 1000000;
        if (due >= 0 && now >= due)
            alog_flush(w->alog);
        bool listen_ready = false, handoff_ready = false, shard_ready = false, wake_ready = false,
             inbox_ready = false;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == LISTEN_TAG) {
                listen_ready = true;
                continue;
            }
            if (evs[i].data.u64 == SHARD_TAG) {
                shard_ready = true;
                continue;
            }
            if (evs[i].data.u64 == HANDOFF_TAG) {
                handoff_ready = true;
                continue;
            }
            if (evs[i].data.u64 == WAKE_TAG) {
                wake_ready = true;
                continue;
            }
            if (evs[i].data.u64 == INBOX_TAG) {
                inbox_ready = true;
                continue;
            }
            struct conn *c = conn_find(w, (int)evs[i].data.u64);
            if (c == NULL)
                continue;
            if (c->wait_tenant != 0) {
                /* Its request waits unread: more bytes (an abort) change nothing, but the
                 * web server closing it means nobody wants the answer any more. */
                if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    conn_close(w, c);
                continue;
            }
            mark_ready(w, c);
        }
        if (wake_ready)
            conn_wait_wake(w);
        /* Deadlines: silent, idle and incomplete connections go. An idle kept one is
         * looked at first (its readiness may be in the next batch of events): a request
         * that arrived at the last moment is served, not lost. */
        for (int i = w->nconns - 1; i >= 0; i--) {
            struct conn *c = &w->conns[i];
            if (c->deadline_ms > now || c->ready)
                continue;
            if (c->wait_tenant != 0) {
                mark_ready(w, c);   /* its tenant.queue_wait is over: served, or a 503 */
            } else if (c->req_start_ms) {
                log_info("closed a FastCGI connection whose request header did not arrive "
                         "within request_timeout");
                conn_close(w, c);
            } else if (conn_has_input(c->fd)) {
                mark_ready(w, c);
            } else if (c->kept) {
                conn_drop(w, c);
            } else {
                conn_close(w, c);
            }
        }
        if (cfg->pm == PM_ONDEMAND && n == 0 && now - w->idle_since_ms >= cfg->idle_timeout_ms) {
            log_debug("idle for pm.idle_timeout: exiting");
            break;
        }
        if (handoff_ready)
            handoff_take(w, now);
        if (inbox_ready)
            affinity_take(w, now);
        if (shard_ready && w->nconns < w->max_conns)
            accepted = conn_accept(w, w->args->shard_fd, now);
        /* Serve one ready connection per turn, first come first served, so that the listen
         * socket and the deadlines are looked at between requests. */
        struct conn *pick = conn_oldest_ready(w);
        /* A worker already behind (a request waits on a connection it holds) leaves a new
         * connection to an idle worker, which the same event woke (EPOLLEXCLUSIVE wakes a
         * worker blocked in epoll): new connections go where there is time for them, and
         * the web server's kept connections spread over the workers instead of piling up
         * behind one. The socket stays readable, so if nobody takes it this one does as
         * soon as it has caught up. */
        bool took = listen_ready && w->nconns < w->max_conns &&
                    !(pick != NULL &&
                      __atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED) > 0) &&
                    conn_accept(w, w->args->lis->fd, now);
        accepted = took || accepted;
        if (pick == NULL && took)   /* the one just accepted (it is the last to come) */
            pick = conn_oldest_ready(w);
        if (pick == NULL)
            continue;
        if (handoff_balance(w))   /* behind while another idles with fewer: even out */
            pick = conn_oldest_ready(w);
        serve_conn(w, pick, now);
        w->idle_since_ms = w->now_ns / 1000000;
    }
}

/* Load and initialise the apps of the generation: the root app (if any), then each mount's,
 * in the order of cfg->mounts; a module already loaded for an earlier entry is shared (see
 * worker_app). Each init may add chain stages, which are that app's. A module that does not
 * load, or whose init fails, ends the worker with WORKER_EXIT_INIT, as the one app did. */
static void load_apps(worker *w)
{
    const tn_config *c = w->cfg;
    char err[512];
    for (int i = 0; i < 1 + c->mounts.n; i++) {
        worker_app *wa = &w->apps[i];
        wa->path = i == 0 ? c->app : c->mounts.m[i - 1].app;
        wa->label = i == 0 ? "app" : c->mounts.m[i - 1].name;
        if (wa->path == NULL)
            continue;   /* no app at the root: the mounts only */
        if (app_load(wa->path, &wa->mod, err, sizeof(err)) != TN_OK) {
            if (i == 0)
                log_error("%s", err);
            else
                log_error("mount.%s: %s", wa->label, err);
            _exit(WORKER_EXIT_INIT);
        }
        const tn_app *app = wa->mod.app;
        wa->capp.handle = app->handle;
        wa->serve = &wa->capp;
        wa->owner = true;
        for (int j = 0; j < i; j++)
            if (w->apps[j].mod.app == app) {
                wa->serve = w->apps[j].serve;
                wa->owner = false;
                break;
            }
        status_app *sa = &w->status_apps[w->nstatus_apps++];
        *sa = (status_app){.name = app->name, .version = app->version,
                           .mount = i == 0 ? "" : c->mounts.m[i - 1].prefix, .path = wa->path};
        if (!wa->owner || app->init == NULL)
            continue;
        tn_app_env aenv = {c->path, wa->path, w->args->index, w->args->generation};
        chain_stages_open(&wa->capp);
        int rc = app->init(&aenv);
        chain_stages_close(&wa->capp);
        if (rc != TN_OK) {
            if (i == 0)
                log_error("app %s: init failed: %s", app->name ? app->name : wa->path,
                          tn_rc_str(rc));
            else
                log_error("app %s (mount.%s): init failed: %s",
                          app->name ? app->name : wa->path, wa->label, tn_rc_str(rc));
            _exit(WORKER_EXIT_INIT);
        }
    }
}

void worker_main(const worker_args *a)
{
    /* Static: large buffers off the stack, and one per process anyway. Not cleared: it is
     * zero (BSS, never touched by the master this process was forked from), and clearing
     * it would fault in every page of its connection table before the worker is ready. */
    static worker w;
    w.args = a;
    w.cfg = a->cfg;
    w.sb = a->sb;
    w.slot = sb_slot_at(a->sb, a->slot);
    w.ep = -1;

    signals_reset_child();
    for (int i = 0; i < a->nclose; i++)
        if (a->close_fds[i] >= 0)
            close(a->close_fds[i]);
    /* Die with the master (on_master_gone): at once between requests, within
     * MASTER_GONE_GRACE_MS in one. The handler is installed before the death signal is
     * asked for, and the parent checked after, so no death goes unseen. */
    log_set_pid();
    install_handlers(&w);
    prctl(PR_SET_PDEATHSIG, SIGUSR2);
    if (getppid() != a->master_pid)
        _exit(WORKER_EXIT_OK);
    w.slot->pid = (int32_t)getpid();

    heavy_nice_allow(&w);
    if (worker_drop_privileges(w.cfg) != TN_OK)
        _exit(WORKER_EXIT_SETUP);
    heavy_nice_check(&w);
    /* pm.slice (core/sched.h): requests of microseconds on cores shared with the web server
     * wait less for this worker when it asks for a short slice. The master said once whether
     * the kernel takes it. */
    if (w.cfg->slice_us > 0)
        (void)sched_slice_set(w.cfg->slice_us, NULL, 0);

    /* libfcgi reads these at FCGX_Init; ours close connections themselves, but a stream
     * error still goes through libfcgi's close, which must not linger for 2 s. */
    char ms[32];
    snprintf(ms, sizeof(ms), "%lld", (long long)w.cfg->linger_timeout_ms);
    setenv("LIBFCGI_OS_CLOSE_POLL_TIMEOUT", ms, 1);
    setenv("LIBFCGI_IS_AF_UNIX_KEEPER_POLL_TIMEOUT", ms, 1);
    if (FCGX_Init() != 0) {
        log_error("FCGX_Init failed");
        _exit(WORKER_EXIT_SETUP);
    }
    FCGX_InitRequest(&w.fx, -1, 0);
    w.fx.listen_sock = -1;   /* libfcgi must never accept: the worker does */
    if (!guard_active() && a->index == 0)
        log_warn("libfcgi's reads do not go through the read guard (OS_Read not exported): "
                 "a management record late in a request's stream reaches libfcgi's parser");

    /* Descriptors for the connection table and the chain's storage pool, which both size
     * themselves from RLIMIT_NOFILE: raised before either is made. */
    long fd_want = MAX_CONNS + CONN_FD_RESERVE + chain_fds_wanted(&w.cfg->tenancy) +
                   a->ninbox;   /* tenant.affinity: every number's inbox, to send to */
    long fd_got = fd_limit_raise(fd_want);
    if (fd_got < fd_want && a->index == 0)
        log_warn("RLIMIT_NOFILE allows %ld descriptors, %ld wanted (%d connections and 3 per "
                 "SQLite file of storage.sqlite_max_open = %d): a worker keeps fewer files "
                 "open; raise the hard limit (LimitNOFILE= under systemd)",
                 fd_got, fd_want, MAX_CONNS, w.cfg->tenancy.sqlite_max_open);

    /* The request handlers, in the order the composition root added them (fcgi/handler.h);
     * before the app, whose init may add chain stages. */
    tn_handler_env henv;
    route_host_env(&w, &henv);
    const char *failed = NULL;
    int hrc = handlers_init(w.cfg, &henv, &failed);
    if (hrc != TN_OK) {
        log_error("cannot set up the %s: %s", failed, tn_rc_str(hrc));
        _exit(WORKER_EXIT_SETUP);
    }
    load_apps(&w);
    w.req_arena = arena_create(16384);
    w.ep = epoll_create1(EPOLL_CLOEXEC);
    if (w.req_arena == NULL || w.ep < 0) {
        log_error("worker setup failed: %m");
        _exit(WORKER_EXIT_SETUP);
    }
    /* Several workers wake for one connection and only one gets it: the others must find
     * accept() empty, not block in it while holding requests on their kept connections. */
    int fl = fcntl(a->lis->fd, F_GETFL);
    if (fl < 0 || fcntl(a->lis->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        log_error("cannot make the listen socket non-blocking: %m");
        _exit(WORKER_EXIT_SETUP);
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = LISTEN_TAG};
    if (epoll_ctl(w.ep, EPOLL_CTL_ADD, a->lis->fd, &ev) < 0) {
        log_error("epoll_ctl on the listen socket: %m");
        _exit(WORKER_EXIT_SETUP);
    }
    if (a->shard_fd >= 0) {
        /* Its shard: the same non-blocking accept (a reload's new generation shares it). */
        fl = fcntl(a->shard_fd, F_GETFL);
        ev.data.u64 = SHARD_TAG;
        if (fl < 0 || fcntl(a->shard_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            epoll_ctl(w.ep, EPOLL_CTL_ADD, a->shard_fd, &ev) < 0) {
            log_error("cannot watch shard socket %d: %m", a->shard);
            _exit(WORKER_EXIT_SETUP);
        }
    }
    ev.data.u64 = HANDOFF_TAG;
    if (a->handoff[1] >= 0 && epoll_ctl(w.ep, EPOLL_CTL_ADD, a->handoff[1], &ev) < 0) {
        log_error("epoll_ctl on the handoff socket: %m");
        _exit(WORKER_EXIT_SETUP);
    }
    affinity_setup(&w);
    w.max_conns = conn_table_size();
    w.peek_size = (size_t)w.cfg->max_params + PEEK_SLACK;
    w.peek = malloc(w.peek_size);
    if (w.peek == NULL) {
        log_error("cannot allocate the %zu-byte peek buffer (max_params)", w.peek_size);
        _exit(WORKER_EXIT_SETUP);
    }
    w.max_requests = jittered_limit(w.cfg);
    w.log_gen = __atomic_load_n(&w.sb->pool.log_generation, __ATOMIC_RELAXED);
    reqlog_open(&w);

    pthread_mutex_init(&w.conns_mu, NULL);
    pthread_mutex_lock(&w.conns_mu);   /* held by this thread except while serving */
    handoff_start_thread(&w);
    /* Idle before the master hears of it: a worker it still sees starting when it wakes
     * delays "ready" by a whole tick (50 ms). */
    sb_set_state(w.sb, w.slot, SB_IDLE);
    __atomic_store_n(&w.slot->ready, 1, __ATOMIC_RELEASE);
    if (a->wake_fd >= 0) {
        (void)!write(a->wake_fd, "r", 1);   /* the master need not wait for its next tick */
        close(a->wake_fd);
    }
    worker_loop(&w);

    /* Leaving: a request the web server already wrote on a connection is served first;
     * the others are passed on whenever a process will take them (handoff_will_be_taken:
     * a running worker, a recycled one's replacement, an ondemand master): kept ones, and
     * fresh ones that have not spoken yet (under load the web server may be descheduled
     * between its connect and its write for longer than the wait below, and closing one
     * under it fails the request it is about to write). The rest is closed. */
    w.leaving = true;
    /* What was sent to this worker's inbox is its to serve or pass on, as the rest. (One
     * sent after this, before the scoreboard shows it leaving, waits for the worker that
     * takes its number, or the master's sweep.) */
    affinity_take(&w, clock_mono_ms());
    while (w.nconns > 0) {
        struct conn *c = &w.conns[w.nconns - 1];
        int fd = c->fd;
        /* A request waiting for its tenant's worker goes on waiting in another worker. */
        if (c->wait_tenant != 0 && handoff_will_be_taken(&w, c) && conn_hand_off(&w, c, false))
            continue;
        if (!c->kept && c->req_start_ms == 0) {
            /* Accepted but silent so far: the web server writes right after connecting. */
            struct pollfd p = {.fd = fd, .events = POLLIN};
            (void)!poll(&p, 1, 200);
        }
        if (conn_has_input(fd)) {
            w.now_ns = clock_mono_ns();
            serve_conn(&w, c, w.now_ns / 1000000);
            if ((c = conn_find(&w, fd)) == NULL)
                continue;
        }
        sb_set_state(w.sb, w.slot, SB_EXITING);   /* not counted among the others below */
        if (handoff_will_be_taken(&w, c) && conn_hand_off(&w, c, false))
            continue;
        conn_drop(&w, c);
    }
    sb_set_state(w.sb, w.slot, SB_EXITING);
    for (int i = 0; i < 1 + TN_MAX_MOUNTS; i++)
        if (w.apps[i].owner && w.apps[i].mod.app->fini != NULL)
            w.apps[i].mod.app->fini();
    /* No handlers_fini: the worker leaves with _exit and the kernel closes what the
     * handlers hold. Closing storage here (a SQLite close checkpoints its WAL) would only
     * delay the exit, and the master starts the replacement after it. */
    alarm_alog = NULL;
    alog_close(w.alog);
    _exit(WORKER_EXIT_OK);
}
