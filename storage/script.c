/*
 * script.c — SQL text without running it: identifier quoting (db_quote_ident), the script
 * splitter (statement by statement, by each dialect's quoting rules), blank-text checks,
 * db_exec_script, and the renumbering of the placeholders one statement of a seed uses
 * (db_sql_bind_used).
 *
 * Must not: put a value into SQL text, or run anything but the statements of the script
 * it was given (through the driver's exec).
 */
#include "core/first.h"
#include "core/buf.h"
#include "storage/db_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- identifiers --------------------------------------------------------------------------- */

static bool ident_start(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool ident_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Why so strict: the identifier is then safe without escaping in both dialects, fits
 * PostgreSQL's NAMEDATALEN (63 bytes) so it is never silently truncated, and means the
 * same thing on a file system (SQLite tenants are files named after it). */
int db_quote_ident(const char *ident, char *out, size_t outlen)
{
    if (ident == NULL || out == NULL || !ident_start((unsigned char)ident[0]))
        return TN_INVALID;
    size_t n = 1;
    for (; ident[n] != '\0'; n++) {
        unsigned char c = (unsigned char)ident[n];
        if (n >= 63 || !(ident_start(c) || ident_digit(c)))
            return TN_INVALID;
    }
    if (outlen < n + 3)
        return TN_INVALID;
    out[0] = '"';
    memcpy(out + 1, ident, n);
    out[n + 1] = '"';
    out[n + 2] = '\0';
    return TN_OK;
}

/* ---- the script splitter ------------------------------------------------------------------ */

void db_split_init(db_splitter *s, db_dialect dialect, const char *sql, size_t len)
{
    s->dialect = dialect;
    s->p = sql;
    s->end = sql + len;
    s->line = 1;
}

static bool word_char(unsigned char c)
{
    return ident_start(c) || ident_digit(c) || c == '$' || c >= 0x80;
}

static bool word_is(const char *w, size_t n, const char *kw)
{
    size_t k = strlen(kw);
    if (n != k)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        if (c >= 'a' && c <= 'z')
            c = (unsigned char)(c - 'a' + 'A');
        if (c != (unsigned char)kw[i])
            return false;
    }
    return true;
}

/* Skip a quoted run that opens at s->p with `open` and closes with `close`; a doubled
 * close char stands for itself; `backslash` makes \x an escape (PostgreSQL E''). */
static bool skip_quoted(db_splitter *s, char close, bool doubled, bool backslash)
{
    const char *p = s->p + 1;
    for (; p < s->end; p++) {
        if (*p == '\n')
            s->line++;
        if (backslash && *p == '\\' && p + 1 < s->end) {
            p++;
            if (*p == '\n')
                s->line++;
            continue;
        }
        if (*p == close) {
            if (doubled && p + 1 < s->end && p[1] == close) {
                p++;
                continue;
            }
            s->p = p + 1;
            return true;
        }
    }
    return false;
}

static bool skip_block_comment(db_splitter *s)
{
    bool nest = s->dialect == DB_DIALECT_PG;   /* SQLite ends at the first close */
    int depth = 1;
    const char *p = s->p + 2;
    while (p < s->end) {
        if (*p == '\n') {
            s->line++;
        } else if (*p == '*' && p + 1 < s->end && p[1] == '/') {
            p += 2;
            if (--depth == 0) {
                s->p = p;
                return true;
            }
            continue;
        } else if (nest && *p == '/' && p + 1 < s->end && p[1] == '*') {
            depth++;
            p += 2;
            continue;
        }
        p++;
    }
    return false;
}

/* At a '$' that does not continue a word: a dollar quote ($$ or $tag$) or not (a $1
 * parameter). Returns 1 skipped, 0 not a dollar quote, -1 unterminated. */
static int skip_dollar(db_splitter *s)
{
    const char *q = s->p + 1;
    if (q < s->end && ident_start((unsigned char)*q)) {
        while (q < s->end && (ident_start((unsigned char)*q) || ident_digit((unsigned char)*q) ||
                              (unsigned char)*q >= 0x80))
            q++;
    }
    if (q >= s->end || *q != '$')
        return 0;
    size_t taglen = (size_t)(q - s->p) + 1;   /* "$tag$" */
    const char *tag = s->p;
    for (const char *p = q + 1; p < s->end; p++) {
        if (*p == '\n')
            s->line++;
        if (*p == '$' && (size_t)(s->end - p) >= taglen && memcmp(p, tag, taglen) == 0) {
            s->p = p + taglen;
            return 1;
        }
    }
    return -1;
}

enum { KW_START, KW_CREATE, KW_BODY, KW_OTHER };

