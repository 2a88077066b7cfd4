/*
 * fleet.c — the fleet (every tenant, searched, filtered, paged) and one tenant's overview.
 *
 * The fleet reads the registry with one keyset-paged query in slug order (the UNIQUE index
 * on slug), the filters added as constant SQL fragments with parameters, and the page's
 * domains with one more query for the page's ids: the cost of a page does not grow with the
 * fleet, except the two counts (a count of the filtered rows and the per-state counts, both
 * index-only scans on SQLite's tenants_state index).
 *
 * A tenant's overview shows its job counts per state (jobs.c), each a link to its jobs.
 *
 * Must not: list the registry without a LIMIT, or open a tenant's storage for the fleet.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "admin/store.h"
#include "core/buf.h"
#include "core/log.h"
#include "tenancy/lookup.h"
#include "tenancy/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- one tenant ------------------------------------------------------------------------------- */

int adm_tenant_get(adm_req *a, const char *slug, adm_tenant *out)
{
    memset(out, 0, sizeof(*out));
    int rc = registry_fetch(adm.reg, LK_SLUG, slug, &out->rec);
    if (rc != TN_OK)
        return rc;
    const char *p[] = {slug};
    tn_rows *rows = NULL;
    rc = tn_db_query(registry_db(adm.reg), &rows,
                     "SELECT migration_version, last_error, deleted_at FROM tenants "
                     "WHERE slug = $1", 1, p);
    if (rc == TN_OK) {
        if (tn_rows_next(rows) == TN_OK) {
            const char *v = tn_rows_get(rows, 0), *e = tn_rows_get(rows, 1),
                       *d = tn_rows_get(rows, 2);
            str_copy(out->migration_version, sizeof(out->migration_version), v ? v : "");
            str_copy(out->last_error, sizeof(out->last_error), e ? e : "");
            out->deleted_at = d ? atoll(d) : 0;
        }
        tn_rows_free(rows);
    }
    (void)a;
    return TN_OK;
}

static void put_time(buf *o, int64_t t)
{
    char s[40] = "";
    time_t tt = (time_t)t;
    struct tm tm;
    if (t > 0 && gmtime_r(&tt, &tm) != NULL)
        strftime(s, sizeof(s), "%Y-%m-%d %H:%M UTC", &tm);
    buf_puts(o, s[0] ? s : "—");
}

static void put_state(buf *o, const char *state)
{
    buf_puts(o, "<span class=\"state state-");
    buf_html(o, state);
    buf_puts(o, "\">");
    buf_html(o, state);
    buf_puts(o, "</span>");
}

/* ---- the fleet query -------------------------------------------------------------------------- */

typedef struct fleet_row {
    char *id, *slug, *name, *state, *placement, *version, *error;
    const char *domains[8];
    bool primary[8];
    int ndomains, more_domains;
} fleet_row;

#define COUNT_MAX 100000

typedef struct fleet {
    const char *q, *state, *placement, *after, *before;
    int limit;
    fleet_row *rows;
    int n;
    bool has_next, has_prev;
    int64_t total;
} fleet;

static void like_pattern(const char *s, char *pat, size_t n)
{
    size_t o = 0;
    pat[o++] = '%';
    for (; *s && o < n - 3; s++) {
        if (*s == '%' || *s == '_' || *s == '\\')
            pat[o++] = '\\';
        pat[o++] = *s;
    }
    pat[o++] = '%';
    pat[o] = '\0';
}

static const char *arg_or_empty(adm_req *a, const char *name)
{
    const char *v = adm_arg(a, name);
    return v ? v : "";
}

static void fleet_args(adm_req *a, fleet *f)
{
    memset(f, 0, sizeof(*f));
    f->q = arg_or_empty(a, "q");
    f->state = arg_or_empty(a, "state");
    f->placement = arg_or_empty(a, "placement");
    f->after = arg_or_empty(a, "after");
    f->before = arg_or_empty(a, "before");
    if (strlen(f->q) > 200)
        f->q = "";
    if (tenant_state_parse(f->state) < 0)
        f->state = "";
    if (!tenant_slug_valid(f->after))
        f->after = "";
    if (!tenant_slug_valid(f->before))
        f->before = "";
    f->limit = adm.env.cfg->page_size;
}

