/*
 * store.h — one tenant's storage opened for the panel to read (admin/ only; see store.c).
 */
#ifndef TN_ADMIN_STORE_H
#define TN_ADMIN_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "admin/page.h"
#include "storage/keep.h"
#include "storage/target.h"

typedef struct adm_store {
    tn_db *db;
    storage_target target;
    bool sqlite;
    char schema[128];             /* PostgreSQL: the tenant's schema (public in its own database) */
    int uses;                     /* PostgreSQL: requests this connection has served */
    char key[DB_KEEP_KEY];        /* PostgreSQL: which kept connection it is */
} adm_store;

/* Open tenant t's storage for the panel's own reads (the schema explorer, the fleet):
 * SQLite read-only (mode=ro), PostgreSQL scoped to the tenant's schema or database. The
 * operator's SQL never runs here (console.c: tenancy/sandbox.h). TN_OK, or an error with a
 * sentence in err. */
int store_open(adm_req *a, const tenant_rec *t, adm_store *s, char *err, size_t errlen);
void store_close(adm_store *s);   /* a clean PostgreSQL connection is kept for the next */
void store_fini(void);              /* close the kept connections */

/* Start reading (db_read_begin: SQLite arms a deadline of timeout_ms; PostgreSQL opens a
 * READ ONLY transaction with statement_timeout, search_path and the tenant's role set for
 * it alone, and checks that it is read-only). TN_OK, or an error with err set (nothing is left open). End with
 * store_ro_end. */
int store_ro_begin(adm_store *s, int64_t timeout_ms, char *err, size_t errlen);
void store_ro_end(adm_store *s);

/* The tenant's tables (target_tables), sorted by name, into an arena array. Count, or -1
 * with err. */
int store_tables(adm_store *s, arena *ar, const char ***names, char *err, size_t errlen);
bool store_has_table(adm_store *s, arena *ar, const char *name);

/* db_quote_ident into an arena string; NULL when the name cannot be quoted. */
char *store_quote(arena *ar, const char *ident);
/* One of the tenant's tables as a qualified, quoted name ("schema"."table", main."table" in
 * SQLite) for the panel's own SQL; NULL when a name cannot be quoted. */
char *store_relation(adm_store *s, arena *ar, const char *table);

#endif
