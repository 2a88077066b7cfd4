/*
 * check_rest.c — apps/data/rest.c: PostgREST's query string, Prefer and Range read into
 * a tree, and the SQL text and parameters written from it in both dialects. Every expected
 * SQL text, parameter list and error (status, code, where) is compared whole.
 *
 * rest.c is pure, so it is linked directly; memory comes from a test allocator that keeps
 * every block and frees them after each test (valgrind sees no leak).
 */
#include "apps/data/rest.h"
#include "tests/unit/check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the allocator and the catalog --------------------------------------------------------- */

static void **blocks;
static size_t nblocks, capblocks;

static void *t_alloc(void *ctx, size_t n)
{
    (void)ctx;
    if (nblocks == capblocks) {
        capblocks = capblocks ? capblocks * 2 : 64;
        blocks = realloc(blocks, capblocks * sizeof *blocks);
        ck_assert_ptr_nonnull(blocks);
    }
    void *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    blocks[nblocks++] = p;
    return p;
}

static void free_blocks(void)
{
    for (size_t i = 0; i < nblocks; i++)
        free(blocks[i]);
    free(blocks);
    blocks = NULL;
    nblocks = capblocks = 0;
}

static const rest_mem M = {t_alloc, NULL};

static bool catalog(void *ctx, const char *column, int *type)
{
    static const char *const cols[] = {"id", "a", "b", "c", "d", "name", "title",
                                       "done", "prio", "age", NULL};
    (void)ctx;
    *type = 0;
    for (int i = 0; cols[i]; i++)
        if (strcmp(cols[i], column) == 0)
            return true;
    return false;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static rest_query parse_ok(const char *qs)
{
    rest_query q;
    rest_err e;
    int rc = rest_parse_query(&M, qs, &q, &e);
    ck_assert_msg(rc == TN_OK, "%s: rc %d %s: %s (%s)", qs, rc, e.code, e.message, e.where);
    return q;
}

static void parse_err(const char *qs, int want_rc, const char *code, const char *where)
{
    rest_query q;
    rest_err e;
    int rc = rest_parse_query(&M, qs, &q, &e);
    ck_assert_msg(rc == want_rc, "%s: rc %d, want %d (%s)", qs, rc, want_rc, e.code);
    ck_assert_int_eq(e.status, 400);
    ck_assert_str_eq(e.code, code);
    ck_assert_str_eq(e.where, where);
    ck_assert_msg(e.message[0] != '\0', "%s: no message", qs);
}

/* The params of s joined by '|' ("NULL" for a NULL). */
static const char *params_of(const rest_sql *s)
{
    static char out[4096];
    out[0] = '\0';
    for (int i = 0; i < s->nparams; i++) {
        if (i)
            strcat(out, "|");
        strcat(out, s->params[i] ? s->params[i] : "NULL");
    }
    return out;
}

/* SELECT <select> FROM t <where> <order> <limit> for qs, and its params. */
static void sql_of(const char *qs, rest_dialect d, const char *want, const char *want_params)
{
    rest_query q = parse_ok(qs);
    rest_sql s;
    rest_err e;
    rest_sql_init(&s, &M, d);
    ck_assert_int_eq(rest_sql_add(&s, "SELECT "), TN_OK);
    ck_assert_int_eq(rest_sql_select(&s, &q, catalog, NULL, &e), TN_OK);
    ck_assert_int_eq(rest_sql_add(&s, " FROM t"), TN_OK);
    ck_assert_int_eq(rest_sql_where(&s, &q, catalog, NULL, &e), TN_OK);
    ck_assert_int_eq(rest_sql_order(&s, &q, catalog, NULL, &e), TN_OK);
    ck_assert_int_eq(rest_sql_limit(&s, &q), TN_OK);
    ck_assert_str_eq(s.text, want);
    ck_assert_uint_eq(s.len, strlen(want));
    ck_assert_str_eq(params_of(&s), want_params);
}

/* Both dialects, when the SQL is the same. */
static void sql_both(const char *qs, const char *want, const char *want_params)
{
    sql_of(qs, REST_POSTGRES, want, want_params);
    sql_of(qs, REST_SQLITE, want, want_params);
}

/* The WHERE alone. */
static void where_of(const char *qs, rest_dialect d, const char *want, const char *params)
{
    rest_query q = parse_ok(qs);
    rest_sql s;
    rest_err e;
    rest_sql_init(&s, &M, d);
    ck_assert_int_eq(rest_sql_where(&s, &q, catalog, NULL, &e), TN_OK);
    ck_assert_str_eq(s.text, want);
    ck_assert_str_eq(params_of(&s), params);
}

/* ---- operators ---------------------------------------------------------------------------- */

START_TEST(test_comparisons)
{
    static const struct {
        const char *qs, *sql;
    } t[] = {
        {"a=eq.1", " WHERE \"a\" = $1"},   {"a=neq.1", " WHERE \"a\" <> $1"},
        {"a=gt.1", " WHERE \"a\" > $1"},   {"a=gte.1", " WHERE \"a\" >= $1"},
        {"a=lt.1", " WHERE \"a\" < $1"},   {"a=lte.1", " WHERE \"a\" <= $1"},
        {"a=not.eq.1", " WHERE NOT (\"a\" = $1)"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        where_of(t[i].qs, REST_POSTGRES, t[i].sql, "1");
        where_of(t[i].qs, REST_SQLITE, t[i].sql, "1");
    }
    /* the value is everything after the operator's dot, dots and parens included */
    where_of("a=eq.x.y(z),w", REST_POSTGRES, " WHERE \"a\" = $1", "x.y(z),w");
    where_of("a=eq.", REST_POSTGRES, " WHERE \"a\" = $1", "");
    /* several filters on one column are ANDed */
    where_of("a=gt.1&a=lt.5&b=eq.x", REST_SQLITE, " WHERE \"a\" > $1 AND \"a\" < $2 AND \"b\" = $3",
             "1|5|x");
}
END_TEST

START_TEST(test_like)
{
    where_of("name=like.*a_b%3F*", REST_POSTGRES, " WHERE \"name\" LIKE $1", "%a_b?%");
    where_of("name=like.*a_b%3F*", REST_SQLITE, " WHERE \"name\" GLOB $1", "*a?b[?]*");
    /* literal brackets, and a backslash escaping a wildcard, as PostgreSQL's LIKE reads it */
    where_of("name=like.%5Bx%5D%5C_%5C%25", REST_SQLITE, " WHERE \"name\" GLOB $1", "[[]x]_%");
    where_of("name=like.a%5C", REST_SQLITE, " WHERE \"name\" GLOB $1", "a\\");
    where_of("name=ilike.*Urgent*", REST_POSTGRES, " WHERE \"name\" ILIKE $1", "%Urgent%");
    where_of("name=ilike.*Urgent*", REST_SQLITE, " WHERE \"name\" LIKE $1 ESCAPE '\\'",
             "%Urgent%");
    where_of("name=not.ilike.a*", REST_SQLITE, " WHERE NOT (\"name\" LIKE $1 ESCAPE '\\')", "a%");
}
END_TEST

START_TEST(test_in)
{
    const char *qs = "a=in.(1,2,\"c,d\",\"e\\\"f\\\\\",,x%20y)";
    where_of(qs, REST_POSTGRES, " WHERE \"a\" IN ($1, $2, $3, $4, $5, $6)",
             "1|2|c,d|e\"f\\||x y");
    rest_query q = parse_ok(qs);
    ck_assert_int_eq(q.where->kids[0]->nvalues, 6);
    ck_assert_str_eq(q.where->kids[0]->values[2], "c,d");
    where_of("a=not.in.(1)", REST_SQLITE, " WHERE NOT (\"a\" IN ($1))", "1");
    /* an empty list matches no row */
    where_of("a=in.()", REST_POSTGRES, " WHERE FALSE", "");
    where_of("a=not.in.()", REST_SQLITE, " WHERE NOT (FALSE)", "");
}
END_TEST

START_TEST(test_is)
{
    where_of("a=is.null", REST_POSTGRES, " WHERE \"a\" IS NULL", "");
    where_of("a=is.NULL", REST_SQLITE, " WHERE \"a\" IS NULL", "");
    where_of("a=is.True", REST_SQLITE, " WHERE \"a\" IS TRUE", "");
    where_of("a=is.false", REST_POSTGRES, " WHERE \"a\" IS FALSE", "");
    where_of("a=is.unknown", REST_POSTGRES, " WHERE \"a\" IS UNKNOWN", "");
    where_of("a=is.unknown", REST_SQLITE, " WHERE \"a\" IS NULL", "");
    where_of("a=not.is.null", REST_POSTGRES, " WHERE NOT (\"a\" IS NULL)", "");
    rest_query q = parse_ok("done=is.TRUE");
    ck_assert_int_eq(q.where->kids[0]->op, REST_IS);
    ck_assert_int_eq(q.where->kids[0]->is, REST_IS_TRUE);
}
END_TEST

/* ---- logic trees -------------------------------------------------------------------------- */

START_TEST(test_logic)
{
    where_of("or=(a.eq.1,b.gt.2,and(c.is.null,d.lt.3))&not.and=(a.eq.1,b.not.eq.2)",
             REST_POSTGRES,
             " WHERE (\"a\" = $1 OR \"b\" > $2 OR (\"c\" IS NULL AND \"d\" < $3))"
             " AND NOT (\"a\" = $4 AND NOT (\"b\" = $5))",
             "1|2|3|1|2");
    where_of("and=(a.eq.1,or(b.eq.2,not.or(c.eq.3,d.eq.4)))&not.or=(a.is.true)", REST_SQLITE,
             " WHERE (\"a\" = $1 AND (\"b\" = $2 OR NOT (\"c\" = $3 OR \"d\" = $4)))"
             " AND NOT (\"a\" IS TRUE)",
             "1|2|3|4");
    /* blanks between items */
    where_of("or=(a.eq.1,%20b.eq.2)", REST_SQLITE, " WHERE (\"a\" = $1 OR \"b\" = $2)", "1|2");
    rest_query q = parse_ok("or=(a.eq.1,b.eq.2)");
    ck_assert_int_eq(q.where->kind, REST_AND);
    ck_assert_int_eq(q.where->nkids, 1);
    ck_assert_int_eq(q.where->kids[0]->kind, REST_OR);
    ck_assert_int_eq(q.where->kids[0]->nkids, 2);
}
END_TEST

START_TEST(test_logic_quoting)
{
    where_of("or=(name.eq.\"a,b)\",name.in.(\"x,y\",z),name.like.*x*,name.eq.\"q\\\"\")",
             REST_POSTGRES,
             " WHERE (\"name\" = $1 OR \"name\" IN ($2, $3) OR \"name\" LIKE $4"
             " OR \"name\" = $5)",
             "a,b)|x,y|z|%x%|q\"");
    /* unquoted, a value stops at ',' or ')'; '(' and '.' are its own */
    where_of("or=(a.eq.f(x,b.eq.1.5)", REST_SQLITE, " WHERE (\"a\" = $1 OR \"b\" = $2)",
             "f(x|1.5");
    where_of("or=(a.eq.,b.is.NULL)", REST_SQLITE, " WHERE (\"a\" = $1 OR \"b\" IS NULL)", "");
}
END_TEST

/* ---- decoding ----------------------------------------------------------------------------- */

START_TEST(test_decoding)
{
    where_of("na%6De=eq.a+b%2Cc%26d%3d", REST_POSTGRES, " WHERE \"name\" = $1", "a b,c&d=");
    where_of("a=eq.%zz%4", REST_POSTGRES, " WHERE \"a\" = $1", "%zz%4");
    where_of("a=eq.%C3%A9", REST_POSTGRES, " WHERE \"a\" = $1", "\xC3\xA9");
    /* empty pieces are nothing; an encoded '&' does not split */
    where_of("&&a=eq.1&&", REST_POSTGRES, " WHERE \"a\" = $1", "1");
    rest_query q = parse_ok(NULL);
    ck_assert_ptr_null(q.where);
    ck_assert_int_eq(q.limit, -1);
    ck_assert_int_eq(q.offset, 0);
    q = parse_ok("");
    ck_assert_ptr_null(q.where);
    parse_err("a=eq.x%00y", TN_INVALID, "bad_value", "a=eq.x?y at 6");
}
END_TEST

/* ---- select, order, limit ----------------------------------------------------------------- */

START_TEST(test_select)
{
    sql_both("select=id,t:title,%20*%20", "SELECT \"id\", \"title\" AS \"t\", * FROM t", "");
    sql_both("", "SELECT * FROM t", "");
    rest_query q = parse_ok("select=id,t:title");
    ck_assert_int_eq(q.nselect, 2);
    ck_assert_str_eq(q.select[1].column, "title");
    ck_assert_str_eq(q.select[1].alias, "t");
    ck_assert_ptr_null(q.select[0].alias);
    parse_err("select=a,items(b)", TN_INVALID, "unsupported", "select=a,items(b) at 14");
    parse_err("select=a::text", TN_INVALID, "unsupported", "select=a::text at 8");
    parse_err("select=j->k", TN_INVALID, "unsupported", "select=j->k at 8");
    parse_err("select=...x", TN_INVALID, "unsupported", "select=...x at 7");
    parse_err("select=", TN_INVALID, "bad_select", "select= at 7");
    parse_err("select=a,,b", TN_INVALID, "bad_select", "select=a,,b at 9");
    parse_err("select=a:*", TN_INVALID, "bad_select", "select=a:* at 7");
    parse_err("select=a,1b", TN_INVALID, "bad_column_name", "select=a,1b at 9");
    parse_err("select=:a", TN_INVALID, "bad_column_name", "select=:a at 7");
    parse_err("select=a&select=b", TN_INVALID, "bad_select", "select=b at 0");
}
END_TEST

START_TEST(test_order)
{
    sql_both("order=prio.desc.nullslast,name,id.asc,age.nullsfirst",
             "SELECT * FROM t ORDER BY \"prio\" DESC NULLS LAST, \"name\" ASC, \"id\" ASC,"
             " \"age\" ASC NULLS FIRST",
             "");
    rest_query q = parse_ok("order=a.DESC");
    ck_assert_int_eq(q.norder, 1);
    ck_assert(q.order[0].desc);
    ck_assert_int_eq(q.order[0].nulls, REST_NULLS_DEFAULT);
    parse_err("order=a.up", TN_INVALID, "bad_order", "order=a.up at 8");
    parse_err("order=a.nullsfirst.desc", TN_INVALID, "bad_order", "order=a.nullsfirst.desc at 19");
    parse_err("order=a.asc.desc", TN_INVALID, "bad_order", "order=a.asc.desc at 12");
    parse_err("order=a.", TN_INVALID, "bad_order", "order=a. at 8");
    parse_err("order=a,", TN_INVALID, "bad_order", "order=a, at 8");
    parse_err("order=", TN_INVALID, "bad_order", "order= at 6");
    parse_err("order=a-b", TN_INVALID, "bad_column_name", "order=a-b at 6");
}
END_TEST

START_TEST(test_limit)
{
    sql_both("limit=20", "SELECT * FROM t LIMIT $1", "20");
    sql_both("limit=20&offset=40", "SELECT * FROM t LIMIT $1 OFFSET $2", "20|40");
    sql_both("limit=0", "SELECT * FROM t LIMIT $1", "0");
    sql_both("offset=0", "SELECT * FROM t", "");
    sql_of("offset=5", REST_POSTGRES, "SELECT * FROM t OFFSET $1", "5");
    sql_of("offset=5", REST_SQLITE, "SELECT * FROM t LIMIT -1 OFFSET $1", "5");
    rest_query q = parse_ok("limit=9223372036854775807");
    ck_assert(q.limit == INT64_MAX);
    parse_err("limit=9223372036854775808", TN_INVALID, "bad_limit",
              "limit=9223372036854775808 at 6");
    parse_err("limit=-1", TN_INVALID, "bad_limit", "limit=-1 at 6");
    parse_err("limit=", TN_INVALID, "bad_limit", "limit= at 6");
    parse_err("offset=1x", TN_INVALID, "bad_limit", "offset=1x at 7");
    parse_err("limit=1&limit=2", TN_INVALID, "bad_limit", "limit=2 at 0");
}
END_TEST

START_TEST(test_other_params)
{
    rest_query q = parse_ok("search=big+red&on_conflict=a,b&columns=id,%20name&all=true");
    ck_assert_str_eq(q.search, "big red");
    ck_assert_str_eq(q.on_conflict, "a,b");
    ck_assert_str_eq(q.columns, "id, name");
    ck_assert(q.all);
    ck_assert_ptr_null(q.where);
    q = parse_ok("all=FALSE");
    ck_assert(!q.all);
    parse_err("all=yes", TN_INVALID, "bad_value", "all=yes at 4");
    parse_err("on_conflict=a,b-c", TN_INVALID, "bad_column_name", "on_conflict=a,b-c at 14");
    /* names quoted as postgrest-js writes them */
    rest_query qq = parse_ok("columns=%22title%22,%22done%22&on_conflict=%22title%22");
    ck_assert_str_eq(qq.columns, "\"title\",\"done\"");
    ck_assert_str_eq(qq.on_conflict, "\"title\"");
    parse_err("columns=%22a-b%22", TN_INVALID, "bad_column_name", "columns=\"a-b\" at 9");
    parse_err("columns=", TN_INVALID, "bad_column_name", "columns= at 8");
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------- */

START_TEST(test_filter_errors)
{
    parse_err("a=zz.1", TN_INVALID, "unknown_operator", "a=zz.1 at 2");
    parse_err("a=fts.x", TN_INVALID, "unknown_operator", "a=fts.x at 2");
    parse_err("a=not.zz.1", TN_INVALID, "unknown_operator", "a=not.zz.1 at 6");
    parse_err("or=(a.eq.1,b.zz.2)", TN_INVALID, "unknown_operator", "or=(a.eq.1,b.zz.2) at 13");
    parse_err("a=eq", TN_INVALID, "bad_filter", "a=eq at 2");
    parse_err("a=", TN_INVALID, "bad_filter", "a= at 2");
    parse_err("a", TN_INVALID, "bad_filter", "a at 1");
    parse_err("limit", TN_INVALID, "bad_limit", "limit at 5");
    parse_err("a=eq(any).1", TN_INVALID, "bad_filter", "a=eq(any).1 at 2");
    parse_err("1a=eq.1", TN_INVALID, "bad_column_name", "1a=eq.1 at 0");
    parse_err("=eq.1", TN_INVALID, "bad_column_name", "=eq.1 at 0");
    parse_err("t.a=eq.1", TN_INVALID, "bad_column_name", "t.a=eq.1 at 0");
    parse_err("%01=eq.1", TN_INVALID, "bad_column_name", "?=eq.1 at 0");
    parse_err("a=in.1,2", TN_INVALID, "bad_value", "a=in.1,2 at 5");
    parse_err("a=in.(1,2", TN_INVALID, "bad_value", "a=in.(1,2 at 9");
    parse_err("a=in.(1)x", TN_INVALID, "bad_value", "a=in.(1)x at 8");
    parse_err("a=in.(\"x", TN_INVALID, "bad_value", "a=in.(\"x at 6");
    parse_err("a=in.(\"x\"y)", TN_INVALID, "bad_value", "a=in.(\"x\"y) at 9");
    parse_err("a=is.maybe", TN_INVALID, "bad_value", "a=is.maybe at 5");
    parse_err("or=(a.eq.1", TN_INVALID, "bad_filter", "or=(a.eq.1 at 10");
    parse_err("or=()", TN_INVALID, "bad_filter", "or=() at 4");
    parse_err("or=(a.eq.1)x", TN_INVALID, "bad_filter", "or=(a.eq.1)x at 11");
    parse_err("or=a.eq.1", TN_INVALID, "bad_filter", "or=a.eq.1 at 3");
    parse_err("or=(a.eq.1,b)", TN_INVALID, "bad_filter", "or=(a.eq.1,b) at 11");
    parse_err("or=(a.eq.\"x\"y)", TN_INVALID, "bad_value", "or=(a.eq.\"x\"y) at 12");
    parse_err("or=(a.in.(1,2)x)", TN_INVALID, "bad_filter", "or=(a.in.(1,2)x) at 14");
    parse_err("or=(1.eq.1)", TN_INVALID, "bad_column_name", "or=(1.eq.1) at 4");
    parse_err("and=(a.eq.1,xor(b.eq.1))", TN_INVALID, "bad_column_name",
              "and=(a.eq.1,xor(b.eq.1)) at 12");
}
END_TEST

START_TEST(test_where_cut)
{
    char qs[400];
    memset(qs, 'v', sizeof qs);
    memcpy(qs, "a=zz.", 5);
    qs[sizeof qs - 1] = '\0';
    rest_query q;
    rest_err e;
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_INVALID);
    ck_assert_int_eq(e.at, 2);
    ck_assert_uint_lt(strlen(e.where), sizeof e.where);
    ck_assert_msg(strstr(e.where, "... at 2") != NULL, "%s", e.where);
    ck_assert(strncmp(e.where, "a=zz.vvv", 8) == 0);
}
END_TEST

START_TEST(test_unknown_column)
{
    static const struct {
        const char *qs, *where;
    } t[] = {
        {"zz=eq.1", "zz=eq.1 at 0"},
        {"a=eq.1&or=(b.eq.1,and(c.eq.2,zz.eq.3))", "or=(b.eq.1,and(c.eq.2,zz.eq.3)) at 22"},
        {"order=a,zz.desc", "order=a,zz.desc at 8"},
        {"select=id,x:zz", "select=id,x:zz at 12"},
        {"zz=in.()", "zz=in.() at 0"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rest_query q = parse_ok(t[i].qs);
        rest_sql s;
        rest_err e;
        rest_sql_init(&s, &M, REST_POSTGRES);
        int rc = rest_sql_select(&s, &q, catalog, NULL, &e);
        if (rc == TN_OK)
            rc = rest_sql_where(&s, &q, catalog, NULL, &e);
        if (rc == TN_OK)
            rc = rest_sql_order(&s, &q, catalog, NULL, &e);
        ck_assert_msg(rc == TN_NOTFOUND, "%s: rc %d", t[i].qs, rc);
        ck_assert_int_eq(e.status, 400);
        ck_assert_str_eq(e.code, "unknown_column");
        ck_assert_str_eq(e.where, t[i].where);
        ck_assert_str_eq(e.message, "no column 'zz' in this table");
    }
}
END_TEST

/* ---- limits ------------------------------------------------------------------------------- */

/* or=(a.eq.1,or(...)) nested to depth levels. */
static void nested(char *qs, int depth)
{
    strcpy(qs, "or=(");
    for (int i = 1; i < depth; i++)
        strcat(qs, "a.eq.1,or(");
    strcat(qs, "a.eq.1");
    for (int i = 0; i < depth; i++)
        strcat(qs, ")");
}

START_TEST(test_limits)
{
    char qs[20000];
    rest_query q;
    rest_err e;
    nested(qs, REST_MAX_DEPTH);
    parse_ok(qs);
    nested(qs, REST_MAX_DEPTH + 1);
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_TOOBIG);
    ck_assert_str_eq(e.code, "too_complex");
    ck_assert_int_eq(e.status, 400);
    ck_assert_int_eq(e.at, 4 + 10 * REST_MAX_DEPTH - 1);

    /* conditions: filters and groups together */
    qs[0] = '\0';
    for (int i = 0; i < REST_MAX_CONDS; i++)
        strcat(qs, i ? "&a=eq.1" : "a=eq.1");
    parse_ok(qs);
    strcat(qs, "&a=eq.2");
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_TOOBIG);
    ck_assert_str_eq(e.code, "too_complex");
    ck_assert_str_eq(e.where, "a=eq.2 at 0");
    strcpy(qs, "or=(");
    for (int i = 0; i < REST_MAX_CONDS; i++)
        strcat(qs, i ? ",a.eq.1" : "a.eq.1");
    strcat(qs, ")");
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_TOOBIG);   /* the group counts */

    strcpy(qs, "a=in.(");
    for (int i = 0; i < REST_MAX_IN; i++)
        strcat(qs, i ? ",1" : "1");
    strcat(qs, ")");
    q = parse_ok(qs);
    ck_assert_int_eq(q.where->kids[0]->nvalues, REST_MAX_IN);
    qs[strlen(qs) - 1] = '\0';
    strcat(qs, ",2)");
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_TOOBIG);
    ck_assert_str_eq(e.code, "too_complex");

    strcpy(qs, "select=");
    for (int i = 0; i < REST_MAX_SELECT; i++)
        strcat(qs, i ? ",a" : "a");
    parse_ok(qs);
    strcat(qs, ",b");
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_TOOBIG);
    ck_assert_str_eq(e.code, "too_complex");

    strcpy(qs, "order=");
    for (int i = 0; i < REST_MAX_ORDER; i++)
        strcat(qs, i ? ",a" : "a");
    parse_ok(qs);
    strcat(qs, ",b");
    ck_assert_int_eq(rest_parse_query(&M, qs, &q, &e), TN_TOOBIG);
    ck_assert_str_eq(e.code, "too_complex");
}
END_TEST

