/*
 * actions.c — what the panel changes, each confirmed and audited: create a tenant, add or
 * remove a domain, suspend, resume (restore), maintenance, migrate, move, delete (with the
 * grace period of storage.delete_grace). The audit log itself is audit.c.
 *
 * Short actions call the tenant operations in process (tenancy/ops.h, the functions the
 * `tenancy` command calls): state changes and restore, domains, revoking an API key,
 * creating one tenant; on the
 * panel's registry connection, so they bump the generation and every worker sees them at
 * its next request.
 *
 * Long actions (migrate, move) never hold a request: they are jobs of the panel's own (app
 * "host.admin", tenancy/handler.h), queued here with the tenant as the job's tenant and a
 * payload naming the action, its placement and who asked (one long action per tenant at a
 * time: the unique key "admin:SLUG"), and run by the host's job workers (pm.jobs), which
 * set the panel up too and call actions_job. That runs the `tenancy` command (admin.cli,
 * this host's tenancyd.conf, no shell), which does the operation (ops_migrate, ops_move) in
 * a fresh process: a forked copy of a worker must not open the SQLite files its parent has
 * open (SQLite's per-process lock and WAL state would be the parent's), and a PostgreSQL
 * connection of the parent must not be touched. The command writes its progress (tenants
 * migrated, tables copied) to state_dir/admin-jobs/ID.progress (--progress-file), which
 * actions_job turns into the job's progress line; its output is kept in
 * state_dir/admin-jobs/ID.out, a failure's end is the job's error, and the outcome is
 * audited by the job worker (audit_job). The request that queued the job is audited as
 * "started" and sent to the job's page (/t/SLUG/confirm?job=ID: jobs.c's page_job), which
 * refreshes itself until the job is over. A job is tried once (max_attempts 1): retrying a
 * failed move is the operator's choice, from the jobs page.
 *
 * Every action is a GET of a confirmation page (nothing changes) and then a POST with the
 * session's CSRF token; delete also needs the tenant's slug typed again. Each action gets
 * its line in the audit log (audit(), audit.c).
 *
 * Must not: change anything on a GET, run the command through a shell, let the command keep
 * a descriptor of the job worker (the registry's), or take a job's tenant from its payload.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "core/clock.h"
#include "core/log.h"
#include "tenancy/ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_OUTPUT_MAX 65536
#define JOB_DIR "admin-jobs"
#define PROGRESS_EVERY_MS 500    /* how often the command's progress file is looked at */
#define ERROR_TAIL 600           /* the end of a failed command's output, as the job's error */

void adm_ops_env(ops_env *e)
{
    memset(e, 0, sizeof(*e));
    e->tc = adm.env.tcfg;
    e->conf_path = adm.env.config_path;
    e->reg = adm.reg;
}

/* ---- the panel's jobs: migrate and move, run by a job worker ------------------------------- */

/* What the panel queues (the job's payload): `key=value` lines, each value one line. The
 * tenant is the job's own (its row), never the payload's. */
typedef struct job_args {
    char action[16], to[64], user[64], client[64], req[64];
} job_args;

static void put_line(buf *b, const char *key, const char *v)
{
    buf_puts(b, key);
    buf_putc(b, '=');
    for (; v != NULL && *v; v++)
        buf_putc(b, *v == '\n' || *v == '\r' ? ' ' : *v);
    buf_putc(b, '\n');
}

