/*
 * dump.c — the whole-tenant dump format (README: export and import), checked without a
 * database: what PUT /import accepts before anything is written, and the reading of a
 * column's stored DEFAULT back to the JSON value the dump carries.
 *
 * Owns: the shape of {"format":"tenancy-data-dump","version":1,"tables":[...],
 * "changelog":[...]}, the row layout [id, columns..., created_at, updated_at], and the rules
 * each part must follow — the same as POST /tables' (names, reserved columns, the type map,
 * DEFAULT literals, search columns) and as a row write's (each value of its column's type).
 * Pure: it takes a rest_mem allocator and no request, so its unit test links it alone.
 *
 * Must not: touch a request or storage, or accept what the app's own writes would refuse:
 * a dump that passes here is written by the same DDL and value rules (io.c, tables.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data.h"

#define MAX_COLUMNS 200
#define MAX_INDEX_COLUMNS 32

static const char *const reserved_cols[] = {"id", "created_at", "updated_at", NULL};

bool dt_dump_reserved_col(const char *name)
{
    for (int i = 0; reserved_cols[i] != NULL; i++)
        if (strcmp(name, reserved_cols[i]) == 0)
            return true;
    return false;
}

/* Fill *e and answer TN_INVALID. */
static int refuse(dt_dump_err *e, int status, const char *code, const char *details,
                  const char *fmt, ...) TN_PRINTF(5, 6);
static int refuse(dt_dump_err *e, int status, const char *code, const char *details,
                  const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    snprintf(e->details, sizeof(e->details), "%s", details != NULL ? details : "");
    return TN_INVALID;
}

/* ---- values ------------------------------------------------------------------------------- */

bool dt_dump_value_ok(const json_t *v, int type)
{
    if (json_is_null(v))
        return true;
    switch (type) {
    case DT_INTEGER:
        return json_is_integer(v);
    case DT_REAL:
        return json_is_number(v);
    case DT_BOOLEAN:
        return json_is_boolean(v);
    case DT_TIMESTAMP:
        return json_is_string(v) && dt_timestamp_ok(json_string_value(v));
    case DT_JSON:
        return true;
    default:
        return json_is_string(v) &&
               memchr(json_string_value(v), '\0', json_string_length(v)) == NULL;
    }
}

/* ---- one table -------------------------------------------------------------------------- */

typedef struct col_seen {
    const char *name;
    int type;
    bool not_null;
} col_seen;

static int find_col(const col_seen *cols, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(cols[i].name, name) == 0)
            return i;
    return -1;
}

static int check_column(const rest_mem *m, const json_t *c, const char *table, col_seen *out,
                        int i, dt_dump_err *e)
{
    char where[160];
    snprintf(where, sizeof(where), "%s.columns[%d]", table, i);
    const json_t *name = json_object_get(c, "name"), *type = json_object_get(c, "type");
    const json_t *nn = json_object_get(c, "not_null"), *uq = json_object_get(c, "unique");
    if (!json_is_object(c) || !json_is_string(name) || (type != NULL && !json_is_string(type)) ||
        (nn != NULL && !json_is_boolean(nn)) || (uq != NULL && !json_is_boolean(uq)))
        return refuse(e, 400, "bad_column", where, "a column is {\"name\", \"type\", "
                      "\"not_null\", \"default\", \"unique\"}");
    const char *n = json_string_value(name);
    if (dt_dump_reserved_col(n))
        return refuse(e, 400, "reserved_column", where, "%s is kept by the API", n);
    if (!dt_name_ok(n))
        return refuse(e, 400, "bad_name", where, "%s is not a name the API accepts", n);
    if (find_col(out, i, n) >= 0)
        return refuse(e, 400, "duplicate_column", where, "%s is given twice", n);
    int t = dt_type_parse(type != NULL ? json_string_value(type) : "text");
    if (t < 0)
        return refuse(e, 400, "unknown_type", where, "%s: types are text, integer, real, "
                      "boolean, timestamp, json", json_string_value(type));
    const json_t *dflt = json_object_get(c, "default");
    if (dflt != NULL) {
        dt_str b;
        dt_str_init(&b, m);
        if (dt_default_literal(&b, dflt, t, REST_SQLITE) != TN_OK)
            return refuse(e, 400, "bad_default", where, "the default of %s is not a %s "
                          "literal", n, dt_type_name(t));
    }
    out[i] = (col_seen){n, t, json_is_true(nn)};
    return TN_OK;
}

