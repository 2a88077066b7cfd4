/*
 * sessions.h — the panel's own tables: its sessions (admin_sessions) and its failed-login
 * counters (admin_throttle), kept in the registry's database beside the registry's tables.
 *
 * They sit there because the registry is the store every worker (and every host) already
 * shares; they belong to the panel all the same: this module creates them, on the registry
 * connection the panel opens, and is the only code that names them. Nothing outside admin/
 * (not `tenancy init`, not `tenancy admin passwd`) touches them.
 *
 * Every function takes that connection (registry_db()) and returns TN_OK or a storage error
 * (tn_db_error() says why) unless its comment says otherwise.
 */
#ifndef TN_ADMIN_SESSIONS_H
#define TN_ADMIN_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "core/rc.h"
#include "storage/db.h"

/* Create the two tables when they are missing, and add the columns a registry of an older
 * layout lacks (admin_sessions.pw_fp). Idempotent, and safe while other workers or hosts do
 * the same; on a registry that has them all it only reads the catalog (so a role without
 * CREATE rights can use a registry its owner prepared). err names the table or column. */
int sessions_prepare(tn_db *db, char *err, size_t errlen);

/* ---- sessions -------------------------------------------------------------------------------- */

/* A stored session, by the SHA-256 of its id. pw_fp is the fingerprint of the password it
 * was opened with ("" in rows from before fingerprints existed). */
typedef struct session_rec {
    char user[128];
    char csrf[128];
    char pw_fp[72];
} session_rec;

/* The unexpired session id_hash (expires_at after now). TN_OK, TN_NOTFOUND, or an error. */
int sessions_find(tn_db *db, const char *id_hash, int64_t now, session_rec *out);

/* Store a new session: its id's hash, its CSRF token, who, from where, when it ends, and
 * the fingerprint of the password it was opened with. */
int sessions_add(tn_db *db, const char *id_hash, const char *csrf, const char *user,
                 const char *client, int64_t created, int64_t expires, const char *pw_fp);

/* End one session (logout, or refused). TN_OK also when there was none. */
int sessions_end(tn_db *db, const char *id_hash);

/* The fingerprint of `user`'s current password into fp: TN_OK, TN_NOTFOUND (no such user:
 * that user's sessions are ended), anything else (the password file cannot be read: they
 * are kept). */
typedef int (*sessions_fp_fn)(void *ctx, const char *user, char fp[65]);

/* End every expired session and every session whose fingerprint is no longer its user's
 * (a new password, the user removed); `fp` tells the current ones. Returns the number of
 * sessions ended, or a negative storage error. */
int sessions_sweep(tn_db *db, int64_t now, sessions_fp_fn fp, void *ctx);

/* ---- failed-login counters ------------------------------------------------------------------ */

/* The time until which `key` is locked, into *until (0 when it has no counter). */
int throttle_locked_until(tn_db *db, const char *key, int64_t *until);

/* Count one failure for `key` in one statement, so that failures overlapping in several
 * workers are each counted: a counter whose window began before window_start starts again
 * at 1. The new count into *failures. */
int throttle_fail(tn_db *db, const char *key, int64_t now, int64_t window_start,
                  int64_t *failures);

/* Lock `key` until `until`, only ever later: of two locks set at once the longer stays. */
int throttle_lock(tn_db *db, const char *key, int64_t until);

/* Forget the counters of both keys (a successful login). */
int throttle_clear(tn_db *db, const char *key1, const char *key2);

#endif
