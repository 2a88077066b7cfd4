/*
 * rows.c — a table's rows: GET, POST (insert, bulk, upsert, CSV in), PATCH and DELETE, with
 * PostgREST's grammar read by rest.c.
 *
 * Owns: the statements over one table (every identifier checked against the catalog by
 * rest.c's callback or dt_col_find, every value a $N parameter), Content-Range, 206 and 416,
 * the output formats (JSON array, a single object, CSV), the value checks of each column's
 * type, and the full-text search clause. Every write runs in one transaction with its FTS
 * upkeep (tables.c): it all happens or nothing does.
 *
 * Must not: write without a filter unless asked (?all=true), leave a transaction open, or
 * answer a write's error after part of it was committed.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data.h"

enum { FMT_JSON, FMT_OBJECT, FMT_CSV };

/* The output columns: the select list expanded, with each one's type. */
typedef struct outcols {
    int n;
    rest_select *sel;
    int *types;
} outcols;

/* Ids of written rows (FTS upkeep). */
typedef struct idlist {
    int n, cap;
    const char **v;
} idlist;

int dt_rest_error(dt_req *d, const rest_err *e)
{
    return dt_error(d, e->status ? e->status : 400, e->code ? e->code : "bad_request",
                    e->message, e->where[0] ? e->where : NULL);
}

/* The Accept header's choice; -1 when we offer nothing it takes. */
static int accept_format(const tn_request *r)
{
    const char *a = tn_header(r, "Accept");
    if (a == NULL || a[0] == '\0')
        return FMT_JSON;
    if (strstr(a, "application/vnd.pgrst.object") != NULL)
        return FMT_OBJECT;
    if (strstr(a, "text/csv") != NULL)
        return FMT_CSV;
    if (strstr(a, "application/json") != NULL || strstr(a, "*/*") != NULL ||
        strstr(a, "application/*") != NULL)
        return FMT_JSON;
    return -1;
}

/* The query string without all= (ours, not the grammar's); *all when it was all=true. */
static const char *strip_all(dt_req *d, const char *qs, bool *all)
{
    dt_str b;
    dt_str_init(&b, &d->mem);
    *all = false;
    if (strstr(qs, "all=") == NULL)   /* no such parameter: the string as it is */
        return qs;
    char *copy = tn_strdup(d->r, qs);
    for (char *save = NULL, *p = strtok_r(copy, "&", &save); p != NULL;
         p = strtok_r(NULL, "&", &save)) {
        if (strncmp(p, "all=", 4) == 0) {
            *all = *all || strcmp(p + 4, "true") == 0;
            continue;
        }
        if (b.len > 0)
            dt_str_addc(&b, '&');
        dt_str_add(&b, p);
    }
    return dt_str_get(&b);
}

/* SQLite keeps booleans as 1/0: filter values true/false are written as those. */
static void fix_bools(dt_req *d, const dt_table *t, rest_cond *c)
{
    if (c == NULL || d->dialect != REST_SQLITE)
        return;
    for (int i = 0; i < c->nkids; i++)
        fix_bools(d, t, c->kids[i]);
    const dt_col *col = c->kind == REST_LEAF && c->column ? dt_col_find(t, c->column) : NULL;
    if (col == NULL || col->type != DT_BOOLEAN)
        return;
    if (c->value != NULL && (strcmp(c->value, "true") == 0 || strcmp(c->value, "false") == 0))
        c->value = c->value[0] == 't' ? "1" : "0";
    for (int i = 0; i < c->nvalues; i++)
        if (strcmp(c->values[i], "true") == 0 || strcmp(c->values[i], "false") == 0)
            c->values[i] = c->values[i][0] == 't' ? "1" : "0";
}

/* Query string, Prefer and (for reads) Range; answers errors itself (TN_DONE). */
static int parse_req(dt_req *d, const dt_table *t, rest_query *q, bool range, bool *all)
{
    rest_err e;
    memset(&e, 0, sizeof(e));
    memset(q, 0, sizeof(*q));
    const char *qs = strip_all(d, tn_query(d->r), all);
    int rc = qs != NULL ? rest_parse_query(&d->mem, qs, q, &e) : TN_NOMEM;
    if (rc == TN_OK)
        rc = rest_parse_prefer(tn_header(d->r, "Prefer"), &q->prefer, &e);
    if (rc == TN_OK && range)
        rc = rest_parse_range(tn_header(d->r, "Range"), q, &e);
    if (rc == TN_INVALID || rc == TN_TOOBIG || rc == TN_NOTFOUND)
        return dt_rest_error(d, &e) == TN_OK ? TN_DONE : TN_IO;
    fix_bools(d, t, q->where);
    return rc;
}

/* "*" (or nothing) becomes every visible column; each item gets its type. */
static int expand_select(dt_req *d, const dt_table *t, const rest_query *q, outcols *oc)
{
    int max = t->ncols * (q->nselect + 1) + q->nselect;
    oc->sel = tn_alloc(d->r, (size_t)(max + 1) * sizeof(rest_select));
    oc->types = tn_alloc(d->r, (size_t)(max + 1) * sizeof(int));
    oc->n = 0;
    if (oc->sel == NULL || oc->types == NULL)
        return TN_NOMEM;
    for (int i = 0; i < (q->nselect ? q->nselect : 1); i++) {
        const rest_select *s = q->nselect ? &q->select[i] : NULL;
        if (s == NULL || strcmp(s->column, "*") == 0) {
            for (int k = 0; k < t->ncols; k++) {
                oc->sel[oc->n] = (rest_select){t->cols[k].name, NULL};
                oc->types[oc->n++] = t->cols[k].type;
            }
            continue;
        }
        const dt_col *c = dt_col_find(t, s->column);
        oc->sel[oc->n] = *s;
        oc->types[oc->n++] = c != NULL ? c->type : DT_TEXT;   /* unknown: rest.c refuses */
    }
    return TN_OK;
}