/* Run the page query. TN_OK, or a registry error (logged). */
static int fleet_run(adm_req *a, fleet *f)
{
    tn_db *db = registry_db(adm.reg);
    arena *ar = a->r->arena;
    char pat[512];
    like_pattern(f->q, pat, sizeof(pat));
    const char *p[4];
    int np = 0;
    buf w = BUF_INIT;
    buf_puts(&w, " WHERE 1 = 1");
    if (f->state[0]) {
        p[np++] = f->state;
        buf_printf(&w, " AND t.state = $%d", np);
    }
    if (f->placement[0]) {
        p[np++] = f->placement;
        buf_printf(&w, " AND t.placement = $%d", np);
    }
    if (f->q[0]) {
        /* ASCII case ignored on both: SQLite's LIKE does it, PostgreSQL's ILIKE; no lower()
         * per row, which is half the cost of a search over the whole fleet. */
        bool pg = strcmp(tn_db_backend(db), "postgres") == 0;
        p[np++] = pat;
        buf_printf(&w, " AND (t.slug %s $%d ESCAPE '\\' OR t.name %s $%d ESCAPE '\\')",
                   pg ? "ILIKE" : "LIKE", np, pg ? "ILIKE" : "LIKE", np);
    }
    int nfilter = np;
    /* Counted up to COUNT_MAX: past that the page says "100000+". */
    char *count_sql = arena_sprintf(ar, "SELECT count(*) FROM (SELECT 1 FROM tenants t%s "
                                        "LIMIT %d) x", w.p, COUNT_MAX + 1);
    char v[32];
    f->total = count_sql && db_query_value(db, v, sizeof(v), count_sql, nfilter, p) == TN_OK
                   ? atoll(v)
                   : -1;
    bool backwards = f->before[0] != '\0';
    if (backwards) {
        p[np++] = f->before;
        buf_printf(&w, " AND t.slug < $%d", np);
    } else if (f->after[0]) {
        p[np++] = f->after;
        buf_printf(&w, " AND t.slug > $%d", np);
    }
    char *sql = arena_sprintf(ar,
                              "SELECT t.id, t.slug, t.name, t.state, t.placement, "
                              "t.migration_version, t.last_error FROM tenants t%s "
                              "ORDER BY t.slug %s LIMIT %d",
                              w.p, backwards ? "DESC" : "ASC", f->limit + 1);
    bool oom = w.oom;
    buf_free(&w);
    if (sql == NULL || oom)
        return TN_NOMEM;
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, sql, np, p);
    if (rc != TN_OK) {
        log_error("admin: fleet query failed: %s", tn_db_error(db));
        return rc;
    }
    f->rows = arena_alloc(ar, (size_t)(f->limit + 1) * sizeof(fleet_row));
    if (f->rows == NULL) {
        tn_rows_free(rows);
        return TN_NOMEM;
    }
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        if (f->n == f->limit) {
            if (backwards)
                f->has_prev = true;
            else
                f->has_next = true;
            break;
        }
        fleet_row *r = &f->rows[f->n++];
        memset(r, 0, sizeof(*r));
        char **dst[] = {&r->id, &r->slug, &r->name, &r->state, &r->placement, &r->version,
                        &r->error};
        for (int i = 0; i < 7; i++) {
            const char *s = tn_rows_get(rows, i);
            *dst[i] = arena_strdup(ar, s ? s : "");
        }
    }
    tn_rows_free(rows);
    if (rc != TN_OK && rc != TN_DONE)
        return rc;
    if (backwards) {
        for (int i = 0; i < f->n / 2; i++) {
            fleet_row t = f->rows[i];
            f->rows[i] = f->rows[f->n - 1 - i];
            f->rows[f->n - 1 - i] = t;
        }
        f->has_next = true;   /* we came from there */
    } else if (f->after[0]) {
        f->has_prev = true;
    }
    if (f->n == 0)
        return TN_OK;

    /* The page's domains, primary first. */
    buf d = BUF_INIT;
    const char **ids = arena_alloc(ar, (size_t)f->n * sizeof(char *));
    if (ids == NULL)
        return TN_NOMEM;
    buf_puts(&d, "SELECT tenant_id, domain, is_primary FROM domains WHERE tenant_id IN (");
    for (int i = 0; i < f->n; i++) {
        ids[i] = f->rows[i].id;
        buf_printf(&d, i ? ", $%d" : "$%d", i + 1);
    }
    buf_puts(&d, ") ORDER BY is_primary DESC, domain");
    rc = d.oom ? TN_NOMEM : tn_db_query(db, &rows, d.p, f->n, ids);
    buf_free(&d);
    if (rc != TN_OK)
        return rc;
    while (tn_rows_next(rows) == TN_OK) {
        const char *tid = tn_rows_get(rows, 0);
        for (int i = 0; i < f->n && tid; i++) {
            fleet_row *r = &f->rows[i];
            if (strcmp(r->id, tid) != 0)
                continue;
            if (r->ndomains < (int)TN_ARRAY_LEN(r->domains)) {
                const char *dom = tn_rows_get(rows, 1), *pr = tn_rows_get(rows, 2);
                r->primary[r->ndomains] = pr && strcmp(pr, "0") != 0;
                r->domains[r->ndomains++] = arena_strdup(ar, dom ? dom : "");
            } else {
                r->more_domains++;
            }
            break;
        }
    }
    tn_rows_free(rows);
    return TN_OK;
}

