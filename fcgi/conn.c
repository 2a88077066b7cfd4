/*
 * conn.c — a worker's connection table (see worker.h, worker_int.h).
 *
 * The worker keeps a small table of connections it holds but is not serving: fresh ones
 * that have not sent a byte yet and FastCGI connections the web server asked to keep
 * (FCGI_KEEP_CONN). All sit in one epoll set with the listen socket; when one becomes
 * readable the worker serves exactly one request from it and goes back to epoll. Deadlines
 * close silent connections, and kept ones idle past keepalive_timeout.
 *
 * A kept connection is never closed under the web server. FastCGI has no way to say "do not
 * send on this connection any more", so closing one the web server holds in its cache races
 * with a request it may be writing right now: the request is lost (nginx retries a GET on
 * another connection, never a POST: the client gets 502). So the worker closes a kept
 * connection only when the web server closed it first, or after keepalive_timeout, which the
 * documentation asks to set above the web server's own idle timeout; to free itself it
 * passes them on instead (handoff.c). When its table is full the worker stops accepting (and
 * taking passed connections) until one closes.
 *
 * Must not: close a kept connection the web server may still write on (conn_drop is for one
 * that is idle past its deadline or that the peer closed), or serve a request (serve.c does).
 */
#include "core/first.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/netaddr.h"
#include "fcgi/worker_int.h"
#include "tenancy/limits.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Close politely: half-close, give the peer linger_timeout to close its side, close. Not
 * when the peer has sent all it will (request_done: the whole request, STDIN's end with it,
 * had arrived when it was served; nginx sends nothing more on a connection it does not keep)
 * and none of it is left unread: a reset, which the wait avoids, comes only from closing on
 * unread input, so this close is an orderly end, and waiting for the web server to read the
 * response and close first would only hold the worker from its next request. */
void conn_close_fd(const worker *w, int fd, bool request_done)
{
    int unread = 0;
    if (w->cfg->linger_timeout_ms > 0 &&
        (!request_done || ioctl(fd, FIONREAD, &unread) != 0 || unread > 0) &&
        shutdown(fd, SHUT_WR) == 0) {
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

void conn_close(worker *w, struct conn *c)
{
    int fd = c->fd;
    conn_forget(w, c);
    conn_close_fd(w, fd, false);
}

/* Close an idle connection at once: nothing to drain, and should the web server have
 * raced a request onto it, it sees the reset and retries elsewhere (nginx does this for
 * its cached connections) instead of our reading and discarding the request. */
void conn_drop(worker *w, struct conn *c)
{
    int fd = c->fd;
    conn_forget(w, c);
    close(fd);
}

/* When a request whose first byte came at start_ms must be complete: request_timeout, or a
 * minute without one. */
int64_t conn_header_deadline(const worker *w, int64_t start_ms)
{
    return start_ms + (w->cfg->request_timeout_ms > 0 ? w->cfg->request_timeout_ms : 60000);
}

/* Start waiting for input on c: edge-triggered, so a connection holding half a request
 * does not wake us until more arrives (adding one that already has input reports it once).
 * False when the epoll set refused it (the connection is then closed). */
bool conn_register(worker *w, struct conn *c)
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
struct conn *conn_add(worker *w, int fd, int64_t now)
{
    if (w->nconns >= w->max_conns) {
        /* Cannot happen: a full table takes nothing in (conn_set_intake). Never make room by
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

bool conn_has_input(int fd)
{
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n != 0 && !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

/* Take new connections (the listen socket, and connections passed by other workers) only
 * while the table has room; a full worker leaves them to the others instead of spinning on
 * a readable socket it cannot drain. */
void conn_set_intake(worker *w)
{
    bool want = w->nconns < w->max_conns;
    if (want == !w->intake_paused)
        return;
    int fds[4] = {w->args->lis->fd, w->args->handoff[1], w->args->shard_fd, w->inbox_fd};
    uint64_t tags[4] = {LISTEN_TAG, HANDOFF_TAG, SHARD_TAG, INBOX_TAG};
    for (int i = 0; i < 4; i++) {
        if (fds[i] < 0 || (tags[i] == HANDOFF_TAG && w->handoff_out))
            continue;   /* (handoff_resume puts that one back) */
        struct epoll_event ev = {.events = EPOLLIN | (tags[i] == INBOX_TAG ? 0 : EPOLLEXCLUSIVE),
                                 .data.u64 = tags[i]};
        epoll_ctl(w->ep, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fds[i], want ? &ev : NULL);
    }
    w->intake_paused = !want;
    if (!want)
        log_warn("holding %d FastCGI connections, the most one worker may: taking no new one "
                 "until one closes (lower the web server's keepalive, or raise "
                 "pm.max_children)", w->nconns);
}

/* Accept one connection if one is waiting. True when a connection was added. */
bool conn_accept(worker *w, int lfd, int64_t now)
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
struct conn *conn_oldest_ready(worker *w)
{
    struct conn *pick = NULL;
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].ready && (pick == NULL || w->conns[i].ready_seq < pick->ready_seq))
            pick = &w->conns[i];
    return pick;
}

/* The soft limit is what a process starts with (often 1024, a number that dates from
 * select(), whose descriptor sets hold no more): nothing here uses select (epoll and poll;
 * libfcgi never accepts or waits for us), and a descriptor costs nothing until opened, so
 * raising it to what the configuration needs takes nothing from anyone. The hard limit is
 * the administrator's, and stays. */
long fd_limit_raise(long wanted)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)wanted &&
        rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)wanted
                          ? rl.rlim_max
                          : (rlim_t)wanted;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > LONG_MAX ? LONG_MAX : (long)rl.rlim_cur;
}

