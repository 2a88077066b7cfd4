/*
 * bench/micro.c — in-process costs of the tenancy chain, in nanoseconds per operation.
 *
 *   micro [--quick] [--rounds N] [--run-ms MS] [--tenants N] --dir DIR [--json FILE]
 *         [--src-root PREFIX] [--only ID,ID...]
 *
 * Built by bench/run (never by `make` or `make check`) from this file plus the very objects
 * tenancyd is linked from (core/, storage/, tenancy/ in the build folder), so it measures the
 * code the host runs, with the host's compiler flags. It makes a real SQLite registry of
 * --tenants tenants in DIR through registry_create, then times each operation of the table
 * below: calibrated so one run lasts about --run-ms, in alternating rounds (every operation
 * once per round, so a slow drift spreads over all of them), and reports the median of the
 * rounds, wall clock and thread CPU time. The plain function call is the baseline measured
 * in the same run.
 *
 * Allocation counting: this file defines malloc, calloc, realloc, free and the aligned
 * variants and forwards them to glibc's __libc_* entry points. Symbols of the executable win
 * over libc's for every library (ELF interposition), so the count includes what libc and
 * libsqlite3 allocate on our behalf (a -Wl,--wrap=malloc would only see our own objects'
 * calls). Counting costs one increment per call. A separate traced pass records a backtrace
 * for each allocation, so the report names the call sites (file:line via addr2line).
 *
 * Output: a table, the allocation call sites and the goals on stdout, and with --json a JSON
 * object (measure, baseline, results with their call sites, goals) that bench/run wraps with
 * the machine and build facts. Exit 0, 1 when a sanity check of an operation failed (wrong
 * status, lookup not found...), 2 on usage errors.
 *
 * Must not: be part of `make check`, write anywhere but DIR and the --json file, or run
 * longer than its bounded rounds.
 */
#include "core/first.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/conf.h"
#include "core/kv.h"
#include "core/log.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/chain.h"
#include "tenancy/config.h"
#include "tenancy/limits.h"
#include "tenancy/lookup.h"
#include "tenancy/registry.h"
#include "tenancy/request.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- allocation counting (see the banner) ------------------------------------------------ */

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

static uint64_t n_allocs;   /* malloc, calloc, realloc, aligned: every call that may allocate */
static uint64_t n_frees;
static int tracing;         /* record a backtrace per allocation (the sites pass) */
static int in_trace;

#define SITE_FRAMES 24
#define MAX_SITES 512
struct site {
    uint64_t hash;
    uint64_t count;
    int nframes;
    void *frames[SITE_FRAMES];
};
static struct site sites[MAX_SITES];
static uint64_t sites_dropped;

static void record_site(void)
{
    void *fr[SITE_FRAMES + 2];
    int n = backtrace(fr, SITE_FRAMES + 2);
    /* fr[0] is record_site itself, fr[1] the allocator wrapper (note_alloc is inlined into
     * it): the stack of interest starts at fr[2], the caller of malloc. */
    int skip = n > 2 ? 2 : n;
    uint64_t h = 1469598103934665603ull;
    for (int i = skip; i < n; i++) {
        h ^= (uint64_t)(uintptr_t)fr[i];
        h *= 1099511628211ull;
    }
    h = h ? h : 1;
    for (int i = 0; i < MAX_SITES; i++) {
        struct site *s = &sites[(h + (uint64_t)i) % MAX_SITES];
        if (s->hash == h) {
            s->count++;
            return;
        }
        if (s->hash == 0) {
            s->hash = h;
            s->count = 1;
            s->nframes = n - skip > SITE_FRAMES ? SITE_FRAMES : n - skip;
            memcpy(s->frames, fr + skip, (size_t)s->nframes * sizeof(void *));
            return;
        }
    }
    sites_dropped++;
}

static inline void note_alloc(void)
{
    n_allocs++;
    if (tracing && !in_trace) {
        in_trace = 1;
        record_site();
        in_trace = 0;
    }
}

