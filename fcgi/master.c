/*
 * master.c — the supervisor (see master.h).
 *
 * States. STARTING (the first generation is loading its app), RUNNING, RELOADING (a new
 * generation is starting beside the old one, which keeps serving), STOPPING. Transitions:
 *   STARTING  -> RUNNING    when every first worker reports its app ready
 *   STARTING  -> exit 1     when a first worker fails to load or init the app
 *   RUNNING   -> RELOADING  on SIGHUP/SIGUSR2 with a valid new configuration
 *   RELOADING -> RUNNING    when the new workers are ready (old ones are then retired with
 *                           SIGQUIT: they finish their request and exit), or when one of them
 *                           fails or the stop_timeout passes (the new generation is killed
 *                           and the old one simply continues: a rollback)
 *   any       -> STOPPING   on SIGQUIT (graceful: in-flight requests finish) or SIGTERM/SIGINT
 *                           (same, with stop_timeout as the deadline; a second one kills)
 *
 * Signals arrive as bytes on the self-pipe (signals.c); this loop does all the work. Children
 * are reaped in a waitpid(WNOHANG) loop. Respawns back off after crashes, and a crash storm
 * (pm.crash_limit crashes within pm.crash_window) engages a brake that stretches the delay up
 * to pm.respawn_backoff_max; both show in the status.
 *
 * Must not: accept connections, load the app, open tenant storage, or block anywhere but in
 * the one poll() of the loop.
 */
#include "core/first.h"
#include "fcgi/master.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/sched.h"
#include "core/rc.h"
#include "fcgi/handler.h"
#include "fcgi/hub.h"
#include "fcgi/jobworker.h"
#include "fcgi/listen.h"
#include "fcgi/scoreboard.h"
#include "fcgi/sdnotify.h"
#include "fcgi/signals.h"
#include "fcgi/status.h"
#include "fcgi/worker.h"
#include "tenancy/events.h"
#include "tenancy/limits.h"
#include "tenancy/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Each scoreboard slot is a worker slot of the per-tenant limits (limits_enter). */
_Static_assert(SB_SLOTS <= LIMITS_WORKERS, "the limits table needs a slot per worker");

enum mstate { M_STARTING, M_RUNNING, M_RELOADING, M_STOPPING };

typedef struct child {
    pid_t pid;            /* 0: slot unused */
    unsigned generation;
    int index;
    int shard_fd;         /* the shard socket it serves (-1: none) */
    int64_t spawned_ms;
    bool retiring;        /* told to exit (old generation, surplus, stop) */
    int64_t kill_at_ms;   /* SIGKILL when still alive then (0: no deadline) */
    bool killed_timeout;  /* the master killed it for request_timeout */
    bool rolled_back;     /* of a reload's generation that did not start (finish_reload) */
    uint64_t alarm_seq;   /* the request (scoreboard req_seq) it was sent SIGALRM for */
    int64_t alarm_ms;
    uint64_t seen_seq;    /* dynamic: its req_seq when last looked at, and when it last */
    int64_t active_ms;    /* served (or was busy, or started): see manage_pool */
} child;

/* A job worker (jobworker.h): outside the HTTP pool's slots and counts. */
#define JOB_YOUNG_MS 1000   /* a job worker that dies sooner is held back (jobworker_reaped) */
typedef struct jobkid {
    pid_t pid;            /* 0: entry unused */
    unsigned generation;
    int number;           /* 0..pm.jobs-1 within its generation */
    bool retiring;
    int64_t kill_at_ms;
    int64_t spawned_ms;
    bool killed_timeout;  /* the master killed it past its job's timeout */
} jobkid;

#define PARK_MAX 256   /* kept connections the master holds while no ondemand worker runs */

typedef struct master {
    tn_config *cfg;        /* the generation that serves */
    tn_config *pending;    /* the generation being started by a reload */
    tn_listener lis;
    tn_listener pending_lis;  /* when a reload changes `listen` */
    tn_listener old_lis;      /* the previous socket, until its workers are gone */
    scoreboard *sb;
    limits *lim;              /* per-tenant counters shared with the workers */
    event_log *events;        /* the host's event log (tn_publish), shared likewise */
    child kids[SB_SLOTS];
    int sigfd;
    int wake[2];           /* workers write a byte when their app is ready (read end polled) */
    int handoff[2];        /* workers pass connections to each other (handoff.c) */
    /* tenant.affinity: worker number i's inbox (affinity.c), made before the workers that may
     * send to it are forked, kept for the master's life */
    int inbox[TN_AFFINITY_MAX][2];
    int ninbox;
    /* ondemand: kept connections the last worker left (see park_take) */
    int parked[PARK_MAX];
    int64_t parked_until[PARK_MAX];
    int nparked;
    enum mstate state;
    bool fast_stop;
    int64_t stop_deadline;
    int64_t reload_deadline;
    int reload_respawns;   /* workers of the pending generation started again (finish_reload) */
    bool reload_queued;
    unsigned next_generation;
    const char *config_path;
    master_hooks hooks;
    /* spawning */
    int64_t next_spawn_ms;     /* no spawn before (backoff, brake) */
    int spawn_batch;           /* dynamic: doubles each busy tick up to max_spawn_rate */
    int64_t last_spawn_tick;
    int handoff_wait_ms;       /* watch_requests: look again this soon (-1: no need) */
    int ondemand_slot;         /* ondemand: waiting for this child to take the connection */
    uint64_t ondemand_accepted;
    int64_t ondemand_since;
    /* crashes */
    int64_t crash_ring[64];
    int crash_pos;
    int consecutive_crashes;
    int64_t last_full_warn;
    int exit_code;
    /* the registry watcher (PostgreSQL registry only) */
    pid_t watch_pid;
    int64_t watch_next_ms;
    /* the stream hub (hub.h): outside the generations, restarted with backoff */
    int hub[2];                /* hand-offs: workers send on [0], the hub reads [1] */
    pid_t hub_pid;
    int64_t hub_next_ms;       /* no start before */
    int64_t hub_backoff_ms;    /* the delay after the next death */
    int64_t hub_started_ms;
    bool hub_started_once;
    /* the job workers (jobworker.h) */
    jobkid jk[SB_JOB_SLOTS];
    int64_t job_next_ms;       /* no job worker start before (backoff after a death) */
    int64_t job_backoff_ms;
    bool job_host_recovered;   /* the first one was told to recover this host's leases */
    unsigned jobs_idle_generation;   /* said that this generation needs no job worker */
    int norphans;              /* leases of job workers that died holding a job */
    char orphans[JOB_ORPHANS_MAX][48];
    char orphan_why[JOB_ORPHANS_MAX][160];
} master;

static bool child_busy(const scoreboard *sb, int slot)
{
    int st = __atomic_load_n(&sb->slots[slot].state, __ATOMIC_RELAXED);
    return st == SB_READING || st == SB_RUNNING || st == SB_FINISHING;
}

static bool child_idle(const scoreboard *sb, int slot)
{
    int st = __atomic_load_n(&sb->slots[slot].state, __ATOMIC_RELAXED);
    return st == SB_IDLE || st == SB_KEEPALIVE;
}

/* Workers of generation `gen` that are not retiring. */
static int count_gen(const master *m, unsigned gen, int *idle, int *starting)
{
    int n = 0, i_ = 0, s_ = 0;
    for (int i = 0; i < SB_SLOTS; i++) {
        const child *k = &m->kids[i];
        if (k->pid == 0 || k->retiring || k->generation != gen)
            continue;
        n++;
        int st = __atomic_load_n(&m->sb->slots[i].state, __ATOMIC_RELAXED);
        if (st == SB_STARTING)
            s_++;
        else if (child_idle(m->sb, i))
            i_++;
    }
    if (idle)
        *idle = i_;
    if (starting)
        *starting = s_;
    return n;
}

static int alive_children(const master *m)
{
    int n = 0;
    for (int i = 0; i < SB_SLOTS; i++)
        if (m->kids[i].pid != 0)
            n++;
    return n;
}

static int alive_job_workers(const master *m)
{
    int n = 0;
    for (int i = 0; i < SB_JOB_SLOTS; i++)
        if (m->jk[i].pid != 0)
            n++;
    return n;
}

/* ---- spawning ---------------------------------------------------------------------------- */

static int free_slot(const master *m)
{
    for (int i = 0; i < SB_SLOTS; i++)
        if (m->kids[i].pid == 0 && m->sb->slots[i].state == SB_FREE)
            return i;
    return -1;
}

static int next_index(const master *m, unsigned gen)
{
    /* The lowest worker number not used by a live worker of this generation. */
    for (int idx = 0;; idx++) {
        bool used = false;
        for (int i = 0; i < SB_SLOTS && !used; i++)
            used = m->kids[i].pid != 0 && m->kids[i].generation == gen && m->kids[i].index == idx;
        if (!used)
            return idx;
    }
}

