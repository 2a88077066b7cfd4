/*
 * schema.c — the schema explorer of one tenant: a table's columns (types, defaults,
 * nullability), indexes and foreign keys, the table browser (paging, sort, a filter per
 * column) and the row view.
 *
 * Only the tenant's own schema or file is read. A table must be one of target_tables()'s
 * before anything else runs; its definition comes from db_describe (storage/catalog.c: the
 * tenant's schema only, never a catalog-wide scan, or SQLite's one file). Table and column
 * names enter SQL only through db_quote_ident (store_quote), and a table always qualified by
 * the tenant's schema (store_relation: unqualified, a table named like a pg_catalog view
 * would be that view); a name it refuses is shown but cannot be browsed, sorted or filtered.
 *
 * Paging is by key (WHERE pk > last) when the table has a single-column primary key and the
 * rows are sorted by it, by OFFSET otherwise. Every read runs in store_ro_begin's read-only
 * transaction with admin.query_timeout.
 *
 * Must not: write to the tenant's storage, or build SQL from a value (values are
 * parameters; only quoted identifiers and our own integers are written into SQL).
 */
#include "core/first.h"
#include "admin/pages.h"
#include "admin/store.h"
#include "core/buf.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CELL_MAX 160
#define MAX_COLS 256

typedef struct tinfo {
    const db_table_desc *d;  /* columns, indexes, foreign keys (storage/catalog.c) */
    const db_column *cols;
    int ncols;
    const char *pk;         /* the single-column primary key, or NULL */
    int npk;
} tinfo;

/* The table's definition and its primary key. TN_OK or an error (err set). */
static int load_columns(adm_req *a, adm_store *s, const char *table, tinfo *ti, char *err,
                        size_t errlen)
{
    memset(ti, 0, sizeof(*ti));
    db_table_desc *d = NULL;
    int rc = db_describe(s->db, s->sqlite ? NULL : s->schema, table, a->r->arena, &d);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "%s", tn_db_error(s->db));
    ti->d = d;
    ti->cols = d->cols;
    ti->ncols = d->ncols < MAX_COLS ? d->ncols : MAX_COLS;
    for (int i = 0; i < ti->ncols; i++)
        if (ti->cols[i].pk > 0) {
            ti->npk++;
            ti->pk = ti->cols[i].name;
        }
    if (ti->npk != 1)
        ti->pk = NULL;
    return TN_OK;
}

static void put_cell(buf *o, const char *v, bool full)
{
    if (v == NULL) {
        buf_puts(o, "<span class=\"null\">NULL</span>");
        return;
    }
    size_t n = strlen(v);
    if (full || n <= CELL_MAX) {
        buf_html(o, v);
        return;
    }
    size_t cut = utf8_valid_prefix(v, CELL_MAX);
    buf_htmln(o, v, cut);
    buf_puts(o, "<span class=\"more\">…</span>");
}

/* Open the tenant and its storage, check the table is one of its own, start reading.
 * Returns TN_OK, or an answered status (> 0) the caller returns. */
static int open_table(adm_req *a, const char *slug, const char *table, adm_tenant *t,
                      adm_store *s)
{
    int rc = adm_tenant_get(a, slug, t);
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", "The tenant could not be read.");
    }
    char err[512];
    rc = store_open(a, t->rec, s, err, sizeof(err));
    if (rc == TN_OK)
        rc = store_ro_begin(s, adm.env.cfg->query_timeout_ms, err, sizeof(err));
    if (rc != TN_OK) {
        store_close(s);
        free(t->rec);
        return send_message(a, 503, "Storage unavailable", err);
    }
    if (!store_has_table(s, a->r->arena, table)) {
        store_ro_end(s);
        store_close(s);
        free(t->rec);
        return send_message(a, 404, "No such table",
                            "This tenant's schema has no table of that name.");
    }
    return TN_OK;
}

