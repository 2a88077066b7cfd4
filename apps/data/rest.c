/*
 * rest.c — PostgREST's request grammar: the query string, `Prefer` and `Range` read into a
 * rest_query, and that tree written back as SQL fragments with every value a $N parameter.
 *
 * Owns: splitting and percent-decoding the query string; the filter grammar
 * (`col=[not.]op.value`, in-lists with double-quoted items, the logic trees of or=/and=
 * nested up to REST_MAX_DEPTH); select=, order=, limit=, offset= and the other reserved
 * words; Prefer preferences; Range items; and the SQL text for both dialects (rest.h).
 *
 * Must not: know a request, a database or JSON; free anything (all memory is the caller's
 * allocator, usually the request's arena); put a byte of input into SQL text other than
 * inside a quoted identifier the caller's catalog accepted (values are parameters only).
 *
 * Where an error points: the `where` of a query-string error is the decoded parameter
 * `name=value` and the byte offset in it; of a header error, "Prefer: value" or
 * "Range: value" and the offset in the value. Texts shown to the client have control bytes
 * and broken UTF-8 replaced by '?', so that the JSON body can always carry them.
 *
 * Range with limit=/offset=: both describe a window of row positions (offset .. offset +
 * limit - 1, and first .. last); the answer is their intersection, as PostgREST's
 * rangeIntersection. A window that does not meet gives limit 0 at the later start; an
 * unreadable Range is 416 here, and a range past the last row is the caller's 416.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rest.h"

/* ---- memory and texts --------------------------------------------------------------------- */

static void *r_alloc(const rest_mem *m, size_t n)
{
    return m->alloc(m->ctx, n ? n : 1);
}

static char *r_strndup(const rest_mem *m, const char *s, size_t n)
{
    char *d = r_alloc(m, n + 1);
    if (d == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* s[0..n) equals the NUL-terminated word w, ASCII case ignored. */
static bool word_is(const char *s, size_t n, const char *w)
{
    size_t i;
    for (i = 0; i < n && w[i] != '\0'; i++)
        if (lower(s[i]) != w[i])
            return false;
    return i == n && w[i] == '\0';
}

static bool starts(const char *s, const char *end, const char *w)
{
    size_t n = strlen(w);
    return (size_t)(end - s) >= n && memcmp(s, w, n) == 0;
}

/* [A-Za-z_][A-Za-z0-9_]{0,62}: the names we quote, the same rule as the storage layer's. */
static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63 || is_digit(s[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!(c == '_' || is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return false;
    }
    return true;
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 when there is none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t l = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (c >= 0xF5 || l == 0 || l > n)
        return 0;
    for (size_t i = 1; i < l; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) ||
        (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return l;
}

/* Control bytes and broken UTF-8 become '?', in place. */
static void sanitize(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : utf8_len((const unsigned char *)s + i, n - i);
        if (c < 0x20 || c == 0x7F || l == 0) {
            s[i++] = '?';
            continue;
        }
        i += l;
    }
}

/* ---- errors ------------------------------------------------------------------------------- */

static void err_clear(rest_err *e)
{
    e->status = 0;
    e->code = "";
    e->message[0] = '\0';
    e->where[0] = '\0';
    e->at = 0;
}

/* where = label (cut to fit, with "...") + " at N". */
static void err_where(rest_err *e, const char *label, size_t at)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, " at %zu", at);
    size_t room = sizeof e->where - strlen(suffix) - 4;
    size_t n = strlen(label);
    if (n > room) {
        memcpy(e->where, label, room);
        memcpy(e->where + room, "...", 4);
    } else {
        memcpy(e->where, label, n + 1);
    }
    sanitize(e->where);
    strcat(e->where, suffix);
    e->at = at;
}

static int err_v(rest_err *e, int rc, int status, const char *code, const char *label,
                 size_t at, const char *fmt, va_list ap)
{
    e->status = status;
    e->code = code;
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    sanitize(e->message);
    err_where(e, label, at);
    return rc;
}

static int err_at(rest_err *e, int rc, int status, const char *code, const char *label,
                  size_t at, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static int err_at(rest_err *e, int rc, int status, const char *code, const char *label,
                  size_t at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_v(e, rc, status, code, label, at, fmt, ap);
    va_end(ap);
    return rc;
}

static int err_nomem(rest_err *e)
{
    e->status = 500;
    e->code = "out_of_memory";
    snprintf(e->message, sizeof e->message, "out of memory");
    e->where[0] = '\0';
    return TN_NOMEM;
}

/* ---- one parameter ------------------------------------------------------------------------ */

/* What every parser of a parameter shares: its decoded text "name=value", where errors
 * point, and the request-wide count of conditions. */
typedef struct pctx {
    const rest_mem *m;
    rest_err *e;
    const char *text;
    size_t len;
    const char *end;
    int *nconds;
    size_t nlen;                       /* the name's length in text */
} pctx;

static int perr(const pctx *c, int rc, const char *code, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int perr(const pctx *c, int rc, const char *code, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_v(c->e, rc, 400, code, c->text, (size_t)(at - c->text), fmt, ap);
    va_end(ap);
    return rc;
}

static int pbad(const pctx *c, const char *code, const char *at, const char *what)
{
    return perr(c, TN_INVALID, code, at, "%s", what);
}

static int pnomem(const pctx *c)
{
    return err_nomem(c->e);
}

static int count_cond(const pctx *c, const char *at)
{
    if (++*c->nconds > REST_MAX_CONDS)
        return perr(c, TN_TOOBIG, "too_complex", at, "more than %d conditions",
                    REST_MAX_CONDS);
    return TN_OK;
}

/* A name of [s, e) as a column: checked and copied. */
static int take_name(const pctx *c, const char *s, const char *e, const char **out)
{
    if (!name_ok(s, (size_t)(e - s)))
        return perr(c, TN_INVALID, "bad_column_name", s,
                    "'%.*s' is not a column name: letters, digits and '_', not a digit first,"
                    " at most 63", (int)(e - s), s);
    *out = r_strndup(c->m, s, (size_t)(e - s));
    return *out ? TN_OK : pnomem(c);
}

/* ---- values ------------------------------------------------------------------------------- */

/* A double-quoted value at *pp ('\' takes the next byte as it is): the text, without its
 * quotes, and *pp past the closing quote. */
static int quoted(const pctx *c, const char **pp, char **out)
{
    const char *p = *pp + 1;
    char *d = r_alloc(c->m, (size_t)(c->end - p) + 1);
    size_t n = 0;
    if (d == NULL)
        return pnomem(c);
    while (p < c->end && *p != '"') {
        if (*p == '\\' && p + 1 < c->end)
            p++;
        d[n++] = *p++;
    }
    if (p >= c->end)
        return pbad(c, "bad_value", *pp, "unterminated double quote");
    d[n] = '\0';
    *out = d;
    *pp = p + 1;
    return TN_OK;
}

/* A value inside a list or a logic tree: quoted, or up to ',' or ')'. It must end there. */
static int item_value(const pctx *c, const char **pp, char **out)
{
    const char *p = *pp;
    if (p < c->end && *p == '"') {
        int rc = quoted(c, &p, out);
        if (rc != TN_OK)
            return rc;
        if (p < c->end && *p != ',' && *p != ')')
            return pbad(c, "bad_value", p, "expected ',' or ')' after a quoted value");
    } else {
        while (p < c->end && *p != ',' && *p != ')')
            p++;
        if ((*out = r_strndup(c->m, *pp, (size_t)(p - *pp))) == NULL)
            return pnomem(c);
    }
    *pp = p;
    return TN_OK;
}

/* in.(a,b,"c,d"): *pp at the '(' and, after, past the ')'. An empty list is no value. */
static int in_list(const pctx *c, const char **pp, rest_cond *leaf)
{
    const char *p = *pp;
    int cap = 0;
    if (p >= c->end || *p != '(')
        return pbad(c, "bad_value", p, "in. takes a list: in.(a,b,\"c,d\")");
    p++;
    if (p < c->end && *p == ')') {
        *pp = p + 1;
        return TN_OK;
    }
    for (;;) {
        if (leaf->nvalues == REST_MAX_IN)
            return perr(c, TN_TOOBIG, "too_complex", p, "more than %d values in in.()",
                        REST_MAX_IN);
        if (leaf->nvalues == cap) {
            cap = cap ? cap * 2 : 8;
            const char **v = r_alloc(c->m, (size_t)cap * sizeof *v);
            if (v == NULL)
                return pnomem(c);
            if (leaf->nvalues)
                memcpy(v, leaf->values, (size_t)leaf->nvalues * sizeof *v);
            leaf->values = v;
        }
        char *v;
        int rc = item_value(c, &p, &v);
        if (rc != TN_OK)
            return rc;
        leaf->values[leaf->nvalues++] = v;
        if (p >= c->end)
            return pbad(c, "bad_value", p, "in.() is missing its ')'");
        if (*p++ == ')')
            break;
    }
    *pp = p;
    return TN_OK;
}

static int is_value(const pctx *c, const char *at, const char *v, rest_cond *leaf)
{
    static const char *const words[] = {"null", "true", "false", "unknown"};
    static const rest_is vals[] = {REST_IS_NULL, REST_IS_TRUE, REST_IS_FALSE, REST_IS_UNKNOWN};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (word_is(v, strlen(v), words[i])) {
            leaf->is = vals[i];
            return TN_OK;
        }
    }
    return pbad(c, "bad_value", at, "is. takes null, true, false or unknown");
}

/* PostgREST's '*' is SQL's '%' in (i)like patterns. */
static void star_to_percent(char *v)
{
    for (; *v; v++)
        if (*v == '*')
            *v = '%';
}

/* ---- operators ---------------------------------------------------------------------------- */

static const struct {
    const char *name;
    rest_op op;
} ops[] = {
    {"eq", REST_EQ},     {"neq", REST_NEQ},     {"gt", REST_GT}, {"gte", REST_GTE},
    {"lt", REST_LT},     {"lte", REST_LTE},     {"like", REST_LIKE},
    {"ilike", REST_ILIKE}, {"in", REST_IN},     {"is", REST_IS},
};

static int find_op(const pctx *c, const char *s, const char *e, rest_op *op)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strlen(ops[i].name) == (size_t)(e - s) && memcmp(ops[i].name, s, (size_t)(e - s)) == 0) {
            *op = ops[i].op;
            return TN_OK;
        }
    }
    return perr(c, TN_INVALID, "unknown_operator", s,
                "unknown operator '%.*s': eq, neq, gt, gte, lt, lte, like, ilike, in, is",
                (int)(e - s), s);
}

