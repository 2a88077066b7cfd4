/*
 * ops_init.c — ops_init (see ops.h): state_dir, the role key, the registry's tables and the
 * generation file, made once and idempotent; and whether a SQLite registry is missing
 * (commands other than init never create one).
 *
 * Must not: print (a placement whose public schema keeps PUBLIC's rights is a note by the
 * progress callback), or create a registry anywhere but here.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/rolekey.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir -p with mode 0755 for the folders it makes. */
static int mkdir_p(const char *path, char *err, size_t errlen)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p)) {
        return tn_errf(err, errlen, TN_INVALID, "%.900s: path too long", path);
    }
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char keep = *s;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return tn_errf(err, errlen, TN_IO, "cannot create %.900s: %s", p, strerror(errno));
        *s = keep;
        if (keep == '\0')
            break;
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return tn_errf(err, errlen, TN_IO, "%.900s is not a folder", path);
    return TN_OK;
}

bool ops_registry_missing(const tenancy_config *tc, char *path, size_t n)
{
    const char *backend = db_uri_backend(tc->registry_uri);
    if (backend == NULL || strcmp(backend, "sqlite") != 0)
        return false;
    snprintf(path, n, "%s", tc->registry_uri + strlen("sqlite:"));
    path[strcspn(path, "?")] = '\0';
    struct stat st;
    return stat(path, &st) < 0 && errno == ENOENT;
}

/* A note for the caller's progress (told, not fatal). */
static void init_note(ops_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void init_note(ops_env *e, const char *fmt, ...)
{
    if (e->progress == NULL)
        return;
    char note[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, sizeof(note), fmt, ap);
    va_end(ap);
    ops_progress pr = {0};
    pr.note = note;
    e->progress(e->progress_ctx, &pr);
}

int ops_init(ops_env *e, ops_initialized *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const tenancy_config *tc = e->tc;
    char why[1024];
    if (tc->state_dir == NULL || tc->state_dir[0] != '/')
        return tn_errf(err, errlen, TN_INVALID, "state_dir must be an absolute path");
    uid_t uid;
    gid_t gid;
    int rc = ops_workers_owner(e, &uid, &gid, err, errlen);
    if (rc != TN_OK)
        return rc;
    rc = mkdir_p(tc->state_dir, why, sizeof(why));
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "state_dir: %s", why);
    int key_made = 0;
    rc = rolekey_create(tc, uid, gid, &key_made, err, errlen);
    if (rc != TN_OK)
        return rc;
    out->key_made = key_made != 0;
    rc = registry_open(tc->registry_uri, tc->gen_path, &e->reg, why, sizeof(why));
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "cannot open the registry: %s", why);
    rc = registry_init(e->reg, err, errlen);
    if (rc != TN_OK)
        return rc;
    out->backend = db_uri_backend(tc->registry_uri);
    out->sqlite = out->backend != NULL && strcmp(out->backend, "sqlite") == 0;
    /* Schema placements: the shared database's public schema is nobody's (a tenant role
     * must reach nothing there). Told, not fatal: the login may not own it. */
    for (int i = 0; i < tc->nplacements; i++) {
        const placement *p = &tc->placements[i];
        if (p->kind != TARGET_PG_SCHEMA || p->server == NULL)
            continue;
        if (target_server_harden(p->server, why, sizeof(why)) != TN_OK)
            init_note(e, "placement %s: PUBLIC keeps its rights on the public schema (%s); "
                         "revoke them as its owner", p->name, why);
        /* The byte bound of each connection reads the backend's memory as the login. */
        bool unread = false;
        if (ops_memory_unread(p, &unread, why, sizeof(why)) == TN_OK && unread)
            init_note(e, "placement %s: " OPS_MEMORY_UNREAD "; GRANT pg_read_all_stats TO the "
                         "login to have both", p->name);
    }
    if (uid == (uid_t)-1)
        return TN_OK;
    /* Closed first: the last connection to close removes the -wal and -shm files. */
    registry_close(e->reg);
    e->reg = NULL;
    rc = ops_give(tc->state_dir, uid, gid, true, err, errlen);
    if (rc == TN_OK)
        rc = ops_give(tc->gen_path, uid, gid, true, err, errlen);
    if (rc == TN_OK && out->sqlite) {
        static const char *const suffix[] = {"", "-wal", "-shm"};
        const char *file = tc->registry_uri + strlen("sqlite:");
        int flen = (int)strcspn(file, "?");   /* without "?mode=..." */
        for (size_t k = 0; k < TN_ARRAY_LEN(suffix) && rc == TN_OK; k++) {
            char path[4200];
            snprintf(path, sizeof(path), "%.*s%s", flen, file, suffix[k]);
            rc = ops_give(path, uid, gid, k == 0, err, errlen);
        }
    }
    return rc;
}
