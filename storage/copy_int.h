/*
 * copy_int.h — what copy.c, copy_types.c and copy_rows.c share (storage/ only): the limits of
 * a copy, quoting, and the type and default grammar.
 *
 * Must not: be included outside storage/copy*.c.
 */
#ifndef TN_STORAGE_COPY_INT_H
#define TN_STORAGE_COPY_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "storage/copy.h"

#define MAX_COLS 1600           /* PostgreSQL's own limit */
#define MAX_INDEXES 64
#define MAX_NOTES 64
#define BATCH_PARAMS 30000      /* below SQLite's 32766 variables and PostgreSQL's 65535 */
#define BATCH_ROWS 500
#define FETCH_ROWS "2000"
#define COPY_LOCK_TIMEOUT "30s"     /* PostgreSQL: how long a move waits for a writer */

bool copy_is_pg(tn_db *db);

/* Append a quoted identifier; TN_OK, or TN_INVALID (with err) when it is not plain. */
int copy_put_ident(buf *b, const char *ident, const char *what, char *err, size_t errlen);

/* The table's name and each column's must be quotable: TN_OK or TN_INVALID with err. */
int copy_check_idents(const copy_table *t, char *err, size_t errlen);

/* A type name taken apart by the copy's grammar (copy_types.c). */
typedef struct type_parts {
    char base[128];     /* the words, lower-case, single spaces, without the arguments */
    char args[48];      /* "(10,2)" or "" (the last argument list given) */
    bool args_inside;   /* the arguments were not after the last word */
    int array;          /* number of [] */
} type_parts;
bool copy_type_parse(const char *s, type_parts *tp);
bool copy_type_is_int(const type_parts *tp);   /* an integer type without arguments */

/* A default the copy can write in the other dialect (a literal, the current time), into
 * out; false for any other expression. */
bool copy_default_for(const char *raw, bool boolean, bool to_pg, char *out, size_t outlen);

#endif
