/*
 * console.c — the SQL console of one tenant: read-only, with a timeout and a row cap,
 * results as a table or exported as CSV or JSON.
 *
 * Read-only is the database's doing, not ours: nothing here looks at the SQL text for
 * keywords. SQLite: the tenant's file is opened read-only, the statement is prepared on the
 * native handle and refused unless sqlite3_stmt_readonly() says it writes nothing, and text
 * after the first statement is refused (one statement at a time); an authorizer on that
 * connection lets through only what a read needs (console_auth: SELECT, reads, an allow list
 * of built-in functions, the PRAGMAs that read) and refuses the rest, ATTACH, transactions,
 * load_extension() and fts3_tokenizer() among it. PostgreSQL: the statement runs alone
 * (PQexecParams refuses several) inside BEGIN READ ONLY with a transaction-local
 * statement_timeout, as a role that cannot act outside the database (store.c), and the
 * transaction is rolled back afterwards whatever it did; a statement that was given a
 * transaction id (it wrote something despite READ ONLY) is refused and its rows dropped. The
 * timeout is admin.query_timeout;
 * at most admin.row_cap rows are read. Every query is written to the audit log before it
 * runs, and its outcome after (audit.c).
 *
 * Must not: run the operator's SQL on a writable connection, or on another tenant's storage.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "admin/store.h"
#include "core/clock.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQL_MAX 65536

typedef struct result {
    int ncols;
    const char **cols;
    const char ***rows;
    int nrows;
    bool truncated;
    int64_t elapsed_us;
    int rc;                       /* TN_OK, or why it failed */
    char err[1024];
} result;

/* Only blanks and comments (and semicolons) from p on? */
static bool only_blank(const char *p)
{
    while (*p) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == ';') {
            p++;
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            if (e == NULL)
                return true;   /* an unterminated comment holds no statement */
            p = e + 2;
        } else {
            return false;
        }
    }
    return true;
}

static bool add_row(adm_req *a, result *res, const char **row)
{
    if (res->nrows == 0 || (res->nrows & (res->nrows - 1)) == 0) {
        int cap = res->nrows ? res->nrows * 2 : 64;
        const char ***nr = tn_alloc(a->r, (size_t)cap * sizeof(*nr));
        if (nr == NULL)
            return false;
        if (res->nrows)
            memcpy(nr, res->rows, (size_t)res->nrows * sizeof(*nr));
        res->rows = nr;
    }
    res->rows[res->nrows++] = row;
    return true;
}

/* The console's authorizer on its own read-only connection (it replaces the driver's, and
 * refuses all that one refuses). An allow list: what a read needs, and nothing else.
 *   - SELECT, reading any table or view of the file (the connection reaches no other file),
 *     and recursive common table expressions;
 *   - the built-in functions of console_functions below, by name: everything else, an
 *     unknown or app-defined function, load_extension() and fts3_tokenizer() (which leaks a
 *     library address and lets a query overwrite it: see storage/sqlite.c) included, is
 *     refused when the statement is prepared, before anything runs;
 *   - of the PRAGMAs only those that read: the ones about a table or index (any argument),
 *     and the settings asked without a value;
 *   - SQLITE_UPDATE of sqlite_master alone: SQLite asks it when a statement reads a
 *     table-valued function (pragma_table_info, json_each, dbstat) for the first time, as it
 *     sets the function up; no SQL can write sqlite_master on this connection (read-only
 *     file, DEFENSIVE, and sqlite3_stmt_readonly in run_sqlite).
 * Refused with it: ATTACH and DETACH (VACUUM INTO attaches at run time; run_sqlite refuses
 * it first as a write), transactions and savepoints (the console runs one statement; a BEGIN
 * could only leave a transaction open on the connection), every kind of DDL and DML. The
 * first refusal is described in ud, a struct console_refusal, for the message. */
struct console_refusal {
    char what[160];
};

