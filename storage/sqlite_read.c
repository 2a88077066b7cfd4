/*
 * sqlite_read.c — SQLite's half of reading with a time limit and of the sandboxed query
 * (db_read_begin, db_query_capped in db.h), and the template clone's private connection
 * (db_sqlite_vacuum_into).
 *
 * The sandbox is an allow list, not a list of what to refuse: a function nobody thought of
 * is refused, not let through. For the one statement it runs, the connection's authorizer is
 * replaced by sandbox_auth (which refuses all the driver's refuses, and more), then the
 * driver's is put back. What a read needs is allowed:
 *   - SELECT, reading any table or view of the file (the connection reaches no other file),
 *     and recursive common table expressions;
 *   - the built-in functions of sandbox_functions below, by name: everything else, an
 *     unknown or app-defined function, load_extension() and fts3_tokenizer() (which leaks a
 *     library address and lets a query overwrite it: see sqlite.c) included, is refused
 *     when the statement is prepared, before anything runs;
 *   - of the PRAGMAs only those that read: the ones about a table or index (any argument),
 *     and the settings asked without a value;
 *   - SQLITE_UPDATE of sqlite_master alone: SQLite asks it when a statement reads a
 *     table-valued function (pragma_table_info, json_each, dbstat) for the first time, as it
 *     sets the function up; no SQL can write sqlite_master here (a read-only file, DEFENSIVE,
 *     and sqlite3_stmt_readonly below).
 * Refused with it: ATTACH and DETACH (VACUUM INTO attaches at run time; it is refused first
 * as a write), transactions and savepoints (one statement runs; a BEGIN could only leave a
 * transaction open on the connection), every kind of DDL and DML. The connection keeps the
 * hardening of every SQLite connection (db_sqlite_harden: defensive, trusted_schema off,
 * fts3_tokenizer off), and the deadline interrupts a statement that runs past it.
 *
 * Must not: let a statement run under another authorizer than the sandbox's, leave the
 * sandbox's authorizer or the deadline on the connection afterwards, or run a second statement.
 */
#include "core/first.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/db_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first refusal, described for the message. */
struct refusal {
    char what[160];
};

static const char *const sandbox_functions[] = {
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

static int sandbox_auth(void *ud, int action, const char *a1, const char *a2, const char *db,
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
    struct refusal *r = ud;
    (void)db, (void)trigger;
    /* A refusal keeps the first reason (the statement's own, not one of what it expands to);
     * tn_errf fills it and carries SQLite's answer, SQLITE_DENY. */
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    case SQLITE_FUNCTION:   /* a2 is the function's name */
        for (int i = 0; a2 != NULL && sandbox_functions[i]; i++)
            if (sqlite3_stricmp(a2, sandbox_functions[i]) == 0)
                return SQLITE_OK;
        return r->what[0] != '\0'
                   ? SQLITE_DENY
                   : tn_errf(r->what, sizeof(r->what), SQLITE_DENY,
                             "%.64s() is not one of the console's functions",
                             a2 != NULL ? a2 : "?");
    case SQLITE_PRAGMA:
        for (int i = 0; a1 != NULL && about[i]; i++)
            if (sqlite3_stricmp(a1, about[i]) == 0)
                return SQLITE_OK;
        for (int i = 0; a1 != NULL && settings[i]; i++)
            if (sqlite3_stricmp(a1, settings[i]) == 0 && a2 == NULL)
                return SQLITE_OK;
        return r->what[0] != '\0'
                   ? SQLITE_DENY
                   : tn_errf(r->what, sizeof(r->what), SQLITE_DENY,
                             "PRAGMA %.64s%s is not one the console reads", a1 != NULL ? a1 : "?",
                             a2 != NULL ? " with a value" : "");
    case SQLITE_UPDATE:     /* a1 the table: see the banner */
        if (a1 != NULL && (strcmp(a1, "sqlite_master") == 0 || strcmp(a1, "sqlite_schema") == 0))
            return SQLITE_OK;
        break;
    default:
        break;
    }
    return r->what[0] != '\0' ? SQLITE_DENY
                               : tn_errf(r->what, sizeof(r->what), SQLITE_DENY,
                                         "the console only reads");
}

