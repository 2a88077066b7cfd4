/*
 * main.c — `tenancy`, the command line of the tenant registry: main(), the command table,
 * argument parsing, configuration, errors and output (see cli_int.h for the shape).
 *
 *   tenancy [-c FILE] [--json] COMMAND [ARGS]     (every command: tenancy -h, tenancy(1))
 *
 * Owns: the global options, the one table of commands (the help, `--commands` and the
 * man-page check all read it), `tenancy init`, exit statuses (0 ok, 1 failed, 2 usage) and
 * the rule that with --json stdout holds exactly one JSON document, success or failure.
 * Must not: change the registry other than through registry.h, print anything to stdout
 * after a failure, or echo a PostgreSQL conninfo (it may hold a password).
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"
#include "core/conf.h"
#include "core/log.h"
#include "core/rc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CONF "/etc/tenancy/tenancyd.conf"

static int cmd_init(cli *c, const cli_args *a);

/* ---- the command table ------------------------------------------------------------------------ */

static const cli_optdef create_opts[] = {{"--name", CLI_VALUE, "NAME"},
                                         {"--domain", CLI_LIST, "DOMAIN"},
                                         {"--state", CLI_VALUE, "active|provisioning"},
                                         {"--max-workers", CLI_VALUE, "N"},
                                         {"--setting", CLI_LIST, "KEY=VALUE"},
                                         {"--placement", CLI_VALUE, "NAME"},
                                         {"--from-template", CLI_FLAG, NULL},
                                         {"--no-seed", CLI_FLAG, NULL},
                                         {"--from-file", CLI_VALUE, "FILE"},
                                         {"-j", CLI_VALUE, "N"},
                                         {NULL, 0, NULL}};
static const cli_optdef list_opts[] = {{"--state", CLI_VALUE, "STATE"},
                                       {"--search", CLI_VALUE, "TEXT"},
                                       {"--limit", CLI_VALUE, "N"},
                                       {"--after", CLI_VALUE, "SLUG"},
                                       {NULL, 0, NULL}};
static const cli_optdef set_opts[] = {{"--max-workers", CLI_VALUE, "N"}, {NULL, 0, NULL}};
static const cli_optdef domain_add_opts[] = {{"--primary", CLI_FLAG, NULL}, {NULL, 0, NULL}};
/* tenancy migrate (cli/migrate.c) */
static const cli_optdef migrate_opts[] = {{"--all", CLI_FLAG, NULL},
                                          {"-j", CLI_VALUE, "N"},
                                          {"--canary", CLI_VALUE, "K"},
                                          {"--stop-on-error", CLI_FLAG, NULL},
                                          {"--status", CLI_FLAG, NULL},
                                          {"--progress-file", CLI_VALUE, "FILE"},
                                          {NULL, 0, NULL}};

/* tenancy admin passwd (cli/admin.c) */
static const cli_optdef admin_passwd_opts[] = {{"--stdin", CLI_FLAG, NULL},
                                               {"--generate", CLI_FLAG, NULL},
                                               {NULL, 0, NULL}};
/* tenancy move, export, import, purge (cli/move.c, cli/lifecycle.c) */
static const cli_optdef move_opts[] = {{"--to", CLI_VALUE, "PLACEMENT"},
                                       {"--drop-source", CLI_FLAG, NULL},
                                       {"--drain", CLI_VALUE, "SECONDS"},
                                       {"--copy-definitions", CLI_FLAG, NULL},
                                       {"--progress-file", CLI_VALUE, "FILE"},
                                       {NULL, 0, NULL}};
static const cli_optdef export_opts[] = {{"-o", CLI_VALUE, "FILE"}, {NULL, 0, NULL}};
static const cli_optdef import_opts[] = {{"--slug", CLI_VALUE, "SLUG"},
                                         {"--placement", CLI_VALUE, "PLACEMENT"},
                                         {"--no-domains", CLI_FLAG, NULL},
                                         {NULL, 0, NULL}};
