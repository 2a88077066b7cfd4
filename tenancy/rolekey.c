/*
 * rolekey.c — the role key and the tenant roles' passwords (see rolekey.h).
 *
 * Owns: reading and making <state_dir>/role.key, and the derivation. The key is read again
 * on every call (a console query, a create): a rotated key file is seen at once, and a few
 * hundred bytes read per console query cost nothing beside its new connection.
 *
 * Must not: keep the key in memory after the call, or print it.
 */
#include "core/first.h"
#include "tenancy/rolekey.h"
#include "core/rc.h"
#include "core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define KEY_HEX 64

static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

static int read_key(const char *path, char key[KEY_HEX + 1], char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return tn_errf(err, errlen, TN_NOTFOUND,
                           "there is no role key %s: run 'tenancy init'", path);
        return tn_errf(err, errlen, TN_IO, "cannot read the role key %s: %s", path,
                       strerror(errno));
    }
    char b[KEY_HEX + 8];
    ssize_t n = read(fd, b, sizeof(b));
    close(fd);
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r'))
        n--;
    bool ok = n == KEY_HEX;
    for (ssize_t i = 0; ok && i < n; i++)
        ok = (b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f');
    if (ok)
        memcpy(key, b, KEY_HEX);
    key[KEY_HEX] = '\0';
    wipe(b, sizeof(b));
    if (!ok)
        return tn_errf(err, errlen, TN_IO, "the role key %s is not 64 hex digits", path);
    return TN_OK;
}

int rolekey_password(const tenancy_config *c, const char *role, char out[65], char *err,
                     size_t errlen)
{
    char key[KEY_HEX + 1];
    out[0] = '\0';
    if (c == NULL || c->role_key_path == NULL || role == NULL)
        return tn_errf(err, errlen, TN_INVALID, "no role key configured");
    int rc = read_key(c->role_key_path, key, err, errlen);
    if (rc != TN_OK)
        return rc;
    uint8_t mac[32];
    hmac_sha256(key, KEY_HEX, role, strlen(role), mac);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
    wipe(key, sizeof(key));
    wipe(mac, sizeof(mac));
    return TN_OK;
}

int rolekey_login_hook(void *ctx, const char *role, char out[65])
{
    char err[512];
    return rolekey_password(ctx, role, out, err, sizeof(err));
}

/* ---- the SCRAM verifier (RFC 5802, RFC 7677; what PostgreSQL stores) ----------------------
 *
 * libpq's PQencryptPasswordConn makes one with 4,096 PBKDF2 iterations, whose CPU time
 * dominated a bulk tenant create (bench/README.md, "What tenant roles cost"). The iterations
 * slow down the guessing of a password from a stolen verifier; these passwords are 256-bit
 * HMAC outputs, which no number of guesses reaches, so a few iterations lose nothing, and
 * each console login (the client computes the same PBKDF2) gets cheaper too. The password
 * is hex, which SASLprep leaves as it is. */

static void b64(const uint8_t *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}

/* PBKDF2-HMAC-SHA-256 with one output block: RFC 5802's Hi(). */
static void hi(const char *password, const uint8_t *salt, size_t saltlen, int iterations,
               uint8_t out[32])
{
    uint8_t msg[64], u[32];
    memcpy(msg, salt, saltlen);
    msg[saltlen] = 0, msg[saltlen + 1] = 0, msg[saltlen + 2] = 0, msg[saltlen + 3] = 1;
    size_t pl = strlen(password);
    hmac_sha256(password, pl, msg, saltlen + 4, u);
    memcpy(out, u, 32);
    for (int i = 1; i < iterations; i++) {
        hmac_sha256(password, pl, u, 32, u);
        for (int k = 0; k < 32; k++)
            out[k] ^= u[k];
    }
}

int rolekey_scram(const char *password, const uint8_t salt[16], int iterations, char *out,
                  size_t outlen)
{
    uint8_t salted[32], client[32], stored[32], server[32];
    hi(password, salt, 16, iterations, salted);
    hmac_sha256(salted, 32, "Client Key", 10, client);
    sha256(client, 32, stored);
    hmac_sha256(salted, 32, "Server Key", 10, server);
    char s64[32], st64[48], sv64[48];
    b64(salt, 16, s64);
    b64(stored, 32, st64);
    b64(server, 32, sv64);
    int n = snprintf(out, outlen, "SCRAM-SHA-256$%d:%s$%s:%s", iterations, s64, st64, sv64);
    wipe(salted, sizeof(salted));
    wipe(client, sizeof(client));
    return n > 0 && (size_t)n < outlen ? TN_OK : TN_TOOBIG;
}

int rolekey_verifier(const char *password, char *out, size_t outlen)
{
    uint8_t salt[16];
    if (getrandom(salt, sizeof(salt), 0) != (ssize_t)sizeof(salt))
        return TN_IO;
    return rolekey_scram(password, salt, ROLEKEY_SCRAM_ITERATIONS, out, outlen);
}

int rolekey_create(const tenancy_config *c, uid_t uid, gid_t gid, int *made, char *err,
                   size_t errlen)
{
    *made = 0;
    int fd = open(c->role_key_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return TN_OK;
    if (fd < 0)
        return tn_errf(err, errlen, TN_IO, "cannot create the role key %s: %s",
                       c->role_key_path, strerror(errno));
    uint8_t raw[32];
    char hex[KEY_HEX + 2];
    int rc = TN_OK;
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        rc = tn_errf(err, errlen, TN_IO, "getrandom: %s", strerror(errno));
    } else {
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        hex[KEY_HEX] = '\n';
        if (write(fd, hex, KEY_HEX + 1) != KEY_HEX + 1 || fsync(fd) != 0)
            rc = tn_errf(err, errlen, TN_IO, "cannot write the role key %s: %s",
                         c->role_key_path, strerror(errno));
        else if (uid != (uid_t)-1 && fchown(fd, uid, gid) != 0)
            rc = tn_errf(err, errlen, TN_IO, "cannot give the role key %s to the workers' "
                         "user: %s", c->role_key_path, strerror(errno));
    }
    close(fd);
    wipe(raw, sizeof(raw));
    wipe(hex, sizeof(hex));
    if (rc != TN_OK)
        unlink(c->role_key_path);
    else
        *made = 1;
    return rc;
}
