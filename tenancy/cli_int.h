/*
 * cli_int.h — what the files of the `tenancy` command line share (tenancy/cli*.c only).
 *
 * Shape: cli.c owns main(): the global options, the command table, argument parsing, the
 * configuration and the registry connection, error reporting and where output goes. Each
 * cli_<group>.c implements the commands of one group as cli_cmd_fn functions that get the
 * parsed arguments and an open registry, and either print their result (text or JSON, see
 * below) and return 0, or return what cli_fail()/cli_usage() return.
 *
 * Output: in text mode a command prints to stdout as it likes. In JSON mode it appends ONE
 * JSON value to c->out and prints nothing itself; cli.c writes that value, or, when the
 * command failed, only {"error": ..., "code": ...}, so stdout always holds exactly one JSON
 * document. Errors are also written to stderr as "tenancy: message".
 *
 * Must not: be included outside tenancy/cli*.c; talk to a database except through
 * registry.h (the registry) and storage/ (a tenant's storage: target.h, migrate.h, copy.h,
 * inventory.h): no SQL in the CLI.
 */
#ifndef TN_TENANCY_CLI_INT_H
#define TN_TENANCY_CLI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/buf.h"
#include "fcgi/config.h"
#include "storage/target.h"
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
    tn_config *cfg;
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

/* "2026-12-02T14:43:07Z" (UTC) into out (at least 32 bytes); "" for 0. */
void cli_time(int64_t t, char *out, size_t n);

/* The JSON object of a tenant (every field, its domains, its settings) onto b. */
void cli_json_tenant(buf *b, const tenant_rec *t, const registry_domain *d, int nd);

/* In JSON mode, after a change: {"ok": true, "tenant": {...}} read back from the registry
 * (without "tenant" if that read fails: the change itself was made). */
void cli_json_changed(cli *c, const char *slug);

/* Deferred registry commits in a cli_jobs run: in tenant create --from-file each worker
 * defers its connection's commits (registry_defer_sync), flushes them at most every
 * CLI_FLUSH_MS with cli_flush_due and when it ends; in migrate the parent writes the
 * results in batches on a connection of its own, deferred the same way. Either way the
 * parent, once the workers are gone, flushes once more with cli_flush_all (opening the
 * registry into c->reg when it is not open) before it reports anything. A killed worker
 * loses nothing it committed; a power loss, at most the last CLI_FLUSH_MS of entries.
 * cli_flush_all: TN_OK, or the error with err set. */
#define CLI_FLUSH_MS 1000
void cli_flush_due(registry *r, int64_t *flushed_ms);
void cli_flush_now(registry *r);   /* a worker's, as it ends; NULL is fine */
int cli_flush_all(cli *c, char *err, size_t errlen);

/* Before cli_jobs_start: load the PostgreSQL driver when the registry or a placement needs
 * it, so the forked workers share it instead of each loading libpq and its ~30 libraries
 * again. Nothing is opened; a failure is left for the workers' own opens to report. */
void cli_preload_drivers(const cli *c);

/* The owner of the workers (`user`/`group` of tenancyd.conf) when root runs the CLI, so that
 * what it creates (state_dir, the registry, tenants' SQLite files) stays theirs; *uid stays
 * -1 when there is nothing to do. TN_OK or TN_INVALID (no such user or group). */
int cli_workers_owner(const tn_config *cfg, uid_t *uid, gid_t *gid, char *err, size_t errlen);
/* chown path to them; a missing path is TN_OK unless must_exist. TN_OK or TN_IO. */
int cli_give(const char *path, uid_t uid, gid_t gid, bool must_exist, char *err, size_t errlen);

/* A PostgreSQL target's role password, derived from the role key (tenancy/rolekey.h), as
 * the SCRAM verifier target_create sets: written to v and pointed at by t->role_verifier;
 * left unset when there is no role or no key, or when nothing logs in as the role from the
 * start (login_as_role false: the console sets the password when it first logs in). */
#define CLI_VERIFIER_MAX 200
void cli_role_verifier(cli *c, storage_target *t, char v[CLI_VERIFIER_MAX]);

/* Is the registry a SQLite file that is not there (its path in path)? Commands other than
 * init never create one. */
bool cli_registry_missing(const tenancy_config *tc, char *path, size_t n);

/* The command groups (cli_tenant.c, cli_domain.c, cli_migrate.c). */
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
/* The panel's options (admin.*) as a part of the configuration, added by main() before it
 * reads the file: the command reads admin.password_file. */
