/*
 * worker.c — the worker process (see worker.h).
 *
 * Connection handling. The worker keeps a small table of connections it holds but is not
 * serving: fresh ones that have not sent a byte yet and FastCGI connections the web server
 * asked to keep (FCGI_KEEP_CONN). All sit in one epoll set with the listen socket; when one
 * becomes readable the worker serves exactly one request from it and goes back to epoll.
 * Deadlines close silent connections, and kept ones idle past keepalive_timeout.
 *
 * A kept connection is never closed under the web server. FastCGI has no way to say "do not
 * send on this connection any more", so closing one the web server holds in its cache races
 * with a request it may be writing right now: the request is lost (nginx retries a GET on
 * another connection, never a POST: the client gets 502). So the worker closes a kept
 * connection only when the web server closed it first, or after keepalive_timeout, which the
 * documentation asks to set above the web server's own idle timeout. To free itself — when
 * a request has run for keepalive_handoff_after while other workers are idle, or when it
 * leaves (recycle, scale-down, reload) — it passes the connections it is not serving to the
 * other workers over a datagram socket they all share (SCM_RIGHTS): the connection stays open
 * throughout, and a request written meanwhile waits in its socket buffer for the worker that
 * takes it. When its table is full the worker stops accepting (and taking passed
 * connections) until one closes.
 *
 * The handoff thread. While a request runs, the main thread is in app code and cannot look
 * at its other connections, so passing them is the job of a second thread that sleeps on a
 * futex word in the worker's scoreboard slot (handoff_seq). The master, which already
 * watches every request's start, wakes it when the request has run keepalive_handoff_after
 * and another worker is idle. The connection table is guarded by conns_mu, which the main
 * thread holds at all times except while it serves a request (serve_one touches no other
 * connection), so the thread acts only then, and only for the request it was woken for. A
 * fast request pays two uncontended mutex operations and one store; passing at the start
 * of every request instead cost CPU on every request under load, moving connections back
 * and forth between workers that were idle for microseconds.
 *
 * One request. First a peek at the stream (proto.c) answers GET_VALUES, refuses unknown
 * roles and impossible parameter lengths; then libfcgi reads the params from the
 * connection we hand it (FCGX_Accept_r with our fd already set and no listen socket, so it
 * can never block in accept); then the request runs; then the response is flushed and the
 * connection kept or closed by us, never by libfcgi's 2-second lingering close.
 *
 * Timeouts. Reads have deadlines (SO_RCVTIMEO, set once per connection before the first
 * request whose bytes are not all there yet, and deadlines on connections waiting for the
 * rest of a request header) and cost only the connection. The whole request is bounded by
 * request_timeout from the master, which watches each worker's request start in the
 * scoreboard and sends SIGALRM: the handler answers 504 when the app wrote nothing yet and
 * exits with WORKER_EXIT_TIMEOUT; the master logs the request and kills a worker that
 * overstays. No timer system call is made per request.
 *
 * Signals. SIGTERM/SIGQUIT/SIGINT are blocked except while waiting in epoll_pwait, so a
 * stop request is seen between requests and never interrupts one. SIGUSR2 is the
 * parent-death signal: the master is gone, so the worker stops too, and a request in
 * progress gets half a second more (on_master_gone).
 *
 * Must not: touch the master's state, write to another worker's slot, or log without the
 * request context set.
 */
#include "core/first.h"
#include "fcgi/worker.h"
#include "admin/admin.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/kv.h"
#include "core/log.h"
#include "core/rc.h"
#include "fcgi/accesslog.h"
#include "fcgi/app.h"
#include "fcgi/guard.h"
#include "fcgi/proto.h"
#include "fcgi/signals.h"
#include "fcgi/status.h"
#include "tenancy/chain.h"
#include "tenancy/request.h"
#include "tenancy/tenant.h"

#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_CONNS 1024      /* connections one worker holds at most (fewer if RLIMIT_NOFILE) */
#define PEEK_SLACK 16384   /* record headers and padding around max_params */
#define LISTEN_TAG UINT64_MAX
#define HANDOFF_TAG (UINT64_MAX - 1)
#define SHARD_TAG (UINT64_MAX - 2)

struct conn {
    int fd;
    bool kept;            /* served a request before (FCGI_KEEP_CONN) */
    bool ready;           /* epoll said readable (edge-triggered) and we have not looked */
    bool registered;      /* in the epoll set (added only when it has to wait) */
    bool serving;         /* a request of it is being served: not to be released */
    bool rcvtimeo;        /* SO_RCVTIMEO set (see arm_read_timeout) */
    int64_t deadline_ms;  /* close when idle (or incomplete) past this */
    int64_t req_start_ms; /* first byte of a request not yet complete (0: none) */
    uint64_t ready_seq;   /* when it became ready, in the order epoll reported it */
};

typedef struct worker {
    const worker_args *args;
    const tn_config *cfg;
    scoreboard *sb;
    sb_slot *slot;
    tn_app_module mod;
    int ep;
    pthread_mutex_t conns_mu;   /* the table: held by the main thread except in serve_one */
    struct conn conns[MAX_CONNS];
    int nconns;
    int max_conns;
    bool intake_paused;    /* table full: listen and handoff sockets out of the epoll set */
    FCGX_Request fx;
    arena *req_arena;
    buf headers, out, line;
    unsigned char *peek;   /* max_params + PEEK_SLACK: room for every checked param */
    size_t peek_size;
    uint64_t served;
    uint64_t max_requests;
    uint64_t req_counter;
    uint64_t ready_seq;    /* the last conn.ready_seq given */
    alog *alog;            /* the access log (NULL: off) */
    uint32_t log_gen;
    int64_t idle_since_ms;
    int64_t now_ns;        /* the clock as of the last read: after a wait, after a request */
    sigset_t wait_mask;    /* the mask while in epoll_pwait: stop signals unblocked */
} worker;

/* ---- signal handlers (record only; SIGALRM is the one exception, see below) ------------ */

