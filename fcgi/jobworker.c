/*
 * jobworker.c — the job worker process (see jobworker.h): set-up after the fork, the loop
 * that claims and runs jobs, the chores of worker number 0, and leaving.
 *
 * Signals. SIGTERM/SIGQUIT/SIGINT only record a stop, seen between jobs (a job is never
 * cut by a stop: the master's stop deadline kills a job worker that overruns it, and the
 * job's lease brings it back). SIGALRM is the job's timeout: the handler writes nothing
 * and exits with JOB_EXIT_TIMEOUT, the only safe way out of app code; the master reads the
 * lease from the scoreboard and the replacement queues the job again. SIGUSR2 is the
 * master's death: stop after the job in hand.
 *
 * Host jobs. A job whose app starts with "host." is a module of the host's
 * (tenancy/handler.h: the panel's "host.admin" runs the `tenancy` command for its migrate and move): the handlers
 * with a job function are set up here too (handlers_init_jobs) and such a job goes to its
 * handler, outside any tenant's context, under the same timeout, its progress written to the
 * job's row under this worker's lease.
 *
 * Must not: serve HTTP, run an app's job outside chain_run_job (its tenant context), or keep
 * anything of a job after it ends.
 */
#include "core/first.h"
#include "fcgi/jobworker.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/rc.h"
#include "core/sha256.h"
#include "core/token.h"
#include "fcgi/app.h"
#include "fcgi/handler.h"
#include "fcgi/signals.h"
#include "fcgi/worker.h"
#include "tenancy/chain.h"
#include "tenancy/jobs.h"
#include "tenancy/registry.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHORE_SCHEDULES_MS 1000   /* due schedules are queued within this of their time */
#define CHORE_REAP_MS 5000
#define CHORE_PRUNE_MS 600000
#define LEASE_GRACE_MS 30000      /* lease_until = start + timeout + this */
#define SCHEDULES_PER_TURN 500
#define BUSY_RETRY_MS 20           /* ready jobs none could take: look again after this */
#define DEFER_MS 10000            /* a job of a tenant not served now looks again after this */
#define HOOK_WAIT_MS 200          /* a hook behind its tenant's earlier one looks again */
#define FLUSH_MS 1000              /* the registry's deferred commits made durable this often */
#define JOB_FD_RESERVE 64          /* descriptors besides the storage pool: logs, the registry */

static volatile sig_atomic_t stop_requested;

static void on_stop(int signo)
{
    (void)signo;
    stop_requested = 1;
}

static void on_alarm(int signo)
{
    (void)signo;
    _exit(JOB_EXIT_TIMEOUT);
}

typedef struct japp {
    tn_app_module mod;   /* mod.app NULL: none here */
    chain_app capp;
    const char *name;    /* "" the root app, else the mount's name */
    bool owner;
} japp;

static struct {
    const jobworker_args *a;
    const tn_config *cfg;
    sb_job_slot *slot;
    sb_jobs *jobs;
    registry *reg;
    log_repeat reg_log;   /* the registry's open failing: logged once a minute (reg) */
    char lease[48];
    japp apps[1 + TN_MAX_MOUNTS];
    int napps;
    uint64_t log_gen;
    int64_t next_schedules, next_reap, next_prune, next_say, next_flush;
    char host[13];   /* jobworker_host_key */
} jw;

void jobworker_host_key(const tn_config *cfg, char out[13])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    tn_sha256 s;
    uint8_t d[32];
    tn_sha256_init(&s);
    tn_sha256_update(&s, host, strlen(host));
    tn_sha256_update(&s, "\n", 1);
    tn_sha256_update(&s, cfg->path ? cfg->path : "", cfg->path ? strlen(cfg->path) : 0);
    tn_sha256_final(&s, d);
    for (int i = 0; i < 12; i++)
        out[i] = b64[d[i] & 63];
    out[12] = '\0';
}

