/*
 * json_check.c — a strict JSON validator and value extractor for shell tests (test-only).
 *
 *   json_check < FILE            exit 0 when stdin is exactly one JSON value (RFC 8259,
 *                                UTF-8, whitespace around it allowed), 1 when it is not
 *   json_check PATH < FILE       the same, then print the value at PATH on one line:
 *                                PATH is "." or segments like .tenants[0].slug; a string is
 *                                printed decoded, anything else as its JSON text; PATH#
 *                                prints the number of elements of an array or object.
 *                                Exit 1 when there is no value at PATH.
 *
 * Why: the CLI's --json promise ("stdout always parses") is checked without python3 or jq,
 * which the build does not depend on. Owns: nothing but this check; uses no project code.
 * Must not: accept anything a strict parser would refuse (trailing commas, NaN, single
 * quotes, control characters in strings, bad UTF-8, a second value after the first).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 256
#define MAX_SEGS 32

static const char *p, *end;
static int depth;
static const char *why = "";

/* The path: each segment a key (key != NULL) or an index. */
static struct seg {
    char *key;
    long index;
} segs[MAX_SEGS];
static int nsegs;
static bool want_count;
static const char *found_s, *found_e;
static long found_count = -1;

static bool bad(const char *msg)
{
    if (why[0] == '\0')
        why = msg;
    return false;
}

static void ws(void)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static bool hex4(const char *s, unsigned *v)
{
    if (end - s < 4)
        return false;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hexval(s[i]);
        if (d < 0)
            return false;
        *v = *v * 16 + (unsigned)d;
    }
    return true;
}

/* One UTF-8 sequence at p (not ASCII); advances. */
static bool utf8_seq(void)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t left = (size_t)(end - p);
    unsigned cp;
    int n;
    if (u[0] >= 0xC2 && u[0] <= 0xDF) {
        n = 2;
        cp = u[0] & 0x1F;
    } else if (u[0] >= 0xE0 && u[0] <= 0xEF) {
        n = 3;
        cp = u[0] & 0x0F;
    } else if (u[0] >= 0xF0 && u[0] <= 0xF4) {
        n = 4;
        cp = u[0] & 0x07;
    } else {
        return bad("invalid UTF-8");
    }
    if (left < (size_t)n)
        return bad("truncated UTF-8");
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return bad("invalid UTF-8");
        cp = cp << 6 | (u[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return bad("invalid UTF-8");
    p += n;
    return true;
}

/* A string at p (on the quote). When out is not NULL, the decoded bytes go there (it must
 * hold the raw length). */
static bool string(char *out, size_t *outlen)
{
    size_t o = 0;
    p++;
    for (;;) {
        if (p >= end)
            return bad("unterminated string");
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            p++;
            break;
        }
        if (c < 0x20)
            return bad("control character in a string");
        if (c >= 0x80) {
            const char *s = p;
            if (!utf8_seq())
                return false;
            if (out)
                memcpy(out + o, s, (size_t)(p - s));
            o += (size_t)(p - s);
            continue;
        }
        if (c != '\\') {
            if (out)
                out[o] = (char)c;
            o++;
            p++;
            continue;
        }
        if (p + 1 >= end)
            return bad("unterminated escape");
        char e = p[1];
        p += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple != NULL) {
            if (out)
                out[o] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            o++;
            continue;
        }
        if (e != 'u')
            return bad("bad escape");
        unsigned cp;
        if (!hex4(p, &cp))
            return bad("bad \\u escape");
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xDC00 ||
                lo > 0xDFFF)
                return bad("lone surrogate");
            p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return bad("lone surrogate");
        }
        char tmp[4];
        size_t n;
        if (cp < 0x80) {
            tmp[0] = (char)cp;
            n = 1;
        } else if (cp < 0x800) {
            tmp[0] = (char)(0xC0 | cp >> 6);
            tmp[1] = (char)(0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            tmp[0] = (char)(0xE0 | cp >> 12);
            tmp[1] = (char)(0x80 | (cp >> 6 & 0x3F));
            tmp[2] = (char)(0x80 | (cp & 0x3F));
            n = 3;
        } else {
            tmp[0] = (char)(0xF0 | cp >> 18);
            tmp[1] = (char)(0x80 | (cp >> 12 & 0x3F));
            tmp[2] = (char)(0x80 | (cp >> 6 & 0x3F));
            tmp[3] = (char)(0x80 | (cp & 0x3F));
            n = 4;
        }
        if (out)
            memcpy(out + o, tmp, n);
        o += n;
    }
    if (outlen)
        *outlen = o;
    return true;
}

static bool digits(void)
{
    if (p >= end || *p < '0' || *p > '9')
        return bad("bad number");
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return true;
}

static bool number(void)
{
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if (!digits())
        return false;
    if (p < end && *p == '.') {
        p++;
        if (!digits())
            return false;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (!digits())
            return false;
    }
    return true;
}

static bool literal(const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(end - p) < n || memcmp(p, w, n) != 0)
        return bad("unexpected text");
    p += n;
    return true;
}

