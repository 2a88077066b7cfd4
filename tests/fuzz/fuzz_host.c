/*
 * fuzz_host.c — host names and tenant identification: the one normaliser
 * request_host_normalise and its wrappers request_normalise_host (tenancy/request.c) and
 * tenant_host_normalise, tenant_slug_valid (tenancy/tenant.c), the routing host a request
 * computes once (request_route_host), and the chain's identify -> state -> theme path
 * (tenancy/chain.c) run for real.
 *
 * Why the whole chain and not only the pure functions: the promise is "a request never sees
 * another tenant's data", and that depends on how identify combines the resolvers, the
 * central domains, the trusted-header check and the path prefix, not on the name checks
 * alone. A registry is cheap enough for a fuzz loop: it is a SQLite file in a temporary
 * folder made once per process (LLVMFuzzerInitialize) with seven tenants, and the chain's
 * lookup cache (positive and negative) answers most lookups without a query, as in a worker.
 * Requests go through the in-memory transport of tests/unit/tenancy/check_chain.c.
 *
 * Input: up to four fields separated by NUL bytes: the TENANT_HOST param, REQUEST_URI, the
 * X-Tenant header (absent when there is no third field), and a byte of flags (bit 0: the
 * client address is trusted for the header; bits 1-2: GET, POST, HEAD, DELETE).
 *
 * Invariants:
 *   tenant_host_normalise  the result is the input up to ':' in lower case without one
 *                          trailing dot, exactly when the input is a valid name per tenant.h
 *                          (LDH labels of 1-63, 253 in all, only digits after ':', no IP
 *                          literal), checked against a reader written here; only [a-z0-9.-];
 *                          idempotent; never more than 254 bytes written; outlen < 254 is 0;
 *   tenant_slug_valid      exactly [a-z0-9] or [a-z0-9][a-z0-9-]{0,61}[a-z0-9]; a valid slug
 *                          under a base domain is a valid host that normalises to itself;
 *   request_normalise_host no upper-case ASCII, no port;
 *   request_host_normalise its name is request_normalise_host's, and it calls the name valid
 *                          exactly when tenant_host_normalise accepts it (and then gives the
 *                          same name);
 *   request_route_host     the routing host the chain read is tenant_host_normalise's name of
 *                          the TENANT_HOST param, or none when that refuses it;
 *   the chain              the status and the tenant the handler sees are the ones a model of
 *                          the documented rules gives (resolvers subdomain, host, header, path
 *                          in that order; central domain first; invalid host 400; a path with
 *                          dot segments or encoded dots, slashes or backslashes after the
 *                          prefix 400; unknown 404;
 *                          each state's answer); the handler never runs for another tenant,
 *                          the theme served is the identified tenant's, and the path the
 *                          handler sees is the one after the prefix. A context left set would
 *                          abort in the next chain_run.
 */
#include "core/first.h"
#include "core/conf.h"
#include "core/log.h"
#include "core/rc.h"
#include "tenancy/chain.h"
#include "tenancy/registry.h"
#include "tenancy/tenant.h"

#include "fuzz_common.h"

#include <ctype.h>
#include <string.h>
#include <unistd.h>

/* ---- the registry the chain reads, and its model --------------------------------------- */

static const struct tenant {
    const char *slug;
    int state;
    const char *domain;   /* NULL: none */
} tenants[] = {
    {"acme", TENANT_ACTIVE, "shop.acme.test"},
    {"globex", TENANT_SUSPENDED, NULL},
    {"moving", TENANT_MOVING, NULL},
    {"maint", TENANT_MAINTENANCE, NULL},
    {"t1", TENANT_ACTIVE, "www.example.com"},   /* the subdomain "www" is no tenant: host wins */
    {"a-b", TENANT_ACTIVE, "globex.example.com"},   /* subdomain globex wins over this domain */
    {"gone", TENANT_DELETING, NULL},
};
#define NTENANTS (sizeof(tenants) / sizeof(tenants[0]))
#define BASE ".example.com"
#define CENTRAL "admin.example.com"
#define PREFIX "/t/"

