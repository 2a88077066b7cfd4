/*
 * bench/coldstart.c — the two helpers of `bench/run coldstart`.
 *
 *   coldstart seed --dir DIR --tenants N
 *       A registry (DIR/control.db, DIR/registry.gen) with N tenants t000000, t000001, ...
 *       (subdomain t000042.bench.test, custom domain www.shop-000042.example, a few theme
 *       settings). It opens the registry through registry_open and initialises it with
 *       registry_init when `tenancy init` has not done so already; the first three tenants go
 *       through registry_create when they are not there yet (the CLI may have made them), the
 *       rest in ONE transaction of parameterized INSERTs on the registry's own connection
 *       (registry_create commits one transaction per tenant: 100,000 of them would measure
 *       the disk). Then one generation bump, a check that the last tenant is found by slug and
 *       by domain through registry_fetch, and a WAL checkpoint, so tenancyd starts on a
 *       clean file. Prints one JSON line.
 *
 *   coldstart probe --tenancyd PATH --conf FILE --sock PATH --host HOST [--log FILE]
 *                   [--tsv FILE] [--timeout-ms MS]
 *       Fork and exec tenancyd, then measure from just before the fork: when the FastCGI
 *       socket first accepts a connection, when the master writes its "ready" line (read from
 *       its stderr through a pipe, so the time is when the line was written, not when a
 *       script polled a file), and when the first request — sent at once on that first
 *       connection, FastCGI spoken directly, Host HOST — is answered. Then RSS and open
 *       descriptors of the master and of its worker from /proc, and the stop (SIGTERM,
 *       SIGKILL after 5 s). Prints one JSON line (and appends the figures bench/run takes
 *       medians of to the --tsv file).
 *
 *   coldstart exec [--n N] -- PROGRAM [ARGS...]
 *       The median time of fork + exec + exit of PROGRAM (say `tenancyd --version`): what the
 *       dynamic loader and library constructors cost before main() even runs.
 *
 * Built by bench/run like bench/micro.c (from the objects tenancyd is linked from); never
 * part of `make check`. Must not: leave tenancyd running (it is stopped on every path out,
 * and dies with us: PR_SET_PDEATHSIG), or write outside DIR.
 */
#include "core/first.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/gen.h"
#include "tenancy/lookup.h"
#include "tenancy/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("coldstart: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static const char *arg_of(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

static double ms_since(int64_t t0) { return (double)(clock_mono_ns() - t0) / 1e6; }

/* ---- seed -------------------------------------------------------------------------------- */

#define VIA_API 3   /* tenants made through registry_create (when missing) */

static void names(long i, char *slug, size_t sl, char *dom, size_t dl, char *settings, size_t stl)
{
    snprintf(slug, sl, "t%06ld", i);
    snprintf(dom, dl, "www.shop-%06ld.example", i);
    snprintf(settings, stl,
             "{\"plan\":\"pro\",\"theme.font\":\"system-ui, sans-serif\",\"theme.primary\":"
             "\"#%06lx\",\"theme.radius\":\"4px\"}",
             (unsigned long)((unsigned long)i * 2654435761ul) & 0xfffffful);
}

