/*
 * rolekey.h — the passwords of PostgreSQL tenant roles, derived from the host's role key.
 *
 * Each PostgreSQL tenant has a role of its own (storage/target.h). The host reaches it two
 * ways: its login role, a member, sets it per transaction (SET LOCAL ROLE); and where the
 * SQL is a person's or a tenant client's (the panel's console), it logs in AS the role, so
 * that nothing in that session can switch to another. That login needs a password, which
 * the host derives instead of storing one per tenant: HMAC-SHA-256 of the role's name under
 * the role key, a file of 32 random bytes (hex) that `tenancy init` makes in state_dir,
 * readable by the workers' user only. Whoever holds the key can log in as any tenant role:
 * it is as secret as the placements' own credentials.
 *
 * Must not: print or log a key or a password.
 */
#ifndef TN_TENANCY_ROLEKEY_H
#define TN_TENANCY_ROLEKEY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tenancy/config.h"

/* The password of `role`, 64 hex digits and a NUL, in out. TN_OK; TN_NOTFOUND when there is
 * no role key (err says to run tenancy init); TN_IO when it cannot be read or is malformed. */
int rolekey_password(const tenancy_config *c, const char *role, char out[65], char *err,
                     size_t errlen);

/* rolekey_password as target_set_login_password's hook (ctx: the tenancy_config): how a
 * process that opens group targets learns their logins' passwords. */
int rolekey_login_hook(void *ctx, const char *role, char out[65]);

/* A SCRAM-SHA-256 verifier of password for CREATE/ALTER ROLE ... PASSWORD, made here with
 * a random salt and ROLEKEY_SCRAM_ITERATIONS (see rolekey.c for why so few): the server
 * stores it as it is and never sees the password. Its characters are base64's, digits, '$'
 * and ':' only. TN_OK, TN_IO (no randomness), TN_TOOBIG (out too small: 160 bytes do). */
int rolekey_verifier(const char *password, char *out, size_t outlen);

#define ROLEKEY_SCRAM_ITERATIONS 64

/* The same with a given salt and iteration count (for tests against known verifiers). */
int rolekey_scram(const char *password, const uint8_t salt[16], int iterations, char *out,
                  size_t outlen);

/* Make the role key when there is none (O_EXCL, mode 0600, given to uid/gid unless they are
 * -1). TN_OK (made, or already there: *made says which), or TN_IO. */
int rolekey_create(const tenancy_config *c, uid_t uid, gid_t gid, int *made, char *err,
                   size_t errlen);

#endif