static const char *const console_functions[] = {
    /* scalar */
    "abs", "char", "coalesce", "concat", "concat_ws", "format", "glob", "hex", "ifnull", "iif",
    "instr", "length", "like", "likelihood", "likely", "lower", "ltrim", "max", "min",
    "nullif", "octet_length", "printf", "quote", "random", "replace", "round", "rtrim", "sign",
    "soundex", "sqlite_version", "substr", "substring", "trim", "typeof", "unhex", "unicode",
    "unlikely", "upper",
    /* aggregate */
    "avg", "count", "group_concat", "string_agg", "sum", "total",
    /* window */
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value",
    /* date and time */
    "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
    "current_date", "current_time", "current_timestamp",
    /* math */
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos",
    "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow",
    "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
    /* JSON (-> and ->> are functions to the authorizer) */
    "json", "json_array", "json_array_length", "json_error_position", "json_extract",
    "json_insert", "json_object", "json_patch", "json_pretty", "json_quote", "json_remove",
    "json_replace", "json_set", "json_type", "json_valid", "json_group_array",
    "json_group_object", "jsonb", "jsonb_array", "jsonb_extract", "jsonb_insert",
    "jsonb_object", "jsonb_patch", "jsonb_remove", "jsonb_replace", "jsonb_set",
    "jsonb_group_array", "jsonb_group_object", "->", "->>",
    /* full-text search: MATCH and the auxiliary functions of FTS3/4 and FTS5 */
    "match", "snippet", "offsets", "matchinfo", "highlight", "bm25",
    NULL};
/* Left out on purpose, besides the dangerous ones: randomblob() and zeroblob() (one call can
 * ask for a gigabyte, and a read has no use for them), changes(), total_changes() and
 * last_insert_rowid() (about this connection, which writes nothing), sqlite_offset() and
 * sqlite_compileoption_*() (PRAGMA compile_options answers), optimize() (FTS: writes). */

static int console_auth(void *ud, int action, const char *a1, const char *a2, const char *db,
                        const char *trigger)
{
    static const char *const about[] = {"table_info", "table_xinfo", "table_list", "index_list",
                                        "index_info", "index_xinfo", "foreign_key_list",
                                        "foreign_key_check", "integrity_check", "quick_check",
                                        NULL};
    static const char *const settings[] = {"user_version", "schema_version", "application_id",
                                           "journal_mode", "page_count", "page_size",
                                           "freelist_count", "encoding", "foreign_keys",
                                           "data_version", "database_list", "collation_list",
                                           "function_list", "module_list", "pragma_list",
                                           "compile_options", NULL};
    struct console_refusal *r = ud;
    (void)db, (void)trigger;
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    case SQLITE_FUNCTION:   /* a2 is the function's name */
        for (int i = 0; a2 != NULL && console_functions[i]; i++)
            if (sqlite3_stricmp(a2, console_functions[i]) == 0)
                return SQLITE_OK;
        if (r->what[0] == '\0')
            snprintf(r->what, sizeof(r->what), "%.64s() is not one of the console's functions",
                     a2 != NULL ? a2 : "?");
        return SQLITE_DENY;
    case SQLITE_PRAGMA:
        for (int i = 0; a1 != NULL && about[i]; i++)
            if (sqlite3_stricmp(a1, about[i]) == 0)
                return SQLITE_OK;
        for (int i = 0; a1 != NULL && settings[i]; i++)
            if (sqlite3_stricmp(a1, settings[i]) == 0 && a2 == NULL)
                return SQLITE_OK;
        if (r->what[0] == '\0')
            snprintf(r->what, sizeof(r->what), "PRAGMA %.64s%s is not one the console reads",
                     a1 != NULL ? a1 : "?", a2 != NULL ? " with a value" : "");
        return SQLITE_DENY;
    case SQLITE_UPDATE:     /* a1 the table: see the banner */
        if (a1 != NULL && (strcmp(a1, "sqlite_master") == 0 || strcmp(a1, "sqlite_schema") == 0))
            return SQLITE_OK;
        break;
    default:
        break;
    }
    if (r->what[0] == '\0')
        snprintf(r->what, sizeof(r->what), "the console only reads");
    return SQLITE_DENY;
}

