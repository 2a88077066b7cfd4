/*
 * jsonout.c — a column's value as the API's JSON: built (dt_value_json) or written as text
 * (dt_value_write), the two the same to the byte.
 *
 * Owns: the type rules of a value read back (integers, reals, booleans as SQLite keeps them,
 * JSON columns, everything else a string), and the text a read's rows are answered with
 * when nothing needs building: json_dumps' compact form, its string escapes, and its refusals
 * (a string that is not UTF-8, a real that is not finite: no value, and an object without
 * that key). What is not plain (non-ASCII text, reals, JSON columns, integers in another
 * form) goes through jansson itself, so the two paths cannot drift apart.
 *
 * Must not: call the host (tests/unit/data compiles it alone), or write text jansson would
 * not.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

bool dt_int_text(const char *s)
{
    char *end;
    errno = 0;
    (void)strtoll(s, &end, 10);
    return s[0] != '\0' && *end == '\0' && errno == 0;
}

bool dt_real_text(const char *s)
{
    char *end;
    errno = 0;
    (void)strtod(s, &end);
    return s[0] != '\0' && *end == '\0' && errno == 0;
}

json_t *dt_value_json(const dt_req *d, int type, const char *s)
{
    if (s == NULL)
        return json_null();
    switch (type) {
    case DT_INTEGER:
        if (dt_int_text(s))
            return json_integer(strtoll(s, NULL, 10));
        break;
    case DT_REAL:
        if (dt_real_text(s))
            return json_real(strtod(s, NULL));
        break;
    case DT_BOOLEAN:
        if (d->dialect == REST_POSTGRES)
            return json_boolean(s[0] == 't');
        if (strcmp(s, "0") == 0 || strcmp(s, "1") == 0)
            return json_boolean(s[0] == '1');
        break;
    case DT_JSON: {
        json_t *v = json_loads(s, JSON_DECODE_ANY, NULL);
        if (v != NULL)
            return v;
        break;
    }
    default:
        break;
    }
    return json_string(s);
}

/* ---- values as JSON text ------------------------------------------------------------------- */

/* v's compact JSON text into b, as json_dumps writes it; v is consumed. False for no value. */
static bool dump_value(dt_str *b, json_t *v)
{
    if (v == NULL)
        return false;
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    if (text == NULL) {
        b->oom = true;
        return true;
    }
    dt_str_add(b, text);
    free(text);
    return true;
}

bool dt_json_string(dt_str *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s;
    for (const unsigned char *q = p; *q != '\0'; q++)
        if (*q >= 0x80)   /* UTF-8 to check: jansson's own rules, and its text */
            return dump_value(b, json_string(s));
    dt_str_addc(b, '"');
    const unsigned char *run = p;
    for (; *p != '\0'; p++) {
        if (*p >= 0x20 && *p != '"' && *p != '\\')
            continue;
        dt_str_addn(b, (const char *)run, (size_t)(p - run));
        run = p + 1;
        char esc[7] = {'\\', 0};
        switch (*p) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            break;
        }
        dt_str_add(b, esc);
    }
    dt_str_addn(b, (const char *)run, (size_t)(p - run));
    dt_str_addc(b, '"');
    return true;
}

/* An integer as json_integer writes it back: an optional '-', then 0 or a digit 1-9 and
 * digits, short enough to be in range. */
static bool canonical_int(const char *s)
{
    const char *p = s + (s[0] == '-');
    size_t n = strspn(p, "0123456789");
    return n > 0 && n <= 18 && p[n] == '\0' && (p[0] != '0' || (n == 1 && p == s));
}

bool dt_value_write(const dt_req *d, dt_str *b, int type, const char *s)
{
    if (s == NULL) {
        dt_str_add(b, "null");
        return true;
    }
    switch (type) {
    case DT_INTEGER:
        if (canonical_int(s)) {
            dt_str_add(b, s);
            return true;
        }
        break;
    case DT_BOOLEAN:
        if (d->dialect == REST_POSTGRES) {
            dt_str_add(b, s[0] == 't' ? "true" : "false");
            return true;
        }
        if (strcmp(s, "0") == 0 || strcmp(s, "1") == 0) {
            dt_str_add(b, s[0] == '1' ? "true" : "false");
            return true;
        }
        return dt_json_string(b, s);
    case DT_TEXT:
    case DT_TIMESTAMP:
        return dt_json_string(b, s);
    default:
        break;
    }
    return dump_value(b, dt_value_json(d, type, s));
}

