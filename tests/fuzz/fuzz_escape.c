/*
 * fuzz_escape.c — the output escapers of core/buf.c over arbitrary bytes.
 *
 * Invariants:
 *   utf8_valid_prefix  the prefix is valid UTF-8 and maximal (no valid sequence starts where
 *                      it stops);
 *   buf_json_strn      the output is exactly one valid JSON string (strict: RFC 8259 and valid
 *                      UTF-8), and decoding it gives the input back, with each byte that does
 *                      not start a valid UTF-8 sequence replaced by U+FFFD; NUL and control
 *                      characters survive the round trip; what the buffer held before is kept;
 *                      buf_json_str of the same C string gives the same output;
 *   buf_htmln          no < > " ' left, every & starts an entity, and unescaping gives the
 *                      input back (NUL as U+FFFD);
 *   buf_csv            one RFC 4180 field that reads back as the input (a leading ' added
 *                      when the input starts with = + - @ TAB CR), never starting with one
 *                      of those.
 */
#include "core/first.h"
#include "core/buf.h"

#include "fuzz_common.h"

static const char fffd[] = "\xEF\xBF\xBD";

/* The input with every byte that starts no valid sequence replaced by U+FFFD. */
static char *replace_invalid(const char *s, size_t n, size_t *outlen)
{
    char *o = malloc(n * 3 + 1);
    size_t k = 0;
    if (o == NULL)
        abort();
    for (size_t i = 0; i < n;) {
        size_t l = fz_utf8_seq((const unsigned char *)s + i, n - i);
        if (l == 0) {
            memcpy(o + k, fffd, 3);
            k += 3;
            i++;
        } else {
            memcpy(o + k, s + i, l);
            k += l;
            i += l;
        }
    }
    *outlen = k;
    return o;
}

static void check_utf8_prefix(const char *s, size_t n)
{
    size_t k = utf8_valid_prefix(s, n);
    FZ_ASSERT(k <= n, "utf8_valid_prefix %zu > %zu", k, n);
    FZ_ASSERT(fz_utf8_valid(s, k), "utf8_valid_prefix: the prefix of %zu bytes is not UTF-8", k);
    if (k < n)
        FZ_ASSERT(fz_utf8_seq((const unsigned char *)s + k, n - k) == 0,
                  "utf8_valid_prefix stopped at %zu before a valid sequence", k);
}

static void check_json(const char *s, size_t n)
{
    static const char prefix[] = "[1,";
    buf b = BUF_INIT;
    buf_puts(&b, prefix);
    buf_json_strn(&b, s, n);
    FZ_ASSERT(!b.oom, "buf_json_strn ran out of memory");
    FZ_ASSERT(memcmp(b.p, prefix, 3) == 0, "buf_json_strn changed what the buffer held");
    FZ_ASSERT(strlen(b.p) == b.len, "JSON output holds a NUL byte");
    const char *out = b.p + 3;
    size_t outlen = b.len - 3;
    FZ_ASSERT(fz_json_valid(out, outlen, false), "not valid JSON: %s", out);
    /* Decode it back. */
    fz_json j = {out, outlen, 0, false};
    char *dec = malloc(outlen + 1);
    size_t declen = 0;
    FZ_ASSERT(fz_json_string(&j, dec, &declen) && j.i == outlen, "not one JSON string: %s", out);
    size_t wantlen;
    char *want = replace_invalid(s, n, &wantlen);
    FZ_ASSERT(declen == wantlen && memcmp(dec, want, declen) == 0,
              "JSON round trip differs (%zu bytes in, %zu decoded, %zu expected): %s", n, declen,
              wantlen, out);
    /* Valid UTF-8 comes back byte for byte. */
    if (fz_utf8_valid(s, n))
        FZ_ASSERT(declen == n && memcmp(dec, s, n) == 0, "valid UTF-8 did not round-trip");
    free(want);
    free(dec);

    /* The C-string form agrees up to the first NUL. */
    char *cs = fz_copy((const uint8_t *)s, strnlen(s, n), true);
    buf c = BUF_INIT, d = BUF_INIT;
    buf_json_str(&c, cs);
    buf_json_strn(&d, cs, strlen(cs));
    FZ_ASSERT(c.len == d.len && memcmp(c.p, d.p, c.len) == 0, "buf_json_str differs");
    buf_free(&c);
    buf_free(&d);
    free(cs);
    buf_free(&b);
}

