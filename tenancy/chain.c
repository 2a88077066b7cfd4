/*
 * chain.c — identification, state, limits, theme, app stages, the tenant context, and the
 * tenant half of the app API (tn_tenant_*, tn_cache_*, tn_stage_add, tn_run, tn_publish,
 * tn_events). See chain.h.
 *
 * Per-process state lives in one static struct: the lookup cache, the app cache, the API key
 * cache, the registry connection (opened on first use), the app's stages, and the current
 * tenant. tn_key_check reads keys through the same registry connection and generation as the
 * tenant lookups, so one bump flushes both caches.
 * Must not: read the host from anything but the configured params, let a request start
 * with a tenant already set, or leave one set when it ends.
 */
#include "core/first.h"
#include "tenancy/chain.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "storage/db.h"
#include "tenancy/appcache.h"
#include "tenancy/jobs.h"
#include "tenancy/keys.h"
#include "tenancy/lookup.h"
#include "tenancy/placement.h"
#include "tenancy/registry.h"
#include "tenancy/rolekey.h"
#include "tenancy/sandbox.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STAGES 16

/* The API key cache (keys.h). Every registry change flushes it (the generation), a revoke
 * included, so these only bound an answer's life where no generation file is there. */
#define KEY_CACHE_ENTRIES 4096   /* sets of 4 (keys.c): a thousand tenants' keys fit */
#define KEY_CACHE_TTL_MS 30000
#define KEY_CACHE_NEGATIVE_TTL_MS 5000
/* last_used_at is written at most this often per key (the registry's guard holds it across
 * workers and hosts; the cache's keeps a worker from even asking) */
#define KEY_TOUCH_INTERVAL_S 60

struct stage {
    const char *name;
    tn_stage_fn fn;
    void *arg;
};

/* What every request reads comes first, on two cache lines (the struct starts a line). */
static struct __attribute__((aligned(64))) {
    chain_env env;
    bool ready;
    bool in_request;
    int nstages;
    lookup_cache *lookup;
    registry *reg;
    const tenant_rec *current; /* the tenant of the request (or tn_run) in progress */
    bool table_full_logged;
    appcache *apps;
    storage_pool *pool;       /* tenants' storage connections, opened on first use */
    uint64_t crowd_uses;      /* pool_uses() when `crowded` was last worked out */
    bool crowded;             /* the pool closed a PostgreSQL connection at its bound or to
                                 make room (auto tenant.affinity sends from then on) */
    int64_t reg_retry_ms;      /* no reconnect before (after a failure) */
    struct stage stages[MAX_STAGES];
    bool stages_open;
    arena *run_arena;
    buf run_headers, run_out;
    key_cache *keys;
    bool events_remote;       /* a PostgreSQL registry: tn_publish tells the other hosts */
    buf notify;               /* tn_publish's NOTIFY payload, kept for the process */
} ch;

/* The pool asks when it logs in as a tenant's role (placement.NAME.login = tenant). */
static int role_password(void *ctx, const char *role, char out[65])
{
    char err[512];
    int rc = rolekey_password(ctx, role, out, err, sizeof(err));
    if (rc != TN_OK && rc != TN_NOTFOUND)
        log_error("storage: %s", err);
    return rc;
}

/* The storage pool's limits from the configuration (the password hook is chain_init's). */
static pool_limits pool_limits_of(const tenancy_config *c)
{
    return (pool_limits){.sqlite_max_open = c->sqlite_max_open,
                         .sqlite_cache_kib = (int)(c->sqlite_cache_bytes / 1024),
                         .pg_db_max_open = c->pg_db_max_open};
}

static uint64_t gen_now(void *ctx);

long chain_fds_wanted(const tenancy_config *c)
{
    pool_limits pl = pool_limits_of(c);
    return pool_fds_wanted(&pl);
}

int chain_init(const chain_env *env)
{
    memset(&ch, 0, sizeof(ch));
    ch.env = *env;
    const tenancy_config *c = env->cfg;
    ch.lookup = lookup_create(c->lookup_cache ? c->lookup_cache_size : 0, c->lookup_cache_ttl_ms,
                              c->lookup_cache_negative_ttl_ms);
    ch.apps = appcache_create((size_t)c->app_cache_bytes, c->app_cache_entries);
    /* each placement's max_tenants comes with its targets (storage_target.max_tenants) */
    pool_limits pl = pool_limits_of(c);
    pl.role_password = role_password;
    pl.role_password_ctx = (void *)c;
    target_set_login_password(role_password, (void *)c);   /* target_open's group logins */
    pl.generation = gen_now;   /* a kept SQLite handle's path is checked when it moved */
    ch.pool = pool_create(&pl);
    ch.keys = key_cache_create(c->lookup_cache ? KEY_CACHE_ENTRIES : 0, KEY_CACHE_TTL_MS,
                               KEY_CACHE_NEGATIVE_TTL_MS);
    if (ch.lookup == NULL || ch.apps == NULL || ch.pool == NULL || ch.keys == NULL)
        return TN_NOMEM;
    ch.events_remote = env->events != NULL && events_remote_needed(c);
    ch.ready = true;
    return TN_OK;
}

void chain_fini(void)
{
    lookup_destroy(ch.lookup);
    appcache_destroy(ch.apps);
    pool_destroy(ch.pool);
    sandbox_fini();
    key_cache_destroy(ch.keys);
    registry_close(ch.reg);
    arena_destroy(ch.run_arena);
    buf_free(&ch.run_headers);
    buf_free(&ch.run_out);
    buf_free(&ch.notify);
    memset(&ch, 0, sizeof(ch));
}

void chain_stages_open(chain_app *app)
{
    app->first_stage = ch.nstages;
    app->nstages = 0;
    ch.stages_open = true;
}

void chain_stages_close(chain_app *app)
{
    app->nstages = ch.nstages - app->first_stage;
    ch.stages_open = false;
}

const char *chain_stage(const tn_request *r) { return r->stage ? r->stage : "start"; }

/* The registry connection, opened (again) on demand; NULL while it cannot be reached (the
 * caller answers 503 and we retry after a second). */
