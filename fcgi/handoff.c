/*
 * handoff.c — passing the connections a worker holds to the other workers (see worker.h).
 *
 * To free itself — when a request has run for keepalive_handoff_after while other workers
 * are idle, or when it leaves (recycle, scale-down, reload) — to even out the kept
 * connections when it holds more than an idle worker (handoff_balance), a worker passes
 * connections it is not serving to the other workers over a datagram socket they all share
 * (SCM_RIGHTS): the connection stays open throughout, and a request written meanwhile waits
 * in its socket buffer for the worker that takes it.
 *
 * The handoff thread. While a request runs, the main thread is in app code and cannot look
 * at its other connections, so passing them is the job of a second thread that sleeps on a
 * futex word in the worker's scoreboard slot (handoff_seq). The master, which already
 * watches every request's start, wakes it when the request has run keepalive_handoff_after
 * and another worker is idle. The connection table is guarded by conns_mu, which the main
 * thread holds at all times except while it serves a request (serve_one touches no other
 * connection), so the thread acts only then, and only for the request it was woken for. A
 * fast request pays two uncontended mutex operations and one store; passing at the start of
 * every request instead would cost CPU on every request under load, moving connections
 * back and forth between workers that were idle for a moment only.
 *
 * Must not: pass the connection being served, or act without conns_mu.
 */
#include "core/first.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/netaddr.h"
#include "fcgi/worker_int.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

ssize_t fd_pass_send(int sock, int fd, const void *msg, size_t len)
{
    if (sock < 0) {
        errno = EBADF;
        return -1;
    }
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
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
    return sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

ssize_t fd_pass_recv(int sock, void *msg, size_t len, int *fd)
{
    *fd = -1;
    struct iovec iov = {.iov_base = msg, .iov_len = len};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = sizeof(ctl.b)};
    ssize_t got = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0)
        return got;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(fd, CMSG_DATA(cm), sizeof(int));
    return got;
}

bool handoff_send(int sock, int fd, const handoff_msg *msg)
{
    return fd_pass_send(sock, fd, msg, sizeof(*msg)) == (ssize_t)sizeof(*msg);
}

int handoff_recv(int sock, handoff_msg *msg)
{
    for (;;) {
        memset(msg, 0, sizeof(*msg));
        msg->tag = 'k';
        int fd;
        ssize_t got = fd_pass_recv(sock, msg, sizeof(*msg), &fd);
        if (got < 0)
            return -1;   /* none left (or another process took it) */
        if (got != (ssize_t)sizeof(*msg))
            msg->req_start_ms = 0;
        if (fd >= 0)
            return fd;
    }
}

/* Pass c to the process that reads `sock` (its queue: the shared handoff socket, or a
 * worker's affinity inbox), with its state and `busy_from` (handoff_msg), and let it go
 * here. False when it could not be sent (the queue is full): c then stays, untouched. */
bool conn_pass(worker *w, struct conn *c, int sock, uint16_t busy_from)
{
    handoff_msg msg;
    memset(&msg, 0, sizeof(msg));   /* its padding goes to another process too */
    msg.tag = c->kept ? 'k' : 'n';
    msg.busy_from = busy_from;
    msg.req_start_ms = c->req_start_ms;
    if (!handoff_send(sock, c->fd, &msg))
        return false;
    /* The copy in flight keeps the socket open, and with it our epoll registration (epoll
     * forgets a socket only when its last reference goes): remove it before closing ours. */
    if (c->registered)
        epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    conn_drop(w, c);
    return true;
}

/* Pass a connection this worker holds but is not serving to whichever worker reads the
 * handoff socket next (see the banner); `busy`: because this worker is held up by a request
 * (the taker then does not send the next request back here, tenant.affinity). False when it
 * could not be sent (no handoff socket, or its queue is full): the connection then stays
 * here, untouched. */
bool conn_hand_off(worker *w, struct conn *c, bool busy)
{
    if (!conn_pass(w, c, w->args->handoff[0], busy ? (uint16_t)(w->args->index + 1) : 0))
        return false;
    sb_inc(&w->sb->pool.keepalive_released);
    return true;
}

/* How many connections this worker holds, for handoff_balance to read in sb_slot.held, set
 * as it goes idle: the only state in which that function reads it (a request's start sets it
 * too, for the master: the connections beside the request). */
void handoff_publish_held(worker *w)
{
    __atomic_store_n(&w->slot->held, (uint32_t)(w->nconns - w->nwaiting), __ATOMIC_RELAXED);
}

/* After passing connections to even out: the handoff socket out of the epoll set
 * for BALANCE_HOLD_MS (handoff_resume puts it back), so that this worker does not take them
 * back before the woken worker is scheduled. */
static void hold_handoff(worker *w, int64_t now)
{
    w->balance_hold_ms = now + BALANCE_HOLD_MS;
    if (!w->intake_paused && !w->handoff_out) {
        epoll_ctl(w->ep, EPOLL_CTL_DEL, w->args->handoff[1], NULL);
        w->handoff_out = true;
    }
}

