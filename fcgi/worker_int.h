/*
 * worker_int.h — what the files of a worker share (fcgi/worker.c, conn.c, handoff.c,
 * serve.c, reqlog.c, route.c only).
 *
 * Shape: worker.c owns the process (signals, set-up, the loop, leaving); conn.c the
 * connection table; handoff.c passing connections to other workers and the thread that does
 * it while a request runs; serve.c one request (the pre-check, libfcgi, the handlers, the
 * answer); reqlog.c the access-log line; route.c fcgi's own request handlers and what the
 * worker offers every handler. One worker per process: its state is one struct (below),
 * static in worker.c, and the few words a signal handler reads are plain globals.
 *
 * Must not: be included outside those files.
 */
#ifndef TN_FCGI_WORKER_INT_H
#define TN_FCGI_WORKER_INT_H

#include <fcgiapp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "fcgi/accesslog.h"
#include "fcgi/app.h"
#include "fcgi/status.h"
#include "fcgi/worker.h"
#include "tenancy/chain.h"
#include "tenancy/handler.h"
#include "tenancy/request.h"

#define MAX_CONNS 1024      /* connections one worker holds at most (fewer if RLIMIT_NOFILE) */
#define CONN_FD_RESERVE 64  /* descriptors besides the connections and the storage pool: logs,
                               the app's files, the registry */
#define PEEK_SLACK 16384   /* record headers and padding around max_params */
#define LISTEN_TAG UINT64_MAX
#define HANDOFF_TAG (UINT64_MAX - 1)
#define SHARD_TAG (UINT64_MAX - 2)
#define WAKE_TAG (UINT64_MAX - 3)
#define INBOX_TAG (UINT64_MAX - 4)
#define PEEK_ENV_MAX 512   /* params of a request looked at before it is read (queue_wait) */

struct conn {
    int fd;
    bool kept;            /* served a request before (FCGI_KEEP_CONN) */
    bool ready;           /* epoll said readable (edge-triggered) and we have not looked */
    bool registered;      /* in the epoll set (added only when it has to wait) */
    bool serving;         /* a request of it is being served: not to be released */
    bool rcvtimeo;        /* SO_RCVTIMEO set (see arm_read_timeout in serve.c) */
    int64_t deadline_ms;  /* close when idle (or incomplete) past this */
    int64_t req_start_ms; /* first byte of a request not yet complete (0: none) */
    uint64_t ready_seq;   /* when it became ready, in the order epoll reported it */
    /* tenant.queue_wait: its request, left unread, waits for a worker of this tenant */
    int64_t wait_tenant;  /* 0: not waiting */
    int wait_cap;         /* the tenant's cap in workers when it began to wait */
    int64_t wait_until_ms;
    uint64_t wait_seq;    /* the order the waiting ones began to wait in */
    /* tenant.affinity: it came through this worker's inbox and its request has not been
     * looked at yet (counted in the slot's affine_pending) */
    bool routed;
    /* its next request is served here whatever its tenant: it came through this worker's
     * inbox, so this is that tenant's home */
    bool stay;
    /* 1 + the number of a busy worker that passed it on (0: none): its next request is not
     * sent back there */
    uint16_t avoid;
};

/* An app this worker loaded: the one at the root (apps[0]) or mount i's (apps[1 + i]). A
 * module mounted twice is one module in the process (dlopen shares it): it is initialised
 * once, by its first entry (owner), and its entries serve through that entry's chain_app, so
 * the stages its init added run for each of its mounts. */
typedef struct worker_app {
    tn_app_module mod;    /* mod.app NULL: no app here (no root app) */
    chain_app capp;
    const chain_app *serve;   /* its own capp, or its owner's */
    const char *path;
    const char *label;        /* for log lines: "app" or "mount.NAME" */
    bool owner;
} worker_app;

typedef struct worker {
    const worker_args *args;
    const tn_config *cfg;
    scoreboard *sb;
    sb_slot *slot;
    worker_app apps[1 + TN_MAX_MOUNTS];   /* [0] the root app, [1 + i] cfg->mounts.m[i]'s */
    status_app status_apps[1 + TN_MAX_MOUNTS];   /* the loaded ones, for status and metrics */
    int nstatus_apps;
    int ep;
    pthread_mutex_t conns_mu;   /* the table: held by the main thread except in serve_one */
    struct conn conns[MAX_CONNS];
    int nconns;
    int max_conns;
    bool intake_paused;    /* table full: listen and handoff sockets out of the epoll set */
    int nwaiting;          /* connections whose request waits for a worker of its tenant */
    uint64_t wait_seq;     /* the last conn.wait_seq given */
    bool wake_watched;     /* the limits' wake-up eventfd is in the epoll set */
    bool leaving;          /* the loop ended: a waiting request is passed on, not held */
    int nice_base;         /* the worker's nice value, and the one it takes while serving a */
    int nice_heavy;        /* tenant that wants more than its share (== nice_base: off) */
    size_t peek_len;       /* what the last pre-check saw */
    struct peek_env {      /* a request's params before it is read (serve.c, admit_early) */
        unsigned char *raw;
        char *text;
        char *env[PEEK_ENV_MAX];
        arena *arena;
        buf headers, out;
    } pe;
    FCGX_Request fx;
    arena *req_arena;
    buf headers, out, line;
    unsigned char *peek;   /* max_params + PEEK_SLACK: room for every checked param */
    size_t peek_size;
    uint64_t served;
    uint64_t max_requests;
    bool recycled;         /* the loop ended at max_requests: the master replaces this worker */
    uint64_t req_counter;
    uint64_t ready_seq;    /* the last conn.ready_seq given */
    alog *alog;            /* the access log (NULL: off) */
    uint32_t log_gen;
    int64_t idle_since_ms;
    int64_t balance_hold_ms;  /* handoff_balance passed some: it passes none and takes
                                 none until then */
    bool handoff_out;         /* the handoff socket is out of the epoll set meanwhile */
    /* tenant.affinity: the worker numbers that may be a tenant's home (0: this worker sends
     * none), this worker's inbox (-1: none), and the live workers among those numbers, read
     * from the scoreboard at most every AFFINITY_LIVE_MS */
    int affinity_n;
    int inbox_fd;
    int nhomes;
    uint8_t homes[TN_AFFINITY_MAX];
    uint16_t home_slot[TN_AFFINITY_MAX];   /* the scoreboard slot of homes[i] */
    int64_t homes_until_ms;
    chain_storage storage_seen;   /* the pool's counts as last added to the scoreboard's */
    uint64_t storage_uses;        /* chain_storage_uses() then */
    bool crowd_told;              /* it set the scoreboard's crowded_generation */
    int64_t now_ns;        /* the clock as of the last read: after a wait, after a request */
    sigset_t wait_mask;    /* the mask while in epoll_pwait: stop signals unblocked */
} worker;