static registry *reg(void)
{
    if (ch.reg != NULL)
        return ch.reg;
    int64_t now = clock_mono_ms();
    if (now < ch.reg_retry_ms)
        return NULL;
    char err[512];
    if (registry_open(ch.env.cfg->registry_uri, ch.env.cfg->gen_path, &ch.reg, err, sizeof(err)) !=
        TN_OK) {
        log_error("tenant registry unavailable: %s", err);
        ch.reg = NULL;
        ch.reg_retry_ms = now + 1000;
    }
    return ch.reg;
}

static int fetch(void *ctx, int kind, const char *key, tenant_rec **out)
{
    (void)ctx;
    registry *r = reg();
    if (r == NULL)
        return TN_IO;
    int rc = registry_fetch(r, kind, key, out);
    if (rc == TN_IO) {
        registry_close(ch.reg);   /* reconnect next time */
        ch.reg = NULL;
    } else if (rc == TN_INVALID) {
        /* A registry that is not initialised answers "no such table". */
        log_error("tenant registry: lookups fail (is it initialised? run `tenancy init`)");
    }
    return rc;
}

static TN_HOT uint64_t gen_now(void *ctx)
{
    (void)ctx;
    return ch.reg ? registry_generation(ch.reg) : 0;
}

/* ---- identification ---------------------------------------------------------------------- */

static TN_HOT bool is_central(const char *host)
{
    const tenancy_config *c = ch.env.cfg;
    for (int i = 0; i < c->ncentrals; i++)
        if (str_eq(c->centrals[i], host))
            return true;
    return false;
}

/* The slug a subdomain resolver sees in host (hl bytes), into out; false when host is not
 * one label below a base domain. */
static TN_HOT bool subdomain_slug(const char *host, size_t hl, char *out, size_t n)
{
    const tenancy_config *c = ch.env.cfg;
    for (int i = 0; i < c->nbases; i++) {
        const char *base = c->bases[i];   /* ".example.com" */
        size_t bl = str_len(base);
        if (hl <= bl || !str_eq(host + hl - bl, base))
            continue;
        size_t sl = hl - bl;
        if (sl >= n || mem_chr(host, '.', sl) != NULL)
            return false;
        mem_copy(out, host, sl);
        out[sl] = '\0';
        return tenant_slug_valid(out);
    }
    return false;
}

/* The slug after the path prefix ("/t/acme/x" -> "acme", rest "/x"). */
/* The slug the path names after tenant.path_prefix: TN_OK (out and *rest set), TN_NOTFOUND
 * (no prefix, or no valid slug after it), TN_INVALID (an ambiguous path:
 * request_path_ambiguous). */
static int path_slug(tn_request *r, char *out, size_t n, const char **rest)
{
    const char *pfx = ch.env.cfg->path_prefix;
    size_t pl = strlen(pfx);
    if (strncmp(r->path, pfx, pl) != 0)
        return TN_NOTFOUND;
    if (request_path_ambiguous(r->path))
        return TN_INVALID;
    const char *s = r->path + pl;
    const char *end = strchr(s, '/');
    size_t sl = end ? (size_t)(end - s) : strlen(s);
    if (sl == 0 || sl >= n)
        return TN_NOTFOUND;
    memcpy(out, s, sl);
    out[sl] = '\0';
    *rest = end ? end : "/";
    return tenant_slug_valid(out) ? TN_OK : TN_NOTFOUND;
}

static TN_COLD int answer(tn_request *r, int status, const char *retry_after, const char *msg)
{
    if (retry_after != NULL)
        tn_add_header(r, "Retry-After", retry_after);
    tn_send_error(r, status, msg);
    return TN_DONE;
}

/* The lookup key a host or subdomain resolver makes of the normalised host (hl bytes):
 * false when it makes none (not one label below a base domain). */
static TN_HOT bool host_key(int res, const char *host, size_t hl, char *slug, size_t n,
                            const char **key, int *kind)
{
    if (res == RES_HOST) {
        *key = host;
        *kind = LK_DOMAIN;
        return true;
    }
    *kind = LK_SLUG;
    if (!subdomain_slug(host, hl, slug, n))
        return false;
    *key = slug;
    return true;
}

/* A tenant's cap in workers (tenant.max_workers, or its own), 0 for none. */
static TN_HOT int cap_of(const tenant_rec *t)
{
    return tenancy_max_workers(ch.env.cfg, t->max_workers, ch.env.max_children);
}

/* Whether t's storage keeps per-worker state that grows with the tenants a worker serves (a
 * PostgreSQL placement: its backend's catalog caches), so that its requests may be worth
 * sending to one worker (tenant.affinity). */
static bool pg_placed(const tenant_rec *t)
{
    const tenancy_config *c = ch.env.cfg;
    if (c->affinity == AFFINITY_OFF || t->placement == NULL)
        return false;
    const placement *p = tenancy_placement(c, t->placement);
    return p != NULL && p->kind != TARGET_SQLITE;
}

/* Whether the pool's counts s show it crowded (see worth_sending), noted with the use they
 * were read at. */
static void note_crowding(const pool_stats *s)
{
    ch.crowd_uses = pool_uses(ch.pool);   /* looked at again only after the pool's next use */
    ch.crowded = ch.crowded || s->pg_recycles + s->pg_evictions > 0;
}

/* tenant.affinity for a tenant on PostgreSQL: always (on), or (auto) once this worker's pool
 * closed a schema-mode connection at its bound, or closed a database-mode (or a tenant's own
 * login's) connection to make room for another, or another worker of the generation's did
 * (chain_affinity_learn): the sign that the tenants it serves do not all fit in what it
 * keeps. Until then sending a request to another worker costs
 * system calls and buys nothing: every worker's connection keeps every tenant warm. Once
 * seen, for the worker's life (the tenants it serves keep not fitting if it serves them
 * all again). */
static bool worth_sending(void)
{
    const tenancy_config *c = ch.env.cfg;
    if (c->affinity == AFFINITY_ON)
        return true;
    if (c->affinity != AFFINITY_AUTO)
        return false;
    if (!ch.crowded && ch.pool != NULL && pool_uses(ch.pool) != ch.crowd_uses) {
        pool_stats s;
        pool_get_stats(ch.pool, &s);
        note_crowding(&s);
    }
    return ch.crowded;
}