/* ?q=..&state=..&placement=.. plus one more pair, for links that keep the filters. */
static void fleet_href(buf *o, const fleet *f, const char *key, const char *value)
{
    buf_puts(o, "/?");
    bool first = true;
    const char *keys[] = {"q", "state", "placement"};
    const char *vals[] = {f->q, f->state, f->placement};
    for (int i = 0; i < 3; i++) {
        if (vals[i][0] == '\0')
            continue;
        if (!first)
            buf_putc(o, '&');
        first = false;
        buf_puts(o, keys[i]);
        buf_putc(o, '=');
        put_url(o, vals[i]);
    }
    if (key != NULL) {
        if (!first)
            buf_putc(o, '&');
        buf_puts(o, key);
        buf_putc(o, '=');
        put_url(o, value);
    }
}

static void put_href_attr(buf *o, const fleet *f, const char *key, const char *value)
{
    buf h = BUF_INIT;
    fleet_href(&h, f, key, value);
    buf_html(o, h.p ? h.p : "/");
    buf_free(&h);
}

static void fleet_rows_html(buf *o, const fleet *f)
{
    for (int i = 0; i < f->n; i++) {
        const fleet_row *r = &f->rows[i];
        buf_puts(o, "<tr data-href=\"/t/");
        buf_html(o, r->slug);
        buf_puts(o, "\"><td class=\"mono\"><a href=\"/t/");
        buf_html(o, r->slug);
        buf_puts(o, "\">");
        buf_html(o, r->slug);
        buf_puts(o, "</a></td><td>");
        buf_html(o, r->name);
        buf_puts(o, "</td><td>");
        put_state(o, r->state);
        buf_puts(o, "</td><td>");
        buf_html(o, r->placement);
        buf_puts(o, "</td><td class=\"domains\">");
        for (int k = 0; k < r->ndomains; k++) {
            buf_puts(o, r->primary[k] ? "<span class=\"domain primary\">" : "<span class=\"domain\">");
            buf_html(o, r->domains[k]);
            buf_puts(o, "</span> ");
        }
        if (r->more_domains)
            buf_printf(o, "<span class=\"muted\">+%d</span>", r->more_domains);
        if (r->ndomains == 0)
            buf_puts(o, "<span class=\"muted\">—</span>");
        buf_puts(o, "</td><td class=\"mono\">");
        if (r->version[0])
            buf_html(o, r->version);
        else
            buf_puts(o, "<span class=\"muted\">—</span>");
        buf_puts(o, "</td><td class=\"error-cell\">");
        if (r->error[0]) {
            buf_puts(o, "<span class=\"err\" title=\"");
            buf_html(o, r->error);
            buf_puts(o, "\">");
            buf_html(o, r->error);
            buf_puts(o, "</span>");
        }
        buf_puts(o, "</td></tr>");
    }
}