static void run_sqlite(adm_req *a, adm_store *s, const char *sql, result *res)
{
    sqlite3 *h = tn_db_native(s->db);
    /* Static: the authorizer keeps pointing at it until the connection is closed after this
     * function (store_close), and a worker serves one request at a time. */
    static struct console_refusal refusal;
    refusal.what[0] = '\0';
    if (sqlite3_set_authorizer(h, console_auth, &refusal) != SQLITE_OK) {
        snprintf(res->err, sizeof(res->err), "cannot set the console's authorizer: %s",
                 sqlite3_errmsg(h));
        res->rc = TN_ERR;
        return;
    }
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    int cap = adm.env.cfg->row_cap;
    int rc = sqlite3_prepare_v2(h, sql, -1, &st, &tail);
    if (rc != SQLITE_OK) {
        /* SQLite's message first (a refused function is SQLITE_ERROR with "not authorized
         * to use function: ...", a refused action SQLITE_AUTH), then which rule refused. */
        if (refusal.what[0] != '\0') {
            snprintf(res->err, sizeof(res->err), "%s (%s)", sqlite3_errmsg(h), refusal.what);
            res->rc = TN_DENIED;
        } else {
            snprintf(res->err, sizeof(res->err), "%s", sqlite3_errmsg(h));
            res->rc = rc == SQLITE_AUTH ? TN_DENIED : TN_INVALID;
        }
        return;
    }
    if (st == NULL) {
        snprintf(res->err, sizeof(res->err), "no statement");
        res->rc = TN_INVALID;
        return;
    }
    if (tail != NULL && !only_blank(tail)) {
        sqlite3_finalize(st);
        snprintf(res->err, sizeof(res->err), "one statement at a time: the text after the "
                                             "first statement was refused");
        res->rc = TN_DENIED;
        return;
    }
    if (!sqlite3_stmt_readonly(st)) {
        sqlite3_finalize(st);
        snprintf(res->err, sizeof(res->err), "refused: the statement would write (the console "
                                             "is read-only)");
        res->rc = TN_DENIED;
        return;
    }
    res->ncols = sqlite3_column_count(st);
    res->cols = tn_alloc(a->r, (size_t)(res->ncols ? res->ncols : 1) * sizeof(char *));
    for (int i = 0; res->cols && i < res->ncols; i++) {
        const char *n = sqlite3_column_name(st, i);
        res->cols[i] = tn_strdup(a->r, n ? n : "?");
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (res->nrows == cap) {
            res->truncated = true;
            break;
        }
        const char **row = tn_alloc(a->r, (size_t)(res->ncols ? res->ncols : 1) * sizeof(char *));
        if (row == NULL || !add_row(a, res, row)) {
            rc = SQLITE_NOMEM;
            break;
        }
        for (int i = 0; i < res->ncols; i++) {
            if (sqlite3_column_type(st, i) == SQLITE_NULL) {
                row[i] = NULL;
            } else if (sqlite3_column_type(st, i) == SQLITE_BLOB) {
                const unsigned char *b = sqlite3_column_blob(st, i);
                int n = sqlite3_column_bytes(st, i);
                char *x = tn_alloc(a->r, (size_t)n * 2 + 4);
                if (x != NULL) {
                    static const char hex[] = "0123456789abcdef";
                    x[0] = 'x', x[1] = '\'';
                    for (int k = 0; k < n; k++) {
                        x[2 + 2 * k] = hex[b[k] >> 4];
                        x[3 + 2 * k] = hex[b[k] & 15];
                    }
                    x[2 + 2 * n] = '\'';
                    x[3 + 2 * n] = '\0';
                }
                row[i] = x;
            } else {
                const unsigned char *t = sqlite3_column_text(st, i);
                row[i] = tn_strdup(a->r, t ? (const char *)t : "");
            }
        }
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        int ext = sqlite3_extended_errcode(h);
        res->rc = (ext & 0xff) == SQLITE_INTERRUPT ? TN_TIMEOUT
                  : (ext & 0xff) == SQLITE_READONLY || (ext & 0xff) == SQLITE_AUTH ? TN_DENIED
                                                                                  : TN_INVALID;
        snprintf(res->err, sizeof(res->err), "%s",
                 res->rc == TN_TIMEOUT ? "the query ran past admin.query_timeout"
                                       : sqlite3_errmsg(h));
    }
    sqlite3_finalize(st);
}

/* A query's rows through a cursor, at most cap + 1 of them: the server stops there, and a
 * result of millions of rows never reaches the worker whole (PQexecParams would read it all
 * before the cap could apply). Only a query can be a cursor; any other statement (SHOW,
 * EXPLAIN, or a write the transaction then refuses) runs as it is, after the savepoint has
 * undone the failed DECLARE. */