static const cli_optdef purge_opts[] = {{"--expired", CLI_FLAG, NULL},
                                        {"--now", CLI_FLAG, NULL},
                                        {NULL, 0, NULL}};

/* tenancy key (cli/key.c) */
static const cli_optdef key_create_opts[] = {{"--read-only", CLI_FLAG, NULL},
                                             {"--expires", CLI_VALUE, "DURATION|DATE"},
                                             {"--label", CLI_VALUE, "TEXT"},
                                             {NULL, 0, NULL}};

/* tenancy job (cli/job.c) */
static const cli_optdef job_list_opts[] = {{"--tenant", CLI_VALUE, "SLUG"},
                                           {"--central", CLI_FLAG, NULL},
                                           {"--state", CLI_VALUE, "STATE"},
                                           {"--limit", CLI_VALUE, "N"},
                                           {"--before", CLI_VALUE, "ID"},
                                           {NULL, 0, NULL}};
static const cli_optdef job_tenant_opts[] = {{"--tenant", CLI_VALUE, "SLUG"}, {NULL, 0, NULL}};
static const cli_optdef job_unschedule_opts[] = {{"--tenant", CLI_VALUE, "SLUG"},
                                                 {"--central", CLI_FLAG, NULL},
                                                 {"--app", CLI_VALUE, "NAME"},
                                                 {NULL, 0, NULL}};
static const cli_optdef job_schedule_opts[] = {{"--tenant", CLI_VALUE, "SLUG"},
                                               {"--central", CLI_FLAG, NULL},
                                               {"--app", CLI_VALUE, "NAME"},
                                               {"--payload", CLI_VALUE, "TEXT"},
                                               {NULL, 0, NULL}};
static const cli_optdef job_enqueue_opts[] = {{"--tenant", CLI_VALUE, "SLUG"},
                                              {"--central", CLI_FLAG, NULL},
                                              {"--app", CLI_VALUE, "NAME"},
                                              {"--payload", CLI_VALUE, "TEXT"},
                                              {"--delay", CLI_VALUE, "SECONDS"},
                                              {"--priority", CLI_VALUE, "N"},
                                              {"--unique", CLI_VALUE, "KEY"},
                                              {"--max-attempts", CLI_VALUE, "N"},
                                              {NULL, 0, NULL}};

static const cli_optdef check_opts[] = {{"--repair-roles", CLI_FLAG, NULL},
                                        {"--keep-shared-login", CLI_FLAG, NULL},
                                        {NULL, 0, NULL}};

/* tenancy run (cli/run.c) */
static const cli_optdef run_opts[] = {{"--tenant", CLI_LIST, "SLUG"},
                                      {"--all", CLI_FLAG, NULL},
                                      {"--state", CLI_VALUE, "STATE[,STATE...]"},
                                      {"--placement", CLI_VALUE, "NAME"},
                                      {"-j", CLI_VALUE, "N"},
                                      {"--timeout", CLI_VALUE, "DURATION"},
                                      {"--tail", CLI_VALUE, "BYTES"},
                                      {"--resume", CLI_VALUE, "FILE"},
                                      {"--output", CLI_FLAG, NULL},
                                      {"--progress-file", CLI_VALUE, "FILE"},
                                      {NULL, 0, NULL}};

