/*
 * dump.c — the tenant dump format: writing its lines, and reading them back with a strict
 * JSON parser (see dump.h for the format).
 *
 * The parser is small on purpose: one line is one JSON value, parsed into a tree of nodes in
 * an arena that is reset per line, so a dump of millions of rows reads in constant memory.
 * It accepts exactly RFC 8259 JSON (no trailing commas, no comments, no NaN), refuses
 * \u0000 (a C string cannot hold it) and bytes that are not UTF-8, and limits nesting.
 *
 * Must not: touch a database or the registry, or trust a count it did not check.
 */
#include "core/first.h"
#include "tenancy/dump.h"
#include "core/rc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- writing -------------------------------------------------------------------------------- */

static void put_time(buf *b, int64_t t)
{
    char s[32] = "";
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) != NULL)
        strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", &tm);
    buf_json_str(b, s);
}

void dump_put_header(buf *b, const dump_header *h)
{
    buf_puts(b, "{\"format\":\"" DUMP_FORMAT "\",\"version\":");
    buf_i64(b, DUMP_VERSION);
    buf_puts(b, ",\"slug\":");
    buf_json_str(b, h->slug);
    buf_puts(b, ",\"name\":");
    buf_json_str(b, h->name);
    buf_puts(b, ",\"state\":");
    buf_json_str(b, h->state);
    buf_puts(b, ",\"max_workers\":");
    buf_i64(b, h->max_workers);
    buf_puts(b, ",\"settings\":");
    buf_puts(b, h->settings && h->settings[0] ? h->settings : "{}");
    buf_puts(b, ",\"domains\":[");
    for (int i = 0; i < h->ndomains; i++) {
        buf_puts(b, i ? ",{\"domain\":" : "{\"domain\":");
        buf_json_str(b, h->domains[i].domain);
        buf_puts(b, h->domains[i].primary ? ",\"primary\":true}" : ",\"primary\":false}");
    }
    buf_puts(b, "],\"migration_version\":");
    buf_json_str(b, h->migration_version ? h->migration_version : "");
    buf_puts(b, ",\"placement\":");
    buf_json_str(b, h->placement);
    buf_puts(b, ",\"backend\":");
    buf_json_str(b, h->backend);
    buf_puts(b, ",\"exported_at\":");
    put_time(b, h->exported_at);
    buf_puts(b, ",\"tables\":[");
    for (int i = 0; i < h->ntables; i++) {
        if (i)
            buf_putc(b, ',');
        buf_json_str(b, h->tables[i]);
    }
    buf_puts(b, "]}\n");
}

void dump_put_table(buf *b, const copy_table *t, int64_t rows)
{
    buf_puts(b, "{\"table\":");
    buf_json_str(b, t->name);
    buf_puts(b, ",\"backend\":");
    buf_json_str(b, t->backend);
    buf_puts(b, ",\"rows\":");
    buf_i64(b, rows);
    buf_puts(b, ",\"columns\":[");
    for (int i = 0; i < t->ncols; i++) {
        const copy_column *c = &t->cols[i];
        buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        buf_json_str(b, c->name);
        buf_puts(b, ",\"type\":");
        buf_json_str(b, c->type);
        buf_puts(b, c->notnull ? ",\"notnull\":true" : ",\"notnull\":false");
        buf_puts(b, ",\"pk\":");
        buf_i64(b, c->pk);
        buf_puts(b, c->identity ? ",\"identity\":true" : ",\"identity\":false");
        buf_puts(b, c->boolean ? ",\"boolean\":true" : ",\"boolean\":false");
        if (c->custom)
            buf_puts(b, ",\"custom\":true");
        buf_puts(b, ",\"default\":");
        buf_json_str(b, c->dflt);
        buf_putc(b, '}');
    }
    buf_puts(b, "],\"indexes\":[");
    for (int i = 0; i < t->nidx; i++) {
        const copy_index *x = &t->idx[i];
        buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        buf_json_str(b, x->name);
        buf_puts(b, x->unique ? ",\"unique\":true" : ",\"unique\":false");
        buf_puts(b, ",\"columns\":[");
        for (int k = 0; k < x->ncols; k++) {
            if (k)
                buf_putc(b, ',');
            buf_json_str(b, x->cols[k]);
        }
        buf_puts(b, "]}");
    }
    buf_puts(b, "]}\n");
}