static int query_capped(adm_req *a, adm_store *s, const char *sql, int cap, tn_rows **rows)
{
    char *declare = arena_sprintf(a->r->arena, "DECLARE tn_admin_c NO SCROLL CURSOR FOR %s",
                                  sql);
    char fetch[64];
    snprintf(fetch, sizeof(fetch), "FETCH FORWARD %d FROM tn_admin_c", cap + 1);
    if (declare == NULL)
        return TN_NOMEM;
    int rc = tn_db_exec(s->db, "SAVEPOINT tn_admin_q", 0, NULL);
    if (rc != TN_OK)
        return rc;
    if (tn_db_exec(s->db, declare, 0, NULL) == TN_OK)
        return tn_db_query(s->db, rows, fetch, 0, NULL);
    rc = tn_db_exec(s->db, "ROLLBACK TO SAVEPOINT tn_admin_q", 0, NULL);
    if (rc != TN_OK)
        return rc;
    return tn_db_query(s->db, rows, sql, 0, NULL);
}

static void run_pg(adm_req *a, adm_store *s, const char *sql, result *res)
{
    tn_rows *rows = NULL;
    int cap = adm.env.cfg->row_cap;
    int rc = query_capped(a, s, sql, cap, &rows);
    if (rc != TN_OK) {
        res->rc = rc;
        snprintf(res->err, sizeof(res->err), "%s",
                 rc == TN_TIMEOUT ? "the query ran past admin.query_timeout (statement_timeout)"
                                  : tn_db_error(s->db));
        return;
    }
    res->ncols = tn_rows_ncols(rows);
    res->cols = tn_alloc(a->r, (size_t)(res->ncols ? res->ncols : 1) * sizeof(char *));
    for (int i = 0; res->cols && i < res->ncols; i++) {
        const char *n = tn_rows_colname(rows, i);
        res->cols[i] = tn_strdup(a->r, n ? n : "?");
    }
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        if (res->nrows == cap) {
            res->truncated = true;
            break;
        }
        const char **row = tn_alloc(a->r, (size_t)(res->ncols ? res->ncols : 1) * sizeof(char *));
        if (row == NULL || !add_row(a, res, row))
            break;
        for (int i = 0; i < res->ncols; i++) {
            const char *v = tn_rows_get(rows, i);
            row[i] = v ? tn_strdup(a->r, v) : NULL;
        }
    }
    if (rc != TN_OK && rc != TN_DONE) {
        res->rc = rc;
        snprintf(res->err, sizeof(res->err), "%s", tn_db_error(s->db));
    }
    tn_rows_free(rows);
    if (res->rc != TN_OK)
        return;
    /* A few functions still write in a READ ONLY transaction (lo_create() does on some
     * servers). Whatever wrote was given a transaction id: such a statement is refused and
     * its result not shown (the transaction is rolled back in any case). */
    char xid[8] = "";
    rc = db_query_value(s->db, xid, sizeof(xid),
                        "SELECT (pg_catalog.txid_current_if_assigned() IS NOT NULL)::text", 0,
                        NULL);
    if (rc != TN_OK || strcmp(xid, "false") != 0) {
        res->rc = TN_DENIED;
        res->nrows = 0;
        res->truncated = false;
        snprintf(res->err, sizeof(res->err), "%s",
                 rc != TN_OK ? "refused: cannot tell whether the statement wrote"
                             : "refused: the statement wrote to the database (rolled back: the "
                               "console is read-only)");
    }
}

static void run(adm_req *a, const tenant_rec *t, const char *sql, result *res)
{
    memset(res, 0, sizeof(*res));
    adm_store s;
    int64_t t0 = clock_mono_ns();
    int rc = store_open(a, t, true, &s, res->err, sizeof(res->err));
    if (rc == TN_OK)
        rc = store_ro_begin(&s, adm.env.cfg->query_timeout_ms, true, res->err, sizeof(res->err));
    if (rc != TN_OK) {
        res->rc = rc;
        store_close(&s);
        return;
    }
    if (s.sqlite)
        run_sqlite(a, &s, sql, res);
    else
        run_pg(a, &s, sql, res);
    store_ro_end(&s);
    store_close(&s);
    res->elapsed_us = (clock_mono_ns() - t0) / 1000;
}