static const cli_cmd commands[] = {
    {"init", "", 0, 0, NULL,
     "create state_dir, the registry's tables and the generation file (idempotent)", cmd_init,
     CLI_NO_REGISTRY},
    {"tenant create", "SLUG", 0, 1, create_opts,
     "create a tenant with its domains and settings, then its storage: migrations and seed "
     "(or a clone of storage.template); all or nothing; --from-file: one tenant a line, "
     "-j N at once", cli_tenant_create, 0},
    {"tenant list", "", 0, 0, list_opts, "list tenants in slug order, a page at a time",
     cli_tenant_list, 0},
    {"tenant show", "SLUG", 1, 1, NULL, "every field of a tenant, its domains and settings",
     cli_tenant_show, 0},
    {"tenant suspend", "SLUG", 1, 1, NULL, "stop serving a tenant (the host answers 403)",
     cli_tenant_state, 0},
    {"tenant resume", "SLUG", 1, 1, NULL, "serve a tenant again (state active)",
     cli_tenant_state, 0},
    {"tenant maintenance", "SLUG", 1, 1, NULL,
     "put a tenant in maintenance (the host answers 503)", cli_tenant_state, 0},
    {"tenant delete", "SLUG", 1, 1, NULL,
     "mark a tenant deleted (state deleting: the host answers 404); restorable for "
     "storage.delete_grace, then 'tenancy purge' removes it",
     cli_tenant_state, 0},
    {"tenant restore", "SLUG", 1, 1, NULL,
     "bring a deleted tenant back (state active) while its grace period lasts",
     cli_tenant_restore, 0},
    {"tenant set", "SLUG", 1, 1, set_opts, "change a tenant's limits", cli_tenant_set, 0},
    {"domain add", "SLUG DOMAIN", 2, 2, domain_add_opts, "give a tenant a domain",
     cli_domain_add, 0},
    {"domain remove", "DOMAIN", 1, 1, NULL, "take a domain from its tenant", cli_domain_remove,
     0},
    {"settings set", "SLUG KEY VALUE", 3, 3, NULL, "set one setting of a tenant",
     cli_settings_set, 0},
    {"settings unset", "SLUG KEY", 2, 2, NULL, "remove one setting of a tenant",
     cli_settings_unset, 0},
    {"settings get", "SLUG [KEY]", 1, 2, NULL, "a tenant's settings, or the value of one",
     cli_settings_get, 0},
    /* cli/key.c */
    {"key create", "SLUG", 1, 1, key_create_opts,
     "make an API key for a tenant's own clients and print its token, once (the registry "
     "keeps its hash)", cli_key_create, 0},
    {"key list", "[SLUG]", 0, 1, NULL,
     "API keys (of one tenant or all): prefix, flags, created, expires, last used, revoked; "
     "never a token", cli_key_list, 0},
    {"key revoke", "SLUG KEYID|PREFIX", 2, 2, NULL,
     "revoke an API key: every worker refuses it from its next request", cli_key_revoke, 0},
    /* cli/job.c */
    {"job list", "", 0, 0, job_list_opts,
     "jobs, newest first, a page at a time (--before ID), by tenant and state", cli_job_list, 0},
    {"job show", "ID", 1, 1, NULL,
     "every field of a job: payload, attempts, last error, progress, lease, times",
     cli_job_show, 0},
    {"job retry", "ID", 1, 1, NULL, "queue a dead or cancelled job again (attempts from 0)",
     cli_job_retry, 0},
    {"job cancel", "ID", 1, 1, NULL, "cancel a queued job", cli_job_cancel, 0},
    {"job counts", "", 0, 0, job_tenant_opts, "how many jobs are in each state",
     cli_job_counts, 0},
    {"job schedules", "", 0, 0, job_tenant_opts,
     "recurring jobs: cron spec, next and last run", cli_job_schedules, 0},
    {"job schedule", "NAME CRON", 2, 2, job_schedule_opts,
     "set a tenant's (or the host's) recurring job NAME at CRON (UTC)", cli_job_schedule, 0},
    {"job unschedule", "NAME", 1, 1, job_unschedule_opts,
     "remove a tenant's (or the host's) schedule of job NAME", cli_job_unschedule, 0},
    {"job enqueue", "NAME", 1, 1, job_enqueue_opts,
     "queue job NAME for a tenant's app (never a 'tenancy.' hook)", cli_job_enqueue, 0},
    /* before "migrate": the first full match wins */
    {"migrate status", "", 0, 0, NULL,
     "how many tenants are at each migration version (one registry query)", cli_migrate, 0},
    {"migrate", "[SLUG...]", 0, CLI_MAX_POS, migrate_opts,
     "apply storage.migrations to tenants, in parallel, resumable; a status table at the end",
     cli_migrate, 0},
    {"admin passwd", "[USER]", 0, 1, admin_passwd_opts,
     "set the admin panel's password of USER (default admin): asked twice, read from stdin, "
     "or generated and printed",
     cli_admin_passwd, CLI_NO_REGISTRY},
    /* cli/move.c, cli/lifecycle.c */
    {"move", "SLUG", 1, 1, move_opts,
     "move a tenant's storage to another placement (copied, verified, then switched)",
     cli_move, 0},
    {"export", "SLUG", 1, 1, export_opts,
     "write a tenant (registry entry, tables, rows) as a portable dump", cli_export, 0},
    {"import", "FILE", 1, 1, import_opts,
     "create a tenant and its storage from a dump (all or nothing)", cli_import, 0},
    {"purge", "[SLUG...]", 0, CLI_MAX_POS, purge_opts,
     "remove deleted tenants for good: registry tombstone, storage, registry rows",
     cli_purge, 0},
    {"run", "CMD [ARG...]", 1, CLI_MAX_POS, run_opts,
     "run a command once per tenant (active ones unless told) with the tenant's slug, id, "
     "storage and settings in its environment; -j N at once, resumable",
     cli_run, 0},
    {"check", "", 0, 0, check_opts,
     "compare the registry with the storage (missing, orphaned, stuck, tenant roles' drift); "
     "read-only unless --repair-roles",
     cli_check, 0},
};