/* One value as text: blobs as x'hex', so that a binary value is shown, not cut at a NUL. */
static const char *value_text(sqlite3_stmt *st, int i, arena *a)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL:
        return NULL;
    case SQLITE_BLOB: {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *b = sqlite3_column_blob(st, i);
        int n = sqlite3_column_bytes(st, i);
        char *x = arena_alloc(a, (size_t)n * 2 + 4);
        if (x == NULL)
            return NULL;
        x[0] = 'x', x[1] = '\'';
        for (int k = 0; k < n; k++) {
            x[2 + 2 * k] = hex[b[k] >> 4];
            x[3 + 2 * k] = hex[b[k] & 15];
        }
        x[2 + 2 * n] = '\'';
        x[3 + 2 * n] = '\0';
        return x;
    }
    default: {
        const unsigned char *t = sqlite3_column_text(st, i);
        return arena_strdup(a, t != NULL ? (const char *)t : "");
    }
    }
}

/* Prepare sql under the sandbox: one statement that writes nothing. TN_OK with *out. */
static int sandbox_prepare(tn_db *db, sqlite3 *h, const char *sql, struct refusal *refusal,
                           sqlite3_stmt **out)
{
    *out = NULL;
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    int rc = sqlite3_prepare_v2(h, sql, -1, &st, &tail);
    if (rc != SQLITE_OK) {
        /* SQLite's message first (a refused function is SQLITE_ERROR with "not authorized
         * to use function: ...", a refused action SQLITE_AUTH), then which rule refused. */
        if (refusal->what[0] != '\0')
            return db_set_error(db, TN_DENIED, "%s (%s)", sqlite3_errmsg(h), refusal->what);
        return db_set_error(db, rc == SQLITE_AUTH ? TN_DENIED : TN_INVALID, "%s",
                            sqlite3_errmsg(h));
    }
    if (st == NULL)
        return db_set_error(db, TN_INVALID, "no statement");
    if (tail != NULL && !db_text_is_blank(tail)) {
        sqlite3_finalize(st);
        return db_set_error(db, TN_DENIED, "one statement at a time: the text after the "
                                           "first statement was refused");
    }
    if (!sqlite3_stmt_readonly(st)) {
        sqlite3_finalize(st);
        return db_set_error(db, TN_DENIED, "refused: the statement would write (the console "
                                           "is read-only)");
    }
    *out = st;
    return TN_OK;
}

static int sandbox_rows(tn_db *db, sqlite3 *h, sqlite3_stmt *st, int row_cap, arena *a,
                        db_result *res)
{
    res->ncols = sqlite3_column_count(st);
    res->cols = arena_calloc(a, (size_t)(res->ncols ? res->ncols : 1) * sizeof(char *));
    if (res->cols == NULL)
        return db_set_error(db, TN_NOMEM, "out of memory");
    for (int i = 0; i < res->ncols; i++) {
        const char *n = sqlite3_column_name(st, i);
        res->cols[i] = arena_strdup(a, n != NULL ? n : "?");
    }
    int rc, cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (res->nrows == row_cap) {
            res->truncated = true;
            break;
        }
        const char **row = arena_calloc(a, (size_t)(res->ncols ? res->ncols : 1) *
                                               sizeof(char *));
        if (row == NULL || (res->rows = db_result_grow(a, res->rows, res->nrows, &cap)) == NULL)
            return db_set_error(db, TN_NOMEM, "out of memory");
        res->rows[res->nrows++] = row;
        for (int i = 0; i < res->ncols; i++)
            row[i] = value_text(st, i, a);
    }
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return TN_OK;
    int ext = sqlite3_extended_errcode(h) & 0xff;
    return db_set_error(db,
                        ext == SQLITE_INTERRUPT                      ? TN_TIMEOUT
                        : ext == SQLITE_READONLY || ext == SQLITE_AUTH ? TN_DENIED
                                                                       : TN_INVALID,
                        "%s", sqlite3_errmsg(h));
}

