/*
 * sqltext.c — the data app's pure text helpers: the type map, names, identifier quoting,
 * DEFAULT literals, the internal-object scanner of POST /query, timestamps, FTS5 terms.
 *
 * Owns: the rules for what a name, a literal and a type may be (README: the type map and
 * the limits). Pure: no request, no database; memory from the caller's rest_mem.
 *
 * Must not: call the host (tn_*), so that tests/unit links it alone; put a value from input
 * into SQL text except through dt_default_literal (a DEFAULT cannot be a parameter).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "data.h"

/* ---- dt_str ------------------------------------------------------------------------------ */

void dt_str_init(dt_str *b, const rest_mem *m)
{
    memset(b, 0, sizeof(*b));
    b->m = m;
}

static bool dt_str_reserve(dt_str *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t ncap = b->cap ? b->cap * 2 : 128;
    while (ncap < b->len + more + 1)
        ncap *= 2;
    char *ns = b->m->alloc(b->m->ctx, ncap);
    if (ns == NULL) {
        b->oom = true;
        return false;
    }
    if (b->len > 0)
        memcpy(ns, b->s, b->len);
    b->s = ns;
    b->cap = ncap;
    return true;
}

void dt_str_addn(dt_str *b, const char *s, size_t n)
{
    if (!dt_str_reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void dt_str_add(dt_str *b, const char *s)
{
    dt_str_addn(b, s, strlen(s));
}

void dt_str_addc(dt_str *b, char c)
{
    dt_str_addn(b, &c, 1);
}

void dt_str_cut(dt_str *b, size_t len)
{
    if (b->s == NULL || len > b->len)
        return;
    b->len = len;
    b->s[len] = '\0';
}

const char *dt_str_get(dt_str *b)
{
    if (b->oom)
        return NULL;
    return b->s != NULL ? b->s : "";
}

/* ---- types -------------------------------------------------------------------------------- */

static const char *const type_names[DT_NTYPES] = {"text", "integer", "real", "boolean",
                                                  "timestamp", "json"};
/* SQLite's declared types keep the affinity the values need (BOOLEAN, TIMESTAMP and JSON are
 * NUMERIC: the app validates every value, and they read back as the API type by name). */
static const char *const sqlite_types[DT_NTYPES] = {"TEXT", "INTEGER", "REAL", "BOOLEAN",
                                                    "TIMESTAMP", "JSON"};
static const char *const pg_types[DT_NTYPES] = {"text", "bigint", "double precision",
                                                "boolean", "timestamptz", "jsonb"};

int dt_type_parse(const char *name)
{
    for (int i = 0; name != NULL && i < DT_NTYPES; i++)
        if (strcmp(name, type_names[i]) == 0)
            return i;
    return -1;
}

const char *dt_type_name(int type)
{
    return type >= 0 && type < DT_NTYPES ? type_names[type] : "text";
}

const char *dt_type_sql(int type, rest_dialect d)
{
    if (type < 0 || type >= DT_NTYPES)
        type = DT_TEXT;
    return d == REST_SQLITE ? sqlite_types[type] : pg_types[type];
}

static bool has_word(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s; s++)
        if (strncasecmp(s, w, n) == 0)
            return true;
    return false;
}

/* SQLite's own affinity rules (datatype3.html, in their order), then our names. */
int dt_type_from_sqlite(const char *decl)
{
    if (decl == NULL || decl[0] == '\0')
        return DT_TEXT;
    if (has_word(decl, "BOOL"))
        return DT_BOOLEAN;
    if (has_word(decl, "JSON"))
        return DT_JSON;
    if (has_word(decl, "INT"))
        return DT_INTEGER;
    if (has_word(decl, "CHAR") || has_word(decl, "CLOB") || has_word(decl, "TEXT"))
        return DT_TEXT;
    if (has_word(decl, "REAL") || has_word(decl, "FLOA") || has_word(decl, "DOUB") ||
        has_word(decl, "NUMERIC") || has_word(decl, "DECIMAL"))
        return DT_REAL;
    if (has_word(decl, "TIME") || has_word(decl, "DATE"))
        return DT_TIMESTAMP;
    return DT_TEXT;
}

int dt_type_from_pg(const char *t)
{
    if (t == NULL)
        return DT_TEXT;
    if (strcmp(t, "smallint") == 0 || strcmp(t, "integer") == 0 || strcmp(t, "bigint") == 0)
        return DT_INTEGER;
    if (strcmp(t, "real") == 0 || strcmp(t, "double precision") == 0 ||
        strcmp(t, "numeric") == 0)
        return DT_REAL;
    if (strcmp(t, "boolean") == 0)
        return DT_BOOLEAN;
    if (strncmp(t, "timestamp", 9) == 0 || strcmp(t, "date") == 0)
        return DT_TIMESTAMP;
    if (strcmp(t, "json") == 0 || strcmp(t, "jsonb") == 0)
        return DT_JSON;
    return DT_TEXT;
}

/* ---- names -------------------------------------------------------------------------------- */

bool dt_name_internal(const char *name)
{
    return name[0] == '_' || strncasecmp(name, "tenancy_", 8) == 0 ||
           strncasecmp(name, "sqlite_", 7) == 0;
}

static const char *const reserved[] = {"tables", "query", "changelog", "stats", "export",
                                       "import", "subscribe", "openapi.json", "rpc", NULL};

bool dt_name_reserved(const char *name)
{
    for (int i = 0; reserved[i] != NULL; i++)
        if (strcasecmp(name, reserved[i]) == 0)
            return true;
    return false;
}

bool dt_name_ok(const char *name)
{
    if (name == NULL || !isalpha((unsigned char)name[0]) || strlen(name) > DT_NAME_MAX)
        return false;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return false;
    return !dt_name_internal(name);
}

bool dt_table_name_ok(const char *name)
{
    return dt_name_ok(name) && !dt_name_reserved(name);
}

void dt_quote_ident(dt_str *b, const char *ident)
{
    dt_str_addc(b, '"');
    for (const char *p = ident; *p; p++) {
        if (*p == '"')
            dt_str_addc(b, '"');
        dt_str_addc(b, *p);
    }
    dt_str_addc(b, '"');
}

/* ---- DEFAULT literals --------------------------------------------------------------------- */

static void quote_string(dt_str *b, const char *s, size_t n)
{
    dt_str_addc(b, '\'');
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            dt_str_addc(b, '\'');
        dt_str_addc(b, s[i]);
    }
    dt_str_addc(b, '\'');
}