extern const config_part cli_admin_part;
int cli_admin_passwd(cli *c, const cli_args *a);   /* cli_admin.c */
int cli_migrate(cli *c, const cli_args *a);   /* migrate, migrate status */
/* cli_move.c and cli_lifecycle.c: a tenant's storage moved, exported, imported; the end of a
 * tenant (restore, purge) and the check of registry against storage. */
int cli_move(cli *c, const cli_args *a);
int cli_export(cli *c, const cli_args *a);
int cli_import(cli *c, const cli_args *a);
int cli_tenant_restore(cli *c, const cli_args *a);
int cli_purge(cli *c, const cli_args *a);
int cli_check(cli *c, const cli_args *a);

/* ---- the parallel runner (cli_jobs.c): tenancy migrate, tenancy tenant create --from-file ---- */

#define CLI_JOBS_MAX 64            /* workers at most (-j) */
#define CLI_JOBS_RESULT_MAX 4096   /* a result is written whole in one write (PIPE_BUF) */

/* What a task is. Tasks are the indexes 0..ntasks-1; a worker is a forked child that keeps
 * what it sets up in worker_begin (its own registry and storage connections) for all its
 * tasks. A result is result_size bytes (<= CLI_JOBS_RESULT_MAX) and starts with the task's
 * int32_t index, set by the runner. */
typedef struct cli_jobs_ops {
    size_t result_size;
    void (*worker_begin)(void *ctx);                       /* in the worker; may be NULL */
    bool (*work)(void *ctx, int idx, void *result);        /* in the worker: the result is
                                                              zeroed but for its index; false
                                                              ends the worker once it is sent */
    void (*worker_end)(void *ctx);                         /* in the worker; may be NULL */
    bool (*take)(void *ctx, const void *result);           /* in the parent: true = failed */
    void (*lost)(void *ctx, int idx, const char *why);     /* in the parent: its worker died
                                                              with it in hand (a failure) */
    int (*idle)(void *ctx);                                /* in the parent, once the workers
                                                              have their next tasks: slow
                                                              bookkeeping that should not hold
                                                              them up; returns tasks that
                                                              turned failed; may be NULL */
    int hard_signal;   /* what a second SIGINT/SIGTERM sends the workers */
} cli_jobs_ops;

typedef struct cli_jobs {
    const cli_jobs_ops *ops;
    void *ctx;
    int ntasks, nworkers;
    pid_t pid[CLI_JOBS_MAX];
    int task_fd[CLI_JOBS_MAX];
    int busy[CLI_JOBS_MAX];      /* the task in hand, -1 when idle */
    bool alive[CLI_JOBS_MAX];
    int result_fd;
    int next;                    /* the next task to hand out; those from here were not */
    int limit;                   /* hand out tasks below this index only (a canary) */
    int done, failed;
    const char *stopped;         /* why the run stopped early, NULL when it did not */
    bool bar;                    /* the progress bar (stderr is a terminal) */
    int64_t t0, last_bar;
    bool started;
    struct sigaction old_int, old_term;
} cli_jobs;

/* Install the stop handlers (SIGINT, SIGTERM) and fork min(nworkers, ntasks) workers. The
 * caller's registry connection must be closed first (a worker opens its own; the caller
 * may open one again once they are forked). TN_OK, or TN_IO with err set (cli_jobs_finish
 * still ends the ones started). */
int cli_jobs_start(cli_jobs *j, const cli_jobs_ops *ops, void *ctx, int ntasks, int nworkers,
                   char *err, size_t errlen);
/* Hand out tasks [j->next, limit) until all came back or the run stopped (a signal, stop on
 * error, no worker left); the progress bar meanwhile. May be called again (after a canary). */
void cli_jobs_run(cli_jobs *j, int limit, bool stop_on_error);
/* End the workers (each after the task in hand), clear the bar, restore the handlers. */
void cli_jobs_finish(cli_jobs *j);

/* cli_migrate.c, for the create path too: a path option of tenancyd.conf (storage.migrations,
 * storage.seed), a relative one taken from the configuration file's folder; and the
 * migration set of storage.migrations (empty when it is not set), or what cli_fail returns. */
struct migration_set;
void cli_conf_path(const cli *c, const char *value, char *out, size_t outlen);
int cli_migrations_load(cli *c, struct migration_set **out);

#endif