/* A value at p; `level` is how many path segments lead here (-1: off the path). */
static bool value(int level)
{
    ws();
    if (p >= end)
        return bad("a value is missing");
    if (++depth > MAX_DEPTH)
        return bad("nested too deep");
    const char *start = p;
    bool on = level == nsegs;
    long count = 0;
    bool ok;
    if (*p == '{') {
        p++;
        ws();
        ok = true;
        if (p < end && *p == '}') {
            p++;
        } else {
            for (;;) {
                ws();
                if (p >= end || *p != '"') {
                    ok = bad("an object key must be a string");
                    break;
                }
                char *key = malloc((size_t)(end - p) + 1);
                size_t klen = 0;
                if (key == NULL || !string(key, &klen)) {
                    free(key);
                    ok = bad("bad key");
                    break;
                }
                key[klen] = '\0';
                int child = -1;
                if (level >= 0 && level < nsegs && segs[level].key != NULL &&
                    strlen(segs[level].key) == klen && memcmp(segs[level].key, key, klen) == 0)
                    child = level + 1;
                free(key);
                ws();
                if (p >= end || *p != ':') {
                    ok = bad("':' expected");
                    break;
                }
                p++;
                if (!value(child)) {
                    ok = false;
                    break;
                }
                count++;
                ws();
                if (p < end && *p == ',') {
                    p++;
                    continue;
                }
                if (p < end && *p == '}') {
                    p++;
                    break;
                }
                ok = bad("',' or '}' expected");
                break;
            }
        }
    } else if (*p == '[') {
        p++;
        ws();
        ok = true;
        if (p < end && *p == ']') {
            p++;
        } else {
            for (;;) {
                int child = -1;
                if (level >= 0 && level < nsegs && segs[level].key == NULL &&
                    segs[level].index == count)
                    child = level + 1;
                if (!value(child)) {
                    ok = false;
                    break;
                }
                count++;
                ws();
                if (p < end && *p == ',') {
                    p++;
                    continue;
                }
                if (p < end && *p == ']') {
                    p++;
                    break;
                }
                ok = bad("',' or ']' expected");
                break;
            }
        }
    } else if (*p == '"') {
        ok = string(NULL, NULL);
        count = -1;
    } else if (*p == 't') {
        ok = literal("true");
        count = -1;
    } else if (*p == 'f') {
        ok = literal("false");
        count = -1;
    } else if (*p == 'n') {
        ok = literal("null");
        count = -1;
    } else {
        ok = number();
        count = -1;
    }
    depth--;
    if (ok && on) {
        found_s = start;
        found_e = p;
        found_count = count;
    }
    return ok;
}

static bool parse_path(const char *s)
{
    if (strcmp(s, ".") == 0 || strcmp(s, ".#") == 0) {
        want_count = s[1] == '#';
        return true;
    }
    size_t n = strlen(s);
    char *copy = strdup(s);
    if (copy == NULL)
        return false;
    if (n > 0 && copy[n - 1] == '#') {
        want_count = true;
        copy[--n] = '\0';
    }
    char *q = copy;
    while (*q) {
        if (nsegs == MAX_SEGS)
            return false;
        if (*q == '.') {
            q++;
            size_t len = strcspn(q, ".[");
            if (len == 0)
                return false;
            segs[nsegs].key = strndup(q, len);
            nsegs++;
            q += len;
        } else if (*q == '[') {
            char *e;
            long idx = strtol(q + 1, &e, 10);
            if (e == q + 1 || *e != ']' || idx < 0)
                return false;
            segs[nsegs].key = NULL;
            segs[nsegs].index = idx;
            nsegs++;
            q = e + 1;
        } else {
            return false;
        }
    }
    free(copy);
    return true;
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && (argv[1][0] != '.' || !parse_path(argv[1])))) {
        fprintf(stderr, "usage: json_check [PATH] < FILE   (PATH: . | .key[0].key | PATH#)\n");
        return 2;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    size_t r;
    while (text != NULL && (r = fread(text + len, 1, cap - len, stdin)) > 0) {
        len += r;
        if (len == cap) {
            char *t = realloc(text, cap * 2);
            if (t == NULL) {
                free(text);
                text = NULL;
                break;
            }
            text = t;
            cap *= 2;
        }
    }
    if (text == NULL) {
        fprintf(stderr, "json_check: out of memory\n");
        return 2;
    }
    p = text;
    end = text + len;
    bool ok = value(argc == 2 ? 0 : -1);
    if (ok) {
        ws();
        if (p != end)
            ok = bad("text after the value");
    }
    if (!ok) {
        fprintf(stderr, "json_check: not JSON: %s at byte %ld\n", why, (long)(p - text));
        free(text);
        return 1;
    }
    int rc = 0;
    if (argc == 2) {
        if (found_s == NULL) {
            fprintf(stderr, "json_check: no value at %s\n", argv[1]);
            rc = 1;
        } else if (want_count) {
            if (found_count < 0) {
                fprintf(stderr, "json_check: %s is not an array or object\n", argv[1]);
                rc = 1;
            } else {
                printf("%ld\n", found_count);
            }
        } else if (*found_s == '"') {
            char *out = malloc((size_t)(found_e - found_s) + 1);
            size_t olen = 0;
            p = found_s;
            if (out != NULL && string(out, &olen)) {
                fwrite(out, 1, olen, stdout);
                putchar('\n');
            }
            free(out);
        } else {
            fwrite(found_s, 1, (size_t)(found_e - found_s), stdout);
            putchar('\n');
        }
    }
    free(text);
    return rc;
}