static volatile sig_atomic_t stop_requested;
/* What the SIGALRM handler needs, written before a request's bytes are read. */
static volatile sig_atomic_t alarm_fd = -1;
static volatile sig_atomic_t alarm_may_answer;
static volatile sig_atomic_t alarm_armed;
static unsigned char alarm_reply[256];
static volatile sig_atomic_t alarm_reply_len;
static alog *volatile alarm_alog;   /* its gathered lines are written before the exit */

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
 * was sent yet, then exit). handle_conn arms the same timer when master_gone was set just
 * before its request armed the alarm. */
#define MASTER_GONE_GRACE_MS 500
static volatile sig_atomic_t master_gone;

static void arm_master_gone_timer(void)
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

/* ---- connections ------------------------------------------------------------------------- */

static struct conn *conn_find(worker *w, int fd)
{
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].fd == fd)
            return &w->conns[i];
    return NULL;
}

/* A request (or the peer's close) is waiting on c: it queues behind the ones already waiting. */
static void mark_ready(worker *w, struct conn *c)
{
    if (!c->ready) {
        c->ready = true;
        c->ready_seq = ++w->ready_seq;
    }
}

/* Drop a connection from the table. Its descriptor is closed by the caller (or already);
 * closing removes it from the epoll set, so no EPOLL_CTL_DEL is needed. */
static void conn_forget(worker *w, struct conn *c)
{
    *c = w->conns[--w->nconns];
}

/* Close politely: half-close, give the peer linger_timeout to close its side, close. */
static void close_fd(const worker *w, int fd)
{
    if (shutdown(fd, SHUT_WR) == 0 && w->cfg->linger_timeout_ms > 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char trash[512];
        /* From the last clock read (the response's end, usually): the peer mostly closes
         * during the first poll, and then no clock is read at all. */
        int64_t end = w->now_ns / 1000000 + w->cfg->linger_timeout_ms;
        int64_t left = w->cfg->linger_timeout_ms;
        while (left > 0 && poll(&p, 1, (int)left) > 0 &&
               recv(fd, trash, sizeof(trash), MSG_DONTWAIT) > 0)
            left = end - clock_mono_ms();
    }
    close(fd);
}

static void conn_close(worker *w, struct conn *c)
{
    int fd = c->fd;
    conn_forget(w, c);
    close_fd(w, fd);
}

/* Close an idle connection at once: nothing to drain, and should the web server have
 * raced a request onto it, it sees the reset and retries elsewhere (nginx does this for
 * its cached connections) instead of our reading and discarding the request. */
static void conn_drop(worker *w, struct conn *c)
{
    int fd = c->fd;
    conn_forget(w, c);
    close(fd);
}

/* When a request whose first byte came at start_ms must be complete: request_timeout, or a
 * minute without one. */
static int64_t header_deadline(const worker *w, int64_t start_ms)
{
    return start_ms + (w->cfg->request_timeout_ms > 0 ? w->cfg->request_timeout_ms : 60000);
}

bool handoff_send(int sock, int fd, const handoff_msg *msg)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof(*msg)};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = sizeof(ctl.b)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    return sock >= 0 && sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*msg);
}

int handoff_recv(int sock, handoff_msg *msg)
{
    for (;;) {
        memset(msg, 0, sizeof(*msg));
        msg->tag = 'k';
        struct iovec iov = {.iov_base = msg, .iov_len = sizeof(*msg)};
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(sizeof(int))];
        } ctl;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                            .msg_controllen = sizeof(ctl.b)};
        ssize_t got = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (got < 0)
            return -1;   /* none left (or another process took it) */
        int fd = -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
                cm->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        if (got != (ssize_t)sizeof(*msg))
            msg->req_start_ms = 0;
        if (fd >= 0)
            return fd;
    }
}

/* Pass a connection this worker holds but is not serving to whichever worker reads the
 * handoff socket next (see the banner). False when it could not be sent (no handoff socket,
 * or its queue is full): the connection then stays here, untouched. */
static bool conn_hand_off(worker *w, struct conn *c)
{
    handoff_msg msg = {.tag = c->kept ? 'k' : 'n', .req_start_ms = c->req_start_ms};
    if (!handoff_send(w->args->handoff[0], c->fd, &msg))
        return false;
    /* The copy in flight keeps the socket open, and with it our epoll registration (epoll
     * forgets a socket only when its last reference goes): remove it before closing ours. */
    if (c->registered)
        epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    sb_inc(&w->sb->pool.keepalive_released);
    conn_drop(w, c);
    return true;
}

/* Start waiting for input on c: edge-triggered, so a connection holding half a request
 * does not wake us until more arrives (adding one that already has input reports it once).
 * False when the epoll set refused it (the connection is then closed). */
static bool conn_register(worker *w, struct conn *c)
{
    if (c->registered)
        return true;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = (uint64_t)c->fd};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        conn_drop(w, c);
        return false;
    }
    c->registered = true;
    return true;
}

/* Put a new connection in the table (not yet in the epoll set: a fresh one usually has its
 * request already, and is served before it would ever wait). */