/* ---- errors ----------------------------------------------------------------------------------- */

const char *cli_rc_code(int rc)
{
    switch (rc) {
    case TN_EXISTS: return "exists";
    case TN_NOTFOUND: return "notfound";
    case TN_INVALID: return "invalid";
    case TN_BUSY: return "busy";
    case TN_TIMEOUT: return "timeout";
    case TN_DENIED: return "denied";
    case TN_NOMEM: return "nomem";
    case TN_IO: return "io";
    default: return "error";
    }
}

int cli_fail(cli *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tn_verrf(c->err, sizeof(c->err), rc, fmt, ap);
    va_end(ap);
    c->code = cli_rc_code(rc);
    return CLI_EXIT_FAIL;
}

int cli_usage(cli *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tn_verrf(c->err, sizeof(c->err), TN_INVALID, fmt, ap);
    va_end(ap);
    c->code = "usage";
    return CLI_EXIT_USAGE;
}

/* ---- arguments -------------------------------------------------------------------------------- */

const char *cli_opt(const cli_args *a, const char *name)
{
    for (int i = a->nopts - 1; i >= 0; i--)
        if (strcmp(a->optname[i], name) == 0)
            return a->optval[i];
    return NULL;
}

int cli_opt_all(const cli_args *a, const char *name, const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < a->nopts && n < max; i++)
        if (strcmp(a->optname[i], name) == 0)
            out[n++] = a->optval[i];
    return n;
}

int cli_opt_int(cli *c, const cli_args *a, const char *name, long long lo, long long hi, int *v)
{
    const char *s = cli_opt(a, name);
    if (s == NULL)
        return 0;
    long long x;
    bool digits = s[0] != '\0';
    for (const char *p = s; *p; p++)
        digits = digits && *p >= '0' && *p <= '9';
    if (!digits || conf_parse_int(s, &x) != TN_OK || x < lo || x > hi)
        return cli_usage(c, "%s expects a whole number from %lld to %lld, not '%s'", name, lo,
                         hi, s);
    *v = (int)x;
    return 0;
}