int chain_storage_stats(chain_storage *out)
{
    memset(out, 0, sizeof(*out));
    if (ch.pool == NULL)
        return TN_DECLINED;
    pool_stats s;
    pool_get_stats(ch.pool, &s);
    note_crowding(&s);   /* so that worth_sending need not read them again */
    out->pg_connects = s.pg_connects;
    out->pg_closed_memory = s.pg_memory_recycles;
    out->pg_closed_tenants = s.pg_recycles - s.pg_memory_recycles;
    out->pg_evicted = s.pg_evictions;
    out->pg_unreachable = s.pg_down;
    out->pg_refused = s.pg_refused;
    out->memory_reads = s.pg_memory_looks;
    out->sqlite_opens = s.sqlite_opens;
    out->sqlite_hits = s.sqlite_hits;
    out->sqlite_evicted = s.evictions - s.pg_evictions;
    out->resets = s.resets;
    out->pg_open = s.pg_open > 0 ? (uint32_t)s.pg_open : 0;
    out->sqlite_open = s.sqlite_open > 0 ? (uint32_t)s.sqlite_open : 0;
    return TN_OK;
}

void chain_affinity_learn(void)
{
    ch.crowded = true;   /* read only with auto (worth_sending) */
}

uint64_t chain_storage_uses(void)
{
    return pool_uses(ch.pool);
}

bool chain_affinity_now(void)
{
    return ch.ready && worth_sending();
}

/* What the early looks answer for a tenant found (or not): only an active one is waited for
 * or sent to its worker. */
static int peek_found(const tenant_rec *t, chain_peek *out)
{
    if (t == NULL || t->state != TENANT_ACTIVE)
        return TN_NOTFOUND;
    out->id = t->id;
    out->cap = cap_of(t);
    out->affine = pg_placed(t);   /* the callers add worth_sending() */
    return TN_OK;
}

/* Find the request's tenant. TN_OK (r->tenant set, or r->central), or TN_DONE (answered).
 * With peek (chain_peek_tenant) nothing is answered: TN_NOTFOUND stands for every outcome
 * but a tenant found. A lookup it makes is cached as the chain's own would be, so the chain
 * that then serves the request finds it there. */
static TN_HOT int resolve(tn_request *r, int64_t now, bool peek)
{
    const tenancy_config *c = ch.env.cfg;
    r->stage = "identify";
    int hs = request_route_host(r, (const char *const *)c->hparams, c->nhparams);
    if (peek && hs != RH_OK)
        return TN_NOTFOUND;
    if (hs == RH_ABSENT) {
        static bool warned;
        if (!warned) {
            warned = true;
            log_error("the web server passed none of the host params (%s): set one, e.g. nginx "
                      "`fastcgi_param TENANT_HOST $host;`", c->host_params);
        }
        return answer(r, 400, NULL, "the request carries no host name");
    }
    if (hs != RH_OK)
        return answer(r, 400, NULL, "invalid host name");
    const char *host = r->route_host;
    size_t hl = r->route_host_len;
    if (is_central(host)) {
        if (peek)
            return TN_NOTFOUND;
        r->central = true;
        return TN_OK;
    }
    lookup_sync(ch.lookup, gen_now(NULL));
    for (int i = 0; i < c->nkinds; i++) {
        char slug[64];
        const char *key = NULL, *rest = NULL;
        int kind = LK_SLUG;
        switch (c->kinds[i]) {
        case RES_HOST:
        case RES_SUBDOMAIN:
            host_key(c->kinds[i], host, hl, slug, sizeof(slug), &key, &kind);
            break;
        case RES_HEADER: {
            const char *h = tn_param(r, c->header_param);
            if (h != NULL && netaddr_match_text(c->header_trusted, tn_param(r, "REMOTE_ADDR"))) {
                if (!tenant_slug_valid(h))
                    return peek ? TN_NOTFOUND : answer(r, 400, NULL, "invalid tenant header");
                snprintf(slug, sizeof(slug), "%s", h);
                key = slug;
            }
            break;
        }
        case RES_PATH: {
            int prc = path_slug(r, slug, sizeof(slug), &rest);
            if (prc == TN_INVALID && peek)
                return TN_NOTFOUND;
            if (prc == TN_INVALID)
                return answer(r, 400, NULL,
                              "ambiguous path: dot segments and encoded dots or slashes are "
                              "not allowed after the tenant prefix");
            if (prc == TN_OK)
                key = slug;
            break;
        }
        }
        if (key == NULL)
            continue;
        const tenant_rec *t = NULL;
        int rc = lookup_get(ch.lookup, kind, key, now, fetch, NULL, gen_now, NULL, &t);
        if (rc == TN_NOTFOUND)
            continue;
        if (rc != TN_OK && peek)
            return TN_NOTFOUND;
        if (rc != TN_OK)
            return answer(r, 503, "5", "the tenant registry is unavailable");
        r->tenant = t;
        if (rest != NULL)
            r->path = rest;   /* the handler sees the path without the prefix */
        return TN_OK;
    }
    return peek ? TN_NOTFOUND : answer(r, 404, NULL, "no tenant at this address");
}

static TN_HOT int identify(tn_request *r, int64_t now) { return resolve(r, now, false); }

/* chain_peek_host's answers by the host param's raw bytes, so that a host looked at again
 * (the look runs for every request while some tenant is at its cap) costs a hash and a
 * comparison instead of a normalisation and a lookup. Valid for the registry generation it
 * was made at and at most PEEK_MEMO_MS (the lookup cache's own entries live longer). */
#define PEEK_MEMO_SLOTS 4096
#define PEEK_MEMO_HOST 64
#define PEEK_MEMO_MS 1000
static struct peek_memo {
    uint64_t gen;
    int64_t until_ms;
    int64_t id;             /* 0: no tenant to wait for */
    int cap;
    bool affine;
    uint8_t len;
    char host[PEEK_MEMO_HOST];
} peek_memo[PEEK_MEMO_SLOTS];

static int peek_host_slow(const char *raw, size_t len, int64_t now_ms, chain_peek *out);