/* Bind $1..$n by name, as the connection's own statements are bound (sqlite.c): any other
 * placeholder, or a number past nparams, is refused rather than left NULL. */
static int sandbox_bind(tn_db *db, sqlite3_stmt *st, int nparams, const char *const *params)
{
    int count = sqlite3_bind_parameter_count(st);
    for (int i = 1; i <= count; i++) {
        const char *name = sqlite3_bind_parameter_name(st, i);
        char *end = NULL;
        long k = name != NULL && name[0] == '$' ? strtol(name + 1, &end, 10) : 0;
        if (k < 1 || k > nparams || end == NULL || *end != '\0')
            return db_set_error(db, TN_INVALID,
                                "parameter %s: parameters are written $1 to $%d here",
                                name != NULL ? name : "?", nparams);
        int s = params[k - 1] == NULL
                    ? sqlite3_bind_null(st, i)
                    : sqlite3_bind_text(st, i, params[k - 1], -1, SQLITE_TRANSIENT);
        if (s != SQLITE_OK)
            return db_set_error(db, TN_NOMEM, "cannot bind parameter %s", name);
    }
    return TN_OK;
}

int db_sqlite_query_capped(tn_db *db, const char *sql, int nparams, const char *const *params,
                           int row_cap, arena *a, db_result *res)
{
    sqlite3 *h = db->drv->native(db);
    /* Static: one sandboxed statement at a time per process (a worker serves one request),
     * and the authorizer is put back before this returns. */
    static struct refusal refusal;
    refusal.what[0] = '\0';
    if (sqlite3_set_authorizer(h, sandbox_auth, &refusal) != SQLITE_OK)
        return db_set_error(db, TN_ERR, "cannot set the console's authorizer: %s",
                            sqlite3_errmsg(h));
    sqlite3_stmt *st = NULL;
    int rc = sandbox_prepare(db, h, sql, &refusal, &st);
    if (rc == TN_OK)
        rc = sandbox_bind(db, st, nparams, params);
    if (rc == TN_OK)
        rc = sandbox_rows(db, h, st, row_cap, a, res);
    sqlite3_finalize(st);
    if (db_sqlite_own_authorizer(db) != TN_OK && rc == TN_OK)
        rc = db_set_error(db, TN_ERR, "cannot put the connection's authorizer back: %s",
                          sqlite3_errmsg(h));
    return rc;
}

/* ---- the template clone ------------------------------------------------------------------ */

int db_sqlite_vacuum_into(const char *from, const char *to, int busy_timeout_ms, char *err,
                          size_t errlen)
{
    sqlite3 *h = NULL;
    db_sqlite_configure();
    int s = sqlite3_open_v2(from, &h, SQLITE_OPEN_READWRITE, NULL);
    if (s != SQLITE_OK) {
        int rc = tn_errf(err, errlen, TN_IO, "cannot open the template %s: %s", from,
                         h ? sqlite3_errmsg(h) : sqlite3_errstr(s));
        sqlite3_close(h);
        return rc;
    }
    char why[256];
    int rc = db_sqlite_harden(h, why, sizeof(why));
    if (rc != TN_OK) {
        sqlite3_close(h);
        return tn_errf(err, errlen, rc, "cannot open the template %s: %s", from, why);
    }
    sqlite3_busy_timeout(h, busy_timeout_ms > 0 ? busy_timeout_ms : 5000);
    sqlite3_stmt *stmt = NULL;
    s = sqlite3_prepare_v2(h, "VACUUM INTO ?1", -1, &stmt, NULL);
    if (s == SQLITE_OK)
        s = sqlite3_bind_text(stmt, 1, to, -1, SQLITE_STATIC);
    if (s == SQLITE_OK) {
        s = sqlite3_step(stmt);
        if (s == SQLITE_DONE)
            s = SQLITE_OK;
    }
    if (s != SQLITE_OK)
        rc = tn_errf(err, errlen, s == SQLITE_BUSY ? TN_BUSY : TN_IO,
                     "VACUUM INTO from the template %s: %s", from, sqlite3_errmsg(h));
    sqlite3_finalize(stmt);
    sqlite3_close(h);
    return rc;
}