static void close_table(adm_tenant *t, adm_store *s)
{
    store_ro_end(s);
    store_close(s);
    free(t->rec);
}

static void table_href(buf *o, const char *slug, const char *table, const char *view)
{
    buf h = BUF_INIT;
    buf_puts(&h, "/t/");
    buf_puts(&h, slug);
    buf_puts(&h, "/table?name=");
    put_url(&h, table);
    if (view != NULL) {
        buf_puts(&h, "&view=");
        buf_puts(&h, view);
    }
    buf_html(o, h.p ? h.p : "");
    buf_free(&h);
}

static void table_head(adm_req *a, const char *slug, const char *table, bool structure)
{
    buf *o = a->out;
    buf_puts(o, "<header class=\"page-head\"><h1><a class=\"crumb\" href=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "\">");
    buf_html(o, slug);
    buf_puts(o, "</a> <span class=\"sep\">/</span> <span class=\"mono\">");
    buf_html(o, table);
    buf_puts(o, "</span></h1></header><nav class=\"tabs\"><a href=\"");
    table_href(o, slug, table, NULL);
    buf_puts(o, structure ? "\">Rows</a><a class=\"active\" href=\"" : "\" class=\"active\">Rows</a><a href=\"");
    table_href(o, slug, table, "structure");
    buf_puts(o, "\" id=\"tab-structure\">Structure</a></nav>");
}

/* ---- structure ------------------------------------------------------------------------------ */

static void structure(adm_req *a, const tinfo *ti)
{
    buf *o = a->out;
    buf_puts(o, "<section class=\"block\"><h2>Columns</h2><table class=\"grid\" id=\"columns\">"
                "<thead><tr><th>#</th><th>Column</th><th>Type</th><th>Null</th><th>Default</th>"
                "<th>Key</th></tr></thead><tbody>");
    for (int i = 0; i < ti->ncols; i++) {
        const db_column *c = &ti->cols[i];
        buf_printf(o, "<tr><td class=\"num muted\">%d</td><td class=\"mono\">", i + 1);
        buf_html(o, c->name);
        buf_puts(o, "</td><td class=\"mono type\">");
        buf_html(o, c->type[0] ? c->type : "—");
        buf_puts(o, c->notnull ? "</td><td>not null</td><td class=\"mono\">"
                               : "</td><td class=\"muted\">null</td><td class=\"mono\">");
        if (c->dflt)
            buf_html(o, c->dflt);
        else
            buf_puts(o, "<span class=\"muted\">—</span>");
        buf_puts(o, "</td><td>");
        if (c->pk)
            buf_printf(o, "<span class=\"tag\">PK%s</span>", ti->npk > 1 ? " part" : "");
        buf_puts(o, "</td></tr>");
    }
    buf_puts(o, "</tbody></table></section>");

    /* Indexes */
    buf_puts(o, "<section class=\"block\"><h2>Indexes</h2>");
    const db_table_desc *d = ti->d;
    for (int i = 0; i < d->nidx; i++) {
        const db_index *x = &d->idx[i];
        if (i == 0)
            buf_puts(o, "<table class=\"grid\" id=\"indexes\"><thead><tr><th>Index</th>"
                        "<th>Unique</th><th>Definition</th></tr></thead><tbody>");
        buf_puts(o, "<tr><td class=\"mono\">");
        buf_html(o, x->name);
        if (x->primary)
            buf_puts(o, " <span class=\"tag\">primary key</span>");
        buf_puts(o, x->unique ? "</td><td>unique</td><td class=\"mono\">"
                              : "</td><td class=\"muted\">—</td><td class=\"mono\">");
        buf_html(o, x->def);
        buf_puts(o, "</td></tr>");
    }
    buf_puts(o, d->nidx ? "</tbody></table>" : "<p class=\"muted\">No indexes.</p>");
    buf_puts(o, "</section>");

    /* Foreign keys */
    buf_puts(o, "<section class=\"block\"><h2>Foreign keys</h2>");
    for (int i = 0; i < d->nfkeys; i++) {
        if (i == 0)
            buf_puts(o, "<table class=\"grid\" id=\"fkeys\"><thead><tr><th>Key</th>"
                        "<th>Definition</th></tr></thead><tbody>");
        buf_puts(o, "<tr><td class=\"mono\">");
        buf_html(o, d->fkeys[i].name);
        buf_puts(o, "</td><td class=\"mono\">");
        buf_html(o, d->fkeys[i].def);
        buf_puts(o, "</td></tr>");
    }
    buf_puts(o, d->nfkeys ? "</tbody></table>" : "<p class=\"muted\">No foreign keys.</p>");
    buf_puts(o, "</section>");
}