/* Kept connections evened out over the workers. The web server opens its kept connections
 * in a burst (after its own idle timeout emptied its cache), and whichever worker the
 * scheduler happens to run while they arrive accepts most of them: one worker can then hold
 * three times what another does for as long as the web server keeps them, its requests
 * queue while the other waits for its few, and the pool serves at about one worker's pace
 * with a long tail. So a worker that is behind (the caller has a request waiting on one of
 * its connections) while a worker of its generation is idle holding at least two fewer
 * passes it half the difference, of the connections that have nothing waiting: they meet
 * in the middle and stop there (a difference of one stays, so nothing goes back and forth).
 *
 * The idle worker, blocked in epoll, is the one the handoff socket wakes, but the kernel
 * lets the sender run on until it sleeps, and the sender reads that socket between its own
 * requests: it would take its connections back before the idle worker is scheduled. So the
 * sender leaves the socket out of its epoll set for BALANCE_HOLD_MS (handoff_resume puts it
 * back) and passes nothing more meanwhile. True when it passed any: the table moved
 * (pointers into it are stale). */
bool handoff_balance(worker *w)
{
    int64_t now = w->now_ns / 1000000;
    /* Not with listen.shards: a shard's connections carry its tenants, and whichever idle
     * worker took them could be another shard's. */
    if (w->args->handoff[0] < 0 || w->args->shard_fd >= 0 || w->nconns < 3 ||
        now < w->balance_hold_ms ||
        __atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED) <= 0)
        return false;
    uint32_t mine = (uint32_t)(w->nconns - w->nwaiting), fewest = mine;
    for (int i = 0, n = sb_slots_used(w->sb); i < n; i++) {
        const sb_slot *s = sb_slot_at(w->sb, i);
        if (s == w->slot || __atomic_load_n(&s->generation, __ATOMIC_RELAXED) !=
                                w->slot->generation)
            continue;
        uint8_t st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
        uint32_t held = __atomic_load_n(&s->held, __ATOMIC_RELAXED);
        if ((st == SB_IDLE || st == SB_KEEPALIVE) && held < fewest)
            fewest = held;
    }
    uint32_t give = (mine - fewest) / 2;
    if (give == 0)
        return false;
    uint32_t gave = 0;
    for (int i = w->nconns - 1; i >= 0 && gave < give; i--) {
        struct conn *c = &w->conns[i];
        if (c->kept && !c->ready && !c->serving && c->wait_tenant == 0 &&
            c->req_start_ms == 0) {
            if (!conn_hand_off(w, c, false))
                break;   /* the queue is full: keep the rest */
            gave++;
        }
    }
    if (gave == 0)
        return false;
    hold_handoff(w, now);
    return true;
}

/* The handoff socket back in the epoll set once handoff_balance's hold is over. */
void handoff_resume(worker *w, int64_t now)
{
    if (!w->handoff_out || now < w->balance_hold_ms)
        return;
    w->handoff_out = false;
    if (w->intake_paused)
        return;   /* conn_set_intake adds it with the listen socket */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = HANDOFF_TAG};
    epoll_ctl(w->ep, EPOLL_CTL_ADD, w->args->handoff[1], &ev);
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
        /* One waiting for its tenant's worker stays: the wake-up reaches every worker holding
         * such requests, and the one that finds room first serves it. */
        if (c->serving || c->wait_tenant != 0)
            continue;
        if (!conn_hand_off(w, c, true))
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
        conn_hand_off(w, c, true);
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
bool handoff_start_thread(worker *w)
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
void handoff_take(worker *w, int64_t now)
{
    int sock = w->args->handoff[1];
    while (sock >= 0 && w->nconns < w->max_conns) {
        handoff_msg msg;
        int fd = handoff_recv(sock, &msg);
        if (fd < 0)
            return;   /* none left (or another worker took it) */
        conn_take_passed(w, fd, &msg, now);
    }
}

/* A connection another process passed (handoff_recv's fd and message) into the table,
 * looked at at once; NULL when the table had no room (the fd is closed). */
struct conn *conn_take_passed(worker *w, int fd, const handoff_msg *msg, int64_t now)
{
    struct conn *c = conn_add(w, fd, now);
    if (c == NULL)
        return NULL;
    c->kept = msg->tag != 'n';
    c->avoid = msg->busy_from;   /* tenant.affinity: not back to a busy worker */
    mark_ready(w, c);
    c->deadline_ms = now + w->cfg->keepalive_timeout_ms;
    if (msg->req_start_ms > 0) {
        /* a request partly there: its bound runs from its first byte, as before */
        c->req_start_ms = msg->req_start_ms;
        c->deadline_ms = conn_header_deadline(w, msg->req_start_ms);
    }
    return c;
}

/* Whether a process will take c if this leaving worker (SB_EXITING) passes it now: when
 * not, c is closed instead of left in the handoff socket for nobody (a stop).
 *
 * Another worker idle or serving reads the socket between its requests. A worker that
 * recycles (pm.max_requests) counts on none of them: with a small max_requests under load
 * the others are often all starting or leaving at that moment, and closing its kept
 * connections then loses the requests the web server is writing on them. It is replaced,
 * and the new worker's loop reads the socket first: under static always, under dynamic
 * while pm.min_spare keeps a worker (with 0 the pool may stay empty). Under ondemand the
 * master itself takes kept connections when no worker is left (it holds them and starts a
 * worker when one speaks: master.c). Should the master stop meanwhile, the connections
 * close with the handoff socket when it exits, as they would have here. */
bool handoff_will_be_taken(const worker *w, const struct conn *c)
{
    if (__atomic_load_n(&w->sb->pool.idle_workers, __ATOMIC_RELAXED) +
            __atomic_load_n(&w->sb->pool.active_workers, __ATOMIC_RELAXED) > 0)
        return true;
    switch (w->cfg->pm) {
    case PM_STATIC: return w->recycled;
    case PM_DYNAMIC: return w->recycled && w->cfg->min_spare > 0;
    case PM_ONDEMAND: return c->kept;
    }
    return false;
}