static int64_t wall_ms(void) { return clock_wall_us() / 1000; }

/* ---- set-up -------------------------------------------------------------------------------- */

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);   /* the parent-death signal */
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);   /* logs are reopened through the scoreboard */
}

/* The same apps as the HTTP workers, each initialised once with job_worker set (a module
 * mounted twice is one module); stages their init adds are never run here. */
static void load_apps(void)
{
    const tn_config *c = jw.cfg;
    char err[512];
    for (int i = 0; i < 1 + c->mounts.n; i++) {
        japp *ja = &jw.apps[jw.napps];
        const char *path = i == 0 ? c->app : c->mounts.m[i - 1].app;
        ja->name = i == 0 ? "" : c->mounts.m[i - 1].name;
        if (path == NULL)
            continue;
        if (app_load(path, &ja->mod, err, sizeof(err)) != TN_OK) {
            log_error("job worker: %s", err);
            _exit(JOB_EXIT_INIT);
        }
        jw.napps++;
        ja->owner = true;
        for (int j = 0; j < jw.napps - 1; j++)
            if (jw.apps[j].mod.app == ja->mod.app)
                ja->owner = false;
        const tn_app *app = ja->mod.app;
        if (!ja->owner || app->init == NULL)
            continue;
        tn_app_env env = {c->path, path, jw.a->number, jw.a->generation, 1};
        chain_stages_open(&ja->capp);
        int rc = app->init(&env);
        chain_stages_close(&ja->capp);
        if (rc != TN_OK) {
            log_error("job worker: app %s: init failed: %s", app->name ? app->name : path,
                      tn_rc_str(rc));
            _exit(JOB_EXIT_INIT);
        }
    }
}

static const japp *app_named(const char *name)
{
    for (int i = 0; i < jw.napps; i++)
        if (strcmp(jw.apps[i].name, name) == 0)
            return &jw.apps[i];
    return NULL;
}

/* The registry handle, opened again after a failure (NULL while it cannot be reached). */
static registry *reg(void)
{
    if (jw.reg != NULL)
        return jw.reg;
    char err[512];
    unsigned held;
    if (registry_open(jw.cfg->tenancy.registry_uri, jw.cfg->tenancy.gen_path, &jw.reg, err,
                      sizeof(err)) != TN_OK) {
        /* Tried again at every turn of the loop: logged once a minute, not at each try. */
        if (log_repeat_due(&jw.reg_log, err, clock_mono_ms(), &held))
            log_error("job worker: the registry: %s (%u more tries failed so since the last "
                      "such line)", err, held);
        jw.reg = NULL;
        return NULL;
    } else if (log_repeat_clear(&jw.reg_log)) {
        log_info("job worker: the registry is open again");
    }
    /* This connection's commits (claims, ends, the chores) do not wait for the disk (a
     * SQLite registry; nothing changes on PostgreSQL). What an OS crash or a power loss can
     * take is the last of them, never a job queued by a request, a job or a command: those
     * commit on connections that wait (the chain's, the command's), which flushes the WAL
     * with everything before it. A claim lost puts its job back in the queue; an end lost
     * leaves the job running until its lease expires, when it runs again (at least once, as
     * after a worker's death); a schedule's job lost goes with its schedule's step, which
     * then runs again. The loop flushes them before a claim once FLUSH_MS has passed
     * (flush_due): a crash takes at most the last second's, and the claim and the end
     * before it of a job in hand. */
    if (registry_defer_sync(jw.reg, err, sizeof(err)) != TN_OK)
        log_warn("job worker: %s (its commits wait for the disk)", err);
    return jw.reg;
}

static void reg_failed(int rc)
{
    if (rc == TN_IO && jw.reg != NULL) {
        registry_close(jw.reg);
        jw.reg = NULL;
    }
}

/* ---- running a job -------------------------------------------------------------------------- */