void *malloc(size_t n)
{
    note_alloc();
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    note_alloc();
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    note_alloc();
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p != NULL)
        n_frees++;
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    note_alloc();
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    note_alloc();
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    note_alloc();
    void *p = __libc_memalign(align, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    note_alloc();
    return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

/* ---- options and fixtures ---------------------------------------------------------------- */

static struct {
    int quick;
    int rounds;
    int run_ms;
    int ntenants;
    const char *dir;
    const char *json_path;
    const char *src_root;
    const char *only;
} opt = {0, 0, 0, 1000, NULL, NULL, "", NULL};

#define BASE_DOMAIN "bench.test"
#define SEQ_LEN 65536u   /* random tenant indices, cycled */

static uint32_t seq[SEQ_LEN];
static char **slugs, **domains, **env_tenant_host, **env_http_host;
static registry *reg;                 /* the benchmark's own connection */
static lookup_cache *warm_cache;      /* for the hit benchmarks and the tenant records */
static lookup_cache *cold_cache;      /* caching off: every lookup fetches */
static const tenant_rec **recs;       /* records of warm_cache, by tenant index */
static int failures;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("micro: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void fail_check(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_check(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "micro: %s: sanity check failed: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

/* ---- the in-memory transport ------------------------------------------------------------- */

/* The params nginx sends with `include fastcgi_params` plus the lines our nginx example adds,
 * in nginx's order, as "NAME=value" strings looked up the way the worker looks up libfcgi's
 * (kv_env_get: a linear scan, the first byte compared before the name and the '='). Slots
 * whose value changes per request are filled before each one. */
enum { P_TENANT_HOST = 21, P_HTTP_HOST = 22, P_REQUEST_URI = 5, P_DOCUMENT_URI = 6 };
static const char *env_template[] = {
    "QUERY_STRING=",
    "REQUEST_METHOD=GET",
    "CONTENT_TYPE=",
    "CONTENT_LENGTH=",
    "SCRIPT_NAME=/",
    "REQUEST_URI=/",            /* P_REQUEST_URI */
    "DOCUMENT_URI=/",           /* P_DOCUMENT_URI */
    "DOCUMENT_ROOT=/srv/www",
    "SERVER_PROTOCOL=HTTP/1.1",
    "REQUEST_SCHEME=http",
    "GATEWAY_INTERFACE=CGI/1.1",
    "SERVER_SOFTWARE=nginx/1.22.1",
    "REMOTE_ADDR=127.0.0.1",
    "REMOTE_PORT=51234",
    "SERVER_ADDR=127.0.0.1",
    "SERVER_PORT=80",
    "SERVER_NAME=_",
    "REDIRECT_STATUS=200",
    "REQUEST_START=1764690000.123",
    "REQUEST_ID=4f2a9c0d1e3b5a7788990011aabbccdd",
    "HTTP_PROXY=",
    "TENANT_HOST=",             /* P_TENANT_HOST */
    "HTTP_HOST=",               /* P_HTTP_HOST */
    "HTTP_USER_AGENT=wrk",
    "HTTP_ACCEPT=*/*",
};
#define NENV TN_ARRAY_LEN(env_template)

typedef struct mem_tx {
    char *env[NENV + 1];   /* NULL-terminated, as libfcgi's */
    uint64_t bytes_out;
    uint64_t writes;
} mem_tx;

/* The worker's own lookup over libfcgi's params (fcgi/serve.c fx_param). */
static const char *mem_param(void *tx, const char *name)
{
    return kv_env_get(((mem_tx *)tx)->env, name);
}

static int mem_read(void *tx, char *p, int n)
{
    (void)tx, (void)p, (void)n;
    return 0;
}

static int mem_write(void *tx, const char *p, size_t n)
{
    mem_tx *t = tx;
    (void)p;
    t->bytes_out += n;
    t->writes++;
    return 0;
}

static const tn_transport mem_transport = {mem_param, mem_read, mem_write};

static mem_tx tx;
static arena *req_arena;
static buf req_headers = BUF_INIT, req_out = BUF_INIT;

static void tx_set(uint32_t tenant, const char *uri_env, const char *doc_env)
{
    tx.env[P_TENANT_HOST] = (char *)env_tenant_host[tenant];
    tx.env[P_HTTP_HOST] = (char *)env_http_host[tenant];
    tx.env[P_REQUEST_URI] = (char *)uri_env;
    tx.env[P_DOCUMENT_URI] = (char *)doc_env;
}

/* ---- the chain's configurations --------------------------------------------------------- */

enum chain_kind { CH_NONE = 0, CH_CACHED, CH_UNCACHED, CH_NOGEN };
static int chain_now = CH_NONE;
static tenancy_config chain_cfg;
static arena *chain_cfg_arena;
static limits *lim;

/* The scoreboard hook tenancyd installs (fcgi/route.c note_tenant, sb_set_tenant): publish
 * the tenant of this worker, the slug copied under a sequence count. */
static struct {
    int64_t id;
    uint32_t seq;
    char slug[64];
} board;

static void note_tenant(void *ctx, int64_t id, const char *slug)
{
    (void)ctx;
    __atomic_store_n(&board.id, id, __ATOMIC_RELEASE);
    __atomic_add_fetch(&board.seq, 1, __ATOMIC_ACQ_REL);
    size_t i = 0;
    for (; slug != NULL && slug[i] != '\0' && i + 1 < sizeof(board.slug); i++)
        board.slug[i] = slug[i];
    board.slug[i] = '\0';
    __atomic_add_fetch(&board.seq, 1, __ATOMIC_ACQ_REL);
}

static int empty_handler(tn_request *r)
{
    (void)r;
    return TN_OK;
}
static const chain_app empty_handler_app = {.handle = empty_handler};

/* One request through the chain, as fcgi/serve.c's serve_one does it minus FastCGI, the
 * scoreboard and the access log. Returns the status. */
static inline int one_request(uint32_t tenant, const char *uri_env, const char *doc_env)
{
    tn_request r;
    tx_set(tenant, uri_env, doc_env);
    request_init(&r, &mem_transport, &tx, req_arena, &req_headers, &req_out, 8 << 20, "bench",
                 0);
    int rc = chain_run(&r, &empty_handler_app);
    (void)rc;
    request_finish(&r);
    chain_finish(&r, r.status);
    arena_reset(req_arena);
    return r.status;
}

static void chain_switch(int kind);

/* ---- the registry ------------------------------------------------------------------------ */

static char *xsprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xsprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        die("out of memory");
    va_end(ap);
    return s;
}

static double now_ms(void) { return (double)clock_mono_ns() / 1e6; }

static void make_registry(void)
{
    char err[512];
    char *state = xsprintf("%s/state", opt.dir);
    char *nogen = xsprintf("%s/nogen", opt.dir);
    if ((mkdir(state, 0755) < 0 && errno != EEXIST) || (mkdir(nogen, 0755) < 0 && errno != EEXIST))
        die("cannot create %s: %s", state, strerror(errno));
    char *uri = xsprintf("sqlite:%s/control.db", state);
    char *gen = xsprintf("%s/registry.gen", state);
    if (registry_open(uri, gen, &reg, err, sizeof(err)) != TN_OK)
        die("registry_open: %s", err);
    if (registry_init(reg, err, sizeof(err)) != TN_OK)
        die("registry_init: %s", err);
    /* Setup only: creating 1,000 tenants with an fsync per commit would take seconds and
     * measure the disk. Reads (what we time) do not depend on it. */
    if (tn_db_exec(registry_db(reg), "PRAGMA synchronous=OFF", 0, NULL) != TN_OK)
        die("PRAGMA synchronous: %s", tn_db_error(registry_db(reg)));

    int n = opt.ntenants;
    slugs = calloc((size_t)n, sizeof(char *));
    domains = calloc((size_t)n, sizeof(char *));
    env_tenant_host = calloc((size_t)n, sizeof(char *));
    env_http_host = calloc((size_t)n, sizeof(char *));
    recs = calloc((size_t)n, sizeof(*recs));
    if (!slugs || !domains || !env_tenant_host || !env_http_host || !recs)
        die("out of memory");
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        slugs[i] = xsprintf("t%05d", i);
        domains[i] = xsprintf("www.shop-%05d.example", i);
        env_tenant_host[i] = xsprintf("TENANT_HOST=%s.%s", slugs[i], BASE_DOMAIN);
        env_http_host[i] = xsprintf("HTTP_HOST=%s.%s", slugs[i], BASE_DOMAIN);
        char *name = xsprintf("Tenant number %d", i);
        char *settings = xsprintf("{\"theme.primary\":\"#%06x\",\"theme.font\":\"system-ui, "
                                  "sans-serif\",\"theme.radius\":\"4px\",\"plan\":\"pro\"}",
                                  (unsigned)(i * 2654435761u) & 0xffffff);
        const char *doms[] = {domains[i]};
        registry_new t = {.slug = slugs[i], .name = name, .state = TENANT_ACTIVE,
                          .settings = settings, .domains = doms, .ndomains = 1};
        if (registry_create(reg, &t, NULL, err, sizeof(err)) != TN_OK)
            die("registry_create %s: %s", slugs[i], err);
        free(name);
        free(settings);
    }
    fprintf(stderr, "micro: created %d tenants through registry_create in %.0f ms\n", n,
            now_ms() - t0);
    free(state);
    free(nogen);
    free(uri);
    free(gen);
}

static int fetch_reg(void *ctx, int kind, const char *key, tenant_rec **out)
{
    return registry_fetch(ctx, kind, key, out);
}

static void make_caches(void)
{
    /* TTL one hour: these hits must stay hits for the whole run. */
    warm_cache = lookup_create(10000, 3600 * 1000, 5000);
    cold_cache = lookup_create(0, 0, 0);
    if (warm_cache == NULL || cold_cache == NULL)
        die("out of memory");
    lookup_sync(warm_cache, registry_generation(reg));
    int64_t now = clock_mono_ms();
    for (int i = 0; i < opt.ntenants; i++) {
        const tenant_rec *t;
        if (lookup_get(warm_cache, LK_SLUG, slugs[i], now, fetch_reg, reg, registry_generation,
                       reg, &t) != TN_OK)
            die("lookup of %s failed", slugs[i]);
        recs[i] = t;
        if (lookup_get(warm_cache, LK_DOMAIN, domains[i], now, fetch_reg, reg,
                       registry_generation, reg, &t) != TN_OK)
            die("lookup of %s failed", domains[i]);
    }
}

