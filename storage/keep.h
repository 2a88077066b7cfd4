/*
 * keep.h — a few connections kept between requests by a process that opens its own (the
 * panel's reads, the sandbox's tenant logins), keyed by what they connect to.
 *
 * A new PostgreSQL backend pays for its catalog caches on its first queries, so such
 * callers keep a handful. A connection is kept only when clean (db_is_clean: nothing of
 * the last use left in it) and at most max_uses times, which bounds the catalog memory a
 * backend collects; the least recently kept one makes room.
 */
#ifndef TN_STORAGE_KEEP_H
#define TN_STORAGE_KEEP_H

#include <stdint.h>

#include "storage/db.h"

#define DB_KEEP_SLOTS 4
#define DB_KEEP_KEY 640

typedef struct db_keep {
    int max_uses;
    struct {
        tn_db *db;
        char key[DB_KEEP_KEY];
        int uses;
        int64_t last_ms;
    } slot[DB_KEEP_SLOTS];
} db_keep;

/* The connection kept under key (removed from k), with the uses it has served in *uses;
 * NULL (and *uses 0) when none, or when the kept one was not clean (then closed). */
tn_db *db_keep_take(db_keep *k, const char *key, int *uses);

/* Keep db under key after one more use (uses counts it): closed instead when it is not
 * clean or has served max_uses. */
void db_keep_put(db_keep *k, tn_db *db, const char *key, int uses);

/* Close every kept connection. */
void db_keep_close_all(db_keep *k);

#endif