int dump_put_row(buf *b, const copy_table *t, const char *const *vals, char *err,
                 size_t errlen)
{
    for (int i = 0; i < t->ncols; i++)
        if (vals[i] != NULL && utf8_valid_prefix(vals[i], strlen(vals[i])) != strlen(vals[i])) {
            return tn_errf(err, errlen, TN_INVALID,
                           "table %s, column %s: a value is not UTF-8 text (binary data in "
                           "a text column?): the dump cannot hold it", t->name,
                           t->cols[i].name);
        }
    buf_putc(b, '[');
    for (int i = 0; i < t->ncols; i++) {
        if (i)
            buf_putc(b, ',');
        buf_json_str(b, vals[i]);
    }
    buf_puts(b, "]\n");
    return TN_OK;
}

void dump_put_end(buf *b, int tables, int64_t rows)
{
    buf_puts(b, "{\"end\":\"" DUMP_FORMAT "\",\"tables\":");
    buf_i64(b, tables);
    buf_puts(b, ",\"rows\":");
    buf_i64(b, rows);
    buf_puts(b, "}\n");
}

/* ---- a strict JSON parser ------------------------------------------------------------------- */

enum { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
    int type;
    const char *s;          /* J_STR: the decoded string; J_NUM: its text */
    const char *raw;        /* where the value starts in the line, and its length */
    size_t rawlen;
    int n;                  /* J_ARR, J_OBJ: members */
    struct jv **kids;
    const char **keys;      /* J_OBJ */
} jv;

typedef struct jparse {
    const char *p, *end;
    arena *a;
    int depth;
    const char *why;
} jparse;

#define J_MAX_DEPTH 16

static void ws(jparse *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n'))
        j->p++;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static char *utf8_put(char *o, unsigned cp)
{
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

static char *jstring(jparse *j)
{
    /* j->p is at the opening quote. The decoded text is never longer than the source. */
    const char *s = ++j->p;
    const char *q = s;
    while (q < j->end && *q != '"') {
        if (*q == '\\')
            q++;
        q++;
    }
    if (q >= j->end) {
        j->why = "unterminated string";
        return NULL;
    }
    char *out = arena_alloc(j->a, (size_t)(q - s) + 1);
    if (out == NULL) {
        j->why = "out of memory";
        return NULL;
    }
    char *o = out;
    while (j->p < q) {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) {
            j->why = "a control character in a string";
            return NULL;
        }
        if (c != '\\') {
            *o++ = (char)c;
            j->p++;
            continue;
        }
        j->p++;
        char e = *j->p++;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            int cp = q - j->p >= 4 ? hex4(j->p) : -1;
            if (cp < 0) {
                j->why = "a bad \\u escape";
                return NULL;
            }
            j->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = q - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' ? hex4(j->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    j->why = "a lone surrogate in a \\u escape";
                    return NULL;
                }
                j->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                j->why = "a lone surrogate in a \\u escape";
                return NULL;
            }
            if (cp == 0) {
                j->why = "\\u0000 in a string";
                return NULL;
            }
            o = utf8_put(o, (unsigned)cp);
            break;
        }
        default:
            j->why = "a bad escape in a string";
            return NULL;
        }
    }
    *o = '\0';
    j->p = q + 1;
    if (utf8_valid_prefix(out, (size_t)(o - out)) != (size_t)(o - out)) {
        j->why = "a string that is not UTF-8";
        return NULL;
    }
    return out;
}

