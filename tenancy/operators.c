/*
 * operators.c — the panel's operators' names and password file (see operators.h).
 * Owns: the name rule, the `user:hash` line format, reading one line, rewriting the file.
 * Must not: hash, compare or log a password or a hash.
 */
#include "core/first.h"
#include "tenancy/operators.h"
#include "core/buf.h"
#include "core/rc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool operators_name_ok(const char *u)
{
    size_t n = strlen(u);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = u[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == '@'))
            return false;
    }
    return true;
}

const char *operators_file(const char *configured, const char *state_dir, arena *a)
{
    if (configured != NULL && configured[0] != '\0')
        return configured;
    return arena_sprintf(a, "%s/admin.passwd", state_dir != NULL ? state_dir : "");
}

/* Is `line` the line of `user` (its name, then ':')? */
static bool is_users_line(const char *line, const char *user, size_t ul)
{
    return strncmp(line, user, ul) == 0 && line[ul] == ':';
}

int operators_read_hash(const char *path, const char *user, char *out, size_t outlen)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return TN_IO;
    char line[1024];
    int rc = TN_NOTFOUND;
    size_t ul = strlen(user);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (is_users_line(line, user, ul)) {
            snprintf(out, outlen, "%s", line + ul + 1);
            rc = TN_OK;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* The file with `user`'s line replaced (*replaced: the user had one) or added, into b. */
static int new_contents(const char *path, const char *user, const char *hash, buf *b,
                        bool *replaced, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    *replaced = false;
    size_t ul = strlen(user);
    if (f != NULL) {
        char line[2048];
        while (fgets(line, sizeof(line), f) != NULL) {
            if (is_users_line(line, user, ul)) {
                if (!*replaced)
                    buf_printf(b, "%s:%s\n", user, hash);
                *replaced = true;
                continue;
            }
            buf_puts(b, line);
            if (line[strlen(line) - 1] != '\n')
                buf_putc(b, '\n');
        }
        fclose(f);
    } else if (errno != ENOENT) {
        return tn_errf(err, errlen, TN_IO, "cannot read %s: %s", path, strerror(errno));
    }
    if (!*replaced)
        buf_printf(b, "%s:%s\n", user, hash);
    return b->oom ? tn_errf(err, errlen, TN_NOMEM, "out of memory") : TN_OK;
}

static int write_whole(const char *path, const buf *b, uid_t uid, gid_t gid, char *err,
                       size_t errlen)
{
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new.%ld", path, (long)getpid()) >= sizeof(tmp))
        return tn_errf(err, errlen, TN_INVALID, "path too long: %.200s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0)
        return tn_errf(err, errlen, TN_IO, "cannot create %s: %s", tmp, strerror(errno));
    bool ok = write(fd, b->p, b->len) == (ssize_t)b->len && fsync(fd) == 0;
    /* The workers read it: it is theirs when root writes it for them. */
    if (ok && uid != (uid_t)-1)
        ok = fchown(fd, uid, gid) == 0;
    if (close(fd) != 0)
        ok = false;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return tn_errf(err, errlen, TN_IO, "cannot write %s: %s", path, strerror(e));
    }
    return TN_OK;
}

int operators_write_hash(const char *path, const char *user, const char *hash, uid_t uid,
                         gid_t gid, bool *replaced, char *err, size_t errlen)
{
    buf b = BUF_INIT;
    bool had = false;
    int rc = new_contents(path, user, hash, &b, &had, err, errlen);
    if (replaced != NULL)
        *replaced = had;
    if (rc == TN_OK)
        rc = write_whole(path, &b, uid, gid, err, errlen);
    buf_free(&b);
    return rc;
}
