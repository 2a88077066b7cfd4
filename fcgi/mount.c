/*
 * mount.c — the mount lines of tenancyd.conf and their checks (see mount.h).
 * Must not: load a module, or log (the loader reports errors with file and line).
 */
#include "core/first.h"
#include "fcgi/mount.h"
#include "core/rc.h"

#include <stdlib.h>
#include <string.h>

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > TN_MOUNT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* The prefix is compared with the raw path (percent-encoding and all), so it may hold only
 * characters a client sends as they are: a '%' in it could never match what the web server
 * decoded its location from. Dot segments and empty ones are refused for the same reason:
 * the web server normalises them away before it picks a location. */
bool mount_prefix_valid(const char *p, const char **why)
{
    size_t n = strlen(p);
    if (p[0] != '/') {
        *why = "must start with '/'";
        return false;
    }
    if (n == 1) {
        *why = "'/' is the root: that app is `app`";
        return false;
    }
    if (n > TN_MOUNT_PREFIX_MAX) {
        *why = "is too long";
        return false;
    }
    if (p[n - 1] == '/') {
        *why = "must not end with '/'";
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                  || c == '-' || c == '_' || c == '.' || c == '~' || c == '/';
        if (!plain) {
            *why = "may hold only letters, digits, '-', '_', '.', '~' and '/'";
            return false;
        }
        if (c != '/')
            continue;
        const char *seg = p + i + 1;
        size_t sl = strcspn(seg, "/");
        if (sl == 0) {
            *why = "has an empty segment ('//')";
            return false;
        }
        if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.')) {
            *why = "has a '.' or '..' segment";
            return false;
        }
    }
    return true;
}

int mount_set_key(mount_set *s, const char *key, const char *value, arena *a, char *err,
                  size_t errlen)
{
    if (strncmp(key, "mount.", 6) != 0)
        return TN_NOTFOUND;
    const char *name = key + 6;
    const char *dot = strrchr(name, '.');
    if (dot == NULL || !name_ok(name, (size_t)(dot - name)) ||
        (strcmp(dot + 1, "prefix") != 0 && strcmp(dot + 1, "app") != 0))
        return tn_errf(err, errlen, TN_INVALID,
                       "%s: expected mount.NAME.prefix or mount.NAME.app, NAME of a-z, 0-9, _ "
                       "and - (at most %d)", key, TN_MOUNT_NAME_MAX);
    size_t nl = (size_t)(dot - name);
    bool is_prefix = dot[1] == 'p';
    mount_conf *m = NULL;
    for (int i = 0; i < s->n && m == NULL; i++)
        if (strlen(s->m[i].name) == nl && strncmp(s->m[i].name, name, nl) == 0)
            m = &s->m[i];
    if (m == NULL) {
        if (s->n >= TN_MAX_MOUNTS)
            return tn_errf(err, errlen, TN_INVALID, "%s: at most %d mounts", key, TN_MAX_MOUNTS);
        char *copy = arena_strndup(a, name, nl);
        if (copy == NULL)
            return tn_errf(err, errlen, TN_NOMEM, "%s: out of memory", key);
        m = &s->m[s->n++];
        *m = (mount_conf){.name = copy};
    }
    if ((is_prefix ? m->prefix : m->app) != NULL)
        return tn_errf(err, errlen, TN_INVALID, "%s: already set", key);
    if (value[0] == '\0')
        return tn_errf(err, errlen, TN_INVALID, "%s: empty value", key);
    if (is_prefix) {
        const char *why = NULL;
        if (!mount_prefix_valid(value, &why))
            return tn_errf(err, errlen, TN_INVALID, "%s: '%s' %s", key, value, why);
        for (int i = 0; i < s->n; i++)
            if (s->m[i].prefix != NULL && strcmp(s->m[i].prefix, value) == 0)
                return tn_errf(err, errlen, TN_INVALID, "%s: '%s' is mounted already (mount.%s)",
                               key, value, s->m[i].name);
    }
    char *v = arena_strdup(a, value);
    if (v == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "%s: out of memory", key);
    if (is_prefix) {
        m->prefix = v;
        m->len = strlen(v);
    } else {
        m->app = v;
    }
    return TN_OK;
}

static int longest_first(const void *x, const void *y)
{
    const mount_conf *a = x, *b = y;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return strcmp(a->prefix, b->prefix);
}

int mount_set_finish(mount_set *s, char *err, size_t errlen)
{
    for (int i = 0; i < s->n; i++) {
        if (s->m[i].prefix == NULL)
            return tn_errf(err, errlen, TN_INVALID, "mount.%s has no prefix (mount.%s.prefix)",
                           s->m[i].name, s->m[i].name);
        if (s->m[i].app == NULL)
            return tn_errf(err, errlen, TN_INVALID, "mount.%s has no app (mount.%s.app)",
                           s->m[i].name, s->m[i].name);
    }
    qsort(s->m, (size_t)s->n, sizeof(s->m[0]), longest_first);
    return TN_OK;
}