/* ---- the browser ---------------------------------------------------------------------------- */

typedef struct browse {
    const char *sort;          /* a column, or NULL */
    bool desc;
    const char *after, *before;
    long long offset;
    const char *filter[MAX_COLS];
    bool keyset;
} browse;

static void like_pattern(arena *ar, const char *s, char **out)
{
    size_t n = strlen(s);
    char *p = arena_alloc(ar, 2 * n + 3);
    if (p == NULL) {
        *out = NULL;
        return;
    }
    size_t o = 0;
    p[o++] = '%';
    for (; *s; s++) {
        if (*s == '%' || *s == '_' || *s == '\\')
            p[o++] = '\\';
        p[o++] = *s;
    }
    p[o++] = '%';
    p[o] = '\0';
    *out = p;
}

/* The browser's URL with the current state changed by one key (NULL value: removed). */
static void browse_href(buf *o, const char *slug, const char *table, const tinfo *ti,
                        const browse *b, const char *key, const char *value, bool keep_page)
{
    buf h = BUF_INIT;
    buf_puts(&h, "/t/");
    buf_puts(&h, slug);
    buf_puts(&h, "/table?name=");
    put_url(&h, table);
    const char *sort = b->sort, *dir = b->desc ? "desc" : NULL;
    if (key && strcmp(key, "sort") == 0) {
        sort = value;
        dir = NULL;
    }
    if (key && strcmp(key, "dir") == 0)
        dir = value;
    if (sort) {
        buf_puts(&h, "&sort=");
        put_url(&h, sort);
    }
    if (dir) {
        buf_puts(&h, "&dir=");
        buf_puts(&h, dir);
    }
    for (int i = 0; i < ti->ncols; i++)
        if (b->filter[i] && b->filter[i][0]) {
            buf_printf(&h, "&f%d=", i);
            put_url(&h, b->filter[i]);
        }
    if (keep_page) {
        if (b->after) {
            buf_puts(&h, "&after=");
            put_url(&h, b->after);
        }
        if (b->offset)
            buf_printf(&h, "&offset=%lld", b->offset);
    }
    if (key && (strcmp(key, "after") == 0 || strcmp(key, "before") == 0 ||
                strcmp(key, "offset") == 0)) {
        buf_putc(&h, '&');
        buf_puts(&h, key);
        buf_putc(&h, '=');
        put_url(&h, value);
    }
    buf_html(o, h.p ? h.p : "");
    buf_free(&h);
}

static int col_index(const tinfo *ti, const char *name)
{
    for (int i = 0; i < ti->ncols; i++)
        if (strcmp(ti->cols[i].name, name) == 0)
            return i;
    return -1;
}