static int check_search(const json_t *s, const char *table, const col_seen *cols, int n,
                        dt_dump_err *e)
{
    if (s == NULL || json_is_null(s))
        return TN_OK;
    if (!json_is_array(s) || json_array_size(s) > (size_t)n)
        return refuse(e, 400, "bad_search", table, "search is a list of text columns");
    size_t i;
    const json_t *v;
    json_array_foreach(s, i, v) {
        int k = json_is_string(v) ? find_col(cols, n, json_string_value(v)) : -1;
        if (k < 0 || cols[k].type != DT_TEXT)
            return refuse(e, 400, "bad_search", table, "search columns must be text columns "
                          "of the table");
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(s, j), v))
                return refuse(e, 400, "bad_search", table, "%s is given twice",
                              json_string_value(v));
    }
    return TN_OK;
}

/* Index names are one namespace per tenant (and SQLite shares it with tables). */
static int check_indexes(const json_t *ix, const char *table, const col_seen *cols, int n,
                         const json_t *tables, json_t *names, dt_dump_err *e)
{
    if (ix == NULL || json_is_null(ix))
        return TN_OK;
    if (!json_is_array(ix))
        return refuse(e, 400, "bad_index", table, "indexes is a list of {\"name\", "
                      "\"unique\", \"columns\"}");
    size_t i, j;
    const json_t *x, *c;
    json_array_foreach(ix, i, x) {
        char where[160];
        snprintf(where, sizeof(where), "%s.indexes[%zu]", table, i);
        const json_t *name = json_object_get(x, "name"), *list = json_object_get(x, "columns");
        const json_t *uq = json_object_get(x, "unique");
        if (!json_is_object(x) || !json_is_string(name) || !json_is_array(list) ||
            json_array_size(list) == 0 || json_array_size(list) > MAX_INDEX_COLUMNS ||
            (uq != NULL && !json_is_boolean(uq)))
            return refuse(e, 400, "bad_index", where, "an index is {\"name\", \"unique\", "
                          "\"columns\": [...]}");
        const char *nm = json_string_value(name);
        if (!dt_name_ok(nm))
            return refuse(e, 400, "bad_name", where, "%s is not an index name the API "
                          "accepts", nm);
        bool clash = json_object_get(names, nm) != NULL;
        for (j = 0; !clash && j < json_array_size(tables); j++)
            clash = json_equal(json_object_get(json_array_get(tables, j), "name"), name);
        if (clash)
            return refuse(e, 400, "bad_index", where, "the name %s is taken", nm);
        json_object_set_new(names, nm, json_true());
        json_array_foreach(list, j, c) {
            const char *cn = json_string_value(c);
            if (cn == NULL || (find_col(cols, n, cn) < 0 && !dt_dump_reserved_col(cn)))
                return refuse(e, 400, "unknown_column", where, "no column %s",
                              cn != NULL ? cn : "(not a string)");
        }
    }
    return TN_OK;
}