/* ---- exports ------------------------------------------------------------------------------ */

static int send_csv(adm_req *a, const char *slug, const result *res)
{
    buf *o = a->out;
    buf_reset(o);
    for (int i = 0; i < res->ncols; i++) {
        if (i)
            buf_putc(o, ',');
        buf_csv(o, res->cols[i]);
    }
    buf_puts(o, "\r\n");
    for (int r = 0; r < res->nrows; r++) {
        for (int i = 0; i < res->ncols; i++) {
            if (i)
                buf_putc(o, ',');
            if (res->rows[r][i] != NULL)
                buf_csv(o, res->rows[r][i]);
        }
        buf_puts(o, "\r\n");
    }
    char disp[128];
    snprintf(disp, sizeof(disp), "attachment; filename=\"%s-query.csv\"", slug);
    return send_doc(a, 200, "text/csv; charset=utf-8", disp);
}

static int send_json(adm_req *a, const char *slug, const result *res)
{
    buf *o = a->out;
    buf_reset(o);
    buf_puts(o, "{\"tenant\":");
    buf_json_str(o, slug);
    buf_puts(o, ",\"columns\":[");
    for (int i = 0; i < res->ncols; i++) {
        if (i)
            buf_putc(o, ',');
        buf_json_str(o, res->cols[i]);
    }
    buf_puts(o, "],\"rows\":[");
    for (int r = 0; r < res->nrows; r++) {
        buf_puts(o, r ? ",[" : "[");
        for (int i = 0; i < res->ncols; i++) {
            if (i)
                buf_putc(o, ',');
            buf_json_str(o, res->rows[r][i]);   /* NULL -> null */
        }
        buf_putc(o, ']');
    }
    buf_puts(o, "],\"truncated\":");
    buf_puts(o, res->truncated ? "true" : "false");
    buf_puts(o, "}\n");
    char disp[128];
    snprintf(disp, sizeof(disp), "attachment; filename=\"%s-query.json\"", slug);
    return send_doc(a, 200, "application/json", disp);
}

/* ---- the page ----------------------------------------------------------------------------- */

static void put_result(adm_req *a, const result *res)
{
    buf *o = a->out;
    if (res->rc != TN_OK) {
        buf_puts(o, "<div class=\"result-error\" id=\"result-error\" role=\"alert\"><b>");
        buf_puts(o, res->rc == TN_DENIED    ? "Refused"
                    : res->rc == TN_TIMEOUT ? "Timed out"
                                            : "Error");
        buf_puts(o, "</b> ");
        buf_html(o, res->err);
        buf_puts(o, "</div>");
        return;
    }
    buf_printf(o, "<p class=\"result-meta\" id=\"result-meta\">%d row%s%s · %.1f ms</p>",
               res->nrows, res->nrows == 1 ? "" : "s",
               res->truncated ? " (stopped at admin.row_cap)" : "",
               (double)res->elapsed_us / 1000.0);
    if (res->ncols == 0)
        return;
    buf_puts(o, "<div class=\"table-wrap\"><table class=\"grid data\" id=\"result\"><thead><tr>");
    for (int i = 0; i < res->ncols; i++) {
        buf_puts(o, "<th>");
        buf_html(o, res->cols[i]);
        buf_puts(o, "</th>");
    }
    buf_puts(o, "</tr></thead><tbody>");
    for (int r = 0; r < res->nrows; r++) {
        buf_puts(o, "<tr>");
        for (int i = 0; i < res->ncols; i++) {
            const char *v = res->rows[r][i];
            buf_puts(o, "<td>");
            if (v == NULL) {
                buf_puts(o, "<span class=\"null\">NULL</span>");
            } else if (strlen(v) > 400) {
                buf_htmln(o, v, utf8_valid_prefix(v, 400));
                buf_puts(o, "<span class=\"more\">…</span>");
            } else {
                buf_html(o, v);
            }
            buf_puts(o, "</td>");
        }
        buf_puts(o, "</tr>");
    }
    buf_puts(o, "</tbody></table></div>");
}