static void rows_view(adm_req *a, adm_store *s, const char *slug, const char *table,
                      const tinfo *ti)
{
    buf *o = a->out;
    arena *ar = a->r->arena;
    int limit = adm.env.cfg->page_size;
    browse b;
    memset(&b, 0, sizeof(b));
    const char *sort = adm_arg(a, "sort");
    if (sort && col_index(ti, sort) >= 0 && store_quote(ar, sort) != NULL)
        b.sort = sort;
    const char *dir = adm_arg(a, "dir");
    b.desc = dir && strcmp(dir, "desc") == 0;
    const char *sort_col = b.sort ? b.sort : ti->pk;
    b.keyset = ti->pk != NULL && sort_col != NULL && strcmp(sort_col, ti->pk) == 0 &&
               store_quote(ar, ti->pk) != NULL;
    b.after = adm_arg(a, "after");
    b.before = adm_arg(a, "before");
    const char *off = adm_arg(a, "offset");
    b.offset = off ? atoll(off) : 0;
    if (b.offset < 0)
        b.offset = 0;
    if (!b.keyset)
        b.after = b.before = NULL;

    const char *params[MAX_COLS + 1];
    int np = 0;
    buf sql = BUF_INIT;
    char *qt = store_relation(s, ar, table);
    if (qt == NULL) {
        buf_puts(o, "<p class=\"error\">This table's name cannot be quoted safely: it can be "
                    "listed, not browsed.</p>");
        return;
    }
    buf_puts(&sql, "SELECT * FROM ");
    buf_puts(&sql, qt);
    buf_puts(&sql, " WHERE 1 = 1");
    bool any_filter = false;
    for (int i = 0; i < ti->ncols; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i);
        const char *f = adm_arg(a, key);
        char *qc = store_quote(ar, ti->cols[i].name);
        if (f == NULL || f[0] == '\0' || qc == NULL)
            continue;
        b.filter[i] = f;
        any_filter = true;
        char *pat;
        like_pattern(ar, f, &pat);
        params[np++] = pat ? pat : "%";
        buf_printf(&sql, " AND lower(CAST(%s AS TEXT)) LIKE lower($%d) ESCAPE '\\'", qc, np);
    }
    bool backwards = b.keyset && b.before != NULL;
    bool asc = !b.desc;
    char *qs = sort_col ? store_quote(ar, sort_col) : NULL;
    if (b.keyset && (b.after || b.before)) {
        params[np++] = backwards ? b.before : b.after;
        bool gt = backwards ? !asc : asc;
        buf_printf(&sql, " AND %s %s $%d", qs, gt ? ">" : "<", np);
    }
    if (qs != NULL) {
        bool order_asc = backwards ? !asc : asc;
        buf_printf(&sql, " ORDER BY %s %s", qs, order_asc ? "ASC" : "DESC");
    } else if (!s->sqlite) {
        buf_puts(&sql, " ORDER BY 1");
    }
    buf_printf(&sql, " LIMIT %d", limit + 1);
    if (!b.keyset && b.offset)
        buf_printf(&sql, " OFFSET %lld", b.offset);

    tn_rows *rows = NULL;
    int rc = sql.oom ? TN_NOMEM : tn_db_query(s->db, &rows, sql.p, np, params);
    buf_free(&sql);
    if (rc != TN_OK) {
        buf_puts(o, "<p class=\"error\">");
        buf_html(o, rc == TN_TIMEOUT ? "The query ran past admin.query_timeout."
                                     : tn_db_error(s->db));
        buf_puts(o, "</p>");
        return;
    }
    int nc = tn_rows_ncols(rows);
    if (nc > MAX_COLS)
        nc = MAX_COLS;
    /* Collect (we need the page's first and last keys, and may have to reverse). */
    const char ***page = arena_alloc(ar, (size_t)(limit + 1) * sizeof(*page));
    int n = 0;
    bool more = false;
    while (page && (rc = tn_rows_next(rows)) == TN_OK) {
        if (n == limit) {
            more = true;
            break;
        }
        const char **row = arena_alloc(ar, (size_t)nc * sizeof(*row));
        if (row == NULL)
            break;
        for (int i = 0; i < nc; i++) {
            const char *v = tn_rows_get(rows, i);
            row[i] = v ? arena_strdup(ar, v) : NULL;
        }
        page[n++] = row;
    }
    const char **names = arena_alloc(ar, (size_t)(nc ? nc : 1) * sizeof(*names));
    for (int i = 0; names && i < nc; i++)
        names[i] = arena_strdup(ar, tn_rows_colname(rows, i) ? tn_rows_colname(rows, i) : "");
    tn_rows_free(rows);
    if (page == NULL || names == NULL)
        return;
    if (rc == TN_TIMEOUT) {
        buf_puts(o, "<p class=\"error\">The query ran past admin.query_timeout.</p>");
        return;
    }
    if (backwards)
        for (int i = 0; i < n / 2; i++) {
            const char **t = page[i];
            page[i] = page[n - 1 - i];
            page[n - 1 - i] = t;
        }
    int pk_i = -1;
    for (int i = 0; ti->pk && i < nc; i++)
        if (strcmp(names[i], ti->pk) == 0)
            pk_i = i;

    buf_puts(o, "<form method=\"get\" action=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "/table\" id=\"browse\"><input type=\"hidden\" name=\"name\" value=\"");
    buf_html(o, table);
    buf_puts(o, "\">");
    if (b.sort) {
        buf_puts(o, "<input type=\"hidden\" name=\"sort\" value=\"");
        buf_html(o, b.sort);
        buf_puts(o, "\">");
    }
    if (b.desc)
        buf_puts(o, "<input type=\"hidden\" name=\"dir\" value=\"desc\">");
    buf_puts(o, "<div class=\"table-wrap\"><table class=\"grid data nav-rows\" id=\"rows\"><thead><tr>");
    for (int i = 0; i < nc; i++) {
        int ci = col_index(ti, names[i]);
        bool sortable = ci >= 0 && store_quote(ar, names[i]) != NULL;
        bool current = sort_col && strcmp(names[i], sort_col) == 0;
        buf_puts(o, "<th>");
        if (sortable) {
            buf_puts(o, "<a class=\"sort\" href=\"");
            if (current)
                browse_href(o, slug, table, ti, &b, "dir", b.desc ? "asc" : "desc", false);
            else
                browse_href(o, slug, table, ti, &b, "sort", names[i], false);
            buf_puts(o, "\">");
        }
        buf_html(o, names[i]);
        if (current)
            buf_puts(o, b.desc ? " ↓" : " ↑");
        if (sortable)
            buf_puts(o, "</a>");
        if (ci >= 0) {
            buf_puts(o, "<span class=\"coltype\">");
            buf_html(o, ti->cols[ci].type);
            buf_puts(o, "</span>");
        }
        buf_puts(o, "</th>");
    }
    buf_puts(o, "</tr><tr class=\"filters-row\">");
    for (int i = 0; i < nc; i++) {
        int ci = col_index(ti, names[i]);
        buf_puts(o, "<th>");
        if (ci >= 0 && store_quote(ar, names[i]) != NULL) {
            buf_printf(o, "<input class=\"colfilter\" name=\"f%d\" placeholder=\"filter\" "
                          "aria-label=\"filter ", ci);
            buf_html(o, names[i]);
            buf_puts(o, "\" value=\"");
            buf_html(o, b.filter[ci] ? b.filter[ci] : "");
            buf_puts(o, "\">");
        }
        buf_puts(o, "</th>");
    }
    buf_puts(o, "</tr></thead><tbody>");
    for (int r = 0; r < n; r++) {
        buf_puts(o, "<tr");
        buf h = BUF_INIT;
        buf_puts(&h, "/t/");
        buf_puts(&h, slug);
        buf_puts(&h, "/row?name=");
        put_url(&h, table);
        if (pk_i >= 0 && page[r][pk_i] != NULL) {
            buf_puts(&h, "&key=");
            put_url(&h, page[r][pk_i]);
        } else {
            if (b.sort) {
                buf_puts(&h, "&sort=");
                put_url(&h, b.sort);
                if (b.desc)
                    buf_puts(&h, "&dir=desc");
            }
            buf_printf(&h, "&offset=%lld", b.offset + r);
        }
        bool linkable = pk_i >= 0 ? page[r][pk_i] != NULL : !b.keyset && !any_filter;
        if (linkable) {
            buf_puts(o, " data-href=\"");
            buf_html(o, h.p ? h.p : "");
            buf_puts(o, "\"");
        }
        buf_puts(o, ">");
        for (int i = 0; i < nc; i++) {
            buf_puts(o, "<td>");
            if (i == 0 && linkable) {
                buf_puts(o, "<a class=\"rowlink\" href=\"");
                buf_html(o, h.p ? h.p : "");
                buf_puts(o, "\">");
                put_cell(o, page[r][i], false);
                buf_puts(o, "</a>");
            } else {
                put_cell(o, page[r][i], false);
            }
            buf_puts(o, "</td>");
        }
        buf_free(&h);
        buf_puts(o, "</tr>");
    }
    buf_puts(o, "</tbody></table>");
    if (n == 0)
        buf_puts(o, "<p class=\"empty\">No rows.</p>");
    buf_puts(o, "</div><button type=\"submit\" class=\"hidden-submit\">Filter</button></form>"
                "<nav class=\"pager\" aria-label=\"pages\">");
    bool has_prev = b.keyset ? (backwards ? more : b.after != NULL) : b.offset > 0;
    bool has_next = b.keyset ? (backwards ? true : more) : more;
    if (has_prev && n > 0) {
        buf_puts(o, "<a rel=\"prev\" id=\"prev-page\" href=\"");
        if (b.keyset && pk_i >= 0 && page[0][pk_i])
            browse_href(o, slug, table, ti, &b, "before", page[0][pk_i], false);
        else {
            char v[24];
            snprintf(v, sizeof(v), "%lld", b.offset > limit ? b.offset - limit : 0);
            browse_href(o, slug, table, ti, &b, "offset", v, false);
        }
        buf_puts(o, "\">← Previous</a>");
    } else {
        buf_puts(o, "<span class=\"disabled\">← Previous</span>");
    }
    buf_printf(o, "<span class=\"muted\">%d row%s%s</span>", n, n == 1 ? "" : "s",
               b.keyset ? " · paged by key" : "");
    if (has_next && n > 0) {
        buf_puts(o, "<a rel=\"next\" id=\"next-page\" href=\"");
        if (b.keyset && pk_i >= 0 && page[n - 1][pk_i])
            browse_href(o, slug, table, ti, &b, "after", page[n - 1][pk_i], false);
        else {
            char v[24];
            snprintf(v, sizeof(v), "%lld", b.offset + limit);
            browse_href(o, slug, table, ti, &b, "offset", v, false);
        }
        buf_puts(o, "\">Next →</a>");
    } else {
        buf_puts(o, "<span class=\"disabled\">Next →</span>");
    }
    buf_puts(o, "</nav>");
}

