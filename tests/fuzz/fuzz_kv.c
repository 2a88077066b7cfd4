/*
 * fuzz_kv.c — core/kv.c: percent-decoding, query strings and form bodies, cookies.
 *
 * Input: one byte L, then a field name of L % 16 bytes (cut at a NUL: names are C strings),
 * then the text (a query string or form body, with its length; the Cookie header is the
 * text up to its first NUL, as a FastCGI param would be).
 *
 * Invariants, each against a reference decoder written here from the spec:
 *   kv_url_decode   the same bytes as the reference (both '+' modes), never longer than
 *                   the input, NUL-terminated, never a NUL inside: a %00 or a raw NUL is
 *                   refused with (size_t)-1, and nothing is written past n + 1 bytes;
 *   kv_form_get     the value of the first field whose decoded name is the name (NULL when
 *                   none or when that value does not decode), reading only the given length;
 *   kv_form_next    one field per non-empty '&'-separated piece, in order, decoded like the
 *                   reference ("" for a name, NULL for a value that does not decode);
 *   kv_cookie_get   the first cookie of that name (RFC 6265 pairs, blanks trimmed, one pair of
 *                   quotes removed), a substring of the header without ';'.
 */
#include "core/first.h"
#include "core/kv.h"

#include "fuzz_common.h"

static arena *A;

/* ---- the reference ------------------------------------------------------------------------ */

/* Percent-decoding as RFC 3986 reads it: "%" and two hex digits is one byte; anything else
 * is itself; '+' is a space in forms. -1 when a byte decodes to (or is) NUL. */
static long ref_decode(const char *s, size_t n, char *out, bool plus)
{
    size_t o = 0, i = 0;
    while (i < n) {
        if (s[i] == '%' && n - i >= 3 && fz_hex(s[i + 1]) >= 0 && fz_hex(s[i + 2]) >= 0) {
            int v = fz_hex(s[i + 1]) * 16 + fz_hex(s[i + 2]);
            if (v == 0)
                return -1;
            out[o++] = (char)v;
            i += 3;
            continue;
        }
        if (s[i] == '\0')
            return -1;
        out[o++] = plus && s[i] == '+' ? ' ' : s[i];
        i++;
    }
    return (long)o;
}

/* kv_form_get compares names without decoding when they hold no '%' or '+', and decodes an
 * encoded name into 256 bytes on the stack: one of 256 bytes or more is never a match. */
#define NAME_DECODE_LIMIT 256

static bool ref_name_is(const char *p, size_t len, const char *name)
{
    bool encoded = memchr(p, '%', len) != NULL || memchr(p, '+', len) != NULL;
    if (encoded && len >= NAME_DECODE_LIMIT)
        return false;
    char *tmp = malloc(len + 1);
    long d = ref_decode(p, len, tmp, true);
    bool eq = d >= 0 && (size_t)d == strlen(name) && memcmp(tmp, name, (size_t)d) == 0;
    free(tmp);
    return eq;
}

/* ---- checks ------------------------------------------------------------------------------- */

static void check_decode(const char *s, size_t n, bool plus)
{
    /* Exactly n + 1 bytes of room, as the contract says. */
    char *out = malloc(n + 1);
    char *want = malloc(n + 1);
    size_t got = kv_url_decode(s, n, out, plus);
    long ref = ref_decode(s, n, want, plus);
    if (ref < 0) {
        FZ_ASSERT(got == (size_t)-1, "kv_url_decode accepted a NUL (%zu bytes)", got);
    } else {
        FZ_ASSERT(got == (size_t)ref, "kv_url_decode length %zu, reference %ld", got, ref);
        FZ_ASSERT(got <= n, "decoded longer than the input");
        FZ_ASSERT(out[got] == '\0', "kv_url_decode did not terminate its output");
        FZ_ASSERT(memchr(out, '\0', got) == NULL, "a NUL inside decoded text");
        FZ_ASSERT(memcmp(out, want, got) == 0, "kv_url_decode differs from the reference");
    }
    free(out);
    free(want);
}

static void check_form_get(const char *text, size_t n, const char *name)
{
    char *v = kv_form_get(text, n, name, A);
    const char *p = text, *end = text + n;
    bool found = false;
    while (p < end && !found) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *fend = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(fend - p));
        const char *nend = eq ? eq : fend;
        if (ref_name_is(p, (size_t)(nend - p), name)) {
            found = true;
            if (eq == NULL) {
                FZ_ASSERT(v != NULL && v[0] == '\0', "a field without '=' is not \"\"");
            } else {
                size_t vl = (size_t)(fend - eq - 1);
                char *want = malloc(vl + 1);
                long d = ref_decode(eq + 1, vl, want, true);
                if (d < 0) {
                    FZ_ASSERT(v == NULL, "an undecodable value came back");
                } else {
                    FZ_ASSERT(v != NULL, "kv_form_get missed '%s'", name);
                    FZ_ASSERT(strlen(v) == (size_t)d && memcmp(v, want, (size_t)d) == 0,
                              "kv_form_get value differs for '%s'", name);
                }
                free(want);
            }
        }
        p = amp ? amp + 1 : end;
    }
    if (!found)
        FZ_ASSERT(v == NULL, "kv_form_get found '%s' where there is none", name);
}