/* ---- tenant.affinity's inboxes (affinity.c) ---------------------------------------------- */

/* One inbox per worker number a configuration may give a home, made before any worker of it
 * is forked: every worker can then send to every number. Numbers only grow (a reload that
 * lowers pm.max_children keeps the inboxes; no worker has those numbers to be a home). */
static void inbox_make(master *m, const tn_config *cfg)
{
    if (cfg->listen_shards > 1 || !tenancy_affinity_wanted(&cfg->tenancy))
        return;
    int want = cfg->max_children < TN_AFFINITY_MAX ? cfg->max_children : TN_AFFINITY_MAX;
    while (m->ninbox < want) {
        int *p = m->inbox[m->ninbox];
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p) < 0) {
            log_warn("cannot make the inbox of worker #%d (%m): tenant.affinity sends no "
                     "tenant there", m->ninbox);
            return;
        }
        m->ninbox++;
    }
}

/* In a child that is not a request worker: the inboxes are none of its business. */
static void inbox_close_all(const master *m)
{
    for (int i = 0; i < m->ninbox; i++) {
        close(m->inbox[i][0]);
        close(m->inbox[i][1]);
    }
}

/* An inbox whose number no worker has (a worker left before it took what was sent to it, and
 * none replaced it): what it holds goes to the shared handoff socket, which every worker
 * reads, or is closed when nobody will (no worker at all: the web server retries on another
 * connection). */
static void inbox_sweep(master *m)
{
    if (m->ninbox == 0)
        return;
    bool live[TN_AFFINITY_MAX] = {false};
    for (int i = 0; i < SB_SLOTS; i++) {
        const child *k = &m->kids[i];
        if (k->pid == 0 || k->index < 0 || k->index >= m->ninbox)
            continue;
        int st = __atomic_load_n(&m->sb->slots[i].state, __ATOMIC_RELAXED);
        if (st != SB_EXITING && st != SB_FREE)
            live[k->index] = true;
    }
    for (int i = 0; i < m->ninbox; i++) {
        if (live[i])
            continue;
        handoff_msg msg;
        int fd;
        while ((fd = handoff_recv(m->inbox[i][1], &msg)) >= 0) {
            __atomic_fetch_sub(&m->sb->pool.affine_queued[i], 1, __ATOMIC_RELAXED);
            if (m->handoff[0] < 0 || !handoff_send(m->handoff[0], fd, &msg))
                log_warn("closed a connection sent to worker #%d, which left: the handoff "
                         "socket could not take it", i);
            close(fd);
        }
    }
}

static int spawn(master *m, tn_config *cfg, const tn_listener *lis)
{
    int slot = free_slot(m);
    if (slot < 0) {
        log_error("no free scoreboard slot: cannot start a worker");
        return -1;
    }
    unsigned gen = cfg->generation;
    int index = next_index(m, gen);
    sb_slot *s = sb_slot_at(m->sb, slot);
    memset(s, 0, sizeof(*s));
    s->generation = gen;
    s->index = (uint32_t)index;
    s->started_ns = clock_mono_ns();
    sb_set_state(m->sb, s, SB_STARTING);
    if (slot + 1 > m->sb->pool.slots_used)
        __atomic_store_n(&m->sb->pool.slots_used, slot + 1, __ATOMIC_RELEASE);

    int shard = listen_shard(lis, index);
    int shard_fd = shard >= 0 ? lis->shard_fd[shard] : -1;
    worker_args a = {.cfg = cfg, .sb = m->sb, .lim = m->lim, .events = m->events, .lis = lis,
                     .slot = slot, .index = index, .generation = gen, .master_pid = getpid(),
                     .shard = shard, .shard_fd = shard_fd,
                     .close_fds = {m->sigfd, m->wake[0], m->hub[1]}, .nclose = 3,
                     .wake_fd = m->wake[1], .handoff = {m->handoff[0], m->handoff[1]},
                     .hub_sock = m->hub[0], .inbox = (const int (*)[2])m->inbox,
                     .ninbox = m->ninbox};
    /* The other listeners, and the other shards, are not this worker's to accept on (nor
     * to keep open once the master closes them). */
    const tn_listener *all[] = {&m->lis, &m->pending_lis, &m->old_lis};
    for (size_t i = 0; i < TN_ARRAY_LEN(all); i++) {
        if (all[i]->fd < 0)
            continue;
        if (all[i] != lis && all[i]->fd != lis->fd)
            a.close_fds[a.nclose++] = all[i]->fd;
        for (int k = 0; k < all[i]->nshards; k++)
            if (all[i]->shard_fd[k] != shard_fd)
                a.close_fds[a.nclose++] = all[i]->shard_fd[k];
    }
    s->shard = (int32_t)shard;

    sigset_t old;
    signals_block_all(&old);   /* the child must not run the master's handlers */
    pid_t pid = fork();
    if (pid == 0)
        worker_main(&a);       /* never returns */
    signals_restore(&old);
    if (pid < 0) {
        log_error("fork: %m");
        sb_slot_free(m->sb, s);
        return -1;
    }
    s->pid = pid;
    child *c = &m->kids[slot];
    memset(c, 0, sizeof(*c));
    c->pid = pid;
    c->generation = gen;
    c->index = index;
    c->shard_fd = shard_fd;
    c->spawned_ms = clock_mono_ms();
    c->active_ms = c->spawned_ms;
    c->seen_seq = 0;
    log_debug("started worker %d (generation %u, #%d)", (int)pid, gen, index);
    return slot;
}

static void retire(master *m, int slot, int signo, int64_t deadline_ms)
{
    child *c = &m->kids[slot];
    if (c->pid == 0)
        return;
    c->retiring = true;
    if (deadline_ms && (c->kill_at_ms == 0 || deadline_ms < c->kill_at_ms))
        c->kill_at_ms = deadline_ms;
    kill(c->pid, signo);
}

/* ---- the registry watcher ---------------------------------------------------------------- */

static volatile sig_atomic_t watch_stop;

static void on_watch_stop(int signo)
{
    (void)signo;
    watch_stop = 1;
}

static void spawn_watcher(master *m)
{
    sigset_t old;
    signals_block_all(&old);
    pid_t pid = fork();
    if (pid == 0) {
        signals_reset_child();
        inbox_close_all(m);
        close(m->sigfd);
        close(m->wake[0]);
        close(m->wake[1]);
        const tn_listener *ls[] = {&m->lis, &m->pending_lis, &m->old_lis};
        for (size_t i = 0; i < TN_ARRAY_LEN(ls); i++) {
            if (ls[i]->fd >= 0)
                close(ls[i]->fd);
            for (int k = 0; k < ls[i]->nshards; k++)
                close(ls[i]->shard_fd[k]);
        }
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_watch_stop;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGQUIT, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGHUP, SIG_IGN);
        signal(SIGUSR1, SIG_IGN);
        signals_restore(&old);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        log_set_pid();
        _exit(watch_run(&m->cfg->tenancy, &watch_stop));
    }
    signals_restore(&old);
    if (pid < 0) {
        log_error("fork (registry watcher): %m");
        m->watch_next_ms = clock_mono_ms() + 1000;
        return;
    }
    m->watch_pid = pid;
}

/* ---- the stream hub ----------------------------------------------------------------------- */

/* The limits the hub and the workers read: the serving generation's. */
static void hub_publish_limits(master *m)
{
    sb_hub *h = &m->sb->hub;
    __atomic_store_n(&h->max_per_tenant, m->cfg->stream_max_per_tenant, __ATOMIC_RELAXED);
    __atomic_store_n(&h->max_total, m->cfg->stream_max_total, __ATOMIC_RELAXED);
    __atomic_store_n(&h->heartbeat_ms, m->cfg->stream_heartbeat_ms, __ATOMIC_RELAXED);
    __atomic_store_n(&h->max_buffer, m->cfg->stream_max_buffer, __ATOMIC_RELAXED);
}

static void spawn_hub(master *m)
{
    hub_args a = {.cfg = m->cfg, .sb = m->sb, .events = m->events, .sock = m->hub[1],
                  .pool_sock = m->handoff[0],
                  .master_pid = getpid(),
                  .close_fds = {m->sigfd, m->wake[0], m->wake[1], m->hub[0], m->handoff[1]},
                  .nclose = 5};
    const tn_listener *ls[] = {&m->lis, &m->pending_lis, &m->old_lis};
    for (size_t i = 0; i < TN_ARRAY_LEN(ls); i++) {
        if (ls[i]->fd >= 0)
            a.close_fds[a.nclose++] = ls[i]->fd;
        for (int k = 0; k < ls[i]->nshards; k++)
            a.close_fds[a.nclose++] = ls[i]->shard_fd[k];
    }
    sigset_t old;
    signals_block_all(&old);
    pid_t pid = fork();
    if (pid == 0) {
        inbox_close_all(m);
        hub_main(&a);   /* never returns */
    }
    signals_restore(&old);
    if (pid < 0) {
        log_error("fork (stream hub): %m");
        m->hub_next_ms = clock_mono_ms() + 1000;
        return;
    }
    m->hub_pid = pid;
    m->hub_started_ms = clock_mono_ms();
    if (m->hub_started_once)
        sb_inc(&m->sb->hub.restarts);
    m->hub_started_once = true;
}

