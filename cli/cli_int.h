/*
 * cli_int.h — what the files of the `tenancy` command line share (the files of cli/ only).
 *
 * Shape: cli/main.c owns main(): the global options, the command table, argument parsing, the
 * configuration and the registry connection, error reporting and where output goes. Each
 * other file implements the commands of one group as cli_cmd_fn functions that get the
 * parsed arguments and an open registry, call the tenant operations (tenancy/ops.h) or read
 * the registry, and either print the result (text or JSON, see below) and return 0, or
 * return what cli_fail()/cli_usage() return.
 *
 * Output: in text mode a command prints to stdout as it likes. In JSON mode it appends ONE
 * JSON value to c->out and prints nothing itself; cli/main.c writes that value, or, when the
 * command failed, only {"error": ..., "code": ...}, so stdout always holds exactly one JSON
 * document. Errors are also written to stderr as "tenancy: message".
 *
 * Must not: be included outside cli/; talk to a database except through registry.h (the
 * registry) and the tenant operations (tenancy/ops.h): no SQL and no storage/ in the CLI.
 */
#ifndef TN_CLI_CLI_INT_H
#define TN_CLI_CLI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/buf.h"
#include "cli/conf.h"
#include "tenancy/ops.h"
#include "tenancy/registry.h"

/* Exit statuses. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

typedef enum cli_opt_kind {
    CLI_FLAG,     /* --primary */
    CLI_VALUE,    /* --name NAME or --name=NAME, at most once */
    CLI_LIST      /* --domain D, repeatable */
} cli_opt_kind;

typedef struct cli_optdef {
    const char *name;       /* "--name" */
    cli_opt_kind kind;
    const char *metavar;    /* "NAME" (for the usage line) */
} cli_optdef;

#define CLI_MAX_POS 1024   /* tenancy migrate SLUG... */
#define CLI_MAX_OPTS 256

typedef struct cli_args {
    const char *pos[CLI_MAX_POS];
    int npos;
    const char *optname[CLI_MAX_OPTS];
    const char *optval[CLI_MAX_OPTS];   /* "" for a flag */
    int nopts;
} cli_args;

typedef struct cli cli;
typedef int (*cli_cmd_fn)(cli *c, const cli_args *a);

#define CLI_NO_REGISTRY 0x1u   /* the command opens (or makes) what it needs itself */

typedef struct cli_cmd {
    const char *name;           /* "tenant create" */
    const char *args;           /* positional arguments for the usage line: "SLUG" */
    int minpos, maxpos;
    const cli_optdef *opts;     /* terminated by {NULL}; NULL: none */
    const char *summary;        /* one line for the help */
    cli_cmd_fn run;
    unsigned flags;
} cli_cmd;

struct cli {
    bool json;
    bool tty;                   /* stdout is a terminal */
    const char *conf_path;
    cli_config *cfg;
    registry *reg;
    const cli_cmd *cmd;
    buf out;                    /* the JSON value (JSON mode) */
    char err[1024];             /* the error message, when a command failed */
    const char *code;           /* its JSON code: "exists", "notfound", "usage", ... */
    bool keep_out;              /* JSON mode: on failure, write c->out (a document that says
                                   what failed, with "error" and "code") instead of only
                                   {"error", "code"} (tenancy migrate's per-tenant table) */
};

/* Record an error: the message (printf style) and the tn_rc it came from; returns
 * CLI_EXIT_FAIL. Nothing may be printed to stdout after it. */