static int write_select(dt_req *d, const dt_table *t, rest_sql *s, const outcols *oc,
                        rest_err *e)
{
    rest_query sq;
    memset(&sq, 0, sizeof(sq));
    sq.nselect = oc->n;
    sq.select = oc->sel;
    (void)d;
    return rest_sql_select(s, &sq, dt_col_cb, (void *)t, e);
}

/* ---- search ------------------------------------------------------------------------------- */

static const char *like_pattern(dt_req *d, const char *terms)
{
    dt_str b;
    dt_str_init(&b, &d->mem);
    dt_str_addc(&b, '%');
    for (const char *p = terms; *p; p++) {
        if (*p == '%' || *p == '_' || *p == '\\')
            dt_str_addc(&b, '\\');
        dt_str_addc(&b, *p);
    }
    dt_str_addc(&b, '%');
    return dt_str_get(&b);
}

/* The search condition: FTS when the table has it, else LIKE over its text columns. */
static int add_search_cond(dt_req *d, const dt_table *t, rest_sql *s, const char *terms)
{
    int rc = TN_OK;
    if (t->nsearch > 0 && d->dialect == REST_SQLITE) {
        const char *fts = dt_fts_name(d, t->name);
        const char *match = dt_fts5_terms(&d->mem, terms);
        rc = rest_sql_add(s, "\"id\" IN (SELECT rowid FROM ");
        rc = rc ?: rest_sql_ident(s, fts);
        rc = rc ?: rest_sql_add(s, " WHERE ");
        rc = rc ?: rest_sql_ident(s, fts);
        rc = rc ?: rest_sql_add(s, " MATCH ");
        rc = rc ?: rest_sql_param(s, match != NULL ? match : "\"\"");
        return rc ?: rest_sql_add(s, ")");
    }
    if (t->nsearch > 0) {
        rc = rest_sql_add(s, "\"_search\" @@ pg_catalog.plainto_tsquery('simple', ");
        rc = rc ?: rest_sql_param(s, terms);
        return rc ?: rest_sql_add(s, ")");
    }
    const char *pat = like_pattern(d, terms);
    bool any = false;
    rc = rest_sql_add(s, "(");
    for (int i = 0; rc == TN_OK && i < t->ncols; i++) {
        if (t->cols[i].type != DT_TEXT)
            continue;
        rc = rest_sql_add(s, any ? " OR " : "");
        rc = rc ?: rest_sql_ident(s, t->cols[i].name);
        rc = rc ?: rest_sql_add(s, d->dialect == REST_SQLITE ? " LIKE " : " ILIKE ");
        rc = rc ?: rest_sql_param(s, pat);
        rc = rc ?: rest_sql_add(s, " ESCAPE '\\'");
        any = true;
    }
    return rc ?: rest_sql_add(s, any ? ")" : "1 = 0)");
}

/* " WHERE ..." of the filters and search=. */
static int add_where(dt_req *d, const dt_table *t, rest_sql *s, const rest_query *q,
                     rest_err *e)
{
    int rc = rest_sql_where(s, q, dt_col_cb, (void *)t, e);
    if (rc != TN_OK || q->search == NULL)
        return rc;
    rc = rest_sql_add(s, q->where != NULL ? " AND " : " WHERE ");
    return rc ?: add_search_cond(d, t, s, q->search);
}

/* A rest.c failure answered; a storage one returned. */
static int sql_failed(dt_req *d, int rc, const rest_err *e)
{
    if (rc == TN_INVALID || rc == TN_NOTFOUND || rc == TN_TOOBIG)
        return dt_rest_error(d, e) == TN_OK ? TN_DONE : TN_IO;
    return rc;
}

/* ---- output -------------------------------------------------------------------------------- */

/* One row's first n columns as an object of the output names. */
static json_t *row_json(dt_req *d, tn_rows *rows, const outcols *oc)
{
    json_t *o = json_object();
    for (int i = 0; o != NULL && i < oc->n; i++)
        json_object_set_new(o, oc->sel[i].alias ? oc->sel[i].alias : oc->sel[i].column,
                            dt_value_json(d, oc->types[i], tn_rows_get(rows, i)));
    return o;
}

/* Run s; each row into arr (when given) and its last column into ids (when given). */
static int run_rows(dt_req *d, const rest_sql *s, const outcols *oc, json_t *arr, idlist *ids)
{
    tn_rows *rows = NULL;
    int rc = dt_read_query(d, &rows, s->text, s->nparams, s->params);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        if (arr != NULL)
            json_array_append_new(arr, row_json(d, rows, oc));
        if (ids == NULL)
            continue;
        if (ids->n == ids->cap) {
            ids->cap = ids->cap ? ids->cap * 2 : 16;
            const char **nv = tn_alloc(d->r, (size_t)ids->cap * sizeof(char *));
            if (nv == NULL) {
                rc = TN_NOMEM;
                break;
            }
            if (ids->n > 0)
                memcpy(nv, ids->v, (size_t)ids->n * sizeof(char *));
            ids->v = nv;
        }
        ids->v[ids->n++] = tn_strdup(d->r, tn_rows_get(rows, tn_rows_ncols(rows) - 1));
    }
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

/* Each output name once: row_json's object keeps one value per key, and text written row
 * by row could not. */
static bool names_unique(const outcols *oc)
{
    for (int i = 1; i < oc->n; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(oc->sel[i].alias ? oc->sel[i].alias : oc->sel[i].column,
                       oc->sel[j].alias ? oc->sel[j].alias : oc->sel[j].column) == 0)
                return false;
    return true;
}

/* Run s and write its rows into out as the JSON array (and newline) dt_send_json writes for
 * run_rows' array of row_json objects, as they are read: the plain read builds no JSON
 * values. A value dt_value_json gives nothing for is left out of its object, as there. *n
 * the rows. */