int db_split_next(db_splitter *s, const char **stmt, size_t *len, int *line)
{
    const char *start = NULL;
    int start_line = 0, kw = KW_START, parens = 0, blocks = 0;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p;
        const char *next = s->p + 1 < s->end ? s->p + 1 : NULL;
        if (c == '\n') {
            s->line++;
            s->p++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            s->p++;
            continue;
        }
        if (c == '-' && next != NULL && *next == '-') {
            while (s->p < s->end && *s->p != '\n')
                s->p++;
            continue;
        }
        if (c == '/' && next != NULL && *next == '*') {
            int open_line = s->line;
            if (!skip_block_comment(s)) {
                *line = open_line;
                return -1;
            }
            continue;
        }
        if (c == ';' && parens == 0 && blocks == 0) {
            s->p++;
            if (start == NULL)   /* an empty statement */
                continue;
            *stmt = start;
            *len = (size_t)(s->p - 1 - start);
            *line = start_line;
            return 1;
        }
        if (start == NULL) {
            start = s->p;
            start_line = s->line;
        }
        int open_line = s->line;
        bool ok = true;
        if (c == '\'') {
            ok = skip_quoted(s, '\'', true, false);
        } else if (c == '"') {
            ok = skip_quoted(s, '"', true, false);
        } else if (c == '`' && s->dialect == DB_DIALECT_SQLITE) {
            ok = skip_quoted(s, '`', true, false);
        } else if (c == '[' && s->dialect == DB_DIALECT_SQLITE) {
            ok = skip_quoted(s, ']', false, false);
        } else if (c == '$' && s->dialect == DB_DIALECT_PG) {
            int r = skip_dollar(s);
            ok = r >= 0;
            if (r == 0)
                s->p++;
        } else if (ident_start(c) || c >= 0x80) {
            const char *w = s->p;
            while (s->p < s->end && word_char((unsigned char)*s->p))
                s->p++;
            size_t n = (size_t)(s->p - w);
            if (s->dialect == DB_DIALECT_PG && n == 1 && (*w == 'E' || *w == 'e') &&
                s->p < s->end && *s->p == '\'') {
                ok = skip_quoted(s, '\'', true, true);   /* E'...' */
            } else if (kw == KW_START) {
                kw = word_is(w, n, "CREATE") ? KW_CREATE : KW_OTHER;
            } else if (kw == KW_CREATE) {
                if (word_is(w, n, "TRIGGER") || word_is(w, n, "FUNCTION") ||
                    word_is(w, n, "PROCEDURE"))
                    kw = KW_BODY;
                else if (!(word_is(w, n, "OR") || word_is(w, n, "REPLACE") ||
                           word_is(w, n, "TEMP") || word_is(w, n, "TEMPORARY") ||
                           word_is(w, n, "CONSTRAINT")))
                    kw = KW_OTHER;
            } else if (kw == KW_BODY) {
                if (word_is(w, n, "BEGIN") || word_is(w, n, "CASE"))
                    blocks++;
                else if (word_is(w, n, "END") && blocks > 0)
                    blocks--;
            }
        } else if (ident_digit(c)) {
            while (s->p < s->end && word_char((unsigned char)*s->p))
                s->p++;   /* 1e5, 0x1F: not words */
        } else {
            if (c == '(')
                parens++;
            else if (c == ')' && parens > 0)
                parens--;
            s->p++;
        }
        if (!ok) {
            *line = open_line;
            return -1;
        }
    }
    if (start == NULL)
        return 0;
    *stmt = start;
    *len = (size_t)(s->end - start);
    *line = start_line;
    return 1;
}

bool db_sql_is_blank(db_dialect dialect, const char *sql, size_t len)
{
    db_splitter s;
    const char *stmt;
    size_t n;
    int line;
    db_split_init(&s, dialect, sql, len);
    return db_split_next(&s, &stmt, &n, &line) == 0;
}

/* Blank as SQLite's and PostgreSQL's tokenizers see it: an unterminated block comment runs to
 * the end of the text and holds no statement. */
bool db_text_is_blank(const char *p)
{
    while (p != NULL && *p) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == ';') {
            p++;
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            if (e == NULL)
                return true;
            p = e + 2;
        } else {
            return false;
        }
    }
    return true;
}

/* ---- scripts and helpers ------------------------------------------------------------------- */

/* The whole script is split once before anything runs, so a script with an unterminated
 * quote changes nothing. Statements then run one by one (each in its own implicit
 * transaction unless the caller opened one): wrap the call in tn_db_begin/commit to make
 * a migration all-or-nothing. */
int db_exec_script(tn_db *db, const char *sql)
{
    if (db == NULL)
        return TN_INVALID;
    db->err[0] = '\0';
    db->changes = 0;
    if (sql == NULL)
        return db_set_error(db, TN_INVALID, "no SQL given");
    size_t total = strlen(sql);
    db_splitter s;
    const char *stmt;
    size_t len, longest = 0;
    int line, r;
    db_split_init(&s, db->drv->dialect, sql, total);
    while ((r = db_split_next(&s, &stmt, &len, &line)) == 1) {
        if (len > longest)
            longest = len;
    }
    if (r < 0)
        return db_set_error(db, TN_INVALID,
                            "script: unterminated string, quoted name or comment at line %d",
                            line);
    char *copy = malloc(longest + 1);
    if (copy == NULL)
        return db_set_error(db, TN_NOMEM, "script: out of memory");
    int rc = TN_OK, n = 0;
    db_split_init(&s, db->drv->dialect, sql, total);
    while (db_split_next(&s, &stmt, &len, &line) == 1) {
        n++;
        memcpy(copy, stmt, len);
        copy[len] = '\0';
        rc = db->drv->exec(db, copy, 0, NULL, DB_EXEC_NOCACHE);
        if (rc != TN_OK) {
            char why[DB_ERRLEN];   /* the message is rewritten from itself */
            str_copy(why, sizeof(why), db->err);
            rc = db_set_error(db, rc, "script statement %d (line %d): %s", n, line, why);
            break;
        }
    }
    free(copy);
    return rc;
}