static struct conn *conn_add(worker *w, int fd, int64_t now)
{
    if (w->nconns >= w->max_conns) {
        /* Cannot happen: a full table takes nothing in (set_intake). Never make room by
         * closing a held connection: the web server may be writing a request on it. */
        close(fd);
        return NULL;
    }
    struct conn *c = &w->conns[w->nconns++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->deadline_ms = now + (w->cfg->keepalive_timeout_ms > 0 ? w->cfg->keepalive_timeout_ms : 5000);
    return c;
}

static bool has_pending_input(int fd)
{
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n != 0 && !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

/* A slow request must not hold up the requests the web server sends on this worker's other
 * connections: on a kept one it may send its next request at any time, and a new one
 * accepted beside the slow request may hold a request already. Another worker could serve
 * them at once: pass every one not being served on — a request already waiting in one
 * included (the worker that takes it serves it at once), and one only partly there (seen
 * while the web server was still writing it: its first-byte time goes with it). Called by
 * the handoff thread, conns_mu held. */
static void hand_off_held(worker *w)
{
    if (w->nconns == 0 || w->args->handoff[0] < 0)
        return;
    for (int i = w->nconns - 1; i >= 0; i--) {
        struct conn *c = &w->conns[i];
        if (c->serving)
            continue;
        if (!conn_hand_off(w, c))
            return;   /* the queue is full: keep the rest */
    }
}

/* Connections still in the listen queue while this worker is busy and others are idle: the
 * listen socket is in every worker's epoll set with EPOLLEXCLUSIVE, so the wakeup for two
 * connections that arrive together may reach this worker alone, which took one and is now
 * in a slow request while the other waits for it. Accept them here and pass them on, as many
 * as there are idle workers. Not where allowed_clients must be checked (that check logs, and
 * this thread does not). A connection that cannot be passed stays here, served after the
 * slow request. Called by the handoff thread, with conns_mu held. */
static void hand_off_pending_accepts(worker *w, int64_t now)
{
    if (w->args->handoff[0] < 0 ||
        (!w->args->lis->is_unix && !netaddr_list_any(w->cfg->allowed)))
        return;
    int idle = __atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED);
    /* Its own shard first: no other worker accepts there. */
    int lfd = w->args->shard_fd >= 0 ? w->args->shard_fd : w->args->lis->fd;
    for (int k = 0; k < idle && w->nconns < w->max_conns; k++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && lfd != w->args->lis->fd) {
            lfd = w->args->lis->fd;
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        }
        if (fd < 0)
            return;   /* none waiting (the listen sockets are non-blocking) */
        sb_inc(&w->sb->pool.accepted);
        struct conn *c = conn_add(w, fd, now);
        if (c == NULL)
            return;
        mark_ready(w, c);
        conn_hand_off(w, c);
    }
}

static long futex(uint32_t *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* The handoff thread (see the banner): waits for the master's word, then passes this
 * worker's other connections on if the request it was woken for is still running. */
static void *handoff_thread(void *arg)
{
    worker *w = arg;
    sb_slot *s = w->slot;
    uint32_t seen = __atomic_load_n(&s->handoff_seq, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t v = __atomic_load_n(&s->handoff_seq, __ATOMIC_ACQUIRE);
        if (v == seen) {
            futex(&s->handoff_seq, FUTEX_WAIT, v);   /* shared memory: not FUTEX_PRIVATE */
            continue;
        }
        seen = v;
        pthread_mutex_lock(&w->conns_mu);
        if ((uint32_t)__atomic_load_n(&s->req_seq, __ATOMIC_ACQUIRE) == v &&
            __atomic_load_n(&s->req_start_ns, __ATOMIC_ACQUIRE) != 0) {
            hand_off_held(w);
            hand_off_pending_accepts(w, clock_mono_ms());
        }
        pthread_mutex_unlock(&w->conns_mu);
    }
    return NULL;
}

/* Start the handoff thread with every signal blocked: signals sent to the worker (stop,
 * SIGALRM, the parent-death SIGUSR2) must reach the main thread. False when it could not be
 * started: the worker then works as before, without passing connections while it serves. */
static bool start_handoff_thread(worker *w)
{
    if (w->args->handoff[0] < 0 || w->cfg->keepalive_handoff_after_ms <= 0 ||
        w->cfg->keepalive_timeout_ms <= 0)
        return false;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_t t;
    int rc = pthread_create(&t, &at, handoff_thread, w);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        log_warn("cannot start the handoff thread (%s): a slow request may hold up requests on "
                 "this worker's kept connections", strerror(rc));
        return false;
    }
    return true;
}

/* Take the connections other workers passed on, while the table has room. A request may
 * already be waiting on one: each is looked at at once. */
static void take_handoffs(worker *w, int64_t now)
{
    int sock = w->args->handoff[1];
    while (sock >= 0 && w->nconns < w->max_conns) {
        handoff_msg msg;
        int fd = handoff_recv(sock, &msg);
        if (fd < 0)
            return;   /* none left (or another worker took it) */
        struct conn *c = conn_add(w, fd, now);
        if (c == NULL)
            continue;
        c->kept = msg.tag != 'n';
        mark_ready(w, c);
        c->deadline_ms = now + w->cfg->keepalive_timeout_ms;
        if (msg.req_start_ms > 0) {
            /* a request partly there: its bound runs from its first byte, as before */
            c->req_start_ms = msg.req_start_ms;
            c->deadline_ms = header_deadline(w, msg.req_start_ms);
        }
    }
}

/* Take new connections (the listen socket, and connections passed by other workers) only
 * while the table has room; a full worker leaves them to the others instead of spinning on
 * a readable socket it cannot drain. */
static void set_intake(worker *w)
{
    bool want = w->nconns < w->max_conns;
    if (want == !w->intake_paused)
        return;
    int fds[3] = {w->args->lis->fd, w->args->handoff[1], w->args->shard_fd};
    uint64_t tags[3] = {LISTEN_TAG, HANDOFF_TAG, SHARD_TAG};
    for (int i = 0; i < 3; i++) {
        if (fds[i] < 0)
            continue;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = tags[i]};
        epoll_ctl(w->ep, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fds[i], want ? &ev : NULL);
    }
    w->intake_paused = !want;
    if (!want)
        log_warn("holding %d FastCGI connections, the most one worker may: taking no new one "
                 "until one closes (lower the web server's keepalive, or raise "
                 "pm.max_children)", w->nconns);
}

/* Another worker that is idle or serving (this one being SB_EXITING): one that will read
 * the handoff socket. */
static bool others_running(worker *w)
{
    return __atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED) +
               __atomic_load_n(&w->sb->pool.active_workers, __ATOMIC_RELAXED) > 0;
}

/* ---- logs --------------------------------------------------------------------------------- */

/* (Re)open the access log: the lines gathered for the old file are written there first. */
static void open_access_log(worker *w)
{
    const char *p = w->cfg->access_log;
    alarm_alog = NULL;
    alog_close(w->alog);
    w->alog = NULL;
    if (!w->cfg->log_requests || p == NULL || p[0] == '\0' || strcmp(p, "off") == 0)
        return;
    int rc = alog_open(p, (size_t)w->cfg->access_log_buffer, w->cfg->access_log_flush_ms,
                       &w->alog);
    if (rc == TN_NOMEM)
        log_error("cannot open access_log %s: out of memory", p);
    else if (rc != TN_OK)
        log_error("cannot open access_log %s: %m", p);
    alarm_alog = w->alog;
}