/* Undo HTML escaping; false when an & does not start one of the five entities or NUL's. */
static bool html_unescape(const char *s, size_t n, char *out, size_t *outlen)
{
    static const struct {
        const char *ent, *text;
    } ents[] = {{"&amp;", "&"},     {"&lt;", "<"},   {"&gt;", ">"},
                {"&quot;", "\""},  {"&#39;", "'"},  {"&#65533;", "\xEF\xBF\xBD"}};
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '&') {
            out[o++] = s[i++];
            continue;
        }
        size_t e = 0;
        for (; e < sizeof(ents) / sizeof(ents[0]); e++) {
            size_t l = strlen(ents[e].ent);
            if (n - i >= l && memcmp(s + i, ents[e].ent, l) == 0) {
                size_t tl = strlen(ents[e].text);
                memcpy(out + o, ents[e].text, tl);
                o += tl;
                i += l;
                break;
            }
        }
        if (e == sizeof(ents) / sizeof(ents[0]))
            return false;
    }
    *outlen = o;
    return true;
}

static void check_html(const char *s, size_t n)
{
    buf b = BUF_INIT;
    buf_putc(&b, 'x');
    buf_htmln(&b, s, n);
    FZ_ASSERT(!b.oom, "buf_htmln ran out of memory");
    FZ_ASSERT(b.len >= 1 && b.p[0] == 'x', "buf_htmln changed what the buffer held");
    const char *out = b.p + 1;
    size_t outlen = b.len - 1;
    for (size_t i = 0; i < outlen; i++)
        FZ_ASSERT(out[i] != '<' && out[i] != '>' && out[i] != '"' && out[i] != '\'' &&
                      out[i] != '\0',
                  "HTML output holds a raw %#x at %zu", (unsigned char)out[i], i);
    char *dec = malloc(outlen + 1);
    size_t declen = 0;
    FZ_ASSERT(html_unescape(out, outlen, dec, &declen), "a bare & in HTML output");
    /* Expected: the input with NUL as U+FFFD. */
    char *want = malloc(n * 3 + 1);
    size_t wl = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\0') {
            memcpy(want + wl, fffd, 3);
            wl += 3;
        } else {
            want[wl++] = s[i];
        }
    }
    FZ_ASSERT(declen == wl && memcmp(dec, want, wl) == 0, "HTML round trip differs");
    free(want);
    free(dec);
    buf_free(&b);
}

static void check_csv(const char *s)
{
    buf b = BUF_INIT;
    buf_csv(&b, s);
    FZ_ASSERT(!b.oom, "buf_csv ran out of memory");
    size_t n = strlen(s);
    const char *out = b.p ? b.p : "";
    size_t ol = b.len;
    bool formula = n > 0 && strchr("=+-@\t\r", s[0]) != NULL;
    FZ_ASSERT(ol == 0 || strchr("=+-@\t\r", out[0]) == NULL,
              "a CSV field starts with a formula character: %s", out);
    char *field = malloc(ol + 1);
    size_t fl = 0;
    if (ol > 0 && out[0] == '"') {
        FZ_ASSERT(ol >= 2 && out[ol - 1] == '"', "unterminated quoted CSV field: %s", out);
        for (size_t i = 1; i < ol - 1; i++) {
            if (out[i] == '"') {
                FZ_ASSERT(i + 1 < ol - 1 && out[i + 1] == '"', "a lone quote inside a field: %s",
                          out);
                i++;
            }
            field[fl++] = out[i];
        }
    } else {
        FZ_ASSERT(strpbrk(out, ",\"\r\n") == NULL, "an unquoted CSV field needs quotes: %s", out);
        memcpy(field, out, ol);
        fl = ol;
    }
    if (formula) {
        FZ_ASSERT(fl == n + 1 && field[0] == '\'' && memcmp(field + 1, s, n) == 0,
                  "CSV formula field does not read back as '<input>: %s", out);
    } else {
        FZ_ASSERT(fl == n && memcmp(field, s, n) == 0, "CSV field does not read back: %s", out);
    }
    free(field);
    buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_copy(data, size, false);
    check_utf8_prefix(s, size);
    check_json(s, size);
    check_html(s, size);
    free(s);
    char *cs = fz_copy(data, size, true);
    check_csv(cs);
    free(cs);
    return 0;
}