/* The value of a leaf: in a logic tree (`inner`) it ends at ',' or ')', may be quoted; at
 * the top it is the rest of the parameter, as it is. */
static int leaf_value(const pctx *c, const char **pp, bool inner, rest_cond *leaf)
{
    const char *at = *pp;
    char *v;
    int rc;
    if (leaf->op == REST_IN) {
        rc = in_list(c, pp, leaf);
        if (rc == TN_OK && !inner && *pp != c->end)
            rc = pbad(c, "bad_value", *pp, "text after the in.() list");
        return rc;
    }
    if (inner) {
        rc = item_value(c, pp, &v);
    } else {
        v = r_strndup(c->m, *pp, (size_t)(c->end - *pp));
        rc = v ? TN_OK : pnomem(c);
        *pp = c->end;
    }
    if (rc != TN_OK)
        return rc;
    if (leaf->op == REST_IS)
        return is_value(c, at, v, leaf);
    if (leaf->op == REST_LIKE || leaf->op == REST_ILIKE)
        star_to_percent(v);
    leaf->value = v;
    return TN_OK;
}

/* [not.]op.value at *pp into leaf. */
static int op_expr(const pctx *c, const char **pp, bool inner, rest_cond *leaf)
{
    const char *p = *pp;
    if (starts(p, c->end, "not.")) {
        leaf->negate = true;
        p += 4;
    }
    const char *op = p;
    while (p < c->end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        p++;
    if (p == op || p >= c->end || *p != '.')
        return pbad(c, "bad_filter", op, "expected operator.value, as eq.1");
    int rc = find_op(c, op, p, &leaf->op);
    if (rc != TN_OK)
        return rc;
    p++;
    rc = leaf_value(c, &p, inner, leaf);
    *pp = p;
    return rc;
}

static rest_cond *new_cond(const pctx *c, rest_kind kind, const char *at)
{
    rest_cond *k = r_alloc(c->m, sizeof *k);
    if (k == NULL)
        return NULL;
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->param = c->text;
    k->at = (size_t)(at - c->text);
    return k;
}

/* ---- logic trees -------------------------------------------------------------------------- */

static int group(const pctx *c, const char **pp, rest_kind kind, bool negate, int depth,
                 rest_cond **out);

/* or( and( not.or( not.and( at p: the kind and the length of the word with its '('. */
static size_t group_word(const char *p, const char *end, rest_kind *kind, bool *negate)
{
    static const struct {
        const char *w;
        rest_kind kind;
        bool negate;
    } words[] = {{"or(", REST_OR, false}, {"and(", REST_AND, false},
                 {"not.or(", REST_OR, true}, {"not.and(", REST_AND, true}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (starts(p, end, words[i].w)) {
            *kind = words[i].kind;
            *negate = words[i].negate;
            return strlen(words[i].w) - 1;
        }
    }
    return 0;
}

/* col.[not.]op.value inside a logic tree. */
static int inner_leaf(const pctx *c, const char **pp, rest_cond **out)
{
    const char *s = *pp, *p = s;
    int rc = count_cond(c, s);
    if (rc != TN_OK)
        return rc;
    rest_cond *leaf = new_cond(c, REST_LEAF, s);
    if (leaf == NULL)
        return pnomem(c);
    while (p < c->end && *p != '.' && *p != ',' && *p != ')')
        p++;
    if (p >= c->end || *p != '.')
        return pbad(c, "bad_filter", s, "expected column.operator.value, as a.eq.1");
    if ((rc = take_name(c, s, p, &leaf->column)) != TN_OK)
        return rc;
    p++;
    if ((rc = op_expr(c, &p, true, leaf)) != TN_OK)
        return rc;
    *pp = p;
    *out = leaf;
    return TN_OK;
}

static int group_item(const pctx *c, const char **pp, int depth, rest_cond **out)
{
    rest_kind kind;
    bool negate;
    size_t n = group_word(*pp, c->end, &kind, &negate);
    if (n == 0)
        return inner_leaf(c, pp, out);
    *pp += n;
    return group(c, pp, kind, negate, depth + 1, out);
}

/* The items of a group into kids (at most REST_MAX_CONDS), *pp past its ')'. */
static int group_items(const pctx *c, const char **pp, int depth, rest_cond **kids, int *n)
{
    const char *p = *pp;
    for (;;) {
        while (p < c->end && is_blank(*p))
            p++;
        if (p < c->end && *p == ')' && *n == 0)
            return pbad(c, "bad_filter", p, "an empty group");
        int rc = group_item(c, &p, depth, &kids[*n]);
        if (rc != TN_OK)
            return rc;
        (*n)++;
        while (p < c->end && is_blank(*p))
            p++;
        if (p >= c->end)
            return pbad(c, "bad_filter", p, "the group is missing its ')'");
        if (*p == ')')
            break;
        if (*p != ',')
            return pbad(c, "bad_filter", p, "expected ',' or ')'");
        p++;
    }
    *pp = p + 1;
    return TN_OK;
}

/* (item,item,...) at *pp: a group of `kind` at nesting depth. */
static int group(const pctx *c, const char **pp, rest_kind kind, bool negate, int depth,
                 rest_cond **out)
{
    const char *s = *pp;
    rest_cond *kids[REST_MAX_CONDS];
    int n = 0, rc;
    if (s >= c->end || *s != '(')
        return pbad(c, "bad_filter", s, "a logic tree is a list in parentheses: (a.eq.1,b.eq.2)");
    if (depth > REST_MAX_DEPTH)
        return perr(c, TN_TOOBIG, "too_complex", s, "logic trees nested deeper than %d",
                    REST_MAX_DEPTH);
    if ((rc = count_cond(c, s)) != TN_OK)
        return rc;
    rest_cond *g = new_cond(c, kind, s);
    if (g == NULL)
        return pnomem(c);
    *pp = s + 1;
    if ((rc = group_items(c, pp, depth, kids, &n)) != TN_OK)
        return rc;
    g->negate = negate;
    g->nkids = n;
    if ((g->kids = r_alloc(c->m, (size_t)n * sizeof *g->kids)) == NULL)
        return pnomem(c);
    memcpy(g->kids, kids, (size_t)n * sizeof *kids);
    *out = g;
    return TN_OK;
}

/* ---- the query string --------------------------------------------------------------------- */

typedef struct qstate {
    rest_query *q;
    rest_cond *top[REST_MAX_CONDS];
    int ntop;
    int nconds;
    unsigned seen;
} qstate;

static int add_top(qstate *s, rest_cond *k)
{
    /* every kid was counted by count_cond, so ntop stays within REST_MAX_CONDS */
    s->top[s->ntop++] = k;
    return TN_OK;
}

/* A filter: column=[not.]op.value. */
static int p_filter(qstate *s, const pctx *c, const char *v)
{
    int rc = count_cond(c, c->text);
    if (rc != TN_OK)
        return rc;
    rest_cond *leaf = new_cond(c, REST_LEAF, c->text);
    if (leaf == NULL)
        return pnomem(c);
    if ((rc = take_name(c, c->text, c->text + c->nlen, &leaf->column)) != TN_OK)
        return rc;
    if (v >= c->end)
        return pbad(c, "bad_filter", v, "a filter needs operator.value, as eq.1");
    if ((rc = op_expr(c, &v, false, leaf)) != TN_OK)
        return rc;
    return add_top(s, leaf);
}

/* or=(...), and=(...), not.or=(...), not.and=(...). */
static int p_logic(qstate *s, const pctx *c, const char *v)
{
    bool negate = c->text[0] == 'n';
    rest_kind kind = c->text[negate ? 4 : 0] == 'o' ? REST_OR : REST_AND;
    rest_cond *g;
    int rc = group(c, &v, kind, negate, 1, &g);
    if (rc != TN_OK)
        return rc;
    if (v != c->end)
        return pbad(c, "bad_filter", v, "text after the group's ')'");
    return add_top(s, g);
}

/* The items of a comma list in [v, end), blanks around each trimmed, none empty. */
typedef int (*item_fn)(qstate *s, const pctx *c, const char *b, const char *e, int i);

static int each_item(qstate *s, const pctx *c, const char *v, const char *code, item_fn fn)
{
    int i = 0;
    for (const char *p = v;; i++) {
        const char *comma = memchr(p, ',', (size_t)(c->end - p));
        const char *e = comma ? comma : c->end, *b = p;
        while (b < e && is_blank(*b))
            b++;
        while (e > b && is_blank(e[-1]))
            e--;
        if (b == e)
            return pbad(c, code, b, "an empty item in the list");
        int rc = fn(s, c, b, e, i);
        if (rc != TN_OK)
            return rc;
        if (comma == NULL)
            return TN_OK;
        p = comma + 1;
    }
}

static size_t count_items(const char *v, const char *end)
{
    size_t n = 1;
    for (; v < end; v++)
        n += *v == ',';
    return n;
}

static const char *find2(const char *b, const char *e, const char *w)
{
    for (; b + 1 < e; b++)
        if (b[0] == w[0] && b[1] == w[1])
            return b;
    return NULL;
}

static int select_unsupported(const pctx *c, const char *b, const char *e)
{
    const char *at;
    if ((at = memchr(b, '(', (size_t)(e - b))) != NULL)
        return pbad(c, "unsupported", at, "embedded resources and aggregates are not supported");
    if ((at = find2(b, e, "::")) != NULL)
        return pbad(c, "unsupported", at, "casts (::) are not supported");
    if ((at = find2(b, e, "->")) != NULL)
        return pbad(c, "unsupported", at, "JSON paths (->, ->>) are not supported");
    if (starts(b, e, "..."))
        return pbad(c, "unsupported", b, "spreads (...) are not supported");
    return TN_OK;
}

static int select_item(qstate *s, const pctx *c, const char *b, const char *e, int i)
{
    rest_select *it = &s->q->select[i];
    int rc = select_unsupported(c, b, e);
    if (rc != TN_OK)
        return rc;
    const char *colon = memchr(b, ':', (size_t)(e - b));
    const char *col = colon ? colon + 1 : b;
    it->param = c->text;
    it->at = (size_t)(col - c->text);
    if (colon && (rc = take_name(c, b, colon, &it->alias)) != TN_OK)
        return rc;
    if (e - col == 1 && *col == '*') {
        if (colon)
            return pbad(c, "bad_select", b, "'*' takes no alias");
        it->column = "*";
        return TN_OK;
    }
    return take_name(c, col, e, &it->column);
}

static int p_select(qstate *s, const pctx *c, const char *v)
{
    size_t n = count_items(v, c->end);
    if (v == c->end)
        return pbad(c, "bad_select", v, "an empty select list");
    if (n > REST_MAX_SELECT)
        return perr(c, TN_TOOBIG, "too_complex", v, "more than %d columns in select",
                    REST_MAX_SELECT);
    s->q->select = r_alloc(c->m, n * sizeof *s->q->select);
    if (s->q->select == NULL)
        return pnomem(c);
    memset(s->q->select, 0, n * sizeof *s->q->select);
    s->q->nselect = (int)n;
    return each_item(s, c, v, "bad_select", select_item);
}

/* After the column of an order term: [.asc|.desc][.nullsfirst|.nullslast]. */
static int order_mods(const pctx *c, const char *p, const char *e, rest_order *o)
{
    int stage = 0;
    while (p < e) {
        const char *m = ++p;
        while (p < e && *p != '.')
            p++;
        size_t n = (size_t)(p - m);
        if (stage == 0 && (word_is(m, n, "asc") || word_is(m, n, "desc"))) {
            o->desc = lower(*m) == 'd';
            stage = 1;
        } else if (stage < 2 && (word_is(m, n, "nullsfirst") || word_is(m, n, "nullslast"))) {
            o->nulls = lower(m[5]) == 'f' ? REST_NULLS_FIRST : REST_NULLS_LAST;
            stage = 2;
        } else {
            return pbad(c, "bad_order", m,
                        "an order term is col[.asc|.desc][.nullsfirst|.nullslast]");
        }
    }
    return TN_OK;
}

static int order_item(qstate *s, const pctx *c, const char *b, const char *e, int i)
{
    rest_order *o = &s->q->order[i];
    const char *dot = memchr(b, '.', (size_t)(e - b));
    const char *ce = dot ? dot : e;
    o->param = c->text;
    o->at = (size_t)(b - c->text);
    int rc = take_name(c, b, ce, &o->column);
    return rc == TN_OK ? order_mods(c, ce, e, o) : rc;
}

static int p_order(qstate *s, const pctx *c, const char *v)
{
    size_t n = count_items(v, c->end);
    if (v == c->end)
        return pbad(c, "bad_order", v, "an empty order list");
    if (n > REST_MAX_ORDER)
        return perr(c, TN_TOOBIG, "too_complex", v, "more than %d terms in order",
                    REST_MAX_ORDER);
    s->q->order = r_alloc(c->m, n * sizeof *s->q->order);
    if (s->q->order == NULL)
        return pnomem(c);
    memset(s->q->order, 0, n * sizeof *s->q->order);
    s->q->norder = (int)n;
    return each_item(s, c, v, "bad_order", order_item);
}

/* A non-negative decimal of [p, e) that fits an int64_t. */
static bool read_count(const char *p, const char *e, int64_t *out)
{
    int64_t v = 0;
    if (p == e)
        return false;
    for (; p < e; p++) {
        if (!is_digit(*p) || v > (INT64_MAX - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

static int p_limit(qstate *s, const pctx *c, const char *v)
{
    if (!read_count(v, c->end, &s->q->limit))
        return pbad(c, "bad_limit", v, "limit is a non-negative integer");
    return TN_OK;
}

static int p_offset(qstate *s, const pctx *c, const char *v)
{
    if (!read_count(v, c->end, &s->q->offset))
        return pbad(c, "bad_limit", v, "offset is a non-negative integer");
    return TN_OK;
}

static int p_search(qstate *s, const pctx *c, const char *v)
{
    s->q->search = v;
    return TN_OK;
}

/* An item of columns= or on_conflict=: a name, bare or double-quoted (PostgREST's clients
 * quote every name they list: postgrest-js sends columns="a","b"). */
static int name_item(qstate *s, const pctx *c, const char *b, const char *e, int i)
{
    const char *dummy;
    if (e - b >= 2 && *b == '"' && e[-1] == '"') {
        b++;
        e--;
    }
    return take_name(c, b, e, &dummy);
}

static int p_on_conflict(qstate *s, const pctx *c, const char *v)
{
    int rc = each_item(s, c, v, "bad_column_name", name_item);
    s->q->on_conflict = v;
    return rc;
}

static int p_columns(qstate *s, const pctx *c, const char *v)
{
    int rc = each_item(s, c, v, "bad_column_name", name_item);
    s->q->columns = v;
    return rc;
}

static int p_all(qstate *s, const pctx *c, const char *v)
{
    size_t n = (size_t)(c->end - v);
    if (!word_is(v, n, "true") && !word_is(v, n, "false"))
        return pbad(c, "bad_value", v, "all is true or false");
    s->q->all = lower(*v) == 't';
    return TN_OK;
}

typedef int (*param_fn)(qstate *s, const pctx *c, const char *v);

static const struct {
    const char *name;
    param_fn fn;
    const char *twice;                 /* the code when given twice; NULL: may repeat */
} reserved[] = {
    {"select", p_select, "bad_select"}, {"order", p_order, "bad_order"},
    {"limit", p_limit, "bad_limit"},    {"offset", p_offset, "bad_limit"},
    {"or", p_logic, NULL},              {"and", p_logic, NULL},
    {"not.or", p_logic, NULL},          {"not.and", p_logic, NULL},
    {"search", p_search, "bad_value"},  {"on_conflict", p_on_conflict, "bad_value"},
    {"columns", p_columns, "bad_value"}, {"all", p_all, "bad_value"},
};

static int one_param(qstate *s, const pctx *c)
{
    size_t nlen = c->nlen;
    const char *v = c->text + nlen + (nlen < c->len);
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        if (strlen(reserved[i].name) != nlen || memcmp(reserved[i].name, c->text, nlen) != 0)
            continue;
        if (reserved[i].twice && (s->seen & (1u << i)))
            return pbad(c, reserved[i].twice, c->text, "this parameter is given twice");
        s->seen |= 1u << i;
        return reserved[i].fn(s, c, v);
    }
    return p_filter(s, c, v);
}

static int hexval(char c)
{
    if (is_digit(c))
        return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode [s, e) ('+' is a space; a '%' without two hex digits is itself) to d;
 * returns the length. */
static size_t pct_decode(const char *s, const char *e, char *d)
{
    size_t n = 0;
    while (s < e) {
        if (*s == '%' && e - s >= 3 && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
            d[n++] = (char)(hexval(s[1]) * 16 + hexval(s[2]));
            s += 3;
        } else {
            d[n++] = *s == '+' ? ' ' : *s;
            s++;
        }
    }
    return n;
}

/* One raw piece name[=value]: decoded into "name=value" (or "name"), then read. */
static int raw_param(qstate *s, const rest_mem *m, rest_err *e, const char *b, const char *end)
{
    const char *eq = memchr(b, '=', (size_t)(end - b));
    const char *ne = eq ? eq : end;
    char *t = r_alloc(m, (size_t)(end - b) + 2);
    if (t == NULL)
        return err_nomem(e);
    size_t nlen = pct_decode(b, ne, t), len = nlen;
    if (eq) {
        t[nlen] = '=';
        len = nlen + 1 + pct_decode(eq + 1, end, t + nlen + 1);
    }
    t[len] = '\0';
    pctx c = {m, e, t, len, t + len, &s->nconds, nlen};
    char *nul = memchr(t, '\0', len);
    if (nul != NULL) {
        for (char *z = nul; z < t + len; z++)
            *z = *z ? *z : '?';          /* the where shows the whole parameter */
        return pbad(&c, "bad_value", nul, "a NUL byte (%00) in the query string");
    }
    return one_param(s, &c);
}

static void query_defaults(rest_query *q)
{
    memset(q, 0, sizeof *q);
    q->limit = -1;
    q->prefer.ret = REST_RETURN_MINIMAL;
}

static int query_where(qstate *s, const rest_mem *m, rest_err *e)
{
    if (s->ntop == 0)
        return TN_OK;
    rest_cond *top = r_alloc(m, sizeof *top);
    rest_cond **kids = r_alloc(m, (size_t)s->ntop * sizeof *kids);
    if (top == NULL || kids == NULL)
        return err_nomem(e);
    memset(top, 0, sizeof *top);
    top->kind = REST_AND;
    top->nkids = s->ntop;
    top->kids = kids;
    memcpy(kids, s->top, (size_t)s->ntop * sizeof *kids);
    s->q->where = top;
    return TN_OK;
}

int rest_parse_query(const rest_mem *m, const char *qs, rest_query *q, rest_err *e)
{
    qstate s;
    memset(&s, 0, sizeof s);
    s.q = q;
    err_clear(e);
    query_defaults(q);
    const char *p = qs ? qs : "";
    while (*p) {
        const char *amp = strchr(p, '&');
        const char *end = amp ? amp : p + strlen(p);
        if (end > p) {
            int rc = raw_param(&s, m, e, p, end);
            if (rc != TN_OK)
                return rc;
        }
        p = amp ? amp + 1 : end;
    }
    return query_where(&s, m, e);
}

/* ---- Prefer ------------------------------------------------------------------------------- */

/* One preference, split: token and value (trimmed, one pair of quotes removed). */
typedef struct pref {
    const char *tok, *val;
    size_t ntok, nval;
    size_t at;
} pref;

static void trim(const char **b, const char **e)
{
    while (*b < *e && is_blank(**b))
        (*b)++;
    while (*e > *b && is_blank((*e)[-1]))
        (*e)--;
}

static void pref_split(const char *h, const char *b, const char *e, pref *p)
{
    const char *semi = memchr(b, ';', (size_t)(e - b));
    if (semi)
        e = semi;
    trim(&b, &e);
    const char *eq = memchr(b, '=', (size_t)(e - b));
    const char *te = eq ? eq : e, *vb = eq ? eq + 1 : e, *ve = e;
    trim(&b, &te);
    trim(&vb, &ve);
    if (ve - vb >= 2 && *vb == '"' && ve[-1] == '"') {
        vb++;
        ve--;
    }
    *p = (pref){b, vb, (size_t)(te - b), (size_t)(ve - vb), (size_t)(b - h)};
}

/* The index of the value among words (a NULL-ended list), -1 when none. */
static int pref_value(const pref *p, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (word_is(p->val, p->nval, words[i]))
            return i;
    return -1;
}

static const char *const w_return[] = {"minimal", "representation", "headers-only", NULL};
static const char *const w_count[] = {"exact", "planned", "estimated", NULL};
static const char *const w_res[] = {"merge-duplicates", "ignore-duplicates", NULL};
static const char *const w_missing[] = {"default", NULL};
static const char *const w_tx[] = {"commit", "rollback", NULL};
static const char *const w_handling[] = {"strict", "lenient", NULL};

static void pref_apply(rest_prefer *r, int k, int v)
{
    static const rest_return rets[] = {REST_RETURN_MINIMAL, REST_RETURN_REPRESENTATION,
                                       REST_RETURN_HEADERS_ONLY};
    static const rest_count counts[] = {REST_COUNT_EXACT, REST_COUNT_PLANNED,
                                        REST_COUNT_ESTIMATED};
    switch (k) {
    case 0: r->ret = rets[v]; r->ret_given = true; break;
    case 1: r->count = counts[v]; break;
    case 2: r->resolution = v == 0 ? REST_RES_MERGE : REST_RES_IGNORE; break;
    case 3: r->missing_default = true; break;
    case 4: r->tx_rollback = v == 1; break;
    default: r->strict = v == 0; break;
    }
}

static const struct {
    const char *tok;
    const char *const *words;
} prefs[] = {
    {"return", w_return}, {"count", w_count}, {"resolution", w_res},
    {"missing", w_missing}, {"tx", w_tx}, {"handling", w_handling},
};

static int pref_bad(const char *h, const pref *p, rest_err *e, const char *what)
{
    char label[128];
    snprintf(label, sizeof label, "Prefer: %s", h);
    return err_at(e, TN_INVALID, 400, "bad_prefer", label, p->at,
                  "%s: '%.*s' = '%.*s' (handling=strict refuses it)", what, (int)p->ntok,
                  p->tok, (int)p->nval, p->val);
}

/* One preference; the first of each kind counts (RFC 7240), `seen` remembers which. */
static int pref_one(const char *h, const pref *p, rest_prefer *r, unsigned *seen, rest_err *e)
{
    for (int k = 0; k < (int)(sizeof prefs / sizeof prefs[0]); k++) {
        if (!word_is(p->tok, p->ntok, prefs[k].tok))
            continue;
        int v = pref_value(p, prefs[k].words);
        if (v < 0)
            return r->strict ? pref_bad(h, p, e, "an invalid preference") : TN_OK;
        if (!(*seen & (1u << k)))
            pref_apply(r, k, v);
        *seen |= 1u << k;
        return TN_OK;
    }
    return r->strict ? pref_bad(h, p, e, "an unknown preference") : TN_OK;
}

typedef int (*pref_fn)(const char *h, const pref *p, rest_prefer *r, unsigned *seen,
                       rest_err *e);

static int pref_each(const char *h, rest_prefer *r, unsigned *seen, rest_err *e, pref_fn fn)
{
    for (const char *b = h;;) {
        const char *comma = strchr(b, ',');
        const char *end = comma ? comma : b + strlen(b);
        pref p;
        pref_split(h, b, end, &p);
        if (p.ntok > 0) {
            int rc = fn(h, &p, r, seen, e);
            if (rc != TN_OK)
                return rc;
        }
        if (comma == NULL)
            return TN_OK;
        b = comma + 1;
    }
}

/* The first handling= decides how the others are read, wherever it stands. */
static int pref_handling(const char *h, const pref *p, rest_prefer *r, unsigned *seen,
                         rest_err *e)
{
    if (!(*seen & 1u) && word_is(p->tok, p->ntok, "handling")) {
        r->strict = word_is(p->val, p->nval, "strict");
        *seen |= 1u;
    }
    return TN_OK;
}

int rest_parse_prefer(const char *header, rest_prefer *p, rest_err *e)
{
    unsigned seen = 0;
    err_clear(e);
    memset(p, 0, sizeof *p);
    p->ret = REST_RETURN_MINIMAL;
    if (header == NULL)
        return TN_OK;
    pref_each(header, p, &seen, e, pref_handling);
    seen = 0;
    return pref_each(header, p, &seen, e, pref_one);
}

/* ---- Range -------------------------------------------------------------------------------- */

static int range_bad(const char *h, size_t at, rest_err *e, const char *what)
{
    char label[128];
    snprintf(label, sizeof label, "Range: %s", h);
    return err_at(e, TN_INVALID, 416, "bad_range", label, at, "%s", what);
}

/* "first-last" or "first-" (last -1), an "items=" unit allowed, blanks around. */
static int range_read(const char *h, int64_t *first, int64_t *last, rest_err *e)
{
    const char *b = h, *end = h + strlen(h);
    trim(&b, &end);
    if (end - b >= 6 && word_is(b, 6, "items="))
        b += 6;
    const char *dash = memchr(b, '-', (size_t)(end - b));
    if (dash == NULL || !read_count(b, dash, first))
        return range_bad(h, (size_t)(b - h), e, "a range is first-last or first-, in items");
    *last = -1;
    if (dash + 1 < end && !read_count(dash + 1, end, last))
        return range_bad(h, (size_t)(dash + 1 - h), e, "the range's last item is not a number");
    if (*last >= 0 && *last < *first)
        return range_bad(h, (size_t)(dash + 1 - h), e, "the range's last item is before its first");
    return TN_OK;
}

/* The intersection of the query's window and the range's (INT64_MAX stands for no end). */
static void range_apply(rest_query *q, int64_t first, int64_t last)
{
    int64_t qhi = INT64_MAX, rhi = last < 0 ? INT64_MAX : last;
    if (q->limit > 0 && q->limit - 1 < INT64_MAX - q->offset)
        qhi = q->offset + q->limit - 1;
    int64_t lo = first > q->offset ? first : q->offset;
    int64_t hi = qhi < rhi ? qhi : rhi;
    bool empty = q->limit == 0 || hi < lo;
    q->offset = lo;
    q->limit = empty ? 0 : hi == INT64_MAX ? -1 : hi - lo + 1;
}

int rest_parse_range(const char *header, rest_query *q, rest_err *e)
{
    int64_t first = 0, last = -1;
    err_clear(e);
    if (header == NULL)
        return TN_OK;
    int rc = range_read(header, &first, &last, e);
    if (rc != TN_OK)
        return rc;
    range_apply(q, first, last);
    return TN_OK;
}

/* ---- SQL text ----------------------------------------------------------------------------- */

static char sql_empty[1];

void rest_sql_init(rest_sql *s, const rest_mem *m, rest_dialect d)
{
    memset(s, 0, sizeof *s);
    s->m = m;
    s->text = sql_empty;
    s->dialect = d;
}

static int sql_room(rest_sql *s, size_t n)
{
    if (s->len + n + 1 <= s->cap)
        return TN_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < s->len + n + 1)
        cap *= 2;
    char *t = r_alloc(s->m, cap);
    if (t == NULL)
        return TN_NOMEM;
    memcpy(t, s->text, s->len + 1);
    s->text = t;
    s->cap = cap;
    return TN_OK;
}

static int sql_addn(rest_sql *s, const char *text, size_t n)
{
    if (sql_room(s, n) != TN_OK)
        return TN_NOMEM;
    memcpy(s->text + s->len, text, n);
    s->len += n;
    s->text[s->len] = '\0';
    return TN_OK;
}

int rest_sql_add(rest_sql *s, const char *text)
{
    return sql_addn(s, text, strlen(text));
}

int rest_sql_ident(rest_sql *s, const char *ident)
{
    int rc = sql_addn(s, "\"", 1);
    for (const char *p = ident; rc == TN_OK && *p; ) {
        size_t run = strcspn(p, "\"");   /* up to a quote, which is doubled */
        rc = sql_addn(s, p, run);
        p += run;
        if (rc == TN_OK && *p == '"') {
            rc = sql_addn(s, "\"\"", 2);
            p++;
        }
    }
    return rc == TN_OK ? sql_addn(s, "\"", 1) : rc;
}

/* Without printf's machinery: it runs for every parameter of every statement. */
size_t rest_int_text(char *buf, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    size_t len = 0;
    if (v < 0)
        buf[len++] = '-';
    while (n > 0)
        buf[len++] = tmp[--n];
    buf[len] = '\0';
    return len;
}

int rest_sql_param(rest_sql *s, const char *value)
{
    if (s->nparams == s->capparams) {
        int cap = s->capparams ? s->capparams * 2 : 16;
        const char **p = r_alloc(s->m, (size_t)cap * sizeof *p);
        if (p == NULL)
            return TN_NOMEM;
        if (s->nparams)
            memcpy(p, s->params, (size_t)s->nparams * sizeof *p);
        s->params = p;
        s->capparams = cap;
    }
    s->params[s->nparams++] = value;
    char n[24] = "$";
    return sql_addn(s, n, 1 + rest_int_text(n + 1, s->nparams));
}

/* The caller's catalog says yes, or unknown_column pointing where the column was read. */
static int column_ok(const char *name, const char *param, size_t at, rest_column_fn col,
                     void *ctx, rest_err *e)
{
    int type = 0;
    if (!col(ctx, name, &type))
        return err_at(e, TN_NOTFOUND, 400, "unknown_column", param ? param : "", at,
                      "no column '%s' in this table", name);
    return TN_OK;
}

/* The column, checked, then quoted. */
static int sql_column(rest_sql *s, const char *name, const char *param, size_t at,
                      rest_column_fn col, void *ctx, rest_err *e)
{
    int rc = column_ok(name, param, at, col, ctx, e);
    if (rc != TN_OK)
        return rc;
    return rest_sql_ident(s, name) == TN_OK ? TN_OK : err_nomem(e);
}

/* SQLite's GLOB for a LIKE pattern ('%' and '_' wildcards, '\' escaping the next byte, as
 * PostgreSQL's LIKE): GLOB is case-sensitive like PostgreSQL's LIKE. */
static char *like_to_glob(const rest_mem *m, const char *v)
{
    char *g = r_alloc(m, strlen(v) * 3 + 1), *d = g;
    if (g == NULL)
        return NULL;
    for (; *v; v++) {
        char c = *v;
        bool lit = c == '\\' && v[1] != '\0';
        if (lit)
            c = *++v;
        if (!lit && (c == '%' || c == '_')) {
            *d++ = c == '%' ? '*' : '?';
        } else if (c == '*' || c == '?' || c == '[') {
            *d++ = '[';
            *d++ = c;
            *d++ = ']';
        } else {
            *d++ = c;
        }
    }
    *d = '\0';
    return g;
}

static const char *cmp_sql(rest_op op)
{
    switch (op) {
    case REST_EQ: return " = ";
    case REST_NEQ: return " <> ";
    case REST_GT: return " > ";
    case REST_GTE: return " >= ";
    case REST_LT: return " < ";
    default: return " <= ";
    }
}

static int leaf_like(rest_sql *s, const rest_cond *k)
{
    bool pg = s->dialect == REST_POSTGRES;
    if (k->op == REST_ILIKE) {
        int rc = rest_sql_add(s, pg ? " ILIKE " : " LIKE ");
        if (rc == TN_OK)
            rc = rest_sql_param(s, k->value);
        /* PostgreSQL's LIKE escapes with a backslash by default; SQLite's only when told */
        if (rc == TN_OK && !pg)
            rc = rest_sql_add(s, " ESCAPE '\\'");
        return rc;
    }
    if (pg) {
        int rc = rest_sql_add(s, " LIKE ");
        return rc ? rc : rest_sql_param(s, k->value);
    }
    char *g = like_to_glob(s->m, k->value);
    if (g == NULL)
        return TN_NOMEM;
    int rc = rest_sql_add(s, " GLOB ");
    return rc ? rc : rest_sql_param(s, g);
}

static int leaf_in(rest_sql *s, const rest_cond *k)
{
    int rc = rest_sql_add(s, " IN (");
    for (int i = 0; rc == TN_OK && i < k->nvalues; i++) {
        if (i)
            rc = rest_sql_add(s, ", ");
        if (rc == TN_OK)
            rc = rest_sql_param(s, k->values[i]);
    }
    return rc ? rc : rest_sql_add(s, ")");
}

static int leaf_is(rest_sql *s, const rest_cond *k)
{
    static const char *const is[] = {" IS NULL", " IS TRUE", " IS FALSE", " IS UNKNOWN"};
    /* SQLite has no IS UNKNOWN; for a boolean it is IS NULL */
    if (k->is == REST_IS_UNKNOWN && s->dialect == REST_SQLITE)
        return rest_sql_add(s, " IS NULL");
    return rest_sql_add(s, is[k->is]);
}

/* The comparison after the column has been written. */
static int leaf_op(rest_sql *s, const rest_cond *k)
{
    switch (k->op) {
    case REST_LIKE:
    case REST_ILIKE: return leaf_like(s, k);
    case REST_IN: return leaf_in(s, k);
    case REST_IS: return leaf_is(s, k);
    default: {
        int rc = rest_sql_add(s, cmp_sql(k->op));
        return rc ? rc : rest_sql_param(s, k->value);
    }
    }
}

static int sql_leaf(rest_sql *s, const rest_cond *k, rest_column_fn col, void *ctx, rest_err *e)
{
    int rc = k->negate ? rest_sql_add(s, "NOT (") : TN_OK;
    if (rc != TN_OK)
        return err_nomem(e);
    if (k->op == REST_IN && k->nvalues == 0) {
        /* an empty list matches no row; the column is still checked */
        if ((rc = column_ok(k->column, k->param, k->at, col, ctx, e)) != TN_OK)
            return rc;
        rc = rest_sql_add(s, "FALSE");
    } else {
        if ((rc = sql_column(s, k->column, k->param, k->at, col, ctx, e)) != TN_OK)
            return rc;
        rc = leaf_op(s, k);
    }
    if (rc == TN_OK && k->negate)
        rc = rest_sql_add(s, ")");
    return rc == TN_OK ? TN_OK : err_nomem(e);
}

static int sql_cond(rest_sql *s, const rest_cond *k, rest_column_fn col, void *ctx,
                    rest_err *e);

/* The kids of a group joined by AND or OR, without parentheses. */
static int sql_kids(rest_sql *s, const rest_cond *k, rest_column_fn col, void *ctx, rest_err *e)
{
    for (int i = 0; i < k->nkids; i++) {
        if (i && rest_sql_add(s, k->kind == REST_OR ? " OR " : " AND ") != TN_OK)
            return err_nomem(e);
        int rc = sql_cond(s, k->kids[i], col, ctx, e);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

static int sql_cond(rest_sql *s, const rest_cond *k, rest_column_fn col, void *ctx,
                    rest_err *e)
{
    if (k->kind == REST_LEAF)
        return sql_leaf(s, k, col, ctx, e);
    if (rest_sql_add(s, k->negate ? "NOT (" : "(") != TN_OK)
        return err_nomem(e);
    int rc = sql_kids(s, k, col, ctx, e);
    if (rc != TN_OK)
        return rc;
    return rest_sql_add(s, ")") == TN_OK ? TN_OK : err_nomem(e);
}

int rest_sql_where(rest_sql *s, const rest_query *q, rest_column_fn col, void *ctx,
                   rest_err *e)
{
    err_clear(e);
    if (q->where == NULL)
        return TN_OK;
    if (rest_sql_add(s, " WHERE ") != TN_OK)
        return err_nomem(e);
    /* the top AND of the parameters needs no parentheses of its own */
    if (q->where->kind == REST_AND && !q->where->negate)
        return sql_kids(s, q->where, col, ctx, e);
    return sql_cond(s, q->where, col, ctx, e);
}

int rest_sql_order(rest_sql *s, const rest_query *q, rest_column_fn col, void *ctx,
                   rest_err *e)
{
    static const char *const nulls[] = {"", " NULLS FIRST", " NULLS LAST"};
    err_clear(e);
    for (int i = 0; i < q->norder; i++) {
        const rest_order *o = &q->order[i];
        if (rest_sql_add(s, i ? ", " : " ORDER BY ") != TN_OK)
            return err_nomem(e);
        int rc = sql_column(s, o->column, o->param, o->at, col, ctx, e);
        if (rc != TN_OK)
            return rc;
        if (rest_sql_add(s, o->desc ? " DESC" : " ASC") != TN_OK ||
            rest_sql_add(s, nulls[o->nulls]) != TN_OK)
            return err_nomem(e);
    }
    return TN_OK;
}

static int sql_count_param(rest_sql *s, const char *kw, int64_t v)
{
    char n[24];
    char *p = r_strndup(s->m, n, rest_int_text(n, v));
    if (p == NULL)
        return TN_NOMEM;
    int rc = rest_sql_add(s, kw);
    return rc ? rc : rest_sql_param(s, p);
}

int rest_sql_limit(rest_sql *s, const rest_query *q)
{
    int rc = TN_OK;
    if (q->limit >= 0)
        rc = sql_count_param(s, " LIMIT ", q->limit);
    else if (q->offset > 0 && s->dialect == REST_SQLITE)
        rc = rest_sql_add(s, " LIMIT -1");   /* SQLite takes OFFSET only after a LIMIT */
    if (rc == TN_OK && q->offset > 0)
        rc = sql_count_param(s, " OFFSET ", q->offset);
    return rc;
}

static int select_item_sql(rest_sql *s, const rest_select *it, rest_column_fn col, void *ctx,
                           rest_err *e)
{
    if (strcmp(it->column, "*") == 0)
        return rest_sql_add(s, "*") == TN_OK ? TN_OK : err_nomem(e);
    int rc = sql_column(s, it->column, it->param, it->at, col, ctx, e);
    if (rc != TN_OK || it->alias == NULL)
        return rc;
    if (rest_sql_add(s, " AS ") != TN_OK || rest_sql_ident(s, it->alias) != TN_OK)
        return err_nomem(e);
    return TN_OK;
}

int rest_sql_select(rest_sql *s, const rest_query *q, rest_column_fn col, void *ctx,
                    rest_err *e)
{
    err_clear(e);
    if (q->nselect == 0)
        return rest_sql_add(s, "*") == TN_OK ? TN_OK : err_nomem(e);
    for (int i = 0; i < q->nselect; i++) {
        if (i && rest_sql_add(s, ", ") != TN_OK)
            return err_nomem(e);
        int rc = select_item_sql(s, &q->select[i], col, ctx, e);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}
