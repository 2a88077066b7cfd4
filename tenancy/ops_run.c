/*
 * ops_run.c — ops_run: a command once per tenant, with that tenant's context in its
 * environment (`tenancy run`, cli/run.c); see ops.h.
 *
 * Shape: the parent reads the selection from the registry a page at a time
 * (registry_migration_list: slug, state and placement, without the domains registry_list
 * would read per tenant), reads each tenant again when its turn comes (registry_fetch: its
 * settings, and a state that may have changed since the page), and forks the command
 * itself, at most `jobs` at once. One poll loop waits for the commands' output pipes and a
 * self-pipe that the signal handlers write to (SIGCHLD, SIGINT, SIGTERM: handlers only
 * record, the loop acts), reaps with waitpid(WNOHANG) per command, and enforces the time
 * limits. Only a page of the selection, the running tenants and the resume file's done ids
 * are in memory, whatever the number of tenants.
 *
 * Why not the runner of ops_runner.c: its workers exist to keep their own registry and
 * storage connections across tasks; here each task is a program of its own, so a worker
 * would only sit between the parent and the command, forwarding signals, time limits and
 * output (more than a result's PIPE_BUF), and the runner wants every task listed before it
 * starts, where this reads the registry a page at a time.
 *
 * Each command runs in a process group of its own: the terminal's Ctrl-C reaches the parent
 * only (which decides: the first stops handing out tenants, the running ones finish; a
 * second sends SIGTERM to every running group, SIGKILL OPS_RUN_KILL_GRACE_MS later), and a
 * time limit kills the whole group (a shell's children too). Stdin is /dev/null; stdout and
 * stderr share one pipe, whose last `tail` bytes are kept. A command dies with the parent
 * (PR_SET_PDEATHSIG) and inherits none of its descriptors (the registry connection); run
 * by root with `user` set, it runs as the workers' owner, as the files it may create (a
 * SQLite file's -wal and -shm) must belong to them.
 *
 * The environment: TENANCY_SLUG, TENANCY_TENANT_ID, TENANCY_TENANT_NAME, TENANCY_STATE,
 * TENANCY_PLACEMENT, TENANCY_SETTINGS (the settings' JSON object), TENANCY_STORAGE_KIND
 * (sqlite or postgres), TENANCY_STORAGE (SQLite: the file's absolute path; PostgreSQL: a
 * libpq conninfo of the tenant's database with, in schema mode, `-c search_path=SCHEMA` in
 * its options), TENANCY_CONFIG and TENANCY_CONF (the configuration file, absolute: a
 * `tenancy` run by the command reads the same one). For PostgreSQL the conninfo logs in as
 * the tenant's own role (its password derived from the role key, as the pool's and the
 * console's logins do) when the placement's connections do (placement.NAME.login = tenant,
 * and database mode by default): the command then has that tenant's rights and no others.
 * With a shared login it is the placement's login with `-c role=ROLE`: the session starts
 * as the tenant's role, but the shared login may take every tenant's role (SET ROLE), so
 * there it is a default, not a boundary. With login = group it is the tenant's group login
 * (its password derived the same way) with `-c role=ROLE`: a boundary around its group.
 *
 * The resume file: a first line `tenancy-run 1 KEY` (KEY: SHA-256 of the command's words, so
 * a file of another command is refused), a comment line with the command, then one line per
 * finished tenant, `STATUS ID SLUG`, appended in one write(2) as the tenant ends, made
 * durable at most every OPS_FLUSH_MS and at the end. A tenant whose id has an `ok` line is
 * skipped. A line cut short (a crash mid-write) is ignored; a power loss can lose the last
 * second's lines, whose tenants then run again. The file is locked (flock) while a run
 * uses it.
 *
 * Must not: print, run SQL of its own, touch a tenant's storage (the command does), or pass
 * anything but the tenant's own context to its command.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/rc.h"
#include "core/sha256.h"
#include "storage/db.h"
#include "tenancy/lookup.h"
#include "tenancy/placement.h"
#include "tenancy/rolekey.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PAGE 500               /* tenants read from the registry at once */
#define DSN_MAX 4096

static const char *const rstatus_names[] = {"ok", "failed", "timeout", "killed", "error"};

const char *ops_rstatus_name(int status)
{
    return status >= 0 && status < OPS_R_NSTATUS ? rstatus_names[status] : "?";
}

/* ---- the tail of a command's output ------------------------------------------------------ */

int ops_tail_init(ops_tail *t, size_t cap)
{
    memset(t, 0, sizeof(*t));
    if (cap == 0)
        return TN_OK;
    t->p = malloc(cap);
    if (t->p == NULL)
        return TN_NOMEM;
    t->cap = cap;
    return TN_OK;
}

void ops_tail_add(ops_tail *t, const char *s, size_t n)
{
    t->total += (int64_t)n;
    if (t->cap == 0)
        return;
    if (n >= t->cap) {   /* only its end stays */
        memcpy(t->p, s + n - t->cap, t->cap);
        t->head = 0;
        t->len = t->cap;
        return;
    }
    size_t tail = (t->head + t->len) % t->cap;   /* where the next byte goes */
    size_t first = t->cap - tail < n ? t->cap - tail : n;
    memcpy(t->p + tail, s, first);
    memcpy(t->p, s + first, n - first);
    if (t->len + n > t->cap) {
        t->head = (t->head + (t->len + n - t->cap)) % t->cap;
        t->len = t->cap;
    } else {
        t->len += n;
    }
}

