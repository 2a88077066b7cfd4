/*
 * fuzz_script.c — the SQL script splitter of storage/db.c (migrations, seeds, DDL scripts),
 * the placeholder renumbering that shares its rules, and identifier quoting.
 *
 * Input: one byte choosing the dialect (bit 0: PostgreSQL) and the parameter count for
 * db_sql_bind_used (bits 1-6), then the script. The script is copied to a block of exactly
 * its length (the splitter takes a length, not a C string).
 *
 * Invariants:
 *   db_split_next      statements come in order, do not overlap, lie within the text, are
 *                      never blank, and each one's line is 1 + the newlines before it; the
 *                      text between them is blank (db_sql_is_blank); split again on its own,
 *                      a statement is exactly one statement, itself; an error (-1) names a
 *                      line within the text, and the same text always splits the same way;
 *   db_sql_bind_used   the rewritten statement is never longer, holds only $1..$nused, and
 *                      rewriting it again (with nused parameters) changes nothing; used[]
 *                      is increasing and within nparams;
 *   db_quote_ident     accepts exactly [A-Za-z_][A-Za-z0-9_]{0,62} and writes it in double
 *                      quotes, writing nothing otherwise.
 */
#include "core/first.h"
#include "storage/db.h"
#include "storage/db_int.h"

#include "fuzz_common.h"

static int lines_before(const char *text, const char *at)
{
    int line = 1;
    for (const char *p = text; p < at; p++)
        if (*p == '\n')
            line++;
    return line;
}

static void check_split(db_dialect d, const char *text, size_t n)
{
    db_splitter s;
    const char *stmt, *prev_end = text;
    size_t len;
    int line, r, count = 0;
    int nlines = lines_before(text, text + n);
    db_split_init(&s, d, text, n);
    while ((r = db_split_next(&s, &stmt, &len, &line)) == 1) {
        count++;
        FZ_ASSERT(stmt >= prev_end && stmt + len <= text + n, "statement %d out of place", count);
        FZ_ASSERT(len > 0, "an empty statement %d", count);
        FZ_ASSERT(!db_sql_is_blank(d, stmt, len), "statement %d is blank", count);
        FZ_ASSERT(db_sql_is_blank(d, prev_end, (size_t)(stmt - prev_end)),
                  "text before statement %d is not blank", count);
        FZ_ASSERT(line == lines_before(text, stmt), "statement %d: line %d, it starts on %d",
                  count, line, lines_before(text, stmt));
        /* On its own, the statement is one statement: itself. */
        db_splitter one;
        const char *s2;
        size_t l2;
        int line2;
        char *copy = fz_copy((const uint8_t *)stmt, len, false);
        db_split_init(&one, d, copy, len);
        FZ_ASSERT(db_split_next(&one, &s2, &l2, &line2) == 1 && s2 == copy && l2 == len &&
                      line2 == 1,
                  "statement %d does not split to itself (%zu of %zu bytes)", count, l2, len);
        FZ_ASSERT(db_split_next(&one, &s2, &l2, &line2) == 0, "statement %d splits in two",
                  count);
        free(copy);
        prev_end = stmt + len;
        if (prev_end < text + n && *prev_end == ';')
            prev_end++;
    }
    if (r == 0) {
        FZ_ASSERT(db_sql_is_blank(d, prev_end, (size_t)(text + n - prev_end)),
                  "text after the last statement is not blank");
        FZ_ASSERT(db_sql_is_blank(d, text, n) == (count == 0), "db_sql_is_blank disagrees");
    } else {
        FZ_ASSERT(r == -1, "db_split_next returned %d", r);
        FZ_ASSERT(line >= 1 && line <= nlines, "error on line %d of %d", line, nlines);
    }
    /* The same text splits the same way (db_exec_script splits twice). */
    db_split_init(&s, d, text, n);
    int again = 0;
    while (db_split_next(&s, &stmt, &len, &line) == 1)
        again++;
    FZ_ASSERT(again == count, "split twice: %d then %d statements", count, again);
}

static void check_bind(db_dialect d, const char *text, size_t n, int nparams)
{
    char *out = NULL;
    int used[64], nused = -1;
    long bad = 0;
    int rc = db_sql_bind_used(d, text, n, nparams, &out, used, &nused, &bad);
    if (rc != TN_OK) {
        FZ_ASSERT(out == NULL, "db_sql_bind_used failed and left output");
        return;
    }
    FZ_ASSERT(out != NULL, "db_sql_bind_used gave no text");
    size_t ol = strlen(out);
    FZ_ASSERT(ol <= n, "the rewritten statement grew: %zu > %zu", ol, n);
    FZ_ASSERT(nused >= 0 && nused <= nparams, "nused %d of %d", nused, nparams);
    for (int i = 0; i < nused; i++)
        FZ_ASSERT(used[i] >= 0 && used[i] < nparams && (i == 0 || used[i - 1] < used[i]),
                  "used[] not increasing within nparams");
    /* Rewriting the rewritten text changes nothing (only when it holds no NUL: the rewrite is
     * a C string). */
    if (memchr(text, '\0', n) == NULL) {
        char *out2 = NULL;
        int used2[64], nused2;
        rc = db_sql_bind_used(d, out, ol, nused, &out2, used2, &nused2, &bad);
        FZ_ASSERT(rc == TN_OK, "the rewritten statement is refused (a placeholder beyond $%d)",
                  nused);
        FZ_ASSERT(strcmp(out, out2) == 0, "rewriting twice changes the text");
        FZ_ASSERT(nused2 == nused, "rewriting twice changes the count");
        for (int i = 0; i < nused2; i++)
            FZ_ASSERT(used2[i] == i, "rewritten parameters are not 1..n");
        free(out2);
    }
    free(out);
}

static void check_ident(const char *s)
{
    char out[80];
    memset(out, 'X', sizeof(out));
    int rc = db_quote_ident(s, out, sizeof(out));
    size_t n = strlen(s);
    bool ok = n >= 1 && n <= 63;
    for (size_t i = 0; i < n && ok; i++) {
        char c = s[i];
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        ok = letter || (i > 0 && c >= '0' && c <= '9');
    }
    if (!ok) {
        FZ_ASSERT(rc != TN_OK, "db_quote_ident accepted '%s'", s);
        FZ_ASSERT(out[0] == 'X', "db_quote_ident wrote after refusing");
        return;
    }
    FZ_ASSERT(rc == TN_OK, "db_quote_ident refused '%s'", s);
    FZ_ASSERT(out[0] == '"' && strncmp(out + 1, s, n) == 0 && out[n + 1] == '"' &&
                  out[n + 2] == '\0',
              "db_quote_ident wrote %s for %s", out, s);
    FZ_ASSERT(db_quote_ident(s, out, n + 2) != TN_OK, "quoted into too small a buffer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    db_dialect d = (data[0] & 1) ? DB_DIALECT_PG : DB_DIALECT_SQLITE;
    int nparams = (data[0] >> 1) % 65;
    size_t n = size - 1;
    char *text = fz_copy(data + 1, n, false);
    check_split(d, text, n);
    check_bind(d, text, n, nparams);
    free(text);
    char *cs = fz_copy(data + 1, n < 80 ? n : 80, true);
    check_ident(cs);
    free(cs);
    return 0;
}
