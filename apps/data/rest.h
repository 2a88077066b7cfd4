/*
 * rest.h — PostgREST's request grammar, read into a tree and written back as SQL.
 *
 * The data app (apps/data) answers PostgREST's URLs: `GET /todos?select=id,title&done=is.false
 * &or=(prio.gt.2,title.ilike.*urgent*)&order=prio.desc.nullslast&limit=20`, the `Prefer` and
 * `Range` headers, `on_conflict=`. This module reads those into a rest_query and writes the
 * SQL fragments (WHERE, ORDER BY, LIMIT/OFFSET) with every value as a $N parameter and every
 * identifier checked by the caller's catalog callback, then quoted.
 *
 * It knows no request, no database and no JSON: it is pure, so that its unit tests and its
 * fuzz target drive it directly. Memory comes from the caller's allocator (the request's
 * arena in the app); nothing here frees, and nothing outlives that allocator.
 *
 * Errors: every function returns a tn_rc (TN_OK, TN_INVALID for input the grammar refuses,
 * TN_NOTFOUND for an identifier the catalog does not know, TN_TOOBIG over a limit, TN_NOMEM)
 * and fills a rest_err with the HTTP status, a stable code, a message and where it applies.
 */
#ifndef TENANCY_APPS_DATA_REST_H
#define TENANCY_APPS_DATA_REST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenancy.h"

/* The caller's allocator: returns n bytes aligned for any type, or NULL. */
typedef void *(*rest_alloc_fn)(void *ctx, size_t n);

typedef struct rest_mem {
    rest_alloc_fn alloc;
    void *ctx;
} rest_mem;

/* Limits that keep one request's tree small (refused with TN_TOOBIG, 400). */
#define REST_MAX_CONDS 64     /* leaves and groups in all filters together */
#define REST_MAX_DEPTH 8      /* nesting of or=(...)/and=(...) */
#define REST_MAX_IN 1000      /* values in one in.(...) */
#define REST_MAX_SELECT 128   /* columns in select= */
#define REST_MAX_ORDER 16     /* terms in order= */

/* What went wrong, for the JSON error body: {"code", "message", "details": where}. */
typedef struct rest_err {
    int status;             /* 400, 404, 406, 416 ... */
    const char *code;       /* stable and documented: "bad_filter", "unknown_column", ... */
    char message[256];
    char where[128];        /* the query parameter or header, and the byte offset in it:
                               "or=(a.eq.1,b.zz.2) at 13" (a long one cut with "...") */
    size_t at;              /* that offset: in the decoded "name=value" of a parameter, in
                               the value of a header */
} rest_err;

typedef enum rest_op {
    REST_EQ, REST_NEQ, REST_GT, REST_GTE, REST_LT, REST_LTE,
    REST_LIKE, REST_ILIKE,   /* PostgREST writes '*' for SQL's '%' */
    REST_IN,                 /* in.(a,b,"c,d") */
    REST_IS                  /* is.null, is.true, is.false, is.unknown */
} rest_op;

typedef enum rest_is { REST_IS_NULL, REST_IS_TRUE, REST_IS_FALSE, REST_IS_UNKNOWN } rest_is;

typedef enum rest_kind { REST_LEAF, REST_AND, REST_OR } rest_kind;

typedef struct rest_cond {
    rest_kind kind;
    bool negate;                   /* not.eq.1, not.or=(...) */
    /* REST_LEAF */
    const char *column;
    rest_op op;
    const char *value;             /* decoded, '*' already turned into '%' for (i)like */
    rest_is is;                    /* REST_IS */
    int nvalues;                   /* REST_IN */
    const char **values;
    /* REST_AND / REST_OR */
    int nkids;
    struct rest_cond **kids;
    /* where it was read, for errors found later (unknown_column): the decoded parameter
       "name=value" and the offset of the column in it */
    const char *param;
    size_t at;
} rest_cond;

typedef enum rest_nulls { REST_NULLS_DEFAULT, REST_NULLS_FIRST, REST_NULLS_LAST } rest_nulls;

typedef struct rest_order {
    const char *column;
    bool desc;
    rest_nulls nulls;
    const char *param;             /* as in rest_cond */
    size_t at;
} rest_order;

typedef struct rest_select {
    const char *column;            /* "*" for every column */
    const char *alias;             /* alias:column, or NULL */
    const char *param;             /* as in rest_cond */
    size_t at;
} rest_select;

/* Prefer: header (RFC 7240 list, PostgREST's preferences). */
typedef enum rest_return { REST_RETURN_MINIMAL, REST_RETURN_REPRESENTATION,
                           REST_RETURN_HEADERS_ONLY } rest_return;
typedef enum rest_count { REST_COUNT_NONE, REST_COUNT_EXACT, REST_COUNT_PLANNED,
                          REST_COUNT_ESTIMATED } rest_count;
typedef enum rest_resolution { REST_RES_NONE, REST_RES_MERGE, REST_RES_IGNORE } rest_resolution;