size_t ops_tail_copy(const ops_tail *t, char *out)
{
    if (t->len == 0)
        return 0;
    size_t first = t->cap - t->head < t->len ? t->cap - t->head : t->len;
    memcpy(out, t->p + t->head, first);
    memcpy(out + first, t->p, t->len - first);
    size_t skip = 0;
    /* Bytes were dropped: the kept part may begin inside a character. */
    if ((int64_t)t->len < t->total)
        while (skip < 3 && skip < t->len && ((unsigned char)out[skip] & 0xC0) == 0x80)
            skip++;
    if (skip > 0)
        memmove(out, out + skip, t->len - skip);
    return t->len - skip;
}

void ops_tail_free(ops_tail *t)
{
    free(t->p);
    memset(t, 0, sizeof(*t));
}

/* ---- the resume file --------------------------------------------------------------------- */

#define RESUME_MAGIC "tenancy-run 1 "

void ops_run_key(const char *const *argv, int argc, char out[65])
{
    tn_sha256 s;
    tn_sha256_init(&s);
    for (int i = 0; i < argc; i++)
        tn_sha256_update(&s, argv[i], strlen(argv[i]) + 1);   /* with its NUL: words apart */
    tn_sha256_final_hex(&s, out);
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool parse_id(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int ops_run_resume_parse(const char *text, size_t len, const char *key, int64_t **ids,
                         int *nids, char *err, size_t errlen)
{
    *ids = NULL;
    *nids = 0;
    int64_t *v = NULL;
    int n = 0, cap = 0, rc = TN_OK, lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        if (nl == NULL)
            break;   /* cut short: the run that wrote it did not finish that write */
        size_t ll = (size_t)(nl - line);
        pos += ll + 1;
        lineno++;
        if (lineno == 1) {
            size_t ml = sizeof(RESUME_MAGIC) - 1;
            if (ll != ml + 64 || memcmp(line, RESUME_MAGIC, ml) != 0) {
                rc = tn_errf(err, errlen, TN_INVALID, "not a resume file of tenancy run");
                goto fail;
            }
            if (key != NULL && memcmp(line + ml, key, 64) != 0) {
                rc = tn_errf(err, errlen, TN_INVALID,
                             "a resume file of another command (give it the same command, "
                             "or another file)");
                goto fail;
            }
            continue;
        }
        if (ll == 0 || line[0] == '#')
            continue;
        /* STATUS ID SLUG */
        const char *sp1 = memchr(line, ' ', ll);
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(nl - sp1 - 1)) : NULL;
        int64_t id;
        int status = -1;
        if (sp1 != NULL)
            for (int s = 0; s < OPS_R_NSTATUS; s++)
                if ((size_t)(sp1 - line) == strlen(rstatus_names[s]) &&
                    memcmp(line, rstatus_names[s], (size_t)(sp1 - line)) == 0)
                    status = s;
        if (status < 0 || sp2 == NULL || !parse_id(sp1 + 1, (size_t)(sp2 - sp1 - 1), &id) ||
            sp2 + 1 == nl) {
            rc = tn_errf(err, errlen, TN_INVALID, "line %d is not a tenant's record", lineno);
            goto fail;
        }
        if (status != OPS_R_OK)
            continue;
        if (n == cap) {
            int nc = cap ? cap * 2 : 256;
            int64_t *nv = realloc(v, (size_t)nc * sizeof(*nv));
            if (nv == NULL) {
                rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
                goto fail;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = id;
    }
    if (lineno == 0 && len > 0) {
        rc = tn_errf(err, errlen, TN_INVALID, "not a resume file of tenancy run");
        goto fail;
    }
    if (n > 0) {
        qsort(v, (size_t)n, sizeof(*v), cmp_id);
        int u = 1;
        for (int i = 1; i < n; i++)
            if (v[i] != v[u - 1])
                v[u++] = v[i];
        n = u;
    }
    *ids = v;
    *nids = n;
    return TN_OK;
fail:
    free(v);
    return rc;
}

/* ---- the PostgreSQL conninfo ------------------------------------------------------------- */

static bool put_kv(buf *b, const char *key, size_t keylen, const char *val, size_t vallen)
{
    if (b->len > 0)
        buf_putc(b, ' ');
    buf_append(b, key, keylen);
    buf_puts(b, "='");
    for (size_t i = 0; i < vallen; i++) {
        if (val[i] == '\\' || val[i] == '\'')
            buf_putc(b, '\\');
        buf_putc(b, val[i]);
    }
    buf_putc(b, '\'');
    return !b->oom;
}

int ops_run_pg_dsn(const char *conninfo, const char *schema, const char *role, char *out,
                   size_t outlen)
{
    buf b = BUF_INIT, opt = BUF_INIT, val = BUF_INIT;
    int rc = TN_OK;
    const char *p = conninfo;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (*p == '\0')
            break;
        const char *key = p;
        while ((*p >= 'a' && *p <= 'z') || *p == '_')
            p++;
        size_t keylen = (size_t)(p - key);
        while (*p == ' ')
            p++;
        if (keylen == 0 || *p != '=') {
            rc = TN_INVALID;
            goto done;
        }
        p++;
        while (*p == ' ')
            p++;
        buf_reset(&val);
        if (*p == '\'') {
            for (p++; *p != '\''; p++) {
                if (*p == '\\' && p[1] != '\0')
                    p++;
                if (*p == '\0') {
                    rc = TN_INVALID;
                    goto done;
                }
                buf_putc(&val, *p);
            }
            p++;
        } else {
            for (; *p != '\0' && *p != ' ' && *p != '\t' && *p != '\n'; p++) {
                if (*p == '\\' && p[1] != '\0')
                    p++;
                buf_putc(&val, *p);
            }
        }
        if (keylen == 7 && memcmp(key, "options", 7) == 0)
            buf_append(&opt, val.p, val.len);   /* joined with ours below */
        else
            put_kv(&b, key, keylen, val.len ? val.p : "", val.len);
    }
    /* Identifiers only (db_quote_ident's alphabet): nothing in them needs a backslash in
     * libpq's options. */
    if (schema != NULL)
        buf_printf(&opt, "%s-c search_path=%s", opt.len ? " " : "", schema);
    if (role != NULL)
        buf_printf(&opt, "%s-c role=%s", opt.len ? " " : "", role);
    if (opt.len > 0)
        put_kv(&b, "options", 7, opt.p, opt.len);
    if (b.oom || opt.oom || val.oom)
        rc = TN_NOMEM;
    else if (b.len + 1 > outlen)
        rc = TN_TOOBIG;
    else {
        memcpy(out, b.len ? b.p : "", b.len);
        out[b.len] = '\0';
    }
done:
    if (b.p != NULL)
        memset(b.p, 0, b.len);   /* it may hold a password */
    if (val.p != NULL)
        memset(val.p, 0, val.len);
    buf_free(&b);
    buf_free(&opt);
    buf_free(&val);
    return rc;
}

/* ---- the run's state --------------------------------------------------------------------- */

typedef struct entry {        /* a tenant of the page */
    int64_t id;
    char slug[64];
    int state;
    char placement[64];
} entry;

typedef struct slot {
    pid_t pid;                /* 0: free */
    int fd;                   /* its output; -1 once closed */
    tenant_rec *t;
    int64_t start_ms, deadline_ms, kill_at_ms;
    int reason;               /* OPS_R_TIMEOUT or OPS_R_KILLED once the run killed it */
    bool exited, lost;
    int wstatus;
    ops_tail tail;
} slot;

typedef struct run {
    ops_env *e;
    const ops_run_opts *o;
    ops_ran_fn fn;
    void *ctx;
    ops_run_report *rep;
    /* the selection */
    entry *page;
    int npage, ipage;
    char after[64];
    int inamed;
    bool listed_all;
    int total;                /* the bar's: tenants to run, as counted first */
    /* the commands */
    char **argv;              /* o->argv with its NULL */
    slot s[OPS_JOBS_MAX];
    int nslots, running, done, failed;
    char config[4096];        /* absolute */
    uid_t uid;
    gid_t gid;
    sigset_t mask;            /* the caller's signal mask: the commands get it */
    char *scratch;            /* a tail copied out (tail bytes) */
    /* the resume file */
    int rfd;
    bool resume_broken;
    int64_t *done_ids;
    int ndone;
    int64_t synced_ms;
    bool dirty;
    int64_t t0;
} run;

static bool want_state(const run *r, int state)
{
    if (state == TENANT_DELETING)
        return false;
    if (r->o->nslugs > 0)
        return true;
    unsigned mask = r->o->states ? r->o->states : 1u << TENANT_ACTIVE;
    return (mask & (1u << state)) != 0;
}

static bool want_placement(const run *r, const char *name)
{
    return r->o->placement == NULL || strcmp(r->o->placement, name) == 0;
}

static bool is_done(const run *r, int64_t id)
{
    return r->ndone > 0 &&
           bsearch(&id, r->done_ids, (size_t)r->ndone, sizeof(int64_t), cmp_id) != NULL;
}

typedef struct page_ctx {
    run *r;
    int n;
} page_ctx;

static int page_cb(void *ctx, const registry_migration *m)
{
    page_ctx *pc = ctx;
    entry *en = &pc->r->page[pc->n++];
    en->id = m->id;
    snprintf(en->slug, sizeof(en->slug), "%s", m->slug);
    en->state = m->state;
    snprintf(en->placement, sizeof(en->placement), "%s", m->placement);
    return TN_OK;
}

static bool named_before(const run *r, int i)
{
    for (int k = 0; k < i; k++)
        if (strcmp(r->o->slugs[k], r->o->slugs[i]) == 0)
            return true;
    return false;
}

/* The next tenant of the selection: TN_OK with *out (in r->page), TN_DONE at the end, or the
 * registry's error. Resume-done tenants are passed over. The first pass (`first`) counts
 * them, and refuses a named tenant that is not there or being deleted; later passes leave
 * such a tenant out (it changed since). */
static int next_entry(run *r, entry **out, bool first, char *err, size_t errlen)
{
    for (;;) {
        if (r->o->nslugs > 0) {
            if (r->inamed >= r->o->nslugs)
                return TN_DONE;
            int i = r->inamed++;
            if (named_before(r, i))
                continue;
            page_ctx pc = {r, 0};
            r->npage = 0;
            int rc = registry_migration_get(r->e->reg, r->o->slugs[i], page_cb, &pc);
            if (rc == TN_NOTFOUND && !first) {
                r->rep->left_out++;
                continue;
            }
            if (rc == TN_NOTFOUND)
                return tn_errf(err, errlen, rc, "no tenant '%s'", r->o->slugs[i]);
            if (rc != TN_OK)
                return tn_errf(err, errlen, rc, "cannot read tenant '%s' from the registry",
                               r->o->slugs[i]);
            entry *en = &r->page[0];
            if (en->state == TENANT_DELETING && first)
                return tn_errf(err, errlen, TN_INVALID,
                               "tenant '%s' is being deleted: not run", en->slug);
            if (is_done(r, en->id)) {
                r->rep->skipped_done += first;
                continue;
            }
            *out = en;
            return TN_OK;
        }
        if (r->ipage == r->npage) {
            if (r->listed_all)
                return TN_DONE;
            page_ctx pc = {r, 0};
            int seen = 0;
            int rc = registry_migration_list(r->e->reg, r->after, PAGE, page_cb, &pc, &seen);
            if (rc != TN_OK)
                return tn_errf(err, errlen, rc, "cannot list the tenants: %s",
                               tn_db_error(registry_db(r->e->reg)));
            r->npage = pc.n;
            r->ipage = 0;
            if (pc.n < PAGE)
                r->listed_all = true;
            if (pc.n == 0)
                return TN_DONE;
            snprintf(r->after, sizeof(r->after), "%s", r->page[pc.n - 1].slug);
        }
        entry *en = &r->page[r->ipage++];
        if (!want_state(r, en->state) || !want_placement(r, en->placement))
            continue;
        if (is_done(r, en->id)) {
            r->rep->skipped_done += first;
            continue;
        }
        *out = en;
        return TN_OK;
    }
}

static void rewind_selection(run *r)
{
    r->npage = r->ipage = 0;
    r->after[0] = '\0';
    r->inamed = 0;
    r->listed_all = false;
}

/* ---- a tenant's context ------------------------------------------------------------------ */

static void absolute(const char *path, char *out, size_t outlen)
{
    char cwd[2048];
    if (path[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
        snprintf(out, outlen, "%s", path);
    else
        snprintf(out, outlen, "%s/%s", cwd, path);
}

/* TENANCY_STORAGE and its kind. */
static int storage_of(run *r, const tenant_rec *t, char *out, size_t outlen, const char **kind,
                      char *err, size_t errlen)
{
    storage_target tg;
    int rc = placement_target(r->e->tc, t, &tg);
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, rc, "placement '%s' is not configured on this host",
                       t->placement);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "the tenant has no storage yet");
    if (tg.kind == TARGET_SQLITE) {
        *kind = "sqlite";
        absolute(tg.name, out, outlen);
        return TN_OK;
    }
    *kind = "postgres";
    const char *dbname = tg.kind == TARGET_PG_DATABASE ? tg.name : NULL;
    const char *schema = tg.kind == TARGET_PG_SCHEMA ? tg.name : NULL;
    bool own = tg.login_as_role && tg.role != NULL;
    /* the login: the tenant's own role, its group login (which then takes the role), or
     * the dsn's user */
    const char *login = own ? tg.role : tg.group_role;
    char pw[65] = "", uri[DSN_MAX];
    if (login != NULL) {
        rc = rolekey_password(r->e->tc, login, pw, err, errlen);
        if (rc != TN_OK && rc != TN_NOTFOUND)
            return rc;   /* no key at all: the server may trust the role without one */
    }
    rc = db_uri_with(tg.server, dbname, login, pw[0] ? pw : NULL, uri, sizeof(uri), err,
                     errlen);
    memset(pw, 0, sizeof(pw));
    if (rc == TN_OK) {
        const char *ci = strncmp(uri, "postgres:", 9) == 0 ? uri + 9 : uri;
        rc = ops_run_pg_dsn(ci, schema, own ? NULL : tg.role, out, outlen);
        if (rc != TN_OK)
            rc = tn_errf(err, errlen, rc, "cannot write the tenant's connection string");
    }
    memset(uri, 0, sizeof(uri));
    return rc;
}

static const char *const env_names[] = {
    "TENANCY_SLUG", "TENANCY_TENANT_ID", "TENANCY_TENANT_NAME", "TENANCY_STATE",
    "TENANCY_PLACEMENT", "TENANCY_STORAGE", "TENANCY_STORAGE_KIND", "TENANCY_SETTINGS",
    "TENANCY_CONFIG", "TENANCY_CONF"};

static bool ours(const char *kv)
{
    for (size_t i = 0; i < TN_ARRAY_LEN(env_names); i++) {
        size_t l = strlen(env_names[i]);
        if (strncmp(kv, env_names[i], l) == 0 && kv[l] == '=')
            return true;
    }
    return false;
}

static char *kv(const char *k, const char *v)
{
    size_t kl = strlen(k), vl = strlen(v);
    char *s = malloc(kl + vl + 2);
    if (s != NULL) {
        memcpy(s, k, kl);
        s[kl] = '=';
        memcpy(s + kl + 1, v, vl + 1);
    }
    return s;
}

/* The command's environment: ours, then the caller's but for the names we set. *nown gets
 * how many strings are ours to free. NULL when out of memory. */
static char **build_env(run *r, const tenant_rec *t, const char *storage, const char *kind,
                        int *nown)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + TN_ARRAY_LEN(env_names) + 1, sizeof(char *));
    if (env == NULL)
        return NULL;
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)t->id);
    const char *vals[] = {t->slug, id, t->name, tenant_state_name(t->state), t->placement,
                          storage, kind, t->settings_json ? t->settings_json : "{}",
                          r->config, r->config};
    _Static_assert(TN_ARRAY_LEN(vals) == TN_ARRAY_LEN(env_names), "a value per name");
    int k = 0;
    bool oom = false;
    for (size_t i = 0; i < TN_ARRAY_LEN(env_names); i++) {
        env[k] = kv(env_names[i], vals[i]);
        oom = oom || env[k] == NULL;
        k++;
    }
    *nown = k;
    for (size_t i = 0; i < n; i++)
        if (!ours(environ[i]))
            env[k++] = environ[i];
    env[k] = NULL;
    if (oom) {
        for (int i = 0; i < *nown; i++)
            free(env[i]);
        free(env);
        return NULL;
    }
    return env;
}

