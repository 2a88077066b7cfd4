/*
 * tenant.c — tenant records, states, and name checks (see tenant.h).
 * Must not: query anything (records are built from values the registry read), or accept a
 * name that could mean something else in a host name, a path or SQL.
 */
#include "core/first.h"
#include "tenancy/tenant.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/rc.h"
#include "tenancy/request.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[TENANT_NSTATES] = {
    "provisioning", "active", "maintenance", "suspended", "moving", "deleting"};

const char *tenant_state_name(int state)
{
    return state >= 0 && state < TENANT_NSTATES ? state_names[state] : "unknown";
}

int tenant_state_parse(const char *name)
{
    for (int i = 0; i < TENANT_NSTATES; i++)
        if (strcmp(state_names[i], name) == 0)
            return i;
    return -1;
}

TN_HOT bool tenant_slug_valid(const char *slug)
{
    size_t n = slug ? str_len(slug) : 0;
    if (n < 1 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = slug[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return slug[0] != '-' && slug[n - 1] != '-';
}

TN_HOT size_t tenant_host_normalise(const char *in, char *out, size_t outlen)
{
    if (in == NULL || outlen < 254)
        return 0;
    bool valid;
    size_t n = request_host_normalise(in, out, outlen, &valid);
    return valid ? n : 0;
}

/* ---- settings: a flat JSON object ------------------------------------------------------- */

struct jp {
    const char *p;
    void *(*alloc)(void *, size_t);
    void *ctx;
};

static void ws(struct jp *j)
{
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
        j->p++;
}

static int hex4(const char *s, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string at j->p (on the opening quote): decoded, NUL-free, allocated. */
static char *jstring(struct jp *j)
{
    if (*j->p != '"')
        return NULL;
    const char *s = ++j->p;
    size_t cap = 0;
    for (const char *q = s; *q && *q != '"'; q++) {
        if (*q == '\\' && q[1])
            q++;
        cap++;
    }
    char *out = j->alloc(j->ctx, cap * 4 + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c == '\0' || c < 0x20)
            return NULL;
        if (c != '\\') {
            out[o++] = (char)c;
            j->p++;
            continue;
        }
        char e = j->p[1];
        j->p += 2;
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(j->p, &cp) < 0)
                return NULL;
            j->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (j->p[0] != '\\' || j->p[1] != 'u' || hex4(j->p + 2, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return NULL;
                j->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return NULL;
            }
            if (cp == 0)
                return NULL;   /* no NUL inside a C string */
            o += put_utf8(out + o, cp);
            break;
        }
        default: return NULL;
        }
    }
    j->p++;
    out[o] = '\0';
    return out;
}

