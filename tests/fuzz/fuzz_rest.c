/*
 * fuzz_rest.c — apps/data/rest.c: PostgREST's query string, Prefer and Range, and the SQL
 * written from them in both dialects.
 *
 * Input: the query string, then a 0x01 byte and the Prefer header, then a 0x01 byte and the
 * Range header (a missing part is absent; each is a C string, cut at its first NUL, as a
 * FastCGI param is). Every allocation is its own heap block, so AddressSanitizer reports a
 * read past any of them.
 *
 * Invariants:
 *   errors      a refusal is TN_INVALID or TN_TOOBIG (query), TN_INVALID (Prefer, Range),
 *               with status 400 (416 for Range), a non-empty code and message, a where that
 *               ends " at N" with N = err.at within the text read, and only printable,
 *               valid UTF-8 in message and where (they go into a JSON body);
 *   SQL         on success, SELECT/WHERE/ORDER/LIMIT in each dialect either succeed or fail
 *               with TN_NOTFOUND, 400 "unknown_column"; when they succeed the text has
 *               placeholders $1..$n in order of appearance with n = nparams = the value
 *               slots of the tree, balanced parentheses outside quoted identifiers, only
 *               our own keywords and punctuation outside quoted identifiers and $N (no input
 *               byte), and only identifiers the catalog accepted (or select's aliases);
 *   Range       the window it leaves lies within the query's limit/offset window;
 *   determinism the same input parses to the same SQL, parameters and errors twice.
 */
#include "apps/data/rest.h"

#include "fuzz_common.h"

/* ---- memory: one malloc per block, all freed after each input ---------------------------- */

static void **blocks;
static size_t nblocks, capblocks;

static void *fz_alloc(void *ctx, size_t n)
{
    (void)ctx;
    if (nblocks == capblocks) {
        capblocks = capblocks ? capblocks * 2 : 256;
        blocks = realloc(blocks, capblocks * sizeof *blocks);
        if (blocks == NULL)
            abort();
    }
    void *p = malloc(n);
    if (p == NULL)
        abort();
    blocks[nblocks++] = p;
    return p;
}

static void free_blocks(void)
{
    for (size_t i = 0; i < nblocks; i++)
        free(blocks[i]);
    nblocks = 0;
}

static const rest_mem M = {fz_alloc, NULL};

/* ---- the catalog: a few names, and every name it said yes to ------------------------------ */

static const char *const known[] = {"id", "a", "b", "c", "name", "title", "t", NULL};

static bool catalog(void *ctx, const char *column, int *type)
{
    (void)ctx;
    *type = 0;
    for (int i = 0; known[i]; i++)
        if (strcmp(known[i], column) == 0)
            return true;
    return false;
}

/* ---- errors ------------------------------------------------------------------------------- */

static void check_text(const char *s, const char *what)
{
    size_t n = strlen(s);
    FZ_ASSERT(fz_utf8_valid(s, n), "%s is not valid UTF-8", what);
    for (size_t i = 0; i < n; i++)
        FZ_ASSERT((unsigned char)s[i] >= 0x20 && s[i] != 0x7F, "%s holds a control byte", what);
}

static void check_err(const rest_err *e, int status, const char *prefix, size_t textlen)
{
    char suffix[40];
    FZ_ASSERT(e->status == status, "status %d, want %d", e->status, status);
    FZ_ASSERT(e->code != NULL && e->code[0] != '\0', "no code");
    FZ_ASSERT(e->message[0] != '\0', "no message (code %s)", e->code);
    FZ_ASSERT(e->at <= textlen, "where's offset %zu past the text (%zu)", e->at, textlen);
    snprintf(suffix, sizeof suffix, " at %zu", e->at);
    size_t wl = strlen(e->where), sl = strlen(suffix);
    FZ_ASSERT(wl > sl && strcmp(e->where + wl - sl, suffix) == 0, "where '%s' does not end '%s'",
              e->where, suffix);
    FZ_ASSERT(prefix == NULL || strncmp(e->where, prefix, strlen(prefix)) == 0,
              "where '%s' does not name its header", e->where);
    check_text(e->where, "where");
    check_text(e->message, "message");
}

/* ---- the SQL text ------------------------------------------------------------------------- */

static const char *const words[] = {"SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IS",
                                    "NULL", "TRUE", "FALSE", "UNKNOWN", "IN", "LIKE", "ILIKE",
                                    "GLOB", "ESCAPE", "ORDER", "BY", "ASC", "DESC", "NULLS",
                                    "FIRST", "LAST", "LIMIT", "OFFSET", "AS", NULL};

