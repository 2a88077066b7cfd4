/*
 * keep.c — the few connections a process keeps between requests (keep.h).
 *
 * Must not: hand out a connection that is not clean, or keep more than DB_KEEP_SLOTS.
 */
#include "core/first.h"
#include "storage/keep.h"
#include "core/clock.h"

#include <stdio.h>
#include <string.h>

tn_db *db_keep_take(db_keep *k, const char *key, int *uses)
{
    *uses = 0;
    for (int i = 0; i < DB_KEEP_SLOTS; i++) {
        if (k->slot[i].db == NULL || strcmp(k->slot[i].key, key) != 0)
            continue;
        tn_db *db = k->slot[i].db;
        *uses = k->slot[i].uses;
        k->slot[i].db = NULL;
        if (db_is_clean(db))
            return db;
        db_close(db);
        *uses = 0;
        return NULL;
    }
    return NULL;
}

void db_keep_put(db_keep *k, tn_db *db, const char *key, int uses)
{
    if (uses >= k->max_uses || !db_is_clean(db)) {
        db_close(db);
        return;
    }
    int slot = 0;
    for (int i = 0; i < DB_KEEP_SLOTS; i++) {
        if (k->slot[i].db == NULL) {
            slot = i;
            break;
        }
        if (k->slot[i].last_ms < k->slot[slot].last_ms)
            slot = i;
    }
    db_close(k->slot[slot].db);
    k->slot[slot].db = db;
    k->slot[slot].uses = uses;
    k->slot[slot].last_ms = clock_mono_ms();
    snprintf(k->slot[slot].key, sizeof(k->slot[slot].key), "%s", key);
}

void db_keep_close_all(db_keep *k)
{
    for (int i = 0; i < DB_KEEP_SLOTS; i++) {
        db_close(k->slot[i].db);
        k->slot[i].db = NULL;
    }
}