static void check_log_reopen(worker *w)
{
    uint32_t g = __atomic_load_n(&w->sb->pool.log_generation, __ATOMIC_RELAXED);
    if (g == w->log_gen)
        return;
    w->log_gen = g;
    log_reopen();
    open_access_log(w);
}

static TN_HOT void access_log_line(worker *w, const tn_request *r, int status, int64_t us)
{
    check_log_reopen(w);   /* a rotation must not leave this line in the old file */
    if (w->alog == NULL)
        return;
    buf *l = &w->line;
    buf_reset(l);
    char ts[40];
    log_timestamp(ts, sizeof(ts));
    buf_puts(l, "{\"time\":\"");
    buf_puts(l, ts);
    buf_puts(l, "\",\"req\":");
    buf_json_str(l, r->req_id);
    buf_puts(l, ",\"method\":");
    buf_json_str(l, r->method);
    buf_puts(l, ",\"uri\":");
    buf_json_str(l, r->path);
    buf_puts(l, ",\"host\":");
    buf_json_str(l, r->host);
    buf_puts(l, ",\"status\":");
    buf_i64(l, status);
    buf_puts(l, ",\"bytes\":");
    buf_u64(l, r->bytes_out);
    buf_puts(l, ",\"us\":");
    buf_i64(l, us);
    buf_puts(l, ",\"pid\":");
    buf_i64(l, w->slot->pid);
    if (r->tenant != NULL) {
        buf_puts(l, ",\"tenant\":{\"id\":");
        buf_i64(l, r->tenant->id);
        buf_puts(l, ",\"slug\":");
        buf_json_str(l, r->tenant->slug);
        buf_putc(l, '}');
    }
    if (status >= 400) {
        buf_puts(l, ",\"stage\":");
        buf_json_str(l, chain_stage(r));
    }
    buf_puts(l, "}\n");
    if (!l->oom)
        alog_line(w->alog, l->p, l->len, w->now_ns / 1000000);
}

/* ---- the FastCGI transport of tenancy/request.h ------------------------------------------ */

static TN_HOT const char *fx_param(void *tx, const char *name)
{
    return kv_env_get(((FCGX_Request *)tx)->envp, name);
}

static TN_HOT int fx_read(void *tx, char *p, int n)
{
    FCGX_Request *fx = tx;
    int got = FCGX_GetStr(p, n, fx->in);
    if (got == 0 && FCGX_GetError(fx->in) != 0)
        return -1;
    return got;
}