int cli_fail(cli *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The JSON code of a tn_rc: "exists", "notfound", "invalid", ..., "error". */
const char *cli_rc_code(int rc);

/* A usage error for the current command; returns CLI_EXIT_USAGE. */
int cli_usage(cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The value of a CLI_VALUE option ("" for a flag that is set), NULL when not given. */
const char *cli_opt(const cli_args *a, const char *name);

/* Every value of a CLI_LIST option, in order, into out (at most max); the count. */
int cli_opt_all(const cli_args *a, const char *name, const char **out, int max);

/* A non-negative decimal integer option (whole text) in [lo, hi]. 0, or a usage error
 * (return CLI_EXIT_USAGE) naming the option. *v unchanged when the option is absent. */
int cli_opt_int(cli *c, const cli_args *a, const char *name, long long lo, long long hi,
                int *v);

/* Text for a human: control characters escaped (\n, \t, \xNN), so a stored value can
 * never move the cursor or break a table row. */
void cli_put_text(FILE *f, const char *s);
/* The same, cut to at most `width` bytes (whole UTF-8 characters), then padded to it. */
void cli_put_cell(FILE *f, const char *s, int width);
/* A table row: each cell padded to its width and a space, then `last` (unpadded) and a
 * newline; every text through cli_put_cell's and cli_put_text's escaping. */
typedef struct cli_cell {
    const char *text;
    int width;
} cli_cell;
void cli_put_row(FILE *f, const cli_cell *cells, int n, const char *last);

/* The JSON object of a tenant (every field, its domains, its settings) onto b. */
void cli_json_tenant(buf *b, const tenant_rec *t, const registry_domain *d, int nd);

/* In JSON mode, after a change: {"ok": true, "tenant": {...}} read back from the registry
 * (without "tenant" if that read fails: the change itself was made). */
void cli_json_changed(cli *c, const char *slug);

/* The environment of the tenant operations (tenancy/ops.h) for this command: the tenancy
 * options, the configuration file, the registry (c->reg; an operation that forks hands back
 * a new one in e->reg, which the caller stores in c->reg again). No progress callback. */
void cli_ops_env(cli *c, ops_env *e);

/* The progress bar (bar.c) of a long run, on stderr when it is a terminal, and the progress
 * file when `file` is not NULL: cli_bar_draw is an ops_progress_fn whose ctx is a cli_bar set
 * up by cli_bar_init. */
typedef struct cli_bar {
    bool on;
    int64_t last;
    const char *file;
    int64_t file_last;
    char slug[64], outcome[16];  /* the last tenant that finished, for the file */
} cli_bar;
void cli_bar_init(cli_bar *b, const char *file);
void cli_bar_draw(void *ctx, const ops_progress *p);

/* The command groups (cli/tenant.c, cli/domain.c, cli/migrate.c). */
int cli_tenant_create(cli *c, const cli_args *a);
int cli_tenant_list(cli *c, const cli_args *a);
int cli_tenant_show(cli *c, const cli_args *a);
int cli_tenant_state(cli *c, const cli_args *a);   /* suspend, resume, maintenance, delete */
int cli_tenant_set(cli *c, const cli_args *a);
int cli_domain_add(cli *c, const cli_args *a);
int cli_domain_remove(cli *c, const cli_args *a);
int cli_settings_set(cli *c, const cli_args *a);
int cli_settings_unset(cli *c, const cli_args *a);
int cli_settings_get(cli *c, const cli_args *a);
int cli_admin_passwd(cli *c, const cli_args *a);   /* cli/admin.c */
int cli_key_create(cli *c, const cli_args *a);     /* cli/key.c */
int cli_key_list(cli *c, const cli_args *a);
int cli_key_revoke(cli *c, const cli_args *a);
int cli_job_list(cli *c, const cli_args *a);       /* cli/job.c */
int cli_job_show(cli *c, const cli_args *a);
int cli_job_retry(cli *c, const cli_args *a);
int cli_job_cancel(cli *c, const cli_args *a);
int cli_job_counts(cli *c, const cli_args *a);
int cli_job_schedules(cli *c, const cli_args *a);
int cli_job_schedule(cli *c, const cli_args *a);
int cli_job_unschedule(cli *c, const cli_args *a);
int cli_job_enqueue(cli *c, const cli_args *a);
int cli_migrate(cli *c, const cli_args *a);   /* migrate, migrate status */
/* cli/move.c and cli/lifecycle.c: a tenant's storage moved, exported, imported; the end of a
 * tenant (restore, purge) and the check of registry against storage. */
int cli_move(cli *c, const cli_args *a);
int cli_export(cli *c, const cli_args *a);
int cli_import(cli *c, const cli_args *a);
int cli_tenant_restore(cli *c, const cli_args *a);
int cli_purge(cli *c, const cli_args *a);
int cli_check(cli *c, const cli_args *a);
/* cli/run.c: a command once per tenant (tenancy/ops_run.c). */
int cli_run(cli *c, const cli_args *a);

#endif