int page_fleet(adm_req *a)
{
    fleet f;
    fleet_args(a, &f);
    int rc = fleet_run(a, &f);
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", "The fleet could not be read.");
    }
    /* Counts per state for the filter. */
    int64_t counts[TENANT_NSTATES] = {0};
    tn_rows *rows = NULL;
    if (tn_db_query(registry_db(adm.reg), &rows,
                    "SELECT state, count(*) FROM tenants GROUP BY state", 0, NULL) == TN_OK) {
        while (tn_rows_next(rows) == TN_OK) {
            int st = tenant_state_parse(tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "");
            if (st >= 0)
                counts[st] = atoll(tn_rows_get(rows, 1) ? tn_rows_get(rows, 1) : "0");
        }
        tn_rows_free(rows);
    }
    int64_t all = 0;
    for (int i = 0; i < TENANT_NSTATES; i++)
        all += counts[i];

    buf *o = a->out;
    page_begin(a, "Fleet", "fleet", NULL);
    buf_puts(o, "<header class=\"page-head\"><h1>Fleet</h1><span class=\"count\" id=\"fleet-count\">");
    if (f.total > COUNT_MAX)
        buf_printf(o, "%d+ of %lld tenants", COUNT_MAX, (long long)all);
    else if (f.total >= 0)
        buf_printf(o, "%lld of %lld tenants", (long long)f.total, (long long)all);
    buf_puts(o, "</span><a class=\"button\" href=\"/new\">New tenant</a></header>"
                "<form class=\"filters\" method=\"get\" action=\"/\" id=\"fleet-filters\">"
                "<input type=\"search\" name=\"q\" id=\"fleet-search\" autocomplete=\"off\" "
                "placeholder=\"Search slug or name\" aria-label=\"Search slug or name\" value=\"");
    buf_html(o, f.q);
    buf_puts(o, "\"><select name=\"state\" aria-label=\"State\"><option value=\"\">every state ");
    buf_printf(o, "(%lld)</option>", (long long)all);
    for (int i = 0; i < TENANT_NSTATES; i++) {
        const char *n = tenant_state_name(i);
        buf_puts(o, "<option value=\"");
        buf_html(o, n);
        buf_puts(o, strcmp(n, f.state) == 0 ? "\" selected>" : "\">");
        buf_html(o, n);
        buf_printf(o, " (%lld)</option>", (long long)counts[i]);
    }
    buf_puts(o, "</select><select name=\"placement\" aria-label=\"Placement\">"
                "<option value=\"\">every placement</option>");
    const tenancy_config *tc = adm.env.tcfg;
    for (int i = 0; i < tc->nplacements; i++) {
        buf_puts(o, "<option value=\"");
        buf_html(o, tc->placements[i].name);
        buf_puts(o, strcmp(tc->placements[i].name, f.placement) == 0 ? "\" selected>" : "\">");
        buf_html(o, tc->placements[i].name);
        buf_puts(o, "</option>");
    }
    buf_puts(o, "</select><button type=\"submit\">Filter</button></form>"
                "<div class=\"table-wrap\"><table class=\"grid nav-rows\" id=\"fleet\">"
                "<thead><tr><th>Tenant</th><th>Name</th><th>State</th><th>Placement</th>"
                "<th>Domains</th><th>Migration</th><th>Last error</th></tr></thead>"
                "<tbody id=\"fleet-rows\">");
    fleet_rows_html(o, &f);
    buf_puts(o, "</tbody></table>");
    if (f.n == 0)
        buf_puts(o, "<p class=\"empty\">No tenant matches.</p>");
    buf_puts(o, "</div><nav class=\"pager\" aria-label=\"pages\">");
    if (f.has_prev && f.n > 0) {
        buf_puts(o, "<a rel=\"prev\" id=\"prev-page\" href=\"");
        put_href_attr(o, &f, "before", f.rows[0].slug);
        buf_puts(o, "\">← Previous</a>");
    } else {
        buf_puts(o, "<span class=\"disabled\">← Previous</span>");
    }
    if (f.n > 0) {
        buf_puts(o, "<span class=\"muted\">");
        buf_html(o, f.rows[0].slug);
        buf_puts(o, " … ");
        buf_html(o, f.rows[f.n - 1].slug);
        buf_puts(o, "</span>");
    }
    if (f.has_next && f.n > 0) {
        buf_puts(o, "<a rel=\"next\" id=\"next-page\" href=\"");
        put_href_attr(o, &f, "after", f.rows[f.n - 1].slug);
        buf_puts(o, "\">Next →</a>");
    } else {
        buf_puts(o, "<span class=\"disabled\">Next →</span>");
    }
    buf_puts(o, "</nav>");
    page_end(a);
    return send_html(a, 200);
}