/* libfcgi's own printf is never used (it has no %zu and silently stops): bytes only. */
static TN_HOT int fx_write(void *tx, const char *p, size_t n)
{
    FCGX_Request *fx = tx;
    while (n > 0) {
        int chunk = n > 1 << 30 ? 1 << 30 : (int)n;
        if (FCGX_PutStr(p, chunk, fx->out) != chunk)
            return -1;
        p += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

static const tn_transport fcgi_transport = {fx_param, fx_read, fx_write};

/* ---- one request ------------------------------------------------------------------------ */

static bool builtin_allowed(worker *w, tn_request *r)
{
    return netaddr_match_text(w->cfg->status_allowed, tn_param(r, "REMOTE_ADDR"));
}

static bool path_is(const char *cfgpath, const char *path)
{
    return cfgpath != NULL && cfgpath[0] != '\0' && strcmp(cfgpath, path) == 0;
}

/* The host's own endpoints. TN_DONE when answered, TN_DECLINED otherwise. */
static int serve_builtin(worker *w, tn_request *r)
{
    const tn_config *c = w->cfg;
    int which = path_is(c->ping_path, r->path) ? 1 : path_is(c->status_path, r->path) ? 2
              : path_is(c->metrics_path, r->path) ? 3 : 0;
    if (which == 0)
        return TN_DECLINED;
    if (!builtin_allowed(w, r)) {
        tn_send_error(r, 403, "status endpoints are not open to this address");
        return TN_DONE;
    }
    tn_add_header(r, "Cache-Control", "no-store");
    if (which == 1) {
        tn_puts(r, "pong\n");
    } else if (which == 2) {
        tn_add_header(r, "Content-Type", "application/json");
        status_json(r->out, w->sb, w->args->lis, w->args->lim);
        r->bytes_out = r->out->len;
    } else {
        tn_add_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        status_metrics(r->out, w->sb, w->args->lis);
        r->bytes_out = r->out->len;
    }
    return TN_DONE;
}

/* REQUEST_START ("1733150000.123", nginx $msec) older than queue_timeout? */
static bool past_queue_deadline(worker *w, tn_request *r)
{
    if (w->cfg->queue_timeout_ms <= 0)
        return false;
    const char *s = tn_param(r, "REQUEST_START");
    if (s == NULL || *s < '0' || *s > '9')
        return false;
    /* Seconds, then up to three digits of milliseconds, by hand: strtod costs more than the
     * rest of this check, and it runs for every request. */
    int64_t ms = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 15; s++, digits++)
        ms = ms * 10 + (*s - '0');
    if (*s >= '0' && *s <= '9')
        return false;   /* implausibly far in the future: not a time */
    ms *= 1000;
    if (*s == '.') {
        int scale = 100;
        for (s++; *s >= '0' && *s <= '9'; s++, scale /= 10)
            ms += scale * (*s - '0');
    }
    if (ms <= 0)
        return false;
    return clock_wall_us() / 1000 - ms > w->cfg->queue_timeout_ms;
}

/* The bytes a request id from the web server may hold: [0-9A-Za-z_-]. */
static const bool id_byte[256] = {
    ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true, ['-'] = true, ['_'] = true,
};

static TN_HOT void make_req_id(worker *w, char *out, size_t n, FCGX_Request *fx)
{
    const char *given = kv_env_get(fx->envp, "REQUEST_ID");
    if (given != NULL) {
        /* at most 64 of them, then the NUL (one pass, no strlen) */
        size_t l = 0, max = n - 1 < 64 ? n - 1 : 64;
        while (l <= max && id_byte[(unsigned char)given[l]])
            l++;
        if (l > 0 && l <= max && given[l] == '\0') {
            memcpy(out, given, l + 1);
            return;
        }
    }
    /* "<pid>-<counter>" in hex, without printf (this runs for every request nginx sent no
     * id with) */
    char tmp[40];
    size_t k = str_x64(tmp, (uint32_t)w->slot->pid);
    tmp[k++] = '-';
    k += str_x64(tmp + k, ++w->req_counter);
    tmp[k] = '\0';
    str_copy(out, n, tmp);
}

/* A request for the admin panel: its host, read from the same params the chain reads
 * (tenant.host_params) and normalised the same way, is admin.host. */
static bool admin_request(worker *w, tn_request *r)
{
    const tenancy_config *tc = &w->cfg->tenancy;
    if (!w->cfg->admin.enabled)
        return false;
    const char *raw = NULL;
    for (int i = 0; i < tc->nhparams && raw == NULL; i++) {
        raw = tn_param(r, tc->hparams[i]);
        if (raw != NULL && raw[0] == '\0')
            raw = NULL;
    }
    char host[256];
    return raw != NULL && tenant_host_normalise(raw, host, sizeof(host)) != 0 &&
           admin_is_host(host);
}

/* The panel's view of the host: the status document (admin/ knows no scoreboard). */
static void admin_status(void *ctx, buf *out)
{
    worker *w = ctx;
    status_json(out, w->sb, w->args->lis, w->args->lim);
}

/* The console's pending audit entry, kept in this worker's slot: should the statement take
 * the worker down, the master finds the id there and closes the entry (admin_audit_died). */
_Static_assert(sizeof(((sb_slot *)0)->audit_id) >= ADMIN_AUDIT_ID_SIZE,
               "the scoreboard holds a whole audit entry id");
static void admin_audit_pending(void *ctx, const char *id)
{
    worker *w = ctx;
    sb_set_audit(w->slot, id);
}

/* Run the request through the host's stages and the app. Returns the final HTTP status. */
static TN_HOT int run_request(worker *w, tn_request *r)
{
    if (past_queue_deadline(w, r)) {
        sb_inc(&w->sb->pool.rejected_deadline);
        tn_add_header(r, "Retry-After", "1");
        tn_send_error(r, 503, "the request waited in the queue longer than queue_timeout");
        return r->status;
    }
    if (admin_request(w, r))
        return admin_handle(r);   /* the panel: never the chain, never the app */
    if (serve_builtin(w, r) == TN_DONE)
        return r->status;

    int rc = chain_run(r, w->mod.app->handle);
    if (rc == TN_DONE)
        return r->status;   /* the chain answered (404, 503, a theme, a stage) */
    if (rc != TN_OK && !request_started(r) && !r->io_error) {
        if (rc == TN_TOOBIG) {
            tn_send_error(r, 413, "the request body is larger than max_body");
        } else {
            log_error("stage %s: the app returned '%s'", r->stage, tn_rc_str(rc));
            tn_send_error(r, 500, "the application failed");
        }
    } else if (rc != TN_OK && rc != TN_IO && rc != TN_TOOBIG) {
        log_error("stage %s: the app returned '%s' after it started answering", r->stage,
                  tn_rc_str(rc));
    }
    return r->status;
}

/* Prepare the async-signal-safe 504 for this request id. */
static void prepare_timeout_reply(unsigned req_id, int fd)
{
    static const char text[] = "Status: 504 Gateway Timeout\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 33\r\n\r\nthe request ran past its timeout\n";
    size_t n = fcgi_simple_response(alarm_reply, sizeof(alarm_reply), req_id, text,
                                    sizeof(text) - 1);
    alarm_reply_len = (sig_atomic_t)n;
    alarm_fd = fd;
}

/* Every read libfcgi makes on this connection gives up after request_timeout. Set before a
 * request is served unless all of it is already in the socket buffer (most GETs: then no
 * read can block, and the system call is saved); once per connection. */
static void arm_read_timeout(const worker *w, struct conn *c)
{
    if (c->rcvtimeo || w->cfg->request_timeout_ms <= 0)
        return;
    struct timeval tv = {(time_t)(w->cfg->request_timeout_ms / 1000),
                         (suseconds_t)(w->cfg->request_timeout_ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    c->rcvtimeo = true;
}

/* Look at what a readable connection holds, without waiting. Returns TN_OK when a whole
 * request header is there (*req_id set; *whole when its STDIN is there too), TN_AGAIN when a
 * record was answered or skipped (look again), TN_DECLINED when more bytes are needed,
 * TN_DONE when the connection was answered and must close, TN_ERR to close it. */
static TN_HOT int precheck(worker *w, int fd, unsigned *req_id, bool *whole)
{
    ssize_t n = recv(fd, w->peek, w->peek_size, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return TN_ERR;   /* the peer closed */
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? TN_DECLINED : TN_ERR;
    fp_result res;
    switch (fcgi_precheck(w->peek, (size_t)n, (size_t)w->cfg->max_params,
                          (size_t)n == w->peek_size, &res)) {
    case FP_READY:
        *req_id = res.req_id;
        *whole = res.stdin_done;
        return TN_OK;
    case FP_NEED_MORE:
        return TN_DECLINED;
    case FP_SKIP:
        /* The whole record is in the socket buffer: read it off. */
        return recv(fd, w->peek, res.consume, MSG_WAITALL) == (ssize_t)res.consume ? TN_AGAIN
                                                                                     : TN_ERR;
    case FP_MGMT: {
        unsigned char reply[256];
        size_t len;
        if (res.mgmt_type == FCGI_T_GET_VALUES) {
            len = fcgi_get_values_result(reply, sizeof(reply), w->peek + res.mgmt_off,
                                         res.mgmt_len, (unsigned)w->cfg->max_children,
                                         (unsigned)w->cfg->max_children);
            sb_inc(&w->sb->pool.get_values);
        } else {
            len = fcgi_unknown_type(reply, sizeof(reply), res.mgmt_type);
        }
        if (recv(fd, w->peek, res.consume, MSG_WAITALL) != (ssize_t)res.consume)
            return TN_ERR;
        if (len == 0 || write(fd, reply, len) != (ssize_t)len)
            return TN_ERR;
        return TN_AGAIN;
    }
    case FP_BAD_ROLE: {
        unsigned char reply[16];
        size_t len = fcgi_end_request(reply, sizeof(reply), res.req_id, 0, FCGI_UNKNOWN_ROLE);
        (void)!recv(fd, w->peek, res.consume, MSG_WAITALL);
        (void)!write(fd, reply, len);
        log_warn("refused a FastCGI request with role %u (only responder, authorizer and "
                 "filter exist)", res.role);
        return TN_DONE;
    }
    case FP_MALFORMED:
        sb_inc(&w->sb->pool.malformed);
        log_warn("refused a malformed FastCGI stream: %s", res.why);
        return TN_ERR;
    case FP_TOO_BIG: {
        /* The web server gets an answer it can pass on (a bare close would be its 502); the
         * rest of the request is never read, so the connection closes after it. */
        static const char text[] = "Status: 431 Request Header Fields Too Large\r\n"
                                   "Content-Type: text/plain\r\nContent-Length: 40\r\n\r\n"
                                   "the request headers are over max_params\n";
        unsigned char reply[256];
        size_t len = fcgi_simple_response(reply, sizeof(reply), res.req_id, text, sizeof(text) - 1);
        sb_inc(&w->sb->pool.malformed);
        log_warn("refused a FastCGI request: %s (max_params %lld): answered 431", res.why,
                 (long long)w->cfg->max_params);
        if (len > 0)
            (void)!write(fd, reply, len);
        return TN_DONE;
    }
    }
    return TN_ERR;
}

/* Read what the app left of the request body, so the kept connection starts the next
 * request on a record boundary. False when it could not (too much left, or an error). */
static bool drain_stdin(FCGX_Request *fx)
{
    char scratch[8192];
    size_t drained = 0;
    while (drained < (8u << 20)) {
        int n = FCGX_GetStr(scratch, sizeof(scratch), fx->in);
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
    return FCGX_HasSeenEOF(fx->in) && FCGX_GetError(fx->in) == 0;
}

/* Serve the request whose header precheck() found complete on fd. Returns true when the
 * connection stays open (kept); false when it was closed. */
static TN_HOT bool serve_one(worker *w, int fd, unsigned req_id, int64_t t0)
{
    const tn_config *cfg = w->cfg;
    int64_t timeout = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 3600000;
    int64_t deadline = t0 / 1000000 + timeout;

    (void)deadline;
    /* From here the master may stop this request at request_timeout (see on_alarm). Reads
     * libfcgi makes either find their bytes there already or are bounded by SO_RCVTIMEO
     * (arm_read_timeout). */
    if (cfg->request_timeout_ms > 0) {
        prepare_timeout_reply(req_id, fd);
        alarm_may_answer = 1;
        alarm_armed = 1;
        if (master_gone)   /* it died before alarm_armed was set: on_master_gone did not arm */
            arm_master_gone_timer();
    }
    sb_reading_begin(w->sb, w->slot, t0);

    FCGX_Request *fx = &w->fx;
    fx->ipcFd = fd;
    fx->keepConnection = 1;   /* so the Finish inside Accept never closes our fd */
    guard_begin(fd);
    int rc = FCGX_Accept_r(fx);
    if (rc < 0) {
        guard_end();
        /* libfcgi closed the connection already (its TryAgain path) and then failed to
         * accept on our deliberately invalid listen socket: nothing more to do. */
        fx->ipcFd = -1;
        alarm_armed = 0;
        __atomic_store_n(&w->slot->req_start_ns, 0, __ATOMIC_RELEASE);
        log_warn("libfcgi could not read the request header (%s); connection closed",
                 rc == -EBADF ? "stream error" : strerror(-rc));
        return false;
    }
    bool keep = fx->keepConnection != 0;

    char rid[40];
    make_req_id(w, rid, sizeof(rid), fx);
    tn_request r;
    request_init(&r, &fcgi_transport, fx, w->req_arena, &w->headers, &w->out, cfg->max_body, rid,
                 t0);
    sb_request_begin(w->slot, r.method, r.path, rid);
    char ctx[96];
    memcpy(ctx, "req=", 4);
    str_copy(ctx + 4, sizeof(ctx) - 4, rid);
    log_set_context(ctx);

    sb_set_state(w->sb, w->slot, SB_RUNNING);
    int status = run_request(w, &r);
    alarm_may_answer = 0;   /* from here on the response belongs to libfcgi */
    sb_set_state(w->sb, w->slot, SB_FINISHING);
    request_finish(&r);
    if (r.io_error) {
        status = 499;   /* as nginx logs it: the client closed the connection */
        log_info("the client went away before the response was complete");
    }
    if (keep && !r.io_error && !drain_stdin(fx))
        keep = false;

    fx->keepConnection = 1;   /* libfcgi must not close: we decide below */
    FCGX_Finish_r(fx);
    if (guard_end()) {
        keep = false;
        sb_inc(&w->sb->pool.malformed);
        log_warn("refused a FastCGI management record inside a request's stream (libfcgi "
                 "would have parsed it): connection closed");
    }
    alarm_armed = 0;
    w->now_ns = clock_mono_ns();   /* the one clock read of a request (t0 is the last one) */
    int64_t us = (w->now_ns - t0) / 1000;
    sb_request_end(w->sb, w->slot, status, us);
    access_log_line(w, &r, status, us);
    chain_finish(&r, status);   /* the tenant context ends here, on every path */
    log_set_context(NULL);
    arena_reset(w->req_arena);
    w->served++;

    if (fx->ipcFd < 0)
        return false;   /* libfcgi closed it after a stream error */
    fx->ipcFd = -1;
    /* Kept even when this worker is about to leave: the web server has it back in its cache
     * and may be writing the next request already. A leaving worker passes it on. */
    if (keep && cfg->keepalive_timeout_ms > 0)
        return true;
    close_fd(w, fd);
    return false;
}

/* A connection epoll reported readable: check it, and serve it when a request is there.
 * The connection is removed from the table while served and put back when kept. */
static TN_HOT void handle_conn(worker *w, struct conn *c, int64_t now)
{
    c->ready = false;
    for (;;) {
        unsigned req_id = 0;
        bool whole = false;
        int rc = precheck(w, c->fd, &req_id, &whole);
        if (rc == TN_AGAIN)
            continue;   /* answered or skipped a record: there may be more */
        if (rc == TN_DECLINED) {
            /* Nothing yet, or part of a request: wait beside the others, a partial request
             * bounded by request_timeout from its first byte. */
            if (c->req_start_ms == 0 && has_pending_input(c->fd)) {
                c->req_start_ms = now;
                c->deadline_ms = header_deadline(w, now);
            }
            conn_register(w, c);
            return;
        }
        if (rc != TN_OK) {
            conn_close(w, c);
            return;
        }
        /* Served in place: the connection stays in the table (and in the epoll set if it
         * was there), marked so that nothing releases it meanwhile. */
        int fd = c->fd;
        /* From the last clock read: the end of the previous request or of the wait that
         * found this one, microseconds ago (the accept and the pre-check count in). */
        int64_t t0 = c->req_start_ms ? c->req_start_ms * 1000000 : w->now_ns;
        if (!whole)
            arm_read_timeout(w, c);
        c->serving = true;
        /* The master wakes the handoff thread only for a worker that holds others. */
        __atomic_store_n(&w->slot->held, (uint32_t)(w->nconns - 1), __ATOMIC_RELAXED);
        pthread_mutex_unlock(&w->conns_mu);
        bool keep = serve_one(w, fd, req_id, t0);
        pthread_mutex_lock(&w->conns_mu);
        c = conn_find(w, fd);   /* the handoff thread may have moved entries meanwhile */
        if (c == NULL)
            return;   /* cannot happen: serving connections are never released */
        if (!keep) {
            conn_forget(w, c);   /* serve_one closed it */
            return;
        }
        int64_t t = w->now_ns / 1000000;   /* serve_one's end */
        c->serving = false;
        c->kept = true;
        c->req_start_ms = 0;
        c->deadline_ms = t + w->cfg->keepalive_timeout_ms;
        conn_register(w, c);
        return;
    }
}

/* The chain tells the scoreboard which tenant this worker serves (slow and timeout logs,
 * and the master's clean-up of the per-tenant counts if the worker dies). */
static TN_HOT void note_tenant(void *ctx, int64_t id, const char *slug)
{
    sb_slot *s = ctx;
    __atomic_store_n(&s->tenant_id, id, __ATOMIC_RELEASE);
    sb_set_tenant(s, slug);
}

/* ---- setup and loop ---------------------------------------------------------------------- */

static int drop_privileges(const tn_config *cfg)
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

/* Accept one connection if one is waiting. True when a connection was added. */
static bool accept_new(worker *w, int lfd, int64_t now)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return false;   /* none waiting, another worker won, or a transient error */
    sb_inc(&w->sb->pool.accepted);
    if (!w->args->lis->is_unix && !netaddr_list_any(w->cfg->allowed)) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ||
            !netaddr_match_sockaddr(w->cfg->allowed, (struct sockaddr *)&ss, len)) {
            log_warn("refused a FastCGI connection from an address outside allowed_clients");
            close(fd);
            return false;
        }
    }
    struct conn *c = conn_add(w, fd, now);
    /* nginx writes the request right after connecting: look at once, not a turn later. */
    if (c != NULL)
        mark_ready(w, c);
    return c != NULL;
}

/* The connection to serve next: of those with a request waiting (epoll said readable), the
 * first that became ready (the order the requests arrived). NULL: none waits. */
static struct conn *oldest_ready(worker *w)
{
    struct conn *pick = NULL;
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].ready && (pick == NULL || w->conns[i].ready_seq < pick->ready_seq))
            pick = &w->conns[i];
    return pick;
}

