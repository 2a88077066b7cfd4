/*
 * buf.h — a growable byte buffer with text, JSON and HTML appenders.
 *
 * A buf is a small value type (transparent on purpose: it lives inside other structs).
 * It always keeps a NUL after its contents. When memory runs out it sets `oom`, ignores
 * further appends and keeps what it had, so builders check once at the end.
 * Workers keep their bufs for the process lifetime and buf_reset() them per request, so the
 * request path stops allocating once the buffers have grown to the largest response seen.
 */
#ifndef TN_CORE_BUF_H
#define TN_CORE_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct buf {
    char *p;      /* contents, NUL-terminated (NULL until the first append) */
    size_t len;
    size_t cap;
    bool oom;
} buf;

#define BUF_INIT { NULL, 0, 0, false }

void buf_free(buf *b);
void buf_reset(buf *b);                 /* len = 0, keeps the memory, clears oom */
int buf_reserve(buf *b, size_t extra);  /* 0, or -1 (and oom) */
void buf_append(buf *b, const void *data, size_t n);
void buf_puts(buf *b, const char *s);
/* A string literal, its length known at compile time (no strlen on the request path). */
#define buf_lit(b, lit) buf_append((b), "" lit "", sizeof(lit) - 1)
void buf_putc(buf *b, char c);
void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void buf_u64(buf *b, unsigned long long v);   /* decimal, no printf */
void buf_i64(buf *b, long long v);

/* A JSON string literal, quotes included. Control characters are escaped; bytes that are not
 * valid UTF-8 become U+FFFD, so the output is always valid JSON. NULL appends null. */
void buf_json_str(buf *b, const char *s);
void buf_json_strn(buf *b, const char *s, size_t n);

/* Text escaped for HTML element content and quoted attribute values (& < > " '). */
void buf_html(buf *b, const char *s);
void buf_htmln(buf *b, const char *s, size_t n);

/* Text as a CSV field (quoted when it holds , " CR or LF). A field that starts with = + - @,
 * a tab or a carriage return gets a leading ' (then quoted), so a spreadsheet shows it as
 * text instead of evaluating it (OWASP, CSV injection). */
void buf_csv(buf *b, const char *s);

/* Length of the longest prefix of s[0..n) that is valid UTF-8. */
size_t utf8_valid_prefix(const char *s, size_t n);

/* Bounded string copy without printf (hot paths): at most n-1 bytes of src, always
 * NUL-terminated when n > 0; returns the bytes written (without the NUL). */
size_t str_copy(char *dst, size_t n, const char *src);
/* strlen, strchr and strcmp (== 0) for the short strings of the request path (params, host
 * names, slugs), inline: the C library's versions are code on three pages of their own, and
 * a request that runs after other processes have emptied the caches pays a TLB miss and
 * cache-line misses for each (bench/README.md, chain_cold). */
static inline size_t str_len(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
        __asm__("" : "+r"(n));   /* keeps GCC from turning the loop back into strlen() */
    }
    return n;
}

static inline const char *str_chr(const char *s, char c)
{
    for (;; s++) {
        if (*s == c)
            return s;
        if (*s == '\0')
            return NULL;
    }
}

static inline bool str_eq(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b)
        a++, b++;
    return *a == *b;
}

/* memcpy, memcmp (== 0) and memchr for the same short strings, inline for the same reason
 * (the empty asm keeps GCC from turning the loops back into the library's calls). Byte
 * loops: for long buffers the C library's are faster. */
static inline void mem_copy(void *dst, const void *src, size_t n)
{
    char *d = dst;
    const char *s = src;
    for (size_t i = 0; i < n; i++) {
        d[i] = s[i];
        __asm__("" : "+r"(i));
    }
}

static inline bool mem_eq(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != y[i])
            return false;
        __asm__("" : "+r"(i));
    }
    return true;
}

static inline const char *mem_chr(const char *s, char c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == c)
            return s + i;
        __asm__("" : "+r"(i));
    }
    return NULL;
}

/* v in decimal at dst (room for 20 digits needed), no NUL; returns the digits written. */
size_t str_u64(char *dst, unsigned long long v);
/* v in lower-case hex at dst (room for 16 digits needed), no NUL; the digits written. */
size_t str_x64(char *dst, unsigned long long v);

#endif