int page_console(adm_req *a, const char *slug)
{
    adm_tenant t;
    int rc = adm_tenant_get(a, slug, &t);
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", "The tenant could not be read.");
    }
    const char *sql = a->post ? adm_form(a, "sql") : NULL;
    const char *format = a->post ? adm_form(a, "format") : NULL;
    if (format == NULL)
        format = "html";
    result *res = NULL;
    audit_sql q;
    char aerr[512];
    if (sql != NULL && strlen(sql) > SQL_MAX) {
        /* Not run, and still logged (by its length, hash and first KiB): what an operator
         * tried is on record even when it was too long to try. */
        if (audit_sql_start(a, slug, sql, &q, aerr, sizeof(aerr)) == TN_OK)
            audit_sql_end(a, slug, &q, "refused", "longer than 64 KiB: not run");
        free(t.rec);
        return send_message(a, 413, "Too long", "A query is at most 64 KiB.");
    }
    if (sql != NULL && !only_blank(sql)) {
        res = tn_alloc(a->r, sizeof(*res));
        if (res == NULL) {
            free(t.rec);
            return send_message(a, 500, "Error", "out of memory");
        }
        /* The entry is written before the statement runs, so that one which never finishes
         * (it takes the worker down, or request_timeout does) is still on record; a
         * statement that cannot be put on record does not run. */
        if (audit_sql_start(a, slug, sql, &q, aerr, sizeof(aerr)) != TN_OK) {
            free(t.rec);
            return send_message(a, 503, "Not run", "The audit log cannot be written, so the "
                                                   "query was not run.");
        }
        run(a, t.rec, sql, res);
        char outcome[1200];
        if (res->rc == TN_OK)
            snprintf(outcome, sizeof(outcome), "%d row%s%s, %.1f ms", res->nrows,
                     res->nrows == 1 ? "" : "s",
                     res->truncated ? " (stopped at admin.row_cap)" : "",
                     (double)res->elapsed_us / 1000.0);
        else
            snprintf(outcome, sizeof(outcome), "%s (%.1f ms)", res->err,
                     (double)res->elapsed_us / 1000.0);
        audit_sql_end(a, slug, &q,
                      res->rc == TN_OK        ? "ok"
                      : res->rc == TN_DENIED  ? "refused"
                      : res->rc == TN_TIMEOUT ? "timeout"
                                              : "error",
                      outcome);
        if (res->rc == TN_OK && strcmp(format, "csv") == 0) {
            free(t.rec);
            return send_csv(a, slug, res);
        }
        if (res->rc == TN_OK && strcmp(format, "json") == 0) {
            free(t.rec);
            return send_json(a, slug, res);
        }
    }
    buf *o = a->out;
    char title[120];
    snprintf(title, sizeof(title), "SQL · %s", slug);
    page_begin(a, title, "sql", slug);
    buf_puts(o, "<header class=\"page-head\"><h1><a class=\"crumb\" href=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "\">");
    buf_html(o, slug);
    buf_puts(o, "</a> <span class=\"sep\">/</span> SQL console</h1><span class=\"count\">"
                "read-only · ");
    buf_printf(o, "%lld ms timeout · %d rows at most",
               (long long)adm.env.cfg->query_timeout_ms, adm.env.cfg->row_cap);
    buf_puts(o, "</span></header><form method=\"post\" action=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "/sql\" class=\"console\" id=\"console\">");
    put_csrf(a);
    buf_puts(o, "<textarea name=\"sql\" id=\"sql\" rows=\"8\" spellcheck=\"false\" "
                "aria-label=\"SQL\" placeholder=\"SELECT * FROM …\">");
    buf_html(o, sql ? sql : "");
    buf_puts(o, "</textarea><div class=\"console-bar\">"
                "<button type=\"submit\" class=\"primary\" id=\"run\" name=\"format\" "
                "value=\"html\">Run <kbd>Ctrl Enter</kbd></button>"
                "<button type=\"submit\" name=\"format\" value=\"csv\" id=\"export-csv\">"
                "Export CSV</button><button type=\"submit\" name=\"format\" value=\"json\" "
                "id=\"export-json\">Export JSON</button></div></form>");
    if (res != NULL)
        put_result(a, res);
    page_end(a);
    free(t.rec);
    return send_html(a, res != NULL && res->rc != TN_OK ? (res->rc == TN_DENIED ? 403 : 400)
                                                         : 200);
}