static int cmd_seed(int argc, char **argv)
{
    const char *dir = arg_of(argc, argv, "--dir", NULL);
    long n = atol(arg_of(argc, argv, "--tenants", "0"));
    if (dir == NULL || n < 1 || n > 10000000)
        die("usage: coldstart seed --dir DIR --tenants N (1..10000000)");
    log_init("coldstart", TN_LOG_WARN);
    char uri[4200], gen[4200], err[512];
    snprintf(uri, sizeof(uri), "sqlite:%s/control.db", dir);
    snprintf(gen, sizeof(gen), "%s/registry.gen", dir);
    int64_t t0 = clock_mono_ns();
    registry *reg;
    if (registry_open(uri, gen, &reg, err, sizeof(err)) != TN_OK)
        die("registry_open: %s", err);
    bool initialised_here = false;
    if (registry_ready(reg, err, sizeof(err)) != TN_OK) {
        if (registry_init(reg, err, sizeof(err)) != TN_OK)
            die("registry_init: %s", err);
        initialised_here = true;
    }
    tn_db *db = registry_db(reg);
    char have_txt[32];
    if (db_query_value(db, have_txt, sizeof(have_txt), "SELECT count(*) FROM tenants", 0, NULL) !=
        TN_OK)
        die("count: %s", tn_db_error(db));
    long have = atol(have_txt);

    char slug[32], dom[64], settings[256], name[64];
    long via_api = 0;
    for (long i = have; i < n && i < VIA_API; i++) {
        names(i, slug, sizeof(slug), dom, sizeof(dom), settings, sizeof(settings));
        snprintf(name, sizeof(name), "Tenant number %ld", i);
        const char *doms[] = {dom};
        registry_new t = {.slug = slug, .name = name, .state = TENANT_ACTIVE,
                          .settings = settings, .domains = doms, .ndomains = 1};
        if (registry_create(reg, &t, NULL, err, sizeof(err)) != TN_OK)
            die("registry_create %s: %s", slug, err);
        via_api++;
    }
    long from = have > VIA_API ? have : (n < VIA_API ? n : VIA_API);
    long bulk = 0;
    if (from < n) {
        /* Setup only, one transaction: the durability of each row is not what we measure. */
        if (tn_db_exec(db, "PRAGMA synchronous=NORMAL", 0, NULL) != TN_OK ||
            tn_db_begin(db) != TN_OK)
            die("begin: %s", tn_db_error(db));
        char now[24];
        snprintf(now, sizeof(now), "%lld", (long long)time(NULL));
        for (long i = from; i < n; i++) {
            names(i, slug, sizeof(slug), dom, sizeof(dom), settings, sizeof(settings));
            snprintf(name, sizeof(name), "Tenant number %ld", i);
            const char *p[] = {slug, name, settings, now};
            if (tn_db_exec(db,
                           "INSERT INTO tenants (slug, name, state, placement, storage, settings, "
                           "max_workers, created_at, updated_at) "
                           "VALUES ($1, $2, 'active', 'sqlite', '', $3, 0, $4, $4)",
                           4, p) != TN_OK)
                die("insert %s: %s", slug, tn_db_error(db));
            char id[24];
            snprintf(id, sizeof(id), "%lld", (long long)tn_db_last_id(db));
            const char *q[] = {dom, id};
            if (tn_db_exec(db, "INSERT INTO domains (domain, tenant_id, is_primary) "
                               "VALUES ($1, $2, 1)",
                           2, q) != TN_OK)
                die("insert %s: %s", dom, tn_db_error(db));
            bulk++;
        }
        if (tn_db_commit(db) != TN_OK)
            die("commit: %s", tn_db_error(db));
        gen_map *g;
        if (gen_open(gen, true, true, &g, err, sizeof(err)) != TN_OK)
            die("generation: %s", err);
        gen_bump(g);
        gen_close(g);
    }
    /* The last tenant must be found through the registry's own read path. */
    names(n - 1, slug, sizeof(slug), dom, sizeof(dom), settings, sizeof(settings));
    tenant_rec *t = NULL;
    if (registry_fetch(reg, LK_SLUG, slug, &t) != TN_OK || t == NULL)
        die("registry_fetch by slug %s: not found", slug);
    free(t);
    t = NULL;
    if (registry_fetch(reg, LK_DOMAIN, dom, &t) != TN_OK || t == NULL)
        die("registry_fetch by domain %s: not found", dom);
    free(t);
    if (db_query_value(db, have_txt, sizeof(have_txt), "SELECT count(*) FROM tenants", 0, NULL) !=
            TN_OK ||
        atol(have_txt) != n)
        die("expected %ld tenants, the registry has %s", n, have_txt);
    if (tn_db_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", 0, NULL) != TN_OK)
        die("checkpoint: %s", tn_db_error(db));
    registry_close(reg);
    double ms = ms_since(t0);
    char path[4200];
    snprintf(path, sizeof(path), "%s/control.db", dir);
    struct stat st;
    long long bytes = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    printf("{\"tenants\":%ld,\"initialised_here\":%s,\"via_registry_create\":%ld,"
           "\"bulk_one_transaction\":%ld,\"seconds\":%.3f,\"db_bytes\":%lld}\n",
           n, initialised_here ? "true" : "false", via_api, bulk, ms / 1000, bytes);
    return 0;
}

/* ---- probe: FastCGI ------------------------------------------------------------------------ */

static void put_len(unsigned char **p, size_t n)
{
    if (n < 128) {
        *(*p)++ = (unsigned char)n;
    } else {
        *(*p)++ = (unsigned char)(0x80 | (n >> 24));
        *(*p)++ = (unsigned char)(n >> 16);
        *(*p)++ = (unsigned char)(n >> 8);
        *(*p)++ = (unsigned char)n;
    }
}

static void put_header(unsigned char **p, int type, size_t len)
{
    unsigned char *h = *p;
    h[0] = 1;                     /* version */
    h[1] = (unsigned char)type;
    h[2] = 0;                     /* request id 1 */
    h[3] = 1;
    h[4] = (unsigned char)(len >> 8);
    h[5] = (unsigned char)len;
    h[6] = 0;                     /* padding */
    h[7] = 0;
    *p += 8;
}

/* BEGIN_REQUEST (responder), the params, the empty params and stdin records. */
static size_t build_request(unsigned char *out, size_t cap, const char *host)
{
    char hostparam[300];
    snprintf(hostparam, sizeof(hostparam), "%s", host);
    const char *kv[][2] = {
        {"REQUEST_METHOD", "GET"},    {"REQUEST_URI", "/"},          {"DOCUMENT_URI", "/"},
        {"SCRIPT_NAME", "/"},         {"QUERY_STRING", ""},          {"SERVER_PROTOCOL", "HTTP/1.1"},
        {"GATEWAY_INTERFACE", "CGI/1.1"}, {"REMOTE_ADDR", "127.0.0.1"}, {"REMOTE_PORT", "40000"},
        {"SERVER_NAME", hostparam},   {"SERVER_PORT", "80"},         {"HTTP_HOST", hostparam},
        {"TENANT_HOST", hostparam},   {"REQUEST_ID", "coldstart"},
    };
    unsigned char params[2048], *q = params;
    for (size_t i = 0; i < TN_ARRAY_LEN(kv); i++) {
        size_t nl = strlen(kv[i][0]), vl = strlen(kv[i][1]);
        put_len(&q, nl);
        put_len(&q, vl);
        memcpy(q, kv[i][0], nl);
        q += nl;
        memcpy(q, kv[i][1], vl);
        q += vl;
    }
    size_t plen = (size_t)(q - params);
    if (cap < plen + 64)
        die("request buffer too small");
    unsigned char *p = out;
    put_header(&p, 1, 8);         /* FCGI_BEGIN_REQUEST */
    memset(p, 0, 8);
    p[1] = 1;                     /* FCGI_RESPONDER */
    p += 8;
    put_header(&p, 4, plen);      /* FCGI_PARAMS */
    memcpy(p, params, plen);
    p += plen;
    put_header(&p, 4, 0);
    put_header(&p, 5, 0);         /* FCGI_STDIN, empty */
    return (size_t)(p - out);
}

typedef struct answer {
    unsigned char buf[65536];
    size_t len;
    bool done;
    char body[512];
    int status;
} answer;

/* Parse what arrived; true once FCGI_END_REQUEST is in. */
static bool parse_answer(answer *a)
{
    char out[8192];
    size_t ol = 0, off = 0;
    while (off + 8 <= a->len) {
        const unsigned char *h = a->buf + off;
        size_t cl = ((size_t)h[4] << 8) | h[5], pl = h[6];
        if (off + 8 + cl + pl > a->len)
            return false;
        if (h[1] == 6 && ol + cl < sizeof(out)) {   /* FCGI_STDOUT */
            memcpy(out + ol, h + 8, cl);
            ol += cl;
        }
        if (h[1] == 3) {                            /* FCGI_END_REQUEST */
            out[ol] = '\0';
            a->status = 200;
            const char *s = strstr(out, "Status: ");
            char *hend = strstr(out, "\r\n\r\n");
            if (s != NULL && (hend == NULL || s < hend))
                a->status = atoi(s + 8);
            snprintf(a->body, sizeof(a->body), "%s", hend ? hend + 4 : "");
            a->body[strcspn(a->body, "\r\n")] = '\0';
            a->done = true;
            return true;
        }
        off += 8 + cl + pl;
    }
    return false;
}

/* ---- probe: /proc ------------------------------------------------------------------------- */

typedef struct proc_mem {
    long rss_kb, anon_kb, file_kb, shmem_kb, hwm_kb;
    int fds;
} proc_mem;

static long status_kb(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? atol(p + strlen(key)) : -1;
}

static bool read_proc(pid_t pid, proc_mem *m)
{
    char path[64], text[8192];
    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = '\0';
    m->rss_kb = status_kb(text, "VmRSS:");
    m->anon_kb = status_kb(text, "RssAnon:");
    m->file_kb = status_kb(text, "RssFile:");
    m->shmem_kb = status_kb(text, "RssShmem:");
    m->hwm_kb = status_kb(text, "VmHWM:");
    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
    DIR *d = opendir(path);
    m->fds = 0;
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                m->fds++;
        closedir(d);
    }
    return true;
}