static bool job_args_parse(const char *payload, job_args *x)
{
    memset(x, 0, sizeof(*x));
    for (const char *p = payload; *p;) {
        size_t len = strcspn(p, "\n");
        const char *eq = memchr(p, '=', len);
        if (eq != NULL) {
            size_t kl = (size_t)(eq - p), vl = len - kl - 1;
            char *dst = NULL;
            size_t cap = 0;
#define FIELD(k)                                                                            \
    if (kl == strlen(#k) && strncmp(p, #k, kl) == 0) {                                      \
        dst = x->k;                                                                         \
        cap = sizeof(x->k);                                                                 \
    }
            FIELD(action) FIELD(to) FIELD(user) FIELD(client) FIELD(req)
#undef FIELD
            if (dst != NULL && vl < cap) {
                memcpy(dst, eq + 1, vl);
                dst[vl] = '\0';
            }
        }
        p += len;
        if (*p == '\n')
            p++;
    }
    return strcmp(x->action, "migrate") == 0 || strcmp(x->action, "move") == 0;
}

static void job_path(char *out, size_t n, int64_t id, const char *ext)
{
    snprintf(out, n, "%s/" JOB_DIR "/%lld%s", adm.env.tcfg->state_dir, (long long)id, ext);
}

/* The command's progress file as one line for the job's row. */
static void progress_text(const ops_progress_seen *p, char *out, size_t n)
{
    int len;
    if (p->table[0] != '\0')   /* a copy: tables */
        len = snprintf(out, n, "%d of %d table%s copied; %s: %lld rows", p->done, p->total,
                       p->total == 1 ? "" : "s", p->table, p->rows);
    else
        len = snprintf(out, n, "%d of %d tenant%s done, %d failed, %.1f s", p->done, p->total,
                       p->total == 1 ? "" : "s", p->failed, p->seconds);
    if (p->slug[0] != '\0' && len > 0 && (size_t)len < n)
        snprintf(out + len, n - (size_t)len, "; last: %s %s", p->slug, p->outcome);
}

typedef struct watch {
    const tn_handler_job *j;
    const char *file;
    char last[TN_JOB_PROGRESS_MAX + 1];
} watch;

/* Tell the job's row what the command's progress file says now, when it changed. */
static void watch_tick(watch *w)
{
    ops_progress_seen p;
    if (ops_progress_read(w->file, &p) != TN_OK)
        return;
    char text[TN_JOB_PROGRESS_MAX + 1];
    progress_text(&p, text, sizeof(text));
    if (strcmp(text, w->last) == 0)
        return;
    snprintf(w->last, sizeof(w->last), "%s", text);
    w->j->progress(w->j->host, text);
}

/* Run `tenancy -c CONF ARGS...` (no shell), its output (stdout and stderr) into out, looking
 * at its progress file every PROGRESS_EVERY_MS. Returns the exit status, or -1 when it could
 * not run or was killed. The command dies with the job worker (a stop past the master's
 * deadline, the job's timeout): a move undoes what it half did. */
static int run_cli(const char *const *args, int nargs, buf *out, watch *w)
{
    const char *cli = adm.env.cfg->cli;
    const char *argv[24];
    int n = 0;
    argv[n++] = cli;
    argv[n++] = "-c";
    argv[n++] = adm.env.config_path ? adm.env.config_path : "/etc/tenancy/tenancyd.conf";
    for (int i = 0; i < nargs && n < (int)TN_ARRAY_LEN(argv) - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        buf_printf(out, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        buf_printf(out, "cannot fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        static const int reset[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM,
                                    SIGUSR1, SIGUSR2, SIGCHLD};
        for (size_t i = 0; i < TN_ARRAY_LEN(reset); i++)
            signal(reset[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close_range(3, ~0U, 0);   /* nothing of the job worker's: its registry, its sockets */
        execv(cli, (char *const *)argv);
        dprintf(2, "cannot run %s: %s\n", cli, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    char chunk[4096];
    int64_t next = clock_mono_ms() + PROGRESS_EVERY_MS;
    for (;;) {
        int64_t wait = next - clock_mono_ms();
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, wait > 0 ? (int)wait : 0);
        if (clock_mono_ms() >= next) {
            watch_tick(w);
            next = clock_mono_ms() + PROGRESS_EVERY_MS;
        }
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t got = read(fds[0], chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (out->len < CLI_OUTPUT_MAX)
            buf_append(out, chunk, (size_t)got);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    watch_tick(w);   /* its last word */
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Outputs and progress files of jobs that ended longer ago than finished jobs are kept
 * (jobs.keep): the jobs themselves are pruned then. */
static void prune_outputs(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    time_t before = time(NULL) - (time_t)(adm.env.tcfg->jobs_keep_ms / 1000);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISREG(st.st_mode) && st.st_mtime < before)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* The output kept whole (a temporary file renamed over), so the page never reads half. */
static void output_write(int64_t id, const buf *out)
{
    char path[4200], tmp[4300];
    job_path(path, sizeof(path), id, ".out");
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0) {
        log_warn("admin: job %lld: cannot keep its output: %s: %s", (long long)id, tmp,
                 strerror(errno));
        return;
    }
    bool ok = out->len == 0 || write(fd, out->p, out->len) == (ssize_t)out->len;
    if (close(fd) != 0 || !ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* The last ERROR_TAIL bytes of the output, from a line's start, as the job's error. */
static void output_tail(const buf *out, char *err, size_t errlen, int st)
{
    const char *p = out->p ? out->p : "";
    size_t n = out->len;
    while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == ' '))
        n--;
    size_t from = n > ERROR_TAIL ? n - ERROR_TAIL : 0;
    if (from > 0) {
        const char *nl = memchr(p + from, '\n', n - from);
        if (nl != NULL)
            from = (size_t)(nl - p) + 1;
    }
    if (st < 0)
        tn_errf(err, errlen, TN_ERR, "the command was stopped by a signal: %.*s",
                (int)(n - from), p + from);
    else
        tn_errf(err, errlen, TN_ERR, "exit status %d: %.*s", st, (int)(n - from), p + from);
}

int actions_job(const tn_handler_job *j, char *err, size_t errlen)
{
    job_args x;
    if (!job_args_parse(j->payload, &x) || j->slug[0] == '\0' || !tenant_slug_valid(j->slug))
        return tn_errf(err, errlen, TN_INVALID, "not a job of the panel's (action, tenant)");
    bool move = strcmp(x.action, "move") == 0;
    if (move && tenancy_placement(adm.env.tcfg, x.to) == NULL)
        return tn_errf(err, errlen, TN_INVALID, "no placement '%s' on this host", x.to);
    char dir[4096], progress[4200];
    snprintf(dir, sizeof(dir), "%s/" JOB_DIR, adm.env.tcfg->state_dir);
    if (mkdir(dir, 0750) < 0 && errno != EEXIST)
        return tn_errf(err, errlen, TN_IO, "cannot create %s: %s", dir, strerror(errno));
    prune_outputs(dir);
    job_path(progress, sizeof(progress), j->id, ".progress");
    unlink(progress);   /* an earlier attempt's */
    watch w = {.j = j, .file = progress};
    buf out = BUF_INIT;
    int st;
    if (move) {
        const char *args[] = {"move", j->slug, "--to", x.to, "--progress-file", progress};
        st = run_cli(args, 6, &out, &w);
    } else {
        const char *args[] = {"migrate", j->slug, "--progress-file", progress};
        st = run_cli(args, 4, &out, &w);
    }
    output_write(j->id, &out);
    char detail[300];
    snprintf(detail, sizeof(detail), "job %lld%s%s", (long long)j->id, move ? " to " : "",
             move ? x.to : "");
    audit_job(x.user, x.client, x.req, j->id, x.action, j->slug, detail,
              st == 0 ? "ok" : "error");
    int rc = TN_OK;
    if (st != 0) {
        output_tail(&out, err, errlen, st);
        rc = TN_ERR;
    }
    buf_free(&out);
    return rc;
}

const char *actions_job_output(adm_req *a, int64_t id)
{
    char path[4200];
    job_path(path, sizeof(path), id, ".out");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *text = tn_alloc(a->r, CLI_OUTPUT_MAX + 1);
    ssize_t n = text ? read(fd, text, CLI_OUTPUT_MAX) : -1;
    close(fd);
    if (n < 0)
        return NULL;
    text[n] = '\0';
    return text;
}

/* ---- confirmation and the actions --------------------------------------------------------------- */

typedef struct act {
    const char *name, *title, *verb, *explain;
    int state;                    /* for state changes; -1 otherwise */
    bool danger;
} act;

static const act acts[] = {
    {"suspend", "Suspend", "Suspend",
     "The host answers 403 for this tenant at once, in every worker, until it is resumed.",
     TENANT_SUSPENDED, true},
    {"resume", "Resume", "Resume",
     "The tenant is served again (state active). A deleted tenant is restored.", TENANT_ACTIVE,
     false},
    {"maintenance", "Maintenance", "Start maintenance",
     "The host answers 503 with Retry-After for this tenant until it is resumed.",
     TENANT_MAINTENANCE, false},
    {"delete", "Delete", "Delete",
     "The tenant is marked deleted: the host answers 404 for it at once. Its data is kept for "
     "the grace period (storage.delete_grace) and can be restored until `tenancy purge` "
     "removes it.",
     TENANT_DELETING, true},
    {"migrate", "Migrate", "Migrate",
     "Apply the app's pending migrations to this tenant's storage (a job that a job worker "
     "of the host runs: its page shows the progress).",
     -1, false},
    {"move", "Move", "Move",
     "Copy this tenant's data to another placement, verify it and switch the registry (a job "
     "that a job worker of the host runs with `tenancy move`: its page shows the progress).",
     -1, true},
    {"domain-add", "Add domain", "Add domain",
     "Requests for this domain are served as this tenant from now on.", -1, false},
    {"domain-remove", "Remove domain", "Remove domain",
     "Requests for this domain are no longer served as this tenant.", -1, true},
    {"key-revoke", "Revoke API key", "Revoke key",
     "Every worker refuses this key from its next request on. A revoked key cannot be "
     "restored: make a new one with `tenancy key create`.", -1, true},
};

static const act *find_act(const char *name)
{
    for (size_t i = 0; name && i < TN_ARRAY_LEN(acts); i++)
        if (strcmp(acts[i].name, name) == 0)
            return &acts[i];
    return NULL;
}

int page_confirm(adm_req *a, const char *slug)
{
    const char *job_id = adm_arg(a, "job");
    if (job_id != NULL)
        return page_job(a, slug, job_id);
    const act *x = find_act(adm_arg(a, "action"));
    if (x == NULL)
        return send_message(a, 404, "No such action", "The panel has no such action.");
    adm_tenant t;
    int rc = adm_tenant_get(a, slug, &t);
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", "The tenant could not be read.");
    }
    const char *domain = adm_arg(a, "domain");
    buf *o = a->out;
    char title[160];
    snprintf(title, sizeof(title), "%s · %s", x->title, slug);
    page_begin(a, title, "tenant", slug);
    buf_puts(o, "<section class=\"confirm\"><h1>");
    buf_puts(o, x->title);
    buf_puts(o, " <span class=\"mono\">");
    buf_html(o, slug);
    buf_puts(o, "</span>?</h1><p>");
    buf_html(o, x->explain);
    buf_puts(o, "</p><p class=\"muted\">Now: ");
    buf_html(o, tenant_state_name(t.rec->state));
    buf_puts(o, ", placement ");
    buf_html(o, t.rec->placement);
    buf_puts(o, ".</p><form method=\"post\" action=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "/action\" class=\"stack narrow\" id=\"confirm-form\">");
    put_csrf(a);
    buf_puts(o, "<input type=\"hidden\" name=\"action\" value=\"");
    buf_puts(o, x->name);
    buf_puts(o, "\">");
    if (strncmp(x->name, "domain-", 7) == 0) {
        buf_puts(o, "<label>Domain <input name=\"domain\" required value=\"");
        buf_html(o, domain ? domain : "");
        buf_puts(o, "\"></label>");
        if (strcmp(x->name, "domain-add") == 0)
            buf_puts(o, "<label class=\"check\"><input type=\"checkbox\" name=\"primary\" "
                        "value=\"1\"> make it the primary domain</label>");
    }
    if (strcmp(x->name, "key-revoke") == 0) {
        const char *key = adm_arg(a, "key");
        buf_puts(o, "<label>Key id or prefix <input name=\"key\" required autocomplete=\"off\" "
                    "value=\"");
        buf_html(o, key ? key : "");
        buf_puts(o, "\"></label>");
    }
    if (strcmp(x->name, "move") == 0) {
        buf_puts(o, "<label>To placement <select name=\"to\" required>");
        for (int i = 0; i < adm.env.tcfg->nplacements; i++) {
            const char *pn = adm.env.tcfg->placements[i].name;
            if (strcmp(pn, t.rec->placement) == 0)
                continue;
            buf_puts(o, "<option>");
            buf_html(o, pn);
            buf_puts(o, "</option>");
        }
        buf_puts(o, "</select></label>");
    }
    if (strcmp(x->name, "delete") == 0) {
        buf_puts(o, "<label>Type <b class=\"mono\">");
        buf_html(o, slug);
        buf_puts(o, "</b> to confirm <input name=\"confirm_slug\" id=\"confirm-slug\" "
                    "autocomplete=\"off\" required></label>");
    }
    buf_puts(o, "<div class=\"row\"><button type=\"submit\" id=\"confirm\" name=\"confirm\" "
                "value=\"yes\" class=\"");
    buf_puts(o, x->danger ? "danger" : "primary");
    buf_puts(o, "\">");
    buf_puts(o, x->verb);
    buf_puts(o, "</button><a class=\"button\" href=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "\">Cancel</a></div></form></section>");
    page_end(a);
    free(t.rec);
    return send_html(a, 200);
}

/* After an action: the tenant's page with a message. */
static int done(adm_req *a, const char *slug, bool ok, const char *msg, const char *output)
{
    if (!ok || output != NULL) {
        buf *o = a->out;
        buf_reset(o);
        page_begin(a, ok ? "Done" : "Failed", "tenant", slug);
        buf_puts(o, ok ? "<section class=\"confirm\"><h1>Done</h1><p class=\"flash\" "
                         "id=\"action-result\">"
                       : "<section class=\"confirm\"><h1>Failed</h1><p class=\"error\" "
                         "id=\"action-result\">");
        buf_html(o, msg);
        buf_puts(o, "</p>");
        if (output != NULL && output[0]) {
            buf_puts(o, "<pre class=\"output\">");
            buf_html(o, output);
            buf_puts(o, "</pre>");
        }
        buf_puts(o, "<p><a class=\"button\" href=\"/t/");
        buf_html(o, slug);
        buf_puts(o, "\">Back to the tenant</a></p></section>");
        page_end(a);
        return send_html(a, ok ? 200 : 409);
    }
    buf h = BUF_INIT;
    buf_puts(&h, "/t/");
    buf_puts(&h, slug);
    int st = send_redirect(a, h.p ? h.p : "/");
    buf_free(&h);
    return st;
}

int post_action(adm_req *a, const char *slug)
{
    const char *name = adm_form(a, "action");
    const act *x = find_act(name);
    if (x == NULL)
        return send_message(a, 400, "No such action", "The panel has no such action.");
    const char *confirm = adm_form(a, "confirm");
    if (confirm == NULL || strcmp(confirm, "yes") != 0)
        return send_message(a, 400, "Not confirmed", "Confirm the action on its page first.");
    char err[1024] = "";
    int rc;
    char detail[300] = "";
    ops_env e;
    adm_ops_env(&e);
    if (x->state >= 0) {
        if (x->state == TENANT_DELETING) {
            const char *typed = adm_form(a, "confirm_slug");
            if (typed == NULL || strcmp(typed, slug) != 0) {
                audit(a, x->name, slug, "slug not typed", "refused");
                return done(a, slug, false, "Type the tenant's slug to confirm a delete.", NULL);
            }
        }
        /* A deleted tenant changes state only by a restore, within its grace period: resume
         * restores it. */
        rc = ops_set_state(&e, slug, x->state, err, sizeof(err));
        snprintf(detail, sizeof(detail), "state %s", tenant_state_name(x->state));
        if (rc == TN_BUSY && x->state == TENANT_ACTIVE) {
            rc = ops_restore(&e, slug, err, sizeof(err));
            snprintf(detail, sizeof(detail), "restored");
        }
    } else if (strcmp(x->name, "domain-add") == 0 || strcmp(x->name, "domain-remove") == 0) {
        const char *domain = adm_form(a, "domain");
        if (domain == NULL || domain[0] == '\0')
            return done(a, slug, false, "Give a domain.", NULL);
        snprintf(detail, sizeof(detail), "%.250s", domain);
        if (strcmp(x->name, "domain-add") == 0) {
            const char *primary = adm_form(a, "primary");
            rc = ops_domain_add(&e, slug, domain, primary && primary[0], err, sizeof(err));
        } else {
            /* Only a domain of this tenant. */
            rc = ops_domain_remove(&e, slug, domain, err, sizeof(err));
        }
    } else if (strcmp(x->name, "key-revoke") == 0) {
        const char *key = adm_form(a, "key");
        if (key == NULL || key[0] == '\0')
            return done(a, slug, false, "Give the key's id or prefix.", NULL);
        registry_key k;
        bool already = false;
        rc = ops_key_revoke(&e, slug, key, &k, &already, err, sizeof(err));
        /* the audit line names the key by id and prefix, never by what was typed (which
         * could be a whole token) */
        if (rc == TN_OK)
            snprintf(detail, sizeof(detail), "key %lld %s%s", (long long)k.id, k.prefix,
                     already ? " (already revoked)" : "");
        else
            snprintf(detail, sizeof(detail), "key %.12s", key);   /* at most a prefix */
    } else {
        /* migrate, move: a job of the panel's own (app "host.admin"), run by a job worker;
         * this request only queues it, one long action per tenant at a time. */
        const char *to = NULL;
        bool move = strcmp(x->name, "move") == 0;
        if (move) {
            to = adm_form(a, "to");
            if (to == NULL || tenancy_placement(adm.env.tcfg, to) == NULL)
                return done(a, slug, false, "Choose a placement this host knows.", NULL);
        }
        buf payload = BUF_INIT;
        put_line(&payload, "action", x->name);
        if (to != NULL)
            put_line(&payload, "to", to);
        put_line(&payload, "user", a->user);
        put_line(&payload, "client", a->client);
        put_line(&payload, "req", tn_request_id(a->r));
        char key[100];
        snprintf(key, sizeof(key), "admin:%s", slug);
        ops_job_new n = {.slug = slug, .app = ADMIN_JOB_APP,
                         .name = move ? "admin.move" : "admin.migrate",
                         .payload = payload.p ? payload.p : "", .unique_key = key,
                         .max_attempts = 1, .timeout_ms = (int)adm.env.cfg->job_timeout_ms,
                         .host = true};
        int64_t id = 0;
        rc = payload.oom ? tn_errf(err, sizeof(err), TN_NOMEM, "out of memory")
                         : ops_job_enqueue(&e, &n, &id, err, sizeof(err));
        buf_free(&payload);
        if (rc == TN_EXISTS) {
            snprintf(detail, sizeof(detail), "job %lld of this tenant is queued or running",
                     (long long)id);
            audit(a, x->name, slug, detail, "refused");
            tn_errf(err, sizeof(err), rc, "Another long action of this tenant is queued or "
                    "running (job %lld): wait for it to end.", (long long)id);
            return done(a, slug, false, err, NULL);
        }
        snprintf(detail, sizeof(detail), "job %lld%s%s", (long long)id, move ? " to " : "",
                 move ? to : "");
        audit(a, x->name, slug, rc == TN_OK ? detail : err, rc == TN_OK ? "started" : "error");
        if (rc != TN_OK) {
            adm_registry_failed(a);
            return done(a, slug, false, err, NULL);
        }
        if (adm.env.job_queued != NULL)
            adm.env.job_queued(adm.env.job_ctx);
        buf h = BUF_INIT;
        buf_printf(&h, "/t/%s/confirm?job=%lld", slug, (long long)id);
        int st = send_redirect(a, h.p ? h.p : "/");
        buf_free(&h);
        return st;
    }
    audit(a, x->name, slug, detail, rc == TN_OK ? "ok" : "error");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return done(a, slug, false, err[0] ? err : tn_rc_str(rc), NULL);
    }
    return done(a, slug, true, "", NULL);
}

/* ---- create ------------------------------------------------------------------------------------ */

int page_new(adm_req *a)
{
    const char *slug = NULL, *name = NULL, *domain = NULL;
    const char *error = NULL;
    buf output = BUF_INIT;
    if (a->post) {
        slug = adm_form(a, "slug");
        name = adm_form(a, "name");
        domain = adm_form(a, "domain");
        const char *confirm = adm_form(a, "confirm");
        if (slug == NULL || !tenant_slug_valid(slug)) {
            error = "A slug is 1 to 63 of a-z, 0-9 and -, starting with a letter or digit.";
        } else if (confirm == NULL || strcmp(confirm, "yes") != 0) {
            error = "Confirm the creation.";
        } else {
            const char *domains[] = {domain};
            registry_new n = {.slug = slug, .name = name && name[0] ? name : slug,
                              .state = TENANT_ACTIVE, .domains = domains,
                              .ndomains = domain && domain[0] ? 1 : 0, .settings = "{}"};
            ops_env e;
            adm_ops_env(&e);
            ops_create_opts co = {NULL, false, false, TENANT_ACTIVE};
            ops_plan *plan = NULL;
            char err[1200];
            int st = ops_create_prepare(&e, &co, &plan, err, sizeof(err));
            ops_created *made = tn_alloc(a->r, sizeof(*made));
            if (st == TN_OK && made == NULL)
                st = tn_errf(err, sizeof(err), TN_NOMEM, "out of memory");
            if (st == TN_OK)
                st = ops_create(&e, plan, &n, made, err, sizeof(err));
            ops_plan_free(plan);
            audit(a, "create", slug, name ? name : "", st == TN_OK ? "ok" : "error");
            if (st == TN_OK) {
                buf h = BUF_INIT;
                buf_puts(&h, "/t/");
                buf_puts(&h, slug);
                int rs = send_redirect(a, h.p ? h.p : "/");
                buf_free(&h);
                return rs;
            }
            adm_registry_failed(a);
            buf_puts(&output, err);
            error = "The tenant could not be created:";
        }
    }
    buf *o = a->out;
    page_begin(a, "New tenant", "new", NULL);
    buf_puts(o, "<section class=\"confirm\"><h1>New tenant</h1>");
    if (error != NULL) {
        buf_puts(o, "<p class=\"error\" id=\"action-result\">");
        buf_html(o, error);
        buf_puts(o, "</p>");
        if (output.len) {
            buf_puts(o, "<pre class=\"output\">");
            buf_html(o, output.p);
            buf_puts(o, "</pre>");
        }
    }
    buf_free(&output);
    buf_puts(o, "<form method=\"post\" action=\"/new\" class=\"stack narrow\" id=\"new-form\">");
    put_csrf(a);
    buf_puts(o, "<label>Slug <input name=\"slug\" id=\"new-slug\" required pattern=\"[a-z0-9]"
                "[a-z0-9-]{0,62}\" autocomplete=\"off\" value=\"");
    buf_html(o, slug ? slug : "");
    buf_puts(o, "\"></label><label>Name <input name=\"name\" id=\"new-name\" value=\"");
    buf_html(o, name ? name : "");
    buf_puts(o, "\"></label><label>Domain (optional) <input name=\"domain\" value=\"");
    buf_html(o, domain ? domain : "");
    buf_puts(o, "\"></label><p class=\"muted\">As <code>tenancy tenant create</code>: the "
                "tenant's storage is created in the default placement.</p>"
                "<label class=\"check\"><input type=\"checkbox\" name=\"confirm\" value=\"yes\" "
                "id=\"new-confirm\" required> create this tenant</label>"
                "<div class=\"row\"><button type=\"submit\" class=\"primary\" id=\"create\">"
                "Create</button></div></form></section>");
    page_end(a);
    return send_html(a, error ? 400 : 200);
}