static void check_form_next(const char *text, size_t n)
{
    const char *p = text, *end = text + n;
    /* The reference pieces. */
    const char *r = text;
    for (;;) {
        while (r < end && *r == '&')
            r++;
        char *name = NULL, *value = NULL;
        const char *next = kv_form_next(p, end, &name, &value, A);
        if (r >= end) {
            FZ_ASSERT(next == NULL, "kv_form_next found a field after the last one");
            break;
        }
        FZ_ASSERT(next != NULL, "kv_form_next stopped early");
        const char *amp = memchr(r, '&', (size_t)(end - r));
        const char *fend = amp ? amp : end;
        FZ_ASSERT(next == fend, "kv_form_next returned a position off the field's end");
        const char *eq = memchr(r, '=', (size_t)(fend - r));
        const char *nend = eq ? eq : fend;
        char *want = malloc((size_t)(fend - r) + 1);
        long d = ref_decode(r, (size_t)(nend - r), want, true);
        FZ_ASSERT(name != NULL, "kv_form_next gave no name");
        if (d < 0)
            FZ_ASSERT(name[0] == '\0', "an undecodable name is not \"\"");
        else
            FZ_ASSERT(strlen(name) == (size_t)d && memcmp(name, want, (size_t)d) == 0,
                      "kv_form_next name differs");
        if (eq == NULL) {
            FZ_ASSERT(value != NULL && value[0] == '\0', "a field without '=' has no \"\" value");
        } else {
            d = ref_decode(eq + 1, (size_t)(fend - eq - 1), want, true);
            if (d < 0)
                FZ_ASSERT(value == NULL, "an undecodable value came back");
            else
                FZ_ASSERT(value != NULL && strlen(value) == (size_t)d &&
                              memcmp(value, want, (size_t)d) == 0,
                          "kv_form_next value differs");
        }
        free(want);
        p = next;
        r = fend;
    }
}

static bool blank(char c) { return c == ' ' || c == '\t'; }

static void check_cookie(const char *header, const char *name)
{
    char *v = kv_cookie_get(header, name, A);
    /* Reference: pairs separated by ';', each "name=value" with optional blanks. */
    const char *p = header;
    size_t nl = strlen(name);
    const char *want = NULL;
    size_t wl = 0;
    while (*p && want == NULL) {
        while (blank(*p) || *p == ';')
            p++;
        const char *end = p;
        while (*end && *end != ';')
            end++;
        const char *eq = p;
        while (eq < end && *eq != '=')
            eq++;
        if (eq < end) {
            const char *ne = eq;
            while (ne > p && blank(ne[-1]))
                ne--;
            if ((size_t)(ne - p) == nl && strncmp(p, name, nl) == 0) {
                const char *vs = eq + 1, *ve = end;
                while (vs < ve && blank(*vs))
                    vs++;
                while (ve > vs && blank(ve[-1]))
                    ve--;
                if (ve - vs >= 2 && vs[0] == '"' && ve[-1] == '"') {
                    vs++;
                    ve--;
                }
                want = vs;
                wl = (size_t)(ve - vs);
            }
        }
        p = end;
    }
    if (want == NULL) {
        FZ_ASSERT(v == NULL, "kv_cookie_get found '%s' where there is none", name);
        return;
    }
    FZ_ASSERT(v != NULL, "kv_cookie_get missed '%s'", name);
    FZ_ASSERT(strlen(v) == wl && memcmp(v, want, wl) == 0, "cookie '%s' differs", name);
    FZ_ASSERT(strchr(v, ';') == NULL, "a cookie value holds ';'");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (A == NULL)
        A = arena_create(0);
    if (size < 1)
        return 0;
    size_t nlen = data[0] % 16;
    if (nlen > size - 1)
        nlen = size - 1;
    char name[17];
    memcpy(name, data + 1, nlen);
    name[nlen] = '\0';
    const uint8_t *t = data + 1 + nlen;
    size_t tn = size - 1 - nlen;

    char *text = fz_copy(t, tn, false);
    check_decode(text, tn, true);
    check_decode(text, tn, false);
    if (name[0] != '\0')
        check_form_get(text, tn, name);
    check_form_get(text, tn, "a");
    check_form_next(text, tn);
    free(text);

    char *header = fz_copy(t, tn, true);
    check_cookie(header, name);
    check_cookie(header, "sid");
    free(header);
    arena_reset(A);
    return 0;
}
