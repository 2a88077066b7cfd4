/*
 * buf.c — growable buffer and escaping appenders (see buf.h).
 * Must not: allocate from anywhere but malloc/realloc, or log (it is below log.c).
 */
#include "core/first.h"
#include "core/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_free(buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}

TN_HOT void buf_reset(buf *b)
{
    /* An empty buf already ends in its NUL: not writing it again spares a request the cache
     * line of each buffer it left empty (most requests leave both of theirs empty). */
    if (b->p != NULL && b->len != 0)
        b->p[0] = '\0';
    b->len = 0;
    b->oom = false;
}

int buf_reserve(buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->oom = true;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void buf_append(buf *b, const void *data, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void buf_puts(buf *b, const char *s) { buf_append(b, s, strlen(s)); }

void buf_putc(buf *b, char c)
{
    if (buf_reserve(b, 1) < 0)
        return;
    b->p[b->len++] = c;
    b->p[b->len] = '\0';
}

void buf_vprintf(buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n >= room) {
        if (buf_reserve(b, (size_t)n) < 0) {
            va_end(ap2);
            return;
        }
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap2);
    }
    b->len += (size_t)n;
    va_end(ap2);
}

void buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_u64(buf *b, unsigned long long v)
{
    char tmp[24];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_append(b, tmp + i, sizeof(tmp) - i);
}

void buf_i64(buf *b, long long v)
{
    if (v < 0) {
        buf_putc(b, '-');
        buf_u64(b, (unsigned long long)(-(v + 1)) + 1);
    } else {
        buf_u64(b, (unsigned long long)v);
    }
}

/* Length of the UTF-8 sequence starting at s (at most n bytes), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned int cp;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

size_t utf8_valid_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l == 0)
            break;
        i += l;
    }
    return i;
}

void buf_json_strn(buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (buf_reserve(b, n + 2) < 0)
        return;
    buf_putc(b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            run++;
            continue;
        }
        buf_append(b, s + i - run, run);
        run = 0;
        if (c >= 0x80) {
            size_t l = utf8_seq((const unsigned char *)s + i, n - i);
            if (l == 0) {
                buf_puts(b, "\\ufffd");
                i++;
            } else {
                buf_append(b, s + i, l);
                i += l;
            }
            continue;
        }
        switch (c) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        default: {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_append(b, e, sizeof(e));
        }
        }
        i++;
    }
    buf_append(b, s + i - run, run);
    buf_putc(b, '"');
}

void buf_json_str(buf *b, const char *s)
{
    /* str_len, not strlen: the escape loop reads every byte anyway, and libc's strlen is
     * code on a page of its own, cold on a request that follows other processes. */
    if (s == NULL)
        buf_lit(b, "null");
    else
        buf_json_strn(b, s, str_len(s));
}

void buf_htmln(buf *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        case '\0': rep = "&#65533;"; break;
        default: run++; continue;
        }
        buf_append(b, s + i - run, run);
        run = 0;
        buf_puts(b, rep);
    }
    buf_append(b, s + n - run, run);
}

void buf_html(buf *b, const char *s)
{
    if (s != NULL)
        buf_htmln(b, s, strlen(s));
}

void buf_csv(buf *b, const char *s)
{
    if (s == NULL)
        return;
    bool quote = strpbrk(s, ",\"\r\n") != NULL;
    /* OWASP's list of what a spreadsheet may read as a formula: = + - @, and a leading tab
     * or carriage return (some importers drop it and then see the = behind it). Every CSV
     * we hand to a person goes through here, so the check lives here, not in its callers. */
    bool formula = s[0] != '\0' && strchr("=+-@\t\r", s[0]) != NULL;
    if (!quote && !formula) {
        buf_puts(b, s);
        return;
    }
    buf_putc(b, '"');
    if (formula)
        buf_putc(b, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            buf_putc(b, '"');
        buf_putc(b, *p);
    }
    buf_putc(b, '"');
}

TN_HOT size_t str_copy(char *dst, size_t n, const char *src)
{
    if (n == 0)
        return 0;
    size_t len = 0;   /* a loop, not strnlen + memcpy: see str_len in buf.h */
    for (; len + 1 < n && src[len] != '\0'; len++)
        dst[len] = src[len];
    dst[len] = '\0';
    return len;
}

TN_HOT size_t str_u64(char *dst, unsigned long long v)
{
    char tmp[24];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    mem_copy(dst, tmp + i, sizeof(tmp) - i);
    return sizeof(tmp) - i;
}

size_t str_x64(char *dst, unsigned long long v)
{
    char tmp[16];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    memcpy(dst, tmp + i, sizeof(tmp) - i);
    return sizeof(tmp) - i;
}