/* The hub ended: start another after a delay that doubles while it keeps dying young (up
 * to pm.respawn_backoff_max) and starts again from 100 ms after one that ran a minute. */
static void hub_reaped(master *m, int status)
{
    int64_t now = clock_mono_ms();
    m->hub_pid = 0;
    __atomic_store_n(&m->sb->hub.pid, 0, __ATOMIC_RELEASE);
    /* Whatever it counted died with it: the streams it held are gone. */
    m->sb->hub.subscribers = 0;
    m->sb->hub.bytes_buffered = 0;
    if (m->state == M_STOPPING)
        return;   /* the table goes with the master: clearing it would only fault its pages in */
    memset(m->sb->hub.tenants, 0, sizeof(m->sb->hub.tenants));
    if (now - m->hub_started_ms > 60000 || m->hub_backoff_ms == 0)
        m->hub_backoff_ms = 100;
    m->hub_next_ms = now + m->hub_backoff_ms;
    if (WIFSIGNALED(status))
        log_error("the stream hub died from signal %d (%s); restarting it in %lld ms (its "
                  "clients reconnect)", WTERMSIG(status), strsignal(WTERMSIG(status)),
                  (long long)m->hub_backoff_ms);
    else
        log_warn("the stream hub exited (status %d); restarting it in %lld ms",
                 WEXITSTATUS(status), (long long)m->hub_backoff_ms);
    m->hub_backoff_ms *= 2;
    if (m->hub_backoff_ms > m->cfg->respawn_backoff_max_ms)
        m->hub_backoff_ms = m->cfg->respawn_backoff_max_ms;
}

/* ---- the job workers ------------------------------------------------------------------------- */

/* Every descriptor of the master's that a job worker must not keep. */
static void job_close_fds(const master *m, jobworker_args *a)
{
    int fds[] = {m->sigfd, m->wake[0], m->wake[1], m->hub[0], m->hub[1], m->handoff[0],
                 m->handoff[1]};
    for (size_t i = 0; i < TN_ARRAY_LEN(fds); i++)
        a->close_fds[a->nclose++] = fds[i];
    const tn_listener *all[] = {&m->lis, &m->pending_lis, &m->old_lis};
    for (size_t i = 0; i < TN_ARRAY_LEN(all); i++) {
        if (all[i]->fd >= 0)
            a->close_fds[a->nclose++] = all[i]->fd;
        for (int k = 0; k < all[i]->nshards; k++)
            a->close_fds[a->nclose++] = all[i]->shard_fd[k];
    }
}

static void spawn_jobworker(master *m, tn_config *cfg, int number)
{
    int idx = -1;
    for (int i = 0; i < SB_JOB_SLOTS && idx < 0; i++)
        if (m->jk[i].pid == 0)
            idx = i;
    if (idx < 0)
        return;
    sb_job_slot *s = &m->sb->jobs.slots[idx];
    memset(s, 0, sizeof(*s));
    s->generation = cfg->generation;
    s->state = SBJ_STARTING;
    static jobworker_args a;   /* copied by fork; large */
    memset(&a, 0, sizeof(a));
    a.cfg = cfg;
    a.sb = m->sb;
    a.events = m->events;
    a.index = idx;
    a.generation = cfg->generation;
    a.number = number;
    a.master_pid = getpid();
    job_close_fds(m, &a);
    /* The leases of job workers that died holding a job go to this one. */
    a.norphans = m->norphans;
    memcpy(a.orphans, m->orphans, sizeof(a.orphans));
    memcpy(a.orphan_why, m->orphan_why, sizeof(a.orphan_why));
    a.recover_host = !m->job_host_recovered;

    sigset_t old;
    signals_block_all(&old);
    pid_t pid = fork();
    if (pid == 0) {
        inbox_close_all(m);
        jobworker_main(&a);   /* never returns */
    }
    signals_restore(&old);
    if (pid < 0) {
        log_error("fork (job worker): %m");
        s->state = SBJ_FREE;
        m->job_next_ms = clock_mono_ms() + 1000;
        return;
    }
    m->norphans = 0;
    m->job_host_recovered = true;
    s->pid = pid;
    jobkid *k = &m->jk[idx];
    memset(k, 0, sizeof(*k));
    k->pid = pid;
    k->generation = cfg->generation;
    k->number = number;
    k->spawned_ms = clock_mono_ms();
    log_debug("started job worker %d (generation %u, #%d)", (int)pid, cfg->generation, number);
}

static void retire_jobworker(master *m, int i, int signo, int64_t deadline_ms)
{
    jobkid *k = &m->jk[i];
    if (k->pid == 0)
        return;
    k->retiring = true;
    if (deadline_ms && (k->kill_at_ms == 0 || deadline_ms < k->kill_at_ms))
        k->kill_at_ms = deadline_ms;
    kill(k->pid, signo);
}

/* Whether anything on this host can queue a job: apps queue their tenants' jobs (tenancy on,
 * or a registry named for them), host modules their own (the panel, when it is on). A plain
 * FastCGI host has none, and its job worker would only fail to open a registry it has no
 * use for, and say so every minute. */
static bool jobs_possible(const tn_config *cfg)
{
    return cfg->tenancy.enabled || cfg->tenancy.registry != NULL || handlers_queue_jobs(cfg);
}

/* pm.jobs job workers of the serving generation, each number once. */
static void manage_jobs(master *m, int64_t now)
{
    tn_config *cfg = m->cfg;
    if (now < m->job_next_ms)
        return;
    if (cfg->jobs > 0 && !jobs_possible(cfg)) {
        if (m->jobs_idle_generation != cfg->generation)
            log_info("pm.jobs: no job worker in generation %u: without tenancy, "
                     "registry or the panel nothing here can queue a job",
                     cfg->generation);
        m->jobs_idle_generation = cfg->generation;
        return;
    }
    for (int n = 0; n < cfg->jobs; n++) {
        bool have = false;
        for (int i = 0; i < SB_JOB_SLOTS && !have; i++)
            have = m->jk[i].pid != 0 && !m->jk[i].retiring &&
                   m->jk[i].generation == cfg->generation && m->jk[i].number == n;
        if (!have) {
            spawn_jobworker(m, cfg, n);
            if (m->job_backoff_ms > 0)
                break;   /* one at a time while backing off */
        }
    }
}

static void job_orphan(master *m, const char *lease, const char *why)
{
    if (lease[0] == '\0' || m->state == M_STOPPING)
        return;   /* stopping: the next start recovers this host's leases */
    if (m->norphans == JOB_ORPHANS_MAX) {
        log_warn("job lease %s left to expire (%d recoveries pending already)", lease,
                 JOB_ORPHANS_MAX);
        return;
    }
    snprintf(m->orphans[m->norphans], sizeof(m->orphans[0]), "%s", lease);
    snprintf(m->orphan_why[m->norphans], sizeof(m->orphan_why[0]), "%s", why);
    m->norphans++;
}