/* As many connections as MAX_CONNS, or as the open-files limit leaves room for (raised to
 * its hard limit when needed): an accept that fails for want of descriptors would leave
 * the listen socket readable and the worker spinning. */
static int max_conns(void)
{
    const rlim_t reserve = 64;   /* logs, the app's files and database connections */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 64;
    if (rl.rlim_cur < MAX_CONNS + reserve && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < MAX_CONNS + reserve ? rl.rlim_max : MAX_CONNS + reserve;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= MAX_CONNS + reserve)
        return MAX_CONNS;
    return rl.rlim_cur > reserve + 8 ? (int)(rl.rlim_cur - reserve) : 8;
}

/* Turns in a row that may skip epoll_pwait (see worker_loop). */
#define FAST_ACCEPT_STREAK 16

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
            break;
        }
        check_log_reopen(w);
        set_intake(w);
        int64_t now = w->now_ns / 1000000;
        if (accepted && w->nconns == 0 && streak < FAST_ACCEPT_STREAK) {
            streak++;
            /* Its shard first (only this worker's share takes those), then the main one. */
            accepted = (w->args->shard_fd >= 0 && accept_new(w, w->args->shard_fd, now)) ||
                       accept_new(w, w->args->lis->fd, now);
            if (accepted) {
                handle_conn(w, &w->conns[w->nconns - 1], now);
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
            int64_t left = w->conns[i].deadline_ms - now;
            int t = left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
            if (timeout < 0 || t < timeout)
                timeout = t;
        }
        if (cfg->pm == PM_ONDEMAND) {
            /* Kept connections do not keep an ondemand worker alive: idle is idle. */
            int64_t left = w->idle_since_ms + cfg->idle_timeout_ms - now;
            int t = left <= 0 ? 0 : (int)left;
            if (timeout < 0 || t < timeout)
                timeout = t;
        }
        int64_t due = alog_due(w->alog);   /* gathered access-log lines: written in time */
        if (due >= 0 && (timeout < 0 || due - now < timeout))
            timeout = due <= now ? 0 : (int)(due - now);
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
        bool listen_ready = false, handoff_ready = false, shard_ready = false;
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
            struct conn *c = conn_find(w, (int)evs[i].data.u64);
            if (c != NULL)
                mark_ready(w, c);
        }
        /* Deadlines: silent, idle and incomplete connections go. An idle kept one is
         * looked at first (its readiness may be in the next batch of events): a request
         * that arrived at the last moment is served, not lost. */
        for (int i = w->nconns - 1; i >= 0; i--) {
            struct conn *c = &w->conns[i];
            if (c->deadline_ms > now || c->ready)
                continue;
            if (c->req_start_ms) {
                log_info("closed a FastCGI connection whose request header did not arrive "
                         "within request_timeout");
                conn_close(w, c);
            } else if (has_pending_input(c->fd)) {
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
            take_handoffs(w, now);
        if (shard_ready && w->nconns < w->max_conns)
            accepted = accept_new(w, w->args->shard_fd, now);
        /* Serve one ready connection per turn, first come first served, so that the listen
         * socket and the deadlines are looked at between requests. */
        struct conn *pick = oldest_ready(w);
        /* A worker already behind (a request waits on a connection it holds) leaves a new
         * connection to an idle worker, which the same event woke (EPOLLEXCLUSIVE wakes a
         * worker blocked in epoll): new connections go where there is time for them, and
         * the web server's kept connections spread over the workers instead of piling up
         * behind one. The socket stays readable, so if nobody takes it this one does as
         * soon as it has caught up. */
        bool took = listen_ready && w->nconns < w->max_conns &&
                    !(pick != NULL &&
                      __atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED) > 0) &&
                    accept_new(w, w->args->lis->fd, now);
        accepted = took || accepted;
        if (pick == NULL && took)   /* the one just accepted (it is the last to come) */
            pick = oldest_ready(w);
        if (pick == NULL)
            continue;
        handle_conn(w, pick, now);
        w->idle_since_ms = w->now_ns / 1000000;
    }
}