static int run_rows_text(dt_req *d, const rest_sql *s, const outcols *oc, dt_str *out,
                         size_t *n)
{
    tn_rows *rows = NULL;
    *n = 0;
    dt_str_addc(out, '[');
    int rc = dt_read_query(d, &rows, s->text, s->nparams, s->params);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        dt_str_add(out, (*n)++ > 0 ? ",{" : "{");
        bool first = true;
        for (int i = 0; i < oc->n; i++) {
            size_t mark = out->len;
            if (!first)
                dt_str_addc(out, ',');
            dt_json_string(out, oc->sel[i].alias ? oc->sel[i].alias : oc->sel[i].column);
            dt_str_addc(out, ':');
            if (dt_value_write(d, out, oc->types[i], tn_rows_get(rows, i)))
                first = false;
            else
                dt_str_cut(out, mark);
        }
        dt_str_addc(out, '}');
    }
    tn_rows_free(rows);
    dt_str_add(out, "]\n");
    if (rc == TN_DONE && out->oom)
        rc = TN_NOMEM;
    return rc == TN_DONE ? TN_OK : rc;
}

static void csv_value(dt_str *b, const json_t *v)
{
    if (json_is_null(v))
        return;
    if (json_is_string(v)) {
        dt_csv_field(b, json_string_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    dt_csv_field(b, s);
    free(s);
}

static int send_csv(dt_req *d, int status, const outcols *oc, const json_t *arr)
{
    dt_str b;
    dt_str_init(&b, &d->mem);
    for (int i = 0; i < oc->n; i++) {
        if (i > 0)
            dt_str_addc(&b, ',');
        dt_csv_field(&b, oc->sel[i].alias ? oc->sel[i].alias : oc->sel[i].column);
    }
    dt_str_add(&b, "\r\n");
    size_t r;
    const json_t *row;
    json_array_foreach(arr, r, row) {
        for (int i = 0; i < oc->n; i++) {
            if (i > 0)
                dt_str_addc(&b, ',');
            csv_value(&b, json_object_get(row, oc->sel[i].alias ? oc->sel[i].alias
                                                                : oc->sel[i].column));
        }
        dt_str_add(&b, "\r\n");
    }
    const char *text = dt_str_get(&b);
    if (text == NULL)
        return TN_NOMEM;
    tn_set_status(d->r, status);
    tn_add_header(d->r, "Content-Type", "text/csv; charset=utf-8");
    return tn_write(d->r, text, b.len);
}

static int send_rows(dt_req *d, int status, int fmt, const outcols *oc, const json_t *arr)
{
    if (fmt == FMT_CSV)
        return send_csv(d, status, oc, arr);
    if (fmt != FMT_OBJECT)
        return dt_send_json(d, status, arr);
    if (json_array_size(arr) != 1)
        return dt_errorf(d, 406, "not_single_object", NULL, "%zu rows, not exactly one",
                         json_array_size(arr));
    int rc = dt_send_json(d, status, json_array_get(arr, 0));
    return rc;
}

/* ---- GET ----------------------------------------------------------------------------------- */

static int count_rows(dt_req *d, const dt_table *t, const rest_query *q, int64_t *total,
                      rest_err *e)
{
    rest_sql s;
    tn_rows *rows = NULL;
    rest_sql_init(&s, &d->mem, d->dialect);
    int rc = rest_sql_add(&s, "SELECT count(*) FROM ");
    rc = rc ?: rest_sql_ident(&s, t->name);
    rc = rc ?: add_where(d, t, &s, q, e);
    if (rc != TN_OK)
        return sql_failed(d, rc, e);
    rc = dt_read_query(d, &rows, s.text, s.nparams, s.params);
    if (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK)
        *total = strtoll(tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "0", NULL, 10);
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

/* The rows into arr, or (text given) as JSON text into text, *n of them. */
static int select_rows(dt_req *d, const dt_table *t, const rest_query *q, const outcols *oc,
                       json_t *arr, dt_str *text, size_t *n, rest_err *e)
{
    rest_sql s;
    rest_sql_init(&s, &d->mem, d->dialect);
    int rc = rest_sql_add(&s, "SELECT ");
    rc = rc ?: write_select(d, t, &s, oc, e);
    rc = rc ?: rest_sql_add(&s, " FROM ");
    rc = rc ?: rest_sql_ident(&s, t->name);
    rc = rc ?: add_where(d, t, &s, q, e);
    rc = rc ?: rest_sql_order(&s, q, dt_col_cb, (void *)t, e);
    rc = rc ?: rest_sql_limit(&s, q);
    if (rc != TN_OK)
        return sql_failed(d, rc, e);
    return text != NULL ? run_rows_text(d, &s, oc, text, n) : run_rows(d, &s, oc, arr, NULL);
}

/* "first-last/total" ("*" for an unknown total, "*" for the range of no rows); written by
 * hand: every read sends it. */
static void content_range(dt_req *d, const rest_query *q, size_t n, int64_t total)
{
    char v[80];
    size_t len = 0;
    if (n == 0) {
        v[len++] = '*';
    } else {
        len += rest_int_text(v + len, q->offset);
        v[len++] = '-';
        len += rest_int_text(v + len, q->offset + (int64_t)n - 1);
    }
    v[len++] = '/';
    if (total >= 0)
        len += rest_int_text(v + len, total);
    else
        v[len++] = '*';
    v[len] = '\0';
    tn_add_header(d->r, "Content-Range", v);
}

static int get_rows(dt_req *d, const dt_table *t, int fmt, json_t *arr)
{
    rest_query q;
    outcols oc;
    rest_err e;
    bool all;
    int64_t total = -1;
    memset(&e, 0, sizeof(e));
    int rc = parse_req(d, t, &q, true, &all);
    rc = rc ?: expand_select(d, t, &q, &oc);
    int64_t cap = dt_row_cap(d);
    if (rc == TN_OK && (q.limit < 0 || q.limit > cap))
        q.limit = cap;
    if (rc == TN_OK && q.prefer.count != REST_COUNT_NONE)
        rc = count_rows(d, t, &q, &total, &e);
    if (rc == TN_OK && total >= 0 && q.offset > 0 && q.offset >= total) {
        tn_add_header(d->r, "Content-Range", tn_sprintf(d->r, "*/%lld", (long long)total));
        return dt_errorf(d, 416, "range_not_satisfiable", NULL, "offset %lld is past the "
                         "%lld rows", (long long)q.offset, (long long)total);
    }
    /* JSON, the usual answer, is written as the rows are read (run_rows_text) */
    dt_str text;
    dt_str_init(&text, &d->mem);
    bool as_text = rc == TN_OK && fmt == FMT_JSON && names_unique(&oc);
    size_t n = 0;
    rc = rc ?: select_rows(d, t, &q, &oc, arr, as_text ? &text : NULL, &n, &e);
    if (rc != TN_OK)
        return rc == TN_DONE ? TN_OK : dt_db_error(d, rc, "reading rows");
    if (!as_text)
        n = json_array_size(arr);
    content_range(d, &q, n, total);
    bool partial = total >= 0 && (int64_t)n < total;
    if (as_text)
        return dt_send_json_text(d, partial ? 206 : 200, text.s, text.len);
    return send_rows(d, partial ? 206 : 200, fmt, &oc, arr);
}

/* What every rows answer starts with: the format the client accepts (406 when none), and
 * the array fn fills with the rows to answer. */
static int answer_with(dt_req *d, const dt_table *t,
                       int (*fn)(dt_req *, const dt_table *, int, json_t *))
{
    int fmt = accept_format(d->r);
    if (fmt < 0)
        return dt_error(d, 406, "not_acceptable", "offered: application/json, text/csv, "
                        "application/vnd.pgrst.object+json", tn_header(d->r, "Accept"));
    json_t *out = json_array();
    int rc = out != NULL ? fn(d, t, fmt, out) : TN_NOMEM;
    json_decref(out);
    return rc;
}

int dt_rows_get(dt_req *d, const dt_table *t)
{
    return answer_with(d, t, get_rows);
}

/* ---- writes: input ---------------------------------------------------------------------------- */

/* The rows to write: columns (the union of the keys, or the CSV header) and per row each
 * column's value and whether it was given. */
typedef struct input {
    int ncols;
    const dt_col **cols;
    int nrows;
    const char ***vals;
    bool **given;
} input;

static bool kept_col(const char *name)
{
    return strcmp(name, "created_at") == 0 || strcmp(name, "updated_at") == 0;
}

/* The column name, checked (and in columns= when given); answers and returns NULL. */
static const dt_col *input_col(dt_req *d, const dt_table *t, const char *name, bool *answered)
{
    const dt_col *c = dt_col_find(t, name);
    *answered = true;
    if (c == NULL)
        dt_errorf(d, 400, "unknown_column", name, "no column %s in %s", name, t->name);
    else if (kept_col(name))
        dt_errorf(d, 400, "reserved_column", name, "%s is kept by the API", name);
    else
        *answered = false;
    return *answered ? NULL : c;
}

/* name is in the comma list (columns=, on_conflict=); items may be double-quoted, as
 * PostgREST's clients write them. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        while (*p == ' ')
            p++;
        bool q = *p == '"';
        const char *s = p + q;
        if (strncmp(s, name, n) == 0 && (!q || s[n] == '"') &&
            (s[n + q] == ',' || s[n + q] == '\0' || s[n + q] == ' '))
            return true;
    }
    return false;
}

static int col_index(const input *in, const char *name)
{
    for (int i = 0; i < in->ncols; i++)
        if (strcmp(in->cols[i]->name, name) == 0)
            return i;
    return -1;
}

static int input_alloc(dt_req *d, input *in, int maxcols, int nrows)
{
    in->cols = tn_alloc(d->r, (size_t)(maxcols + 1) * sizeof(dt_col *));
    in->vals = tn_alloc(d->r, (size_t)(nrows + 1) * sizeof(char **));
    in->given = tn_alloc(d->r, (size_t)(nrows + 1) * sizeof(bool *));
    in->nrows = nrows;
    for (int i = 0; in->vals && in->given && i < nrows; i++) {
        in->vals[i] = tn_alloc(d->r, (size_t)(maxcols + 1) * sizeof(char *));
        in->given[i] = tn_alloc(d->r, (size_t)(maxcols + 1) * sizeof(bool));
        if (in->vals[i] == NULL || in->given[i] == NULL)
            return TN_NOMEM;
        memset(in->given[i], 0, (size_t)(maxcols + 1) * sizeof(bool));
    }
    return in->cols && in->vals && in->given ? TN_OK : TN_NOMEM;
}

/* The union of the objects' keys, in order of appearance. */
static int json_columns(dt_req *d, const dt_table *t, const json_t *arr, const char *only,
                        input *in)
{
    size_t i;
    const json_t *o;
    bool answered;
    in->ncols = 0;
    json_array_foreach(arr, i, o) {
        const char *k;
        const json_t *v;
        if (!json_is_object(o))
            return dt_error(d, 400, "bad_body", "rows are JSON objects", NULL) == TN_OK
                       ? TN_DONE : TN_IO;
        json_object_foreach((json_t *)o, k, v) {
            if ((only != NULL && !in_list(only, k)) || col_index(in, k) >= 0)
                continue;
            const dt_col *c = input_col(d, t, k, &answered);
            if (c == NULL)
                return TN_DONE;
            in->cols[in->ncols++] = c;
        }
    }
    return TN_OK;
}

static int json_values(dt_req *d, const json_t *arr, input *in)
{
    for (int r = 0; r < in->nrows; r++) {
        const json_t *o = json_array_get(arr, (size_t)r);
        for (int c = 0; c < in->ncols; c++) {
            const json_t *v = json_object_get(o, in->cols[c]->name);
            const char *why = NULL;
            in->given[r][c] = v != NULL;
            if (v != NULL && dt_value_text(d, in->cols[c]->type, v, &in->vals[r][c], &why) != TN_OK)
                return dt_errorf(d, 422, "invalid_value", in->cols[c]->name, "row %d, column "
                                 "%s: %s", r + 1, in->cols[c]->name, why ? why : "bad value")
                           == TN_OK ? TN_DONE : TN_IO;
        }
    }
    return TN_OK;
}

static int input_json(dt_req *d, const dt_table *t, const rest_query *q, input *in)
{
    json_t *body = NULL;
    int rc = dt_body_json(d, &body);
    if (rc != TN_OK)
        return rc;
    if (json_is_object(body)) {
        json_t *arr = json_array();
        json_array_append_new(arr, body);
        body = arr;
    }
    if (!json_is_array(body)) {
        json_decref(body);
        return dt_error(d, 400, "bad_body", "the body is an object or an array of objects",
                        NULL) == TN_OK ? TN_DONE : TN_IO;
    }
    size_t maxcols = (size_t)t->ncols;
    rc = input_alloc(d, in, (int)maxcols, (int)json_array_size(body));
    rc = rc ?: json_columns(d, t, body, q->columns, in);
    rc = rc ?: json_values(d, body, in);
    json_decref(body);
    return rc;
}

static int csv_header(dt_req *d, const dt_table *t, const dt_csv *csv, input *in, int *map)
{
    bool answered;
    in->ncols = 0;
    for (int i = 0; i < csv->ncols; i++) {
        if (col_index(in, csv->header[i]) >= 0)
            return dt_errorf(d, 400, "duplicate_column", csv->header[i], "%s is given twice",
                             csv->header[i]) == TN_OK ? TN_DONE : TN_IO;
        const dt_col *c = input_col(d, t, csv->header[i], &answered);
        if (c == NULL)
            return TN_DONE;
        map[in->ncols] = i;
        in->cols[in->ncols++] = c;
    }
    return TN_OK;
}

static int input_csv(dt_req *d, const dt_table *t, input *in)
{
    const char *data;
    size_t len;
    dt_csv csv;
    int line = 0;
    int rc = dt_body_raw(d, &data, &len);
    if (rc != TN_OK)
        return rc;
    rc = dt_csv_parse(&d->mem, data ? data : "", len, &csv, &line);
    if (rc == TN_INVALID)
        return dt_errorf(d, 400, "invalid_csv", tn_sprintf(d->r, "line %d", line),
                         "the body is not valid CSV with a header row") == TN_OK ? TN_DONE : TN_IO;
    int *map = rc == TN_OK ? tn_alloc(d->r, (size_t)(csv.ncols + 1) * sizeof(int)) : NULL;
    rc = rc ?: (map ? input_alloc(d, in, csv.ncols, csv.nrows) : TN_NOMEM);
    rc = rc ?: csv_header(d, t, &csv, in, map);
    for (int r = 0; rc == TN_OK && r < in->nrows; r++)
        for (int c = 0; rc == TN_OK && c < in->ncols; c++) {
            const char *why = NULL;
            in->given[r][c] = true;
            if (dt_csv_value_text(d, in->cols[c]->type, csv.rows[r][map[c]], &in->vals[r][c],
                                  &why) != TN_OK)
                rc = dt_errorf(d, 422, "invalid_value", in->cols[c]->name, "row %d, column "
                               "%s: %s", r + 1, in->cols[c]->name, why) == TN_OK ? TN_DONE : TN_IO;
        }
    return rc;
}

/* NOT NULL columns given null (or left out with no default to fill them). */
static int check_not_null(dt_req *d, const dt_table *t, const input *in, bool missing_default)
{
    for (int r = 0; r < in->nrows; r++)
        for (int k = 0; k < t->ncols; k++) {
            const dt_col *c = &t->cols[k];
            if (!c->not_null || c->pk || kept_col(c->name))
                continue;
            int i = col_index(in, c->name);
            bool omitted = i < 0 || (!in->given[r][i] && missing_default);
            bool null = i >= 0 && in->vals[r][i] == NULL && !omitted;
            if (null || (omitted && !c->has_default))
                return dt_errorf(d, 400, "not_null_violation", c->name, "row %d: %s may not "
                                 "be null", r + 1, c->name) == TN_OK ? TN_DONE : TN_IO;
        }
    return TN_OK;
}

/* ---- writes: statements ------------------------------------------------------------------- */

/* The conflict target (on_conflict= or id), checked. */
static int conflict_target(dt_req *d, const dt_table *t, const rest_query *q, const char ***cols,
                           int *n)
{
    const char *list = q->on_conflict ? q->on_conflict : "id";
    char *copy = tn_strdup(d->r, list);
    *cols = tn_alloc(d->r, (strlen(list) / 2 + 2) * sizeof(char *));
    *n = 0;
    for (char *save = NULL, *c = strtok_r(copy, ", \"", &save); c != NULL;
         c = strtok_r(NULL, ", \"", &save)) {
        if (dt_col_find(t, c) == NULL)
            return dt_errorf(d, 400, "unknown_column", c, "on_conflict: no column %s", c) ==
                           TN_OK ? TN_DONE : TN_IO;
        (*cols)[(*n)++] = c;
    }
    return *n > 0 ? TN_OK
                  : (dt_error(d, 400, "bad_on_conflict", "on_conflict names no column", NULL)
                             == TN_OK ? TN_DONE : TN_IO);
}

typedef struct writer {
    const dt_table *t;
    const rest_query *q;
    const outcols *oc;
    bool rows_wanted;     /* return=representation */
    bool ids_wanted;      /* FTS upkeep */
    int nconf;
    const char **conf;
    const char *now;
    json_t *out;
    idlist ids;
} writer;

static int add_returning(writer *w, rest_sql *s, rest_err *e, dt_req *d)
{
    if (!w->rows_wanted && !w->ids_wanted)
        return TN_OK;
    int rc = rest_sql_add(s, " RETURNING ");
    if (w->rows_wanted)
        rc = rc ?: write_select(d, w->t, s, w->oc, e);
    if (w->ids_wanted)
        rc = rc ?: rest_sql_add(s, w->rows_wanted ? ", \"id\"" : "\"id\"");
    return rc;
}

static int add_upsert(writer *w, rest_sql *s, const input *in, int r)
{
    if (w->q->prefer.resolution == REST_RES_NONE)
        return TN_OK;
    int rc = rest_sql_add(s, " ON CONFLICT (");
    for (int i = 0; rc == TN_OK && i < w->nconf; i++) {
        rc = rest_sql_add(s, i ? ", " : "");
        rc = rc ?: rest_sql_ident(s, w->conf[i]);
    }
    if (w->q->prefer.resolution == REST_RES_IGNORE)
        return rc ?: rest_sql_add(s, ") DO NOTHING");
    rc = rc ?: rest_sql_add(s, ") DO UPDATE SET ");
    bool stamp = dt_col_find(w->t, "updated_at") != NULL, any = false;
    for (int c = 0; rc == TN_OK && c < in->ncols; c++) {
        const char *name = in->cols[c]->name;
        if (!in->given[r][c] || in_list(w->q->on_conflict ? w->q->on_conflict : "id", name))
            continue;
        rc = rest_sql_add(s, any ? ", " : "");
        rc = rc ?: rest_sql_ident(s, name);
        rc = rc ?: rest_sql_add(s, " = excluded.");
        rc = rc ?: rest_sql_ident(s, name);
        any = true;
    }
    if (stamp)
        return rc ?: rest_sql_add(s, any ? ", \"updated_at\" = excluded.\"updated_at\""
                                        : "\"updated_at\" = excluded.\"updated_at\"");
    return rc ?: rest_sql_add(s, any ? "" : "\"id\" = excluded.\"id\"");
}

static bool writes_col(const writer *w, const input *in, int r, int c)
{
    return in->given[r][c] || !w->q->prefer.missing_default;
}

/* " (cols) VALUES ($n, ...)" of row r, with the timestamps when the table has them. */
static int insert_values(writer *w, const input *in, int r, rest_sql *s, bool stamps)
{
    bool first = true;
    int rc = rest_sql_add(s, " (");
    for (int c = 0; rc == TN_OK && c < in->ncols; c++) {
        if (!writes_col(w, in, r, c))
            continue;
        rc = rest_sql_add(s, first ? "" : ", ");
        rc = rc ?: rest_sql_ident(s, in->cols[c]->name);
        first = false;
    }
    if (stamps)
        rc = rc ?: rest_sql_add(s, first ? "\"created_at\", \"updated_at\""
                                         : ", \"created_at\", \"updated_at\"");
    rc = rc ?: rest_sql_add(s, ") VALUES (");
    first = true;
    for (int c = 0; rc == TN_OK && c < in->ncols; c++) {
        if (!writes_col(w, in, r, c))
            continue;
        rc = rest_sql_add(s, first ? "" : ", ");
        rc = rc ?: rest_sql_param(s, in->given[r][c] ? in->vals[r][c] : NULL);
        first = false;
    }
    for (int k = 0; stamps && k < 2; k++) {
        rc = rc ?: rest_sql_add(s, first ? "" : ", ");
        rc = rc ?: rest_sql_param(s, w->now);
        first = false;
    }
    return rc ?: rest_sql_add(s, ")");
}

/* INSERT of row r. */
static int insert_sql(dt_req *d, writer *w, const input *in, int r, rest_sql *s, rest_err *e)
{
    bool stamps = dt_col_find(w->t, "created_at") && dt_col_find(w->t, "updated_at");
    bool any = stamps;
    for (int c = 0; c < in->ncols; c++)
        any = any || writes_col(w, in, r, c);
    rest_sql_init(s, &d->mem, d->dialect);
    int rc = rest_sql_add(s, "INSERT INTO ");
    rc = rc ?: rest_sql_ident(s, w->t->name);
    if (any)
        rc = rc ?: insert_values(w, in, r, s, stamps);
    else
        rc = rc ?: rest_sql_add(s, " DEFAULT VALUES");
    rc = rc ?: add_upsert(w, s, in, r);
    return rc ?: add_returning(w, s, e, d);
}

/* Merge upsert on an FTS table: the row it may overwrite leaves the index first. */
static int fts_pre_merge(dt_req *d, writer *w, const input *in, int r)
{
    if (!w->ids_wanted || w->q->prefer.resolution != REST_RES_MERGE)
        return TN_OK;
    rest_sql s;
    rest_sql_init(&s, &d->mem, d->dialect);
    int rc = TN_OK;
    for (int i = 0; rc == TN_OK && i < w->nconf; i++) {
        int c = col_index(in, w->conf[i]);
        if (c < 0 || !in->given[r][c] || in->vals[r][c] == NULL)
            return TN_OK;   /* no value: nothing to conflict with */
        rc = rest_sql_add(&s, i ? " AND " : " WHERE ");
        rc = rc ?: rest_sql_ident(&s, w->conf[i]);
        rc = rc ?: rest_sql_add(&s, " = ");
        rc = rc ?: rest_sql_param(&s, in->vals[r][c]);
    }
    return rc ?: dt_fts_delete(d, w->t, s.text, s.nparams, s.params);
}

/* Every row, in the caller's transaction. */
static int insert_all(dt_req *d, writer *w, const input *in, rest_err *e)
{
    int rc = TN_OK;
    for (int r = 0; rc == TN_OK && r < in->nrows; r++) {
        rest_sql s;
        rc = fts_pre_merge(d, w, in, r);
        rc = rc ?: insert_sql(d, w, in, r, &s, e);
        if (rc == TN_OK && (w->rows_wanted || w->ids_wanted))
            rc = run_rows(d, &s, w->oc, w->rows_wanted ? w->out : NULL,
                          w->ids_wanted ? &w->ids : NULL);
        else if (rc == TN_OK)
            rc = tn_db_exec(d->db, s.text, s.nparams, s.params);
    }
    return rc ?: dt_fts_insert_ids(d, w->t, w->ids.n, w->ids.v);
}

/* The event of a committed write on "table:<t>": the operation, and the changed rows' keys
 * when the answer carries them (a single-column key, at most EVENT_IDS rows), else their
 * count. Nothing for Prefer: tx=rollback (nothing changed). */
#define EVENT_IDS 20

static void publish_rows(dt_req *d, const dt_table *t, const rest_query *q, const char *op,
                         int64_t n, const json_t *rows)
{
    if (q->prefer.tx_rollback)
        return;
    json_t *ev = json_pack("{s:s,s:s}", "op", op, "table", t->name);
    if (ev == NULL)
        return;
    const char *pk = NULL;
    for (int i = 0; i < t->ncols; i++) {
        if (t->cols[i].pk)
            pk = pk == NULL ? t->cols[i].name : "";   /* "": a key of several columns */
    }
    json_t *ids = NULL;
    size_t nrows = rows != NULL ? json_array_size(rows) : 0;
    if (pk != NULL && pk[0] != '\0' && nrows > 0 && nrows <= EVENT_IDS && (ids = json_array())) {
        for (size_t i = 0; ids != NULL && i < nrows; i++) {
            json_t *v = json_object_get(json_array_get(rows, i), pk);
            if (v == NULL) {   /* not selected */
                json_decref(ids);
                ids = NULL;
            } else {
                json_array_append(ids, v);
            }
        }
    }
    if (ids != NULL)
        json_object_set_new(ev, "ids", ids);
    else
        json_object_set_new(ev, "count", json_integer(n));
    dt_publish(d, t->name, ev);
}

/* Commit (or roll back for Prefer: tx=rollback); on failure, roll back and answer. */
static int finish_tx(dt_req *d, int rc, const rest_query *q, const rest_err *e,
                     const char *what)
{
    if (rc == TN_OK)
        return q->prefer.tx_rollback ? tn_db_rollback(d->db) : tn_db_commit(d->db);
    char *why = tn_strdup(d->r, tn_db_error(d->db));
    tn_db_rollback(d->db);
    if (rc == TN_DONE)
        return TN_DONE;
    if (e->code != NULL)   /* rest.c refused part of the statement */
        return dt_rest_error(d, e) == TN_OK ? TN_DONE : TN_IO;
    return dt_db_error_why(d, rc, what, why) == TN_OK ? TN_DONE : TN_IO;
}

static int write_setup(dt_req *d, const dt_table *t, writer *w, rest_query *q, outcols *oc,
                       bool *all)
{
    memset(w, 0, sizeof(*w));
    int rc = parse_req(d, t, q, false, all);
    rc = rc ?: expand_select(d, t, q, oc);
    w->t = t;
    w->q = q;
    w->oc = oc;
    w->rows_wanted = q->prefer.ret == REST_RETURN_REPRESENTATION;
    w->ids_wanted = d->dialect == REST_SQLITE && t->nsearch > 0;
    w->now = dt_now(d);
    return rc;
}

static bool is_csv(const tn_request *r)
{
    const char *ct = tn_header(r, "Content-Type");
    return ct != NULL && strncasecmp(ct, "text/csv", 8) == 0;
}

static int post_rows(dt_req *d, const dt_table *t, int fmt, json_t *out)
{
    writer w;
    rest_query q;
    outcols oc;
    input in;
    rest_err e;
    bool all;
    memset(&e, 0, sizeof(e));
    memset(&in, 0, sizeof(in));
    int rc = write_setup(d, t, &w, &q, &oc, &all);
    w.out = out;
    if (rc == TN_OK && q.prefer.resolution != REST_RES_NONE)
        rc = conflict_target(d, t, &q, &w.conf, &w.nconf);
    rc = rc ?: (is_csv(d->r) ? input_csv(d, t, &in) : input_json(d, t, &q, &in));
    rc = rc ?: check_not_null(d, t, &in, q.prefer.missing_default);
    rc = rc ?: tn_db_begin(d->db);
    if (rc != TN_OK)
        return rc == TN_DONE ? TN_OK : dt_db_error(d, rc, "starting the insert");
    rc = finish_tx(d, insert_all(d, &w, &in, &e), &q, &e, "insert refused");
    if (rc != TN_OK)
        return rc == TN_DONE ? TN_OK : dt_db_error(d, rc, "committing the insert");
    publish_rows(d, t, &q, q.prefer.resolution != REST_RES_NONE ? "upsert" : "insert",
                 in.nrows, w.rows_wanted ? out : NULL);
    if (!w.rows_wanted) {
        tn_set_status(d->r, 201);
        return TN_OK;
    }
    return send_rows(d, 201, fmt, &oc, out);
}

int dt_rows_post(dt_req *d, const dt_table *t)
{
    const char *ct = tn_header(d->r, "Content-Type");
    if (ct != NULL && !is_csv(d->r) && strncasecmp(ct, "application/json", 16) != 0)
        return dt_error(d, 415, "unsupported_media_type", "the body must be application/json "
                        "or text/csv", ct);
    return answer_with(d, t, post_rows);
}

/* ---- PATCH and DELETE ---------------------------------------------------------------------- */

static int need_filter(dt_req *d, const rest_query *q, bool all)
{
    if (q->where != NULL || q->search != NULL || all)
        return TN_OK;
    return dt_error(d, 400, "filter_required", "a filter is required to change rows",
                    "add a filter, or all=true for every row") == TN_OK ? TN_DONE : TN_IO;
}

/* SET list of the PATCH body. */
static int set_list(dt_req *d, const dt_table *t, const json_t *body, rest_sql *s, const char *now)
{
    const char *k;
    const json_t *v;
    bool any = false, answered;
    int rc = TN_OK;
    if (!json_is_object(body) || json_object_size(body) == 0)
        return dt_error(d, 400, "bad_body", "the body is an object of the columns to set",
                        NULL) == TN_OK ? TN_DONE : TN_IO;
    json_object_foreach((json_t *)body, k, v) {
        const dt_col *c = input_col(d, t, k, &answered);
        const char *text = NULL, *why = NULL;
        if (c == NULL)
            return TN_DONE;
        if (c->pk || dt_value_text(d, c->type, v, &text, &why) != TN_OK)
            return dt_errorf(d, 422, "invalid_value", k, "column %s: %s", k,
                             c->pk ? "the key cannot change" : why) == TN_OK ? TN_DONE : TN_IO;
        if (text == NULL && c->not_null)
            return dt_errorf(d, 400, "not_null_violation", k, "%s may not be null", k) ==
                           TN_OK ? TN_DONE : TN_IO;
        rc = rc ?: rest_sql_add(s, any ? ", " : "");
        rc = rc ?: rest_sql_ident(s, k);
        rc = rc ?: rest_sql_add(s, " = ");
        rc = rc ?: rest_sql_param(s, text);
        any = true;
    }
    if (dt_col_find(t, "updated_at") != NULL) {
        rc = rc ?: rest_sql_add(s, ", \"updated_at\" = ");
        rc = rc ?: rest_sql_param(s, now);
    }
    return rc;
}

/* The filter alone, for the FTS upkeep before the change. */
static int fts_before(dt_req *d, writer *w, rest_err *e)
{
    if (!w->ids_wanted)
        return TN_OK;
    rest_sql s;
    rest_sql_init(&s, &d->mem, d->dialect);
    int rc = add_where(d, w->t, &s, w->q, e);
    return rc ?: dt_fts_delete(d, w->t, s.text, s.nparams, s.params);
}

/* Runs the statement in a transaction with its FTS upkeep; answers. */
static int change_rows(dt_req *d, writer *w, rest_sql *s, rest_err *e, int fmt, bool reinsert,
                       const char *op)
{
    int rc = tn_db_begin(d->db);
    if (rc != TN_OK)
        return dt_db_error(d, rc, "starting the change");
    rc = fts_before(d, w, e);
    if (rc == TN_OK && (w->rows_wanted || w->ids_wanted))
        rc = run_rows(d, s, w->oc, w->rows_wanted ? w->out : NULL, w->ids_wanted ? &w->ids : NULL);
    else if (rc == TN_OK)
        rc = tn_db_exec(d->db, s->text, s->nparams, s->params);
    int64_t n = w->rows_wanted || w->ids_wanted ? (int64_t)w->ids.n : tn_db_changes(d->db);
    if (rc == TN_OK && reinsert)
        rc = dt_fts_insert_ids(d, w->t, w->ids.n, w->ids.v);
    rc = finish_tx(d, rc, w->q, e, "change refused");
    if (rc != TN_OK)
        return rc == TN_DONE ? TN_OK : dt_db_error(d, rc, "committing the change");
    if (w->rows_wanted)
        n = (int64_t)json_array_size(w->out);
    publish_rows(d, w->t, w->q, op, n, w->rows_wanted ? w->out : NULL);
    if (w->q->prefer.count != REST_COUNT_NONE)
        tn_add_header(d->r, "Content-Range", tn_sprintf(d->r, "*/%lld", (long long)n));
    if (!w->rows_wanted) {
        tn_set_status(d->r, 204);
        return TN_OK;
    }
    return send_rows(d, 200, fmt, w->oc, w->out);
}

static int patch_rows(dt_req *d, const dt_table *t, int fmt, json_t *out)
{
    writer w;
    rest_query q;
    outcols oc;
    rest_err e;
    rest_sql s;
    bool all;
    json_t *body = NULL;
    memset(&e, 0, sizeof(e));
    int rc = write_setup(d, t, &w, &q, &oc, &all);
    w.out = out;
    rc = rc ?: need_filter(d, &q, all);
    rc = rc ?: dt_body_json(d, &body);
    rest_sql_init(&s, &d->mem, d->dialect);
    rc = rc ?: rest_sql_add(&s, "UPDATE ");
    rc = rc ?: rest_sql_ident(&s, t->name);
    rc = rc ?: rest_sql_add(&s, " SET ");
    rc = rc ?: set_list(d, t, body, &s, w.now);
    rc = rc ?: add_where(d, t, &s, &q, &e);
    rc = rc ?: add_returning(&w, &s, &e, d);
    json_decref(body);
    if (rc != TN_OK)
        return sql_failed(d, rc, &e) == TN_DONE ? TN_OK : rc;
    return change_rows(d, &w, &s, &e, fmt, true, "update");
}

static int delete_rows(dt_req *d, const dt_table *t, int fmt, json_t *out)
{
    writer w;
    rest_query q;
    outcols oc;
    rest_err e;
    rest_sql s;
    bool all;
    memset(&e, 0, sizeof(e));
    int rc = write_setup(d, t, &w, &q, &oc, &all);
    w.out = out;
    rc = rc ?: need_filter(d, &q, all);
    rest_sql_init(&s, &d->mem, d->dialect);
    rc = rc ?: rest_sql_add(&s, "DELETE FROM ");
    rc = rc ?: rest_sql_ident(&s, t->name);
    rc = rc ?: add_where(d, t, &s, &q, &e);
    rc = rc ?: add_returning(&w, &s, &e, d);
    if (rc != TN_OK)
        return sql_failed(d, rc, &e) == TN_DONE ? TN_OK : rc;
    return change_rows(d, &w, &s, &e, fmt, false, "delete");
}

int dt_rows_patch(dt_req *d, const dt_table *t)
{
    return answer_with(d, t, patch_rows);
}

int dt_rows_delete(dt_req *d, const dt_table *t)
{
    return answer_with(d, t, delete_rows);
}
