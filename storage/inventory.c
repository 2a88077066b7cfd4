/*
 * inventory.c — names of the storage targets in a folder or on a server (see inventory.h).
 * Must not: open a target, or read more of a catalog than the names asked for.
 */
#include "core/first.h"
#include "storage/inventory.h"
#include "core/rc.h"
#include "storage/db.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_files(const char *dir, const char *prefix, int (*fn)(void *, const char *),
                      void *ctx, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        int e = errno;
        return tn_errf(err, errlen, e == ENOENT ? TN_NOTFOUND : TN_IO,
                       "cannot read the folder %.900s: %s", dir, strerror(e));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = TN_OK;
    struct dirent *e;
    size_t pl = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < pl + 4 || strncmp(e->d_name, prefix, pl) != 0 ||
            strcmp(e->d_name + l - 3, ".db") != 0)
            continue;
        char path[4200];
        struct stat st;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof(*nn));
            if (nn == NULL) {
                rc = TN_NOMEM;
                break;
            }
            names = nn;
        }
        if ((names[n] = strdup(path)) == NULL) {
            rc = TN_NOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == TN_OK && n > 0)   /* none: names is NULL, which qsort must not be given */
        qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (rc == TN_OK)
            rc = fn(ctx, names[i]);
        free(names[i]);
    }
    free(names);
    return rc == TN_NOMEM ? tn_errf(err, errlen, TN_NOMEM, "out of memory") : rc;
}

int inventory_list(target_kind kind, const char *where, const char *prefix,
                   int (*fn)(void *ctx, const char *name), void *ctx, char *err,
                   size_t errlen)
{
    if (kind == TARGET_SQLITE)
        return list_files(where, prefix, fn, ctx, err, errlen);
    /* A LIKE pattern with the prefix's own % _ \ escaped. */
    char pat[160];
    size_t o = 0;
    for (const char *s = prefix; *s && o < sizeof(pat) - 3; s++) {
        if (*s == '%' || *s == '_' || *s == '\\')
            pat[o++] = '\\';
        pat[o++] = *s;
    }
    pat[o++] = '%';
    pat[o] = '\0';
    /* Not a read-only connection: the driver makes one read-only by a session default, which
     * behind PgBouncer in transaction mode stays on the server session for the next client
     * of the same login (a repair's ALTER ROLE right after, the workers' writes). The one
     * statement below is this file's own. */
    tn_db *db = NULL;
    int rc = db_open(where, NULL, &db, err, errlen);
    if (rc != TN_OK)
        return rc;
    const char *p[] = {pat};
    tn_rows *rows = NULL;
    rc = tn_db_query(db, &rows,
                     kind == TARGET_PG_SCHEMA
                         ? "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 ESCAPE '\\' "
                           "ORDER BY nspname"
                         : "SELECT datname FROM pg_database WHERE datname LIKE $1 ESCAPE '\\' "
                           "ORDER BY datname",
                     1, p);
    if (rc == TN_OK) {
        while ((rc = tn_rows_next(rows)) == TN_OK)
            if ((rc = fn(ctx, tn_rows_get(rows, 0))) != TN_OK)
                break;
        if (rc == TN_DONE)
            rc = TN_OK;
        else   /* the loop ends on TN_DONE or a failure */
            rc = tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    } else {
        rc = tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    }
    tn_rows_free(rows);
    db_close(db);
    return rc;
}