typedef struct run_ctx {
    const job_rec *job;
    const japp *app;
    bool ran;
    char error[JOB_ERROR_MAX];
    int rc;
} run_ctx;

static int run_one(tn_request *r, void *arg)
{
    run_ctx *x = arg;
    x->ran = true;
    const job_rec *j = x->job;
    tn_job job = {.id = j->id, .name = j->name, .payload = j->payload,
                  .len = strlen(j->payload), .attempt = j->attempts,
                  .max_attempts = j->max_attempts, .enqueued_ms = j->created_at};
    int rc;
    if (x->app != NULL) {
        rc = x->app->mod.job(r, &job);
    } else {
        /* a hook: every app with a job handler, in order; the first failure fails it */
        rc = TN_OK;
        for (int i = 0; i < jw.napps && (rc == TN_OK || rc == TN_DECLINED); i++)
            if (jw.apps[i].owner && jw.apps[i].mod.job != NULL)
                rc = jw.apps[i].mod.job(r, &job);
        if (rc == TN_DECLINED)
            rc = TN_OK;
    }
    const char *e = tn_request_error(r);
    if (rc != TN_OK)
        tn_errf(x->error, sizeof(x->error), rc, "%s%s%s", tn_rc_str(rc), e[0] ? ": " : "", e);
    return rc;
}

static void slot_begin(const job_rec *j)
{
    sb_job_slot *s = jw.slot;
    snprintf(s->tenant, sizeof(s->tenant), "%s", j->slug);
    snprintf(s->name, sizeof(s->name), "%s", j->name);
    s->tenant_id = j->tenant_id;
    s->timeout_ms = j->timeout_ms;
    __atomic_store_n(&s->job_start_ns, clock_mono_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&s->job_id, j->id, __ATOMIC_RELEASE);
    __atomic_store_n(&s->state, SBJ_RUNNING, __ATOMIC_RELEASE);
}

static void slot_end(void)
{
    sb_job_slot *s = jw.slot;
    __atomic_store_n(&s->state, SBJ_IDLE, __ATOMIC_RELEASE);
    __atomic_store_n(&s->job_id, 0, __ATOMIC_RELEASE);
    s->tenant[0] = s->name[0] = '\0';
    s->tenant_id = 0;
    __atomic_add_fetch(&s->jobs, 1, __ATOMIC_RELAXED);
}

/* A job run to its end whose finish is not committed yet: no longer running (the master's
 * watchdog leaves the worker alone, the status page shows it idle), but its id stays in the
 * slot until slot_end, so that a worker that dies meanwhile has its job recovered at once
 * (it runs again: at least once), as it would while the job ran. */
static void slot_pending(void)
{
    __atomic_store_n(&jw.slot->state, SBJ_IDLE, __ATOMIC_RELEASE);
}

static void arm_timeout(int ms)
{
    struct itimerval it;
    memset(&it, 0, sizeof(it));
    it.it_value.tv_sec = ms / 1000;
    it.it_value.tv_usec = (ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, NULL);
}

/* A host module's job (app "host.NAME": tenancy/handler.h), outside any tenant's context. Its
 * progress goes to the job's row under this worker's lease. */
typedef struct host_run {
    int64_t id;
} host_run;

static void host_progress(void *host, const char *text)
{
    const host_run *h = host;
    registry *g = reg();
    if (g == NULL)
        return;
    char err[512];
    int rc = jobs_progress(g, h->id, jw.lease, text, err, sizeof(err));
    if (rc != TN_OK && rc != TN_NOTFOUND) {
        log_warn("job %lld: its progress cannot be recorded: %s", (long long)h->id, err);
        reg_failed(rc);
    }
}

