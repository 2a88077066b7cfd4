/*
 * mount.h — apps mounted at path prefixes: the `mount.NAME.prefix` / `mount.NAME.app` lines
 * of tenancyd.conf, their checks, and the longest-prefix match a worker routes by.
 *
 * One tenancyd may host several app modules, as php-fpm pools let one server run several
 * apps: `app` stays the app at the root, and each mount names another module and the path
 * prefix it serves. A prefix matches on segment boundaries (`/api` takes `/api` and
 * `/api/x`, never `/apix`); the longest matching prefix wins; the app sees the rest of the
 * path (`/` when nothing is left) and its prefix through tn_mount().
 *
 * Must not: load modules (worker.c does, after the fork; main.c for -t), or log — errors go
 * back in the caller's buffer, so the config loader reports them with file and line.
 */
#ifndef TN_FCGI_MOUNT_H
#define TN_FCGI_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"

/* Most mounts in one file: each is one more module in every worker, and a request's match
 * scans them all. */
#define TN_MAX_MOUNTS 16
/* Longest prefix, and longest NAME. */
#define TN_MOUNT_PREFIX_MAX 128
#define TN_MOUNT_NAME_MAX 32

typedef struct mount_conf {
    const char *name;     /* NAME of mount.NAME.* */
    const char *prefix;   /* "/api": starts with '/', no trailing '/' */
    size_t len;           /* strlen(prefix) */
    const char *app;      /* the module's path */
} mount_conf;

/* A generation's mounts; after mount_set_finish, longest prefix first. */
typedef struct mount_set {
    mount_conf m[TN_MAX_MOUNTS];
    int n;
} mount_set;

/* One `mount.NAME.prefix` or `mount.NAME.app` line (a config loader's unknown-key hook; the
 * strings are copied into a). TN_OK, TN_NOTFOUND when key is not a mount key, TN_INVALID
 * with err set (a malformed name or prefix, a prefix already mounted, a key set twice, more
 * than TN_MAX_MOUNTS mounts), TN_NOMEM. */
int mount_set_key(mount_set *s, const char *key, const char *value, arena *a, char *err,
                  size_t errlen);

/* Once the whole file is read: every mount has both lines; then sorted, longest prefix first
 * (mount_match takes the first that matches). TN_OK or TN_INVALID with err set. */
int mount_set_finish(mount_set *s, char *err, size_t errlen);

/* Is p a prefix a mount may have? true, or false with why (a static string) set. */
bool mount_prefix_valid(const char *p, const char **why);

/* The mount path falls under: its index in s (and *rest, the path after the prefix, "/" when
 * nothing is left), or -1 when none matches (the root app's). */
static inline int mount_match(const mount_set *s, const char *path, const char **rest)
{
    for (int i = 0; i < s->n; i++) {
        const mount_conf *m = &s->m[i];
        size_t k = 0;
        while (k < m->len && path[k] == m->prefix[k])
            k++;
        if (k < m->len || (path[k] != '\0' && path[k] != '/'))
            continue;
        *rest = path[k] == '\0' ? "/" : path + k;
        return i;
    }
    return -1;
}

#endif
