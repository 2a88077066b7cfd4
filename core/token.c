/*
 * token.c — random tokens and their comparison (token.h).
 *
 * Must not: keep the random bytes after use, or return early from a comparison.
 */
#include "core/first.h"
#include "core/token.h"
#include "core/rc.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define TOKEN_MAX_BYTES 64

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int token_random_b64url(char *out, size_t outlen, size_t nbytes)
{
    unsigned char raw[TOKEN_MAX_BYTES];
    if (nbytes > sizeof(raw) || outlen < (nbytes * 4 + 2) / 3 + 1)
        return TN_INVALID;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            out[0] = '\0';
            return TN_IO;
        }
        got += (size_t)n;
    }
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < nbytes; i++) {
        acc = acc << 8 | raw[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64url[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = b64url[(acc << (6 - bits)) & 63];
    out[o] = '\0';
    explicit_bzero(raw, sizeof(raw));
    return TN_OK;
}

bool token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la == lb ? 0 : 1;
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}