static jv *jvalue(jparse *j);

static jv *jnode(jparse *j, int type, const char *start)
{
    jv *v = arena_calloc(j->a, sizeof(*v));
    if (v == NULL) {
        j->why = "out of memory";
        return NULL;
    }
    v->type = type;
    v->raw = start;
    return v;
}

/* Members of an array or object, collected in a growing list then copied to the arena. */
static jv *jcompound(jparse *j, bool obj)
{
    const char *start = j->p;
    jv *v = jnode(j, obj ? J_OBJ : J_ARR, start);
    if (v == NULL)
        return NULL;
    if (++j->depth > J_MAX_DEPTH) {
        j->why = "nested too deep";
        return NULL;
    }
    j->p++;
    int cap = 8;
    jv **kids = arena_alloc(j->a, (size_t)cap * sizeof(*kids));
    const char **keys = obj ? arena_alloc(j->a, (size_t)cap * sizeof(*keys)) : NULL;
    if (kids == NULL || (obj && keys == NULL)) {
        j->why = "out of memory";
        return NULL;
    }
    ws(j);
    if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        j->p++;
    } else {
        for (;;) {
            if (v->n == cap) {
                jv **nk = arena_alloc(j->a, (size_t)cap * 2 * sizeof(*nk));
                const char **nkeys =
                    obj ? arena_alloc(j->a, (size_t)cap * 2 * sizeof(*nkeys)) : NULL;
                if (nk == NULL || (obj && nkeys == NULL)) {
                    j->why = "out of memory";
                    return NULL;
                }
                memcpy(nk, kids, (size_t)cap * sizeof(*nk));
                if (obj)
                    memcpy(nkeys, keys, (size_t)cap * sizeof(*nkeys));
                kids = nk;
                keys = nkeys;
                cap *= 2;
            }
            ws(j);
            if (obj) {
                if (j->p >= j->end || *j->p != '"') {
                    j->why = "an object key must be a string";
                    return NULL;
                }
                if ((keys[v->n] = jstring(j)) == NULL)
                    return NULL;
                ws(j);
                if (j->p >= j->end || *j->p != ':') {
                    j->why = "':' expected";
                    return NULL;
                }
                j->p++;
            }
            if ((kids[v->n] = jvalue(j)) == NULL)
                return NULL;
            v->n++;
            ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
                j->p++;
                break;
            }
            j->why = obj ? "',' or '}' expected" : "',' or ']' expected";
            return NULL;
        }
    }
    j->depth--;
    v->kids = kids;
    v->keys = keys;
    v->rawlen = (size_t)(j->p - start);
    return v;
}

static bool digits(jparse *j)
{
    const char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s;
}

static jv *jvalue(jparse *j)
{
    ws(j);
    if (j->p >= j->end) {
        j->why = "a value expected";
        return NULL;
    }
    const char *start = j->p;
    char c = *j->p;
    if (c == '{' || c == '[')
        return jcompound(j, c == '{');
    if (c == '"') {
        jv *v = jnode(j, J_STR, start);
        if (v != NULL && (v->s = jstring(j)) == NULL)
            return NULL;
        if (v != NULL)
            v->rawlen = (size_t)(j->p - start);
        return v;
    }
    static const struct { const char *w; int t; } words[] = {
        {"null", J_NULL}, {"true", J_TRUE}, {"false", J_FALSE}};
    for (size_t i = 0; i < TN_ARRAY_LEN(words); i++) {
        size_t l = strlen(words[i].w);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, words[i].w, l) == 0) {
            j->p += l;
            jv *v = jnode(j, words[i].t, start);
            if (v != NULL)
                v->rawlen = l;
            return v;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-')
            j->p++;
        if (j->p < j->end && *j->p == '0')
            j->p++;
        else if (!digits(j)) {
            j->why = "a bad number";
            return NULL;
        }
        if (j->p < j->end && *j->p == '.') {
            j->p++;
            if (!digits(j)) {
                j->why = "a bad number";
                return NULL;
            }
        }
        if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
            j->p++;
            if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
                j->p++;
            if (!digits(j)) {
                j->why = "a bad number";
                return NULL;
            }
        }
        jv *v = jnode(j, J_NUM, start);
        if (v != NULL) {
            v->rawlen = (size_t)(j->p - start);
            v->s = arena_strndup(j->a, start, v->rawlen);
        }
        return v;
    }
    j->why = "not a JSON value";
    return NULL;
}

