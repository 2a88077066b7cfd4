/*
 * kv.c — query string, form and cookie parsing (see kv.h).
 * Must not: read beyond the lengths given, or allocate outside the caller's arena.
 */
#include "core/first.h"
#include "core/kv.h"

#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t kv_url_decode(const char *s, size_t n, char *out, bool plus)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n) {
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h >= 0 && l >= 0) {
                char d = (char)(h * 16 + l);
                if (d == '\0')
                    return (size_t)-1;
                out[o++] = d;
                i += 2;
                continue;
            }
        } else if (c == '+' && plus) {
            c = ' ';
        } else if (c == '\0') {
            return (size_t)-1;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return o;
}

const char *kv_form_next(const char *p, const char *end, char **name, char **value, arena *a)
{
    while (p < end && *p == '&')
        p++;
    if (p >= end)
        return NULL;
    const char *amp = memchr(p, '&', (size_t)(end - p));
    const char *fend = amp ? amp : end;
    const char *eq = memchr(p, '=', (size_t)(fend - p));
    const char *nend = eq ? eq : fend;
    *name = arena_alloc(a, (size_t)(nend - p) + 1);
    *value = NULL;
    if (*name == NULL)
        return NULL;
    if (kv_url_decode(p, (size_t)(nend - p), *name, true) == (size_t)-1)
        (*name)[0] = '\0';
    if (eq != NULL) {
        *value = arena_alloc(a, (size_t)(fend - eq - 1) + 1);
        if (*value == NULL)
            return NULL;
        if (kv_url_decode(eq + 1, (size_t)(fend - eq - 1), *value, true) == (size_t)-1)
            *value = NULL;
    } else {
        *value = arena_strdup(a, "");
    }
    return fend;
}

char *kv_form_get(const char *text, size_t n, const char *name, arena *a)
{
    if (text == NULL)
        return NULL;
    size_t nl = strlen(name);
    const char *p = text, *end = text + n;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *fend = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(fend - p));
        const char *nend = eq ? eq : fend;
        /* Compare the decoded name without allocating in the common (unencoded) case. */
        bool match;
        if (memchr(p, '%', (size_t)(nend - p)) == NULL && memchr(p, '+', (size_t)(nend - p)) == NULL) {
            match = (size_t)(nend - p) == nl && memcmp(p, name, nl) == 0;
        } else {
            char tmp[256];
            size_t len = (size_t)(nend - p);
            match = false;
            if (len < sizeof(tmp)) {
                size_t d = kv_url_decode(p, len, tmp, true);
                match = d != (size_t)-1 && d == nl && memcmp(tmp, name, nl) == 0;
            }
        }
        if (match) {
            if (eq == NULL)
                return arena_strdup(a, "");
            size_t vl = (size_t)(fend - eq - 1);
            char *v = arena_alloc(a, vl + 1);
            if (v == NULL || kv_url_decode(eq + 1, vl, v, true) == (size_t)-1)
                return NULL;
            return v;
        }
        p = amp ? amp + 1 : end;
    }
    return NULL;
}

char *kv_cookie_get(const char *header, const char *name, arena *a)
{
    if (header == NULL)
        return NULL;
    size_t nl = strlen(name);
    const char *p = header;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ';')
            p++;
        const char *semi = strchr(p, ';');
        const char *end = semi ? semi : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (eq != NULL) {
            const char *ne = eq;
            while (ne > p && (ne[-1] == ' ' || ne[-1] == '\t'))
                ne--;
            if ((size_t)(ne - p) == nl && memcmp(p, name, nl) == 0) {
                const char *v = eq + 1, *ve = end;
                while (v < ve && (*v == ' ' || *v == '\t'))
                    v++;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                    ve--;
                if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
                    v++;
                    ve--;
                }
                return arena_strndup(a, v, (size_t)(ve - v));
            }
        }
        p = end;
    }
    return NULL;
}

TN_HOT const char *kv_env_get(char *const *env, const char *name)
{
    if (env == NULL || name[0] == '\0')
        return NULL;
    /* Compared in place, without strlen and strncmp: a request asks for several params, and
     * the C library's string functions are code on pages of their own. */
    for (; *env != NULL; env++) {
        const char *e = *env;
        size_t i = 0;
        while (name[i] != '\0' && e[i] == name[i])
            i++;
        if (name[i] == '\0' && e[i] == '=')
            return e + i + 1;
    }
    return NULL;
}
