/*
 * db_load.c — the PostgreSQL driver, loaded on first use (db_pg_driver in db_int.h).
 *
 * Owns: finding storage/pgdriver.so, dlopen()ing it, checking its ABI, and the db_host it is
 * handed (the few db.c functions a module cannot count on the executable exporting). One
 * load per process; a failure is kept and answered to every later call.
 *
 * Must not: include libpq-fe.h (the module owns it), or retry a failed load.
 */
#include "core/first.h"
#include "storage/db_int.h"
#include "core/log.h"
#include "core/rc.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the PostgreSQL driver ----------------------------------------------------------------
 *
 * Linked in, libpq would cost every exec of tenancyd its relocations and mappings, whether or
 * not a PostgreSQL URI is ever opened, so the driver is a module (storage/pgdriver.so,
 * linked with libpq) that is dlopen()ed the first time one is: from $TENANCY_PGDRIVER when
 * set (the build tree, tests), else from PGDRIVER_PATH (the installed one). A failed load is
 * not retried (the message is kept for every later open). A program that links pg.c itself
 * defines tn_pgdriver_entry, and then that one is used and nothing is loaded.
 */

#ifndef PGDRIVER_PATH
#define PGDRIVER_PATH "pgdriver.so"
#endif

extern db_pg_entry_fn tn_pgdriver_entry __attribute__((weak));

static void host_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void host_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

static const db_host the_host = {
    .abi = DB_HOST_ABI,
    .sizeof_db = sizeof(tn_db),
    .sizeof_rows = sizeof(tn_rows),
    .sizeof_driver = sizeof(db_driver),
    .set_error = db_set_error,
    .rows_link = db_rows_link,
    .rows_detach_all = db_rows_detach_all,
    .log = host_log,
};

static const db_driver *pg_driver;
static int pg_rc = TN_AGAIN;   /* TN_AGAIN until the one load; then its answer */
static char pg_load_error[DB_ERRLEN];

/* The one load: pg_driver, or TN_IO with why in pg_load_error. */
static int load(void)
{
    db_pg_entry_fn *entry = tn_pgdriver_entry;
    const char *path = NULL;
    char why[DB_ERRLEN] = "";
    if (entry == NULL) {
        path = secure_getenv("TENANCY_PGDRIVER");
        if (path == NULL || *path == '\0')
            path = PGDRIVER_PATH;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            const char *e = dlerror();
            return tn_errf(pg_load_error, sizeof(pg_load_error), TN_IO,
                           "the PostgreSQL driver cannot be loaded (%s; set TENANCY_PGDRIVER to "
                           "the path of pgdriver.so)",
                           e != NULL ? e : path);
        }
        *(void **)&entry = dlsym(h, DB_PG_ENTRY);
        if (entry == NULL)   /* the handle stays: unloading code we touched is not worth it */
            return tn_errf(pg_load_error, sizeof(pg_load_error), TN_IO,
                           "the PostgreSQL driver %s has no %s: not a tenancy driver", path,
                           DB_PG_ENTRY);
    }
    pg_driver = entry(&the_host, why, sizeof(why));
    if (pg_driver == NULL)
        return tn_errf(pg_load_error, sizeof(pg_load_error), TN_IO, "%s: %s",
                       path != NULL ? path : "the PostgreSQL driver", why);
    return TN_OK;
}

int db_pg_load(const db_driver **drv, char *err, size_t errlen)
{
    if (pg_rc == TN_AGAIN)
        pg_rc = load();
    *drv = pg_driver;
    return pg_rc == TN_OK ? TN_OK : tn_errf(err, errlen, pg_rc, "%s", pg_load_error);
}