static void free_env(char **env, int nown)
{
    if (env == NULL)
        return;
    for (int i = 0; i < nown; i++) {
        if (env[i] != NULL && strncmp(env[i], "TENANCY_STORAGE=", 16) == 0)
            memset(env[i], 0, strlen(env[i]));   /* it may hold a password */
        free(env[i]);
    }
    free(env);
}

/* ---- signals ----------------------------------------------------------------------------- */

/* Handlers only record: a byte on the self-pipe wakes the loop's poll, which does the work
 * (php-fpm's fpm_signals). */
static int wake_w = -1;
static volatile sig_atomic_t stops;
static void on_signal(int sig)
{
    int saved = errno;
    if (sig != SIGCHLD)
        stops++;
    if (wake_w >= 0)
        (void)!write(wake_w, "", 1);
    errno = saved;
}

static const int caught[] = {SIGINT, SIGTERM, SIGCHLD};

/* ---- a command --------------------------------------------------------------------------- */

static TN_NORETURN void child_fail(const char *what, const char *arg)
{
    const char *why = strerror(errno);
    char line[512];
    int n = snprintf(line, sizeof(line), "tenancy run: %s%s%s: %s\n", what, arg ? " " : "",
                     arg ? arg : "", why);
    if (n > 0)
        (void)!write(STDERR_FILENO, line,
                     (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    _exit(127);
}

/* In the child, after fork: a process group of its own, the default dispositions, its
 * stdio, no other descriptor, the workers' owner, then exec. Only what is safe after fork. */
static TN_NORETURN void child_exec(const run *r, int out, char **env, const sigset_t *mask,
                                   pid_t parent)
{
    setpgid(0, 0);
    for (size_t i = 0; i < TN_ARRAY_LEN(caught); i++)
        signal(caught[i], SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)   /* the parent died before prctl */
        _exit(1);
    sigprocmask(SIG_SETMASK, mask, NULL);
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0)
        child_fail("cannot set up its input and output", NULL);
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    if (r->uid != (uid_t)-1) {
        if (setgroups(1, &r->gid) != 0 || setgid(r->gid) != 0 || setuid(r->uid) != 0)
            child_fail("cannot become the workers' owner", NULL);
    }
    environ = env;
    if (r->o->argc == 1) {
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)r->o->argv[0], NULL};
        execve("/bin/sh", argv, env);
        child_fail("cannot run", "/bin/sh");
    }
    execvp(r->argv[0], r->argv);
    child_fail("cannot run", r->argv[0]);
}