static TN_HOT int peek_host(const char *(*get)(void *ctx, const char *name, size_t *len),
                            void *ctx, int64_t now_ms, chain_peek *out)
{
    *out = (chain_peek){0};
    const tenancy_config *c = ch.env.cfg;
    if (!ch.ready || !c->enabled)
        return TN_NOTFOUND;
    for (int i = 0; i < c->nkinds; i++)
        if (c->kinds[i] != RES_HOST && c->kinds[i] != RES_SUBDOMAIN)
            return TN_DECLINED;   /* a header or a path may name the tenant first */
    const char *raw = NULL;
    size_t len = 0;
    for (int i = 0; i < c->nhparams && raw == NULL; i++) {
        raw = get(ctx, c->hparams[i], &len);
        if (raw != NULL && len == 0)
            raw = NULL;
    }
    if (raw == NULL)
        return TN_NOTFOUND;
    if (len >= PEEK_MEMO_HOST)
        return peek_host_slow(raw, len, now_ms, out);
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)raw[i]) * 1099511628211ULL;
    struct peek_memo *m = &peek_memo[h % PEEK_MEMO_SLOTS];
    uint64_t gen = gen_now(NULL);
    if (m->len == len && m->gen == gen && now_ms < m->until_ms && memcmp(m->host, raw, len) == 0) {
        out->id = m->id;
        out->cap = m->cap;
        out->affine = m->affine;
        return m->id != 0 ? TN_OK : TN_NOTFOUND;
    }
    int rc = peek_host_slow(raw, len, now_ms, out);
    m->gen = gen;
    m->until_ms = now_ms + PEEK_MEMO_MS;
    m->id = rc == TN_OK ? out->id : 0;
    m->cap = rc == TN_OK ? out->cap : 0;
    m->affine = rc == TN_OK && out->affine;
    m->len = (uint8_t)len;
    memcpy(m->host, raw, len);
    return rc;
}

static int peek_host_slow(const char *raw, size_t len, int64_t now_ms, chain_peek *out)
{
    const tenancy_config *c = ch.env.cfg;
    char in[256], host[256];
    bool valid = false;
    if (len >= sizeof(in))
        return TN_NOTFOUND;
    memcpy(in, raw, len);
    in[len] = '\0';
    size_t hl = request_host_normalise(in, host, sizeof(host), &valid);
    if (hl == 0 || !valid || is_central(host))
        return TN_NOTFOUND;
    lookup_sync(ch.lookup, gen_now(NULL));
    for (int i = 0; i < c->nkinds; i++) {
        char slug[64];
        const char *key;
        int kind;
        if (!host_key(c->kinds[i], host, hl, slug, sizeof(slug), &key, &kind))
            continue;
        const tenant_rec *t = NULL;
        int rc = lookup_get(ch.lookup, kind, key, now_ms, fetch, NULL, gen_now, NULL, &t);
        if (rc == TN_NOTFOUND)
            continue;
        return peek_found(rc == TN_OK ? t : NULL, out);
    }
    return TN_NOTFOUND;
}

/* The memo keeps whether a tenant's placement is PostgreSQL; whether that is worth sending
 * now (worth_sending) is this worker's state, asked at each look. */
TN_HOT int chain_peek_host(const char *(*get)(void *ctx, const char *name, size_t *len),
                           void *ctx, int64_t now_ms, chain_peek *out)
{
    int rc = peek_host(get, ctx, now_ms, out);
    out->affine = out->affine && worth_sending();
    return rc;
}

TN_HOT int chain_peek_tenant(tn_request *r, int64_t now_ms, chain_peek *out)
{
    *out = (chain_peek){0};
    if (!ch.ready || !ch.env.cfg->enabled || resolve(r, now_ms, true) != TN_OK)
        return TN_NOTFOUND;
    int rc = peek_found(r->tenant, out);
    out->affine = out->affine && worth_sending();
    return rc;
}

static TN_HOT int check_state(tn_request *r)
{
    r->stage = "state";
    /* Most requests' state before the switch: its jump table is a line of data more. */
    if (TN_LIKELY(r->tenant->state == TENANT_ACTIVE))
        return TN_OK;
    switch (r->tenant->state) {
    case TENANT_MAINTENANCE:
        return answer(r, 503, "60", "this site is down for maintenance; please try again soon");
    case TENANT_PROVISIONING: return answer(r, 503, "5", "this site is being set up");
    case TENANT_SUSPENDED: return answer(r, 403, NULL, "this site is suspended");
    case TENANT_MOVING: {
        const char *m = r->method;
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0)
            return TN_OK;
        return answer(r, 503, "5", "this site is moving; writes resume in a moment");
    }
    default: return answer(r, 404, NULL, "no tenant at this address");
    }
}

/* ---- theme ------------------------------------------------------------------------------ */

static bool css_ident_ok(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
            return false;
    return true;
}

static bool css_value_ok(const char *s)
{
    if (*s == '\0' || strlen(s) > 512)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == ';' || c == '{' || c == '}' || c == '<' || c == '>' || c == '\\' ||
            c == '"' || c == '\'' || c == 0x7f)
            return false;
    }
    return true;
}

/* :root{--primary:#0a5;--font:system-ui} from the tenant's theme.* settings. */
static void theme_css(const tenant_rec *t, buf *o)
{
    buf_puts(o, "/* theme of ");
    buf_puts(o, t->slug);
    buf_puts(o, " */\n:root {\n");
    for (int i = 0; i < t->nsettings; i++) {
        const char *k = t->settings[i].key, *v = t->settings[i].value;
        if (strncmp(k, "theme.", 6) != 0 || !css_ident_ok(k + 6) || !css_value_ok(v))
            continue;
        buf_puts(o, "  --");
        buf_puts(o, k + 6);
        buf_puts(o, ": ");
        buf_puts(o, v);
        buf_puts(o, ";\n");
    }
    buf_puts(o, "}\n");
}

/* Not inlined into chain_run: most requests are not for the theme, and its code would
 * spread chain_run's over more cache lines. */