int api_tenants(adm_req *a)
{
    fleet f;
    fleet_args(a, &f);
    if (fleet_run(a, &f) != TN_OK) {
        adm_registry_failed(a);
        return send_json_error(a, 503, "the fleet could not be read");
    }
    buf *o = a->out;
    buf_reset(o);
    buf_puts(o, "{\"total\":");
    buf_i64(o, f.total);
    buf_puts(o, ",\"next\":");
    if (f.has_next && f.n > 0)
        buf_json_str(o, f.rows[f.n - 1].slug);
    else
        buf_puts(o, "null");
    buf_puts(o, ",\"html\":");
    /* The rows as the page renders them (escaped here, once), for search as you type. */
    buf rows = BUF_INIT;
    fleet_rows_html(&rows, &f);
    buf_json_str(o, rows.p ? rows.p : "");
    buf_free(&rows);
    buf_puts(o, ",\"tenants\":[");
    for (int i = 0; i < f.n; i++) {
        const fleet_row *r = &f.rows[i];
        buf_puts(o, i ? ",{\"slug\":" : "{\"slug\":");
        buf_json_str(o, r->slug);
        buf_puts(o, ",\"name\":");
        buf_json_str(o, r->name);
        buf_puts(o, ",\"state\":");
        buf_json_str(o, r->state);
        buf_puts(o, ",\"placement\":");
        buf_json_str(o, r->placement);
        buf_puts(o, ",\"migration_version\":");
        buf_json_str(o, r->version);
        buf_puts(o, ",\"last_error\":");
        buf_json_str(o, r->error);
        buf_puts(o, ",\"domains\":[");
        for (int k = 0; k < r->ndomains; k++) {
            if (k)
                buf_putc(o, ',');
            buf_json_str(o, r->domains[k]);
        }
        buf_puts(o, "]}");
    }
    buf_puts(o, "]}\n");
    return send_doc(a, 200, "application/json", NULL);
}

/* ---- one tenant ------------------------------------------------------------------------------- */

typedef struct dom_ctx {
    buf *o;
    const char *slug;
    adm_req *a;
    int n;
} dom_ctx;

static int show_domains(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    dom_ctx *c = ctx;
    buf *o = c->o;
    (void)t;
    c->n = nd;
    for (int i = 0; i < nd; i++) {
        buf_puts(o, "<li><span class=\"mono\">");
        buf_html(o, d[i].domain);
        buf_puts(o, "</span>");
        if (d[i].primary)
            buf_puts(o, " <span class=\"tag\">primary</span>");
        buf_puts(o, " <a class=\"small\" href=\"/t/");
        buf_html(o, c->slug);
        buf_puts(o, "/confirm?action=domain-remove&amp;domain=");
        buf *u = &(buf)BUF_INIT;
        put_url(u, d[i].domain);
        buf_html(o, u->p ? u->p : "");
        buf_free(u);
        buf_puts(o, "\">remove</a></li>");
    }
    return TN_OK;
}

