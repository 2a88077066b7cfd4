/*
 * fuzz_settings.c — settings_parse (tenancy/tenant.c): a tenant's settings, a flat JSON
 * object, and tenant_rec_new, which builds a record from them.
 *
 * The input is the JSON text (cut at its first NUL: the registry stores a C string).
 *
 * Invariants:
 *   - settings_parse accepts exactly the texts that are one JSON object whose values are all
 *     strings, numbers, booleans or null, with no \u0000 in a string (strict RFC 8259; lone
 *     surrogates refused), checked against the reader in fuzz_common.h. Bytes that are not
 *     UTF-8 inside strings are tolerated (kept as they are): the registry checks UTF-8 when a
 *     setting is written, so the model tolerates them too;
 *   - what it returns is what the object means: for each key its last value, a null removing
 *     the key (given before or after), numbers and booleans as their text; keys sorted by
 *     byte and unique; no value or key longer than the text;
 *   - serialised again (buf_json_str), the pairs parse back to the same pairs;
 *   - tenant_rec_new accepts the text when settings_parse does, and tenant_setting_get finds
 *     every pair in the record.
 */
#include "core/first.h"
#include "core/arena.h"
#include "core/buf.h"
#include "tenancy/tenant.h"

#include "fuzz_common.h"

static arena *A;

static void *alloc_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

typedef struct pair {
    char *key, *value;   /* value NULL: removed (null) */
    size_t klen, vlen;
} pair;

/* The model: read the object with the strict reader; fill pairs (last value wins, null
 * removes). Returns the number of pairs, -1 when the text is not such an object. */
static int model(const char *text, size_t n, pair *out, int cap)
{
    fz_json j = {text, n, 0, true};
    int np = 0;
    fz_json_ws(&j);
    if (j.i >= n || text[j.i] != '{')
        return -1;
    j.i++;
    fz_json_ws(&j);
    if (j.i < n && text[j.i] == '}') {
        j.i++;
    } else {
        for (;;) {
            fz_json_ws(&j);
            char *k = arena_alloc(A, n + 1);
            size_t kl;
            if (!fz_json_string(&j, k, &kl) || memchr(k, '\0', kl) != NULL)
                return -1;
            k[kl] = '\0';
            fz_json_ws(&j);
            if (j.i >= n || text[j.i] != ':')
                return -1;
            j.i++;
            fz_json_ws(&j);
            if (j.i >= n)
                return -1;
            char *v = NULL;
            size_t vl = 0;
            size_t at = j.i;
            char c = text[j.i];
            if (c == '"') {
                v = arena_alloc(A, n + 1);
                if (!fz_json_string(&j, v, &vl) || memchr(v, '\0', vl) != NULL)
                    return -1;
                v[vl] = '\0';
            } else if (c == '{' || c == '[') {
                return -1;
            } else {
                bool is_null = fz_json_lit(&j, "null");
                if (!is_null && !fz_json_lit(&j, "true") && !fz_json_lit(&j, "false") &&
                    !fz_json_number(&j))
                    return -1;
                if (!is_null) {
                    vl = j.i - at;
                    v = arena_strndup(A, text + at, vl);
                }
            }
            int found = -1;
            for (int i = 0; i < np; i++)
                if (strcmp(out[i].key, k) == 0)
                    found = i;
            if (v == NULL) {
                if (found >= 0) {
                    memmove(out + found, out + found + 1, (size_t)(np - found - 1) * sizeof(*out));
                    np--;
                }
            } else if (found >= 0) {
                out[found].value = v;
                out[found].vlen = vl;
            } else {
                if (np >= cap)
                    return -2;   /* more than the model holds: no verdict */
                out[np++] = (pair){k, v, kl, vl};
            }
            fz_json_ws(&j);
            if (j.i < n && text[j.i] == ',') {
                j.i++;
                continue;
            }
            if (j.i < n && text[j.i] == '}') {
                j.i++;
                break;
            }
            return -1;
        }
    }
    fz_json_ws(&j);
    return j.i == n ? np : -1;
}