static int run_host(const job_rec *j, char *error, size_t errlen)
{
    const tn_handler *h = handlers_job(j->app);
    if (h == NULL)
        return tn_errf(error, errlen, TN_NOTFOUND, "no module of this host runs jobs of app '%s'",
                       j->app);
    host_run hr = {j->id};
    tn_handler_job hj = {.id = j->id, .tenant_id = j->tenant_id, .slug = j->slug,
                         .app = j->app, .name = j->name, .payload = j->payload,
                         .attempt = j->attempts, .max_attempts = j->max_attempts,
                         .progress = host_progress, .host = &hr};
    arm_timeout(j->timeout_ms);
    int rc = h->job(&hj, error, errlen);
    arm_timeout(0);
    if (rc != TN_OK && error[0] == '\0')
        tn_errf(error, errlen, rc, "%s", tn_rc_str(rc));
    return rc;
}

/* The job's strings, copied: the store's stay valid only until the next call on the registry
 * handle, and a host job reports its progress on it while it runs. */
typedef struct job_copy {
    job_rec j;
    char slug[64], app[JOB_NAME_MAX + 2], name[JOB_NAME_MAX + 2];
    char *payload;
} job_copy;

static bool job_copy_of(job_copy *c, const job_rec *j)
{
    c->j = *j;
    snprintf(c->slug, sizeof(c->slug), "%s", j->slug);
    snprintf(c->app, sizeof(c->app), "%s", j->app);
    snprintf(c->name, sizeof(c->name), "%s", j->name);
    c->payload = strdup(j->payload);
    c->j.slug = c->slug;
    c->j.app = c->app;
    c->j.name = c->name;
    c->j.payload = c->payload;
    c->j.unique_key = c->j.last_error = c->j.lease = c->j.progress = "";
    return c->payload != NULL;
}

/* What the registry said of a finished job's end (jobs_finish, or the finish that rode with
 * the next claim). */
static void finish_told(int64_t id, int rc, const char *err)
{
    if (rc == TN_OK)
        sb_inc(&jw.jobs->done);
    else if (rc == TN_NOTFOUND)
        log_warn("job %lld: its lease was taken back before it ended (it may run again)",
                 (long long)id);
    else
        log_error("job %lld: cannot record its end: %s", (long long)id, err);
}

/* Runs the job and records its end, except a successful one's: that is left in *done for the
 * loop's next claim to commit with it (jobs_finish_claim), one wait for the registry's disk
 * instead of two. */