/* As many connections as MAX_CONNS, or as the open-files limit leaves room for (raised to
 * its hard limit when needed): an accept that fails for want of descriptors would leave
 * the listen socket readable and the worker spinning. */
int conn_table_size(void)
{
    long cur = fd_limit_raise(MAX_CONNS + CONN_FD_RESERVE);
    if (cur >= MAX_CONNS + CONN_FD_RESERVE)
        return MAX_CONNS;
    return cur > CONN_FD_RESERVE + 8 ? (int)(cur - CONN_FD_RESERVE) : 8;
}

/* ---- requests waiting for a worker of their tenant (tenant.queue_wait) ------------------ */

/* The limits' wake-up is watched only while this worker holds a waiting request: the others
 * are not woken for nothing. */
static void watch_wake(worker *w, bool on)
{
    int fd = limits_wake_fd(w->args->lim);
    if (fd < 0 || on == w->wake_watched)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = WAKE_TAG};
    if (epoll_ctl(w->ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, on ? &ev : NULL) == 0 || !on)
        w->wake_watched = on;
}

void conn_wait_begin(worker *w, struct conn *c, int64_t id, int cap, int64_t until_ms)
{
    c->wait_tenant = id;
    c->wait_cap = cap;
    c->wait_until_ms = until_ms;
    c->wait_seq = ++w->wait_seq;
    w->nwaiting++;
    watch_wake(w, true);
    limits_wait(w->args->lim, id, 1);
}

void conn_unwait(worker *w, struct conn *c)
{
    if (c->wait_tenant == 0)
        return;
    limits_wait(w->args->lim, c->wait_tenant, -1);
    c->wait_tenant = 0;
    if (--w->nwaiting <= 0) {
        w->nwaiting = 0;
        watch_wake(w, false);
    }
}

/* A request of some tenant ended (the limits' wake-up): of the requests waiting here, let
 * through as many of each tenant as its cap has room for now, those waiting longest first.
 * They are marked ready and go through serve_conn, which claims the room (limits_try) or,
 * when another worker's request took it first, leaves them waiting. */
void conn_wait_wake(worker *w)
{
    int fd = limits_wake_fd(w->args->lim);
    uint64_t v;
    if (fd >= 0)
        (void)!read(fd, &v, sizeof(v));   /* the count is not used: only the edge */
    int64_t seen[8];
    int nseen = 0;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        int64_t id = c->wait_tenant;
        if (id == 0 || c->ready)
            continue;
        bool done = false;
        for (int j = 0; j < nseen && !done; j++)
            done = seen[j] == id;
        if (done)
            continue;
        if (nseen < (int)TN_ARRAY_LEN(seen))
            seen[nseen++] = id;
        for (int room = limits_free(w->args->lim, id, c->wait_cap); room > 0; room--) {
            struct conn *first = NULL;
            for (int k = 0; k < w->nconns; k++) {
                struct conn *o = &w->conns[k];
                if (o->wait_tenant == id && !o->ready &&
                    (first == NULL || o->wait_seq < first->wait_seq))
                    first = o;
            }
            if (first == NULL)
                break;
            mark_ready(w, first);
        }
    }
}