static const cli_optdef *find_opt(const cli_cmd *cmd, const char *name, size_t len)
{
    for (const cli_optdef *o = cmd->opts; o != NULL && o->name != NULL; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

/* argv: what follows the command words. Sets *help for -h/--help. */
static int parse_args(cli *c, const cli_cmd *cmd, int argc, char **argv, cli_args *a,
                      bool *help)
{
    memset(a, 0, sizeof(*a));
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *t = argv[i];
        if (only_pos || t[0] != '-' || t[1] == '\0') {
            if (a->npos == CLI_MAX_POS || a->npos == cmd->maxpos)
                return cli_usage(c, "too many arguments for '%s': '%s'", cmd->name, t);
            a->pos[a->npos++] = t;
            continue;
        }
        if (strcmp(t, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(t, "--json") == 0) {
            c->json = true;
            continue;
        }
        if (strcmp(t, "-h") == 0 || strcmp(t, "--help") == 0) {
            *help = true;
            continue;
        }
        const char *eq = t[1] == '-' ? strchr(t, '=') : NULL;
        size_t len = eq ? (size_t)(eq - t) : strlen(t);
        const cli_optdef *o = find_opt(cmd, t, len);   /* "-j" too, when declared */
        if (o == NULL)
            return cli_usage(c, "unknown option '%.*s' for '%s'", (int)len, t, cmd->name);
        const char *val = "";
        if (o->kind == CLI_FLAG) {
            if (eq != NULL)
                return cli_usage(c, "%s takes no value", o->name);
        } else if (eq != NULL) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            return cli_usage(c, "%s needs a value (%s)", o->name, o->metavar);
        }
        if (o->kind != CLI_LIST && cli_opt(a, o->name) != NULL)
            return cli_usage(c, "%s is given twice", o->name);
        if (a->nopts == CLI_MAX_OPTS)
            return cli_usage(c, "too many options");
        a->optname[a->nopts] = o->name;
        a->optval[a->nopts++] = val;
    }
    if (*help)
        return 0;
    if (a->npos < cmd->minpos)
        return cli_usage(c, "'%s' needs %s", cmd->name, cmd->args);
    return 0;
}

/* ---- help ------------------------------------------------------------------------------------- */

static void usage_line(FILE *f, const cli_cmd *cmd)
{
    fprintf(f, "tenancy %s", cmd->name);
    if (cmd->args[0] != '\0')
        fprintf(f, " %s", cmd->args);
    for (const cli_optdef *o = cmd->opts; o != NULL && o->name != NULL; o++) {
        if (o->kind == CLI_FLAG)
            fprintf(f, " [%s]", o->name);
        else
            fprintf(f, " [%s %s]%s", o->name, o->metavar, o->kind == CLI_LIST ? "..." : "");
    }
    fputc('\n', f);
}

static void help(FILE *f)
{
    fprintf(f, "usage: tenancy [-c FILE] [--json] COMMAND [ARGS]\n"
               "       tenancy -h | --commands | --version\n"
               "\n"
               "The tenant registry of tenancyd: tenants, their domains, states and settings.\n"
               "\n"
               "Global options (before the command; --json also after it):\n"
               "  -c, --config FILE  tenancyd's configuration (default $TENANCY_CONF, else "
               DEFAULT_CONF ")\n"
               "      --json         machine output: one JSON document on stdout, errors too\n"
               "  -h, --help         this help; after a command, that command's usage\n"
               "      --commands     list every command and its options (for scripts)\n"
               "      --version      print the version\n"
               "\n"
               "Commands:\n");
    for (size_t i = 0; i < TN_ARRAY_LEN(commands); i++) {
        fputs("  ", f);
        usage_line(f, &commands[i]);
        fprintf(f, "      %s\n", commands[i].summary);
    }
    fprintf(f, "\nExit status: 0 done, 1 failed (nothing was changed), 2 usage error.\n"
               "See tenancy(1).\n");
}

static void list_commands(void)
{
    for (size_t i = 0; i < TN_ARRAY_LEN(commands); i++) {
        fputs(commands[i].name, stdout);
        fputc('\t', stdout);
        for (const cli_optdef *o = commands[i].opts; o != NULL && o->name != NULL; o++)
            printf("%s%s", o == commands[i].opts ? "" : " ", o->name);
        fputc('\n', stdout);
    }
}

/* ---- output helpers --------------------------------------------------------------------------- */

void cli_put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\n')
            fputs("\\n", f);
        else if (ch == '\t')
            fputs("\\t", f);
        else if (ch == '\\')
            fputs("\\\\", f);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
}