static void run_job(const job_rec *claimed, job_done *done)
{
    char err[512];
    job_copy jc;
    bool copied = job_copy_of(&jc, claimed);
    const job_rec *j = &jc.j;
    run_ctx x = {.job = j};
    const char *fail = copied ? NULL : "out of memory for the job's payload";
    bool hook = strcmp(j->app, JOB_APP_ALL) == 0;
    bool host = TN_IS_HOST_JOB_APP(j->app);
    if (!hook && !host && fail == NULL) {
        const japp *a = app_named(j->app);
        if (a == NULL)
            fail = j->app[0] ? "no app is mounted under this name" : "no app at the root";
        else if (a->mod.job == NULL)
            fail = "the app has no job handler";
        x.app = a;
    }
    /* A tenant's hooks in the order they were queued, one at a time: a later one waits */
    if (hook && j->tenant_id > 0) {
        registry *g = reg();
        int64_t now = wall_ms();
        if (g != NULL && jobs_hook_waits(g, j->tenant_id, j->id, err, sizeof(err)) == TN_OK) {
            if (jobs_release(g, j->id, jw.lease, "waiting for the tenant's earlier hook",
                             now + HOOK_WAIT_MS, now, err, sizeof(err)) != TN_OK)
                log_warn("job %lld (%s): %s", (long long)j->id, j->name, err);
            free(jc.payload);
            return;
        }
    }
    sb_inc(&jw.jobs->claimed);
    slot_begin(j);
    int rc;
    if (fail != NULL) {
        rc = tn_errf(x.error, sizeof(x.error), TN_NOTFOUND, "%s", fail);
    } else if (host) {
        rc = run_host(j, x.error, sizeof(x.error));
    } else {
        arm_timeout(j->timeout_ms);
        rc = chain_run_job(j->tenant_id ? j->slug : NULL, hook, j->app, j->timeout_ms,
                           run_one, &x);
        arm_timeout(0);
        if (rc == TN_NOTFOUND && x.error[0] == '\0')
            tn_errf(x.error, sizeof(x.error), rc, "the tenant '%s' is gone", j->slug);
        else if (rc != TN_OK && x.error[0] == '\0')
            tn_errf(x.error, sizeof(x.error), rc, "%s", tn_rc_str(rc));
    }
    int64_t now = wall_ms();
    registry *g = reg();
    int src = TN_IO;
    if (g != NULL && rc == TN_AGAIN && !x.ran) {
        /* its tenant is not served now: the job waits, and its attempt is not counted */
        char why[200];
        tn_errf(why, sizeof(why), TN_AGAIN, "waiting: tenant '%s' is not active", j->slug);
        src = jobs_release(g, j->id, jw.lease, why, now + DEFER_MS, now, err, sizeof(err));
    } else if (rc == TN_OK) {
        *done = (job_done){.id = j->id, .at_ms = now};
        src = TN_OK;
    } else if (g != NULL) {
        bool dead = false;
        src = jobs_fail(g, j->id, jw.lease, x.error, now, jw.cfg->tenancy.jobs_max_backoff_ms,
                        &dead, err, sizeof(err));
        if (src == TN_OK) {
            sb_inc(&jw.jobs->failed);
            if (dead)
                sb_inc(&jw.jobs->dead);
            log_warn("job %lld (%s, tenant %s) attempt %d of %d failed: %s%s", (long long)j->id,
                     j->name, j->slug[0] ? j->slug : "(central)", j->attempts, j->max_attempts,
                     x.error, dead ? "; kept as dead" : "");
        }
    }
    if (src == TN_NOTFOUND)
        log_warn("job %lld (%s): its lease was taken back before it ended (it may run again)",
                 (long long)j->id, j->name);
    else if (src != TN_OK) {
        /* the lease expires and the job runs again: at least once */
        log_error("job %lld (%s): cannot record its end: %s", (long long)j->id, j->name,
                  g ? err : "the registry cannot be reached");
        reg_failed(src);
    }
    if (done->id == j->id)
        slot_pending();   /* slot_end once the finish is committed */
    else
        slot_end();
    free(jc.payload);
}

/* ---- chores ---------------------------------------------------------------------------------- */

static void recover(const char *lease, const char *why)
{
    registry *g = reg();
    if (g == NULL)
        return;
    char err[512];
    int n = 0;
    int rc = jobs_recover(g, lease, why, wall_ms(), &n, err, sizeof(err));
    if (rc != TN_OK) {
        log_error("job worker: cannot queue again the job of lease %s: %s (its lease will "
                  "expire)", lease, err);
        reg_failed(rc);
        return;
    }
    if (n > 0) {
        __atomic_add_fetch(&jw.jobs->recovered, (uint64_t)n, __ATOMIC_RELAXED);
        log_info("job worker: the job of lease %s queued again (%s)", lease, why);
    }
}

typedef struct host_leases {
    const char *key;
    int n;                /* leases collected on this page */
    int seen;             /* jobs read on this page */
    int64_t last_id;      /* the oldest read: the next page starts before it */
    char leases[64][48];
} host_leases;

static int collect_host(void *ctx, const job_rec *j)
{
    host_leases *h = ctx;
    h->seen++;
    h->last_id = j->id;
    if (strncmp(j->lease, h->key, 12) == 0)
        snprintf(h->leases[h->n++], 48, "%s", j->lease);
    return h->n == 64;   /* full: recover these, then go on from here */
}

/* This host's master just started: none of its job workers can hold a lease. Every running
 * job is looked at, page by page (other hosts' among them), so none of ours is missed. */