static __attribute__((noinline)) int serve_theme(tn_request *r)
{
    r->stage = "theme";
    const tenant_rec *t = r->tenant;
    /* Cached per worker by (tenant, registry version of the record), as the ETag (18 bytes)
     * followed by the CSS, so a hit costs neither an allocation nor a hash. */
    char key[64];
    int kl = snprintf(key, sizeof(key), "\x01theme:%lld", (long long)t->updated_at);
    const void *v;
    size_t vl;
    if (appcache_get(ch.apps, t->id, key, (size_t)kl, 0, &v, &vl) != TN_OK || vl < 18) {
        buf e = BUF_INIT;
        buf_append(&e, "\"0000000000000000\"", 18);
        theme_css(t, &e);
        if (e.oom) {
            buf_free(&e);
            return answer(r, 500, NULL, "out of memory");
        }
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 18; i < e.len; i++) {
            h ^= (unsigned char)e.p[i];
            h *= 1099511628211ull;
        }
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)h);
        memcpy(e.p + 1, hex, 16);
        int rc = appcache_set(ch.apps, t->id, key, (size_t)kl, e.p, e.len, 0);
        buf_free(&e);
        if (rc != TN_OK || appcache_get(ch.apps, t->id, key, (size_t)kl, 0, &v, &vl) != TN_OK)
            return answer(r, 500, NULL, "the theme cache is full");
    }
    char etag[19];
    memcpy(etag, v, 18);
    etag[18] = '\0';
    char cc[64];
    snprintf(cc, sizeof(cc), "public, max-age=%lld",
             (long long)(ch.env.cfg->theme_max_age_ms / 1000));
    tn_add_header(r, "ETag", etag);
    tn_add_header(r, "Cache-Control", cc);
    const char *inm = tn_header(r, "If-None-Match");
    if (inm != NULL && strstr(inm, etag) != NULL) {
        tn_set_status(r, 304);
    } else {
        tn_add_header(r, "Content-Type", "text/css; charset=utf-8");
        tn_write(r, (const char *)v + 18, vl - 18);
    }
    return TN_DONE;
}

/* ---- the chain ------------------------------------------------------------------------- */

static TN_HOT void enter_context(tn_request *r)
{
    ch.current = r->tenant;
    /* "req=<id> tenant=<slug>", without printf (every request). The constant parts are
     * fixed-size copies, which the compiler stores as immediates: chain.c's string constants,
     * a page away from the path's other strings, are not read. They fit: the id is shorter
     * than r->req_id, much shorter than ctx. */
    char ctx[160];
    memcpy(ctx, "req=", 4);
    size_t k = 4 + str_copy(ctx + 4, sizeof(ctx) - 4, r->req_id);
    memcpy(ctx + k, " tenant=", 8);
    k += 8;
    str_copy(ctx + k, sizeof(ctx) - k, r->tenant->slug);
    log_set_context(ctx);
    if (ch.env.note_tenant)
        ch.env.note_tenant(ch.env.hook_ctx, r->tenant->id, r->tenant->slug);
}

TN_HOT int chain_run(tn_request *r, const chain_app *app)
{
    if (ch.current != NULL || ch.in_request) {
        /* A request must start with no tenant. Continuing could serve another tenant's
         * data, so this worker stops here; the master replaces it. */
        log_error("tenant context not empty at the start of a request (tenant %s): stopping",
                  ch.current ? ch.current->slug : "?");
        abort();
    }
    ch.in_request = true;
    if (ch.ready && ch.env.cfg->enabled) {
        /* The request's start for the lookup and the limits: the host read the clock then
         * (no clock read here; a request built without a start time reads one). */
        int64_t now = r->start_ns > 0 ? r->start_ns / 1000000 : clock_mono_ms();
        int rc = identify(r, now);
        if (rc != TN_OK)
            return rc;
        if (r->tenant != NULL) {
            if ((rc = check_state(r)) != TN_OK)
                return rc;
            r->stage = "limit";
            int cap = cap_of(r->tenant);
            rc = limits_enter(ch.env.lim, ch.env.worker, r->tenant->id, r->tenant->slug, cap,
                              now);
            if (rc == TN_BUSY) {
                r->tenant_counted = false;
                log_warn("tenant %s is at its cap of %d workers: answered 503", r->tenant->slug,
                         cap);
                return answer(r, 503, "1", "too many requests for this site right now");
            }
            if (rc == TN_DECLINED && ch.env.lim != NULL && !ch.table_full_logged) {
                ch.table_full_logged = true;
                log_warn("the per-tenant counter table is full: new tenants are not counted");
            }
            r->tenant_counted = true;   /* admitted: limits_leave follows (TN_DECLINED too) */
            enter_context(r);
            /* the constant is read only for a path that starts like it (see above) */
            if (r->path[0] == '/' && r->path[1] == '_' && str_eq(r->path, "/_theme.css"))
                return serve_theme(r);
        }
    }
    if (ch.env.pick != NULL) {
        r->stage = "mount";
        if ((app = ch.env.pick(ch.env.pick_ctx, r)) == NULL)
            return TN_DONE;
    }
    for (int i = app->first_stage, end = i + app->nstages; i < end; i++) {
        r->stage = ch.stages[i].name;
        int rc = ch.stages[i].fn(r, ch.stages[i].arg);
        if (rc == TN_DONE)
            return TN_DONE;
        if (rc != TN_OK) {
            log_error("stage %s failed: %s", r->stage, tn_rc_str(rc));
            if (!request_started(r))
                tn_send_error(r, 500, "the application failed");
            return TN_DONE;
        }
    }
    r->stage = "handler";
    return app->handle(r);
}

/* Give the request's storage back: rolled back if left open, checked, unscoped. */
static TN_HOT void release_storage(tn_request *r)
{
    if (r->db != NULL) {
        pool_release(ch.pool, r->db);
        r->db = NULL;
    }
}

TN_HOT void chain_finish(tn_request *r, int status)
{
    release_storage(r);
    if (r->tenant != NULL && r->tenant_counted)
        limits_leave(ch.env.lim, ch.env.worker, r->tenant->id, status);
    if (r->tenant != NULL && ch.env.note_tenant)
        ch.env.note_tenant(ch.env.hook_ctx, 0, NULL);
    r->tenant_counted = false;
    r->tenant = NULL;
    ch.current = NULL;
    ch.in_request = false;
}

/* ---- the tenant half of the app API --------------------------------------------------------- */

const tn_tenant *tn_tenant_of(const tn_request *r) { return (const tn_tenant *)r->tenant; }
int64_t tn_tenant_id(const tn_tenant *t) { return ((const tenant_rec *)t)->id; }
const char *tn_tenant_slug(const tn_tenant *t) { return ((const tenant_rec *)t)->slug; }
const char *tn_tenant_name(const tn_tenant *t) { return ((const tenant_rec *)t)->name; }

const char *tn_tenant_state(const tn_tenant *t)
{
    return tenant_state_name(((const tenant_rec *)t)->state);
}

const char *tn_tenant_setting(const tn_tenant *t, const char *key)
{
    return tenant_setting_get((const tenant_rec *)t, key);
}