static int cmp_pair(const void *a, const void *b)
{
    return strcmp(((const pair *)a)->key, ((const pair *)b)->key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (A == NULL)
        A = arena_create(0);
    char *text = fz_copy(data, size, true);
    size_t n = strlen(text);

    tenant_setting *set = NULL;
    int got = settings_parse(text, &set, alloc_cb, A);
    static pair want[512];
    int exp = model(text, n, want, 512);
    if (exp == -2)
        goto out;
    if (exp < 0) {
        FZ_ASSERT(got < 0, "settings_parse accepted what is not a flat JSON object: %s", text);
        goto out;
    }
    FZ_ASSERT(got >= 0, "settings_parse refused a flat JSON object: %s", text);
    FZ_ASSERT(got == exp, "settings_parse gave %d pairs, the object means %d: %s", got, exp, text);
    qsort(want, (size_t)exp, sizeof(*want), cmp_pair);
    for (int i = 0; i < got; i++) {
        FZ_ASSERT(set[i].key != NULL && set[i].value != NULL, "a NULL key or value");
        FZ_ASSERT(i == 0 || strcmp(set[i - 1].key, set[i].key) < 0, "keys not sorted/unique");
        FZ_ASSERT(strcmp(set[i].key, want[i].key) == 0, "key %d differs: '%s' vs '%s'", i,
                  set[i].key, want[i].key);
        FZ_ASSERT(strcmp(set[i].value, want[i].value) == 0,
                  "value of '%s' differs: '%s' vs '%s'", set[i].key, set[i].value, want[i].value);
        FZ_ASSERT(strlen(set[i].key) <= n && strlen(set[i].value) <= n, "longer than the text");
    }

    /* Serialised again, the same pairs. */
    buf b = BUF_INIT;
    buf_putc(&b, '{');
    for (int i = 0; i < got; i++) {
        if (i)
            buf_putc(&b, ',');
        buf_json_str(&b, set[i].key);
        buf_putc(&b, ':');
        buf_json_str(&b, set[i].value);
    }
    buf_putc(&b, '}');
    FZ_ASSERT(!b.oom, "out of memory");
    if (fz_utf8_valid(text, n)) {
        tenant_setting *again = NULL;
        int got2 = settings_parse(b.p, &again, alloc_cb, A);
        FZ_ASSERT(got2 == got, "re-serialised settings give %d pairs, not %d: %s", got2, got, b.p);
        for (int i = 0; i < got; i++)
            FZ_ASSERT(strcmp(again[i].key, set[i].key) == 0 &&
                          strcmp(again[i].value, set[i].value) == 0,
                      "re-serialised pair %d differs", i);
    }
    buf_free(&b);

    /* A record from the same text. */
    tenant_rec *t = tenant_rec_new(7, "acme", "Acme", TENANT_ACTIVE, NULL, NULL, 0, 1, 2, text);
    FZ_ASSERT(t != NULL, "tenant_rec_new refused settings settings_parse accepts");
    FZ_ASSERT(t->nsettings == got, "the record has %d settings, not %d", t->nsettings, got);
    for (int i = 0; i < got; i++) {
        const char *v = tenant_setting_get(t, set[i].key);
        FZ_ASSERT(v != NULL && strcmp(v, set[i].value) == 0, "tenant_setting_get('%s')",
                  set[i].key);
    }
    FZ_ASSERT(strcmp(t->settings_json, text) == 0, "the record does not keep the text");
    tenant_rec *d = tenant_rec_dup(t);
    FZ_ASSERT(d != NULL && d->nsettings == got && d->size == t->size, "tenant_rec_dup differs");
    free(d);
    free(t);
out:
    free(text);
    arena_reset(A);
    return 0;
}