static int check_rows(const json_t *rows, const char *table, const col_seen *cols, int n,
                      long long *nrows, dt_dump_err *e)
{
    if (rows == NULL || json_is_null(rows))
        return TN_OK;
    if (!json_is_array(rows))
        return refuse(e, 400, "bad_dump", table, "rows is a list of arrays");
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) {
        char where[200];
        snprintf(where, sizeof(where), "%s.rows[%zu]", table, i);
        if (!json_is_array(r) || json_array_size(r) != (size_t)n + 3)
            return refuse(e, 400, "bad_dump", where, "a row is [id, the %d columns, "
                          "created_at, updated_at]", n);
        const json_t *id = json_array_get(r, 0);
        if (!json_is_null(id) && !json_is_integer(id))
            return refuse(e, 422, "invalid_value", where, "id: expected integer");
        for (int k = 0; k < 2; k++) {
            const json_t *ts = json_array_get(r, (size_t)n + 1 + (size_t)k);
            if (!dt_dump_value_ok(ts, DT_TIMESTAMP))
                return refuse(e, 422, "invalid_value", where, "%s: expected timestamp",
                              reserved_cols[1 + k]);
        }
        for (int k = 0; k < n; k++) {
            const json_t *v = json_array_get(r, (size_t)k + 1);
            if (!dt_dump_value_ok(v, cols[k].type))
                return refuse(e, 422, "invalid_value", where, "%s: expected %s", cols[k].name,
                              dt_type_name(cols[k].type));
            if (json_is_null(v) && cols[k].not_null)
                return refuse(e, 422, "invalid_value", where, "%s: null in a not_null "
                              "column", cols[k].name);
        }
    }
    *nrows += (long long)json_array_size(rows);
    return TN_OK;
}

static int check_table(const rest_mem *m, const json_t *t, size_t i, const json_t *tables,
                       json_t *names, long long *nrows, dt_dump_err *e)
{
    char where[64];
    snprintf(where, sizeof(where), "tables[%zu]", i);
    const json_t *name = json_object_get(t, "name"), *cols = json_object_get(t, "columns");
    if (!json_is_object(t) || !json_is_string(name) || (cols != NULL && !json_is_array(cols)))
        return refuse(e, 400, "bad_table", where, "a table is {\"name\", \"columns\", "
                      "\"search\", \"indexes\", \"rows\"}");
    const char *tn = json_string_value(name);
    if (!dt_table_name_ok(tn))
        return refuse(e, 400, "bad_name", where, "%s is not a table name the API accepts", tn);
    for (size_t j = 0; j < i; j++)
        if (json_equal(json_object_get(json_array_get(tables, j), "name"), name))
            return refuse(e, 400, "bad_table", where, "table %s is given twice", tn);
    size_t n = json_array_size(cols);
    if (n > MAX_COLUMNS)
        return refuse(e, 400, "too_many_columns", tn, "too many columns");
    col_seen *seen = m->alloc(m->ctx, (n + 1) * sizeof(*seen));
    if (seen == NULL)
        return refuse(e, 500, "storage_error", NULL, "out of memory");
    for (size_t k = 0; k < n; k++)
        if (check_column(m, json_array_get(cols, k), tn, seen, (int)k, e) != TN_OK)
            return TN_INVALID;
    if (check_search(json_object_get(t, "search"), tn, seen, (int)n, e) != TN_OK ||
        check_indexes(json_object_get(t, "indexes"), tn, seen, (int)n, tables, names, e) !=
            TN_OK)
        return TN_INVALID;
    return check_rows(json_object_get(t, "rows"), tn, seen, (int)n, nrows, e);
}

