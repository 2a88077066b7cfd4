/*
 * operators.h — the panel's operators: their names and the password file that holds them.
 *
 * The file (admin.password_file, default state_dir/admin.passwd) holds `user:hash` lines,
 * the hash being libxcrypt's yescrypt. `tenancy admin passwd` writes a user's line; the panel
 * (admin/auth.c) reads one at a login and on every request. Both sides use this module, so
 * the name rule and the line format are written once, and the command needs nothing of
 * admin/.
 *
 * Must not: hash or compare passwords (the caller does, with crypt_r and a constant-time
 * compare), log a hash, or leave a half-written file where a reader can see it.
 */
#ifndef TN_TENANCY_OPERATORS_H
#define TN_TENANCY_OPERATORS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/arena.h"

/* An operator's name: 1 to 64 of letters, digits and - _ . @ (the login form and
 * `tenancy admin passwd` accept the same names). */
bool operators_name_ok(const char *user);

/* The password file: `configured` (admin.password_file) when set and not empty, else
 * <state_dir>/admin.passwd, allocated in a. NULL when out of memory. */
const char *operators_file(const char *configured, const char *state_dir, arena *a);

/* `user`'s stored hash from the file at path into out. TN_OK; TN_NOTFOUND when the user
 * has no line; TN_IO when the file cannot be opened (errno says why). */
int operators_read_hash(const char *path, const char *user, char *out, size_t outlen);

/* Replace (or add) `user`'s line with `user:hash`: the whole file is written to a temporary
 * file beside it (mode 0640, fsync'd, given to uid/gid unless uid is (uid_t)-1) and renamed
 * over it, so a reader never sees half of it. *replaced (when not NULL): the user had a
 * line. TN_OK, or TN_IO / TN_NOMEM / TN_INVALID with err set. */
int operators_write_hash(const char *path, const char *user, const char *hash, uid_t uid,
                         gid_t gid, bool *replaced, char *err, size_t errlen);

#endif