tn_db *tn_db_of(tn_request *r)
{
    if (r->db != NULL)
        return r->db;
    if (!ch.ready || r->tenant == NULL)
        return NULL;
    /* The same failure repeats for every request of a tenant: say it once a second. */
    static int64_t last_log_ms;
    static int64_t last_log_id;
    int64_t now = clock_mono_ms();
    bool say = r->tenant->id != last_log_id || now - last_log_ms >= 1000;
    storage_target t;
    int rc = placement_target(ch.env.cfg, r->tenant, &t);
    if (rc != TN_OK) {
        if (say)
            log_error("tenant %s: %s", r->tenant->slug,
                      rc == TN_NOTFOUND ? "its placement is not configured on this host"
                                        : "it has no storage (create it with `tenancy tenant "
                                          "create`, which provisions it)");
        last_log_ms = now;
        last_log_id = r->tenant->id;
        return NULL;
    }
    if (r->stmt_timeout_ms > 0)   /* a job: its own limit (chain_run_job) */
        t.statement_timeout_ms = r->stmt_timeout_ms;
    char err[512];
    tn_db *db = NULL;
    if (pool_acquire(ch.pool, &t, &db, err, sizeof(err)) != TN_OK) {
        if (say)
            log_error("tenant %s: storage unavailable: %s", r->tenant->slug, err);
        last_log_ms = now;
        last_log_id = r->tenant->id;
        return NULL;
    }
    r->db = db;
    return db;
}

/* db_result and tn_result are the same shape; the public one is read-only. */
static const tn_result *public_result(tn_request *r, const db_result *d)
{
    tn_result *o = tn_alloc(r, sizeof(*o));
    if (o != NULL)
        *o = (tn_result){.ncols = d->ncols, .cols = d->cols, .nrows = d->nrows,
                         .rows = (const char *const *const *)d->rows,
                         .truncated = d->truncated};
    return o;
}

int tn_db_query_sandboxed(tn_request *r, const char *sql, int nparams,
                          const char *const *params, int row_cap, int timeout_ms,
                          const tn_result **out)
{
    *out = NULL;
    char err[REQUEST_ERROR_MAX] = "";
    int rc;
    if (!ch.ready || r->tenant == NULL) {
        rc = tn_errf(err, sizeof(err), TN_NOTFOUND, "a central request has no tenant storage");
    } else if (sql == NULL || row_cap < 0 || timeout_ms <= 0 || nparams < 0) {
        rc = tn_errf(err, sizeof(err), TN_INVALID, "no SQL, or a bad row cap or time limit");
    } else {
        sandbox s;
        db_result *res = NULL;
        rc = sandbox_open(ch.env.cfg, r->tenant, r->arena, &s, err, sizeof(err));
        if (rc == TN_OK)
            rc = sandbox_query(&s, sql, nparams, params, row_cap, timeout_ms, r->arena, &res,
                               err, sizeof(err));
        sandbox_close(&s, rc == TN_OK || rc == TN_INVALID || rc == TN_DENIED);
        if (rc == TN_OK && (*out = public_result(r, res)) == NULL)
            rc = tn_errf(err, sizeof(err), TN_NOMEM, "out of memory");
    }
    if (rc != TN_OK)
        request_set_error(r, "%s", err);
    return rc;
}

/* ---- API keys ----------------------------------------------------------------------------- */

int tn_key_check(tn_request *r, const char *token, unsigned *flags)
{
    if (flags != NULL)
        *flags = 0;
    if (!ch.ready || r->tenant == NULL) {
        request_set_error(r, "a central request has no tenant, hence no keys");
        return TN_NOTFOUND;
    }
    if (!key_token_shape(token)) {
        request_set_error(r, "not an API key (tnk_ and 43 characters)");
        return TN_INVALID;
    }
    char hash[KEY_HASH_MAX];
    key_token_hash(token, hash);
    int64_t now_ms = clock_mono_ms(), now_s = (int64_t)time(NULL);
    uint64_t gen = gen_now(NULL);
    key_cache_sync(ch.keys, gen);
    key_answer *a = key_cache_get(ch.keys, r->tenant->id, hash, now_ms);
    key_answer fresh;
    if (a == NULL) {
        registry *g = reg();
        if (g == NULL) {
            request_set_error(r, "the tenant registry is unavailable");
            return TN_IO;
        }
        registry_key k;
        int rc = registry_key_find(g, r->tenant->id, hash, &k);
        if (rc != TN_OK && rc != TN_NOTFOUND) {
            if (rc == TN_IO) {
                registry_close(ch.reg);   /* reconnect next time */
                ch.reg = NULL;
            }
            request_set_error(r, "the key could not be checked: %s", tn_rc_str(rc));
            return rc;
        }
        memset(&fresh, 0, sizeof(fresh));
        if (rc == TN_OK)
            fresh = (key_answer){.found = true, .key_id = k.id,
                                 .flags = k.read_only ? TN_KEY_READ_ONLY : 0,
                                 .expires_at = k.expires_at, .revoked_at = k.revoked_at};
        a = &fresh;
        /* An answer read while the registry changed may be stale (a revoke that committed
         * just before the bump): used for this request, never kept. */
        if (ch.reg != NULL && gen_now(NULL) == gen) {
            key_answer *kept = key_cache_put(ch.keys, r->tenant->id, hash, &fresh, now_ms);
            if (kept != NULL)
                a = kept;
        }
    }
    if (!a->found) {
        request_set_error(r, "unknown API key");
        return TN_DENIED;
    }
    if (a->revoked_at != 0) {
        request_set_error(r, "this API key was revoked");
        return TN_DENIED;
    }
    if (a->expires_at != 0 && a->expires_at <= now_s) {
        request_set_error(r, "this API key has expired");
        return TN_DENIED;
    }
    if (key_cache_touch_due(a, now_ms, KEY_TOUCH_INTERVAL_S * 1000) && ch.reg != NULL)
        registry_key_touch(ch.reg, a->key_id, now_s, KEY_TOUCH_INTERVAL_S);
    if (flags != NULL)
        *flags = a->flags;
    return TN_OK;
}

static int64_t cache_ns(const tn_request *r) { return r->tenant ? r->tenant->id : 0; }