void cli_put_cell(FILE *f, const char *s, int width)
{
    size_t n = strlen(s);
    if (n > (size_t)width)
        n = utf8_valid_prefix(s, (size_t)width);
    int shown = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, f);
        if ((ch & 0xC0) != 0x80)
            shown++;   /* count characters, not bytes, for the padding */
    }
    for (; shown < width; shown++)
        fputc(' ', f);
}

void cli_put_row(FILE *f, const cli_cell *cells, int n, const char *last)
{
    for (int i = 0; i < n; i++) {
        cli_put_cell(f, cells[i].text, cells[i].width);
        fputc(' ', f);
    }
    cli_put_text(f, last);
    fputc('\n', f);
}

void cli_json_tenant(buf *b, const tenant_rec *t, const registry_domain *d, int nd)
{
    char ts[32];
    buf_puts(b, "{\"id\":");
    buf_i64(b, t->id);
    buf_puts(b, ",\"slug\":");
    buf_json_str(b, t->slug);
    buf_puts(b, ",\"name\":");
    buf_json_str(b, t->name);
    buf_puts(b, ",\"state\":");
    buf_json_str(b, tenant_state_name(t->state));
    buf_puts(b, ",\"placement\":");
    buf_json_str(b, t->placement);
    buf_puts(b, ",\"storage\":");
    buf_json_str(b, t->storage);
    buf_puts(b, ",\"max_workers\":");
    buf_i64(b, t->max_workers);
    ops_utc_time(t->created_at, ts, sizeof(ts));
    buf_puts(b, ",\"created_at\":");
    buf_json_str(b, ts);
    ops_utc_time(t->updated_at, ts, sizeof(ts));
    buf_puts(b, ",\"updated_at\":");
    buf_json_str(b, ts);
    buf_puts(b, ",\"primary_domain\":");
    const char *primary = NULL;
    for (int i = 0; i < nd && primary == NULL; i++)
        if (d[i].primary)
            primary = d[i].domain;
    buf_json_str(b, primary);   /* null when none */
    buf_puts(b, ",\"domains\":[");
    for (int i = 0; i < nd; i++) {
        buf_puts(b, i ? ",{\"domain\":" : "{\"domain\":");
        buf_json_str(b, d[i].domain);
        buf_puts(b, d[i].primary ? ",\"primary\":true}" : ",\"primary\":false}");
    }
    buf_puts(b, "],\"settings\":{");
    for (int i = 0; i < t->nsettings; i++) {
        if (i)
            buf_putc(b, ',');
        buf_json_str(b, t->settings[i].key);
        buf_putc(b, ':');
        buf_json_str(b, t->settings[i].value);
    }
    buf_puts(b, "}}");
}

static int changed_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    buf *b = ctx;
    buf_puts(b, ",\"tenant\":");
    cli_json_tenant(b, t, d, nd);
    return TN_OK;
}

void cli_json_changed(cli *c, const char *slug)
{
    buf_puts(&c->out, "{\"ok\":true");
    buf tenant = BUF_INIT;
    if (registry_show(c->reg, slug, changed_cb, &tenant) == TN_OK && !tenant.oom)
        buf_append(&c->out, tenant.p, tenant.len);
    buf_free(&tenant);
    buf_putc(&c->out, '}');
}

/* ---- init ------------------------------------------------------------------------------------- */

void cli_ops_env(cli *c, ops_env *e)
{
    memset(e, 0, sizeof(*e));
    e->tc = &c->cfg->tenancy;
    e->conf_path = c->conf_path;
    e->user = c->cfg->user;
    e->group = c->cfg->group;
    e->reg = c->reg;
    ops_env_ready(e);
}

/* The harden notes of init, as they were always printed. */
static void init_note(void *ctx, const ops_progress *p)
{
    (void)ctx;
    if (p->note != NULL)
        fprintf(stderr, "tenancy: note: %s\n", p->note);
}