static void recover_host(void)
{
    char key[13];
    jobworker_host_key(jw.cfg, key);
    registry *g = reg();
    if (g == NULL)
        return;
    host_leases h = {.key = key};
    for (;;) {
        h.n = h.seen = 0;
        int rc = jobs_list(g, -1, JOB_RUNNING, h.last_id, 1000, collect_host, &h);
        if (rc != TN_OK && rc != 1)
            break;
        for (int i = 0; i < h.n; i++)
            recover(h.leases[i], "the host restarted while it ran");
        if (rc != 1 && h.seen < 1000)
            break;
    }
}

/* Whether a hook reaches an app here: run_one tells every app with a job handler. */
static bool apps_take_hooks(void)
{
    for (int i = 0; i < jw.napps; i++)
        if (jw.apps[i].owner && jw.apps[i].mod.job != NULL)
            return true;
    return false;
}

static void chores(int64_t mono)
{
    if (jw.a->number != 0)
        return;
    registry *g = reg();
    if (g == NULL)
        return;
    char err[512];
    int n = 0, rc;
    int64_t now = wall_ms();
    /* what jobs.hooks = auto reads, wherever a hook is queued (tenancy/jobs.h) */
    if (mono >= jw.next_say) {
        jw.next_say = mono + JOBS_HOST_SAY_MS;
        rc = jobs_host_say(g, jw.host, jw.lease, apps_take_hooks(), now, err, sizeof(err));
        if (rc != TN_OK) {
            log_error("job worker: saying whether this host takes hooks: %s", err);
            reg_failed(rc);
            if ((g = reg()) == NULL)
                return;
        }
    }
    if (mono >= jw.next_schedules) {
        jw.next_schedules = mono + CHORE_SCHEDULES_MS;
        rc = jobs_schedules_due(g, now, SCHEDULES_PER_TURN, jw.cfg->tenancy.jobs_max_attempts,
                                (int)jw.cfg->tenancy.jobs_timeout_ms, &n, err, sizeof(err));
        if (rc != TN_OK) {
            log_error("job worker: schedules: %s", err);
            reg_failed(rc);
        } else if (n > 0) {
            __atomic_add_fetch(&jw.jobs->scheduled, (uint64_t)n, __ATOMIC_RELAXED);
            __atomic_add_fetch(&jw.jobs->enqueued, (uint64_t)n, __ATOMIC_RELAXED);
            sb_jobs_wake(jw.jobs);
        }
    }
    if (mono >= jw.next_reap && (g = reg()) != NULL) {
        jw.next_reap = mono + CHORE_REAP_MS;
        n = 0;
        rc = jobs_reap(g, now, &n, err, sizeof(err));
        if (rc != TN_OK) {
            log_error("job worker: expired leases: %s", err);
            reg_failed(rc);
        } else if (n > 0) {
            __atomic_add_fetch(&jw.jobs->recovered, (uint64_t)n, __ATOMIC_RELAXED);
            log_warn("job worker: %d job%s whose lease expired queued again", n,
                     n == 1 ? "" : "s");
        }
    }
    if (mono >= jw.next_prune && (g = reg()) != NULL) {
        jw.next_prune = mono + CHORE_PRUNE_MS;
        rc = jobs_prune(g, now - jw.cfg->tenancy.jobs_keep_ms, &n, err, sizeof(err));
        if (rc != TN_OK) {
            log_error("job worker: pruning finished jobs: %s", err);
            reg_failed(rc);
        }
    }
}