int tn_cache_get(tn_request *r, const char *key, const void **value, size_t *len)
{
    *value = NULL;
    *len = 0;
    if (!ch.ready || key == NULL || key[0] == '\x01')
        return TN_NOTFOUND;   /* \x01 keys are the host's own (the theme) */
    const void *v;
    size_t vl;
    int rc = appcache_get(ch.apps, cache_ns(r), key, strlen(key), clock_mono_ms(), &v, &vl);
    if (rc != TN_OK)
        return rc;
    void *copy = arena_memdup(r->arena, v, vl);
    if (copy == NULL && vl > 0)
        return TN_NOMEM;
    *value = copy;
    *len = vl;
    return TN_OK;
}

int tn_cache_set(tn_request *r, const char *key, const void *value, size_t len, int ttl_s)
{
    if (!ch.ready || key == NULL || key[0] == '\0' || key[0] == '\x01' || ttl_s < 0)
        return TN_INVALID;
    int64_t exp = ttl_s > 0 ? clock_mono_ms() + (int64_t)ttl_s * 1000 : 0;
    return appcache_set(ch.apps, cache_ns(r), key, strlen(key), value, len, exp);
}

int tn_cache_del(tn_request *r, const char *key)
{
    if (!ch.ready || key == NULL || key[0] == '\x01')
        return TN_NOTFOUND;
    return appcache_del(ch.apps, cache_ns(r), key, strlen(key));
}

int tn_stage_add(const char *name, tn_stage_fn fn, void *arg)
{
    if (!ch.stages_open || fn == NULL)
        return TN_ERR;
    if (ch.nstages >= MAX_STAGES)
        return TN_BUSY;
    ch.stages[ch.nstages++] = (struct stage){name ? name : "app", fn, arg};
    return TN_OK;
}

/* ---- events (tenancy/events.h) --------------------------------------------------------------- */

/* Tell the other hosts (a PostgreSQL registry): on the registry connection the lookups use,
 * after the local append, so a failure here loses the event for other hosts only. */
static void publish_remote(int64_t tenant, const char *channel, const char *data, size_t len)
{
    registry *rg = reg();
    if (rg == NULL)
        return;   /* reg() logged it */
    buf_reset(&ch.notify);
    events_notify_payload(&ch.notify, event_log_origin(ch.env.events), tenant, channel, data,
                          len);
    if (ch.notify.oom) {
        log_error("events: out of memory for a notification");
        return;
    }
    int rc = registry_notify(rg, EVENTS_NOTIFY_CHANNEL, ch.notify.p);
    if (rc == TN_OK || rc == TN_DECLINED)
        return;
    log_warn("events: NOTIFY %s failed (other hosts miss this event): %s",
             EVENTS_NOTIFY_CHANNEL, tn_db_error(registry_db(rg)));
    if (rc == TN_IO) {
        registry_close(ch.reg);   /* reconnect next time */
        ch.reg = NULL;
    }
}

int tn_publish(tn_request *r, const char *channel, const char *data, uint64_t *id)
{
    if (id != NULL)
        *id = 0;
    if (!ch.ready || ch.env.events == NULL) {
        request_set_error(r, "no event log in this process");
        return TN_ERR;
    }
    if (r->tenant == NULL) {
        request_set_error(r, "a central request has no tenant to publish to");
        return TN_NOTFOUND;
    }
    if (!event_channel_valid(channel)) {
        request_set_error(r, "a channel name is 1 to 64 of A-Z a-z 0-9 _ . : -");
        return TN_INVALID;
    }
    size_t len = data != NULL ? strlen(data) : 0;
    if ((int64_t)len > ch.env.cfg->events_max_event) {
        request_set_error(r, "the event is larger than events.max_event");
        return TN_TOOBIG;
    }
    int64_t tenant = r->tenant->id;
    int rc = event_log_append(ch.env.events, tenant, channel, data ? data : "", len, id);
    if (rc != TN_OK) {
        request_set_error(r, "the event log refused the event: %s", tn_rc_str(rc));
        return rc;
    }
    if (ch.events_remote)
        publish_remote(tenant, channel, data ? data : "", len);
    return TN_OK;
}

struct events_walk {
    tn_event_fn fn;
    void *ctx;
};

static int events_step(void *ctx, const event_rec *e)
{
    struct events_walk *w = ctx;
    tn_event te = {.id = e->id, .channel = e->channel, .data = e->data, .len = e->len,
                   .time_ms = e->time_ms};
    return w->fn(w->ctx, &te);
}

int tn_events(tn_request *r, uint64_t after, tn_event_fn fn, void *ctx, uint64_t *last)
{
    if (last != NULL)
        *last = 0;
    if (!ch.ready || ch.env.events == NULL) {
        request_set_error(r, "no event log in this process");
        return TN_ERR;
    }
    if (r->tenant == NULL) {
        request_set_error(r, "a central request has no tenant, hence no events");
        return TN_NOTFOUND;
    }
    if (fn == NULL)
        return TN_INVALID;
    struct events_walk w = {fn, ctx};
    int rc = event_log_since(ch.env.events, r->tenant->id, after, events_step, &w);
    if (last != NULL)
        *last = event_log_last_id(ch.env.events, r->tenant->id);
    if (rc == TN_NOTFOUND) {
        request_set_error(r, "events after %llu are no longer all kept", (unsigned long long)after);
        return TN_AGAIN;
    }
    return rc;
}

/* tn_run and the job workers: fn in a tenant's context (or none: slug NULL), with a request
 * that has no client. */