/* A job worker ended: why, whether the job it held must run again, and the backoff. */
static void jobworker_reaped(master *m, int i, int status)
{
    jobkid *k = &m->jk[i];
    sb_job_slot *s = &m->sb->jobs.slots[i];
    char lease[48], tenant[64], name[64];
    snprintf(lease, sizeof(lease), "%s", s->lease);
    snprintf(tenant, sizeof(tenant), "%s", s->tenant);
    snprintf(name, sizeof(name), "%s", s->name);
    int64_t job = __atomic_load_n(&s->job_id, __ATOMIC_ACQUIRE);
    int timeout = s->timeout_ms;
    int64_t now = clock_mono_ms();
    bool crash = false;
    char why[160] = "";
    if (WIFEXITED(status) && WEXITSTATUS(status) == JOB_EXIT_OK) {
        log_debug("job worker %d exited", (int)k->pid);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == JOB_EXIT_TIMEOUT) {
        sb_inc(&m->sb->jobs.timeouts);
        tn_errf(why, sizeof(why), TN_TIMEOUT, "timed out after %d ms", timeout);
        log_error("job %lld (%s, tenant %s) timed out after %d ms; its job worker %d exited",
                  (long long)job, name, tenant[0] ? tenant : "(central)", timeout, (int)k->pid);
    } else if (WIFEXITED(status)) {
        crash = true;
        log_error("job worker %d exited with status %d", (int)k->pid, WEXITSTATUS(status));
        tn_errf(why, sizeof(why), TN_ERR, "its job worker exited (status %d)", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (k->killed_timeout) {
            sb_inc(&m->sb->jobs.timeouts);
            tn_errf(why, sizeof(why), TN_TIMEOUT, "timed out after %d ms (killed)", timeout);
        } else {
            crash = !(k->retiring && sig == SIGKILL);
            tn_errf(why, sizeof(why), TN_ERR, "its job worker died (signal %d, %s)", sig,
                    strsignal(sig));
        }
        log_error("job worker %d died from signal %d (%s)%s%s%s", (int)k->pid, sig,
                  strsignal(sig), job ? " while running job " : "", job ? name : "",
                  job ? "" : " between jobs");
    }
    if (job != 0)
        job_orphan(m, lease, why);
    if (crash)
        sb_inc(&m->sb->jobs.crashes);
    /* Only a job worker that dies young is held back (an app whose init fails, a crash at
     * every start): its replacement waits 100 ms, doubling while they keep dying young, up
     * to pm.respawn_backoff_max. One that ran a while is replaced at once: a job that
     * crashes its worker is counted against its own attempts, not against the pool. */
    if (crash && now - k->spawned_ms < JOB_YOUNG_MS) {
        if (m->job_backoff_ms == 0)
            m->job_backoff_ms = 100;
        else if ((m->job_backoff_ms *= 2) > m->cfg->respawn_backoff_max_ms)
            m->job_backoff_ms = m->cfg->respawn_backoff_max_ms;
        m->job_next_ms = now + m->job_backoff_ms;
    } else {
        m->job_backoff_ms = 0;
    }
    memset(k, 0, sizeof(*k));
    memset(s, 0, sizeof(*s));
}

/* A job past its timeout whose worker did not leave (its own timer is the first line):
 * killed two seconds later; and a retiring one past its deadline. */
static void watch_jobs(master *m, int64_t now_ms)
{
    int64_t now_ns = clock_mono_ns();
    for (int i = 0; i < SB_JOB_SLOTS; i++) {
        jobkid *k = &m->jk[i];
        if (k->pid == 0)
            continue;
        if (k->kill_at_ms && now_ms >= k->kill_at_ms) {
            kill(k->pid, SIGKILL);
            k->kill_at_ms = 0;
            continue;
        }
        sb_job_slot *s = &m->sb->jobs.slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SBJ_RUNNING || k->killed_timeout)
            continue;
        int64_t ran = (now_ns - __atomic_load_n(&s->job_start_ns, __ATOMIC_RELAXED)) / 1000000;
        if (s->timeout_ms > 0 && ran > (int64_t)s->timeout_ms + 2000) {
            k->killed_timeout = true;
            kill(k->pid, SIGKILL);
        }
    }
}

/* ---- crashes and reaping ----------------------------------------------------------------- */

static int crashes_in_window(const master *m, int64_t now)
{
    int n = 0;
    for (size_t i = 0; i < TN_ARRAY_LEN(m->crash_ring); i++)
        if (m->crash_ring[i] && now - m->crash_ring[i] <= m->cfg->crash_window_ms)
            n++;
    return n;
}

static void note_crash(master *m, int64_t now)
{
    m->crash_ring[m->crash_pos] = now;
    m->crash_pos = (m->crash_pos + 1) % (int)TN_ARRAY_LEN(m->crash_ring);
    m->consecutive_crashes++;
    sb_inc(&m->sb->pool.crashes);
    int64_t delay = 50LL << (m->consecutive_crashes > 16 ? 16 : m->consecutive_crashes - 1);
    int in_window = crashes_in_window(m, now);
    bool braking = in_window >= m->cfg->crash_limit;
    if (braking) {
        delay = 1000LL << (m->consecutive_crashes > 16 ? 16 : m->consecutive_crashes / 4);
        if (!__atomic_load_n(&m->sb->pool.brake, __ATOMIC_RELAXED))
            log_error("crash storm: %d workers crashed within %lld ms; respawn brake engaged "
                      "(respawning at most every %lld ms)", in_window,
                      (long long)m->cfg->crash_window_ms, (long long)m->cfg->respawn_backoff_max_ms);
        __atomic_store_n(&m->sb->pool.brake, 1, __ATOMIC_RELAXED);
    }
    if (delay > m->cfg->respawn_backoff_max_ms)
        delay = m->cfg->respawn_backoff_max_ms;
    m->next_spawn_ms = now + delay;
}

/* Once pm.crash_window has passed without a crash, the brake is released and the backoff
 * starts again from its shortest delay: crashes far apart are not "in a row". (Resetting only
 * when a worker exits cleanly let sporadic crashes add up over hours, until every respawn
 * waited pm.respawn_backoff_max with the pool a worker short.) */
static void update_brake(master *m, int64_t now)
{
    bool brake = __atomic_load_n(&m->sb->pool.brake, __ATOMIC_RELAXED);
    if ((!brake && m->consecutive_crashes == 0) || crashes_in_window(m, now) != 0)
        return;
    m->consecutive_crashes = 0;
    if (brake) {
        __atomic_store_n(&m->sb->pool.brake, 0, __ATOMIC_RELAXED);
        log_info("respawn brake released: no crash within pm.crash_window");
    }
}

static void describe_request(const sb_slot *s, char *out, size_t n, int64_t now_ns)
{
    if (s->req_start_ns == 0) {
        snprintf(out, n, "between requests");
        return;
    }
    if (s->method[0] == '\0') {
        snprintf(out, n, "reading a request (%lld ms)",
                 (long long)((now_ns - s->req_start_ns) / 1000000));
        return;
    }
    snprintf(out, n, "%s %s (req=%s%s%s, %lld ms)", s->method, s->uri, s->req_id,
             s->tenant[0] ? ", tenant=" : "", s->tenant,
             (long long)((now_ns - s->req_start_ns) / 1000000));
}

static void reap(master *m)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int slot = -1;
        for (int i = 0; i < SB_SLOTS; i++)
            if (m->kids[i].pid == pid)
                slot = i;
        if (pid == m->hub_pid) {
            hub_reaped(m, status);
            continue;
        }
        int ji = -1;
        for (int i = 0; i < SB_JOB_SLOTS && ji < 0; i++)
            if (m->jk[i].pid == pid)
                ji = i;
        if (ji >= 0) {
            jobworker_reaped(m, ji, status);
            continue;
        }
        if (pid == m->watch_pid) {
            m->watch_pid = 0;
            m->watch_next_ms = clock_mono_ms() + 1000;
            if (m->state != M_STOPPING)
                log_warn("the registry watcher exited (status %d); restarting it", status);
            continue;
        }
        if (slot < 0)
            continue;
        child *c = &m->kids[slot];
        sb_slot *s = sb_slot_at(m->sb, slot);
        sb_slot snap;
        sb_slot_read(s, &snap);
        int64_t now = clock_mono_ms();
        char what[400];
        describe_request(&snap, what, sizeof(what), clock_mono_ns());
        bool was_ready = snap.ready;
        unsigned gen = c->generation;
        bool crash = false;
        char how[200];   /* for a pending audit entry: how the worker ended */
        snprintf(how, sizeof(how), "worker %d ended", (int)pid);

        if (WIFEXITED(status)) {
            int code = WEXITSTATUS(status);
            snprintf(how, sizeof(how), "worker %d exited (status %d) before the statement "
                     "finished", (int)pid, code);
            if (code == WORKER_EXIT_OK) {
                log_debug("worker %d exited", (int)pid);
                if (was_ready && m->consecutive_crashes > 0 && snap.requests > 0)
                    m->consecutive_crashes = 0;
            } else if (code == WORKER_EXIT_TIMEOUT) {
                sb_inc(&m->sb->pool.timeouts);
                log_error("request timed out after request_timeout (%lld ms): %s; worker %d "
                          "answered 504 and exited", (long long)m->cfg->request_timeout_ms, what,
                          (int)pid);
                snprintf(how, sizeof(how), "worker %d stopped at request_timeout (%lld ms): "
                         "it answered 504 and exited", (int)pid,
                         (long long)m->cfg->request_timeout_ms);
            } else if (code == WORKER_EXIT_INIT) {
                log_error("worker %d (generation %u) could not start the app", (int)pid, gen);
                crash = true;
            } else {
                log_error("worker %d exited with status %d while %s", (int)pid, code, what);
                crash = true;
            }
        } else if (WIFSIGNALED(status)) {
            int sig = WTERMSIG(status);
            snprintf(how, sizeof(how), "worker %d died (signal %d, %s)%s", (int)pid, sig,
                     strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
            if (c->killed_timeout) {
                sb_inc(&m->sb->pool.timeouts);
                log_error("request timed out: %s; worker %d killed", what, (int)pid);
                snprintf(how, sizeof(how), "worker %d killed at request_timeout (signal %d)",
                         (int)pid, sig);
            } else if (c->rolled_back && sig == SIGKILL) {
                log_info("worker %d of generation %u, which was rolled back, stopped while %s",
                         (int)pid, gen, what);
                snprintf(how, sizeof(how), "worker %d stopped: its generation was rolled back",
                         (int)pid);
            } else if (c->retiring && sig == SIGKILL) {
                log_warn("worker %d did not exit in time and was killed while %s", (int)pid, what);
                snprintf(how, sizeof(how), "worker %d killed (signal %d): it did not stop in "
                         "time", (int)pid, sig);
            } else {
                log_error("worker %d died from signal %d (%s)%s while %s", (int)pid, sig,
                          strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "", what);
                crash = true;
            }
        }
        /* A console statement the worker never finished: its audit entry would otherwise
         * say "running" for ever. The slot says which; the hook knows the audit log. */
        if (snap.audit_id[0] != '\0' && m->hooks.audit_died != NULL)
            m->hooks.audit_died(m->cfg, snap.audit_id, snap.req_id, how);
        /* A worker that died mid-request leaves its tenant's in-flight count behind. */
        if (snap.tenant_id != 0)
            limits_leave(m->lim, slot, snap.tenant_id, 0);
        limits_release_worker(m->lim, slot);   /* a claim made before its request was read */
        bool startup_failure = !was_ready;
        bool was_retiring = c->retiring;
        memset(c, 0, sizeof(*c));
        sb_slot_free(m->sb, s);

        if (m->state == M_STARTING && startup_failure && crash) {
            log_error("the first workers cannot start; stopping");
            m->exit_code = 1;
            m->state = M_STOPPING;
            m->fast_stop = true;
            m->stop_deadline = now;
            for (int i = 0; i < SB_SLOTS; i++)
                if (m->kids[i].pid)
                    retire(m, i, SIGKILL, now);
            for (int i = 0; i < SB_JOB_SLOTS; i++)
                if (m->jk[i].pid)
                    retire_jobworker(m, i, SIGKILL, now);
            continue;
        }
        /* A worker of the new generation that crashes or fails, before it is ready or after
         * (a new build that dies on its first requests), fails the reload (handled in
         * maintain()): the old generation goes on serving. One that was killed (SIGKILL: an
         * operator, the OOM killer) or left of itself (pm.max_requests) says nothing about
         * the new configuration: finish_reload starts another in its place. */
        bool replaceable = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                           (WIFEXITED(status) && WEXITSTATUS(status) == WORKER_EXIT_OK);
        if (m->state == M_RELOADING && m->pending && gen == m->pending->generation &&
            !replaceable && !was_retiring) {
            m->reload_deadline = 0;
            if (startup_failure)
                continue;
        }
        if (crash && m->state != M_STOPPING)
            note_crash(m, now);
        if (gen == m->cfg->generation && !was_retiring && m->state != M_STOPPING)
            sb_inc(&m->sb->pool.respawns);
    }
}