static char dir[64];
static tenancy_config cfg;
static arena *cfg_arena, *req_arena;
static limits *lim;
static buf headers, out;

static void cleanup(void)
{
    chain_fini();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (dir[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "fuzz_host: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_init("fuzz_host", TN_LOG_ERROR);
    snprintf(dir, sizeof(dir), "%s/tenancy-fuzz-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    FZ_ASSERT(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    atexit(cleanup);
    cfg_arena = arena_create(0);
    conf_error cerr;
    FZ_ASSERT(conf_defaults(tenancy_config_table, &cfg, cfg_arena, &cerr) == TN_OK, "defaults");
    cfg.resolvers = "subdomain, host, header, path";
    cfg.base_domains = "example.com";
    cfg.central_domains = CENTRAL;
    cfg.header_from = "10.0.0.0/8";
    cfg.state_dir = dir;
    cfg.max_workers_text = "100%";
    char err[256];
    FZ_ASSERT(tenancy_config_finish(&cfg, cfg_arena, err, sizeof(err)) == TN_OK, "%s", err);
    registry *reg;
    FZ_ASSERT(registry_open(cfg.registry_uri, cfg.gen_path, &reg, err, sizeof(err)) == TN_OK,
              "%s", err);
    FZ_ASSERT(registry_init(reg, err, sizeof(err)) == TN_OK, "%s", err);
    for (size_t i = 0; i < NTENANTS; i++) {
        const char *dom[1] = {tenants[i].domain};
        registry_new t = {.slug = tenants[i].slug, .name = tenants[i].slug,
                          .state = TENANT_ACTIVE, .settings = "{\"theme.primary\":\"#00aa55\"}",
                          .domains = dom, .ndomains = tenants[i].domain ? 1 : 0};
        FZ_ASSERT(registry_create(reg, &t, NULL, err, sizeof(err)) == TN_OK, "%s", err);
        if (tenants[i].state != TENANT_ACTIVE)
            FZ_ASSERT(registry_set_state(reg, tenants[i].slug, tenants[i].state, err,
                                         sizeof(err)) == TN_OK,
                      "%s", err);
    }
    registry_close(reg);
    lim = limits_create();
    chain_env env = {.cfg = &cfg, .max_children = 4, .lim = lim};
    FZ_ASSERT(chain_init(&env) == TN_OK, "chain_init");
    req_arena = arena_create(0);
    return 0;
}

/* ---- the in-memory transport ------------------------------------------------------------- */

struct fake {
    const char *params[8][2];
    int n;
    buf body;
};

static const char *fparam(void *tx, const char *name)
{
    struct fake *f = tx;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->params[i][0], name) == 0)
            return f->params[i][1];
    return NULL;
}
static int fread_(void *tx, char *p, int n)
{
    (void)tx;
    (void)p;
    (void)n;
    return 0;
}
static int fwrite_(void *tx, const char *p, size_t n)
{
    buf_append(&((struct fake *)tx)->body, p, n);
    return 0;
}
static const tn_transport fake_tp = {fparam, fread_, fwrite_};

static bool handler_ran;
static char handler_slug[80];
static char *handler_path;

static int handler(tn_request *r)
{
    handler_ran = true;
    const tn_tenant *t = tn_tenant_of(r);
    snprintf(handler_slug, sizeof(handler_slug), "%s", t ? tn_tenant_slug(t) : "");
    free(handler_path);
    handler_path = strdup(tn_path(r));
    return tn_puts(r, "ok");
}
static const chain_app handler_app = {.handle = handler};

/* ---- references ------------------------------------------------------------------------- */

static bool ref_slug_valid(const char *s, size_t n)
{
    if (n < 1 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* tenant.h's rule for a host name, read independently. */
static size_t ref_normalise(const char *in, char *o)
{
    if (in[0] == '[')
        return 0;
    const char *colon = strchr(in, ':');
    size_t n = colon ? (size_t)(colon - in) : strlen(in);
    if (colon != NULL) {
        if (colon[1] == '\0')
            return 0;
        for (const char *q = colon + 1; *q; q++)
            if (!(*q >= '0' && *q <= '9'))
                return 0;
    }
    if (n > 254)
        return 0;
    for (size_t i = 0; i < n; i++)
        o[i] = (in[i] >= 'A' && in[i] <= 'Z') ? (char)(in[i] - 'A' + 'a') : in[i];
    if (n > 0 && o[n - 1] == '.')
        n--;
    if (n == 0 || n > 253)
        return 0;
    o[n] = '\0';
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && o[i] != '.')
            continue;
        if (!ref_slug_valid(o + start, i - start))
            return 0;
        if (i == n) {
            /* The last label: a number (decimal, or 0x hexadecimal) makes an IPv4 literal. */
            const char *l = o + start;
            size_t ll = i - start, k = 0;
            if (ll >= 2 && l[0] == '0' && l[1] == 'x') {
                for (k = 2; k < ll && isxdigit((unsigned char)l[k]); k++)
                    ;
            } else {
                while (k < ll && l[k] >= '0' && l[k] <= '9')
                    k++;
            }
            if (k == ll)
                return 0;
        }
        start = i + 1;
    }
    return n;
}

static void check_names(const char *h)
{
    char *in = fz_copy((const uint8_t *)h, strlen(h), true);
    char *o = malloc(254);
    char want[512];
    size_t n = tenant_host_normalise(in, o, 254);
    size_t w = ref_normalise(in, want);
    FZ_ASSERT(n == w, "tenant_host_normalise('%s') = %zu, the rule says %zu", in, n, w);
    if (n > 0) {
        FZ_ASSERT(strlen(o) == n && strcmp(o, want) == 0, "normalised '%s' to '%s', not '%s'", in,
                  o, want);
        for (size_t i = 0; i < n; i++)
            FZ_ASSERT((o[i] >= 'a' && o[i] <= 'z') || (o[i] >= '0' && o[i] <= '9') ||
                          o[i] == '.' || o[i] == '-',
                      "normalised name holds %#x", (unsigned char)o[i]);
        char again[254];
        FZ_ASSERT(tenant_host_normalise(o, again, sizeof(again)) == n && strcmp(again, o) == 0,
                  "normalising '%s' again changes it", o);
    }
    char small[253];
    FZ_ASSERT(tenant_host_normalise(in, small, sizeof(small)) == 0, "outlen 253 accepted");

    bool sv = tenant_slug_valid(in);
    FZ_ASSERT(sv == ref_slug_valid(in, strlen(in)), "tenant_slug_valid('%s') = %d", in, sv);
    if (sv) {
        char host[128], norm[254];
        snprintf(host, sizeof(host), "%s%s", in, BASE);
        FZ_ASSERT(tenant_host_normalise(host, norm, sizeof(norm)) > 0 && strcmp(norm, host) == 0,
                  "slug host '%s' does not normalise to itself", host);
    }

    arena *a = req_arena;
    const char *rh = request_normalise_host(a, in);
    FZ_ASSERT(rh != NULL, "request_normalise_host gave NULL");
    for (const char *p = rh; *p; p++)
        FZ_ASSERT(!(*p >= 'A' && *p <= 'Z'), "request_normalise_host kept upper case: %s", rh);
    if (in[0] != '[')
        FZ_ASSERT(strchr(rh, ':') == NULL, "request_normalise_host kept a port: %s", rh);
    size_t il = strlen(in);
    char *one = malloc(il + 1);
    bool valid;
    size_t ol = request_host_normalise(in, one, il + 1, &valid);
    FZ_ASSERT(strlen(one) == ol && strcmp(one, rh) == 0,
              "request_host_normalise('%s') = '%s', request_normalise_host '%s'", in, one, rh);
    FZ_ASSERT(valid == (n > 0), "request_host_normalise('%s') valid %d, tenant_host_normalise %zu",
              in, valid, n);
    if (valid)
        FZ_ASSERT(strcmp(one, o) == 0, "'%s': '%s' and '%s'", in, one, o);
    free(one);
    free(o);
    free(in);
}

/* ---- the chain's model ------------------------------------------------------------------- */

static const struct tenant *by_slug(const char *s, size_t n)
{
    for (size_t i = 0; i < NTENANTS; i++)
        if (strlen(tenants[i].slug) == n && memcmp(tenants[i].slug, s, n) == 0)
            return &tenants[i];
    return NULL;
}

static const struct tenant *by_domain(const char *d)
{
    for (size_t i = 0; i < NTENANTS; i++)
        if (tenants[i].domain && strcmp(tenants[i].domain, d) == 0)
            return &tenants[i];
    return NULL;
}

struct expect {
    int status;
    const struct tenant *t;   /* NULL: central (when status 200) */
    bool handler;             /* false: the chain answered (theme, or an error) */
    char path[4096];          /* the path the handler sees */
};

static void model(const char *host, const char *uri, const char *hdr, bool trusted,
                  const char *method, struct expect *e)
{
    memset(e, 0, sizeof(*e));
    char norm[512];
    if (host == NULL || host[0] == '\0' || ref_normalise(host, norm) == 0) {
        e->status = 400;
        return;
    }
    /* The path as request_init takes it: REQUEST_URI up to '?', "/" when empty. */
    const char *u = uri && uri[0] ? uri : "/";
    size_t pl = strcspn(u, "?");
    char path[4096];
    snprintf(path, sizeof(path), "%.*s", (int)pl, u);
    if (strcmp(norm, CENTRAL) == 0) {
        e->status = 200;
        e->handler = true;
        snprintf(e->path, sizeof(e->path), "%s", path);
        return;
    }
    const struct tenant *t = NULL;
    const char *rest = NULL;
    size_t nl = strlen(norm), bl = strlen(BASE);
    /* subdomain */
    if (nl > bl && strcmp(norm + nl - bl, BASE) == 0 && memchr(norm, '.', nl - bl) == NULL &&
        ref_slug_valid(norm, nl - bl))
        t = by_slug(norm, nl - bl);
    /* host */
    if (t == NULL)
        t = by_domain(norm);
    /* header */
    if (t == NULL && hdr != NULL && trusted) {
        if (!ref_slug_valid(hdr, strlen(hdr))) {
            e->status = 400;
            return;
        }
        t = by_slug(hdr, strlen(hdr));
    }
    /* path: refused (400) when a segment is "." or "..", or it holds a backslash or an
     * encoded dot, slash or backslash (the web server would read it otherwise) */
    if (t == NULL && strncmp(path, PREFIX, strlen(PREFIX)) == 0) {
        bool ambiguous = strchr(path, '\\') != NULL;
        for (const char *q = path; *q != '\0' && !ambiguous; q++)
            if (q[0] == '%' && q[1] != '\0' && q[2] != '\0')
                ambiguous = (q[1] == '2' && strchr("eEfF", q[2]) != NULL) ||
                            (q[1] == '5' && strchr("cC", q[2]) != NULL);
        char segs[4096];
        snprintf(segs, sizeof(segs), "%s", path);
        for (char *save = NULL, *g = strtok_r(segs, "/", &save); g != NULL && !ambiguous;
             g = strtok_r(NULL, "/", &save))
            ambiguous = strcmp(g, ".") == 0 || strcmp(g, "..") == 0;
        if (ambiguous) {
            e->status = 400;
            return;
        }
        const char *s = path + strlen(PREFIX);
        size_t sl = strcspn(s, "/");
        if (ref_slug_valid(s, sl) && (t = by_slug(s, sl)) != NULL)
            rest = s[sl] ? s + sl : "/";
    }
    if (t == NULL) {
        e->status = 404;
        return;
    }
    e->t = t;
    bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    switch (t->state) {
    case TENANT_ACTIVE: break;
    case TENANT_MOVING:
        if (!read) {
            e->status = 503;
            return;
        }
        break;
    case TENANT_SUSPENDED: e->status = 403; return;
    case TENANT_MAINTENANCE: e->status = 503; return;
    case TENANT_DELETING: e->status = 404; return;
    default: e->status = 503; return;
    }
    snprintf(e->path, sizeof(e->path), "%s", rest ? rest : path);
    e->status = 200;
    e->handler = strcmp(e->path, "/_theme.css") != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The fields, each a C string as FastCGI params are. */
    char *buf0 = fz_copy(data, size, true);
    const char *field[4] = {NULL, NULL, NULL, NULL};
    int nf = 0;
    for (size_t i = 0; nf < 4;) {
        field[nf++] = buf0 + i;
        const char *z = memchr(buf0 + i, '\0', size + 1 - i);
        i = (size_t)(z - buf0) + 1;
        if (i > size)
            break;
    }
    const char *host = field[0], *uri = nf > 1 ? field[1] : NULL;
    const char *hdr = nf > 2 ? field[2] : NULL;
    unsigned flags = nf > 3 ? (unsigned char)field[3][0] : 0;
    bool trusted = flags & 1;
    static const char *const methods[] = {"GET", "POST", "HEAD", "DELETE"};
    const char *method = methods[(flags >> 1) & 3];

    check_names(host);
    if (hdr != NULL)
        check_names(hdr);
    arena_reset(req_arena);

    struct fake f = {.n = 0, .body = BUF_INIT};
    f.params[f.n][0] = "TENANT_HOST";
    f.params[f.n++][1] = host;
    if (uri != NULL) {
        f.params[f.n][0] = "REQUEST_URI";
        f.params[f.n++][1] = uri;
    }
    f.params[f.n][0] = "REQUEST_METHOD";
    f.params[f.n++][1] = method;
    f.params[f.n][0] = "REMOTE_ADDR";
    f.params[f.n++][1] = trusted ? "10.1.2.3" : "192.0.2.9";
    if (hdr != NULL) {
        f.params[f.n][0] = "HTTP_X_TENANT";
        f.params[f.n++][1] = hdr;
    }
    tn_request r;
    request_init(&r, &fake_tp, &f, req_arena, &headers, &out, 1 << 20, "fuzz", 0);
    handler_ran = false;
    handler_slug[0] = '\0';
    chain_run(&r, &handler_app);
    request_finish(&r);
    int status = r.status;
    chain_finish(&r, status);
    if (r.route_state == RH_OK || r.route_state == RH_INVALID) {
        char norm[254];
        size_t nl = tenant_host_normalise(host, norm, sizeof(norm));
        FZ_ASSERT(r.route_state == RH_OK ? nl > 0 && strcmp(r.route_host, norm) == 0 : nl == 0,
                  "host '%s': the routing host is '%s' (state %d)", host, r.route_host,
                  r.route_state);
    }

    struct expect e;
    model(host, uri, hdr, trusted, method, &e);
    FZ_ASSERT(status == e.status, "host '%s' uri '%s' header '%s' %s %s: status %d, expected %d",
              host, uri ? uri : "(none)", hdr ? hdr : "(none)", trusted ? "trusted" : "untrusted",
              method, status, e.status);
    FZ_ASSERT(handler_ran == e.handler, "host '%s' uri '%s': the handler %s", host,
              uri ? uri : "(none)", handler_ran ? "ran" : "did not run");
    if (handler_ran) {
        const char *want = e.t ? e.t->slug : "";
        FZ_ASSERT(strcmp(handler_slug, want) == 0,
                  "host '%s' uri '%s' header '%s': the handler saw tenant '%s', not '%s'", host,
                  uri ? uri : "(none)", hdr ? hdr : "(none)", handler_slug, want);
        FZ_ASSERT(strcmp(handler_path, e.path) == 0, "the handler saw path '%s', not '%s'",
                  handler_path, e.path);
    } else if (status == 200) {
        /* The theme: the identified tenant's, nobody else's. */
        char want[128];
        snprintf(want, sizeof(want), "/* theme of %s */", e.t->slug);
        FZ_ASSERT(f.body.p != NULL && strstr(f.body.p, want) != NULL,
                  "the theme served for '%s' is not its own", e.t->slug);
    }
    buf_free(&f.body);
    arena_reset(req_arena);
    free(buf0);
    return 0;
}