/* ---- binding only the placeholders a statement uses ----------------------------------------
 * Seeds run one set of values ($1 slug, $2 name, $3 id) through statements that each use some
 * of them, while both drivers insist that every parameter given is used. The placeholders are
 * found with the splitter's own rules (skip_quoted, skip_block_comment, skip_dollar), so a
 * "$2" inside a string, a quoted name, a comment or a dollar quote is left alone. */

static int placeholder_at(const char *p, const char *end, long *n)
{
    const char *q = p + 1;
    long v = 0;
    while (q < end && ident_digit((unsigned char)*q)) {
        if (v <= DB_MAX_PARAMS)
            v = v * 10 + (*q - '0');
        q++;
    }
    *n = v;
    return (int)(q - p) > 1 ? (int)(q - p) : 0;
}

int db_sql_bind_used(db_dialect dialect, const char *stmt, size_t len, int nparams, char **out,
                     int *used, int *nused, long *bad)
{
    *out = NULL;
    *nused = 0;
    *bad = 0;
    if (nparams < 0 || nparams > 64)
        return TN_INVALID;
    int rank[64] = {0};   /* 1-based new number of each parameter used, 0 when unused */
    for (int pass = 0; pass < 2; pass++) {
        char *o = pass == 1 ? *out : NULL;
        db_splitter s;
        db_split_init(&s, dialect, stmt, len);
        const char *copied = stmt;   /* pass 1: text up to here is in o */
        while (s.p < s.end) {
            unsigned char c = (unsigned char)*s.p;
            const char *next = s.p + 1 < s.end ? s.p + 1 : NULL;
            bool ok = true;
            if (c == '-' && next != NULL && *next == '-') {
                while (s.p < s.end && *s.p != '\n')
                    s.p++;
            } else if (c == '/' && next != NULL && *next == '*') {
                ok = skip_block_comment(&s);
            } else if (c == '\'') {
                ok = skip_quoted(&s, '\'', true, false);
            } else if (c == '"') {
                ok = skip_quoted(&s, '"', true, false);
            } else if (c == '`' && dialect == DB_DIALECT_SQLITE) {
                ok = skip_quoted(&s, '`', true, false);
            } else if (c == '[' && dialect == DB_DIALECT_SQLITE) {
                ok = skip_quoted(&s, ']', false, false);
            } else if (c == '$') {
                int r = dialect == DB_DIALECT_PG ? skip_dollar(&s) : 0;
                long n;
                int plen = r == 0 ? placeholder_at(s.p, s.end, &n) : 0;
                ok = r >= 0;
                if (plen > 0) {
                    if (n < 1 || n > nparams) {
                        free(*out);
                        *out = NULL;
                        *bad = n;
                        return TN_INVALID;
                    }
                    if (pass == 0) {
                        rank[n - 1] = 1;
                    } else {
                        memcpy(o, copied, (size_t)(s.p - copied));
                        o += s.p - copied;
                        o += sprintf(o, "$%d", rank[n - 1]);
                        copied = s.p + plen;
                    }
                    s.p += plen;
                } else if (r == 0) {
                    s.p++;
                }
            } else if (ident_start(c) || c >= 0x80) {
                const char *w = s.p;
                while (s.p < s.end && word_char((unsigned char)*s.p))
                    s.p++;   /* a$1 is a name, not a placeholder */
                if (dialect == DB_DIALECT_PG && s.p - w == 1 && (*w == 'E' || *w == 'e') &&
                    s.p < s.end && *s.p == '\'')
                    ok = skip_quoted(&s, '\'', true, true);
            } else if (ident_digit(c)) {
                while (s.p < s.end && word_char((unsigned char)*s.p))
                    s.p++;
            } else {
                s.p++;
            }
            if (!ok) {
                free(*out);
                *out = NULL;
                return TN_INVALID;
            }
        }
        if (pass == 0) {
            /* Ranks in increasing order of the original numbers; each new number is at most
             * as long as the old one, so the copy never grows. */
            for (int i = 0; i < nparams; i++)
                if (rank[i]) {
                    used[*nused] = i;
                    rank[i] = ++*nused;
                }
            *out = malloc(len + 1);
            if (*out == NULL)
                return TN_NOMEM;
        } else {
            memcpy(o, copied, (size_t)(s.end - copied));
            o += s.end - copied;
            *o = '\0';
        }
    }
    return TN_OK;
}