int chain_run_job(const char *slug, bool hook, const char *app, int timeout_ms, tn_run_fn fn,
                  void *arg)
{
    if (!ch.ready)
        return TN_ERR;
    if (ch.in_request || ch.current != NULL)
        return TN_DENIED;
    const tenant_rec *t = NULL;
    if (slug != NULL && slug[0] != '\0') {
        if (!tenant_slug_valid(slug))
            return TN_NOTFOUND;
        lookup_sync(ch.lookup, gen_now(NULL));
        int rc = lookup_get(ch.lookup, LK_SLUG, slug, clock_mono_ms(), fetch, NULL, gen_now,
                            NULL, &t);
        if (rc != TN_OK)
            return rc;
        /* A tenant being deleted is told so by its hook (its storage is kept through the
         * grace period); nothing else runs for it. A tombstone (deleted_at 0) is gone. */
        if (t->state == TENANT_DELETING && !hook)
            return TN_NOTFOUND;
        /* A job writes as a request would: while the tenant is not served (suspended,
         * maintenance, provisioning, moving: a write would be lost to the move) its jobs
         * wait. Hooks run in any state: they are how the app learns of it. */
        if (t->state != TENANT_ACTIVE && !hook && app != NULL)
            return TN_AGAIN;
    }
    if (ch.run_arena == NULL && (ch.run_arena = arena_create(8192)) == NULL)
        return TN_NOMEM;
    tn_request r;
    request_init_detached(&r, ch.run_arena, &ch.run_headers, &ch.run_out);
    r.tenant = t;
    r.app = app;
    r.stmt_timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    ch.in_request = true;
    ch.current = t;
    if (t != NULL && ch.env.note_tenant)
        ch.env.note_tenant(ch.env.hook_ctx, t->id, t->slug);
    char ctx[160];
    if (t != NULL)
        snprintf(ctx, sizeof(ctx), "run tenant=%s", t->slug);
    else
        snprintf(ctx, sizeof(ctx), "run central");
    log_set_context(ctx);
    r.stage = "run";
    int rc = fn(&r, arg);
    release_storage(&r);
    log_set_context(NULL);
    if (t != NULL && ch.env.note_tenant)
        ch.env.note_tenant(ch.env.hook_ctx, 0, NULL);
    ch.current = NULL;
    ch.in_request = false;
    arena_reset(ch.run_arena);
    return rc;
}

int tn_run(const char *slug, tn_run_fn fn, void *arg)
{
    if (slug == NULL || slug[0] == '\0')
        return TN_NOTFOUND;
    return chain_run_job(slug, false, NULL, 0, fn, arg);
}

/* ---- jobs ------------------------------------------------------------------------------------ */

int tn_job_enqueue(tn_request *r, const char *name, const char *payload,
                   const tn_job_opts *opts, int64_t *id)
{
    static const tn_job_opts none;
    if (opts == NULL)
        opts = &none;
    if (!ch.ready)
        return TN_ERR;
    if (name == NULL || !job_name_valid(name) || strncmp(name, "tenancy.", 8) == 0) {
        request_set_error(r, "bad job name '%s': [a-z][a-z0-9_.:-]{0,63}, not starting "
                             "'tenancy.'", name ? name : "");
        return TN_INVALID;
    }
    if (opts->delay_ms < 0 || opts->max_attempts < 0 || opts->timeout_ms < 0) {
        request_set_error(r, "bad job options: delay, attempts and timeout are never negative");
        return TN_INVALID;
    }
    int64_t tenant_id = r->tenant != NULL ? r->tenant->id : 0;
    if (opts->tenant != NULL) {
        /* Only the platform's own code acts for a tenant it names: a tenant's request or
         * job queues for its own tenant, whatever it asks. */
        if (r->tenant != NULL) {
            request_set_error(r, "a tenant's request queues jobs for its own tenant only");
            return TN_DENIED;
        }
        const tenant_rec *t = NULL;
        int rc = tenant_slug_valid(opts->tenant)
                     ? lookup_get(ch.lookup, LK_SLUG, opts->tenant, clock_mono_ms(), fetch, NULL,
                                  gen_now, NULL, &t)
                     : TN_NOTFOUND;
        if (rc == TN_OK && t->state == TENANT_DELETING)
            rc = TN_NOTFOUND;
        if (rc != TN_OK) {
            request_set_error(r, "no tenant '%s' to queue a job for", opts->tenant);
            return rc == TN_NOTFOUND ? TN_NOTFOUND : TN_IO;
        }
        tenant_id = t->id;
    }
    registry *g = reg();
    if (g == NULL) {
        request_set_error(r, "the registry cannot be reached");
        return TN_IO;
    }
    const tenancy_config *c = ch.env.cfg;
    job_new j = {.tenant_id = tenant_id, .app = r->app ? r->app : "", .name = name,
                 .payload = payload, .priority = opts->priority, .unique_key = opts->unique_key,
                 .max_attempts = opts->max_attempts ? opts->max_attempts : c->jobs_max_attempts,
                 .timeout_ms = opts->timeout_ms ? opts->timeout_ms : (int)c->jobs_timeout_ms};
    int64_t now = clock_wall_us() / 1000;
    j.run_at_ms = now + opts->delay_ms;
    char err[512];
    int64_t got = 0;
    int rc = jobs_enqueue(g, &j, now, &got, err, sizeof(err));
    if (id != NULL)
        *id = got;
    if (rc == TN_IO) {
        registry_close(ch.reg);   /* reconnect next time */
        ch.reg = NULL;
    }
    if (rc != TN_OK && rc != TN_EXISTS) {
        request_set_error(r, "%s", err);
        return rc;
    }
    if (rc == TN_OK && ch.env.job_wake != NULL)
        ch.env.job_wake(ch.env.job_wake_ctx);
    return rc;
}

int tn_job_schedule(tn_request *r, const char *name, const char *cron, const char *payload)
{
    if (!ch.ready)
        return TN_ERR;
    if (name == NULL || cron == NULL || !job_name_valid(name) ||
        strncmp(name, "tenancy.", 8) == 0) {
        request_set_error(r, "bad job name '%s'", name ? name : "");
        return TN_INVALID;
    }
    registry *g = reg();
    if (g == NULL) {
        request_set_error(r, "the registry cannot be reached");
        return TN_IO;
    }
    char err[512];
    int64_t id = 0;
    int rc = jobs_schedule_set(g, r->tenant ? r->tenant->id : 0, r->app ? r->app : "", name,
                               cron, payload, clock_wall_us() / 1000, &id, err, sizeof(err));
    if (rc != TN_OK)
        request_set_error(r, "%s", err);
    return rc;
}

int tn_job_unschedule(tn_request *r, const char *name)
{
    if (!ch.ready)
        return TN_ERR;
    registry *g = reg();
    if (g == NULL) {
        request_set_error(r, "the registry cannot be reached");
        return TN_IO;
    }
    char err[512];
    int rc = jobs_schedule_remove(g, r->tenant ? r->tenant->id : 0, r->app ? r->app : "",
                                  name ? name : "", err, sizeof(err));
    if (rc != TN_OK)
        request_set_error(r, "%s", err);
    return rc;
}

int tn_job_fail(tn_request *r, const char *fmt, ...)
{
    char msg[REQUEST_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    tn_verrf(msg, sizeof(msg), TN_ERR, fmt, ap);
    va_end(ap);
    request_set_error(r, "%s", msg);
    return TN_ERR;
}
