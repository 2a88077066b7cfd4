/*
 * csv.c — CSV out and in (RFC 4180) for the data app's rows.
 *
 * Owns: the field writer with the admin panel's formula rule (a value a spreadsheet could run
 * as a formula gets a leading apostrophe inside quotes, as core/buf.c's buf_csv does for the
 * console's export), and the reader of `Content-Type: text/csv` bodies: a header row, then
 * rows of the same width; an unquoted empty field is SQL NULL, a quoted one the empty string.
 *
 * Must not: call the host (tn_*): pure, so tests/unit links it alone.
 */
#include <string.h>

#include "data.h"

void dt_csv_field(dt_str *b, const char *s)
{
    if (s == NULL)
        return;
    bool quote = strpbrk(s, ",\"\r\n") != NULL;
    bool formula = s[0] != '\0' && strchr("=+-@\t\r", s[0]) != NULL;
    if (!quote && !formula) {
        dt_str_add(b, s);
        return;
    }
    dt_str_addc(b, '"');
    if (formula)
        dt_str_addc(b, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            dt_str_addc(b, '"');
        dt_str_addc(b, *p);
    }
    dt_str_addc(b, '"');
}

/* ---- the reader ------------------------------------------------------------------------- */

typedef struct csv_rd {
    const rest_mem *m;
    const char *p, *end;
    int line;
} csv_rd;

/* A list of fields grown in the allocator. */
typedef struct fields {
    const char **v;
    int n, cap;
} fields;

static int fields_push(const rest_mem *m, fields *f, const char *s)
{
    if (f->n == f->cap) {
        int ncap = f->cap ? f->cap * 2 : 8;
        const char **nv = m->alloc(m->ctx, (size_t)ncap * sizeof(*nv));
        if (nv == NULL)
            return TN_NOMEM;
        if (f->n > 0)
            memcpy(nv, f->v, (size_t)f->n * sizeof(*nv));
        f->v = nv;
        f->cap = ncap;
    }
    f->v[f->n++] = s;
    return TN_OK;
}

/* One quoted field at rd->p (on the opening quote). */
static int read_quoted(csv_rd *rd, dt_str *b)
{
    rd->p++;
    for (;;) {
        if (rd->p >= rd->end)
            return TN_INVALID;   /* unterminated quote */
        char c = *rd->p++;
        if (c == '"') {
            if (rd->p < rd->end && *rd->p == '"') {
                dt_str_addc(b, '"');
                rd->p++;
                continue;
            }
            return TN_OK;
        }
        if (c == '\n')
            rd->line++;
        dt_str_addc(b, c);
    }
}

/* One field; *eol set when the record ended after it (or the input did). */
static int read_field(csv_rd *rd, const char **out, bool *eol)
{
    dt_str b;
    dt_str_init(&b, rd->m);
    bool quoted = rd->p < rd->end && *rd->p == '"';
    if (quoted && read_quoted(rd, &b) != TN_OK)
        return TN_INVALID;
    while (!quoted && rd->p < rd->end && *rd->p != ',' && *rd->p != '\n' && *rd->p != '\r') {
        if (*rd->p == '"')
            return TN_INVALID;   /* a quote inside an unquoted field */
        dt_str_addc(&b, *rd->p++);
    }
    *eol = true;
    if (rd->p < rd->end && *rd->p == ',') {
        rd->p++;
        *eol = false;
    } else if (rd->p < rd->end && *rd->p == '\r') {
        rd->p++;
        if (rd->p < rd->end && *rd->p == '\n')
            rd->p++;
        rd->line++;
    } else if (rd->p < rd->end && *rd->p == '\n') {
        rd->p++;
        rd->line++;
    } else if (rd->p < rd->end) {
        return TN_INVALID;   /* text after a closing quote */
    }
    if (!quoted && b.len == 0) {
        *out = NULL;
        return TN_OK;
    }
    *out = dt_str_get(&b);
    return *out != NULL ? TN_OK : TN_NOMEM;
}

static int read_record(csv_rd *rd, fields *f)
{
    memset(f, 0, sizeof(*f));
    bool eol = false;
    while (!eol) {
        const char *s;
        int rc = read_field(rd, &s, &eol);
        if (rc == TN_OK)
            rc = fields_push(rd->m, f, s);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

int dt_csv_parse(const rest_mem *m, const char *text, size_t len, dt_csv *out, int *line)
{
    csv_rd rd = {m, text, text + len, 1};
    fields hdr, row;
    fields rows = {0};
    memset(out, 0, sizeof(*out));
    int rc = read_record(&rd, &hdr);
    for (int i = 0; rc == TN_OK && i < hdr.n; i++)
        if (hdr.v[i] == NULL)
            rc = TN_INVALID;   /* an empty column name */
    if (rc != TN_OK)
        rd.line = 1;
    while (rc == TN_OK && rd.p < rd.end) {
        int at = rd.line;
        rc = read_record(&rd, &row);
        if (rc == TN_OK && row.n == 1 && row.v[0] == NULL)
            continue;   /* a blank line */
        if (rc == TN_OK && row.n != hdr.n)
            rc = TN_INVALID;
        if (rc == TN_OK)
            rc = fields_push(m, &rows, (const char *)row.v);
        if (rc != TN_OK)
            rd.line = at;
    }
    *line = rd.line;
    if (rc != TN_OK)
        return rc;
    out->ncols = hdr.n;
    out->header = hdr.v;
    out->nrows = rows.n;
    out->rows = (const char ***)rows.v;
    return TN_OK;
}