void dt_quote_literal(dt_str *b, const char *s)
{
    quote_string(b, s, strlen(s));
}

int dt_default_literal(dt_str *b, const json_t *v, int type, rest_dialect d)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_NULL:
        dt_str_add(b, "NULL");
        return TN_OK;
    case JSON_TRUE:
    case JSON_FALSE:
        if (type != DT_BOOLEAN && type != DT_JSON)
            return TN_INVALID;
        if (type == DT_JSON)
            dt_str_add(b, json_is_true(v) ? "'true'" : "'false'");
        else if (d == REST_SQLITE)
            dt_str_add(b, json_is_true(v) ? "1" : "0");
        else
            dt_str_add(b, json_is_true(v) ? "TRUE" : "FALSE");
        return TN_OK;
    case JSON_INTEGER:
    case JSON_REAL:
        if (type == DT_INTEGER && !json_is_integer(v))
            return TN_INVALID;
        if (type != DT_INTEGER && type != DT_REAL && type != DT_JSON)
            return TN_INVALID;
        if (json_is_integer(v))
            snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else
            snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        /* A number is written as it is: our own formatting, no input text. A JSON column's
         * default is the number's JSON text, a string literal. */
        if (type == DT_JSON)
            quote_string(b, num, strlen(num));
        else
            dt_str_add(b, num);
        return TN_OK;
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (memchr(s, '\0', n) != NULL)
            return TN_INVALID;
        if (type == DT_INTEGER || type == DT_REAL || type == DT_BOOLEAN || type == DT_JSON)
            return TN_INVALID;
        if (type == DT_TIMESTAMP && !dt_timestamp_ok(s))
            return TN_INVALID;
        quote_string(b, s, n);
        return TN_OK;
    }
    default:
        return TN_INVALID;
    }
}

