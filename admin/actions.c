/*
 * actions.c — what the panel changes, each confirmed and audited: create a tenant, add or
 * remove a domain, suspend, resume (restore), maintenance, migrate, move, delete (with the
 * grace period of storage.delete_grace). The audit log itself is audit.c.
 *
 * State and domain changes call the registry functions the `tenancy` command calls
 * (registry_set_state_if, registry_restore, registry_domain_add/remove), on the panel's
 * registry connection, so
 * they bump the generation and every worker sees them at its next request. Creating a
 * tenant, migrating and moving run the `tenancy` command itself (admin.cli, with this
 * host's tenancyd.conf): those steps provision and copy storage, and the command is where
 * that logic lives; the panel shows its output.
 *
 * Every action is a GET of a confirmation page (nothing changes) and then a POST with the
 * session's CSRF token; delete also needs the tenant's slug typed again. Each action gets
 * its line in the audit log (audit(), audit.c).
 *
 * Must not: change anything on a GET, or run the command through a shell.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "core/clock.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_TIMEOUT_MS 50000
#define CLI_OUTPUT_MAX 65536

/* ---- the tenancy command --------------------------------------------------------------------- */

/* Run `tenancy -c CONF ARGS...` (no shell), its output (stdout and stderr) into out. Returns
 * the exit status, or -1 when it could not run or ran past CLI_TIMEOUT_MS (then killed). */
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
    int64_t end = clock_mono_ms() + CLI_TIMEOUT_MS;
    bool timed_out = false;
    char chunk[4096];
    for (;;) {
        int64_t left = end - clock_mono_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&p, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        ssize_t got = read(fds[0], chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (out->len < CLI_OUTPUT_MAX)
            buf_append(out, chunk, (size_t)got);
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        buf_puts(out, "\n(stopped: it ran past 50 s)");
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
     "Apply the app's pending migrations to this tenant's storage (runs `tenancy migrate`).",
     -1, false},
    {"move", "Move", "Move",
     "Copy this tenant's data to another placement, verify it and switch the registry (runs "
     "`tenancy move`).",
     -1, true},
    {"domain-add", "Add domain", "Add domain",
     "Requests for this domain are served as this tenant from now on.", -1, false},
    {"domain-remove", "Remove domain", "Remove domain",
     "Requests for this domain are no longer served as this tenant.", -1, true},
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
    if (x->state >= 0) {
        if (x->state == TENANT_DELETING) {
            const char *typed = adm_form(a, "confirm_slug");
            if (typed == NULL || strcmp(typed, slug) != 0) {
                audit(a, x->name, slug, "slug not typed", "refused");
                return done(a, slug, false, "Type the tenant's slug to confirm a delete.", NULL);
            }
        }
        /* As the tenancy command does: a deleted tenant changes state only by a restore,
         * within its grace period; any other state may change, atomically. */
        unsigned all = (1u << TENANT_NSTATES) - 1, from = all & ~(1u << TENANT_DELETING);
        int was = -1;
        rc = registry_set_state_if(adm.reg, slug, from, x->state, &was, err, sizeof(err));
        snprintf(detail, sizeof(detail), "state %s", tenant_state_name(x->state));
        if (rc == TN_BUSY && was == TENANT_DELETING && x->state == TENANT_ACTIVE) {
            int64_t grace = adm.env.tcfg->delete_grace_ms / 1000;
            rc = registry_restore(adm.reg, slug, (int64_t)time(NULL) - grace, err, sizeof(err));
            snprintf(detail, sizeof(detail), "restored");
            if (rc == TN_TIMEOUT)
                snprintf(err, sizeof(err), "the grace period of '%s' is over: it can only be "
                                           "purged", slug);
        } else if (rc == TN_BUSY && was == TENANT_DELETING) {
            snprintf(err, sizeof(err), "'%s' is deleted: restore it first", slug);
        }
    } else if (strcmp(x->name, "domain-add") == 0 || strcmp(x->name, "domain-remove") == 0) {
        const char *domain = adm_form(a, "domain");
        if (domain == NULL || domain[0] == '\0')
            return done(a, slug, false, "Give a domain.", NULL);
        snprintf(detail, sizeof(detail), "%.250s", domain);
        if (strcmp(x->name, "domain-add") == 0) {
            const char *primary = adm_form(a, "primary");
            rc = registry_domain_add(adm.reg, slug, domain, primary && primary[0], err,
                                     sizeof(err));
        } else {
            /* Only a domain of this tenant: the registry removes by name alone. */
            char owner[80] = "";
            const char *p[] = {domain};
            db_query_value(registry_db(adm.reg), owner, sizeof(owner),
                           "SELECT t.slug FROM domains d JOIN tenants t ON t.id = d.tenant_id "
                           "WHERE d.domain = $1", 1, p);
            if (strcmp(owner, slug) != 0) {
                snprintf(err, sizeof(err), "'%.200s' is not a domain of '%s'", domain, slug);
                rc = TN_NOTFOUND;
            } else {
                rc = registry_domain_remove(adm.reg, domain, err, sizeof(err));
            }
        }
    } else {
        /* migrate, move: the tenancy command. */
        buf out = BUF_INIT;
        int st;
        if (strcmp(x->name, "migrate") == 0) {
            const char *args[] = {"migrate", slug};
            st = run_cli(args, 2, &out);
        } else {
            const char *to = adm_form(a, "to");
            if (to == NULL || tenancy_placement(adm.env.tcfg, to) == NULL) {
                buf_free(&out);
                return done(a, slug, false, "Choose a placement this host knows.", NULL);
            }
            snprintf(detail, sizeof(detail), "to %s", to);
            const char *args[] = {"move", slug, "--to", to};
            st = run_cli(args, 4, &out);
        }
        const char *text = tn_strdup(a->r, out.p ? out.p : "");
        buf_free(&out);
        audit(a, x->name, slug, detail, st == 0 ? "ok" : "error");
        return done(a, slug, st == 0,
                    st == 0 ? "The command finished." : "The command failed (exit status and "
                                                        "output below).",
                    text ? text : "");
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
            const char *args[8];
            int n = 0;
            args[n++] = "tenant";
            args[n++] = "create";
            args[n++] = slug;
            if (name && name[0]) {
                args[n++] = "--name";
                args[n++] = name;
            }
            if (domain && domain[0]) {
                args[n++] = "--domain";
                args[n++] = domain;
            }
            int st = run_cli(args, n, &output);
            audit(a, "create", slug, name ? name : "", st == 0 ? "ok" : "error");
            if (st == 0) {
                buf_free(&output);
                buf h = BUF_INIT;
                buf_puts(&h, "/t/");
                buf_puts(&h, slug);
                int rs = send_redirect(a, h.p ? h.p : "/");
                buf_free(&h);
                return rs;
            }
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
    buf_puts(o, "\"></label><p class=\"muted\">Runs <code>tenancy tenant create</code>: the "
                "tenant's storage is created in the default placement.</p>"
                "<label class=\"check\"><input type=\"checkbox\" name=\"confirm\" value=\"yes\" "
                "id=\"new-confirm\" required> create this tenant</label>"
                "<div class=\"row\"><button type=\"submit\" class=\"primary\" id=\"create\">"
                "Create</button></div></form></section>");
    page_end(a);
    return send_html(a, error ? 400 : 200);
}