/* Tell fn and the progress callback, record it in the resume file. */
static void tell(run *r, const tenant_rec *t, ops_ran *d)
{
    ops_run_report *rep = r->rep;
    rep->count[d->status]++;
    rep->ran++;
    r->done++;
    if (d->status != OPS_R_OK)
        r->failed++;
    d->slug = t->slug;
    d->placement = t->placement;
    d->id = t->id;
    d->state = t->state;
    if (r->fn != NULL)
        r->fn(r->ctx, d);
    if (r->rfd >= 0 && !r->resume_broken) {
        char line[128];
        int n = snprintf(line, sizeof(line), "%s %lld %s\n", ops_rstatus_name(d->status),
                         (long long)t->id, t->slug);
        if (n <= 0 || (size_t)n >= sizeof(line) || write(r->rfd, line, (size_t)n) != n) {
            /* Without its record a later run would run it again: stop handing out. */
            r->resume_broken = true;
            if (rep->stopped == NULL)
                rep->stopped = "the resume file could not be written";
            tn_errf(rep->stop_err, sizeof(rep->stop_err), TN_IO, "resume file %s: %s",
                    r->o->resume, strerror(errno));
        }
        r->dirty = true;
    }
    if (r->e->progress != NULL) {
        int total = r->total > r->done + r->running ? r->total : r->done + r->running;
        ops_progress p = {.done = r->done, .total = total, .failed = r->failed,
                          .elapsed_ms = clock_mono_ms() - r->t0, .slug = t->slug,
                          .outcome = ops_rstatus_name(d->status), .error = d->error};
        r->e->progress(r->e->progress_ctx, &p);
    }
}

