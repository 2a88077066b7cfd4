/*
 * move.c — `tenancy move`, `tenancy export` and `tenancy import`: their arguments, the
 * progress on a terminal, and the report of what ops_move, ops_export and ops_import
 * (tenancy/ops_move.c: the steps, the copy, what a failure undoes) did.
 *
 * Must not: write to stdout before the operation ended (the progress is on stderr), or
 * show progress unless stderr is a terminal and the output is text.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"
#include "core/rc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double rate(int64_t rows, int64_t ms)
{
    return ms > 0 ? (double)rows * 1000.0 / (double)ms : (double)rows * 1000.0;
}

/* Where a copy's progress goes: the terminal (tty), the progress file (file). */
typedef struct copy_show {
    bool tty;
    int64_t last;
    const char *file;
    int64_t file_last;
} copy_show;

/* Move and import: on a terminal the notes, and one line per table rewritten as rows arrive
 * (at most 10 times a second); with --progress-file the tables copied and the one in hand,
 * at most every 250 ms and at each table's end. */
static void copy_progress(void *ctx, const ops_progress *p)
{
    copy_show *s = ctx;
    int64_t now = clock_mono_ms();
    if (s->file != NULL && p->table != NULL && (p->table_done || now - s->file_last >= 250)) {
        (void)ops_progress_write(s->file, p);   /* the move does not depend on it */
        s->file_last = now;
    }
    if (!s->tty)
        return;
    int64_t *last = &s->last;
    if (p->note != NULL) {
        fprintf(stderr, "%s\n", p->note);
        return;
    }
    if (p->table == NULL)
        return;
    if (!p->table_done && now - *last < 100)
        return;
    *last = now;
    fprintf(stderr, "\r  %-28.28s %10lld", p->table, (long long)p->rows);
    if (p->rows_want >= 0)
        fprintf(stderr, " / %-10lld", (long long)p->rows_want);
    fprintf(stderr, " rows %10.0f rows/s%s", rate(p->rows, p->elapsed_ms),
            p->table_done ? "\n" : "");
    fflush(stderr);
}

/* Export to a file, on a terminal: a table's count as it is read, then its rate. */
static void export_progress(void *ctx, const ops_progress *p)
{
    (void)ctx;
    if (p->table == NULL)
        return;
    if (p->table_done)
        fprintf(stderr, "\r  %-28.28s %10lld rows %10.0f rows/s\n", p->table,
                (long long)p->rows, rate(p->rows, p->elapsed_ms));
    else
        fprintf(stderr, "\r  %-28.28s %10lld / %-10lld rows", p->table, (long long)p->rows,
                (long long)p->rows_want);
    fflush(stderr);
}

/* The report of a copy: per table lines (text) or "tables", "rows"... members (JSON). */
static void report(cli *c, const ops_copy_report *j)
{
    int64_t ms = j->ms;
    if (c->json) {
        buf *b = &c->out;
        buf_puts(b, ",\"tables\":[");
        for (int i = 0; i < j->ntables; i++) {
            buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
            buf_json_str(b, j->tables[i].name);
            buf_puts(b, ",\"rows\":");
            buf_i64(b, j->tables[i].rows);
            buf_printf(b, ",\"seconds\":%.3f}", (double)j->tables[i].ms / 1000.0);
        }
        buf_puts(b, "],\"rows\":");
        buf_i64(b, j->rows);
        buf_printf(b, ",\"seconds\":%.3f,\"rows_per_second\":%.0f", (double)ms / 1000.0,
                   rate(j->rows, ms));
        buf_puts(b, ",\"schema\":");
        buf_json_str(b, j->migrations ? "migrations" : "definitions");
        buf_puts(b, ",\"notes\":[");
        for (int i = 0; i < j->nnotes; i++) {
            if (i)
                buf_putc(b, ',');
            buf_json_str(b, j->notes[i]);
        }
        buf_putc(b, ']');
        return;
    }
    for (int i = 0; i < j->ntables; i++)
        printf("  %-30s %10lld rows\n", j->tables[i].name, (long long)j->tables[i].rows);
    printf("%d table%s, %lld rows in %.2f s (%.0f rows/s); tables %s\n", j->ntables,
           j->ntables == 1 ? "" : "s", (long long)j->rows, (double)ms / 1000.0,
           rate(j->rows, ms), j->why_defs);
    for (int i = 0; i < j->nnotes; i++)
        printf("note: %s\n", j->notes[i]);
}

/* ---- move ------------------------------------------------------------------------------------- */

