/*
 * fuzz_common.h — what every fuzz target shares: how an invariant fails, an independent
 * UTF-8 decoder, and a strict JSON reader the targets check outputs (and inputs) against.
 *
 * Each target is a libFuzzer entry point (LLVMFuzzerTestOneInput) that runs one parser over
 * the input and asserts what must hold of its answer, not only that it did not crash. A
 * broken invariant prints what broke and calls abort(): libFuzzer then saves the input as a
 * crash artifact, exactly as it does for a sanitizer report (tests/fuzz/run.sh).
 *
 * The helpers here are written from the specifications (RFC 3629, RFC 8259), not from the
 * project's code, so that a target compares two independent readings of the same bytes.
 * Must not: include project code, or keep state between inputs.
 */
#ifndef TN_TESTS_FUZZ_COMMON_H
#define TN_TESTS_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Fail the run: the message, then abort() so that libFuzzer keeps the input. */
#define FZ_ASSERT(cond, ...)                                                                   \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "\n*** invariant broken at %s:%d: %s\n*** ", __FILE__, __LINE__,    \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* An invariant that is known to be broken, reported, and not fixed yet: `id` names it in
 * tests/fuzz/README.md ("Known broken invariants"). It is enforced only with FUZZ_STRICT=1
 * in the environment (tests/fuzz/run.sh --strict), so that until the fix lands the runs of
 * `make check` still catch everything else. The fix turns it into an FZ_ASSERT. */
static inline bool fz_strict(void)
{
    static int strict = -1;
    if (strict < 0) {
        const char *e = getenv("FUZZ_STRICT");
        strict = e != NULL && strcmp(e, "1") == 0;
    }
    return strict != 0;
}