static void tick(run *r, bool final)
{
    if (r->e->progress == NULL)
        return;
    int total = r->total > r->done + r->running ? r->total : r->done + r->running;
    ops_progress p = {.done = r->done, .total = total, .failed = r->failed,
                      .elapsed_ms = clock_mono_ms() - r->t0, .final = final};
    r->e->progress(r->e->progress_ctx, &p);
}

static void sync_resume(run *r, bool now)
{
    if (r->rfd < 0 || !r->dirty)
        return;
    int64_t t = clock_mono_ms();
    if (!now && t - r->synced_ms < OPS_FLUSH_MS)
        return;
    (void)fdatasync(r->rfd);   /* what it protects is a power loss; a crash loses nothing */
    r->synced_ms = t;
    r->dirty = false;
}

/* A tenant that could not start. */
static void not_started(run *r, const tenant_rec *t, const char *why)
{
    ops_ran d = {.status = OPS_R_ERROR, .exit_code = -1, .error = why};
    tell(r, t, &d);
}

/* Start the command for tenant t (taken over) in a free slot. */
static void start(run *r, tenant_rec *t)
{
    char storage[DSN_MAX], why[1024];
    const char *kind = "";
    int nown = 0, pfd[2] = {-1, -1};
    char **env = NULL;
    slot *s = NULL;
    for (int i = 0; i < r->nslots && s == NULL; i++)
        if (r->s[i].pid == 0)
            s = &r->s[i];
    if (storage_of(r, t, storage, sizeof(storage), &kind, why, sizeof(why)) != TN_OK)
        goto fail;
    env = build_env(r, t, storage, kind, &nown);
    memset(storage, 0, sizeof(storage));
    if (env == NULL) {
        tn_errf(why, sizeof(why), TN_NOMEM, "out of memory");
        goto fail;
    }
    if (ops_tail_init(&s->tail, r->o->tail) != TN_OK) {
        tn_errf(why, sizeof(why), TN_NOMEM, "out of memory");
        goto fail;
    }
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        tn_errf(why, sizeof(why), TN_IO, "pipe: %s", strerror(errno));
        goto fail;
    }
    fflush(NULL);
    /* Signals blocked across fork: the child must not run our handlers before it has reset
     * them. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec(r, pfd[1], env, &r->mask, parent);
    int fork_errno = errno;
    if (pid > 0)
        setpgid(pid, pid);   /* also here: a kill(-pid) before the child's own call works */
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(pfd[1]);
    free_env(env, nown);
    env = NULL;
    if (pid < 0) {
        close(pfd[0]);
        tn_errf(why, sizeof(why), TN_IO, "fork: %s", strerror(fork_errno));
        goto fail;
    }
    fcntl(pfd[0], F_SETFL, fcntl(pfd[0], F_GETFL) | O_NONBLOCK);
    s->pid = pid;
    s->fd = pfd[0];
    s->t = t;
    s->start_ms = clock_mono_ms();
    s->deadline_ms = r->o->timeout_ms > 0 ? s->start_ms + r->o->timeout_ms : 0;
    s->kill_at_ms = 0;
    s->reason = 0;
    s->exited = s->lost = false;
    r->running++;
    return;