/* ---- worker.c: what the SIGALRM handler needs, written before a request's bytes are read */

extern volatile sig_atomic_t alarm_fd;
extern volatile sig_atomic_t alarm_may_answer;
extern volatile sig_atomic_t alarm_armed;
extern unsigned char alarm_reply[256];
extern volatile sig_atomic_t alarm_reply_len;
extern alog *volatile alarm_alog;   /* its gathered lines are written before the exit */
/* The master died while a request was being set up (see on_master_gone). */
extern volatile sig_atomic_t master_gone;
void arm_master_gone_timer(void);

/* ---- conn.c: the connection table ----------------------------------------------------- */

static inline struct conn *conn_find(worker *w, int fd)
{
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].fd == fd)
            return &w->conns[i];
    return NULL;
}

/* A request (or the peer's close) is waiting on c: it queues behind the ones already waiting. */
static inline void mark_ready(worker *w, struct conn *c)
{
    if (!c->ready) {
        c->ready = true;
        c->ready_seq = ++w->ready_seq;
    }
}

void conn_unwait(worker *w, struct conn *c);
void affinity_unqueue(worker *w, struct conn *c);

/* Drop a connection from the table. Its descriptor is closed by the caller (or already);
 * closing removes it from the epoll set, so no EPOLL_CTL_DEL is needed. */
static inline void conn_forget(worker *w, struct conn *c)
{
    if (c->wait_tenant != 0)
        conn_unwait(w, c);
    if (c->routed)
        affinity_unqueue(w, c);
    *c = w->conns[--w->nconns];
}

void conn_close_fd(const worker *w, int fd, bool request_done);
void conn_close(worker *w, struct conn *c);
void conn_drop(worker *w, struct conn *c);
int64_t conn_header_deadline(const worker *w, int64_t start_ms);
bool conn_register(worker *w, struct conn *c);
struct conn *conn_add(worker *w, int fd, int64_t now);
bool conn_has_input(int fd);
bool conn_accept(worker *w, int lfd, int64_t now);
struct conn *conn_oldest_ready(worker *w);
void conn_wait_begin(worker *w, struct conn *c, int64_t id, int cap, int64_t until_ms);
void conn_wait_wake(worker *w);
void conn_set_intake(worker *w);
int conn_table_size(void);

/* ---- handoff.c: passing connections on ----------------------------------------------- */

bool conn_pass(worker *w, struct conn *c, int sock, uint16_t busy_from);
bool conn_hand_off(worker *w, struct conn *c, bool busy);
/* How long a worker that passed connections to even out the pool leaves the handoff socket
 * out of its epoll set, and passes no more (handoff_balance). */
#define BALANCE_HOLD_MS 2
bool handoff_balance(worker *w);
void handoff_resume(worker *w, int64_t now);
void handoff_publish_held(worker *w);
bool handoff_start_thread(worker *w);
void handoff_take(worker *w, int64_t now);
struct conn *conn_take_passed(worker *w, int fd, const handoff_msg *msg, int64_t now);
bool handoff_will_be_taken(const worker *w, const struct conn *c);

/* ---- affinity.c: tenant.affinity ------------------------------------------------------- */

/* How long the list of live home workers is trusted before the scoreboard is read again. */
#define AFFINITY_LIVE_MS 50
/* A tenant's home takes its request unless it has this many more connections sent to it and
 * not yet looked at than the worker the request arrived at: a tenant busier than one worker
 * spills over to the others instead of queueing behind its home. */
#define AFFINITY_SLACK 8
void affinity_setup(worker *w);
int affinity_home(const uint8_t *homes, int n, int64_t id);
bool affinity_send_home(worker *w, struct conn *c, int64_t id, int avoid, int64_t now);
void affinity_take(worker *w, int64_t now);

/* ---- reqlog.c: the access log ----------------------------------------------------------- */

void reqlog_open(worker *w);
void reqlog_check_reopen(worker *w);
void reqlog_line(worker *w, const tn_request *r, int status, int64_t us);

/* ---- serve.c: one request --------------------------------------------------------------- */

void serve_conn(worker *w, struct conn *c, int64_t now);

/* ---- route.c: fcgi's own handlers (fcgi/route.h), what the worker offers every handler - */

/* The worker's side of a handler's environment (status document, pending id). */
void route_host_env(worker *w, tn_handler_env *env);

#endif