/* The whole line must be one value. */
static jv *jparse_line(arena *a, const char *line, size_t len, const char **why)
{
    jparse j = {line, line + len, a, 0, NULL};
    jv *v = jvalue(&j);
    if (v != NULL) {
        ws(&j);
        if (j.p != j.end) {
            j.why = "text after the value";
            v = NULL;
        }
    }
    *why = j.why ? j.why : "";
    return v;
}

static const jv *jget(const jv *o, const char *key)
{
    if (o == NULL || o->type != J_OBJ)
        return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return o->kids[i];
    return NULL;
}

static const char *jstr(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    return v && v->type == J_STR ? v->s : NULL;
}

/* An integer member in [lo, hi]; false when missing or not one. */
static bool jint(const jv *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const jv *v = jget(o, key);
    if (v == NULL || v->type != J_NUM || strpbrk(v->s, ".eE") != NULL)
        return false;
    char *end;
    long long x = strtoll(v->s, &end, 10);
    if (*end != '\0' || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

static bool jbool(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    return v != NULL && v->type == J_TRUE;
}

/* ---- reading -------------------------------------------------------------------------------- */

struct dump_reader {
    FILE *f;
    char *line;
    size_t cap;
    long lineno;
    arena *hdr;               /* the header's lifetime */
    arena *row;               /* reset per line */
    dump_header h;
    const copy_table *cur;    /* the table being read */
    int64_t want, got;        /* its rows */
    int tables;               /* tables read */
    int64_t total;
    bool ended;
    const char **vals;
    int valcap;
};

/* The next line without its '\n'; TN_DONE at end of file. */
static int next_line(dump_reader *r, size_t *len, char *err, size_t errlen)
{
    ssize_t n = getline(&r->line, &r->cap, r->f);
    if (n < 0) {
        if (ferror(r->f)) {
            return tn_errf(err, errlen, TN_IO, "cannot read the dump: %s", strerror(errno));
        }
        return TN_DONE;
    }
    r->lineno++;
    if (n > 0 && r->line[n - 1] == '\n')
        n--;
    *len = (size_t)n;
    return TN_OK;
}

static int bad(dump_reader *r, char *err, size_t errlen, const char *what)
{
    return tn_errf(err, errlen, TN_INVALID, "dump line %ld: %s", r->lineno, what);
}

int dump_open(FILE *f, dump_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    dump_reader *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->hdr = arena_create(0)) == NULL || (r->row = arena_create(0)) == NULL) {
        dump_close(r);
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    r->f = f;
    size_t len;
    int rc = next_line(r, &len, err, errlen);
    if (rc == TN_DONE) {
        dump_close(r);
        return tn_errf(err, errlen, TN_INVALID, "the dump is empty");
    }
    if (rc != TN_OK) {
        dump_close(r);
        return rc;
    }
    const char *why;
    const jv *h = jparse_line(r->hdr, r->line, len, &why);
    const char *fmt = jstr(h, "format");
    int64_t v = 0;
    if (h == NULL || fmt == NULL || strcmp(fmt, DUMP_FORMAT) != 0) {
        rc = bad(r, err, errlen, h == NULL ? why : "not a tenancy dump (no \"format\": \""
                                                   DUMP_FORMAT "\")");
        goto fail;
    }
    if (!jint(h, "version", 1, 1000000, &v) || v > DUMP_VERSION) {
        rc = tn_errf(err, errlen, TN_INVALID,
                     "dump line 1: format version %lld: this tenancy reads version %d",
                     (long long)v, DUMP_VERSION);
        goto fail;
    }
    dump_header *d = &r->h;
    d->version = (int)v;
    d->slug = jstr(h, "slug");
    d->name = jstr(h, "name");
    d->state = jstr(h, "state");
    d->migration_version = jstr(h, "migration_version");
    d->placement = jstr(h, "placement");
    d->backend = jstr(h, "backend");
    int64_t mw = 0;
    if (jget(h, "max_workers") != NULL && !jint(h, "max_workers", 0, 100000, &mw)) {
        rc = bad(r, err, errlen, "\"max_workers\" must be a whole number from 0 to 100000");
        goto fail;
    }
    d->max_workers = (int)mw;
    if (d->slug == NULL || d->name == NULL) {
        rc = bad(r, err, errlen, "the header needs \"slug\" and \"name\" strings");
        goto fail;
    }
    const jv *s = jget(h, "settings");
    if (s != NULL && s->type != J_OBJ) {
        rc = bad(r, err, errlen, "\"settings\" must be an object");
        goto fail;
    }
    d->settings = s ? arena_strndup(r->hdr, s->raw, s->rawlen) : "{}";
    const jv *doms = jget(h, "domains");
    if (doms != NULL && doms->type != J_ARR) {
        rc = bad(r, err, errlen, "\"domains\" must be an array");
        goto fail;
    }
    if (doms != NULL && doms->n > 0) {
        dump_domain *dd = arena_calloc(r->hdr, (size_t)doms->n * sizeof(*dd));
        if (dd == NULL) {
            rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
            goto fail;
        }
        for (int i = 0; i < doms->n; i++) {
            dd[i].domain = jstr(doms->kids[i], "domain");
            dd[i].primary = jbool(doms->kids[i], "primary");
            if (dd[i].domain == NULL) {
                rc = bad(r, err, errlen, "each of \"domains\" needs a \"domain\" string");
                goto fail;
            }
        }
        d->domains = dd;
        d->ndomains = doms->n;
    }
    const jv *tl = jget(h, "tables");
    if (tl == NULL || tl->type != J_ARR) {
        rc = bad(r, err, errlen, "the header needs a \"tables\" array");
        goto fail;
    }
    const char **names = arena_calloc(r->hdr, (size_t)(tl->n + 1) * sizeof(*names));
    if (names == NULL) {
        rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < tl->n; i++)
        if (tl->kids[i]->type != J_STR || (names[i] = tl->kids[i]->s) == NULL) {
            rc = bad(r, err, errlen, "\"tables\" must hold strings");
            goto fail;
        }
    d->tables = names;
    d->ntables = tl->n;
    *out = r;
    return TN_OK;

fail:
    dump_close(r);
    return rc;
}

const dump_header *dump_header_of(const dump_reader *r)
{
    return &r->h;
}

static int parse_columns(dump_reader *r, const jv *cols, arena *a, copy_table *t, char *err,
                         size_t errlen)
{
    if (cols == NULL || cols->type != J_ARR || cols->n == 0)
        return bad(r, err, errlen, "a table needs a non-empty \"columns\" array");
    t->cols = arena_calloc(a, (size_t)cols->n * sizeof(copy_column));
    if (t->cols == NULL)
        return TN_NOMEM;
    for (int i = 0; i < cols->n; i++) {
        const jv *c = cols->kids[i];
        copy_column *col = &t->cols[i];
        const char *name = jstr(c, "name"), *type = jstr(c, "type"), *dflt = jstr(c, "default");
        int64_t pk = 0;
        if (name == NULL || (jget(c, "pk") != NULL && !jint(c, "pk", 0, 1600, &pk)))
            return bad(r, err, errlen, "a column needs a \"name\" (and \"pk\" is a number)");
        col->name = arena_strdup(a, name);
        col->type = arena_strdup(a, type ? type : "");
        col->dflt = dflt ? arena_strdup(a, dflt) : NULL;
        col->pk = (int)pk;
        col->notnull = jbool(c, "notnull");
        col->identity = jbool(c, "identity");
        col->boolean = jbool(c, "boolean");
        col->custom = jbool(c, "custom");
        if (col->name == NULL || col->type == NULL || (dflt && col->dflt == NULL))
            return TN_NOMEM;
    }
    t->ncols = cols->n;
    return TN_OK;
}

static int parse_indexes(dump_reader *r, const jv *idx, arena *a, copy_table *t, char *err,
                         size_t errlen)
{
    if (idx == NULL)
        return TN_OK;
    if (idx->type != J_ARR)
        return bad(r, err, errlen, "\"indexes\" must be an array");
    t->idx = arena_calloc(a, (size_t)(idx->n + 1) * sizeof(copy_index));
    if (t->idx == NULL)
        return TN_NOMEM;
    for (int i = 0; i < idx->n; i++) {
        const jv *x = idx->kids[i];
        const jv *cols = jget(x, "columns");
        if (cols == NULL || cols->type != J_ARR || cols->n == 0)
            return bad(r, err, errlen, "an index needs a non-empty \"columns\" array");
        copy_index *ci = &t->idx[i];
        const char *name = jstr(x, "name");
        ci->name = name ? arena_strdup(a, name) : NULL;
        ci->unique = jbool(x, "unique");
        ci->cols = arena_calloc(a, (size_t)cols->n * sizeof(char *));
        if (ci->cols == NULL)
            return TN_NOMEM;
        for (int k = 0; k < cols->n; k++) {
            if (cols->kids[k]->type != J_STR)
                return bad(r, err, errlen, "index columns must be strings");
            if ((ci->cols[k] = arena_strdup(a, cols->kids[k]->s)) == NULL)
                return TN_NOMEM;
        }
        ci->ncols = cols->n;
    }
    t->nidx = idx->n;
    return TN_OK;
}

int dump_next_table(dump_reader *r, arena *a, copy_table **def, int64_t *rows, char *err,
                    size_t errlen)
{
    *def = NULL;
    if (r->cur != NULL && r->got != r->want) {
        return tn_errf(err, errlen, TN_INVALID,
                       "table %s: %lld of its %lld rows read", r->cur->name,
                       (long long)r->got, (long long)r->want);
    }
    r->cur = NULL;
    if (r->ended)
        return TN_DONE;
    size_t len;
    int rc = next_line(r, &len, err, errlen);
    if (rc == TN_DONE) {
        return tn_errf(err, errlen, TN_INVALID,
                       "the dump ends after line %ld without its end line: it was cut",
                       r->lineno);
    }
    if (rc != TN_OK)
        return rc;
    arena_reset(r->row);
    const char *why;
    const jv *v = jparse_line(r->row, r->line, len, &why);
    if (v == NULL)
        return bad(r, err, errlen, why);
    const char *end = jstr(v, "end");
    if (end != NULL) {
        int64_t nt = -1, nr = -1;
        if (strcmp(end, DUMP_FORMAT) != 0 || !jint(v, "tables", 0, INT32_MAX, &nt) ||
            !jint(v, "rows", 0, INT64_MAX, &nr))
            return bad(r, err, errlen, "a bad end line");
        if (nt != r->tables || nt != r->h.ntables || nr != r->total) {
            return tn_errf(err, errlen, TN_INVALID,
                           "dump line %ld: the end line counts %lld tables and %lld rows, "
                           "the dump holds %d and %lld", r->lineno, (long long)nt,
                           (long long)nr, r->tables, (long long)r->total);
        }
        /* Nothing may follow. */
        rc = next_line(r, &len, err, errlen);
        if (rc == TN_OK)
            return bad(r, err, errlen, "text after the end line");
        if (rc != TN_DONE)
            return rc;
        r->ended = true;
        return TN_DONE;
    }
    const char *name = jstr(v, "table");
    if (name == NULL)
        return bad(r, err, errlen, "a table line ({\"table\": ...}) expected");
    if (r->tables >= r->h.ntables || strcmp(name, r->h.tables[r->tables]) != 0) {
        return tn_errf(err, errlen, TN_INVALID,
                       "dump line %ld: table '%.80s' is not the next one the header lists",
                       r->lineno, name);
    }
    int64_t n = 0;
    if (!jint(v, "rows", 0, INT64_MAX, &n))
        return bad(r, err, errlen, "a table needs its \"rows\" count");
    copy_table *t = arena_calloc(a, sizeof(*t));
    if (t == NULL)
        return TN_NOMEM;
    const char *backend = jstr(v, "backend");
    t->name = arena_strdup(a, name);
    t->backend = arena_strdup(a, backend && strcmp(backend, "postgres") == 0 ? "postgres"
                                                                             : "sqlite");
    if (t->name == NULL || t->backend == NULL)
        return TN_NOMEM;
    rc = parse_columns(r, jget(v, "columns"), a, t, err, errlen);
    if (rc == TN_OK)
        rc = parse_indexes(r, jget(v, "indexes"), a, t, err, errlen);
    if (rc == TN_NOMEM)
        rc = tn_errf(err, errlen, rc, "out of memory");
    if (rc != TN_OK)
        return rc;
    if (t->ncols > r->valcap) {
        const char **nv = realloc(r->vals, (size_t)t->ncols * sizeof(*nv));
        if (nv == NULL) {
            return tn_errf(err, errlen, TN_NOMEM, "out of memory");
        }
        r->vals = nv;
        r->valcap = t->ncols;
    }
    r->cur = t;
    r->want = n;
    r->got = 0;
    r->tables++;
    *def = t;
    *rows = n;
    return TN_OK;
}

int dump_next_row(dump_reader *r, const char *const **vals, char *err, size_t errlen)
{
    if (r->cur == NULL) {
        return tn_errf(err, errlen, TN_INVALID, "no table is being read");
    }
    if (r->got == r->want)
        return TN_DONE;
    size_t len;
    int rc = next_line(r, &len, err, errlen);
    if (rc == TN_DONE) {
        return tn_errf(err, errlen, TN_INVALID,
                       "the dump ends in table %s after %lld of its %lld rows: it was cut",
                       r->cur->name, (long long)r->got, (long long)r->want);
    }
    if (rc != TN_OK)
        return rc;
    arena_reset(r->row);
    const char *why;
    const jv *v = jparse_line(r->row, r->line, len, &why);
    if (v == NULL)
        return bad(r, err, errlen, why);
    if (v->type == J_OBJ) {
        return tn_errf(err, errlen, TN_INVALID,
                       "dump line %ld: table %s has %lld of its %lld rows, then this line: "
                       "the dump was cut or edited", r->lineno, r->cur->name,
                       (long long)r->got, (long long)r->want);
    }
    if (v->type != J_ARR || v->n != r->cur->ncols) {
        return tn_errf(err, errlen, TN_INVALID,
                       "dump line %ld: a row of %s must be an array of %d values", r->lineno,
                       r->cur->name, r->cur->ncols);
    }
    for (int i = 0; i < v->n; i++) {
        const jv *x = v->kids[i];
        if (x->type != J_STR && x->type != J_NULL)
            return bad(r, err, errlen, "row values must be strings or null");
        r->vals[i] = x->type == J_STR ? x->s : NULL;
    }
    r->got++;
    r->total++;
    *vals = r->vals;
    return TN_OK;
}

void dump_close(dump_reader *r)
{
    if (r == NULL)
        return;
    free(r->line);
    free(r->vals);
    arena_destroy(r->hdr);
    arena_destroy(r->row);
    free(r);
}