static int cmd_init(cli *c, const cli_args *a)
{
    (void)a;
    const tenancy_config *tc = &c->cfg->tenancy;
    char err[1200];
    ops_env e;
    cli_ops_env(c, &e);
    e.progress = init_note;
    ops_initialized in;
    int rc = ops_init(&e, &in, err, sizeof(err));
    c->reg = e.reg;
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    const char *backend = in.backend;
    bool sqlite = in.sqlite;
    bool key_made = in.key_made;
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"backend\":");
        buf_json_str(&c->out, backend);
        if (sqlite) {   /* a PostgreSQL conninfo may hold a password: never shown */
            buf_puts(&c->out, ",\"registry\":");
            buf_json_str(&c->out, tc->registry_uri);
        }
        buf_puts(&c->out, ",\"state_dir\":");
        buf_json_str(&c->out, tc->state_dir);
        buf_puts(&c->out, ",\"generation_file\":");
        buf_json_str(&c->out, tc->gen_path);
        buf_puts(&c->out, ",\"role_key\":");
        buf_json_str(&c->out, tc->role_key_path);
        buf_puts(&c->out, key_made ? ",\"role_key_made\":true}" : ",\"role_key_made\":false}");
    } else {
        printf("registry ready: %s\n", sqlite ? tc->registry_uri : "postgres (schema tenancy)");
        printf("state_dir: %s\ngeneration file: %s\nrole key: %s%s\n", tc->state_dir,
               tc->gen_path, tc->role_key_path, key_made ? " (made)" : "");
    }
    return 0;
}

/* ---- the registry ------------------------------------------------------------------------------- */

/* Open the registry a command works on. A SQLite file that is not there is not created
 * (only init may do that): a failed command changes nothing. */
