/*
 * sandbox.h — a connection that runs a tenant's own SQL with that tenant's rights only, and
 * the read-only query through it.
 *
 * Two callers send SQL someone typed: the panel's console (an operator's) and an app's
 * tn_db_query_sandboxed (a tenant's own clients, e.g. the data API's POST /query). Both get
 * the same connection: SQLite, the tenant's file opened read-only; PostgreSQL, a login as
 * the tenant's own role (never the placement's shared login, which is a member of every
 * tenant role and could take another's identity inside a statement with set_config). The
 * query then runs in db_query_capped's sandbox (storage/readonly.c, sqlite_read.c).
 */
#ifndef TN_TENANCY_SANDBOX_H
#define TN_TENANCY_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "storage/db.h"
#include "storage/keep.h"
#include "storage/target.h"
#include "tenancy/config.h"
#include "tenancy/tenant.h"

typedef struct sandbox {
    tn_db *db;
    storage_target target;  /* the tenant's target (role and schema for db_read_opts) */
    bool sqlite;
    char schema[80];        /* PostgreSQL: the tenant's schema, or public in its database */
    char key[DB_KEEP_KEY];  /* what a kept connection is kept under */
    int uses;               /* queries this connection served before (a kept one's count) */
} sandbox;

/* Open t's sandbox connection: a kept one (sandbox_close(keep)) when there is one for the
 * same file or role, else a new one. The uri of a SQLite file is written in `a`. TN_OK, or
 * TN_NOTFOUND (placement not configured here), TN_INVALID (no storage, no role), a storage
 * error; err says which. */
int sandbox_open(const tenancy_config *c, const tenant_rec *t, arena *a, sandbox *s,
                 char *err, size_t errlen);

/* Give the connection back: kept for the next query of the same tenant when `keep` and the
 * connection is clean, else closed. */
void sandbox_close(sandbox *s, bool keep);

/* Close every kept connection (a worker's exit). */
void sandbox_fini(void);

/* One read-only statement with parameters ($1..$n, text or NULL), in db_query_capped's
 * sandbox, at most row_cap rows, each statement stopped after timeout_ms. TN_OK with *out in
 * `a`; otherwise db_query_capped's codes with the message in err. */
int sandbox_query(sandbox *s, const char *sql, int nparams, const char *const *params,
                  int row_cap, int64_t timeout_ms, arena *a, db_result **out, char *err,
                  size_t errlen);

#endif