/* ---- the operations ----------------------------------------------------------------------- */

static volatile uint64_t sink;
static uint32_t seq_pos;

static inline uint32_t next_tenant(void) { return seq[seq_pos++ & (SEQ_LEN - 1)]; }

static __attribute__((noinline, noclone)) uint64_t bench_plain_fn(uint64_t x)
{
    __asm__ volatile("" : "+r"(x));
    return x + 1;
}

static void bench_plain(uint64_t n)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc = bench_plain_fn(acc);
    sink = acc;
}

static void lookup_hit(uint64_t n, int kind, char **keys)
{
    int64_t now = clock_mono_ms();
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        const tenant_rec *t;
        uint32_t k = next_tenant();
        bad += lookup_get(warm_cache, kind, keys[k], now, fetch_reg, reg, registry_generation,
                          reg, &t) != TN_OK;
    }
    if (bad)
        fail_check("lookup hit", "%llu lookups did not find their tenant", (unsigned long long)bad);
}

static void bench_lookup_hit_slug(uint64_t n) { lookup_hit(n, LK_SLUG, slugs); }
static void bench_lookup_hit_domain(uint64_t n) { lookup_hit(n, LK_DOMAIN, domains); }

static void lookup_miss(uint64_t n, int kind, char **keys)
{
    int64_t now = clock_mono_ms();
    uint64_t gen = registry_generation(reg);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        const tenant_rec *t;
        uint32_t k = next_tenant();
        bad += lookup_get(cold_cache, kind, keys[k], now, fetch_reg, reg, registry_generation,
                          reg, &t) != TN_OK;
        lookup_sync(cold_cache, gen);   /* frees the record, as the next request would */
    }
    if (bad)
        fail_check("lookup miss", "%llu lookups did not find their tenant", (unsigned long long)bad);
}

static void bench_lookup_miss_slug(uint64_t n) { lookup_miss(n, LK_SLUG, slugs); }
static void bench_lookup_miss_domain(uint64_t n) { lookup_miss(n, LK_DOMAIN, domains); }

static void bench_scope(uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        tn_request r;
        tx_set(next_tenant(), "REQUEST_URI=/", "DOCUMENT_URI=/");
        request_init(&r, &mem_transport, &tx, req_arena, &req_headers, &req_out, 8 << 20,
                     "bench", 0);
        chain_finish(&r, r.status);
        arena_reset(req_arena);
    }
}

static void chain_loop(uint64_t n, const char *what)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += one_request(next_tenant(), "REQUEST_URI=/", "DOCUMENT_URI=/") != 200;
    if (bad)
        fail_check(what, "%llu requests did not answer 200", (unsigned long long)bad);
}

/* The whole chain with cold caches: before each request, reads of 8 MB of other memory (a
 * load per cache line, pages in random order) push the chain's code and data out of the L1
 * and L2 caches, most of L3, and the TLBs, as nginx, the kernel and the load generator do
 * between two requests of a busy worker on a shared 2-core machine. The sweep's time is
 * taken out (excluded_*). The thread's CPU clock is a system call, read at a point inside
 * it: what runs after the read that ends a sweep and before the read that starts the next
 * one (a whole call's worth, cold) counts as the request's CPU time, though not as its wall
 * time. That is why chain_cold_direct, which takes the clock reads out, is the judged one. */
#define COLD_BYTES (8u << 20)
static unsigned char *cold_buf;
static uint32_t *cold_order;   /* page order of the sweep */
static int64_t excluded_wall, excluded_cpu;
static volatile unsigned cold_sink;
static int64_t cpu_ns(void);

static void cold_sweep(void)
{
    const uint32_t pages = COLD_BYTES / 4096;
    if (cold_buf == NULL) {
        cold_buf = malloc(COLD_BYTES);
        cold_order = malloc(pages * sizeof(*cold_order));
        if (cold_buf == NULL || cold_order == NULL)
            die("out of memory");
        memset(cold_buf, 1, COLD_BYTES);
        uint64_t x = 88172645463325252ull;
        for (uint32_t i = 0; i < pages; i++)
            cold_order[i] = i;
        for (uint32_t i = pages - 1; i > 0; i--) {   /* Fisher-Yates */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t j = (uint32_t)(x % (i + 1)), t = cold_order[i];
            cold_order[i] = cold_order[j], cold_order[j] = t;
        }
    }
    unsigned acc = 0;
    for (uint32_t i = 0; i < pages; i++) {
        const unsigned char *pg = cold_buf + (size_t)cold_order[i] * 4096;
        for (uint32_t off = 0; off < 4096; off += 64)
            acc += pg[off];
    }
    cold_sink = acc;
}

static void bench_chain_cold(uint64_t n)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        int64_t w0 = clock_mono_ns(), c0 = cpu_ns();
        cold_sweep();
        int64_t c1 = cpu_ns(), w1 = clock_mono_ns();
        excluded_wall += w1 - w0;
        excluded_cpu += c1 - c0;
        bad += one_request(next_tenant(), "REQUEST_URI=/", "DOCUMENT_URI=/") != 200;
    }
    if (bad)
        fail_check("chain_cold", "%llu requests did not answer 200", (unsigned long long)bad);
}

/* The same requests timed one by one (chain_cold_direct): the clocks are read right around
 * each request, after its sweep, and the cost of those reads (measured after a sweep of its
 * own, with nothing between them) is taken out. chain_cold instead subtracts each sweep
 * (about a millisecond) from the run's total: a request of a few microseconds is then the
 * small difference of two large figures, and whatever the sweep's two clocks disagree on
 * (the thread descheduled during a sweep counts in the wall clock, not the CPU clock) lands
 * on it. Set while the op runs; run_once uses these figures instead. The clock reads'
 * own cost is kept too (clockread_*), so the output shows what chain_cold's CPU figure
 * carries. */
static bool direct_set;
static int64_t direct_wall, direct_cpu;
static int64_t clockread_cpu, clockread_wall, clockread_n;

static void bench_chain_cold_direct(uint64_t n)
{
    uint64_t bad = 0;
    direct_set = true;
    for (uint64_t i = 0; i < n; i++) {
        cold_sweep();
        int64_t w0 = clock_mono_ns(), c0 = cpu_ns();
        int64_t c1 = cpu_ns(), w1 = clock_mono_ns();
        direct_wall -= w1 - w0;
        direct_cpu -= c1 - c0;
        clockread_wall += w1 - w0;
        clockread_cpu += c1 - c0;
        clockread_n++;
        cold_sweep();
        w0 = clock_mono_ns(), c0 = cpu_ns();
        bad += one_request(next_tenant(), "REQUEST_URI=/", "DOCUMENT_URI=/") != 200;
        c1 = cpu_ns(), w1 = clock_mono_ns();
        direct_wall += w1 - w0;
        direct_cpu += c1 - c0;
    }
    if (bad)
        fail_check("chain_cold_direct", "%llu requests did not answer 200",
                   (unsigned long long)bad);
}