/* Sleep until a job is queued on this host (the futex), ms pass, or a signal. */
static void wait_for_work(uint32_t seen, int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    syscall(SYS_futex, &jw.jobs->wake, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* ---- the loop ---------------------------------------------------------------------------------- */

static uint64_t jittered_limit(void)
{
    if (jw.cfg->max_jobs <= 0)
        return UINT64_MAX;
    uint64_t n = (uint64_t)jw.cfg->max_jobs;
    uint64_t spread = n / 10;
    return n + (spread ? (uint64_t)(getpid() % (pid_t)(spread + 1)) : 0);
}

/* The registry's commits made durable once FLUSH_MS has passed since the last time (the
 * WAL file is shared: this covers every job worker's deferred commits). */
static void flush_due(int64_t mono)
{
    if (mono < jw.next_flush || jw.reg == NULL)
        return;
    jw.next_flush = mono + FLUSH_MS;
    char err[512];
    int rc = registry_flush(jw.reg, err, sizeof(err));
    if (rc != TN_OK) {
        log_error("job worker: flushing the registry: %s", err);
        reg_failed(rc);
    }
}

/* The end of a job run to completion that no claim took along: recorded on its own. */
static void finish_alone(job_done *done)
{
    if (done->id <= 0)
        return;
    char err[512];
    registry *g = reg();
    int rc = g != NULL ? jobs_finish(g, done->id, jw.lease, done->at_ms, err, sizeof(err))
                       : TN_IO;
    finish_told(done->id, rc, g != NULL ? err : "the registry cannot be reached");
    if (rc != TN_OK && rc != TN_NOTFOUND)
        reg_failed(rc);   /* the lease expires and the job runs again: at least once */
    slot_end();
    *done = (job_done){0};
}

static void loop(void)
{
    uint64_t limit = jittered_limit();
    uint64_t ran = 0;
    int64_t poll_ms = jw.cfg->tenancy.jobs_poll_ms;
    char err[512];
    job_done done = {0};   /* run to its end, its finish not yet committed */
    while (!stop_requested && ran < limit) {
        uint64_t lg = __atomic_load_n(&jw.a->sb->pool.log_generation, __ATOMIC_RELAXED);
        if (lg != jw.log_gen) {
            jw.log_gen = lg;
            log_reopen();
        }
        int64_t mono = clock_mono_ms();
        chores(mono);
        flush_due(mono);
        uint32_t seen = __atomic_load_n(&jw.jobs->wake, __ATOMIC_ACQUIRE);
        registry *g = reg();
        if (g == NULL) {
            wait_for_work(seen, 1000);
            continue;
        }
        job_rec j;
        int64_t next = 0;
        int rc = jobs_finish_claim(g, &done, jw.lease, jw.cfg->tenancy.jobs_per_tenant,
                                   LEASE_GRACE_MS, wall_ms(), &j, &next, err, sizeof(err));
        if (done.recorded) {
            finish_told(done.id, done.rc, "");
            slot_end();
            done = (job_done){0};
        }
        if (rc == TN_OK) {
            run_job(&j, &done);
            ran++;
            continue;
        }
        if (rc != TN_NOTFOUND) {
            /* TN_BUSY: another claimer held SQLite's lock past busy_timeout; try again soon */
            if (rc != TN_BUSY)
                log_error("job worker: claiming a job: %s", err);
            reg_failed(rc);
            wait_for_work(seen, rc == TN_BUSY ? 10 : 1000);
            continue;
        }
        /* Nothing ready: sleep until a local enqueue wakes us, the next delayed job is due,
         * or jobs.poll passes (jobs queued by another process or host). Index 0 wakes for
         * its chores too. */
        int64_t wait = poll_ms;
        if (next > 0) {
            /* due already: ready jobs whose tenants are at jobs.per_tenant, or held by
             * another claimer (PostgreSQL): look again shortly, not at once */
            int64_t due = next - wall_ms();
            if (due < wait)
                wait = due < BUSY_RETRY_MS ? BUSY_RETRY_MS : due;
        }
        if (jw.a->number == 0 && wait > CHORE_SCHEDULES_MS)
            wait = CHORE_SCHEDULES_MS;
        wait_for_work(seen, wait);
    }
    finish_alone(&done);   /* leaving: recycled, or told to stop */
    jw.next_flush = 0;
    flush_due(clock_mono_ms());
}

/* A job queued another (tn_job_enqueue): counted, and the idle job workers woken. */
static void job_queued(void *ctx)
{
    sb_jobs *j = ctx;
    sb_inc(&j->enqueued);
    sb_jobs_wake(j);
}

void jobworker_main(const jobworker_args *a)
{
    memset(&jw, 0, sizeof(jw));
    jw.a = a;
    jw.cfg = a->cfg;
    jw.jobs = &a->sb->jobs;
    jw.slot = &a->sb->jobs.slots[a->index];

    signals_reset_child();
    for (int i = 0; i < a->nclose; i++)
        if (a->close_fds[i] >= 0)
            close(a->close_fds[i]);
    log_set_pid();
    install_handlers();
    prctl(PR_SET_PDEATHSIG, SIGUSR2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (getppid() != a->master_pid)
        _exit(JOB_EXIT_OK);
    if (worker_drop_privileges(jw.cfg) != TN_OK)
        _exit(JOB_EXIT_SETUP);

    jobworker_host_key(jw.cfg, jw.host);
    char rnd[32];
    if (token_random_b64url(rnd, sizeof(rnd), 15) != TN_OK) {
        log_error("job worker: no random bytes for its lease");
        _exit(JOB_EXIT_SETUP);
    }
    snprintf(jw.lease, sizeof(jw.lease), "%s%s", jw.host, rnd);
    snprintf(jw.slot->lease, sizeof(jw.slot->lease), "%s", jw.lease);

    /* The storage pool sizes itself from RLIMIT_NOFILE (the worker's warning says when the
     * hard limit is lower than the configuration wants). */
    fd_limit_raise(JOB_FD_RESERVE + chain_fds_wanted(&jw.cfg->tenancy));
    chain_env ce = {.cfg = &jw.cfg->tenancy, .max_children = jw.cfg->max_children,
                    .events = a->events, .job_wake = job_queued, .job_wake_ctx = jw.jobs};
    if (chain_init(&ce) != TN_OK) {
        log_error("job worker: out of memory setting up the chain");
        _exit(JOB_EXIT_SETUP);
    }
    load_apps();
    /* The host modules that run jobs of their own (the panel), after the apps as in a worker
     * (fcgi/handler.h); they get no status document or pending slot here. */
    tn_handler_env henv = {.config_path = jw.cfg->path, .job_queued = job_queued,
                           .host = jw.jobs};
    const char *failed = NULL;
    int hrc = handlers_init_jobs(jw.cfg, &henv, &failed);
    if (hrc != TN_OK) {
        log_error("job worker: cannot set up the %s: %s", failed, tn_rc_str(hrc));
        _exit(JOB_EXIT_INIT);
    }
    jw.log_gen = __atomic_load_n(&a->sb->pool.log_generation, __ATOMIC_RELAXED);

    for (int i = 0; i < a->norphans; i++)
        recover(a->orphans[i], a->orphan_why[i]);
    if (a->recover_host)
        recover_host();

    __atomic_store_n(&jw.slot->state, SBJ_IDLE, __ATOMIC_RELEASE);
    loop();

    __atomic_store_n(&jw.slot->state, SBJ_EXITING, __ATOMIC_RELEASE);
    /* Stopping (a reload's new worker says again at its start; a recycled one is replaced
     * at once and keeps the row): this host no longer runs its apps' job handlers. */
    registry *g;
    char err[512];
    if (stop_requested && jw.a->number == 0 && (g = reg()) != NULL &&
        jobs_host_gone(g, jw.host, jw.lease, err, sizeof(err)) != TN_OK)
        log_error("job worker: %s", err);
    handlers_fini();
    for (int i = 0; i < jw.napps; i++)
        if (jw.apps[i].owner && jw.apps[i].mod.app->fini != NULL)
            jw.apps[i].mod.app->fini();
    registry_close(jw.reg);
    _exit(JOB_EXIT_OK);
}