static bool word_ok(const char *s, size_t n)
{
    for (int i = 0; words[i]; i++)
        if (strlen(words[i]) == n && memcmp(words[i], s, n) == 0)
            return true;
    return false;
}

static bool ident_ok(const char *id, const rest_query *q)
{
    int type;
    if (catalog(NULL, id, &type))
        return true;
    for (int i = 0; i < q->nselect; i++)
        if (q->select[i].alias && strcmp(q->select[i].alias, id) == 0)
            return true;
    return false;
}

/* A quoted identifier at *i (on its '"'): decoded, checked, *i past it. */
static void scan_ident(const char *t, size_t *i, const rest_query *q)
{
    char id[256];
    size_t n = 0, p = *i + 1;
    for (;;) {
        FZ_ASSERT(t[p] != '\0', "an unterminated identifier in %s", t);
        if (t[p] == '"' && t[p + 1] != '"')
            break;
        if (t[p] == '"')
            p++;
        FZ_ASSERT(n < sizeof id - 1, "an identifier too long");
        id[n++] = t[p++];
    }
    id[n] = '\0';
    FZ_ASSERT(ident_ok(id, q), "identifier '%s' was not accepted: %s", id, t);
    *i = p + 1;
}

static void check_sql(const rest_sql *s, const rest_query *q)
{
    const char *t = s->text;
    int next = 1, depth = 0;
    FZ_ASSERT(strlen(t) == s->len, "len %zu, text %zu", s->len, strlen(t));
    for (size_t i = 0; t[i];) {
        char c = t[i];
        if (c == '"') {
            scan_ident(t, &i, q);
        } else if (c == '$') {
            int v = 0;
            for (i++; t[i] >= '0' && t[i] <= '9'; i++)
                v = v * 10 + (t[i] - '0');
            FZ_ASSERT(v == next, "placeholder $%d where $%d was due: %s", v, next, t);
            next++;
        } else if (c >= 'A' && c <= 'Z') {
            size_t b = i;
            while (t[i] >= 'A' && t[i] <= 'Z')
                i++;
            FZ_ASSERT(word_ok(t + b, i - b), "'%.*s' is no word of ours: %s", (int)(i - b),
                      t + b, t);
        } else if (strncmp(t + i, "'\\'", 3) == 0) {
            i += 3;
        } else if (strncmp(t + i, "-1", 2) == 0 && i >= 6 && strncmp(t + i - 6, "LIMIT ", 6) == 0) {
            i += 2;
        } else {
            FZ_ASSERT(strchr(" (),=<>*", c) != NULL, "byte 0x%02x is not ours: %s",
                      (unsigned char)c, t);
            depth += c == '(' ? 1 : c == ')' ? -1 : 0;
            FZ_ASSERT(depth >= 0, "a ')' without its '(': %s", t);
            i++;
        }
    }
    FZ_ASSERT(depth == 0, "unbalanced parentheses: %s", t);
    FZ_ASSERT(next - 1 == s->nparams, "%d placeholders, %d params", next - 1, s->nparams);
    for (int i = 0; i < s->nparams; i++)
        FZ_ASSERT(s->params[i] != NULL, "param %d is NULL", i + 1);
}

/* The value slots of a tree: one per comparison, one per in() value, none for is. */
static int slots(const rest_cond *k)
{
    int n = 0;
    if (k == NULL)
        return 0;
    if (k->kind != REST_LEAF) {
        for (int i = 0; i < k->nkids; i++)
            n += slots(k->kids[i]);
        return n;
    }
    return k->op == REST_IS ? 0 : k->op == REST_IN ? k->nvalues : 1;
}

/* The whole statement; its text and params into out (for the determinism check). */
static int build(const rest_query *q, rest_dialect d, rest_sql *s, rest_err *e)
{
    rest_sql_init(s, &M, d);
    int rc = rest_sql_add(s, "SELECT ");
    if (rc == TN_OK)
        rc = rest_sql_select(s, q, catalog, NULL, e);
    if (rc == TN_OK && (rc = rest_sql_add(s, " FROM ")) == TN_OK)
        rc = rest_sql_ident(s, "t");
    if (rc == TN_OK)
        rc = rest_sql_where(s, q, catalog, NULL, e);
    if (rc == TN_OK)
        rc = rest_sql_order(s, q, catalog, NULL, e);
    if (rc == TN_OK)
        rc = rest_sql_limit(s, q);
    return rc;
}