static void bench_chain(uint64_t n) { chain_loop(n, "chain"); }
static void bench_chain_nocache(uint64_t n) { chain_loop(n, "chain_nocache"); }
static void bench_chain_nogen(uint64_t n) { chain_loop(n, "chain_nogen"); }

static void bench_theme(uint64_t n)
{
    uint64_t bad = 0;
    uint64_t before = tx.bytes_out;
    for (uint64_t i = 0; i < n; i++)
        bad += one_request(next_tenant(), "REQUEST_URI=/_theme.css",
                           "DOCUMENT_URI=/_theme.css") != 200;
    if (bad)
        fail_check("theme", "%llu requests did not answer 200", (unsigned long long)bad);
    if (n > 0 && (tx.bytes_out - before) / n < 150)
        fail_check("theme", "answers of %llu bytes on average: no CSS?",
                   (unsigned long long)((tx.bytes_out - before) / n));
}

static const char cache_value[32] = "0123456789abcdef0123456789abcde";

/* A request object with the tenant set as chain_run would, for the tn_cache_* calls. */
static void cache_request(tn_request *r)
{
    tx_set(0, "REQUEST_URI=/", "DOCUMENT_URI=/");
    request_init(r, &mem_transport, &tx, req_arena, &req_headers, &req_out, 8 << 20, "bench", 0);
}

static void bench_cache_get(uint64_t n)
{
    tn_request r;
    cache_request(&r);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        r.tenant = recs[next_tenant()];
        const void *v;
        size_t len;
        bad += tn_cache_get(&r, "greeting", &v, &len) != TN_OK || len != sizeof(cache_value);
        if ((i & 127) == 127)
            arena_reset(req_arena);   /* the value is copied into request memory */
    }
    r.tenant = NULL;
    arena_reset(req_arena);
    if (bad)
        fail_check("cache_get", "%llu gets missed", (unsigned long long)bad);
}

static void bench_cache_set(uint64_t n)
{
    tn_request r;
    cache_request(&r);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        r.tenant = recs[next_tenant()];
        bad += tn_cache_set(&r, "greeting", cache_value, sizeof(cache_value), 0) != TN_OK;
    }
    r.tenant = NULL;
    arena_reset(req_arena);
    if (bad)
        fail_check("cache_set", "%llu sets failed", (unsigned long long)bad);
}

static int run_fn(tn_request *r, void *arg)
{
    (void)r, (void)arg;
    return TN_OK;
}

static void bench_tn_run(uint64_t n)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += tn_run(slugs[next_tenant()], run_fn, NULL) != TN_OK;
    if (bad)
        fail_check("tn_run", "%llu runs failed", (unsigned long long)bad);
}

/* The table of operations, in the order of every round. seed_ns: the seed's figure for the
 * closest operation (0: none), from the published write-up of the Node.js predecessor
 * (another machine: only orders of magnitude compare). */
typedef struct bench {
    const char *id;
    const char *name;
    void (*fn)(uint64_t n);
    int chain;               /* the chain configuration it needs (CH_NONE: none) */
    double seed_ns;
    const char *seed_what;
    /* results */
    uint64_t iters;
    double wall[64], cpu[64];
    int nruns;
    uint64_t ops_total, allocs_total, frees_total;
    bool selected;
} bench;

static bench benches[] = {
    {"plain", "plain function call (the floor)", bench_plain, CH_NONE, 900,
     "AsyncLocalStorage.run + await (the seed's own reference)"},
    {"lookup_hit_slug", "lookup_get hit by slug (1,000 tenants)", bench_lookup_hit_slug, CH_NONE,
     0, NULL},
    {"lookup_hit_domain", "lookup_get hit by domain (1,000 tenants)", bench_lookup_hit_domain,
     CH_NONE, 6700, "resolve() by domain, in-memory repository"},
    {"lookup_miss_slug", "lookup_get miss by slug: SQLite query", bench_lookup_miss_slug,
     CH_NONE, 0, NULL},
    {"lookup_miss_domain", "lookup_get miss by domain: SQLite join", bench_lookup_miss_domain,
     CH_NONE, 0, NULL},
    {"scope", "request scope: request_init + chain_finish + reset", bench_scope, CH_CACHED, 11300,
     "openRequestScope + run + close"},
    {"chain", "whole chain, empty handler, cache warm", bench_chain, CH_CACHED, 27000,
     "whole middleware per request, 27-37 us (HTTP, incl. its log line)"},
    {"theme", "/_theme.css through the chain (theme cached)", bench_theme, CH_CACHED, 9200,
     "theme().toCss(), cached"},
    {"cache_get", "tn_cache_get, 32-byte value", bench_cache_get, CH_CACHED, 8900,
     "cache().get(), memory"},
    {"cache_set", "tn_cache_set, 32-byte value (replace)", bench_cache_set, CH_CACHED, 0, NULL},
    {"tn_run", "tn_run(slug) with an empty function", bench_tn_run, CH_CACHED, 7500,
     "tenancy.run(id)"},
    {"chain_cold", "whole chain, cache warm, CPU caches cold (8 MB read between requests)",
     bench_chain_cold, CH_CACHED, 0, NULL},
    {"chain_cold_direct", "the same, each request timed alone (clock reads taken out)",
     bench_chain_cold_direct, CH_CACHED, 0, NULL},
    {"chain_nocache", "whole chain, lookup_cache off (SQLite/request)", bench_chain_nocache,
     CH_UNCACHED, 0, NULL},
    {"chain_nogen", "whole chain, cache warm, no registry.gen file", bench_chain_nogen, CH_NOGEN,
     0, NULL},
};
#define NBENCH TN_ARRAY_LEN(benches)

/* ---- switching and warming the chain ------------------------------------------------------ */

static void chain_switch(int kind)
{
    if (kind == CH_NONE || kind == chain_now)
        return;
    if (chain_now != CH_NONE)
        chain_fini();
    arena_destroy(chain_cfg_arena);
    chain_cfg_arena = arena_create(0);
    memset(&chain_cfg, 0, sizeof(chain_cfg));
    /* The configuration as tenancyd would read it from its file. CH_NOGEN points state_dir
     * at a folder without registry.gen (a registry given by path, state_dir elsewhere). */
    char *text = xsprintf("tenant.resolvers = subdomain\n"
                          "tenant.base_domains = " BASE_DOMAIN "\n"
                          "registry = sqlite:%s/state/control.db\n"
                          "state_dir = %s/%s\n"
                          "lookup_cache = %s\n",
                          opt.dir, opt.dir, kind == CH_NOGEN ? "nogen" : "state",
                          kind == CH_UNCACHED ? "off" : "on");
    conf_error cerr;
    if (conf_parse_text(tenancy_config_table, &chain_cfg, "micro", text, chain_cfg_arena, NULL,
                        &cerr) != TN_OK) {
        char msg[512];
        conf_error_format(&cerr, msg, sizeof(msg));
        die("config: %s", msg);
    }
    free(text);
    char err[512];
    if (tenancy_config_finish(&chain_cfg, chain_cfg_arena, err, sizeof(err)) != TN_OK)
        die("config: %s", err);
    chain_env env = {.cfg = &chain_cfg, .max_children = 2, .lim = lim,
                     .note_tenant = note_tenant, .hook_ctx = NULL};
    if (chain_init(&env) != TN_OK)
        die("chain_init failed");
    chain_now = kind;

    /* Warm: every tenant once through the chain (the lookup cache), its theme and its
     * cache entry, so what we time afterwards is the steady state of a busy worker. */
    tn_request r;
    for (int i = 0; i < opt.ntenants; i++) {
        int st = one_request((uint32_t)i, "REQUEST_URI=/", "DOCUMENT_URI=/");
        if (st != 200)
            die("warm-up: %s answered %d", slugs[i], st);
        if (kind != CH_CACHED)
            continue;
        one_request((uint32_t)i, "REQUEST_URI=/_theme.css", "DOCUMENT_URI=/_theme.css");
        cache_request(&r);
        r.tenant = recs[i];
        tn_cache_set(&r, "greeting", cache_value, sizeof(cache_value), 0);
        r.tenant = NULL;
        arena_reset(req_arena);
    }
    if (kind == CH_CACHED)
        tn_run(slugs[0], run_fn, NULL);   /* its arena is made on first use */
}