int cli_move(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    ops_move_opts o = {.to = cli_opt(a, "--to"), .drain_s = 2};
    int rc = cli_opt_int(c, a, "--drain", 0, 3600, &o.drain_s);
    if (rc != 0)
        return rc;
    if (o.to == NULL)
        return cli_usage(c, "'move' needs --to PLACEMENT");
    o.drop_source = cli_opt(a, "--drop-source") != NULL;
    o.copy_definitions = cli_opt(a, "--copy-definitions") != NULL;
    ops_env e;
    cli_ops_env(c, &e);
    copy_show show = {.tty = !c->json && isatty(STDERR_FILENO) == 1,
                      .file = cli_opt(a, "--progress-file")};
    if (show.tty || show.file != NULL) {
        e.progress = copy_progress;
        e.progress_ctx = &show;
    }
    ops_moved *m = calloc(1, sizeof(*m));
    char err[2600];
    rc = m == NULL ? tn_errf(err, sizeof(err), TN_NOMEM, "out of memory")
                   : ops_move(&e, slug, &o, m, err, sizeof(err));
    if (rc != TN_OK) {
        free(m);
        return cli_fail(c, rc, "%s", err);
    }
    const char *prev = tenant_state_name(m->state);
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"slug\":");
        buf_json_str(&c->out, slug);
        buf_puts(&c->out, ",\"from\":{\"placement\":");
        buf_json_str(&c->out, m->from_placement);
        buf_puts(&c->out, ",\"kind\":");
        buf_json_str(&c->out, m->from_kind);
        buf_puts(&c->out, ",\"storage\":");
        buf_json_str(&c->out, m->from_storage);
        buf_puts(&c->out, "},\"to\":{\"placement\":");
        buf_json_str(&c->out, o.to);
        buf_puts(&c->out, ",\"kind\":");
        buf_json_str(&c->out, m->to_kind);
        buf_puts(&c->out, ",\"storage\":");
        buf_json_str(&c->out, m->to_storage);
        buf_puts(&c->out, "},\"state\":");
        buf_json_str(&c->out, prev);
        report(c, &m->copy);
        buf_puts(&c->out, m->source_dropped ? ",\"source_dropped\":true}"
                                            : ",\"source_dropped\":false}");
    } else {
        printf("moved '%s' from %s (%s) to %s (%s); it is %s again\n", slug, m->from_placement,
               m->from_where, o.to, m->to_where, prev);
        report(c, &m->copy);
        if (m->source_dropped)
            printf("source dropped: %s\n", m->from_where);
        else if (!o.drop_source)
            printf("source kept: %s ('tenancy check' reports it as an orphan until it is "
                   "removed)\n", m->from_where);
    }
    int status = 0;
    if (m->drop_rc != TN_OK) {
        c->keep_out = true;
        status = cli_fail(c, m->drop_rc, "moved, but the source could not be dropped: %s",
                          m->drop_err);
    }
    ops_copy_free(&m->copy);
    free(m);
    return status;
}

/* ---- export ----------------------------------------------------------------------------------- */

int cli_export(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    const char *file = cli_opt(a, "-o");
    if (file != NULL && (file[0] == '\0' || strcmp(file, "-") == 0))
        file = NULL;
    if (file == NULL && c->json)
        return cli_usage(c, "--json needs -o FILE (without it the dump is standard output)");
    ops_env e;
    cli_ops_env(c, &e);
    if (!c->json && file != NULL && isatty(STDERR_FILENO) == 1)
        e.progress = export_progress;
    ops_exported x;
    char err[2600];
    int rc = ops_export(&e, slug, file, stdout, &x, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"slug\":");
        buf_json_str(&c->out, slug);
        buf_puts(&c->out, ",\"file\":");
        buf_json_str(&c->out, file);
        buf_printf(&c->out, ",\"tables\":%d,\"rows\":%lld,\"migration_version\":", x.tables,
                   (long long)x.rows);
        buf_json_str(&c->out, x.version);
        buf_printf(&c->out, ",\"seconds\":%.3f}", (double)x.ms / 1000.0);
    } else if (file != NULL) {
        printf("exported '%s' to %s: %d table%s, %lld rows in %.2f s (%.0f rows/s)\n", slug,
               file, x.tables, x.tables == 1 ? "" : "s", (long long)x.rows,
               (double)x.ms / 1000.0, rate(x.rows, x.ms));
    }
    return 0;
}

/* ---- import ----------------------------------------------------------------------------------- */

int cli_import(cli *c, const cli_args *a)
{
    const char *file = a->pos[0];
    ops_import_opts o = {cli_opt(a, "--slug"), cli_opt(a, "--placement"),
                         cli_opt(a, "--no-domains") != NULL};
    const tenancy_config *tc = &c->cfg->tenancy;
    const char *pname = o.placement != NULL ? o.placement : tc->default_placement;
    if (tenancy_placement(tc, pname) == NULL)   /* said before the file is opened */
        return cli_fail(c, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared with "
                                        "placement.%s.dsn in tenancyd.conf)", pname, pname);
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (f == NULL)
        return cli_fail(c, errno == ENOENT ? TN_NOTFOUND : TN_IO, "cannot open %s: %s", file,
                        strerror(errno));
    ops_env e;
    cli_ops_env(c, &e);
    copy_show show = {.tty = !c->json && isatty(STDERR_FILENO) == 1};
    if (show.tty) {
        e.progress = copy_progress;
        e.progress_ctx = &show;
    }
    ops_imported *m = calloc(1, sizeof(*m));
    char err[2600];
    int rc = m == NULL ? tn_errf(err, sizeof(err), TN_NOMEM, "out of memory")
                       : ops_import(&e, f, file, &o, m, err, sizeof(err));
    if (f != stdin)
        fclose(f);
    if (rc != TN_OK) {
        free(m);
        return cli_fail(c, rc, "%s", err);
    }
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"slug\":");
        buf_json_str(&c->out, m->slug);
        buf_puts(&c->out, ",\"placement\":");
        buf_json_str(&c->out, m->placement);
        buf_puts(&c->out, ",\"storage\":");
        buf_json_str(&c->out, m->storage);
        buf_puts(&c->out, ",\"migration_version\":");
        buf_json_str(&c->out, m->version);
        report(c, &m->copy);
        buf_putc(&c->out, '}');
    } else {
        printf("imported '%s' into %s (%s %s); it is active\n", m->slug, m->placement,
               strcmp(m->kind, "sqlite") == 0 ? "file" : m->kind, m->storage);
        report(c, &m->copy);
    }
    ops_copy_free(&m->copy);
    free(m);
    return 0;
}