/* ---- the internal-object scanner ---------------------------------------------------------- */

/* Skip a '...' literal or a comment at *p; true when it was one. */
static bool skip_noise(const char **pp)
{
    const char *p = *pp;
    if (p[0] == '\'') {
        for (p++; *p; p++)
            if (*p == '\'' && p[1] != '\'')
                break;
            else if (*p == '\'')
                p++;
        *pp = *p ? p + 1 : p;
        return true;
    }
    if (p[0] == '-' && p[1] == '-') {
        while (*p && *p != '\n')
            p++;
        *pp = p;
        return true;
    }
    if (p[0] == '/' && p[1] == '*') {
        const char *e = strstr(p + 2, "*/");
        *pp = e ? e + 2 : p + strlen(p);
        return true;
    }
    return false;
}

/* Read a word or a quoted identifier at *pp into request memory. */
static const char *read_word(const rest_mem *m, const char **pp)
{
    const char *p = *pp;
    dt_str w;
    dt_str_init(&w, m);
    if (*p == '"' || *p == '`' || *p == '[') {
        char close = *p == '[' ? ']' : *p;
        for (p++; *p; p++) {
            if (*p == close && p[1] == close && close != ']') {
                dt_str_addc(&w, close);
                p++;
            } else if (*p == close) {
                p++;
                break;
            } else {
                dt_str_addc(&w, *p);
            }
        }
    } else {
        while (*p && (isalnum((unsigned char)*p) || *p == '_' || *p == '$'))
            dt_str_addc(&w, *p++);
    }
    *pp = p;
    return dt_str_get(&w);
}

const char *dt_scan_internal(const rest_mem *m, const char *sql)
{
    const char *p = sql;
    while (*p) {
        if (skip_noise(&p))
            continue;
        bool start = *p == '"' || *p == '`' || *p == '[' || isalpha((unsigned char)*p) ||
                     *p == '_';
        if (!start) {
            p++;
            continue;
        }
        const char *w = read_word(m, &p);
        if (w == NULL)
            return "";   /* out of memory: refuse rather than let through */
        if (w[0] != '\0' && dt_name_internal(w))
            return w;
    }
    return NULL;
}

/* ---- timestamps ------------------------------------------------------------------------- */

static bool digits(const char **pp, int n)
{
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)(*pp)[i]))
            return false;
    *pp += n;
    return true;
}

static bool lit(const char **pp, char c)
{
    if (**pp != c)
        return false;
    (*pp)++;
    return true;
}

bool dt_timestamp_ok(const char *s)
{
    const char *p = s;
    if (!digits(&p, 4) || !lit(&p, '-') || !digits(&p, 2) || !lit(&p, '-') || !digits(&p, 2))
        return false;
    if (*p == '\0')
        return true;
    if (*p != 'T' && *p != ' ')
        return false;
    p++;
    if (!digits(&p, 2) || !lit(&p, ':') || !digits(&p, 2))
        return false;
    if (lit(&p, ':') && !digits(&p, 2))
        return false;
    if (lit(&p, '.') && !digits(&p, 1))
        return false;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '\0' || (p[0] == 'Z' && p[1] == '\0'))
        return true;
    if (*p != '+' && *p != '-')
        return false;
    p++;
    if (!digits(&p, 2))
        return false;
    bool colon = lit(&p, ':');
    if (colon || *p != '\0')
        return digits(&p, 2) && *p == '\0';
    return true;
}

/* ---- FTS5 terms ------------------------------------------------------------------------- */

const char *dt_fts5_terms(const rest_mem *m, const char *terms)
{
    dt_str b;
    dt_str_init(&b, m);
    bool any = false;
    const char *p = terms;
    while (*p) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            break;
        if (any)
            dt_str_addc(&b, ' ');
        dt_str_addc(&b, '"');
        for (; *p && !isspace((unsigned char)*p); p++) {
            if (*p == '"')
                dt_str_addc(&b, '"');
            dt_str_addc(&b, *p);
        }
        dt_str_addc(&b, '"');
        any = true;
    }
    return any ? dt_str_get(&b) : NULL;
}