static int open_registry(cli *c)
{
    const tenancy_config *tc = &c->cfg->tenancy;
    char path[4096];
    if (ops_registry_missing(tc, path, sizeof(path)))
        return cli_fail(c, TN_NOTFOUND, "no registry at %s (run 'tenancy init')", path);
    char err[1024];
    int rc = registry_open(tc->registry_uri, tc->gen_path, &c->reg, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "cannot open the registry: %s", err);
    rc = registry_ready(c->reg, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------- */

/* The command named by the words at argv (longest match); *used gets how many words. */
static const cli_cmd *find_command(int argc, char **argv, int *used)
{
    for (size_t i = 0; i < TN_ARRAY_LEN(commands); i++) {
        const char *name = commands[i].name;
        int w = 0;
        const char *p = name;
        while (w < argc) {
            size_t len = strcspn(p, " ");
            if (strlen(argv[w]) != len || strncmp(argv[w], p, len) != 0)
                break;
            w++;
            p += len;
            if (*p == '\0') {
                *used = w;
                return &commands[i];
            }
            p++;
        }
    }
    return NULL;
}

/* Write the result: the JSON value or the error. Returns the final exit status. */
static int finish(cli *c, int status)
{
    if (status != 0) {
        fprintf(stderr, "tenancy: %s\n", c->err);
        if (status == CLI_EXIT_USAGE && !c->json) {
            if (c->cmd != NULL) {
                fputs("usage: ", stderr);
                usage_line(stderr, c->cmd);
            } else {
                fputs("see 'tenancy -h'\n", stderr);
            }
        }
        if (c->json && c->keep_out && c->out.len > 0 && !c->out.oom) {
            buf_putc(&c->out, '\n');   /* the command's own document says what failed */
            fwrite(c->out.p, 1, c->out.len, stdout);
        } else if (c->json) {
            buf e = BUF_INIT;
            buf_puts(&e, "{\"error\":");
            buf_json_str(&e, c->err);
            buf_puts(&e, ",\"code\":");
            buf_json_str(&e, c->code ? c->code : "error");
            buf_puts(&e, "}\n");
            if (!e.oom)
                fwrite(e.p, 1, e.len, stdout);
            buf_free(&e);
        }
    } else if (c->json) {
        if (c->out.oom) {
            fprintf(stderr, "tenancy: out of memory\n");
            fputs("{\"error\":\"out of memory\",\"code\":\"nomem\"}\n", stdout);
            status = CLI_EXIT_FAIL;
        } else {
            if (c->out.len == 0)
                buf_puts(&c->out, "{\"ok\":true}");
            buf_putc(&c->out, '\n');
            fwrite(c->out.p, 1, c->out.len, stdout);
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tenancy: cannot write the output: %s\n", strerror(errno));
        if (status == 0)
            status = CLI_EXIT_FAIL;
    }
    return status;
}

int main(int argc, char **argv)
{
    cli c;
    memset(&c, 0, sizeof(c));
    c.tty = isatty(STDOUT_FILENO) == 1;
    c.conf_path = getenv("TENANCY_CONF");
    if (c.conf_path == NULL || c.conf_path[0] == '\0')
        c.conf_path = DEFAULT_CONF;
    log_init("tenancy", TN_LOG_WARN);

    /* Global options, up to the first word that is not one. */
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *t = argv[i];
        if (strcmp(t, "-c") == 0 || strcmp(t, "--config") == 0) {
            if (i + 1 == argc)
                return finish(&c, cli_usage(&c, "%s needs a file", t));
            c.conf_path = argv[++i];
        } else if (strncmp(t, "--config=", 9) == 0) {
            c.conf_path = t + 9;
        } else if (strcmp(t, "--json") == 0) {
            c.json = true;
        } else if (strcmp(t, "-h") == 0 || strcmp(t, "--help") == 0) {
            help(stdout);
            return fflush(stdout) == 0 ? 0 : 1;
        } else if (strcmp(t, "--commands") == 0) {
            list_commands();
            return fflush(stdout) == 0 ? 0 : 1;
        } else if (strcmp(t, "--version") == 0 || strcmp(t, "-V") == 0) {
            printf("tenancy %s\n", PACKAGE_VERSION);
            return fflush(stdout) == 0 ? 0 : 1;
        } else if (strcmp(t, "--") == 0) {
            i++;
            break;
        } else {
            return finish(&c, cli_usage(&c, "unknown option '%s'", t));
        }
    }
    if (i == argc) {
        help(stderr);
        return finish(&c, cli_usage(&c, "no command given"));
    }
    int used = 0;
    const cli_cmd *cmd = find_command(argc - i, argv + i, &used);
    if (cmd == NULL) {
        /* "tenant" alone, or "tenant bogus": name the commands of that group. */
        char group[64] = "";
        for (size_t k = 0; k < TN_ARRAY_LEN(commands); k++) {
            size_t len = strcspn(commands[k].name, " ");
            if (commands[k].name[len] == ' ' && strlen(argv[i]) == len &&
                strncmp(commands[k].name, argv[i], len) == 0)
                snprintf(group, sizeof(group), "%s", argv[i]);
        }
        if (group[0] != '\0' && i + 1 < argc)
            return finish(&c, cli_usage(&c, "unknown command '%s %s' (see tenancy -h)", group,
                                        argv[i + 1]));
        if (group[0] != '\0')
            return finish(&c, cli_usage(&c, "'%s' needs a command (see tenancy -h)", group));
        return finish(&c, cli_usage(&c, "unknown command '%s' (see tenancy -h)", argv[i]));
    }
    c.cmd = cmd;
    cli_args a;
    bool want_help = false;
    int status = parse_args(&c, cmd, argc - i - used, argv + i + used, &a, &want_help);
    if (status != 0)
        return finish(&c, status);
    if (want_help) {
        fputs("usage: ", stdout);
        usage_line(stdout, cmd);
        printf("%s\n", cmd->summary);
        return fflush(stdout) == 0 ? 0 : 1;
    }

    conf_error cerr;
    c.cfg = cli_config_load(c.conf_path, &cerr);
    if (c.cfg == NULL) {
        char msg[1024];
        conf_error_format(&cerr, msg, sizeof(msg));
        status = cli_fail(&c, TN_INVALID, "configuration: %s", msg);
        c.code = "config";
        return finish(&c, status);
    }
    if (!(cmd->flags & CLI_NO_REGISTRY))
        status = open_registry(&c);
    if (status == 0)
        status = cmd->run(&c, &a);
    status = finish(&c, status);
    registry_close(c.reg);
    cli_config_free(c.cfg);
    buf_free(&c.out);
    return status;
}