/* The tenant's API keys (tenancy key), a row each: never a token or a hash, only the prefix. */
typedef struct keys_ctx {
    buf *o;
    const char *slug;
    int n;
} keys_ctx;

static void key_time_cell(buf *o, int64_t t)
{
    buf_puts(o, "<td>");
    if (t != 0)
        put_time(o, t);
    else
        buf_puts(o, "<span class=\"muted\">—</span>");
    buf_puts(o, "</td>");
}

static int show_key(void *ctx, const registry_key *k)
{
    keys_ctx *c = ctx;
    buf *o = c->o;
    if (c->n++ == 0)
        buf_puts(o, "<table class=\"grid\" id=\"keys\"><thead><tr><th>Id</th><th>Prefix</th>"
                    "<th>Label</th><th>Flags</th><th>Created</th><th>Expires</th>"
                    "<th>Last used</th><th>Revoked</th><th></th></tr></thead><tbody>");
    buf_puts(o, "<tr><td>");
    buf_i64(o, k->id);
    buf_puts(o, "</td><td class=\"mono\">");
    buf_html(o, k->prefix);
    buf_puts(o, "</td><td>");
    buf_html(o, k->label);
    buf_puts(o, "</td><td>");
    buf_puts(o, k->read_only ? "<span class=\"tag\">read-only</span>" : "read-write");
    buf_puts(o, "</td>");
    key_time_cell(o, k->created_at);
    key_time_cell(o, k->expires_at);
    key_time_cell(o, k->last_used_at);
    key_time_cell(o, k->revoked_at);
    buf_puts(o, "<td>");
    if (k->revoked_at == 0) {
        buf_puts(o, "<a class=\"small\" id=\"revoke-key-");
        buf_i64(o, k->id);
        buf_puts(o, "\" href=\"/t/");
        buf_html(o, c->slug);
        buf_puts(o, "/confirm?action=key-revoke&amp;key=");
        buf_i64(o, k->id);
        buf_puts(o, "\">revoke</a>");
    }
    buf_puts(o, "</td></tr>");
    return TN_OK;
}

/* Row counts: exact below `cap` rows (a count over at most cap+1 rows), "cap+" above. */
#define COUNT_CAP 100000

static void put_count(adm_store *s, adm_req *a, buf *o, const char *table)
{
    char *q = store_relation(s, a->r->arena, table);
    if (q == NULL) {
        buf_puts(o, "<span class=\"muted\" title=\"a name the panel cannot quote\">?</span>");
        return;
    }
    char *sql = arena_sprintf(a->r->arena, "SELECT count(*) FROM (SELECT 1 FROM %s LIMIT %d) x",
                              q, COUNT_CAP + 1);
    char v[32];
    if (sql == NULL || db_query_value(s->db, v, sizeof(v), sql, 0, NULL) != TN_OK) {
        buf_puts(o, "<span class=\"muted\">—</span>");
        return;
    }
    long long n = atoll(v);
    if (n > COUNT_CAP)
        buf_printf(o, "%d+", COUNT_CAP);
    else
        buf_printf(o, "%lld", n);
}