/* The first child of pid (the worker of a one-worker static pool). */
static pid_t first_child(pid_t pid)
{
    char path[96], text[256];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    return (pid_t)atol(text);
}

static int count_children(pid_t pid)
{
    char path[96], text[1024];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n < 0)
        return -1;
    text[n] = '\0';
    int k = 0;
    for (char *t = strtok(text, " \n"); t; t = strtok(NULL, " \n"))
        k++;
    return k;
}

/* ---- probe --------------------------------------------------------------------------------- */

static pid_t child_pid = -1;

static void stop_child(void)
{
    if (child_pid > 0) {
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
        child_pid = -1;
    }
}

static void on_signal(int sig)
{
    if (child_pid > 0)
        kill(child_pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Resident kB per mapped file (basename) or kind of anonymous memory, largest first: where
 * the RSS of a process comes from. */
#define MAX_MAPS 96
typedef struct map_rss {
    char name[80];
    long kb;
} map_rss;

static int smaps_by_file(pid_t pid, map_rss *out, int max)
{
    char path[64], line[1024], cur[80] = "[anon]";
    snprintf(path, sizeof(path), "/proc/%ld/smaps", (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &off) == 2 && off > 0) {
            char *name = line + off;
            name[strcspn(name, "\n")] = '\0';
            const char *base = strrchr(name, '/');
            base = base ? base + 1 : name;
            snprintf(cur, sizeof(cur), "%s", *base ? base : "[anon]");
            continue;
        }
        long kb;
        if (sscanf(line, "Rss: %ld kB", &kb) == 1 && kb > 0) {
            int i;
            for (i = 0; i < n && strcmp(out[i].name, cur) != 0; i++)
                ;
            if (i == n) {
                if (n == max)
                    continue;
                snprintf(out[n].name, sizeof(out[n].name), "%s", cur);
                out[n++].kb = 0;
            }
            out[i].kb += kb;
        }
    }
    fclose(f);
    for (int i = 1; i < n; i++)   /* insertion sort, largest first */
        for (int j = i; j > 0 && out[j].kb > out[j - 1].kb; j--) {
            map_rss t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* The JSON of one process ("name":{...},) into out, while it still runs. */
static void json_proc(char *out, size_t cap, const char *name, pid_t pid, const proc_mem *m,
                      bool ok)
{
    if (!ok) {
        snprintf(out, cap, "\"%s\":null,", name);
        return;
    }
    size_t o = (size_t)snprintf(out, cap,
                                "\"%s\":{\"pid\":%ld,\"rss_kb\":%ld,\"rss_anon_kb\":%ld,"
                                "\"rss_file_kb\":%ld,\"rss_shmem_kb\":%ld,\"hwm_kb\":%ld,"
                                "\"fds\":%d,",
                                name, (long)pid, m->rss_kb, m->anon_kb, m->file_kb, m->shmem_kb,
                                m->hwm_kb, m->fds);
    map_rss maps[MAX_MAPS];
    int n = smaps_by_file(pid, maps, MAX_MAPS);
    int libs = 0;
    for (int i = 0; i < n; i++)
        libs += strstr(maps[i].name, ".so") != NULL;
    o += (size_t)snprintf(out + o, cap - o, "\"shared_objects\":%d,\"rss_by_mapping_kb\":{", libs);
    for (int i = 0; i < n && i < 12 && o + 120 < cap; i++) {
        char clean[80];
        size_t k = 0;
        for (const char *c = maps[i].name; *c && k + 1 < sizeof(clean); c++)
            if (*c >= 0x20 && *c != '"' && *c != '\\')
                clean[k++] = *c;
        clean[k] = '\0';
        o += (size_t)snprintf(out + o, cap - o, "%s\"%s\":%ld", i ? "," : "", clean, maps[i].kb);
    }
    if (o + 4 < cap)
        snprintf(out + o, cap - o, "}},");
}

static int cmd_probe(int argc, char **argv)
{
    const char *exe = arg_of(argc, argv, "--tenancyd", NULL);
    const char *conf = arg_of(argc, argv, "--conf", NULL);
    const char *sock = arg_of(argc, argv, "--sock", NULL);
    const char *host = arg_of(argc, argv, "--host", NULL);
    const char *log_path = arg_of(argc, argv, "--log", NULL);
    const char *tsv_path = arg_of(argc, argv, "--tsv", NULL);
    int timeout_ms = atoi(arg_of(argc, argv, "--timeout-ms", "10000"));
    if (!exe || !conf || !sock || !host || strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        die("usage: coldstart probe --tenancyd PATH --conf FILE --sock PATH --host HOST "
            "[--log FILE] [--tsv FILE] [--timeout-ms MS]");
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    atexit(stop_child);
    FILE *logf = log_path ? fopen(log_path, "a") : NULL;

    unsigned char req[4096];
    size_t reqlen = build_request(req, sizeof(req), host);
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        die("pipe: %s", strerror(errno));

    int64_t t0 = clock_mono_ns();
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pfd[1], 2);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        execl(exe, exe, "-c", conf, (char *)NULL);
        _exit(127);
    }
    child_pid = pid;
    close(pfd[1]);
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);

    double t_listen = -1, t_ready = -1, t_answer = -1;
    char logbuf[16384];
    size_t loglen = 0;
    bool log_eof = false;
    int s = -1;
    answer *a = calloc(1, sizeof(*a));
    if (a == NULL)
        die("out of memory");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);

    while ((t_ready < 0 || t_answer < 0) && ms_since(t0) < timeout_ms) {
        /* Connect as soon as the socket accepts; send the request on that connection. */
        if (t_listen < 0) {
            s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
                t_listen = ms_since(t0);
                if (write(s, req, reqlen) != (ssize_t)reqlen)
                    die("write to %s: %s", sock, strerror(errno));
            } else if (s >= 0) {
                close(s);
                s = -1;
            }
        }
        struct pollfd p[2] = {{.fd = log_eof ? -1 : pfd[0], .events = POLLIN},
                              {.fd = t_answer < 0 ? s : -1, .events = POLLIN}};
        int w = t_listen < 0 ? 0 : 50;   /* before the socket exists: spin on connect */
        if (t_listen < 0) {
            struct timespec ts = {0, 100000};   /* 0.1 ms between connect attempts */
            nanosleep(&ts, NULL);
        }
        if (poll(p, 2, w) < 0 && errno != EINTR)
            die("poll: %s", strerror(errno));
        if (p[0].revents) {
            ssize_t n = read(pfd[0], logbuf + loglen, sizeof(logbuf) - 1 - loglen);
            if (n > 0) {
                loglen += (size_t)n;
                logbuf[loglen] = '\0';
                if (t_ready < 0 && strstr(logbuf, " ready: ") != NULL)
                    t_ready = ms_since(t0);
                if (loglen > sizeof(logbuf) - 2048) {
                    if (logf)
                        fwrite(logbuf, 1, loglen, logf);
                    loglen = 0;
                }
            } else if (n == 0) {
                log_eof = true;
            }
        }
        if (p[1].revents) {
            ssize_t n = read(s, a->buf + a->len, sizeof(a->buf) - a->len);
            if (n > 0) {
                a->len += (size_t)n;
                if (parse_answer(a))
                    t_answer = ms_since(t0);
            } else {
                t_answer = ms_since(t0);   /* closed without an answer */
                a->status = -1;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            child_pid = -1;
            die("tenancyd exited during start-up (status %d); its log: %.*s", st, (int)loglen,
                logbuf);
        }
    }
    /* What a started host holds, before the stop. */
    pid_t worker = first_child(pid);
    int nchildren = count_children(pid);
    proc_mem mm = {0}, wm = {0};
    bool mok = read_proc(pid, &mm);
    bool wok = worker > 0 && read_proc(worker, &wm);
    char mjson[2048], wjson[2048];
    json_proc(mjson, sizeof(mjson), "master", pid, &mm, mok);
    json_proc(wjson, sizeof(wjson), "worker", worker, &wm, wok);
    if (s >= 0)
        close(s);

    int64_t ts = clock_mono_ns();
    kill(pid, SIGTERM);
    int st = 0;
    bool killed = false;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (ms_since(ts) > 5000) {
            kill(pid, SIGKILL);
            if (worker > 0)
                kill(worker, SIGKILL);
            waitpid(pid, &st, 0);
            killed = true;
            break;
        }
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    child_pid = -1;
    double t_stop = ms_since(ts);
    /* the rest of the log */
    for (;;) {
        ssize_t n = read(pfd[0], logbuf + loglen, sizeof(logbuf) - 1 - loglen);
        if (n <= 0)
            break;
        loglen += (size_t)n;
        if (loglen >= sizeof(logbuf) - 1)
            break;
    }
    if (logf) {
        fwrite(logbuf, 1, loglen, logf);
        fclose(logf);
    }
    int warn_lines = 0;
    logbuf[loglen] = '\0';
    for (char *p = logbuf; (p = strstr(p, " warn: ")) != NULL; p++)
        warn_lines++;
    for (char *p = logbuf; (p = strstr(p, " error: ")) != NULL; p++)
        warn_lines++;

    printf("{\"listen_ms\":");
    t_listen < 0 ? printf("null") : printf("%.3f", t_listen);
    printf(",\"ready_ms\":");
    t_ready < 0 ? printf("null") : printf("%.3f", t_ready);
    printf(",\"first_answer_ms\":");
    t_answer < 0 ? printf("null") : printf("%.3f", t_answer);
    printf(",\"status\":%d,\"body\":\"", a->done ? a->status : -1);
    for (const char *b = a->body; *b; b++)
        if (*b >= 0x20 && *b != '"' && *b != '\\')
            putchar(*b);
    printf("\",\"workers\":%d,", nchildren);
    fputs(mjson, stdout);
    fputs(wjson, stdout);
    printf("\"stop_ms\":%.3f,\"killed\":%s,\"log_warnings\":%d}\n", t_stop,
           killed ? "true" : "false", warn_lines);
    if (tsv_path != NULL) {
        /* The figures bench/run takes medians of, one line per start. */
        FILE *t = fopen(tsv_path, "a");
        if (t == NULL)
            die("cannot open %s", tsv_path);
        fprintf(t, "%.3f\t%.3f\t%.3f\t%d\t%ld\t%ld\t%ld\t%d\t%ld\t%d\t%.3f\n", t_listen, t_ready,
                t_answer, a->done ? a->status : -1, mok ? mm.rss_kb : -1, mok ? mm.anon_kb : -1,
                mok ? mm.file_kb : -1, mok ? mm.fds : -1, wok ? wm.rss_kb : -1, wok ? wm.fds : -1,
                t_stop);
        fclose(t);
    }
    bool ok = t_ready >= 0 && t_answer >= 0 && a->done && a->status == 200;
    free(a);
    return ok ? 0 : 1;
}