typedef struct rest_prefer {
    rest_return ret;               /* default: minimal */
    bool ret_given;
    rest_count count;
    rest_resolution resolution;
    bool missing_default;          /* missing=default */
    bool tx_rollback;              /* tx=rollback */
    bool strict;                   /* handling=strict */
} rest_prefer;

/* A whole request's reading of the query string and headers. */
typedef struct rest_query {
    int nselect;                   /* 0: select everything */
    rest_select *select;
    rest_cond *where;              /* AND of every filter parameter; NULL when none */
    int norder;
    rest_order *order;
    int64_t limit;                 /* -1: none */
    int64_t offset;                /* 0 when none */
    const char *search;            /* search=: full-text terms, or NULL */
    const char *on_conflict;       /* on_conflict=a,b (comma list, unchecked until SQL) */
    const char *columns;           /* columns=a,b (insert: which keys to take) */
    bool all;                      /* all=true: PATCH/DELETE without a filter (the app's) */
    rest_prefer prefer;
} rest_query;

/* Read a query string (raw, still percent-encoded; may be NULL or "") into *q. Parameters
 * that are not reserved words (select, order, limit, offset, or, and, not.or, not.and,
 * search, on_conflict, columns, all) are filters: `column=op.value`. *q is reset first
 * (limit -1, offset 0, Prefer's defaults). TN_OK, or TN_INVALID, TN_TOOBIG (400) or
 * TN_NOMEM (500) with *e filled; on failure *q is partly filled and must not be used. */
int rest_parse_query(const rest_mem *m, const char *qs, rest_query *q, rest_err *e);

/* Read the Prefer header (NULL: none) into q->prefer. Unknown preferences are ignored, as
 * RFC 7240 says (PostgREST does too unless handling=strict, which refuses them: 400). */
int rest_parse_prefer(const char *header, rest_prefer *p, rest_err *e);

/* Read a Range header's items ("0-9", "10-"; a "items=" unit is accepted) into q's
 * limit/offset, combined with limit= and offset= as PostgREST does: the rows kept are the
 * intersection of the two windows (limit 0 when they do not meet). Call it once, after
 * rest_parse_query. NULL: nothing. TN_OK, TN_INVALID (416 "bad_range" for an unreadable
 * header; "range_not_satisfiable" is the caller's, after counting). */
int rest_parse_range(const char *header, rest_query *q, rest_err *e);

/* ---- SQL -------------------------------------------------------------------------------- */

typedef enum rest_dialect { REST_SQLITE, REST_POSTGRES } rest_dialect;

/* The catalog, as the caller knows it: whether `column` is a column of the table the request
 * names (and, when it is, its type for casts: the caller's own code, passed back to it). */
typedef bool (*rest_column_fn)(void *ctx, const char *column, int *type);

/* A growing SQL text with its parameters. */
typedef struct rest_sql {
    const rest_mem *m;
    char *text;
    size_t len, cap;
    const char **params;
    int nparams, capparams;
    rest_dialect dialect;
} rest_sql;

void rest_sql_init(rest_sql *s, const rest_mem *m, rest_dialect d);
int rest_sql_add(rest_sql *s, const char *text);          /* raw text we wrote */
int rest_sql_ident(rest_sql *s, const char *ident);       /* "quoted""ident" */
int rest_sql_param(rest_sql *s, const char *value);       /* $N, value kept (NULL: SQL NULL) */
/* v in decimal, as "%lld" writes it, into buf (21 bytes or more); returns its length. */
size_t rest_int_text(char *buf, int64_t v);

/* " WHERE ..." for q->where (nothing when NULL), each column checked with col(): unknown →
 * TN_NOTFOUND, 400 "unknown_column" with the where of the parameter it came from. Filters
 * are joined by AND, groups parenthesised, a negation is NOT (...); eq is =, neq <>, in
 * IN ($1, $2) (an empty list FALSE), is IS NULL/TRUE/FALSE/UNKNOWN (IS NULL for unknown on
 * SQLite). On SQLite, like is case-sensitive as in PostgreSQL (written as GLOB with the
 * pattern translated, '\' escaping as LIKE's) and ilike is LIKE ... ESCAPE '\' (ASCII
 * case-insensitive). The rest_sql_* writers return TN_OK or TN_NOMEM besides. */
int rest_sql_where(rest_sql *s, const rest_query *q, rest_column_fn col, void *ctx,
                   rest_err *e);

/* " ORDER BY "c" ASC|DESC [NULLS FIRST|LAST], ..." and " LIMIT $n OFFSET $m" for q (nothing
 * when absent; on SQLite an offset alone is " LIMIT -1 OFFSET $m"). */
int rest_sql_order(rest_sql *s, const rest_query *q, rest_column_fn col, void *ctx,
                   rest_err *e);
int rest_sql_limit(rest_sql *s, const rest_query *q);

/* The select list: "*" or the checked, quoted columns with AS "alias". */
int rest_sql_select(rest_sql *s, const rest_query *q, rest_column_fn col, void *ctx,
                    rest_err *e);

#endif
