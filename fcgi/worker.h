/*
 * worker.h — one worker process: accept, check, read, run the chain, answer, repeat.
 *
 * A worker is forked by the master and never returns to it. It loads the app (so the
 * master never runs app code), then serves one request at a time from the connections it
 * holds: the shared listen socket (woken alone thanks to EPOLLEXCLUSIVE), connections it
 * accepted that have not spoken yet, and FastCGI connections kept by the web server between
 * requests. None of those can pin it: a silent or idle connection waits in the worker's
 * epoll set with a deadline while the worker keeps accepting and serving others.
 */
#ifndef TN_FCGI_WORKER_H
#define TN_FCGI_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fcgi/config.h"
#include "fcgi/listen.h"
#include "fcgi/scoreboard.h"
#include "tenancy/events.h"
#include "tenancy/limits.h"

/* Exit codes the master interprets (anything else, or a signal, is a crash). */
enum {
    WORKER_EXIT_OK = 0,       /* recycled, idle, or asked to stop */
    WORKER_EXIT_INIT = 2,     /* the app failed to load or init: do not spin respawning */
    WORKER_EXIT_TIMEOUT = 3,  /* request_timeout fired: killed itself after answering 504 */
    WORKER_EXIT_SETUP = 4     /* the environment is broken (privileges, epoll) */
};

typedef struct worker_args {
    const tn_config *cfg;
    scoreboard *sb;
    limits *lim;            /* shared per-tenant counters */
    event_log *events;      /* the host's event log (shared) */
    const tn_listener *lis;
    int slot;               /* scoreboard slot owned by this worker */
    int index;              /* worker number within its generation */
    unsigned generation;
    pid_t master_pid;
    int shard;              /* the shard socket it serves beside the main one (-1: none) */
    int shard_fd;
    int nclose;             /* master-only descriptors to close in the child: the master's own, */
    int close_fds[4 + 3 * (TN_MAX_SHARDS + 1)];   /* other listeners, other shards */
    int wake_fd;            /* write one byte here once the app is ready (wakes the master) */
    int handoff[2];         /* kept connections passed between workers: send on [0], receive
                             * on [1]; shared by all workers (-1: none) */
    int hub_sock;           /* requests handed to the stream hub go here (-1: none) */
    /* tenant.affinity: worker number i's inbox, a datagram socket pair (send on [0], the
     * worker numbered i of any generation receives on [1]); ninbox of them (0: none) */
    const int (*inbox)[2];
    int ninbox;
} worker_args;

/* What travels with a passed connection (SCM_RIGHTS over the handoff socket): whether it
 * was kept (or is new, its first request not served yet), and when the first byte of a
 * request still incomplete arrived (0: none), so that request_timeout keeps counting from
 * there in the worker that takes it (the monotonic clock is the machine's). Nothing of the
 * stream itself: precheck only peeks. */
typedef struct handoff_msg {
    char tag;   /* 'k' kept, 'n' new */
    /* 1 + the number of the worker that passed it because a request of its own ran long (0:
     * none): tenant.affinity does not send its next request back there */
    uint16_t busy_from;
    int64_t req_start_ms;
} handoff_msg;

/* Pass fd (the sender keeps its own copy: close it after) — false when the socket's queue
 * is full or there is none. Receive one: its descriptor, or -1 when none is waiting. */
bool handoff_send(int sock, int fd, const handoff_msg *msg);

/* The SCM_RIGHTS pass under both (and under the stream hub's hand-off): send fd with len
 * bytes of msg, without blocking (sendmsg's result); receive one (recvmsg's result, *fd -1
 * when none came with it). */
ssize_t fd_pass_send(int sock, int fd, const void *msg, size_t len);
ssize_t fd_pass_recv(int sock, void *msg, size_t len, int *fd);
int handoff_recv(int sock, handoff_msg *msg);

/* Become `user` (and `group`) when started as root: the workers and the stream hub do.
 * TN_OK, or TN_ERR (logged). */
int worker_drop_privileges(const tn_config *cfg);

/* Let this process open `wanted` file descriptors: the soft RLIMIT_NOFILE raised to that,
 * or to the hard limit when it is lower (never lowered). Returns the soft limit now in
 * force (LONG_MAX: none). A worker and a job worker call it before their storage pool and
 * connection table are made, since both size themselves from the limit. */
long fd_limit_raise(long wanted);

/* Run a worker; never returns. */
TN_NORETURN void worker_main(const worker_args *a);

#endif
