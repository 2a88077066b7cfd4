/*
 * ops_env.c — what the tenant operations share (see ops.h): paths of the configuration,
 * the migration set, the workers' owner and giving files to them, a tenant role's password,
 * times as the messages write them, the progress file of a run.
 * Must not: print, or open a database.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/rc.h"
#include "tenancy/rolekey.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void ops_conf_path(const ops_env *e, const char *value, char *out, size_t outlen)
{
    const char *conf = e->conf_path != NULL ? e->conf_path : "";
    const char *slash = strrchr(conf, '/');
    if (value[0] == '/' || slash == NULL)
        snprintf(out, outlen, "%s", value);
    else
        snprintf(out, outlen, "%.*s/%s", (int)(slash - conf), conf, value);
}

int ops_migrations_load(const ops_env *e, migration_set **out, char *err, size_t errlen)
{
    const char *m = e->tc->migrations;
    char dir[4096] = "", why[1024];
    if (m != NULL && m[0] != '\0')
        ops_conf_path(e, m, dir, sizeof(dir));
    int rc = migrate_load(dir, out, why, sizeof(why));
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "storage.migrations: %s", why);
    return TN_OK;
}

void ops_utc_time(int64_t t, char *out, size_t n)
{
    out[0] = '\0';
    if (t <= 0)
        return;
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) != NULL)
        strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The workers run as `user`/`group` and must open the registry and the tenants' SQLite
 * files (SQLite in WAL mode writes a -shm file beside the database even to read it), so
 * what root makes for them is given to them. */
int ops_workers_owner(const ops_env *e, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
    *uid = (uid_t)-1;
    *gid = (gid_t)-1;
    if (e->user == NULL || e->user[0] == '\0' || geteuid() != 0)
        return TN_OK;
    struct passwd *pw = getpwnam(e->user);
    if (pw == NULL)
        return tn_errf(err, errlen, TN_INVALID, "user: no such user '%.200s'", e->user);
    *gid = pw->pw_gid;
    if (e->group != NULL && e->group[0] != '\0') {
        struct group *gr = getgrnam(e->group);
        if (gr == NULL)
            return tn_errf(err, errlen, TN_INVALID, "group: no such group '%.200s'", e->group);
        *gid = gr->gr_gid;
    }
    *uid = pw->pw_uid;
    return TN_OK;
}

int ops_give(const char *path, uid_t uid, gid_t gid, bool must_exist, char *err, size_t errlen)
{
    if (chown(path, uid, gid) == 0 || (!must_exist && errno == ENOENT))
        return TN_OK;
    return tn_errf(err, errlen, TN_IO, "cannot give %.900s to the workers' user: %s", path,
                   strerror(errno));
}

void ops_env_ready(const ops_env *e)
{
    target_set_login_password(rolekey_login_hook, (void *)e->tc);
}

/* One role's verifier into v; false without a key (a role without a password: tenancy check
 * says so). */
static bool verifier_of(const tenancy_config *tc, const char *role, char v[OPS_VERIFIER_MAX])
{
    char err[512], pw[65];
    v[0] = '\0';
    if (rolekey_password(tc, role, pw, err, sizeof(err)) != TN_OK)
        return false;
    bool ok = rolekey_verifier(pw, v, OPS_VERIFIER_MAX) == TN_OK;
    explicit_bzero(pw, sizeof(pw));
    return ok;
}

void ops_role_verifier(const tenancy_config *tc, storage_target *t, ops_verifiers *v)
{
    v->role[0] = v->group[0] = '\0';
    /* Only roles something logs in as at once get a password when they are made (it costs
     * the server half a millisecond a role): with the shared login, the console sets it
     * the first time it logs in (admin/store.c). A group login is logged in as at once. */
    if (t->role != NULL && t->login_as_role && verifier_of(tc, t->role, v->role))
        t->role_verifier = v->role;
    if (t->group_role != NULL && verifier_of(tc, t->group_role, v->group))
        t->group_verifier = v->group;
}

int ops_memory_unread(const placement *p, bool *unread, char *why, size_t whylen)
{
    *unread = false;
    if (p->kind != TARGET_PG_SCHEMA || p->server == NULL || p->max_backend_memory <= 0)
        return TN_OK;
    bool can = true;
    int rc = target_server_reads_memory(p->server, &can, why, whylen);
    *unread = rc == TN_OK && !can;
    return rc;
}

int ops_login_roles(const placement *p, int64_t *roles, char *why, size_t whylen)
{
    *roles = 0;
    bool shared = p->login == PLACEMENT_LOGIN_DEFAULT || p->login == PLACEMENT_LOGIN_SHARED;
    if (p->kind != TARGET_PG_SCHEMA || p->server == NULL || !shared)
        return TN_OK;
    bool super = false;
    int64_t n = 0;
    int rc = target_server_login_roles(p->server, &super, &n, why, whylen);
    if (rc == TN_OK && !super)
        *roles = n;
    return rc;
}

int ops_progress_write(const char *path, const ops_progress *p)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return TN_IO;
    /* a slug is [a-z0-9-], an outcome a word; a table's name is cut at a line break */
    fprintf(f, "done=%d\ntotal=%d\nfailed=%d\nseconds=%.1f\nslug=%s\noutcome=%s\n"
               "table=%.*s\nrows=%lld\nfinal=%d\n",
            p->done, p->total, p->failed, (double)p->elapsed_ms / 1000.0,
            p->slug != NULL ? p->slug : "", p->outcome != NULL ? p->outcome : "",
            p->table != NULL ? (int)strcspn(p->table, "\r\n") : 0,
            p->table != NULL ? p->table : "", (long long)p->rows, p->final ? 1 : 0);
    bool ok = fflush(f) == 0 && !ferror(f);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return TN_IO;
    }
    return TN_OK;
}

int ops_progress_read(const char *path, ops_progress_seen *out)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? TN_NOTFOUND : TN_IO;
    char line[256];
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *v = strchr(line, '=');
        if (v == NULL)
            continue;
        *v++ = '\0';
        if (strcmp(line, "done") == 0)
            out->done = atoi(v);
        else if (strcmp(line, "total") == 0)
            out->total = atoi(v);
        else if (strcmp(line, "failed") == 0)
            out->failed = atoi(v);
        else if (strcmp(line, "seconds") == 0)
            out->seconds = strtod(v, NULL);
        else if (strcmp(line, "slug") == 0)
            snprintf(out->slug, sizeof(out->slug), "%s", v);
        else if (strcmp(line, "outcome") == 0)
            snprintf(out->outcome, sizeof(out->outcome), "%s", v);
        else if (strcmp(line, "table") == 0)
            snprintf(out->table, sizeof(out->table), "%s", v);
        else if (strcmp(line, "rows") == 0)
            out->rows = atoll(v);
        else if (strcmp(line, "final") == 0)
            out->final = atoi(v) != 0;
    }
    fclose(f);
    return TN_OK;
}