int dt_dump_check(const rest_mem *m, const json_t *dump, long long *nrows, dt_dump_err *e)
{
    *nrows = 0;
    if (!json_is_object(dump))
        return refuse(e, 400, "bad_dump", NULL, "a dump is {\"format\": \"%s\", \"version\": "
                      "%d, \"tables\": [...]}", DT_DUMP_FORMAT, DT_DUMP_VERSION);
    const json_t *f = json_object_get(dump, "format"), *v = json_object_get(dump, "version");
    if (!json_is_string(f) || strcmp(json_string_value(f), DT_DUMP_FORMAT) != 0)
        return refuse(e, 400, "bad_dump", "format", "the format is not %s", DT_DUMP_FORMAT);
    if (!json_is_integer(v) || json_integer_value(v) != DT_DUMP_VERSION)
        return refuse(e, 400, "bad_dump", "version", "this API reads version %d",
                      DT_DUMP_VERSION);
    const json_t *tables = json_object_get(dump, "tables"), *log = json_object_get(dump,
                                                                                   "changelog");
    if (!json_is_array(tables))
        return refuse(e, 400, "bad_dump", "tables", "tables is a list");
    if (log != NULL && !json_is_array(log) && !json_is_null(log))
        return refuse(e, 400, "bad_dump", "changelog", "changelog is a list");
    json_t *names = json_object();
    if (names == NULL)
        return refuse(e, 500, "storage_error", NULL, "out of memory");
    int rc = TN_OK;
    for (size_t i = 0; rc == TN_OK && i < json_array_size(tables); i++)
        rc = check_table(m, json_array_get(tables, i), i, tables, names, nrows, e);
    json_decref(names);
    return rc;
}

/* ---- stored defaults back to JSON ---------------------------------------------------------- */

/* The text of a '...' literal at *p (quotes undoubled) into out; *p moves past it. */
static bool read_quoted(const rest_mem *m, const char **pp, const char **out)
{
    const char *p = *pp + 1;
    dt_str b;
    dt_str_init(&b, m);
    for (;; p++) {
        if (*p == '\0')
            return false;
        if (*p == '\'') {
            if (p[1] != '\'')
                break;
            p++;
        }
        dt_str_addc(&b, *p);
    }
    *pp = p + 1;
    *out = dt_str_get(&b);
    return *out != NULL;
}

static json_t *number_json(const char *s, int type)
{
    char *end;
    errno = 0;
    if (type == DT_INTEGER) {
        long long n = strtoll(s, &end, 10);
        return *s && *end == '\0' && errno == 0 ? json_integer(n) : NULL;
    }
    double x = strtod(s, &end);
    if (!*s || *end != '\0' || errno != 0)
        return NULL;
    long long n = strtoll(s, &end, 10);
    return *end == '\0' ? json_integer(n) : json_real(x);
}

static json_t *word_json(const char *s, int type)
{
    if (strcasecmp(s, "null") == 0)
        return json_null();
    if (type == DT_BOOLEAN) {
        if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0)
            return json_true();
        if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
            return json_false();
        return NULL;
    }
    if (type == DT_INTEGER || type == DT_REAL)
        return number_json(s, type);
    return NULL;
}

json_t *dt_default_json(const rest_mem *m, const char *sql, int type)
{
    if (sql == NULL)
        return NULL;
    const char *p = sql, *text = NULL;
    json_t *v = NULL;
    while (*p == ' ' || *p == '(')
        p++;
    if (*p == '\'') {
        if (!read_quoted(m, &p, &text))
            return NULL;
        /* PostgreSQL writes the literal's type after it: 'x'::text, '-5'::bigint */
        if (p[0] == ':' && p[1] == ':')
            while (*p && *p != ')')
                p++;
        if (type == DT_JSON)
            v = json_loads(text, JSON_DECODE_ANY, NULL);
        else if (type == DT_TEXT || type == DT_TIMESTAMP)
            v = json_string(text);
        else
            v = word_json(text, type);
    } else {
        const char *start = p;
        while (*p && *p != ')' && *p != ' ')
            p++;
        dt_str b;
        dt_str_init(&b, m);
        dt_str_addn(&b, start, (size_t)(p - start));
        const char *word = dt_str_get(&b);
        v = word != NULL ? word_json(word, type) : NULL;
    }
    while (*p == ' ' || *p == ')')
        p++;
    if (v == NULL || *p != '\0') {
        json_decref(v);
        return NULL;
    }
    dt_str check;
    dt_str_init(&check, m);
    if (dt_default_literal(&check, v, type, REST_SQLITE) != TN_OK) {
        json_decref(v);
        return NULL;
    }
    return v;
}