static char *jscalar(struct jp *j)
{
    const char *s = j->p;
    if (strncmp(s, "true", 4) == 0 || strncmp(s, "false", 5) == 0 || strncmp(s, "null", 4) == 0) {
        size_t n = s[0] == 'f' ? 5 : 4;
        j->p += n;
        char *out = j->alloc(j->ctx, n + 1);
        if (out != NULL) {
            memcpy(out, s, n);
            out[n] = '\0';
        }
        return out;
    }
    /* A number as RFC 8259 writes one, kept as its text: -?(0|[1-9][0-9]*)(.[0-9]+)?
     * ([eE][+-]?[0-9]+)?. Anything looser ("01", "1.", "5e", "1-2") is not JSON, and what
     * follows it makes the object fail to parse. */
    const char *q = s;
    if (*q == '-')
        q++;
    if (*q == '0')
        q++;
    else if (isdigit((unsigned char)*q))
        while (isdigit((unsigned char)*q))
            q++;
    else
        return NULL;
    if (*q == '.') {
        if (!isdigit((unsigned char)*++q))
            return NULL;
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-')
            q++;
        if (!isdigit((unsigned char)*q))
            return NULL;
        while (isdigit((unsigned char)*q))
            q++;
    }
    size_t n = (size_t)(q - s);
    j->p = q;
    char *out = j->alloc(j->ctx, n + 1);
    if (out != NULL) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

static int cmp_setting(const void *a, const void *b)
{
    return strcmp(((const tenant_setting *)a)->key, ((const tenant_setting *)b)->key);
}

int settings_parse(const char *json, tenant_setting **out, void *(*alloc)(void *, size_t),
                   void *ctx)
{
    struct jp j = {json ? json : "{}", alloc, ctx};
    *out = NULL;
    ws(&j);
    if (*j.p != '{')
        return -1;
    j.p++;
    /* Count entries generously: at most one per ':' */
    size_t cap = 1;
    for (const char *q = j.p; *q; q++)
        if (*q == ':')
            cap++;
    tenant_setting *v = alloc(ctx, cap * sizeof(*v));
    if (v == NULL)
        return -1;
    int n = 0;
    ws(&j);
    if (*j.p == '}') {
        j.p++;
    } else {
        for (;;) {
            ws(&j);
            char *k = jstring(&j);
            if (k == NULL)
                return -1;
            ws(&j);
            if (*j.p++ != ':')
                return -1;
            ws(&j);
            bool is_null = strncmp(j.p, "null", 4) == 0;
            char *val = *j.p == '"' ? jstring(&j) : jscalar(&j);
            if (val == NULL || (size_t)n >= cap)
                return -1;
            /* A key given twice: the later value wins; null drops the key (also one given
             * earlier in the same object). */
            int at = n;
            for (int i = 0; i < n; i++)
                if (strcmp(v[i].key, k) == 0)
                    at = i;
            if (is_null) {
                if (at < n) {
                    memmove(v + at, v + at + 1, (size_t)(n - at - 1) * sizeof(*v));
                    n--;
                }
            } else {
                v[at].key = k;
                v[at].value = val;
                if (at == n)
                    n++;
            }
            ws(&j);
            if (*j.p == ',') {
                j.p++;
                continue;
            }
            if (*j.p == '}') {
                j.p++;
                break;
            }
            return -1;
        }
    }
    ws(&j);
    if (*j.p != '\0')
        return -1;
    qsort(v, (size_t)n, sizeof(*v), cmp_setting);
    *out = v;
    return n;
}

/* ---- records ------------------------------------------------------------------------------ */

static void *arena_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

static size_t slen(const char *s) { return s ? strlen(s) + 1 : 0; }

static char *scopy(char **cursor, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = *cursor;
    memcpy(d, s, n);
    *cursor += n;
    return d;
}

tenant_rec *tenant_rec_new(int64_t id, const char *slug, const char *name, int state,
                           const char *placement, const char *storage, int max_workers,
                           int64_t created_at, int64_t updated_at, const char *settings_json)
{
    arena *tmp = arena_create(4096);
    if (tmp == NULL)
        return NULL;
    /* NULL strings become "" (and "{}"): once, here, so that the size counted below and the
     * bytes copied after it are the same (they were not: a NULL overflowed the record). */
    slug = slug ? slug : "";
    name = name ? name : "";
    placement = placement ? placement : "";
    storage = storage ? storage : "";
    settings_json = settings_json ? settings_json : "{}";
    tenant_setting *set = NULL;
    int ns = settings_parse(settings_json, &set, arena_cb, tmp);
    if (ns < 0) {
        arena_destroy(tmp);
        return NULL;
    }
    size_t total = sizeof(tenant_rec) + (size_t)ns * sizeof(tenant_setting) + slen(slug) +
                   slen(name) + slen(placement) + slen(storage) + slen(settings_json);
    for (int i = 0; i < ns; i++)
        total += slen(set[i].key) + slen(set[i].value);
    tenant_rec *t = malloc(total);
    if (t == NULL) {
        arena_destroy(tmp);
        return NULL;
    }
    memset(t, 0, sizeof(*t));
    tenant_setting *dst = (tenant_setting *)(t + 1);
    char *cursor = (char *)(dst + ns);
    t->id = id;
    t->state = state;
    t->max_workers = max_workers;
    t->created_at = created_at;
    t->updated_at = updated_at;
    t->slug = scopy(&cursor, slug);
    t->name = scopy(&cursor, name);
    t->placement = scopy(&cursor, placement);
    t->storage = scopy(&cursor, storage);
    t->settings_json = scopy(&cursor, settings_json);
    for (int i = 0; i < ns; i++) {
        dst[i].key = scopy(&cursor, set[i].key);
        dst[i].value = scopy(&cursor, set[i].value);
    }
    t->nsettings = ns;
    t->settings = dst;
    t->size = total;
    arena_destroy(tmp);
    return t;
}

tenant_rec *tenant_rec_dup(const tenant_rec *t)
{
    return tenant_rec_new(t->id, t->slug, t->name, t->state, t->placement, t->storage,
                          t->max_workers, t->created_at, t->updated_at, t->settings_json);
}

const char *tenant_setting_get(const tenant_rec *t, const char *key)
{
    int lo = 0, hi = t->nsettings - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(key, t->settings[mid].key);
        if (c == 0)
            return t->settings[mid].value;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}