void worker_main(const worker_args *a)
{
    static worker w;   /* static: large buffers off the stack, and one per process anyway */
    memset(&w, 0, sizeof(w));
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

    if (drop_privileges(w.cfg) != TN_OK)
        _exit(WORKER_EXIT_SETUP);

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

    chain_env env = {.cfg = &w.cfg->tenancy, .max_children = w.cfg->max_children,
                     .lim = a->lim, .worker = a->slot, .note_tenant = note_tenant,
                     .hook_ctx = w.slot};
    if (chain_init(&env) != TN_OK) {
        log_error("cannot set up the tenancy chain: out of memory");
        _exit(WORKER_EXIT_SETUP);
    }
    admin_env adm_env = {.cfg = &w.cfg->admin, .tcfg = &w.cfg->tenancy,
                         .config_path = w.cfg->path, .status_json = admin_status,
                         .status_ctx = &w, .audit_pending = admin_audit_pending,
                         .audit_ctx = &w};
    if (admin_init(&adm_env) != TN_OK) {
        log_error("cannot set up the admin panel: out of memory");
        _exit(WORKER_EXIT_SETUP);
    }
    char err[512];
    if (app_load(w.cfg->app, &w.mod, err, sizeof(err)) != TN_OK) {
        log_error("%s", err);
        _exit(WORKER_EXIT_INIT);
    }
    if (w.mod.app->init != NULL) {
        tn_app_env aenv = {w.cfg->path, w.cfg->app, a->index, a->generation};
        chain_allow_stages(true);
        int rc = w.mod.app->init(&aenv);
        chain_allow_stages(false);
        if (rc != TN_OK) {
            log_error("app %s: init failed: %s", w.mod.app->name ? w.mod.app->name : w.cfg->app,
                      tn_rc_str(rc));
            _exit(WORKER_EXIT_INIT);
        }
    }
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
    w.max_conns = max_conns();
    w.peek_size = (size_t)w.cfg->max_params + PEEK_SLACK;
    w.peek = malloc(w.peek_size);
    if (w.peek == NULL) {
        log_error("cannot allocate the %zu-byte peek buffer (max_params)", w.peek_size);
        _exit(WORKER_EXIT_SETUP);
    }
    w.max_requests = jittered_limit(w.cfg);
    w.log_gen = __atomic_load_n(&w.sb->pool.log_generation, __ATOMIC_RELAXED);
    open_access_log(&w);

    pthread_mutex_init(&w.conns_mu, NULL);
    pthread_mutex_lock(&w.conns_mu);   /* held by this thread except while serving */
    start_handoff_thread(&w);
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
     * the others are passed to the other workers while any is running: kept ones, and
     * fresh ones that have not spoken yet (under load the web server may be descheduled
     * between its connect and its write for longer than the wait below, and closing one
     * under it fails the request it is about to write). The rest is closed. */
    while (w.nconns > 0) {
        struct conn *c = &w.conns[w.nconns - 1];
        int fd = c->fd;
        if (!c->kept && c->req_start_ms == 0) {
            /* Accepted but silent so far: the web server writes right after connecting. */
            struct pollfd p = {.fd = fd, .events = POLLIN};
            (void)!poll(&p, 1, 200);
        }
        if (has_pending_input(fd)) {
            w.now_ns = clock_mono_ns();
            handle_conn(&w, c, w.now_ns / 1000000);
            if ((c = conn_find(&w, fd)) == NULL)
                continue;
        }
        sb_set_state(w.sb, w.slot, SB_EXITING);   /* not counted among the others below */
        /* ondemand: with no other worker left, the master keeps them (it parks them and
         * starts a worker when one speaks: master.c) */
        if ((others_running(&w) || (c->kept && w.cfg->pm == PM_ONDEMAND)) &&
            conn_hand_off(&w, c))
            continue;
        conn_drop(&w, c);
    }
    sb_set_state(w.sb, w.slot, SB_EXITING);
    if (w.mod.app->fini != NULL)
        w.mod.app->fini();
    alarm_alog = NULL;
    alog_close(w.alog);
    _exit(WORKER_EXIT_OK);
}
