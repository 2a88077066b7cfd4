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