/* ---- timeouts and slow requests ---------------------------------------------------------- */

/* Wake a worker's handoff thread (see handoff.c): its request has run keepalive_handoff_after,
 * it holds other connections or some wait in the listen queue, and another worker is idle to
 * take them. Once per request. */
static void ask_handoff(sb_slot *s)
{
    __atomic_store_n(&s->handoff_seq, (uint32_t)s->req_seq, __ATOMIC_RELEASE);
    syscall(SYS_futex, &s->handoff_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Connections waiting in the queue of listen socket fd (-1: none)? */
static bool queue_pending(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The main listen queue's: *cache -1 not looked yet (looked at once per watch_requests, and
 * only when a request has run keepalive_handoff_after). A worker's own shard queue, which
 * no other worker accepts on, is looked at for it alone (queue_pending). */
static bool listen_pending(master *m, int *cache)
{
    if (*cache < 0)
        *cache = queue_pending(m->lis.fd);
    return *cache > 0;
}

/* Returns how soon the loop must look again for the handoff (-1: no need): while a worker
 * holds kept connections, a request may start on it at any moment, so every
 * keepalive_handoff_after at least (a request is then asked about between one and two
 * times keepalive_handoff_after after it started). */
static int watch_requests(master *m, int64_t now_ms)
{
    int64_t now_ns = clock_mono_ns();
    const tn_config *cfg = m->cfg;
    int64_t handoff_after = cfg->keepalive_timeout_ms > 0 ? cfg->keepalive_handoff_after_ms : 0;
    int next = -1;
    int lis = -1;   /* listen_pending's answer, once looked */
    /* Only an idle worker can take what a busy one passes: without one, nothing to ask. */
    bool idle = handoff_after > 0 &&
                __atomic_load_n(&m->sb->pool.idle_workers, __ATOMIC_RELAXED) > 0;
    for (int i = 0; i < SB_SLOTS; i++) {
        child *c = &m->kids[i];
        if (c->pid == 0)
            continue;
        if (c->kill_at_ms && now_ms >= c->kill_at_ms) {
            kill(c->pid, SIGKILL);
            c->kill_at_ms = 0;
            continue;
        }
        sb_slot *s = sb_slot_at(m->sb, i);
        /* A request of a tenant that wants more than its share (it waited, or others of
         * that tenant wait: tenant.queue_wait) is one of a tenant that keeps the pool busy,
         * and often a slow one: the other tenants' requests that come on the connections its
         * worker holds are passed on after a tenth of keepalive_handoff_after. */
        int64_t after = handoff_after;
        if (after > 0 && __atomic_load_n(&s->heavy, __ATOMIC_RELAXED))
            after = after / 10 > 0 ? after / 10 : 1;
        if (handoff_after > 0 && (next < 0 || after < next) &&
            (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == SB_KEEPALIVE ||
             (child_busy(m->sb, i) && (__atomic_load_n(&s->held, __ATOMIC_RELAXED) > 0 || idle))))
            next = (int)after;
        if (!child_busy(m->sb, i))
            continue;
        int64_t start = __atomic_load_n(&s->req_start_ns, __ATOMIC_ACQUIRE);
        if (start == 0)
            continue;
        int64_t ran_ms = (now_ns - start) / 1000000;
        /* It holds other connections, or new ones wait in the listen queue while a worker
         * is idle (see hand_off_pending_accepts in handoff.c). */
        if (handoff_after > 0 &&
            __atomic_load_n(&s->handoff_seq, __ATOMIC_RELAXED) != (uint32_t)s->req_seq &&
            (__atomic_load_n(&s->held, __ATOMIC_RELAXED) > 0 ||
             (ran_ms >= after && idle &&
              (listen_pending(m, &lis) || queue_pending(c->shard_fd))))) {
            if (ran_ms >= after && idle)
                ask_handoff(s);
            int left = ran_ms >= after ? (int)after : (int)(after - ran_ms);
            if (next < 0 || left < next)
                next = left;
        }
        if (cfg->slow_request_ms > 0 && ran_ms >= cfg->slow_request_ms &&
            s->slow_logged_seq != (uint32_t)s->req_seq) {
            s->slow_logged_seq = (uint32_t)s->req_seq;
            sb_inc(&m->sb->pool.slow);
            sb_slot snap;
            sb_slot_read(s, &snap);
            char what[400];
            describe_request(&snap, what, sizeof(what), now_ns);
            log_warn("slow request (over slow_request, %lld ms): %s in worker %d, state %s",
                     (long long)cfg->slow_request_ms, what, (int)c->pid, sb_state_name(snap.state));
        }
        /* request_timeout: the worker answers 504 and exits on SIGALRM (see worker.c); one
         * that does not (a handler blocking signals, say) is killed two seconds later. */
        if (cfg->request_timeout_ms > 0 && ran_ms >= cfg->request_timeout_ms) {
            if (c->alarm_seq != s->req_seq) {
                c->alarm_seq = s->req_seq;
                c->alarm_ms = now_ms;
                kill(c->pid, SIGALRM);
            } else if (!c->killed_timeout && now_ms - c->alarm_ms >= 2000) {
                c->killed_timeout = true;
                kill(c->pid, SIGKILL);
            }
        }
    }
    return next;
}

/* ---- the process manager ----------------------------------------------------------------- */

static bool may_spawn(master *m, int64_t now) { return now >= m->next_spawn_ms; }

/* ---- ondemand: kept connections while no worker runs -------------------------------------
 * An ondemand pool's last worker leaves on pm.idle_timeout holding connections the web
 * server keeps in its cache. Closing them would race with a request the web server may be
 * writing on one right then (lost, a POST answered 502: see conn.c), so the worker passes
 * them on the handoff socket as to another worker, and with no worker alive the master takes
 * them: it watches them, closes those the web server closes or that stay idle past
 * keepalive_timeout, and when a request arrives on one it starts a worker and passes them
 * all back. The master never reads a byte of them: a one-byte peek tells data from a close. */

static void park_close(master *m, int i)
{
    close(m->parked[i]);
    m->parked[i] = m->parked[m->nparked - 1];
    m->parked_until[i] = m->parked_until[m->nparked - 1];
    m->nparked--;
}

static void park_close_all(master *m)
{
    while (m->nparked > 0)
        park_close(m, m->nparked - 1);
}

static void park_take(master *m, int64_t now)
{
    handoff_msg msg;
    int fd;
    while ((fd = handoff_recv(m->handoff[1], &msg)) >= 0) {
        if (m->nparked == PARK_MAX) {
            log_warn("ondemand: %d kept connections held already; closing one more", PARK_MAX);
            close(fd);
            continue;
        }
        m->parked[m->nparked] = fd;
        m->parked_until[m->nparked++] = now + m->cfg->keepalive_timeout_ms;
    }
}

/* Back to the workers: into the handoff socket, which the next worker reads as it starts. */
static void park_release(master *m)
{
    while (m->nparked > 0) {
        handoff_msg msg;
        memset(&msg, 0, sizeof(msg));   /* padding too: it goes to another process */
        msg.tag = 'k';
        if (!handoff_send(m->handoff[0], m->parked[m->nparked - 1], &msg))
            log_warn("ondemand: cannot pass a kept connection to the new worker: closed");
        park_close(m, m->nparked - 1);
    }
}

/* Look at the parked connections poll reported: closed by the peer (gone), or a request
 * (true: a worker is wanted). Expired ones are closed. */
static bool park_check(master *m, const struct pollfd *pfd, int npolled, int64_t now)
{
    bool wanted = false;
    for (int i = m->nparked - 1; i >= 0; i--) {
        if (i < npolled && pfd[i].fd == m->parked[i] && pfd[i].revents) {
            char b;
            ssize_t n = recv(m->parked[i], &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n > 0) {
                wanted = true;
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                park_close(m, i);
                continue;
            }
        }
        if (now >= m->parked_until[i])
            park_close(m, i);
    }
    return wanted;
}

static void manage_pool(master *m, int64_t now)
{
    tn_config *cfg = m->cfg;
    int idle = 0, starting = 0;
    int total = count_gen(m, cfg->generation, &idle, &starting);

    switch (cfg->pm) {
    case PM_STATIC:
        while (total < cfg->max_children && may_spawn(m, now)) {
            if (spawn(m, cfg, &m->lis) < 0)
                break;
            total++;
            if (m->consecutive_crashes)
                break;   /* one at a time while backing off */
        }
        break;
    case PM_DYNAMIC: {
        /* When each worker last served: a request begun since the last look (its req_seq
         * moved), or one running now. */
        for (int i = 0; i < SB_SLOTS; i++) {
            child *c = &m->kids[i];
            if (c->pid == 0 || c->generation != cfg->generation)
                continue;
            uint64_t seq = __atomic_load_n(&m->sb->slots[i].req_seq, __ATOMIC_RELAXED);
            if (seq != c->seen_seq || !child_idle(m->sb, i)) {
                c->seen_seq = seq;
                c->active_ms = now;
            }
        }
        if (idle + starting < cfg->min_spare) {
            if (total >= cfg->max_children) {
                sb_inc(&m->sb->pool.max_children_reached);
                if (now - m->last_full_warn > 10000) {
                    m->last_full_warn = now;
                    log_warn("all %d workers busy (pm.max_children reached)", total);
                }
                break;
            }
            /* Spawn in doubling batches, at most pm.max_spawn_rate per second. */
            if (now - m->last_spawn_tick >= 1000)
                m->spawn_batch = 1;
            int want = cfg->min_spare - idle - starting;
            if (want > m->spawn_batch)
                want = m->spawn_batch;
            if (want > cfg->max_children - total)
                want = cfg->max_children - total;
            for (int i = 0; i < want && may_spawn(m, now); i++)
                if (spawn(m, cfg, &m->lis) < 0 || m->consecutive_crashes)
                    break;
            m->spawn_batch = m->spawn_batch * 2 > cfg->max_spawn_rate ? cfg->max_spawn_rate
                                                                      : m->spawn_batch * 2;
            m->last_spawn_tick = now;
        } else if (idle > cfg->max_spare) {
            /* Retire the idle worker that has served longest, among those that served nothing
             * for pm.idle_timeout: a worker's caches (the tenants' open files, their catalogs,
             * the lookups) are what make its requests cheap, and a lull between two bursts
             * must not cost them (the next burst would spawn workers that start cold). */
            int best = -1;
            for (int i = 0; i < SB_SLOTS; i++) {
                child *c = &m->kids[i];
                if (c->pid && !c->retiring && c->generation == cfg->generation &&
                    child_idle(m->sb, i) && now - c->active_ms >= cfg->idle_timeout_ms &&
                    (best < 0 || c->spawned_ms < m->kids[best].spawned_ms))
                    best = i;
            }
            if (best >= 0)
                retire(m, best, SIGQUIT, now + cfg->stop_timeout_ms);
        }
        break;
    }
    case PM_ONDEMAND:
        break;   /* driven by the listen socket in the loop */
    }
}

/* ---- reload ------------------------------------------------------------------------------ */

static int initial_workers(const tn_config *cfg)
{
    switch (cfg->pm) {
    case PM_STATIC: return cfg->max_children;
    case PM_DYNAMIC: return cfg->start > 0 ? cfg->start : 1;
    default: return 1;   /* ondemand: one worker proves the app loads, then idles out */
    }
}

static void start_reload(master *m)
{
    if (m->state == M_RELOADING || m->state == M_STARTING) {
        m->reload_queued = true;
        return;
    }
    if (m->state == M_STOPPING)
        return;
    conf_error err;
    tn_config *n = config_load(m->config_path, &err);
    if (n == NULL) {
        char msg[1024];
        conf_error_format(&err, msg, sizeof(msg));
        log_error("reload refused: %s; still running generation %u", msg, m->cfg->generation);
        sb_inc(&m->sb->pool.reload_failures);
        return;
    }
    for (const conf_opt *o = tn_config_table; o->key; o++) {
        if (!(o->flags & CONF_RESTART))
            continue;
        char a[512], b[512];
        conf_format(o, m->cfg, a, sizeof(a));
        conf_format(o, n, b, sizeof(b));
        if (strcmp(a, b) != 0)
            log_warn("reload: %s changed, which takes effect only after a restart", o->key);
    }
    if (listen_same(&m->lis, n) && m->lis.nshards != (n->listen_shards > 1 ? n->listen_shards : 0)) {
        /* The socket stays, with its shards (listen.shards needs a restart): the new
         * generation must be able to serve them. */
        conf_error ce;
        memset(&ce, 0, sizeof(ce));
        if (config_check_shards(n, m->lis.nshards, &ce) != TN_OK) {
            log_error("reload refused: the running socket has %d shards (listen.shards takes "
                      "effect only after a restart): %s; still running generation %u",
                      m->lis.nshards, ce.msg, m->cfg->generation);
            sb_inc(&m->sb->pool.reload_failures);
            config_free(n);
            return;
        }
    }
    if (!listen_same(&m->lis, n)) {
        char e[512];
        if (listen_open(n, &m->pending_lis, e, sizeof(e)) != TN_OK) {
            log_error("reload refused: %s; still running generation %u", e, m->cfg->generation);
            sb_inc(&m->sb->pool.reload_failures);
            config_free(n);
            return;
        }
    }
    n->generation = ++m->next_generation;
    m->pending = n;
    m->state = M_RELOADING;
    m->reload_deadline = clock_mono_ms() + n->stop_timeout_ms;
    m->reload_respawns = 0;
    sd_notifyf("RELOADING=1\nMONOTONIC_USEC=%lld", (long long)(clock_mono_ns() / 1000));
    log_info("reloading: starting generation %u beside generation %u", n->generation,
             m->cfg->generation);
    const tn_listener *lis = m->pending_lis.fd >= 0 ? &m->pending_lis : &m->lis;
    inbox_make(m, n);
    for (int i = initial_workers(n); i > 0; i--)
        if (spawn(m, n, lis) < 0)
            m->reload_deadline = 0;
}

static void finish_reload(master *m, int64_t now)
{
    tn_config *n = m->pending;
    int starting = 0;
    int total = count_gen(m, n->generation, NULL, &starting);
    bool failed = m->reload_deadline == 0 || now >= m->reload_deadline;
    /* A worker of the new generation that was killed (see reap) is started again, as the
     * serving generation's would be; at most as many times as the generation has workers,
     * so that something killing every new worker still ends the reload at its deadline. */
    const tn_listener *plis = m->pending_lis.fd >= 0 ? &m->pending_lis : &m->lis;
    while (!failed && total < initial_workers(n) && m->reload_respawns < initial_workers(n)) {
        if (spawn(m, n, plis) < 0)
            break;
        m->reload_respawns++;
        total++;
        starting++;
    }
    failed = failed || total < initial_workers(n);
    if (!failed && starting > 0)
        return;   /* still loading the app */
    if (failed) {
        /* Those still loading are killed; those already serving (they share the listen
         * socket, so they may hold requests) finish them and leave, like an old generation. */
        for (int i = 0; i < SB_SLOTS; i++) {
            child *k = &m->kids[i];
            if (k->pid == 0 || k->generation != n->generation || k->retiring)
                continue;
            k->rolled_back = true;
            bool ready = __atomic_load_n(&m->sb->slots[i].ready, __ATOMIC_ACQUIRE) != 0;
            if (ready)
                retire(m, i, SIGQUIT, now + n->stop_timeout_ms);
            else
                retire(m, i, SIGKILL, now);
        }
        if (m->pending_lis.fd >= 0)
            listen_close(&m->pending_lis, true);
        log_error("reload rolled back: generation %u did not start (see the errors above); "
                  "still running generation %u", n->generation, m->cfg->generation);
        sb_inc(&m->sb->pool.reload_failures);
        config_free(n);
        m->pending = NULL;
        m->state = M_RUNNING;
        sd_notifyf("READY=1\nSTATUS=reload failed; running generation %u", m->cfg->generation);
        return;
    }
    /* Commit: the new generation serves; the old one finishes its requests and leaves. */
    tn_config *old = m->cfg;
    int64_t grace = (old->request_timeout_ms > 0 ? old->request_timeout_ms : old->stop_timeout_ms) +
                    old->stop_timeout_ms;
    for (int i = 0; i < SB_SLOTS; i++)
        if (m->kids[i].pid && m->kids[i].generation == old->generation && !m->kids[i].retiring)
            retire(m, i, SIGQUIT, now + grace);
    /* The old job workers finish the job in hand (within its timeout) and leave; the new
     * generation's start at the next turn (manage_jobs). */
    for (int i = 0; i < SB_JOB_SLOTS; i++)
        if (m->jk[i].pid && m->jk[i].generation == old->generation && !m->jk[i].retiring)
            retire_jobworker(m, i, SIGQUIT,
                             now + old->tenancy.jobs_timeout_ms + old->stop_timeout_ms);
    if (m->pending_lis.fd >= 0) {
        if (m->old_lis.fd >= 0)
            listen_close(&m->old_lis, true);
        m->old_lis = m->lis;
        m->lis = m->pending_lis;
        m->pending_lis.fd = -1;
        m->pending_lis.nshards = 0;   /* its shard sockets are m->lis's now */
    }
    bool registry_moved = strcmp(old->tenancy.registry_uri, n->tenancy.registry_uri) != 0 ||
                          strcmp(old->tenancy.gen_path, n->tenancy.gen_path) != 0;
    m->cfg = n;
    m->pending = NULL;
    m->state = M_RUNNING;
    if (m->watch_pid > 0 && (registry_moved || !watch_needed(&n->tenancy)))
        kill(m->watch_pid, SIGTERM);   /* restarted with the new configuration */
    /* The hub keeps running across a reload (its streams stay open) and takes the new
     * limits from the scoreboard; only a registry it can no longer read restarts it. */
    hub_publish_limits(m);
    if (m->hub_pid > 0 && (registry_moved || !n->stream_hub)) {
        kill(m->hub_pid, SIGTERM);
        m->hub_backoff_ms = 0;
    }
    config_free(old);   /* workers of the old generation have their own copy */
    log_set_level(n->log_level);
    m->sb->pool.generation = n->generation;
    m->sb->pool.max_children = n->max_children;
    m->sb->pool.pm = n->pm;
    sb_inc(&m->sb->pool.reloads);
    log_info("reloaded: generation %u serves (pm %s, %d workers)", n->generation,
             config_pm_name(n->pm), total);
    sd_notifyf("READY=1\nSTATUS=generation %u", n->generation);
    if (m->reload_queued) {
        m->reload_queued = false;
        start_reload(m);
    }
}

/* ---- stopping ----------------------------------------------------------------------------- */

static void begin_stop(master *m, bool fast)
{
    int64_t now = clock_mono_ms();
    if (m->state == M_STOPPING) {
        if (fast && m->fast_stop) {
            log_warn("second stop signal: killing the workers now");
            for (int i = 0; i < SB_SLOTS; i++)
                if (m->kids[i].pid)
                    kill(m->kids[i].pid, SIGKILL);
            for (int i = 0; i < SB_JOB_SLOTS; i++)
                if (m->jk[i].pid)
                    kill(m->jk[i].pid, SIGKILL);
        }
        m->fast_stop = m->fast_stop || fast;
        return;
    }
    m->state = M_STOPPING;
    m->fast_stop = fast;
    const tn_config *cfg = m->cfg;
    int64_t deadline = fast ? cfg->stop_timeout_ms
                            : (cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 3600000) + 1000;
    m->stop_deadline = now + deadline;
    log_info("stopping (%s): waiting up to %lld ms for %d workers", fast ? "SIGTERM" : "graceful",
             (long long)deadline, alive_children(m));
    sd_notifyf("STOPPING=1");
    if (m->watch_pid > 0)
        kill(m->watch_pid, SIGTERM);
    if (m->hub_pid > 0)
        kill(m->hub_pid, SIGTERM);   /* it ends its streams properly, then exits */
    for (int i = 0; i < SB_SLOTS; i++)
        if (m->kids[i].pid)
            retire(m, i, fast ? SIGTERM : SIGQUIT, now + deadline);
    /* A job is never cut by a stop: the job in hand ends within the deadline, or its worker
     * is killed and the next start queues the job again (recover_host). */
    for (int i = 0; i < SB_JOB_SLOTS; i++)
        if (m->jk[i].pid)
            retire_jobworker(m, i, SIGTERM, now + deadline);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void handle_signal(master *m, int sig)
{
    switch (sig) {
    case SIGCHLD: break;   /* reap() runs every turn */
    case SIGHUP:
    case SIGUSR2: start_reload(m); break;
    case SIGQUIT: begin_stop(m, false); break;
    case SIGTERM:
    case SIGINT: begin_stop(m, true); break;
    case SIGUSR1:
        log_reopen();
        __atomic_add_fetch(&m->sb->pool.log_generation, 1, __ATOMIC_RELAXED);
        if (m->hub_pid > 0)
            kill(m->hub_pid, SIGUSR1);   /* the hub reopens its error log too */
        log_info("logs reopened");
        break;
    default: break;
    }
}

static bool want_listen_poll(master *m, int64_t now)
{
    if (m->cfg->pm != PM_ONDEMAND || m->state == M_STOPPING || m->state == M_STARTING)
        return false;
    if (m->ondemand_slot >= 0) {
        /* Wait for the child we started to take the connection (or give it 500 ms). */
        bool took = __atomic_load_n(&m->sb->pool.accepted, __ATOMIC_RELAXED) > m->ondemand_accepted;
        if (!took && m->kids[m->ondemand_slot].pid != 0 && now - m->ondemand_since < 500)
            return false;
        m->ondemand_slot = -1;
    }
    int idle = 0, starting = 0;
    int total = count_gen(m, m->cfg->generation, &idle, &starting);
    return idle == 0 && starting == 0 && total < m->cfg->max_children && may_spawn(m, now);
}

static void write_pid_file(const tn_config *cfg)
{
    if (cfg->pid_file == NULL)
        return;
    FILE *f = fopen(cfg->pid_file, "we");
    if (f == NULL) {
        log_warn("cannot write pid_file %s: %m", cfg->pid_file);
        return;
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
}

/* pm.slice is asked for by each worker as it starts (worker.c); whether this kernel takes it
 * is said here, once: the master asks for it itself, then goes back to the default. */
static void slice_probe(const tn_config *cfg)
{
    if (cfg->slice_us <= 0)
        return;
    char err[256];
    int rc = sched_slice_set(cfg->slice_us, err, sizeof(err));
    if (rc == TN_OK)
        (void)sched_slice_set(0, NULL, 0);
    else if (rc == TN_DECLINED)
        log_info("pm.slice: %s; workers run on the kernel's own", err);
    else
        log_warn("pm.slice: %s; workers run on the kernel's own", err);
}

int master_run(tn_config *cfg, const char *config_path, const master_hooks *hooks)
{
    /* Zero already (BSS; called once per process): clearing it would fault in every page
     * of its tables before the first worker is started. */
    static master mm;
    master *m = &mm;
    if (hooks != NULL)
        m->hooks = *hooks;
    m->handoff_wait_ms = -1;
    m->cfg = cfg;
    m->config_path = config_path;
    m->lis.fd = m->pending_lis.fd = m->old_lis.fd = -1;
    m->ondemand_slot = -1;
    m->state = M_STARTING;
    cfg->generation = m->next_generation = 1;

    char err[512];
    if (listen_open(cfg, &m->lis, err, sizeof(err)) != TN_OK) {
        log_error("%s", err);
        config_free(cfg);
        return 1;
    }
    m->sb = sb_create();
    m->lim = limits_create();
    /* Before any fork, so every worker generation (and the stream hub) shares it: the log
     * lives as long as this process. Its size is read here only (a reload keeps it). */
    m->events = event_log_create((size_t)cfg->tenancy.events_ring_size,
                                 cfg->tenancy.events_max_tenants);
    m->sigfd = signals_init_master();
    if (pipe2(m->wake, O_NONBLOCK | O_CLOEXEC) < 0)
        m->wake[0] = m->wake[1] = -1;
    /* Without it, workers close idle kept connections instead of passing them on. */
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, m->handoff) < 0)
        m->handoff[0] = m->handoff[1] = -1;
    /* Made once, before any fork: a restarted hub reads the same socket every worker of
     * every generation sends on. Without it, tn_subscribe answers TN_ERR. */
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, m->hub) < 0) {
        log_warn("cannot make the stream hub's socket (%m): no streams");
        m->hub[0] = m->hub[1] = -1;
    } else {
        /* Room for a burst of hand-offs (a reconnecting crowd after a hub restart): the
         * forced size needs privileges; the plain one is capped by the system's maximum. */
        int sz = 4 << 20;
        if (setsockopt(m->hub[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
            setsockopt(m->hub[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    }
    if (m->sb == NULL || m->lim == NULL || m->events == NULL || m->sigfd < 0 ||
        m->wake[0] < 0) {
        log_error("cannot set up the scoreboard, the event log or signals: %m");
        listen_close(&m->lis, true);
        config_free(cfg);
        return 1;
    }
    slice_probe(cfg);
    m->sb->pool.start_wall_us = clock_wall_us();
    m->sb->pool.generation = cfg->generation;
    m->sb->pool.max_children = cfg->max_children;
    m->sb->pool.pm = cfg->pm;
    hub_publish_limits(m);
    write_pid_file(cfg);
    log_info("starting: pm %s, max %d workers, listening on %s, app %s, %d mount%s",
             config_pm_name(cfg->pm), cfg->max_children, cfg->listen,
             cfg->app != NULL ? cfg->app : "(none)", cfg->mounts.n,
             cfg->mounts.n == 1 ? "" : "s");

    inbox_make(m, cfg);
    for (int i = initial_workers(cfg); i > 0; i--)
        spawn(m, cfg, &m->lis);

    int64_t last_status = 0;
    for (;;) {
        int64_t now = clock_mono_ms();
        struct pollfd pfd[4 + PARK_MAX] = {{.fd = m->sigfd, .events = POLLIN},
                                           {.fd = m->wake[0], .events = POLLIN},
                                           {.fd = -1}, {.fd = -1}};
        int nfds = 4;
        bool lis_polled = want_listen_poll(m, now);
        if (lis_polled) {
            pfd[2].fd = m->lis.fd;
            pfd[2].events = POLLIN;
        }
        /* ondemand with no worker: the connections the last one left (see park_take) */
        bool parking = m->cfg->pm == PM_ONDEMAND && m->state == M_RUNNING &&
                       m->handoff[1] >= 0 && alive_children(m) == 0;
        if (parking) {
            pfd[3].fd = m->handoff[1];
            pfd[3].events = POLLIN;
            if (may_spawn(m, now))   /* else one with a request would wake us at once */
                for (int i = 0; i < m->nparked; i++)
                    pfd[nfds++] = (struct pollfd){.fd = m->parked[i], .events = POLLIN | POLLRDHUP};
        }
        /* Tick fast while something is in motion; request timeouts are enforced from here,
         * so with request_timeout set they are late by at most one tick. */
        bool moving = m->state != M_RUNNING || m->consecutive_crashes;
        int timeout = moving ? 50 : (m->cfg->request_timeout_ms || m->cfg->slow_request_ms) ? 100 : 250;
        if (m->handoff_wait_ms >= 0 && m->handoff_wait_ms < timeout)
            timeout = m->handoff_wait_ms < 2 ? 2 : m->handoff_wait_ms;
        for (int i = 0; i < m->nparked; i++) {
            int64_t left = m->parked_until[i] - now;
            if (left < timeout)
                timeout = left < 0 ? 0 : (int)left;
        }
        int n = poll(pfd, (nfds_t)nfds, timeout);
        if (n < 0 && errno != EINTR) {
            log_error("poll: %m");
            break;
        }
        if (pfd[1].revents & POLLIN) {
            char drain[64];
            while (read(m->wake[0], drain, sizeof(drain)) > 0)
                ;
        }
        int sig;
        while ((sig = signals_next()) != 0)
            handle_signal(m, sig);
        reap(m);
        now = clock_mono_ms();
        update_brake(m, now);
        m->handoff_wait_ms = watch_requests(m, now);
        watch_jobs(m, now);
        inbox_sweep(m);

        if (m->state == M_STARTING) {
            int starting = 0;
            int total = count_gen(m, m->cfg->generation, NULL, &starting);
            if (starting == 0 && total > 0) {
                m->state = M_RUNNING;
                log_info("ready: generation %u, %d workers, listening on %s", m->cfg->generation,
                         total, m->cfg->listen);
                sd_notifyf("READY=1\nSTATUS=generation %u, %d workers", m->cfg->generation, total);
                if (m->reload_queued) {
                    m->reload_queued = false;
                    start_reload(m);
                }
            }
        }
        if (m->state == M_RELOADING)
            finish_reload(m, now);
        if (parking && (pfd[3].revents & POLLIN))
            park_take(m, now);
        if (m->nparked > 0) {
            bool wanted = park_check(m, pfd + 4, nfds - 4, now);
            if (m->state == M_STOPPING) {
                park_close_all(m);
            } else if (alive_children(m) > 0 || m->state != M_RUNNING) {
                park_release(m);   /* a worker runs (or is starting): it takes them */
            } else if (wanted && may_spawn(m, now) && spawn(m, m->cfg, &m->lis) >= 0) {
                log_debug("ondemand: a request on a kept connection: started a worker");
                park_release(m);
            }
        }
        if (m->state == M_RUNNING || m->state == M_RELOADING) {
            manage_pool(m, now);
            manage_jobs(m, now);
            if (lis_polled && n > 0 && (pfd[2].revents & POLLIN)) {
                int slot = spawn(m, m->cfg, &m->lis);
                if (slot >= 0) {
                    m->ondemand_slot = slot;
                    m->ondemand_accepted = __atomic_load_n(&m->sb->pool.accepted, __ATOMIC_RELAXED);
                    m->ondemand_since = now;
                }
            }
        }
        if (m->old_lis.fd >= 0) {
            bool old_left = false;
            for (int i = 0; i < SB_SLOTS && !old_left; i++)
                old_left = m->kids[i].pid && m->kids[i].generation != m->cfg->generation;
            if (!old_left)
                listen_close(&m->old_lis, true);
        }
        if (m->state != M_STOPPING && m->state != M_STARTING && m->watch_pid == 0 &&
            watch_needed(&m->cfg->tenancy) && now >= m->watch_next_ms)
            spawn_watcher(m);
        if (m->state != M_STOPPING && m->hub_pid == 0 && m->cfg->stream_hub && m->hub[1] >= 0 &&
            now >= m->hub_next_ms)
            spawn_hub(m);
        if (m->state == M_STOPPING && m->watch_pid > 0 && now >= m->stop_deadline)
            kill(m->watch_pid, SIGKILL);
        if (m->state == M_STOPPING && m->hub_pid > 0 && now >= m->stop_deadline)
            kill(m->hub_pid, SIGKILL);
        if (m->state == M_STOPPING && alive_children(m) == 0 && m->watch_pid == 0 &&
            m->hub_pid == 0 && alive_job_workers(m) == 0)
            break;
        if (now - last_status >= 10000 && m->state == M_RUNNING) {
            sb_counts c;
            status_count(m->sb, &c);
            sd_notifyf("STATUS=generation %u: %u workers (%u active, %u idle), %llu requests",
                       m->cfg->generation, c.total, c.active, c.idle,
                       (unsigned long long)sb_get(&m->sb->pool.requests));
            last_status = now;
        }
    }
    int code = m->state == M_STOPPING ? m->exit_code : 1;
    park_close_all(m);
    listen_close(&m->lis, true);
    if (m->old_lis.fd >= 0)
        listen_close(&m->old_lis, true);
    if (m->pending_lis.fd >= 0)
        listen_close(&m->pending_lis, true);
    if (m->cfg->pid_file != NULL)
        unlink(m->cfg->pid_file);
    log_info("stopped");
    config_free(m->pending);
    config_free(m->cfg);
    sb_destroy(m->sb);
    limits_destroy(m->lim);
    event_log_destroy(m->events);
    return code;
}