fail:
    free_env(env, nown);
    if (s != NULL)
        ops_tail_free(&s->tail);
    not_started(r, t, why);
    free(t);
}

static void drain(slot *s)
{
    char b[16384];
    while (s->fd >= 0) {
        ssize_t n = read(s->fd, b, sizeof(b));
        if (n > 0) {
            ops_tail_add(&s->tail, b, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {   /* every writer gone */
            close(s->fd);
            s->fd = -1;
        }
        break;   /* EAGAIN: a writer (the command, or one it left behind) is still there */
    }
}

/* The command of slot s has exited: what is left in the pipe, then its result. */
static void finish(run *r, slot *s)
{
    drain(s);
    if (s->fd >= 0)
        close(s->fd);   /* what its children write from now on is not its output */
    s->fd = -1;
    ops_ran d = {.exit_code = -1, .ms = clock_mono_ms() - s->start_ms};
    if (s->lost) {
        d.status = OPS_R_FAILED;
        d.error = "its exit status was lost (reaped elsewhere)";
    } else if (WIFEXITED(s->wstatus)) {
        d.exit_code = WEXITSTATUS(s->wstatus);
        d.status = d.exit_code == 0 ? OPS_R_OK : OPS_R_FAILED;
    } else {
        d.signal = WIFSIGNALED(s->wstatus) ? WTERMSIG(s->wstatus) : 0;
        d.status = OPS_R_FAILED;
    }
    if (s->reason != 0 && d.status != OPS_R_OK)
        d.status = s->reason;
    d.output_len = ops_tail_copy(&s->tail, r->scratch);
    d.output = r->scratch;
    d.output_bytes = s->tail.total;
    tenant_rec *t = s->t;
    ops_tail_free(&s->tail);
    s->t = NULL;
    s->pid = 0;
    r->running--;   /* before it is told: done and running never count it twice */
    tell(r, t, &d);
    free(t);
}

/* Kill slot s's process group for `reason`: SIGTERM now, SIGKILL after the grace. */
static void kill_group(slot *s, int reason, int64_t now)
{
    if (s->exited)
        return;
    if (s->reason == 0) {
        s->reason = reason;
        kill(-s->pid, SIGTERM);
        s->kill_at_ms = now + OPS_RUN_KILL_GRACE_MS;
    }
}

static void watch_clocks(run *r)
{
    int64_t now = clock_mono_ms();
    for (int i = 0; i < r->nslots; i++) {
        slot *s = &r->s[i];
        if (s->pid == 0 || s->exited)
            continue;
        if (s->deadline_ms > 0 && now >= s->deadline_ms)
            kill_group(s, OPS_R_TIMEOUT, now);
        if (s->kill_at_ms > 0 && now >= s->kill_at_ms) {
            kill(-s->pid, SIGKILL);
            s->kill_at_ms = 0;
        }
    }
}

static int poll_timeout(const run *r)
{
    int64_t now = clock_mono_ms(), wait = r->e->progress != NULL ? 100 : 1000;
    for (int i = 0; i < r->nslots; i++) {
        const slot *s = &r->s[i];
        if (s->pid == 0 || s->exited)
            continue;
        if (s->deadline_ms > 0 && s->reason == 0 && s->deadline_ms - now < wait)
            wait = s->deadline_ms - now;
        if (s->kill_at_ms > 0 && s->kill_at_ms - now < wait)
            wait = s->kill_at_ms - now;
    }
    return wait < 0 ? 0 : (int)wait;
}

/* One turn: wait for output, an exit, a signal or a clock; act on each. */
static void turn(run *r, int wake_r)
{
    struct pollfd pfd[OPS_JOBS_MAX + 1];
    int who[OPS_JOBS_MAX + 1], n = 0;
    pfd[n].fd = wake_r;
    pfd[n].events = POLLIN;
    who[n++] = -1;
    for (int i = 0; i < r->nslots; i++)
        if (r->s[i].pid != 0 && r->s[i].fd >= 0) {
            pfd[n].fd = r->s[i].fd;
            pfd[n].events = POLLIN;
            who[n++] = i;
        }
    int pr = poll(pfd, (nfds_t)n, poll_timeout(r));
    if (pr > 0) {
        for (int k = 0; k < n; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (who[k] < 0) {
                char b[64];
                while (read(wake_r, b, sizeof(b)) > 0) {
                }
            } else {
                drain(&r->s[who[k]]);
            }
        }
    }
    if (stops >= 2) {   /* the second signal: the running commands are killed */
        int64_t now = clock_mono_ms();
        for (int i = 0; i < r->nslots; i++)
            if (r->s[i].pid != 0)
                kill_group(&r->s[i], OPS_R_KILLED, now);
    }
    watch_clocks(r);
    for (int i = 0; i < r->nslots; i++) {
        slot *s = &r->s[i];
        if (s->pid == 0 || s->exited)
            continue;
        pid_t w;
        while ((w = waitpid(s->pid, &s->wstatus, WNOHANG)) < 0 && errno == EINTR) {
        }
        if (w == s->pid || (w < 0 && errno == ECHILD)) {
            s->exited = true;
            s->lost = w < 0;   /* reaped by someone else: its status is not known */
            finish(r, s);
        }
    }
}

/* ---- the run ----------------------------------------------------------------------------- */

static int open_resume(run *r, char *err, size_t errlen)
{
    const char *path = r->o->resume;
    char key[65];
    ops_run_key(r->o->argv, r->o->argc, key);
    r->rfd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (r->rfd < 0)
        return tn_errf(err, errlen, TN_IO, "resume file %s: %s", path, strerror(errno));
    if (flock(r->rfd, LOCK_EX | LOCK_NB) != 0)
        return tn_errf(err, errlen, errno == EWOULDBLOCK ? TN_BUSY : TN_IO,
                       "resume file %s: %s", path,
                       errno == EWOULDBLOCK ? "another run is using it" : strerror(errno));
    struct stat st;
    if (fstat(r->rfd, &st) != 0)
        return tn_errf(err, errlen, TN_IO, "resume file %s: %s", path, strerror(errno));
    if (st.st_size == 0) {
        buf h = BUF_INIT;
        buf_printf(&h, "%s%s\n# ", RESUME_MAGIC, key);
        for (int i = 0; i < r->o->argc; i++) {
            if (i)
                buf_putc(&h, ' ');
            for (const char *c = r->o->argv[i]; *c; c++)
                buf_putc(&h, (unsigned char)*c < 0x20 ? '?' : *c);
        }
        buf_putc(&h, '\n');
        bool ok = !h.oom && write(r->rfd, h.p, h.len) == (ssize_t)h.len;
        int we = errno;
        buf_free(&h);
        if (!ok)
            return tn_errf(err, errlen, TN_IO, "resume file %s: %s", path, strerror(we));
        r->dirty = true;
        return TN_OK;
    }
    char *text = malloc((size_t)st.st_size);
    if (text == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "resume file %s: out of memory", path);
    ssize_t got = pread(r->rfd, text, (size_t)st.st_size, 0);
    char why[256];
    int rc = got == st.st_size
                 ? ops_run_resume_parse(text, (size_t)got, key, &r->done_ids, &r->ndone, why,
                                        sizeof(why))
                 : tn_errf(why, sizeof(why), TN_IO, "%s",
                           got < 0 ? strerror(errno) : "short read");
    /* A record cut short at the end: the next line must start on a line of its own. */
    bool cut = got > 0 && text[got - 1] != '\n';
    free(text);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "resume file %s: %s", path, why);
    if (cut && write(r->rfd, "\n", 1) != 1)
        return tn_errf(err, errlen, TN_IO, "resume file %s: %s", path, strerror(errno));
    return TN_OK;
}

static int check_opts(const ops_env *e, const ops_run_opts *o, char *err, size_t errlen)
{
    if (o->argc < 1 || o->argv == NULL || o->argv[0] == NULL || o->argv[0][0] == '\0')
        return tn_errf(err, errlen, TN_INVALID, "no command to run");
    if (o->jobs < 0 || o->jobs > OPS_JOBS_MAX)
        return tn_errf(err, errlen, TN_INVALID, "jobs: 1 to %d", OPS_JOBS_MAX);
    if (o->tail > OPS_RUN_TAIL_MAX)
        return tn_errf(err, errlen, TN_INVALID, "the output kept is at most %d bytes",
                       OPS_RUN_TAIL_MAX);
    if (o->states & (1u << TENANT_DELETING))
        return tn_errf(err, errlen, TN_INVALID, "tenants being deleted are never run");
    if (o->states >> TENANT_NSTATES)
        return tn_errf(err, errlen, TN_INVALID, "no such state");
    if (o->placement != NULL && tenancy_placement(e->tc, o->placement) == NULL)
        return tn_errf(err, errlen, TN_NOTFOUND, "no placement '%s' on this host",
                       o->placement);
    for (int i = 0; i < o->nslugs; i++)
        if (!tenant_slug_valid(o->slugs[i]))
            return tn_errf(err, errlen, TN_INVALID, "'%s' is not a tenant slug", o->slugs[i]);
    return TN_OK;
}

int ops_run(ops_env *e, const ops_run_opts *o, ops_ran_fn fn, void *ctx, ops_run_report *rep,
            char *err, size_t errlen)
{
    memset(rep, 0, sizeof(*rep));
    run r;
    memset(&r, 0, sizeof(r));
    r.e = e;
    r.o = o;
    r.fn = fn;
    r.ctx = ctx;
    r.rep = rep;
    r.rfd = -1;
    r.nslots = o->jobs > 0 ? o->jobs : 1;
    rep->jobs = r.nslots;
    for (int i = 0; i < OPS_JOBS_MAX; i++)
        r.s[i].fd = -1;
    int wake[2] = {-1, -1};
    struct sigaction old[TN_ARRAY_LEN(caught)];
    bool handlers = false;
    int rc = check_opts(e, o, err, errlen);
    if (rc != TN_OK)
        return rc;
    absolute(e->conf_path != NULL ? e->conf_path : "", r.config, sizeof(r.config));
    rc = ops_workers_owner(e, &r.uid, &r.gid, err, errlen);
    if (rc != TN_OK)
        return rc;
    r.page = calloc(PAGE, sizeof(entry));
    r.scratch = malloc(o->tail > 0 ? o->tail : 1);
    r.argv = calloc((size_t)o->argc + 1, sizeof(char *));
    if (r.page == NULL || r.scratch == NULL || r.argv == NULL) {
        rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < o->argc; i++)
        r.argv[i] = (char *)o->argv[i];
    if (o->resume != NULL && (rc = open_resume(&r, err, errlen)) != TN_OK)
        goto out;

    /* Counted first (a page at a time, nothing kept): the bar's total, and every named tenant
     * checked before anything runs. */
    entry *en;
    while ((rc = next_entry(&r, &en, true, err, errlen)) == TN_OK)
        r.total++;
    if (rc != TN_DONE)
        goto out;
    rewind_selection(&r);

    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        rc = tn_errf(err, errlen, TN_IO, "pipe: %s", strerror(errno));
        goto out;
    }
    wake_w = wake[1];
    stops = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < TN_ARRAY_LEN(caught); i++)
        sigaction(caught[i], &sa, &old[i]);
    /* Unblocked while the run lasts: a caller that blocks SIGCHLD (a shell may) would
     * otherwise leave the loop to notice exits at its poll's timeout. */
    sigset_t ours;
    sigemptyset(&ours);
    for (size_t i = 0; i < TN_ARRAY_LEN(caught); i++)
        sigaddset(&ours, caught[i]);
    sigprocmask(SIG_UNBLOCK, &ours, &r.mask);
    handlers = true;

    r.t0 = clock_mono_ms();
    tick(&r, false);
    bool listed = false;
    rc = TN_OK;
    for (;;) {
        if (stops > 0 && rep->stopped == NULL)
            rep->stopped = "interrupted";
        while (rep->stopped == NULL && !listed && r.running < r.nslots) {
            char why[1024];
            int nrc = next_entry(&r, &en, false, why, sizeof(why));
            if (nrc == TN_DONE) {
                listed = true;
                break;
            }
            if (nrc != TN_OK) {
                rep->stopped = "the registry could not be read";
                tn_errf(rep->stop_err, sizeof(rep->stop_err), nrc, "%.400s", why);
                break;
            }
            /* Its turn: read again, as it is now. */
            tenant_rec *t = NULL;
            int frc = registry_fetch(e->reg, LK_SLUG, en->slug, &t);
            if (frc == TN_NOTFOUND || (frc == TN_OK && (!want_state(&r, t->state) ||
                                                        !want_placement(&r, t->placement)))) {
                rep->left_out++;
                r.total--;
                free(t);
                continue;
            }
            if (frc != TN_OK) {
                tenant_rec stub = {.id = en->id, .slug = en->slug, .state = en->state,
                                   .placement = en->placement, .name = ""};
                tn_errf(why, sizeof(why), frc, "cannot read the tenant from the registry");
                not_started(&r, &stub, why);
                continue;
            }
            start(&r, t);
        }
        if (r.running == 0 && (listed || rep->stopped != NULL))
            break;
        turn(&r, wake[0]);
        sync_resume(&r, false);
        tick(&r, false);
    }
    /* What the stop left: the rest of the selection, counted. */
    if (rep->stopped != NULL && !listed) {
        char why[256];
        while (next_entry(&r, &en, false, why, sizeof(why)) == TN_OK)
            rep->not_run++;
    }
    rep->seconds = (double)(clock_mono_ms() - r.t0) / 1000.0;
    sync_resume(&r, true);
    tick(&r, true);
    rc = TN_OK;
out:
    if (handlers) {
        sigprocmask(SIG_SETMASK, &r.mask, NULL);
        for (size_t i = 0; i < TN_ARRAY_LEN(caught); i++)
            sigaction(caught[i], &old[i], NULL);
    }
    wake_w = -1;
    if (wake[0] >= 0)
        close(wake[0]);
    if (wake[1] >= 0)
        close(wake[1]);
    if (r.rfd >= 0)
        close(r.rfd);   /* the lock with it */
    free(r.done_ids);
    free(r.page);
    free(r.scratch);
    free(r.argv);
    return rc;
}
