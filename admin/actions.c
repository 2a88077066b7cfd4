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
 * Long actions (migrate, move) never hold a request: they run detached. A grandchild of the
 * worker (double fork, its own session, every inherited descriptor closed) runs the
 * `tenancy` command (admin.cli, with this host's tenancyd.conf, no shell), which does the
 * operation (ops_migrate, ops_move) in a fresh process: a forked copy of a worker must not
 * open the SQLite files the worker has open (SQLite's per-process lock and WAL state would
 * be the worker's, and its opens fail with "locking protocol"), and a PostgreSQL connection
 * of the worker must not be touched. The command writes its progress (tenants migrated,
 * tables copied) to state_dir/admin-jobs/ID.progress (--progress-file); the grandchild
 * waits for it, writes the job's outcome and output to state_dir/admin-jobs/ID and audits
 * it. The request that started the job is audited as "started" and redirected to the job's
 * page (/t/SLUG/confirm?job=ID), which reads both files and refreshes itself until the job
 * is over.
 *
 * Every action is a GET of a confirmation page (nothing changes) and then a POST with the
 * session's CSRF token; delete also needs the tenant's slug typed again. Each action gets
 * its line in the audit log (audit(), audit.c).
 *
 * Must not: change anything on a GET, run the command through a shell, or let a job's
 * process keep a descriptor of the worker (its FastCGI sockets, the registry's).
 */
#include "core/first.h"
#include "admin/pages.h"
#include "core/clock.h"
#include "core/log.h"
#include "tenancy/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_OUTPUT_MAX 65536
#define JOB_DIR "admin-jobs"
#define JOB_ID_BYTES 12          /* 16 characters of [A-Za-z0-9_-] */

/* ---- the tenancy command --------------------------------------------------------------------- */

/* Run `tenancy -c CONF ARGS...` (no shell), its output (stdout and stderr) into out. Returns
 * the exit status, or -1 when it could not run. Only a detached job runs it: it may take as
 * long as it takes. */
static int run_cli(const char *const *args, int nargs, buf *out)
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
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        buf_printf(out, "cannot fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execv(cli, (char *const *)argv);
        dprintf(2, "cannot run %s: %s\n", cli, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    char chunk[4096];
    for (;;) {
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
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- detached jobs ------------------------------------------------------------------------------ */

/* A job's file: `key=value` lines (action, tenant, state running|done|failed, message,
 * output), written whole to a temporary file and renamed over, so the page never reads half
 * of it. Values are one line: newlines in them are written \n. Its progress is the
 * command's file beside it (ID.progress, ops_progress_write). */
typedef struct job {
    char path[4200];
    char action[32], slug[64];
    adm_req *a;                   /* the request that started it: for its audit line */
    const char *to;               /* move: the placement */
} job;

static void put_value(FILE *f, const char *key, const char *v)
{
    fprintf(f, "%s=", key);
    for (; v != NULL && *v; v++) {
        if (*v == '\n')
            fputs("\\n", f);
        else if (*v == '\\')
            fputs("\\\\", f);
        else if (*v != '\r')
            fputc(*v, f);
    }
    fputc('\n', f);
}

static void job_write(const job *j, const char *state, const char *message, const char *output)
{
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", j->path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return;   /* the page then says the job's progress cannot be read */
    put_value(f, "action", j->action);
    put_value(f, "tenant", j->slug);
    put_value(f, "state", state);
    put_value(f, "message", message);
    put_value(f, "output", output);
    bool ok = fflush(f) == 0 && !ferror(f);
    if (fclose(f) != 0 || !ok || rename(tmp, j->path) != 0)
        unlink(tmp);
}

/* The grandchild: the command, then the job's outcome and its audit line. Never returns. */
static TN_NORETURN void job_main(const job *j)
{
    buf out = BUF_INIT;
    char progress[4300];
    snprintf(progress, sizeof(progress), "%s.progress", j->path);
    int st;
    if (strcmp(j->action, "migrate") == 0) {
        const char *args[] = {"migrate", j->slug, "--progress-file", progress};
        st = run_cli(args, 4, &out);
    } else {
        const char *args[] = {"move", j->slug, "--to", j->to, "--progress-file", progress};
        st = run_cli(args, 6, &out);
    }
    char detail[300] = "";
    if (j->to != NULL)
        snprintf(detail, sizeof(detail), "to %s", j->to);
    job_write(j, st == 0 ? "done" : "failed",
              st == 0 ? "The job finished." : "The job failed (output below).",
              out.p ? out.p : "");
    audit(j->a, j->action, j->slug, detail, st == 0 ? "ok" : "error");
    buf_free(&out);
    _exit(st == 0 ? 0 : 1);
}

/* Start a job detached from the worker: a double fork, so that the job is nobody's child
 * here (the worker never waits for it, and it outlives a worker that is recycled), in a
 * session of its own, with every descriptor of the worker closed (its FastCGI sockets and
 * its connections are the worker's). TN_OK with id set, or the error with err set. */
static int job_start(job *j, char *id, size_t idlen, char *err, size_t errlen)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/" JOB_DIR, adm.env.tcfg->state_dir);
    if (mkdir(dir, 0750) < 0 && errno != EEXIST)
        return tn_errf(err, errlen, TN_IO, "cannot create %s: %s", dir, strerror(errno));
    if (auth_random_token(id, idlen, JOB_ID_BYTES) != TN_OK)
        return tn_errf(err, errlen, TN_IO, "no random bytes for a job id");
    snprintf(j->path, sizeof(j->path), "%s/%s", dir, id);
    job_write(j, "running", "started", NULL);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        if (setsid() < 0 || fork() != 0)
            _exit(0);   /* the middle process: gone at once, so the worker reaps it now */
        static const int reset[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM,
                                    SIGUSR1, SIGUSR2, SIGCHLD};
        for (size_t i = 0; i < TN_ARRAY_LEN(reset); i++)
            signal(reset[i], SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        close_range(3, ~0U, 0);
        job_main(j);
    }
    int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        unlink(j->path);
        return tn_errf(err, errlen, TN_IO, "cannot fork: %s", strerror(e));
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return TN_OK;
}

/* A job's file read back: each key's value (unescaped) into the request's arena. */
typedef struct job_view {
    const char *action, *tenant, *state, *message, *output;
    ops_progress_seen progress;
    bool has_progress;
} job_view;

static const char *unescape(adm_req *a, const char *v)
{
    buf b = BUF_INIT;
    for (; *v; v++) {
        if (*v == '\\' && v[1] == 'n') {
            buf_putc(&b, '\n');
            v++;
        } else if (*v == '\\' && v[1] == '\\') {
            buf_putc(&b, '\\');
            v++;
        } else {
            buf_putc(&b, *v);
        }
    }
    const char *s = tn_strdup(a->r, b.p ? b.p : "");
    buf_free(&b);
    return s;
}

static int job_read(adm_req *a, const char *id, job_view *v)
{
    memset(v, 0, sizeof(*v));
    char path[4200];
    snprintf(path, sizeof(path), "%s/" JOB_DIR "/%s", adm.env.tcfg->state_dir, id);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? TN_NOTFOUND : TN_IO;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        const char *val = unescape(a, eq + 1);
        if (strcmp(line, "action") == 0)
            v->action = val;
        else if (strcmp(line, "tenant") == 0)
            v->tenant = val;
        else if (strcmp(line, "state") == 0)
            v->state = val;
        else if (strcmp(line, "message") == 0)
            v->message = val;
        else if (strcmp(line, "output") == 0)
            v->output = val;
    }
    free(line);
    fclose(f);
    char ppath[4300];
    snprintf(ppath, sizeof(ppath), "%s.progress", path);
    v->has_progress = ops_progress_read(ppath, &v->progress) == TN_OK;
    return v->state != NULL ? TN_OK : TN_IO;
}

static bool job_id_ok(const char *id)
{
    size_t n = id != NULL ? strlen(id) : 0;
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_'))
            return false;
    return true;
}

/* The job's page: its progress while it runs (the page refreshes itself), its outcome after. */
static int page_job(adm_req *a, const char *slug, const char *id)
{
    job_view v;
    int rc = job_id_ok(id) ? job_read(a, id, &v) : TN_NOTFOUND;
    if (rc == TN_OK && (v.tenant == NULL || strcmp(v.tenant, slug) != 0))
        rc = TN_NOTFOUND;   /* a job is shown under its own tenant only */
    if (rc != TN_OK)
        return send_message(a, rc == TN_NOTFOUND ? 404 : 503, "No such job",
                            "This job is not known, or its progress cannot be read.");
    bool running = strcmp(v.state, "running") == 0;
    buf *o = a->out;
    char title[160];
    snprintf(title, sizeof(title), "%s · %s", v.action ? v.action : "job", slug);
    if (running)
        tn_add_header(a->r, "Refresh", "2");   /* until it is over */
    page_begin(a, title, "tenant", slug);
    buf_puts(o, "<section class=\"confirm\" id=\"job\"><h1>");
    buf_html(o, v.action ? v.action : "job");
    buf_puts(o, " <span class=\"mono\">");
    buf_html(o, slug);
    buf_puts(o, "</span></h1><p id=\"job-state\" class=\"");
    buf_puts(o, running ? "muted" : strcmp(v.state, "done") == 0 ? "flash" : "error");
    buf_puts(o, "\">");
    buf_html(o, v.state);
    buf_puts(o, "</p>");
    if (v.has_progress) {
        const ops_progress_seen *p = &v.progress;
        buf_puts(o, "<p id=\"job-progress\">");
        if (p->table[0] != '\0') {   /* a copy: tables */
            buf_printf(o, "%d of %d table%s copied; ", p->done, p->total,
                       p->total == 1 ? "" : "s");
            buf_html(o, p->table);
            buf_printf(o, ": %lld rows", p->rows);
        } else {
            buf_printf(o, "%d of %d tenant%s done, %d failed, %.1f s", p->done, p->total,
                       p->total == 1 ? "" : "s", p->failed, p->seconds);
        }
        if (p->slug[0] != '\0') {
            buf_puts(o, "; last: ");
            buf_html(o, p->slug);
            buf_puts(o, " ");
            buf_html(o, p->outcome);
        }
        buf_puts(o, "</p>");
    }
    if (v.message != NULL && v.message[0]) {
        buf_puts(o, "<p id=\"action-result\">");
        buf_html(o, v.message);
        buf_puts(o, "</p>");
    }
    if (v.output != NULL && v.output[0]) {
        buf_puts(o, "<pre class=\"output\">");
        buf_html(o, v.output);
        buf_puts(o, "</pre>");
    }
    buf_puts(o, "<p><a class=\"button\" href=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "\">Back to the tenant</a></p></section>");
    page_end(a);
    return send_html(a, 200);
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
     "Apply the app's pending migrations to this tenant's storage (a job in the background: "
     "its page shows the progress).",
     -1, false},
    {"move", "Move", "Move",
     "Copy this tenant's data to another placement, verify it and switch the registry (a job "
     "in the background, running `tenancy move`: its page shows the progress).",
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
    memset(&e, 0, sizeof(e));
    e.tc = adm.env.tcfg;
    e.conf_path = adm.env.config_path;
    e.reg = adm.reg;
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
        /* migrate, move: a detached job; this request only starts it. */
        job *j = tn_alloc(a->r, sizeof(*j));
        if (j == NULL)
            return send_message(a, 503, "Out of memory", "The job could not be started.");
        memset(j, 0, sizeof(*j));
        snprintf(j->action, sizeof(j->action), "%s", x->name);
        snprintf(j->slug, sizeof(j->slug), "%s", slug);
        j->a = a;
        if (strcmp(x->name, "move") == 0) {
            const char *to = adm_form(a, "to");
            if (to == NULL || tenancy_placement(adm.env.tcfg, to) == NULL)
                return done(a, slug, false, "Choose a placement this host knows.", NULL);
            j->to = to;
            snprintf(detail, sizeof(detail), "to %s", to);
        }
        char id[40];
        rc = job_start(j, id, sizeof(id), err, sizeof(err));
        audit(a, x->name, slug, detail, rc == TN_OK ? "started" : "error");
        if (rc != TN_OK)
            return done(a, slug, false, err, NULL);
        buf h = BUF_INIT;
        buf_printf(&h, "/t/%s/confirm?job=%s", slug, id);
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
            memset(&e, 0, sizeof(e));
            e.tc = adm.env.tcfg;
            e.conf_path = adm.env.config_path;
            e.reg = adm.reg;
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