/* ---- timing ------------------------------------------------------------------------------- */

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct sample {
    double wall_ns, cpu_ns;   /* of the operations (bench_chain_cold's sweeps taken out) */
    uint64_t allocs, frees;
    double total_wall_ns;     /* everything: what a run lasts */
} sample;

static sample run_once(bench *b, uint64_t n)
{
    chain_switch(b->chain);
    uint64_t a0 = n_allocs, f0 = n_frees;
    excluded_wall = excluded_cpu = 0;
    direct_set = false;
    direct_wall = direct_cpu = 0;
    int64_t c0 = cpu_ns();
    int64_t w0 = clock_mono_ns();
    b->fn(n);
    int64_t w1 = clock_mono_ns();
    int64_t c1 = cpu_ns();
    sample s = {(double)(w1 - w0 - excluded_wall), (double)(c1 - c0 - excluded_cpu),
                n_allocs - a0, n_frees - f0, (double)(w1 - w0)};
    if (direct_set) {
        s.wall_ns = (double)direct_wall;
        s.cpu_ns = (double)direct_cpu;
    }
    return s;
}

/* Iterations for one run of about opt.run_ms. */
static uint64_t calibrate(bench *b)
{
    double target = opt.run_ms * 1e6;
    uint64_t n = 16;
    for (;;) {
        sample s = run_once(b, n);
        if (s.total_wall_ns >= target / 8 || n >= (1ull << 34)) {
            double per = s.total_wall_ns / (double)n;
            uint64_t want = (uint64_t)(target / (per > 0.1 ? per : 0.1));
            return want < 16 ? 16 : want;
        }
        n *= 4;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double t[64];
    memcpy(t, v, (size_t)n * sizeof(double));
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double vmin(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double vmax(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* ---- malloc call sites --------------------------------------------------------------------- */

typedef struct site_out {
    double per_op;
    uint64_t count;
    char text[2048];   /* frames, one per line */
} site_out;

static int cmp_site(const void *a, const void *b)
{
    const struct site *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static const char *strip_root(const char *path)
{
    size_t n = strlen(opt.src_root);
    if (n > 0 && strncmp(path, opt.src_root, n) == 0)
        return path + n;
    /* Built out of tree: "<root>/bench/build/../../core/x.c" style paths. */
    static const char *const dirs[] = {"/core/", "/storage/", "/tenancy/", "/bench/", "/fcgi/"};
    const char *best = NULL;
    for (size_t i = 0; i < TN_ARRAY_LEN(dirs); i++) {
        const char *p = strstr(path, dirs[i]);
        while (p != NULL) {
            const char *q = strstr(p + 1, dirs[i]);
            if (q == NULL)
                break;
            p = q;
        }
        if (p != NULL && (best == NULL || p > best))
            best = p;
    }
    return best ? best + 1 : path;
}

/* One line per frame: "function (file:line)" for ours, "library: symbol" for others. The
 * frames of this executable go through one addr2line call. */
static void symbolize(struct site *s, char *out, size_t outlen)
{
    Dl_info self;
    if (!dladdr((void *)bench_plain_fn, &self))
        memset(&self, 0, sizeof(self));
    char cmd[8192];
    int cl = snprintf(cmd, sizeof(cmd), "addr2line -f -i -p -a -e /proc/%ld/exe", (long)getpid());
    int nexe = 0;
    bool exe[SITE_FRAMES];
    for (int i = 0; i < s->nframes; i++) {
        Dl_info di;
        uintptr_t a = (uintptr_t)s->frames[i] - 1;   /* inside the call instruction */
        exe[i] = dladdr((void *)a, &di) && self.dli_fbase != NULL && di.dli_fbase == self.dli_fbase;
        if (exe[i] && cl < (int)sizeof(cmd) - 40) {
            cl += snprintf(cmd + cl, sizeof(cmd) - (size_t)cl, " 0x%lx",
                           (unsigned long)(a - (uintptr_t)self.dli_fbase));
            nexe++;
        }
    }
    char lines[SITE_FRAMES][512];
    int nl = 0;
    if (nexe > 0) {
        snprintf(cmd + cl, sizeof(cmd) - (size_t)cl, " 2>/dev/null");
        FILE *p = popen(cmd, "r");
        char line[1024];
        while (p != NULL && fgets(line, sizeof(line), p) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            /* "0x...: fn at /path/file.c:12" then " (inlined by) fn at file:line" lines. */
            const char *body = line;
            bool inl = strncmp(line, " (inlined by) ", 14) == 0;
            if (inl)
                body = line + 14;
            else if (strncmp(line, "0x", 2) == 0 && strstr(line, ": ") != NULL)
                body = strstr(line, ": ") + 2;
            char fn[256] = "", file[700] = "";
            const char *at = strstr(body, " at ");
            if (at != NULL) {
                snprintf(fn, sizeof(fn), "%.*s", (int)(at - body < 255 ? at - body : 255), body);
                snprintf(file, sizeof(file), "%.699s", strip_root(at + 4));
            } else {
                snprintf(fn, sizeof(fn), "%.255s", body);
            }
            char *disc = strstr(file, " (discriminator");
            if (disc != NULL)
                *disc = '\0';
            if (inl && nl > 0) {
                size_t ll = strlen(lines[nl - 1]);
                snprintf(lines[nl - 1] + ll, sizeof(lines[0]) - ll, " <- inlined in %.100s (%.200s)",
                         fn, file);
            } else if (nl < SITE_FRAMES) {
                snprintf(lines[nl++], sizeof(lines[0]), "%.200s (%.300s)", fn, file);
            }
        }
        if (p != NULL)
            pclose(p);
    }
    size_t o = 0;
    int li = 0;
    out[0] = '\0';
    for (int i = 0; i < s->nframes && o + 1 < outlen; i++) {
        char fr[600];
        if (exe[i]) {
            snprintf(fr, sizeof(fr), "%s", li < nl ? lines[li] : "?");
            li++;
        } else {
            Dl_info di;
            uintptr_t a = (uintptr_t)s->frames[i] - 1;
            if (dladdr((void *)a, &di) && di.dli_fname != NULL) {
                const char *lib = strrchr(di.dli_fname, '/');
                lib = lib ? lib + 1 : di.dli_fname;
                if (di.dli_sname != NULL)
                    snprintf(fr, sizeof(fr), "%s: %s+0x%lx", lib, di.dli_sname,
                             (unsigned long)(a - (uintptr_t)di.dli_saddr));
                else
                    snprintf(fr, sizeof(fr), "%s+0x%lx", lib,
                             (unsigned long)(a - (uintptr_t)di.dli_fbase));
            } else {
                snprintf(fr, sizeof(fr), "%p", s->frames[i]);
            }
        }
        o += (size_t)snprintf(out + o, outlen - o, "%s\n", fr);
        /* Stop at the benchmark function: what called it is this program's loop. */
        if (strncmp(fr, "bench_", 6) == 0 || strstr(fr, " bench_") != NULL ||
            strncmp(fr, "one_request", 11) == 0 || strncmp(fr, "chain_loop", 10) == 0 ||
            strncmp(fr, "lookup_hit", 10) == 0 || strncmp(fr, "lookup_miss", 11) == 0 ||
            strncmp(fr, "main", 4) == 0)
            break;
        if (o >= outlen)
            break;
    }
}

#define MAX_SITES_OUT 6     /* whole stacks kept for the JSON */
#define MAX_SYMBOLIZED 32   /* stacks symbolized for the grouping by call site */
#define MAX_GROUPS 12
static site_out site_results[NBENCH][MAX_SITES_OUT];
static int nsite_results[NBENCH];
static uint64_t traced_ops[NBENCH], traced_allocs[NBENCH];

/* Allocations grouped by where our code calls out: the first frame of this executable (the
 * frames above it are libc's or SQLite's), with its caller for context. */
typedef struct group_out {
    char where[600];
    double per_op;
} group_out;
static group_out groups[NBENCH][MAX_GROUPS];
static int ngroups[NBENCH];
static double grouped_per_op[NBENCH];   /* what the groups cover (the rest: unsymbolized) */

static bool frame_is_lib(const char *line) { return strstr(line, ".so") != NULL && strchr(line, '(') == NULL; }

static void group_site(size_t bi, const char *text, double per_op)
{
    /* The first frame of ours, the lines above it (libraries) summarised by the first one. */
    char lib[160] = "", where[600] = "";
    const char *t = text;
    while (*t) {
        size_t l = strcspn(t, "\n");
        char line[600];
        snprintf(line, sizeof(line), "%.*s", (int)(l < sizeof(line) - 1 ? l : sizeof(line) - 1), t);
        t += l;
        if (*t == '\n')
            t++;
        if (frame_is_lib(line)) {
            if (lib[0] == '\0' && strncmp(line, "libc.so", 7) != 0) {
                size_t c = strcspn(line, ":+");
                snprintf(lib, sizeof(lib), "%.*s", (int)(c < 150 ? c : 150), line);
            }
            continue;
        }
        char next[300] = "";
        if (*t) {
            size_t l2 = strcspn(t, "\n");
            snprintf(next, sizeof(next), "%.*s", (int)(l2 < 299 ? l2 : 299), t);
        }
        snprintf(where, sizeof(where), "%.250s%s%s%s%.200s", line, lib[0] ? " [in " : "",
                 lib, lib[0] ? "]" : "", next[0] ? " <- " : "");
        if (next[0]) {
            size_t wl = strlen(where);
            snprintf(where + wl, sizeof(where) - wl, "%.200s", next);
        }
        break;
    }
    if (where[0] == '\0')
        snprintf(where, sizeof(where), "(no frame of ours)");
    grouped_per_op[bi] += per_op;
    for (int i = 0; i < ngroups[bi]; i++)
        if (strcmp(groups[bi][i].where, where) == 0) {
            groups[bi][i].per_op += per_op;
            return;
        }
    if (ngroups[bi] < MAX_GROUPS) {
        snprintf(groups[bi][ngroups[bi]].where, sizeof(groups[bi][0].where), "%s", where);
        groups[bi][ngroups[bi]++].per_op = per_op;
    }
}

static int cmp_group(const void *a, const void *b)
{
    const group_out *x = a, *y = b;
    return x->per_op < y->per_op ? 1 : x->per_op > y->per_op ? -1 : 0;
}

static void trace_sites(size_t bi)
{
    bench *b = &benches[bi];
    uint64_t n = b->iters < 2000 ? b->iters : 2000;
    chain_switch(b->chain);
    b->fn(n < 64 ? n : 64);   /* settle (the first backtrace loads the unwinder) */
    memset(sites, 0, sizeof(sites));
    sites_dropped = 0;
    uint64_t a0 = n_allocs;
    tracing = 1;
    b->fn(n);
    tracing = 0;
    traced_ops[bi] = n;
    traced_allocs[bi] = n_allocs - a0;
    if (sites_dropped > 0)
        fprintf(stderr, "micro: %s: %llu allocations had no room in the site table\n", b->id,
                (unsigned long long)sites_dropped);
    qsort(sites, MAX_SITES, sizeof(sites[0]), cmp_site);
    static char text[2048];
    int k = 0;
    for (int i = 0; i < MAX_SITES && i < MAX_SYMBOLIZED && sites[i].count > 0; i++) {
        double per_op = (double)sites[i].count / (double)n;
        symbolize(&sites[i], text, sizeof(text));
        group_site(bi, text, per_op);
        if (k < MAX_SITES_OUT) {
            site_results[bi][k].count = sites[i].count;
            site_results[bi][k].per_op = per_op;
            snprintf(site_results[bi][k].text, sizeof(site_results[bi][k].text), "%s", text);
            k++;
        }
    }
    nsite_results[bi] = k;
    qsort(groups[bi], (size_t)ngroups[bi], sizeof(groups[bi][0]), cmp_group);
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("usage: micro --dir DIR [--quick] [--rounds N] [--run-ms MS] [--tenants N]\n"
          "             [--json FILE] [--src-root PREFIX] [--only ID,ID...]\n",
          f);
}

static bool selected(const char *id)
{
    if (opt.only == NULL)
        return true;
    size_t n = strlen(id);
    for (const char *p = opt.only; *p;) {
        size_t l = strcspn(p, ",");
        if (l == n && strncmp(p, id, n) == 0)
            return true;
        p += l;
        if (*p == ',')
            p++;
    }
    return strcmp(id, "plain") == 0;   /* the baseline is always measured */
}

static const char *fmt_ns(double ns, char *out, size_t n)
{
    if (ns >= 100000)
        snprintf(out, n, "%.0f", ns);
    else if (ns >= 100)
        snprintf(out, n, "%.0f", ns);
    else
        snprintf(out, n, "%.1f", ns);
    return out;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt.quick = 1;
        } else if (strcmp(a, "--rounds") == 0 && v) {
            opt.rounds = atoi(v), i++;
        } else if (strcmp(a, "--run-ms") == 0 && v) {
            opt.run_ms = atoi(v), i++;
        } else if (strcmp(a, "--tenants") == 0 && v) {
            opt.ntenants = atoi(v), i++;
        } else if (strcmp(a, "--dir") == 0 && v) {
            opt.dir = v, i++;
        } else if (strcmp(a, "--json") == 0 && v) {
            opt.json_path = v, i++;
        } else if (strcmp(a, "--src-root") == 0 && v) {
            opt.src_root = v, i++;
        } else if (strcmp(a, "--only") == 0 && v) {
            opt.only = v, i++;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (opt.dir == NULL) {
        usage(stderr);
        return 2;
    }
    if (opt.rounds <= 0)
        opt.rounds = opt.quick ? 5 : 9;
    if (opt.run_ms <= 0)
        opt.run_ms = opt.quick ? 25 : 120;
    if (opt.rounds > 64)
        opt.rounds = 64;
    if (opt.ntenants < 1 || opt.ntenants > 1000000) {
        fputs("micro: --tenants wants 1..1000000\n", stderr);
        return 2;
    }
    log_init("micro", TN_LOG_WARN);

    /* Warm the unwinder now: its first use allocates. */
    void *fr[4];
    backtrace(fr, 4);

    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (uint32_t i = 0; i < SEQ_LEN; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        seq[i] = (uint32_t)(x % (uint64_t)opt.ntenants);
    }
    for (size_t i = 0; i < NENV; i++)
        tx.env[i] = (char *)env_template[i];   /* never written through */
    req_arena = arena_create(16384);   /* as the worker's */
    lim = limits_create();
    if (req_arena == NULL || lim == NULL)
        die("out of memory");

    make_registry();
    make_caches();

    cpu_set_t cpus;
    int ncpu_allowed = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : -1;
    int on_cpu = sched_getcpu();

    for (size_t i = 0; i < NBENCH; i++)
        benches[i].selected = selected(benches[i].id);

    /* Calibrate (and warm) every operation, then the alternating rounds. */
    double t_start = now_ms();
    for (size_t i = 0; i < NBENCH; i++)
        if (benches[i].selected)
            benches[i].iters = calibrate(&benches[i]);
    for (int r = 0; r < opt.rounds; r++) {
        for (size_t i = 0; i < NBENCH; i++) {
            bench *b = &benches[i];
            if (!b->selected)
                continue;
            sample s = run_once(b, b->iters);
            b->wall[b->nruns] = s.wall_ns / (double)b->iters;
            b->cpu[b->nruns] = s.cpu_ns / (double)b->iters;
            b->nruns++;
            b->ops_total += b->iters;
            b->allocs_total += s.allocs;
            b->frees_total += s.frees;
        }
    }
    double t_measured = now_ms() - t_start;

    for (size_t i = 0; i < NBENCH; i++)
        if (benches[i].selected && benches[i].allocs_total > 0)
            trace_sites(i);

    /* ---- the table --------------------------------------------------------------------- */
    double plain = median(benches[0].wall, benches[0].nruns);
    double plain_cpu = median(benches[0].cpu, benches[0].nruns);
    printf("\n== micro: medians of %d rounds, about %d ms per run, %d tenants", opt.rounds,
           opt.run_ms, opt.ntenants);
    if (ncpu_allowed == 1)
        printf(", pinned to CPU %d", on_cpu);
    printf("\n");
    printf("%-52s %9s %9s %7s %8s %9s %7s %6s\n", "operation", "ns/op", "cpu ns", "xplain",
           "malloc/op", "seed", "/seed", "spread");
    for (size_t i = 0; i < NBENCH; i++) {
        bench *b = &benches[i];
        if (!b->selected)
            continue;
        double w = median(b->wall, b->nruns), c = median(b->cpu, b->nruns);
        double spread = w > 0 ? 100 * (vmax(b->wall, b->nruns) - vmin(b->wall, b->nruns)) / w : 0;
        char s1[32], s2[32], seed[32] = "-", ratio[32] = "-";
        if (b->seed_ns > 0) {
            snprintf(seed, sizeof(seed), "%.1f us", b->seed_ns / 1000);
            snprintf(ratio, sizeof(ratio), "%.4f", w / b->seed_ns);
        }
        printf("%-52s %9s %9s %7.1f %8.3f %9s %7s %5.0f%%\n", b->name, fmt_ns(w, s1, sizeof(s1)),
               fmt_ns(c, s2, sizeof(s2)), w / plain,
               (double)b->allocs_total / (double)b->ops_total, seed, ratio, spread);
    }
    printf("ns/op: wall clock, cpu ns: this thread's CPU time, both per operation, medians of the "
           "rounds; xplain: ns/op over the plain call's (%.2f ns, cpu %.2f ns) in the same run; "
           "malloc/op: allocation calls (malloc, calloc, realloc, aligned; libc's and SQLite's "
           "included) over all timed runs; seed: the Node.js predecessor's figure for the "
           "closest operation, from another machine (orders of magnitude only); /seed: ours "
           "over it; spread: (max-min)/median of the rounds.\n",
           plain, plain_cpu);

    bool any_sites = false;
    for (size_t i = 0; i < NBENCH; i++) {
        if (ngroups[i] == 0)
            continue;
        if (!any_sites)
            printf("\nmalloc call sites (a traced pass; allocation calls per operation, grouped by "
                   "the first frame of ours; whole stacks in the JSON):\n");
        any_sites = true;
        double all = (double)traced_allocs[i] / (double)traced_ops[i];
        printf("  %s: %.3f per op over %llu ops", benches[i].id, all,
               (unsigned long long)traced_ops[i]);
        if (grouped_per_op[i] < all * 0.995)
            printf(" (%.3f of them in the stacks shown)", grouped_per_op[i]);
        printf("\n");
        for (int k = 0; k < ngroups[i]; k++)
            printf("    %7.3f  %s\n", groups[i][k].per_op, groups[i][k].where);
    }

    /* ---- goals: the whole chain under 1 us of CPU per request, no malloc on it ---------- */
    buf goals = BUF_INIT;
    bench *ch_b = NULL;
    for (size_t i = 0; i < NBENCH; i++)
        if (strcmp(benches[i].id, "chain") == 0 && benches[i].selected)
            ch_b = &benches[i];
    if (ch_b != NULL) {
        double c = median(ch_b->cpu, ch_b->nruns);
        double m = (double)ch_b->allocs_total / (double)ch_b->ops_total;
        char v1[64], v2[96];
        snprintf(v1, sizeof(v1), "%.0f ns of CPU per request", c);
        snprintf(v2, sizeof(v2), "%llu allocation calls in %llu requests",
                 (unsigned long long)ch_b->allocs_total, (unsigned long long)ch_b->ops_total);
        printf("\ngoals:\n  %-7s the whole chain under 1 us of CPU per request (%s)\n",
               c < 1000 ? "MET" : "MISSED", v1);
        printf("  %-7s no malloc on the hot path: whole chain, cache warm (%s, %.4f/request)\n",
               ch_b->allocs_total == 0 ? "MET" : "MISSED", v2, m);
        buf_puts(&goals, "{\"goal\":\"the whole chain under 1 us of CPU per request\",\"met\":");
        buf_puts(&goals, c < 1000 ? "true" : "false");
        buf_puts(&goals, ",\"value\":");
        buf_json_str(&goals, v1);
        buf_puts(&goals, "},{\"goal\":\"no malloc on the hot path (whole chain, cache warm)\","
                         "\"met\":");
        buf_puts(&goals, ch_b->allocs_total == 0 ? "true" : "false");
        buf_puts(&goals, ",\"value\":");
        buf_json_str(&goals, v2);
        buf_putc(&goals, '}');
    }
    /* The same chain with cold CPU caches (issue 18), judged on its CPU time as the warm one,
     * wall clock beside it. Judged on chain_cold_direct since 2026-12-05: chain_cold's CPU
     * figure carries one read of the thread's CPU clock (see cold_sweep), so its old verdict
     * is printed beside the new one, as bench/README.md says. */
    bench *cold_b = NULL, *old_b = NULL;
    for (size_t i = 0; i < NBENCH; i++) {
        if (strcmp(benches[i].id, "chain_cold_direct") == 0 && benches[i].selected)
            cold_b = &benches[i];
        if (strcmp(benches[i].id, "chain_cold") == 0 && benches[i].selected)
            old_b = &benches[i];
    }
    for (int k = 0; k < 2; k++) {
        bench *b = k == 0 ? cold_b : old_b;
        if (b == NULL)
            continue;
        double c = median(b->cpu, b->nruns), w = median(b->wall, b->nruns);
        char v[160];
        snprintf(v, sizeof(v), "%s: %.0f ns of CPU per request (wall %.0f ns)", b->id, c, w);
        const char *what = k == 0
            ? "the whole chain with cold CPU caches under 3 us of CPU per request"
            : "old measurement, judged until 2026-12-05: the same on chain_cold";
        printf("%s  %-7s %s (%s)\n", ch_b == NULL && (k == 0 || cold_b == NULL) ? "\ngoals:\n" : "",
               c < 3000 ? "MET" : "MISSED", what, v);
        buf_puts(&goals, goals.len ? "," : "");
        buf_puts(&goals, "{\"goal\":");
        buf_json_str(&goals, what);
        buf_puts(&goals, k == 0 ? "" : ",\"old_rule\":true");
        buf_puts(&goals, ",\"met\":");
        buf_puts(&goals, c < 3000 ? "true" : "false");
        buf_puts(&goals, ",\"value\":");
        buf_json_str(&goals, v);
        buf_putc(&goals, '}');
    }
    if (clockread_n > 0)
        printf("  (one read of the thread's CPU clock right after a sweep costs %.0f ns of CPU, "
               "%.0f ns wall: what chain_cold's CPU figure carries)\n",
               (double)clockread_cpu / (double)clockread_n,
               (double)clockread_wall / 2 / (double)clockread_n);

    /* ---- JSON ---------------------------------------------------------------------------- */
    if (opt.json_path != NULL) {
        buf j = BUF_INIT;
        buf_printf(&j, "{\"measure\":{\"quick\":%s,\"rounds\":%d,\"run_ms\":%d,\"tenants\":%d,"
                       "\"cpus_allowed\":%d,\"cpu\":%d,\"resolver\":\"subdomain\","
                       "\"base_domain\":\"" BASE_DOMAIN "\",\"measured_ms\":%.0f},",
                   opt.quick ? "true" : "false", opt.rounds, opt.run_ms, opt.ntenants,
                   ncpu_allowed, on_cpu, t_measured);
        buf_printf(&j, "\"baseline\":{\"id\":\"plain\",\"ns_per_op\":%.3f,\"cpu_ns_per_op\":%.3f},",
                   plain, plain_cpu);
        buf_puts(&j, "\"results\":[");
        bool first = true;
        for (size_t i = 0; i < NBENCH; i++) {
            bench *b = &benches[i];
            if (!b->selected)
                continue;
            double w = median(b->wall, b->nruns), c = median(b->cpu, b->nruns);
            if (!first)
                buf_putc(&j, ',');
            first = false;
            buf_printf(&j, "{\"id\":\"%s\",\"name\":", b->id);
            buf_json_str(&j, b->name);
            buf_printf(&j, ",\"ns_per_op\":%.3f,\"cpu_ns_per_op\":%.3f,\"min_ns\":%.3f,"
                           "\"max_ns\":%.3f,\"x_plain\":%.3f,\"iters_per_run\":%llu,"
                           "\"runs_ns\":[",
                       w, c, vmin(b->wall, b->nruns), vmax(b->wall, b->nruns), w / plain,
                       (unsigned long long)b->iters);
            for (int k = 0; k < b->nruns; k++)
                buf_printf(&j, "%s%.3f", k ? "," : "", b->wall[k]);
            buf_printf(&j, "],\"mallocs_per_op\":%.6f,\"frees_per_op\":%.6f,\"ops_total\":%llu,",
                       (double)b->allocs_total / (double)b->ops_total,
                       (double)b->frees_total / (double)b->ops_total,
                       (unsigned long long)b->ops_total);
            if (b->seed_ns > 0) {
                buf_printf(&j, "\"seed_ns\":%.0f,\"seed_what\":", b->seed_ns);
                buf_json_str(&j, b->seed_what);
                buf_printf(&j, ",\"x_seed\":%.5f,", w / b->seed_ns);
            } else {
                buf_puts(&j, "\"seed_ns\":null,\"seed_what\":null,\"x_seed\":null,");
            }
            buf_puts(&j, "\"malloc_by_call_site\":[");
            for (int k = 0; k < ngroups[i]; k++) {
                buf_printf(&j, "%s{\"per_op\":%.4f,\"where\":", k ? "," : "", groups[i][k].per_op);
                buf_json_str(&j, groups[i][k].where);
                buf_putc(&j, '}');
            }
            buf_puts(&j, "],\"malloc_sites\":[");
            for (int k = 0; k < nsite_results[i]; k++) {
                buf_printf(&j, "%s{\"per_op\":%.4f,\"frames\":[", k ? "," : "",
                           site_results[i][k].per_op);
                const char *t = site_results[i][k].text;
                bool f1 = true;
                while (*t) {
                    size_t l = strcspn(t, "\n");
                    if (l > 0) {
                        if (!f1)
                            buf_putc(&j, ',');
                        f1 = false;
                        buf_json_strn(&j, t, l);
                    }
                    t += l;
                    if (*t == '\n')
                        t++;
                }
                buf_puts(&j, "]}");
            }
            buf_puts(&j, "]}");
        }
        buf_printf(&j, "],\"goals\":[%s]}\n", goals.p ? goals.p : "");
        FILE *f = fopen(opt.json_path, "w");
        if (f == NULL || fwrite(j.p, 1, j.len, f) != j.len || fclose(f) != 0)
            die("cannot write %s", opt.json_path);
        buf_free(&j);
    }
    buf_free(&goals);

    chain_fini();
    registry_close(reg);
    return failures ? 1 : 0;
}
