/*
 * inventory.h — which storage targets exist on a server or in a folder, by name only.
 *
 * `tenancy check` compares these names with the registry to find storage no tenant owns
 * (orphans). Only names are read: the files of one folder, the schemas or the databases of
 * one server whose name starts with a prefix. Never a catalog-wide table listing (that is
 * the O(N^2) trap at 10,000 schemas), never anything inside a target.
 */
#ifndef TN_STORAGE_INVENTORY_H
#define TN_STORAGE_INVENTORY_H

#include <stddef.h>

#include "storage/target.h"

/* Call fn for each target of `kind` whose name starts with `prefix`:
 *   TARGET_SQLITE       the regular files <where>/<prefix>*.db (fn gets the whole path);
 *   TARGET_PG_SCHEMA    the schemas of the database `where` (a server URI) named prefix*;
 *   TARGET_PG_DATABASE  the databases of the server `where` named prefix*.
 * In name order. fn returns TN_OK to go on. TN_OK; TN_NOTFOUND when the folder is not there;
 * TN_IO when the server cannot be reached; err says why. */
int inventory_list(target_kind kind, const char *where, const char *prefix,
                   int (*fn)(void *ctx, const char *name), void *ctx, char *err,
                   size_t errlen);

#endif