static void check_build(const rest_query *q, rest_dialect d, size_t qlen)
{
    rest_sql s1, s2;
    rest_err e1, e2;
    int rc = build(q, d, &s1, &e1);
    FZ_ASSERT(build(q, d, &s2, &e2) == rc, "building twice differs");
    if (rc != TN_OK) {
        FZ_ASSERT(rc == TN_NOTFOUND, "SQL failed with %d", rc);
        FZ_ASSERT(strcmp(e1.code, "unknown_column") == 0, "code %s", e1.code);
        check_err(&e1, 400, NULL, qlen);
        FZ_ASSERT(strcmp(e1.where, e2.where) == 0, "where differs");
        return;
    }
    check_sql(&s1, q);
    int want = slots(q->where) + (q->limit >= 0) + (q->offset > 0);
    FZ_ASSERT(s1.nparams == want, "%d params for %d value slots", s1.nparams, want);
    FZ_ASSERT(strcmp(s1.text, s2.text) == 0, "SQL differs between two builds");
    for (int i = 0; i < s1.nparams; i++)
        FZ_ASSERT(strcmp(s1.params[i], s2.params[i]) == 0, "param %d differs", i + 1);
}

/* ---- the parts ---------------------------------------------------------------------------- */

static void check_range(const rest_query *q0, const char *range, size_t qlen)
{
    rest_query q = *q0;
    rest_err e;
    int rc = rest_parse_range(range, &q, &e);
    if (rc != TN_OK) {
        FZ_ASSERT(rc == TN_INVALID, "Range rc %d", rc);
        FZ_ASSERT(strcmp(e.code, "bad_range") == 0, "Range code %s", e.code);
        check_err(&e, 416, "Range: ", strlen(range));
        return;
    }
    FZ_ASSERT(q.offset >= q0->offset, "Range moved the offset back");
    FZ_ASSERT(q.limit >= -1, "limit %lld", (long long)q.limit);
    if (q0->limit >= 0) {
        FZ_ASSERT(q.limit >= 0, "Range lifted the query's limit");
        __int128 end0 = (__int128)q0->offset + q0->limit, end = (__int128)q.offset + q.limit;
        FZ_ASSERT(q.limit == 0 || end <= end0, "Range went past the query's window");
    }
    check_build(&q, REST_SQLITE, qlen);
}

static void check_prefer(const char *h)
{
    rest_prefer p1, p2;
    rest_err e1, e2;
    int rc = rest_parse_prefer(h, &p1, &e1);
    FZ_ASSERT(rest_parse_prefer(h, &p2, &e2) == rc, "Prefer twice differs");
    if (rc != TN_OK) {
        FZ_ASSERT(rc == TN_INVALID, "Prefer rc %d", rc);
        FZ_ASSERT(p1.strict, "a refusal without handling=strict");
        FZ_ASSERT(strcmp(e1.code, "bad_prefer") == 0, "Prefer code %s", e1.code);
        check_err(&e1, 400, "Prefer: ", strlen(h));
        return;
    }
    FZ_ASSERT(memcmp(&p1, &p2, sizeof p1) == 0, "Prefer twice differs");
}

static void check_query(const char *qs, const char *range)
{
    rest_query q1, q2;
    rest_err e1, e2;
    size_t qlen = strlen(qs);
    int rc = rest_parse_query(&M, qs, &q1, &e1);
    FZ_ASSERT(rest_parse_query(&M, qs, &q2, &e2) == rc, "parsing twice differs");
    if (rc != TN_OK) {
        FZ_ASSERT(rc == TN_INVALID || rc == TN_TOOBIG, "query rc %d", rc);
        check_err(&e1, 400, NULL, qlen);
        FZ_ASSERT(strcmp(e1.code, e2.code) == 0 && strcmp(e1.where, e2.where) == 0 &&
                      strcmp(e1.message, e2.message) == 0,
                  "the error differs between two parses");
        return;
    }
    check_build(&q1, REST_POSTGRES, qlen);
    check_build(&q1, REST_SQLITE, qlen);
    if (range != NULL)
        check_range(&q1, range, qlen);
}

/* The part of [p, end) up to the next 0x01 (a C string), *p moved past it; NULL at the end. */
static char *part(const uint8_t **p, const uint8_t *end)
{
    if (*p > end)
        return NULL;
    const uint8_t *sep = memchr(*p, 0x01, (size_t)(end - *p));
    const uint8_t *e = sep ? sep : end;
    char *s = fz_copy(*p, (size_t)(e - *p), true);
    *p = sep ? sep + 1 : end + 1;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char *qs = part(&p, end);
    char *prefer = part(&p, end);
    char *range = part(&p, end);
    check_query(qs, range);
    if (prefer != NULL)
        check_prefer(prefer);
    free(qs);
    free(prefer);
    free(range);
    free_blocks();
    return 0;
}