#define FZ_KNOWN(id, cond, ...)                                                                \
    do {                                                                                       \
        if (!(cond) && fz_strict()) {                                                          \
            fprintf(stderr, "\n*** known broken invariant '%s' (%s:%d): %s\n*** ", id,          \
                    __FILE__, __LINE__, #cond);                                                \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* A heap copy of exactly n bytes (plus a NUL when `nul`), so that AddressSanitizer reports
 * any read past the length a parser was given. */
static inline char *fz_copy(const uint8_t *data, size_t n, bool nul)
{
    size_t size = n + (nul ? 1 : 0);
    char *p = malloc(size ? size : 1);
    if (p == NULL)
        abort();
    if (n)
        memcpy(p, data, n);
    if (nul)
        p[n] = '\0';
    return p;
}

/* ---- UTF-8 (RFC 3629, table 3-7 of Unicode) ----------------------------------------------- */

/* Length of the well-formed sequence at s (at most n bytes), 0 when there is none. */
static inline size_t fz_utf8_seq(const unsigned char *s, size_t n)
{
    static const struct {
        unsigned char lead_lo, lead_hi, second_lo, second_hi;
        size_t len;
    } rows[] = {
        {0x00, 0x7F, 0, 0, 1},       {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3},
        {0xE1, 0xEC, 0x80, 0xBF, 3}, {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3},
        {0xF0, 0xF0, 0x90, 0xBF, 4}, {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    if (n == 0)
        return 0;
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        if (s[0] < rows[r].lead_lo || s[0] > rows[r].lead_hi)
            continue;
        size_t len = rows[r].len;
        if (len == 1)
            return 1;
        if (n < len || s[1] < rows[r].second_lo || s[1] > rows[r].second_hi)
            return 0;
        for (size_t i = 2; i < len; i++)
            if (s[i] < 0x80 || s[i] > 0xBF)
                return 0;
        return len;
    }
    return 0;
}

static inline bool fz_utf8_valid(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t l = fz_utf8_seq((const unsigned char *)s + i, n - i);
        if (l == 0)
            return false;
        i += l;
    }
    return true;
}

/* Append the UTF-8 form of code point cp to out (room for 4). Returns the bytes written. */
static inline size_t fz_utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- strict JSON (RFC 8259) ---------------------------------------------------------------- */

typedef struct fz_json {
    const char *p;
    size_t n, i;
    bool bad_utf8_ok;   /* accept strings holding bytes that are not UTF-8 (kept as they are) */
} fz_json;

static inline void fz_json_ws(fz_json *j)
{
    while (j->i < j->n && (j->p[j->i] == ' ' || j->p[j->i] == '\t' || j->p[j->i] == '\n' ||
                           j->p[j->i] == '\r'))
        j->i++;
}

static inline int fz_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static inline bool fz_json_u4(fz_json *j, uint32_t *v)
{
    if (j->n - j->i < 4)
        return false;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int d = fz_hex(j->p[j->i + (size_t)k]);
        if (d < 0)
            return false;
        *v = *v * 16 + (uint32_t)d;
    }
    j->i += 4;
    return true;
}

/* A string at j->i (on its quote). The decoded bytes go to out (room for n - i bytes: the
 * decoded form is never longer), their count to *len; out may be NULL. Lone surrogates are
 * refused (as tests/helpers/json_check does). */
static inline bool fz_json_string(fz_json *j, char *out, size_t *len)
{
    size_t o = 0;
    if (j->i >= j->n || j->p[j->i] != '"')
        return false;
    j->i++;
    for (;;) {
        if (j->i >= j->n)
            return false;
        unsigned char c = (unsigned char)j->p[j->i];
        if (c == '"') {
            j->i++;
            break;
        }
        if (c < 0x20)
            return false;
        if (c >= 0x80) {
            size_t l = fz_utf8_seq((const unsigned char *)j->p + j->i, j->n - j->i);
            if (l == 0) {
                if (!j->bad_utf8_ok)
                    return false;
                l = 1;
            }
            if (out)
                memcpy(out + o, j->p + j->i, l);
            o += l;
            j->i += l;
            continue;
        }
        if (c != '\\') {
            if (out)
                out[o] = (char)c;
            o++;
            j->i++;
            continue;
        }
        if (j->i + 1 >= j->n)
            return false;
        char e = j->p[j->i + 1];
        j->i += 2;
        char lit = 0;
        switch (e) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (!fz_json_u4(j, &cp))
                return false;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return false;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (j->n - j->i < 6 || j->p[j->i] != '\\' || j->p[j->i + 1] != 'u')
                    return false;
                j->i += 2;
                if (!fz_json_u4(j, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return false;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            char tmp[4];
            size_t l = fz_utf8_put(tmp, cp);
            if (out)
                memcpy(out + o, tmp, l);
            o += l;
            continue;
        }
        default: return false;
        }
        if (out)
            out[o] = lit;
        o++;
    }
    if (len)
        *len = o;
    return true;
}

/* A number per the grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static inline bool fz_json_number(fz_json *j)
{
    size_t i = j->i;
    const char *p = j->p;
    if (i < j->n && p[i] == '-')
        i++;
    if (i >= j->n)
        return false;
    if (p[i] == '0') {
        i++;
    } else if (p[i] >= '1' && p[i] <= '9') {
        while (i < j->n && p[i] >= '0' && p[i] <= '9')
            i++;
    } else {
        return false;
    }
    if (i < j->n && p[i] == '.') {
        i++;
        if (i >= j->n || !(p[i] >= '0' && p[i] <= '9'))
            return false;
        while (i < j->n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    if (i < j->n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < j->n && (p[i] == '+' || p[i] == '-'))
            i++;
        if (i >= j->n || !(p[i] >= '0' && p[i] <= '9'))
            return false;
        while (i < j->n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    j->i = i;
    return true;
}

static inline bool fz_json_lit(fz_json *j, const char *w)
{
    size_t l = strlen(w);
    if (j->n - j->i < l || memcmp(j->p + j->i, w, l) != 0)
        return false;
    j->i += l;
    return true;
}

static inline bool fz_json_value(fz_json *j, int depth)
{
    if (depth > 64)
        return false;
    fz_json_ws(j);
    if (j->i >= j->n)
        return false;
    char c = j->p[j->i];
    if (c == '"')
        return fz_json_string(j, NULL, NULL);
    if (c == 't')
        return fz_json_lit(j, "true");
    if (c == 'f')
        return fz_json_lit(j, "false");
    if (c == 'n')
        return fz_json_lit(j, "null");
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->i++;
        fz_json_ws(j);
        if (j->i < j->n && j->p[j->i] == close) {
            j->i++;
            return true;
        }
        for (;;) {
            if (c == '{') {
                fz_json_ws(j);
                if (!fz_json_string(j, NULL, NULL))
                    return false;
                fz_json_ws(j);
                if (j->i >= j->n || j->p[j->i] != ':')
                    return false;
                j->i++;
            }
            if (!fz_json_value(j, depth + 1))
                return false;
            fz_json_ws(j);
            if (j->i >= j->n)
                return false;
            if (j->p[j->i] == ',') {
                j->i++;
                continue;
            }
            if (j->p[j->i] == close) {
                j->i++;
                return true;
            }
            return false;
        }
    }
    return fz_json_number(j);
}

/* True when p[0..n) is exactly one JSON value (blanks around it allowed). */
static inline bool fz_json_valid(const char *p, size_t n, bool bad_utf8_ok)
{
    fz_json j = {p, n, 0, bad_utf8_ok};
    if (!fz_json_value(&j, 0))
        return false;
    fz_json_ws(&j);
    return j.i == n;
}

/* SHA-256 of checksums (fuzz_migrate) and session ids (fuzz_admin): core/sha256.h, whose
 * FIPS 180-4 vectors check_core tests. */
static inline void fz_sha256_hex(const unsigned char *m, size_t n, char out[65])
{
    sha256_hex(m, n, out);
}

#endif
