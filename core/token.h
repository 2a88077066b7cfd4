/*
 * token.h — random tokens and their comparison: the panel's session and CSRF tokens, the
 * tenants' API keys.
 */
#ifndef TN_CORE_TOKEN_H
#define TN_CORE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* nbytes from getrandom, written in base64url without padding into out (NUL-terminated):
 * 4 characters per 3 bytes, rounded up. TN_OK; TN_INVALID when nbytes is over 64 or out
 * cannot hold the text; TN_IO when the kernel gives no randomness. */
int token_random_b64url(char *out, size_t outlen, size_t nbytes);

/* a and b are equal, in time that depends on their lengths only (never on where they
 * differ). */
bool token_equal(const char *a, const char *b);

#endif
