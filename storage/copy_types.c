/*
 * copy_types.c — the copy's type names and defaults: a small grammar that takes a declared
 * type or a default apart and writes it back from the parts in the other dialect
 * (copy_type_for, copy_default_for), so nothing read from a catalog is pasted into SQL.
 *
 * Must not: run SQL, or let through a type or default outside the grammar.
 */
#include "core/first.h"
#include "storage/copy_int.h"
#include "core/rc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- type names ----------------------------------------------------------------------------
 * The grammar a type name must fit to be written into DDL: words ([A-Za-z_][A-Za-z0-9_]*)
 * separated by blanks, each optionally followed by one parenthesised list of one or two
 * (signed) numbers, and trailing "[]" pairs. Anything else (quotes, a schema-qualified
 * name, an expression) is refused. The result is rebuilt: lower-case, single spaces. */


bool copy_type_parse(const char *s, type_parts *tp)
{
    memset(tp, 0, sizeof(*tp));
    size_t bl = 0;
    const char *p = s;
    int words = 0;
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            break;
        if (tp->array > 0)
            return false;   /* nothing after [] */
        if (isalpha((unsigned char)*p) || *p == '_') {
            if (tp->args[0] != '\0')
                tp->args_inside = true;
            if (words > 0 && bl < sizeof(tp->base) - 1)
                tp->base[bl++] = ' ';
            while (isalnum((unsigned char)*p) || *p == '_') {
                if (bl >= sizeof(tp->base) - 1)
                    return false;
                tp->base[bl++] = (char)tolower((unsigned char)*p++);
            }
            words++;
        } else if (*p == '(' && words > 0 && tp->args[0] == '\0') {
            size_t al = 0;
            tp->args[al++] = '(';
            p++;
            int nums = 0;
            for (;;) {
                while (isspace((unsigned char)*p))
                    p++;
                if (*p == '+' || *p == '-')
                    tp->args[al++] = *p++;
                if (!isdigit((unsigned char)*p))
                    return false;
                while (isdigit((unsigned char)*p)) {
                    if (al >= sizeof(tp->args) - 4)
                        return false;
                    tp->args[al++] = *p++;
                }
                nums++;
                while (isspace((unsigned char)*p))
                    p++;
                if (*p == ',' && nums == 1) {
                    tp->args[al++] = ',';
                    p++;
                    continue;
                }
                if (*p != ')')
                    return false;
                p++;
                break;
            }
            tp->args[al++] = ')';
            tp->args[al] = '\0';
        } else if (p[0] == '[' && p[1] == ']' && words > 0) {
            tp->array++;
            p += 2;
        } else {
            return false;
        }
    }
    tp->base[bl] = '\0';
    return true;
}

static bool base_is(const type_parts *tp, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(tp->base, *names) == 0)
            return true;
    return false;
}

static bool base_has(const type_parts *tp, const char *part)
{
    return strstr(tp->base, part) != NULL;
}

/* PostgreSQL names a SQLite declared type keeps as it is (with its arguments). */
static const char *const pg_kept[] = {
    "smallint", "int2", "bigint", "int8", "numeric", "decimal", "boolean", "bool", "text",
    "varchar", "character varying", "char", "character", "date", "time", "timetz",
    "time with time zone", "time without time zone", "timestamp", "timestamptz",
    "timestamp with time zone", "timestamp without time zone", "interval", "json", "jsonb",
    "uuid", "bytea", "double precision", "float8", NULL};
static const char *const int_names[] = {"smallint", "integer", "bigint", "int2", "int4", "int8",
                                        NULL};

bool copy_type_is_int(const type_parts *tp)
{
    return base_is(tp, int_names) && tp->args[0] == '\0';
}