int page_table(adm_req *a, const char *slug, const char *table)
{
    adm_tenant t;
    adm_store s;
    int st = open_table(a, slug, table, &t, &s);
    if (st != TN_OK)
        return st;
    tinfo *ti = tn_alloc(a->r, sizeof(*ti));
    char err[512];
    if (ti == NULL || load_columns(a, &s, table, ti, err, sizeof(err)) != TN_OK) {
        close_table(&t, &s);
        return send_message(a, 500, "Error", ti ? err : "out of memory");
    }
    const char *view = adm_arg(a, "view");
    bool structure_view = view && strcmp(view, "structure") == 0;
    buf *o = a->out;
    char title[200];
    snprintf(title, sizeof(title), "%s · %s", table, slug);
    page_begin(a, title, "table", slug);
    table_head(a, slug, table, structure_view);
    if (structure_view)
        structure(a, ti);
    else
        rows_view(a, &s, slug, table, ti);
    close_table(&t, &s);
    page_end(a);
    (void)o;
    return send_html(a, 200);
}

int page_row(adm_req *a, const char *slug, const char *table)
{
    adm_tenant t;
    adm_store s;
    int st = open_table(a, slug, table, &t, &s);
    if (st != TN_OK)
        return st;
    tinfo *ti = tn_alloc(a->r, sizeof(*ti));
    char err[512];
    if (ti == NULL || load_columns(a, &s, table, ti, err, sizeof(err)) != TN_OK) {
        close_table(&t, &s);
        return send_message(a, 500, "Error", ti ? err : "out of memory");
    }
    arena *ar = a->r->arena;
    char *qt = store_relation(&s, ar, table);
    const char *key = adm_arg(a, "key");
    const char *off = adm_arg(a, "offset");
    char *sql = NULL;
    const char *p[1];
    int np = 0;
    if (qt != NULL && key != NULL && ti->pk != NULL && store_quote(ar, ti->pk) != NULL) {
        sql = arena_sprintf(ar, "SELECT * FROM %s WHERE %s = $1", qt, store_quote(ar, ti->pk));
        p[np++] = key;
    } else if (qt != NULL && off != NULL) {
        const char *sort = adm_arg(a, "sort");
        const char *dir = adm_arg(a, "dir");
        char *qs = sort && col_index(ti, sort) >= 0 ? store_quote(ar, sort) : NULL;
        sql = arena_sprintf(ar, "SELECT * FROM %s%s%s%s%s LIMIT 1 OFFSET %lld", qt,
                            qs ? " ORDER BY " : (s.sqlite ? "" : " ORDER BY 1"), qs ? qs : "",
                            qs && dir && strcmp(dir, "desc") == 0 ? " DESC" : "", "",
                            atoll(off) < 0 ? 0LL : atoll(off));
    }
    if (sql == NULL) {
        close_table(&t, &s);
        return send_message(a, 400, "Which row?", "Give the row's key.");
    }
    tn_rows *rows = NULL;
    int rc = tn_db_query(s.db, &rows, sql, np, p);
    if (rc != TN_OK) {
        str_copy(err, sizeof(err), tn_db_error(s.db));   /* kept past the close */
        close_table(&t, &s);
        return send_message(a, 500, "Error", err);
    }
    if (tn_rows_next(rows) != TN_OK) {
        tn_rows_free(rows);
        close_table(&t, &s);
        return send_message(a, 404, "No such row", "The row is not there (any more).");
    }
    buf *o = a->out;
    char title[200];
    snprintf(title, sizeof(title), "row of %s · %s", table, slug);
    page_begin(a, title, "table", slug);
    table_head(a, slug, table, false);
    buf_puts(o, "<section class=\"block\"><h2>Row");
    if (key) {
        buf_puts(o, " <span class=\"mono\">");
        buf_html(o, ti->pk);
        buf_puts(o, " = ");
        buf_html(o, key);
        buf_puts(o, "</span>");
    }
    buf_puts(o, "</h2><dl class=\"record\" id=\"record\">");
    for (int i = 0; i < tn_rows_ncols(rows); i++) {
        buf_puts(o, "<dt class=\"mono\">");
        buf_html(o, tn_rows_colname(rows, i) ? tn_rows_colname(rows, i) : "");
        int ci = col_index(ti, tn_rows_colname(rows, i) ? tn_rows_colname(rows, i) : "");
        if (ci >= 0) {
            buf_puts(o, "<span class=\"coltype\">");
            buf_html(o, ti->cols[ci].type);
            buf_puts(o, "</span>");
        }
        buf_puts(o, "</dt><dd><pre>");
        put_cell(o, tn_rows_get(rows, i), true);
        buf_puts(o, "</pre></dd>");
    }
    buf_puts(o, "</dl></section>");
    tn_rows_free(rows);
    close_table(&t, &s);
    page_end(a);
    return send_html(a, 200);
}