/* ---- exec: the floor of any start ------------------------------------------------------- */

/* fork + exec + exit of a command, n times: the dynamic loader's share of a start. */
static int cmd_exec(int argc, char **argv)
{
    int n = atoi(arg_of(argc, argv, "--n", "20"));
    int k = 2;
    while (k < argc && strcmp(argv[k], "--") != 0)
        k++;
    if (n < 1 || n > 1000 || k + 1 >= argc)
        die("usage: coldstart exec [--n N] -- PROGRAM [ARGS...]");
    double v[1000];
    for (int i = 0; i < n; i++) {
        int64_t t0 = clock_mono_ns();
        pid_t pid = fork();
        if (pid < 0)
            die("fork: %s", strerror(errno));
        if (pid == 0) {
            int null = open("/dev/null", O_RDWR);
            dup2(null, 1);
            dup2(null, 2);
            execv(argv[k + 1], argv + k + 1);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        v[i] = ms_since(t0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) == 127)
            die("%s did not run", argv[k + 1]);
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    printf("{\"runs\":%d,\"median_ms\":%.3f,\"min_ms\":%.3f,\"max_ms\":%.3f}\n", n,
           n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "exec") == 0)
        return cmd_exec(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "seed") == 0)
        return cmd_seed(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "probe") == 0)
        return cmd_probe(argc, argv);
    fputs("usage: coldstart seed --dir DIR --tenants N\n"
          "       coldstart probe --tenancyd PATH --conf FILE --sock PATH --host HOST "
          "[--log FILE] [--tsv FILE] [--timeout-ms MS]\n"
          "       coldstart exec [--n N] -- PROGRAM [ARGS...]\n",
          stderr);
    return 2;
}