int page_tenant(adm_req *a, const char *slug)
{
    adm_tenant t;
    int rc = adm_tenant_get(a, slug, &t);
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", "The tenant could not be read.");
    }
    const tenant_rec *r = t.rec;
    buf *o = a->out;
    page_begin(a, r->slug, "tenant", r->slug);
    buf_puts(o, "<header class=\"page-head\"><h1><span class=\"mono\">");
    buf_html(o, r->slug);
    buf_puts(o, "</span> ");
    put_state(o, tenant_state_name(r->state));
    buf_puts(o, "</h1><span class=\"count\">");
    buf_html(o, r->name);
    buf_puts(o, "</span></header><div class=\"cards\"><section class=\"card\"><h2>Tenant</h2>"
                "<dl class=\"facts\"><dt>Id</dt><dd>");
    buf_i64(o, r->id);
    buf_puts(o, "</dd><dt>Placement</dt><dd>");
    buf_html(o, r->placement);
    buf_puts(o, "</dd><dt>Storage</dt><dd class=\"mono\">");
    buf_html(o, r->storage[0] ? r->storage : "—");
    buf_puts(o, "</dd><dt>Migration</dt><dd class=\"mono\">");
    buf_html(o, t.migration_version[0] ? t.migration_version : "—");
    buf_puts(o, "</dd><dt>Max workers</dt><dd>");
    if (r->max_workers)
        buf_i64(o, r->max_workers);
    else
        buf_puts(o, "host default");
    buf_puts(o, "</dd><dt>Created</dt><dd>");
    put_time(o, r->created_at);
    buf_puts(o, "</dd><dt>Updated</dt><dd>");
    put_time(o, r->updated_at);
    buf_puts(o, "</dd>");
    if (r->state == TENANT_DELETING) {
        buf_puts(o, "<dt>Deleted</dt><dd>");
        put_time(o, t.deleted_at);
        buf_puts(o, "</dd><dt>Purge after</dt><dd>");
        put_time(o, t.deleted_at + adm.env.tcfg->delete_grace_ms / 1000);
        buf_puts(o, "</dd>");
    }
    buf_puts(o, "</dl>");
    if (t.last_error[0]) {
        buf_puts(o, "<p class=\"error\">Last error: ");
        buf_html(o, t.last_error);
        buf_puts(o, "</p>");
    }
    buf_puts(o, "</section><section class=\"card\"><h2>Domains</h2><ul class=\"plain\">");
    dom_ctx dc = {o, r->slug, a, 0};
    registry_show(adm.reg, r->slug, show_domains, &dc);
    if (dc.n == 0)
        buf_puts(o, "<li class=\"muted\">none</li>");
    buf_puts(o, "</ul><form class=\"inline\" method=\"get\" action=\"/t/");
    buf_html(o, r->slug);
    buf_puts(o, "/confirm\"><input type=\"hidden\" name=\"action\" value=\"domain-add\">"
                "<input name=\"domain\" placeholder=\"shop.example.com\" aria-label=\"New domain\" "
                "required><button type=\"submit\">Add domain</button></form></section>"
                "<section class=\"card\"><h2>Traffic</h2><div class=\"tenant-stats\" "
                "id=\"tenant-stats\" data-slug=\"");
    buf_html(o, r->slug);
    buf_puts(o, "\"><p class=\"muted\">Requests and errors since the host started appear "
                "here.</p></div></section>"
                "<section class=\"card\"><h2>Actions</h2><div class=\"actions\">");
    static const struct { const char *action, *label; int hide_in; } acts[] = {
        {"suspend", "Suspend", TENANT_SUSPENDED},
        {"resume", "Resume", TENANT_ACTIVE},
        {"maintenance", "Maintenance", TENANT_MAINTENANCE},
        {"migrate", "Migrate", -1},
        {"move", "Move", -1},
        {"delete", "Delete", TENANT_DELETING},
    };
    for (size_t i = 0; i < TN_ARRAY_LEN(acts); i++) {
        if (acts[i].hide_in == r->state)
            continue;
        buf_puts(o, "<a class=\"button");
        if (strcmp(acts[i].action, "delete") == 0)
            buf_puts(o, " danger");
        buf_puts(o, "\" id=\"action-");
        buf_puts(o, acts[i].action);
        buf_puts(o, "\" href=\"/t/");
        buf_html(o, r->slug);
        buf_puts(o, "/confirm?action=");
        buf_puts(o, acts[i].action);
        buf_puts(o, "\">");
        buf_puts(o, r->state == TENANT_DELETING && strcmp(acts[i].action, "resume") == 0
                        ? "Restore"
                        : acts[i].label);
        buf_puts(o, "</a>");
    }
    buf_puts(o, "</div></section></div>");

    /* Its jobs: the counts per state, each a link to its jobs page (jobs.c). */
    buf_puts(o, "<section class=\"block\"><header class=\"block-head\"><h2>Jobs</h2>"
                "<a class=\"button\" id=\"tenant-jobs\" href=\"/t/");
    put_url(o, r->slug);
    buf_puts(o, "/jobs\">Its jobs</a></header>");
    jobs_counts_html(a, r->slug);
    buf_puts(o, "</section>");

    /* Its API keys: listed through the operations the command uses; made with `tenancy key
     * create` (a token is shown once, to whoever made it), revoked here. */
    buf_puts(o, "<section class=\"block\"><header class=\"block-head\"><h2>API keys</h2>"
                "</header>");
    keys_ctx kc = {o, r->slug, 0};
    ops_env ke;
    adm_ops_env(&ke);
    char kerr[512];
    rc = ops_key_list(&ke, r->slug, show_key, &kc, kerr, sizeof(kerr));
    if (kc.n > 0)
        buf_puts(o, "</tbody></table>");
    if (rc != TN_OK) {
        buf_puts(o, "<p class=\"error\">");
        buf_html(o, kerr);
        buf_puts(o, "</p>");
    } else if (kc.n == 0) {
        buf_puts(o, "<p class=\"muted\">No keys. <code>tenancy key create ");
        buf_html(o, r->slug);
        buf_puts(o, "</code> makes one.</p>");
    }
    buf_puts(o, "</section>");

    /* The tables of this tenant's own schema or file. */
    buf_puts(o, "<section class=\"block\"><header class=\"block-head\"><h2>Tables</h2>"
                "<a class=\"button\" href=\"/t/");
    buf_html(o, r->slug);
    buf_puts(o, "/sql\">SQL console</a></header>");
    adm_store s;
    char err[512];
    rc = store_open(a, r, &s, err, sizeof(err));
    if (rc == TN_OK)
        rc = store_ro_begin(&s, adm.env.cfg->query_timeout_ms, err, sizeof(err));
    if (rc != TN_OK) {
        buf_puts(o, "<p class=\"muted\">");
        buf_html(o, err);
        buf_puts(o, "</p>");
    } else {
        const char **names;
        int n = store_tables(&s, a->r->arena, &names, err, sizeof(err));
        if (n < 0) {
            buf_puts(o, "<p class=\"error\">");
            buf_html(o, err);
            buf_puts(o, "</p>");
        } else if (n == 0) {
            buf_puts(o, "<p class=\"muted\">No tables yet.</p>");
        } else {
            buf_puts(o, "<table class=\"grid nav-rows\" id=\"tables\"><thead><tr><th>Table</th>"
                        "<th class=\"num\">Rows</th></tr></thead><tbody>");
            for (int i = 0; i < n; i++) {
                buf h = BUF_INIT;
                buf_puts(&h, "/t/");
                buf_puts(&h, r->slug);
                buf_puts(&h, "/table?name=");
                put_url(&h, names[i]);
                buf_puts(o, "<tr data-href=\"");
                buf_html(o, h.p ? h.p : "");
                buf_puts(o, "\"><td class=\"mono\"><a href=\"");
                buf_html(o, h.p ? h.p : "");
                buf_puts(o, "\">");
                buf_html(o, names[i]);
                buf_puts(o, "</a></td><td class=\"num\">");
                put_count(&s, a, o, names[i]);
                buf_puts(o, "</td></tr>");
                buf_free(&h);
            }
            buf_puts(o, "</tbody></table>");
        }
        store_ro_end(&s);
    }
    store_close(&s);
    buf_puts(o, "</section>");
    page_end(a);
    free(t.rec);
    return send_html(a, 200);
}