/* ---- Range -------------------------------------------------------------------------------- */

START_TEST(test_range)
{
    static const struct {
        const char *qs, *range;
        int64_t offset, limit;
    } t[] = {
        {"", NULL, 0, -1},
        {"", "0-9", 0, 10},
        {"", " items=10- ", 10, -1},
        {"", "ITEMS=5-5", 5, 1},
        {"limit=5&offset=10", "0-11", 10, 2},     /* the windows 10..14 and 0..11 */
        {"limit=20", "5-9", 5, 5},
        {"limit=20", "5-", 5, 15},
        {"offset=20", "0-9", 20, 0},              /* they do not meet */
        {"offset=3", "0-", 3, -1},
        {"limit=0", "0-9", 0, 0},
        {"limit=9223372036854775807&offset=9223372036854775807", "0-", INT64_MAX, -1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rest_query q = parse_ok(t[i].qs);
        rest_err e;
        ck_assert_int_eq(rest_parse_range(t[i].range, &q, &e), TN_OK);
        ck_assert_msg(q.offset == t[i].offset && q.limit == t[i].limit,
                      "%s / %s: offset %lld limit %lld", t[i].qs, t[i].range,
                      (long long)q.offset, (long long)q.limit);
    }
    sql_of("limit=5&offset=10", REST_SQLITE, "SELECT * FROM t LIMIT $1 OFFSET $2", "5|10");
}
END_TEST

START_TEST(test_range_errors)
{
    static const struct {
        const char *h, *where;
    } t[] = {
        {"9-0", "Range: 9-0 at 2"},
        {"abc", "Range: abc at 0"},
        {"-5", "Range: -5 at 0"},
        {"0-9,20-29", "Range: 0-9,20-29 at 2"},
        {"bytes=0-9", "Range: bytes=0-9 at 0"},
        {"", "Range:  at 0"},
        {"0-x", "Range: 0-x at 2"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rest_query q = parse_ok("");
        rest_err e;
        ck_assert_int_eq(rest_parse_range(t[i].h, &q, &e), TN_INVALID);
        ck_assert_int_eq(e.status, 416);
        ck_assert_str_eq(e.code, "bad_range");
        ck_assert_str_eq(e.where, t[i].where);
    }
}
END_TEST

/* ---- Prefer ------------------------------------------------------------------------------- */

static rest_prefer prefer_ok(const char *h)
{
    rest_prefer p;
    rest_err e;
    int rc = rest_parse_prefer(h, &p, &e);
    ck_assert_msg(rc == TN_OK, "%s: %s %s", h, e.code, e.where);
    return p;
}

START_TEST(test_prefer)
{
    rest_prefer p = prefer_ok(NULL);
    ck_assert_int_eq(p.ret, REST_RETURN_MINIMAL);
    ck_assert(!p.ret_given && !p.strict && !p.tx_rollback && !p.missing_default);
    ck_assert_int_eq(p.count, REST_COUNT_NONE);
    ck_assert_int_eq(p.resolution, REST_RES_NONE);

    p = prefer_ok("return=representation, count=exact");
    ck_assert_int_eq(p.ret, REST_RETURN_REPRESENTATION);
    ck_assert(p.ret_given);
    ck_assert_int_eq(p.count, REST_COUNT_EXACT);
    p = prefer_ok("  return = headers-only ,tx=rollback,,count=planned");
    ck_assert_int_eq(p.ret, REST_RETURN_HEADERS_ONLY);
    ck_assert(p.tx_rollback);
    ck_assert_int_eq(p.count, REST_COUNT_PLANNED);
    p = prefer_ok("resolution=merge-duplicates, missing=default, count=estimated");
    ck_assert_int_eq(p.resolution, REST_RES_MERGE);
    ck_assert(p.missing_default);
    ck_assert_int_eq(p.count, REST_COUNT_ESTIMATED);
    p = prefer_ok("resolution=\"ignore-duplicates\";x=1, tx=commit");
    ck_assert_int_eq(p.resolution, REST_RES_IGNORE);
    ck_assert(!p.tx_rollback);
    /* the first of a kind counts; unknown ones and bad values are ignored */
    p = prefer_ok("return=minimal, return=representation");
    ck_assert_int_eq(p.ret, REST_RETURN_MINIMAL);
    p = prefer_ok("foo=bar, return=bogus, count=exact, timezone=UTC");
    ck_assert_int_eq(p.ret, REST_RETURN_MINIMAL);
    ck_assert(!p.ret_given);
    ck_assert_int_eq(p.count, REST_COUNT_EXACT);
    p = prefer_ok("handling=lenient, foo");
    ck_assert(!p.strict);
    p = prefer_ok("return=representation, handling=strict");
    ck_assert(p.strict);
}
END_TEST

START_TEST(test_prefer_strict)
{
    static const struct {
        const char *h, *where;
    } t[] = {
        {"handling=strict, foo", "Prefer: handling=strict, foo at 17"},
        {"foo=1, handling=strict", "Prefer: foo=1, handling=strict at 0"},
        {"count=exact,handling=strict,return=bogus",
         "Prefer: count=exact,handling=strict,return=bogus at 28"},
        {"handling=strict, tx", "Prefer: handling=strict, tx at 17"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rest_prefer p;
        rest_err e;
        ck_assert_int_eq(rest_parse_prefer(t[i].h, &p, &e), TN_INVALID);
        ck_assert_int_eq(e.status, 400);
        ck_assert_str_eq(e.code, "bad_prefer");
        ck_assert_str_eq(e.where, t[i].where);
    }
}
END_TEST

/* ---- SQL writers -------------------------------------------------------------------------- */

START_TEST(test_sql_writers)
{
    rest_sql s;
    rest_sql_init(&s, &M, REST_SQLITE);
    ck_assert_str_eq(s.text, "");
    ck_assert_int_eq(rest_sql_ident(&s, "a\"b"), TN_OK);
    ck_assert_int_eq(rest_sql_add(&s, " = "), TN_OK);
    ck_assert_int_eq(rest_sql_param(&s, NULL), TN_OK);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(rest_sql_param(&s, "v"), TN_OK);
    ck_assert_int_eq(s.nparams, 41);
    ck_assert_ptr_null(s.params[0]);
    ck_assert(strncmp(s.text, "\"a\"\"b\" = $1$2$3", 15) == 0);
    ck_assert(strstr(s.text, "$41") != NULL);
    ck_assert_uint_eq(s.len, strlen(s.text));
}
END_TEST

START_TEST(test_full_queries)
{
    const char *qs = "select=id,title&done=is.false&or=(prio.gt.2,title.ilike.*urgent*)"
                     "&order=prio.desc.nullslast&limit=20";
    sql_of(qs, REST_POSTGRES,
           "SELECT \"id\", \"title\" FROM t WHERE \"done\" IS FALSE AND (\"prio\" > $1 OR"
           " \"title\" ILIKE $2) ORDER BY \"prio\" DESC NULLS LAST LIMIT $3",
           "2|%urgent%|20");
    sql_of(qs, REST_SQLITE,
           "SELECT \"id\", \"title\" FROM t WHERE \"done\" IS FALSE AND (\"prio\" > $1 OR"
           " \"title\" LIKE $2 ESCAPE '\\') ORDER BY \"prio\" DESC NULLS LAST LIMIT $3",
           "2|%urgent%|20");
    qs = "age=gte.18&name=like.J*&id=not.in.(1,2)&offset=10";
    sql_of(qs, REST_POSTGRES,
           "SELECT * FROM t WHERE \"age\" >= $1 AND \"name\" LIKE $2 AND NOT (\"id\" IN ($3, $4))"
           " OFFSET $5",
           "18|J%|1|2|10");
    sql_of(qs, REST_SQLITE,
           "SELECT * FROM t WHERE \"age\" >= $1 AND \"name\" GLOB $2 AND NOT (\"id\" IN ($3, $4))"
           " LIMIT -1 OFFSET $5",
           "18|J*|1|2|10");
}
END_TEST

static void teardown(void)
{
    free_blocks();
}

int main(void)
{
    Suite *s = suite_create("data_rest");
    TCase *tc = tcase_create("rest");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_comparisons);
    tcase_add_test(tc, test_like);
    tcase_add_test(tc, test_in);
    tcase_add_test(tc, test_is);
    tcase_add_test(tc, test_logic);
    tcase_add_test(tc, test_logic_quoting);
    tcase_add_test(tc, test_decoding);
    tcase_add_test(tc, test_select);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_limit);
    tcase_add_test(tc, test_other_params);
    tcase_add_test(tc, test_filter_errors);
    tcase_add_test(tc, test_where_cut);
    tcase_add_test(tc, test_unknown_column);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_range);
    tcase_add_test(tc, test_range_errors);
    tcase_add_test(tc, test_prefer);
    tcase_add_test(tc, test_prefer_strict);
    tcase_add_test(tc, test_sql_writers);
    tcase_add_test(tc, test_full_queries);
    suite_add_tcase(s, tc);
    Suite *all[] = {s};
    return run_suites(all, 1);
}