int copy_type_for(const copy_column *c, const char *src_backend, const char *dst_backend,
                  char *out, size_t outlen)
{
    type_parts tp;
    const char *decl = c->type ? c->type : "";
    if (!copy_type_parse(decl, &tp))
        return TN_INVALID;
    bool to_pg = strcmp(dst_backend, "postgres") == 0;
    bool from_pg = strcmp(src_backend, "postgres") == 0;
    int n;
    if (!to_pg) {
        /* SQLite keeps any declared name; its grammar wants the arguments last and knows
         * no arrays (an array keeps its text form). */
        if (tp.base[0] == '\0')
            n = snprintf(out, outlen, "%s", "");
        else if (tp.array > 0)
            n = snprintf(out, outlen, "text");
        else
            n = snprintf(out, outlen, "%s%s", tp.base, tp.args_inside ? "" : tp.args);
    } else if (from_pg) {
        /* Same backend: the catalog's own name, rebuilt. The arguments go where they were:
         * "timestamp(3) with time zone" has them inside. */
        if (tp.args_inside) {
            const char *sp = strchr(tp.base, ' ');
            n = snprintf(out, outlen, "%.*s%s%s", (int)(sp - tp.base), tp.base, tp.args, sp);
        } else {
            n = snprintf(out, outlen, "%s%s", tp.base, tp.args);
        }
        for (int i = 0; i < tp.array && n >= 0 && (size_t)n + 2 < outlen; i++)
            n += snprintf(out + n, outlen - (size_t)n, "[]");
    } else {
        /* SQLite to PostgreSQL: a PostgreSQL name is kept; otherwise SQLite's affinity
         * rules (https://sqlite.org/datatype3.html, 3.1) pick the type. Integers are 64-bit
         * in SQLite, so every integer name that is not explicitly small becomes bigint; REAL
         * is 8 bytes in SQLite, so double precision. */
        const char *t;
        bool args = false;
        if (tp.array > 0 || tp.args_inside)
            t = "text";
        else if (strcmp(tp.base, "smallint") == 0 || strcmp(tp.base, "int2") == 0)
            t = tp.base;
        else if (base_is(&tp, pg_kept)) {
            t = tp.base;
            args = true;
        } else if (strcmp(tp.base, "datetime") == 0)
            t = "timestamp";
        else if (strcmp(tp.base, "blob") == 0)
            t = "bytea";
        else if (base_has(&tp, "int"))
            t = "bigint";
        else if (base_has(&tp, "char") || base_has(&tp, "clob") || base_has(&tp, "text"))
            t = "text";
        else if (base_has(&tp, "real") || base_has(&tp, "floa") || base_has(&tp, "doub"))
            t = "double precision";
        else
            t = "text";   /* no type, BLOB-ish or NUMERIC affinity: SQLite let it hold anything */
        n = snprintf(out, outlen, "%s%s", t, args ? tp.args : "");
    }
    return n < 0 || (size_t)n >= outlen ? TN_INVALID : TN_OK;
}

/* ---- defaults ------------------------------------------------------------------------------
 * A default is carried when it is a literal (a number, a string, NULL, true/false) or the
 * current time; anything else (a function call, an expression) is dropped with a note. */

static bool is_number(const char *s)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+')
            p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == '\0';
}

/* Length of a '...' literal ('' inside) at s, or 0. */
static size_t quoted_len(const char *s)
{
    if (*s != '\'')
        return 0;
    for (size_t i = 1; s[i]; i++)
        if (s[i] == '\'') {
            if (s[i + 1] == '\'')
                i++;
            else
                return i + 1;
        }
    return 0;
}

static bool ieq(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

/* raw: the default as the source shows it. out: the default for dst, or "" for none.
 * Returns false when it is dropped (out ""). */
bool copy_default_for(const char *raw, bool boolean, bool to_pg, char *out, size_t outlen)
{
    out[0] = '\0';
    char s[512];
    if (raw == NULL)
        return true;
    size_t n = strlen(raw);
    if (n >= sizeof(s))
        return false;
    /* Trim blanks and outer parentheses: "(0)", " ( 'x' ) ". */
    const char *a = raw, *e = raw + n;
    for (;;) {
        while (a < e && isspace((unsigned char)*a))
            a++;
        while (e > a && isspace((unsigned char)e[-1]))
            e--;
        if (e - a >= 2 && *a == '(' && e[-1] == ')') {
            a++;
            e--;
            continue;
        }
        break;
    }
    memcpy(s, a, (size_t)(e - a));
    s[e - a] = '\0';
    /* PostgreSQL writes casts: 'x'::text, '-1'::integer, 0::bigint. */
    char *cast;
    while ((cast = strstr(s, "::")) != NULL) {
        type_parts tp;
        if (!copy_type_parse(cast + 2, &tp))
            return false;
        *cast = '\0';
    }
    if (s[0] == '\0' || ieq(s, "null"))
        return true;
    if (is_number(s)) {
        if (boolean && to_pg && (strcmp(s, "0") == 0 || strcmp(s, "1") == 0))
            snprintf(out, outlen, "%s", s[0] == '1' ? "true" : "false");
        else
            snprintf(out, outlen, "%s", s);
        return true;
    }
    size_t q = quoted_len(s);
    if (q > 0 && q == strlen(s)) {
        if (boolean && !to_pg) {
            if (ieq(s, "'t'") || ieq(s, "'true'")) {
                snprintf(out, outlen, "1");
                return true;
            }
            if (ieq(s, "'f'") || ieq(s, "'false'")) {
                snprintf(out, outlen, "0");
                return true;
            }
        }
        if (strlen(s) >= outlen)
            return false;
        snprintf(out, outlen, "%s", s);
        return true;
    }
    if (ieq(s, "true") || ieq(s, "false")) {
        snprintf(out, outlen, "%s", to_pg ? (ieq(s, "true") ? "true" : "false")
                                          : (ieq(s, "true") ? "1" : "0"));
        return true;
    }
    static const char *const now[] = {"current_timestamp", "now()", "localtimestamp",
                                      "transaction_timestamp()", "datetime('now')",
                                      "datetime( 'now' )", NULL};
    for (int i = 0; now[i]; i++)
        if (ieq(s, now[i])) {
            snprintf(out, outlen, "CURRENT_TIMESTAMP");
            return true;
        }
    if (ieq(s, "current_date") || ieq(s, "current_time")) {
        snprintf(out, outlen, "%s", ieq(s, "current_date") ? "CURRENT_DATE" : "CURRENT_TIME");
        return true;
    }
    return false;
}
