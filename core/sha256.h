/*
 * sha256.h — SHA-256 (FIPS 180-4): the checksums of migration files (storage/migrate.c) and
 * the hash under which the admin panel stores a session id (admin/auth.c), so the registry
 * never holds a usable cookie.
 *
 * HMAC-SHA-256 (RFC 2104) derives each PostgreSQL tenant role's password from the host's
 * role key (tenancy/rolekey.c).
 *
 * Must not: be used to store passwords (those go through yescrypt, admin/auth.c), or as a
 * MAC without the HMAC construction below.
 */
#ifndef TN_CORE_SHA256_H
#define TN_CORE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tn_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t used;
} tn_sha256;

void tn_sha256_init(tn_sha256 *s);
void tn_sha256_update(tn_sha256 *s, const void *data, size_t n);
/* Finish: the digest in out (the state is spent; init again to reuse it). */
void tn_sha256_final(tn_sha256 *s, uint8_t out[32]);
/* Finish, as 64 lowercase hex digits and a NUL. */
void tn_sha256_final_hex(tn_sha256 *s, char out[65]);

/* One-shot forms. */
void sha256(const void *data, size_t n, uint8_t out[32]);
void sha256_hex(const void *data, size_t n, char out[65]);

/* Whether the CPU's SHA instructions compute the digests (x86-64 with SHA-NI), chosen at the
 * first digest; allow false turns them off for the process (the tests compare both). */
bool sha256_accelerated(bool allow);

/* HMAC-SHA-256 of msg under key (any length). */
void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, uint8_t out[32]);

#endif
