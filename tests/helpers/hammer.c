/*
 * hammer.c — an HTTP/1.1 load generator that checks every answer (a test helper).
 *
 *   hammer -p PORT [-a 127.0.0.1|::1] [-c CONNECTIONS] (-d SECONDS | -n REQUESTS)
 *          [-H HOSTPATTERN] [-N TENANTS] [-u PATH] [-m METHOD] [-b BODY|@FILE]
 *          [-e EXPECT | --expect-file FILE] [--exact] [--expect-status CODE|Nxx|any]
 *          [--json FILE] [--log FILE] [--keepalive on|off] [--timeout MS] [--max-errors N]
 *          [--seed N] [--tenant-counts FILE] [--header NAME:VALUE]... [--header-file FILE]
 *          [--sequential] [--expand-body]
 *   hammer --selftest-server PORT [-a ADDR]
 *
 * Our integration, stress and benchmark scripts drive nginx on loopback with this and trust
 * its numbers, so the accounting is the point and speed comes second (it still does tens of
 * thousands of requests per second on one core). One thread, one epoll loop, C connections;
 * each connection carries one request at a time (no pipelining) and reconnects whenever the
 * server closes, an error happens or --keepalive is off.
 *
 * Every request attempt ends in exactly one of: a response (counted by status code) or an
 * error of one kind, so  requests = responses + connect + reset + timeout + parse.
 *   connect  the connection could not be opened (refused, or not established in --timeout)
 *   reset    the server reset or closed the connection before the response was complete
 *   timeout  no complete response within --timeout of the request's start
 *   parse    the response is not valid HTTP/1.1: status line, headers, Content-Length,
 *            chunked framing, or bytes beyond the end the framing announced
 * A reused keep-alive connection that the server closes before sending a single byte of the
 * answer (the race every HTTP client meets at a server's idle or reload close) is retried
 * once on a new connection for idempotent methods; such retries are counted apart.
 *
 * Answers are checked too:
 *   -H 't%d.localhost' -N 1000   each request draws a tenant number in [1, N] and sends it
 *                                in the Host header (%d also works in -u);
 *   -e 'host=%h'                 each 2xx body must contain this text, where %d is the
 *                                tenant and %h the Host of THIS request; a 2xx body without
 *                                it is a WRONG answer (another tenant's data, say), counted
 *                                apart from errors, the first few printed on stderr;
 *   --expect-file FILE           the text for tenant d is line d of FILE, its newline
 *                                included (no escapes): a value per tenant that the Host
 *                                cannot give, such as a name from the registry or a marker
 *                                from the tenant's storage;
 *   --exact                      the 2xx body must be the text, not merely contain it (a
 *                                wrong answer that quotes the Host back no longer passes);
 *   --expect-status              which final status codes are expected: an exact code
 *                                (404), a class (2xx, the default) or any; others are
 *                                counted as unexpected and the first few printed.
 * Headers beyond Host and User-Agent (an API key, a Content-Type):
 *   --header 'NAME:VALUE'        sent with every request, repeatable; %d in VALUE is the
 *                                tenant of THIS request (X-Tenant:t%d), %% a %;
 *   --header-file FILE           line d of FILE is a whole header line ("Authorization:
 *                                Bearer ...") sent with the requests of tenant d: a value
 *                                per tenant the tenant number cannot give, such as its key.
 * Host, Content-Length, Transfer-Encoding and Connection are hammer's own and refused there.
 * Per-tenant work that must reach every tenant once (create a table in each, seed each):
 *   --sequential                 tenants 1, 2, ..., N, 1, ... in turn instead of random
 *                                draws: -n N -N N reaches each tenant exactly once;
 *   --expand-body                %d in the -b body is the tenant of THIS request, %% a %
 *                                (the Content-Length follows), for rows of its own.
 * %% is a literal %. Latency runs from the start of a request (including the connect of a
 * new connection) to the last byte of its response, over responses only, kept in a
 * log-linear histogram exact below 2048 us and within 0.1% above.
 *
 * Bounds, always: -d stops issuing requests after SECONDS and -n after REQUESTS (with both,
 * whichever comes first); requests in flight then finish or time out, and the run ends at
 * the latest at the time limit + --timeout. -n alone has a time limit of 60 s, and reaching
 * it is a failure. --max-errors N stops issuing once errors + wrong + unexpected reach N.
 * SIGINT/SIGTERM stop issuing, as the time limit does (a second one kills).
 *
 * Output: one summary line on stderr; with --json FILE ("-" for stdout) an object with
 * requests, responses, duration_s, rps (responses per second), status (counts by code),
 * errors (by kind), wrong, unexpected_status, retried, latency_us (min, mean, p50, p90, p95,
 * p99, max), connections (-c), connects (connections opened), bytes_in, stopped_by
 * (count, duration, time-limit, max-errors, signal) and ok. With --log FILE, one line per
 * attempt as it ends, "START END WHAT RESULT": START and END in milliseconds since the
 * epoch (the wall clock, so that a script can place each answer among the events it
 * caused), WHAT the status code or the error kind, RESULT ok, wrong, unexpected or error.
 * With --tenant-counts FILE, one line per tenant number that was drawn: "TENANT OK OTHER
 * UNANSWERED", the attempts that got an expected and right answer, that got another answer
 * (unexpected status or WRONG), and that ended in an error (so may or may not have been
 * acted on by the server); a writer's check of each tenant's storage needs them per
 * tenant, not just the totals.
 * Exit status: 0 when there were responses and no error, no wrong answer, no unexpected
 * status, and the run was not cut short by a signal or the -n time limit; 1 otherwise;
 * 2 on a usage error.
 *
 * Loopback only: -a must be a 127.0.0.0/8 address or ::1.
 *
 * --selftest-server PORT serves tests/integration/hammer_selftest.sh: a forking HTTP/1.1
 * server whose answers exercise every branch of the response parser, chosen by the path:
 *   /headers        the request's header lines but Host, User-Agent, Content-Length and
 *                   Connection, one a line as received (a GET without a body only);
 *   /echo           the request's body (its first 4 KB);
 *   /cl /chunked /trickle /continue /eof /close  a valid answer "host=HOST\n" framed by a
 *                   Content-Length, chunks (with an extension and a trailer), chunks written
 *                   one byte at a time, a 100 Continue first, the close of the connection,
 *                   or a Content-Length and Connection: close;
 *   /lie            like /chunked, but t7.* answers as t8.* (a wrong-tenant server);
 *   /status/NNN     status NNN;   /bad /badchunk /extra  parse errors;
 *   /short /reset   reset errors;  /slow  never answers (timeouts).
 * It exits after 120 s, its children with it.
 */
#include "core/first.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define HOST_MAX 256            /* an expanded Host, with its NUL */
#define PATH_MAX_LEN 1024       /* an expanded request path */
#define EXPECT_MAX 4096         /* an expanded -e text (an echoed body fits) */
#define REQ_HEAD_MAX (PATH_MAX_LEN + HOST_MAX + 256)   /* without --header/--header-file */
#define HDR_MAX 16              /* --header options */
#define HDR_LINE_MAX 4096       /* an expanded --header, or a line of --header-file */
#define RBUF_INIT (16 * 1024)   /* per connection; grows for a large response head */
#define HEAD_MAX (64 * 1024)    /* a response head larger than this is a parse error */
#define LINE_MAX_LEN 4096       /* a chunk-size or trailer line */
#define BODY_SHOWN 200          /* bytes of a body kept for the messages */
#define SHOW_MAX 5              /* messages printed per kind of failure */
#define SCAN_NS 5000000ull      /* timer scan period: timeouts are exact to about this */
#define BACKOFF_NS 10000000ull  /* a slot waits this long after a connect error */
#define N_ONLY_LIMIT_S 60.0     /* the time limit of a run given -n alone */
#define BODY_FILE_MAX (64u << 20)
#define SELFTEST_LIFETIME_S 120
#define NS 1000000000ull

/* ---- options ------------------------------------------------------------------------------ */

struct opts {
    int port;
    struct sockaddr_storage sa;
    socklen_t salen;
    unsigned conns;
    double duration;            /* seconds; 0 when -d was not given */
    uint64_t count;             /* 0 when -n was not given */
    const char *host_pat;
    uint32_t tenants;
    const char *path_pat;
    const char *method;
    char *body;
    size_t body_len;
    const char *expect_pat;     /* NULL: bodies are not checked */
    char **expect_lines;        /* --expect-file: [tenant - 1], each with its newline */
    size_t *expect_line_len;
    bool exact;                 /* the body must equal the text */
    int status_lo, status_hi;   /* the expected final status range */
    const char *json;
    const char *log;            /* NULL: no line per attempt */
    bool keepalive;
    unsigned timeout_ms;
    uint64_t max_errors;        /* 0: no limit */
    uint64_t seed;
    const char *tenant_counts;  /* NULL: no per-tenant counts */
    bool idempotent, head;
    char *hdr_pat[HDR_MAX];     /* --header, each as "Name: value" with %d still in it */
    unsigned hdr_count;
    char **hdr_lines;           /* --header-file: [tenant - 1], without the newline */
    size_t *hdr_line_len;
    size_t head_cap;            /* room for the largest request head */
    bool sequential;            /* tenants 1, 2, ... N, 1, ... instead of random draws */
    bool expand_body;           /* %d in the body is the tenant */
    size_t body_cap;            /* with expand_body: room for the longest body and its NUL */
};

static uint64_t seq_next;       /* --sequential: the next tenant, from 0 */

static char status_desc[32] = "expected 2xx";   /* for the messages */
static FILE *log_f;             /* --log */
static uint64_t wall_off_ns;    /* the wall clock minus the monotonic one, at the start */

static struct opts O = {
    .conns = 10, .host_pat = "localhost", .tenants = 1, .path_pat = "/", .method = "GET",
    .status_lo = 200, .status_hi = 299, .keepalive = true, .timeout_ms = 5000,
};

static void usage(FILE *f)
{
    fprintf(f,
        "usage: hammer -p PORT [-a 127.0.0.1|::1] [-c CONNECTIONS] (-d SECONDS | -n REQUESTS)\n"
        "              [-H HOSTPATTERN] [-N TENANTS] [-u PATH] [-m METHOD] [-b BODY|@FILE]\n"
        "              [-e EXPECT | --expect-file FILE] [--exact]\n"
        "              [--expect-status CODE|Nxx|any] [--json FILE]\n"
        "              [--keepalive on|off] [--timeout MS] [--max-errors N] [--seed N]\n"
        "              [--tenant-counts FILE] [--header NAME:VALUE]... [--header-file FILE]\n"
        "              [--sequential] [--expand-body]\n"
        "       hammer --selftest-server PORT [-a ADDR]\n"
        "\n"
        "An HTTP/1.1 load generator for loopback tests that checks every answer.\n"
        "\n"
        "  -p, --port PORT          server port (required)\n"
        "  -a, --address ADDR       server address, loopback only (default 127.0.0.1)\n"
        "  -c, --connections N      concurrent connections, one request each (default 10)\n"
        "  -d, --duration SECONDS   issue requests for this long (decimals allowed)\n"
        "  -n, --requests N         issue exactly N requests (time limit 60 s unless -d)\n"
        "  -H, --host PATTERN       Host header; %%d is a random tenant in [1, N] per request\n"
        "                           (default localhost)\n"
        "  -N, --tenants N          tenant numbers for %%d (default 1)\n"
        "  -u, --path PATH          request target, %%d allowed (default /)\n"
        "  -m, --method METHOD      request method (default GET)\n"
        "  -b, --body BODY|@FILE    request body, sent with a Content-Length\n"
        "  -e, --expect TEXT        each 2xx body must contain TEXT (%%d tenant, %%h host of\n"
        "                           the request, %%%% a %%); otherwise a WRONG answer\n"
        "      --expect-file FILE   the text for tenant d is line d of FILE (newline\n"
        "                           included, no escapes), instead of -e\n"
        "      --exact              the body must equal the text, not merely contain it\n"
        "      --expect-status S    expected final status: a code, a class such as 2xx\n"
        "                           (default) or any\n"
        "      --json FILE          write the results as JSON to FILE (- for stdout)\n"
        "      --log FILE           one line per attempt: START_MS END_MS STATUS|ERROR RESULT\n"
        "      --keepalive on|off   reuse connections (default on)\n"
        "      --timeout MS         per-request timeout, connect included (default 5000)\n"
        "      --max-errors N       stop issuing after N errors + wrong + unexpected\n"
        "      --seed N             seed of the tenant draw (default: time and pid)\n"
        "      --tenant-counts FILE per tenant number: answers right, other answers, and\n"
        "                           attempts without an answer (\"N OK OTHER UNANSWERED\")\n"
        "      --header NAME:VALUE  send this header too (repeatable, up to 16); %%d in VALUE\n"
        "                           is the request's tenant, %%%% a %%\n"
        "      --header-file FILE   line d of FILE is a header line (\"Authorization: Bearer\n"
        "                           KEY\") sent with tenant d's requests\n"
        "      --sequential         tenants 1..N in turn, not drawn (-n N: each once)\n"
        "      --expand-body        %%d in the -b body is the request's tenant, %%%% a %%\n"
        "      --selftest-server P  run the parser test server on port P (see the source)\n"
        "  -h, --help               this text\n"
        "\n"
        "Every request ends as a response (counted by status) or as one error: connect,\n"
        "reset, timeout or parse. Exit status: 0 when all answers were expected and right\n"
        "and there was no error, 1 otherwise, 2 on a usage error.\n");
}

static void TN_NORETURN usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "hammer: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "Try 'hammer --help'.\n");
    exit(2);
}

static uint64_t parse_uint(const char *s, uint64_t min, uint64_t max, const char *what)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)s[0]))
        usage_error(what, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        usage_error(what, s);
    return v;
}

/* Loopback only: a test tool must not be pointed at someone else's server by a typo. */
static void parse_address(const char *s, int port)
{
    struct sockaddr_in *a4 = (struct sockaddr_in *)&O.sa;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&O.sa;
    memset(&O.sa, 0, sizeof(O.sa));
    if (inet_pton(AF_INET, s, &a4->sin_addr) == 1) {
        if ((ntohl(a4->sin_addr.s_addr) >> 24) != 127)
            usage_error("not a loopback address (127.0.0.0/8 or ::1 only)", s);
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        O.salen = sizeof(*a4);
    } else if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1) {
        if (!IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr))
            usage_error("not a loopback address (127.0.0.0/8 or ::1 only)", s);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        O.salen = sizeof(*a6);
    } else {
        usage_error("bad address", s);
    }
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        usage_error("cannot open the body file", path);
    char *buf = malloc(BODY_FILE_MAX + 1);
    if (buf == NULL)
        usage_error("out of memory", NULL);
    *len = fread(buf, 1, BODY_FILE_MAX, f);
    buf[*len] = '\0';             /* --expand-body reads it as a string */
    bool bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad)
        usage_error("cannot read the body file (or larger than 64 MB)", path);
    return buf;
}

/* ---- patterns ----------------------------------------------------------------------------- */

/* Expand %d (tenant), %h (host) and %%; returns the length, or -1 on an unknown escape or
 * when the result does not fit in cap bytes with its NUL. */
static int expand(const char *pat, uint32_t tenant, const char *host, size_t host_len,
                  char *out, size_t cap)
{
    size_t n = 0;
    char num[16];
    for (const char *p = pat; *p; p++) {
        const char *s = p;
        size_t l = 1;
        if (*p == '%') {
            p++;
            if (*p == 'd') {
                l = (size_t)snprintf(num, sizeof(num), "%" PRIu32, tenant);
                s = num;
            } else if (*p == 'h' && host != NULL) {
                s = host;
                l = host_len;
            } else if (*p != '%') {
                return -1;
            }
        }
        if (n + l >= cap)
            return -1;
        memcpy(out + n, s, l);
        n += l;
    }
    out[n] = '\0';
    return (int)n;
}

/* --expect-file: one line per tenant 1..O.tenants, each kept with its newline. */
static void load_expect_file(const char *path)
{
    size_t len;
    char *text = read_file(path, &len);
    O.expect_lines = calloc(O.tenants, sizeof(*O.expect_lines));
    O.expect_line_len = calloc(O.tenants, sizeof(*O.expect_line_len));
    if (O.expect_lines == NULL || O.expect_line_len == NULL)
        usage_error("out of memory for --expect-file", NULL);
    char *p = text, *end = text + len;
    for (uint32_t i = 0; i < O.tenants; i++) {
        char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        if (nl == NULL)
            usage_error("--expect-file has fewer lines than -N tenants", path);
        O.expect_lines[i] = p;
        O.expect_line_len[i] = (size_t)(nl + 1 - p);
        if (O.expect_line_len[i] >= EXPECT_MAX)
            usage_error("a line of --expect-file is over 4095 bytes", path);
        p = nl + 1;
    }
}

static bool is_tchar(int ch)
{
    return isalnum(ch) || (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Request line and header material: visible ASCII, no spaces. */
static bool is_visible(const char *s)
{
    for (; *s; s++)
        if (*s <= ' ' || *s >= 0x7f)
            return false;
    return true;
}

/* ---- clock, random, histogram --------------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state;

static uint64_t rng_next(void)     /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t draw_tenant(void)
{
    return 1 + (uint32_t)(((rng_next() >> 32) * (uint64_t)O.tenants) >> 32);
}

/* Log-linear buckets: values below 2^H_SUB_BITS are exact; above, each power of two is cut
 * into 2^(H_SUB_BITS-1) buckets, so a bucket is at most 1/1024 of its value wide. */
#define H_SUB_BITS 11
#define H_SUB (1u << H_SUB_BITS)
#define H_HALF (H_SUB / 2)
#define H_TOP_BITS 40           /* 2^40 us: longer latencies share the last bucket */
#define H_BUCKETS (H_SUB + (H_TOP_BITS - H_SUB_BITS) * H_HALF)

static size_t h_index(uint64_t v)
{
    if (v < H_SUB)
        return (size_t)v;
    if (v >= (1ull << H_TOP_BITS))
        v = (1ull << H_TOP_BITS) - 1;
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - (H_SUB_BITS - 1);
    return H_SUB + (size_t)(msb - H_SUB_BITS) * H_HALF + (size_t)((v >> shift) - H_HALF);
}

static uint64_t h_upper(size_t i)   /* the largest value that falls in bucket i */
{
    if (i < H_SUB)
        return i;
    size_t k = (i - H_SUB) / H_HALF, j = (i - H_SUB) % H_HALF;
    int shift = (int)k + 1;
    return ((uint64_t)(j + H_HALF) << shift) + ((1ull << shift) - 1);
}

/* ---- results ------------------------------------------------------------------------------ */

enum { E_CONNECT, E_RESET, E_TIMEOUT, E_PARSE, E_KINDS };
static const char *const err_name[E_KINDS] = {"connect", "reset", "timeout", "parse"};

static struct {
    uint64_t issued;            /* attempts started */
    uint64_t responses;
    uint64_t status[600];
    uint64_t err[E_KINDS];
    uint64_t wrong, unexpected, retried, connects, bytes_in;
    uint64_t lat_min, lat_max, lat_sum;
    uint64_t hist[H_BUCKETS];
    unsigned shown_err[E_KINDS];
} S = {.lat_min = UINT64_MAX};

/* Per tenant number, with --tenant-counts: indexed 1..O.tenants. */
static struct tcount {
    uint64_t ok, other, unanswered;
} *TC;
#define TC_MAX_TENANTS 10000000u   /* --tenant-counts allocates a slot per tenant number */

static uint64_t failures(void)
{
    return S.err[E_CONNECT] + S.err[E_RESET] + S.err[E_TIMEOUT] + S.err[E_PARSE] + S.wrong +
           S.unexpected;
}

static uint64_t percentile(double p)
{
    if (S.responses == 0)
        return 0;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)S.responses + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < H_BUCKETS; i++) {
        seen += S.hist[i];
        if (seen >= rank) {
            uint64_t v = h_upper(i);
            return v > S.lat_max ? S.lat_max : v < S.lat_min ? S.lat_min : v;
        }
    }
    return S.lat_max;
}

/* Print s (n bytes) quoted, with anything unusual escaped. */
static void put_quoted(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n')
            fputs("\\n", f);
        else if (ch == '\r')
            fputs("\\r", f);
        else if (ch == '\t')
            fputs("\\t", f);
        else if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* ---- connections -------------------------------------------------------------------------- */

enum cstate { C_IDLE, C_CONNECTING, C_SENDING, C_RECEIVING, C_WAIT, C_DONE };
enum pstate { PS_HEAD, PS_BODY_LEN, PS_CHUNK_SIZE, PS_CHUNK_DATA, PS_CHUNK_CRLF, PS_TRAILER,
              PS_EOF };
enum { P_MORE, P_DONE, P_ERR };

struct conn {
    int fd;                     /* -1 when closed */
    uint32_t gen;               /* bumped at each close: stale epoll events are ignored */
    enum cstate state;
    bool active;                /* an attempt is in flight */
    bool retried;
    unsigned reuse;             /* responses completed on this fd */
    uint64_t t_start, deadline, wake_at;

    /* the request of the current attempt */
    uint32_t tenant;
    char host[HOST_MAX];
    size_t host_len;
    char path[PATH_MAX_LEN];
    char expect[EXPECT_MAX];
    size_t expect_len;
    char *head;                 /* O.head_cap bytes */
    size_t head_len, woff;
    char *req_body;             /* O.body, or body_buf with --expand-body */
    size_t req_body_len;
    char *body_buf;             /* O.body_cap bytes with --expand-body, else NULL */

    /* the response */
    char *rbuf;
    size_t rcap, rlen, rpos;
    uint64_t resp_bytes;
    enum pstate ps;
    int status;
    bool close_after, check_body, found;
    bool exact_ok;              /* --exact: every body byte so far equals the text's */
    uint64_t body_len;          /* body bytes received */
    uint64_t remaining;
    char carry[EXPECT_MAX];     /* the last expect_len-1 body bytes, for a split match */
    size_t carry_len;
    char shown[BODY_SHOWN];
    size_t shown_len;
    const char *perr;           /* what was wrong with a response that did not parse */
};

static struct conn *conns;
static int ep = -1;
static unsigned in_flight;
static bool stopping, need_scan;
static const char *stopped_by = "";
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;             /* only record: the loop stops issuing at its next turn */
}

static void stop(const char *why)
{
    if (!stopping) {
        stopping = true;
        stopped_by = why;
        need_scan = true;
    }
}

static bool can_issue(void)
{
    return !stopping && (O.count == 0 || S.issued < O.count);
}

static void conn_close(struct conn *c, bool abortive)
{
    if (c->fd >= 0) {
        if (abortive) {         /* an RST: no TIME_WAIT left behind for a failed exchange */
            struct linger lg = {1, 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        close(c->fd);
        c->fd = -1;
    }
    c->gen++;
    c->rlen = c->rpos = 0;
    c->reuse = 0;
    c->state = C_IDLE;
}

static void reset_response(struct conn *c)
{
    c->resp_bytes = 0;
    c->ps = PS_HEAD;
    c->status = 0;
    c->close_after = false;
    c->check_body = false;
    c->found = false;
    c->exact_ok = true;
    c->body_len = 0;
    c->remaining = 0;
    c->carry_len = 0;
    c->shown_len = 0;
    c->perr = NULL;
}

static void show_failure(const char *kind, uint64_t no, const struct conn *c,
                         const char *detail, bool with_body)
{
    fprintf(stderr, "hammer: %s #%" PRIu64 ": %s %s Host %s: %s", kind, no, O.method, c->path,
            c->host, detail);
    if (with_body) {
        fprintf(stderr, ", got %d ", c->status);
        put_quoted(stderr, c->shown, c->shown_len);
    }
    fputc('\n', stderr);
}

static void check_max_errors(void)
{
    if (O.max_errors > 0 && failures() >= O.max_errors)
        stop("max-errors");
}

/* --log: the attempt of C ended at NOW as WHAT (a status or an error kind) with RESULT. */
static void log_attempt(const struct conn *c, uint64_t now, const char *what,
                        const char *result)
{
    if (log_f != NULL)
        fprintf(log_f, "%" PRIu64 " %" PRIu64 " %s %s\n", (c->t_start + wall_off_ns) / 1000000,
                (now + wall_off_ns) / 1000000, what, result);
}

/* End the current attempt as an error; the connection is closed and the slot waits for
 * the next timer scan (after a back-off for connect errors) rather than starting at once,
 * so that a failing server cannot make us recurse or spin. */
static void fail_attempt(struct conn *c, int kind, const char *detail)
{
    uint64_t now = mono_ns();
    S.err[kind]++;
    log_attempt(c, now, err_name[kind], "error");
    if (TC != NULL)
        TC[c->tenant].unanswered++;
    if (S.shown_err[kind] < SHOW_MAX) {
        S.shown_err[kind]++;
        show_failure(err_name[kind], S.err[kind], c, detail, false);
    }
    c->active = false;
    in_flight--;
    conn_close(c, true);
    c->state = C_WAIT;
    c->wake_at = kind == E_CONNECT ? now + BACKOFF_NS : now;
    need_scan = true;
    check_max_errors();
}

static bool send_request(struct conn *c);

static void conn_open(struct conn *c)
{
    c->fd = socket(O.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail_attempt(c, E_CONNECT, strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    S.connects++;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                             .data.u64 = ((uint64_t)(c - conns) << 32) | c->gen};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        fail_attempt(c, E_CONNECT, strerror(errno));
        return;
    }
    c->woff = 0;
    if (connect(c->fd, (struct sockaddr *)&O.sa, O.salen) == 0) {
        c->state = C_SENDING;
        send_request(c);
    } else if (errno == EINPROGRESS) {
        c->state = C_CONNECTING;
    } else {
        fail_attempt(c, E_CONNECT, strerror(errno));
    }
}

static void start_attempt(struct conn *c, uint64_t now)
{
    S.issued++;
    if (O.count > 0 && S.issued >= O.count)
        stop("count");
    in_flight++;
    c->active = true;
    c->retried = false;
    c->t_start = now;
    c->deadline = now + (uint64_t)O.timeout_ms * 1000000ull;
    c->tenant = O.sequential ? (uint32_t)(seq_next++ % O.tenants) + 1 : draw_tenant();
    /* The lengths were checked against the largest tenant number at start-up. */
    c->host_len = (size_t)expand(O.host_pat, c->tenant, NULL, 0, c->host, sizeof(c->host));
    expand(O.path_pat, c->tenant, NULL, 0, c->path, sizeof(c->path));
    c->req_body = O.body;
    c->req_body_len = O.body_len;
    if (O.expand_body) {
        c->req_body = c->body_buf;
        c->req_body_len = (size_t)expand(O.body, c->tenant, NULL, 0, c->body_buf, O.body_cap);
    }
    if (O.expect_lines != NULL) {
        c->expect_len = O.expect_line_len[c->tenant - 1];
        memcpy(c->expect, O.expect_lines[c->tenant - 1], c->expect_len);
    } else if (O.expect_pat != NULL) {
        c->expect_len = (size_t)expand(O.expect_pat, c->tenant, c->host, c->host_len,
                                       c->expect, sizeof(c->expect));
    }
    /* O.head_cap has room for all of it: every pattern and line was measured at start-up. */
    char *h = c->head;
    size_t n = (size_t)snprintf(h, O.head_cap, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hammer\r\n",
                                O.method, c->path, c->host);
    for (unsigned i = 0; i < O.hdr_count; i++) {
        n += (size_t)expand(O.hdr_pat[i], c->tenant, NULL, 0, h + n, O.head_cap - n);
        memcpy(h + n, "\r\n", 2);
        n += 2;
    }
    if (O.hdr_lines != NULL) {
        memcpy(h + n, O.hdr_lines[c->tenant - 1], O.hdr_line_len[c->tenant - 1]);
        n += O.hdr_line_len[c->tenant - 1];
        memcpy(h + n, "\r\n", 2);
        n += 2;
    }
    if (O.body != NULL || strcmp(O.method, "POST") == 0 || strcmp(O.method, "PUT") == 0 ||
        strcmp(O.method, "PATCH") == 0)
        n += (size_t)snprintf(h + n, O.head_cap - n, "Content-Length: %zu\r\n", c->req_body_len);
    n += (size_t)snprintf(h + n, O.head_cap - n, "%s\r\n",
                          O.keepalive ? "" : "Connection: close\r\n");
    c->head_len = n;
    c->woff = 0;
    reset_response(c);
    if (c->fd < 0) {
        conn_open(c);
    } else {
        c->state = C_SENDING;
        send_request(c);
    }
}

/* The slot is free: start its next attempt, or close it when the run is over. */
static void slot_next(struct conn *c, uint64_t now)
{
    if (can_issue()) {
        start_attempt(c, now);
    } else {
        conn_close(c, false);
        c->state = C_DONE;
    }
}

static bool may_retry(const struct conn *c)
{
    return c->reuse > 0 && c->resp_bytes == 0 && !c->retried && O.idempotent;
}

/* The connection failed after it was established (closed, reset, broken pipe). */
static void io_failed(struct conn *c, int err)
{
    if (may_retry(c)) {
        S.retried++;
        conn_close(c, true);
        c->retried = true;
        reset_response(c);
        conn_open(c);           /* the same attempt: same start and deadline */
        return;
    }
    char msg[160];
    if (err != 0)
        snprintf(msg, sizeof(msg), "%s after %" PRIu64 " response bytes", strerror(err),
                 c->resp_bytes);
    else
        snprintf(msg, sizeof(msg), "connection closed after %" PRIu64 " response bytes",
                 c->resp_bytes);
    fail_attempt(c, E_RESET, msg);
}

/* Write what is left of the request; false when the attempt failed. */
static bool send_request(struct conn *c)
{
    size_t total = c->head_len + c->req_body_len;
    while (c->woff < total) {
        struct iovec iov[2];
        int n = 0;
        if (c->woff < c->head_len) {
            iov[n].iov_base = c->head + c->woff;
            iov[n++].iov_len = c->head_len - c->woff;
            if (c->req_body_len > 0) {
                iov[n].iov_base = c->req_body;
                iov[n++].iov_len = c->req_body_len;
            }
        } else {
            iov[n].iov_base = c->req_body + (c->woff - c->head_len);
            iov[n++].iov_len = total - c->woff;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return true;    /* EPOLLOUT will resume */
            io_failed(c, errno);
            return false;
        }
        c->woff += (size_t)w;
    }
    if (c->state == C_SENDING)
        c->state = C_RECEIVING;
    return true;
}

/* ---- the response parser ------------------------------------------------------------------ */

/* Length of the head (through its empty line) at p, or 0 when it is not complete yet.
 * Lines end in CRLF; a bare LF is accepted too (RFC 9112 2.2). */
static size_t head_end(const char *p, size_t len)
{
    const char *end = p + len, *q = p;
    while (q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        q++;
        if (q < end && *q == '\n')
            return (size_t)(q + 1 - p);
        if (q + 1 < end && q[0] == '\r' && q[1] == '\n')
            return (size_t)(q + 2 - p);
    }
    return 0;
}

/* Next line of [*p, end): sets *line and *len (without CR LF), advances *p. */
static bool next_line(const char **p, const char *end, const char **line, size_t *len)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (nl == NULL)
        return false;
    *line = *p;
    *len = (size_t)(nl - *p);
    if (*len > 0 && (*p)[*len - 1] == '\r')
        (*len)--;
    *p = nl + 1;
    return true;
}

static bool token_eq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* Parse the head in [p, p+len); sets the framing of the body. P_DONE means an interim (1xx)
 * response to skip; P_MORE a final one whose body follows. */
static int parse_head(struct conn *c, const char *p, size_t len)
{
    const char *end = p + len, *line;
    size_t ll;
    if (!next_line(&p, end, &line, &ll) || ll < 12 || memcmp(line, "HTTP/1.", 7) != 0 ||
        (line[7] != '0' && line[7] != '1') || line[8] != ' ' || !isdigit((unsigned char)line[9]) ||
        !isdigit((unsigned char)line[10]) || !isdigit((unsigned char)line[11]) ||
        (ll > 12 && line[12] != ' ')) {
        c->perr = "bad status line";
        return P_ERR;
    }
    bool http10 = line[7] == '0';
    int status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (status < 100 || status > 599) {
        c->perr = "bad status code";
        return P_ERR;
    }
    bool has_cl = false, has_te = false, chunked = false, conn_close_tok = false, ka = false;
    uint64_t cl = 0;
    while (next_line(&p, end, &line, &ll) && ll > 0) {
        if (line[0] == ' ' || line[0] == '\t') {
            c->perr = "obsolete header line folding";
            return P_ERR;
        }
        const char *colon = memchr(line, ':', ll);
        if (colon == NULL || colon == line) {
            c->perr = "bad header line";
            return P_ERR;
        }
        size_t nl = (size_t)(colon - line);
        for (size_t i = 0; i < nl; i++)
            if (!is_tchar((unsigned char)line[i])) {
                c->perr = "bad header name";
                return P_ERR;
            }
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        trim(&v, &vl);
        if (token_eq(line, nl, "content-length")) {
            uint64_t x = 0;
            if (vl == 0 || vl > 15) {
                c->perr = "bad Content-Length";
                return P_ERR;
            }
            for (size_t i = 0; i < vl; i++) {
                if (!isdigit((unsigned char)v[i])) {
                    c->perr = "bad Content-Length";
                    return P_ERR;
                }
                x = x * 10 + (uint64_t)(v[i] - '0');
            }
            if (has_cl && x != cl) {
                c->perr = "conflicting Content-Length headers";
                return P_ERR;
            }
            has_cl = true;
            cl = x;
        } else if (token_eq(line, nl, "transfer-encoding")) {
            /* chunked must be the last coding; anything else is delimited by the close */
            const char *last = v;
            size_t lastl = vl;
            for (size_t i = 0; i < vl; i++)
                if (v[i] == ',') {
                    last = v + i + 1;
                    lastl = vl - i - 1;
                }
            trim(&last, &lastl);
            has_te = true;
            chunked = token_eq(last, lastl, "chunked");
        } else if (token_eq(line, nl, "connection")) {
            size_t i = 0;
            while (i < vl) {
                size_t j = i;
                while (j < vl && v[j] != ',')
                    j++;
                const char *t = v + i;
                size_t tl = j - i;
                trim(&t, &tl);
                if (token_eq(t, tl, "close"))
                    conn_close_tok = true;
                else if (token_eq(t, tl, "keep-alive"))
                    ka = true;
                i = j + 1;
            }
        }
    }
    if (status < 200) {
        if (status == 101) {
            c->perr = "unrequested 101 Switching Protocols";
            return P_ERR;
        }
        return P_DONE;          /* interim: the final response follows */
    }
    c->status = status;
    c->close_after = conn_close_tok || (http10 && !ka);
    c->check_body = (O.expect_pat != NULL || O.expect_lines != NULL) && status >= 200 &&
                    status <= 299;
    if (O.head || status == 204 || status == 304) {
        c->ps = PS_BODY_LEN;
        c->remaining = 0;
    } else if (has_te) {
        if (chunked) {
            c->ps = PS_CHUNK_SIZE;
        } else {
            c->ps = PS_EOF;
            c->close_after = true;
        }
    } else if (has_cl) {
        c->ps = PS_BODY_LEN;
        c->remaining = cl;
    } else {
        c->ps = PS_EOF;
        c->close_after = true;
    }
    return P_MORE;
}

/* Body bytes: keep the first few for messages, look for the expected text across splits. */
static void body_feed(struct conn *c, const char *p, size_t n)
{
    if (c->shown_len < BODY_SHOWN) {
        size_t k = n < BODY_SHOWN - c->shown_len ? n : BODY_SHOWN - c->shown_len;
        memcpy(c->shown + c->shown_len, p, k);
        c->shown_len += k;
    }
    if (c->check_body && O.exact) {
        /* Compared in place: a byte beyond the text, or one that differs, makes it wrong. */
        if (c->exact_ok && (c->body_len + n > c->expect_len ||
                            memcmp(c->expect + c->body_len, p, n) != 0))
            c->exact_ok = false;
        c->body_len += n;
        c->found = c->exact_ok && c->body_len == c->expect_len;
        return;
    }
    if (!c->check_body || c->found || n == 0)
        return;
    size_t m = c->expect_len;
    if (m == 0) {
        c->found = true;
        return;
    }
    if (c->carry_len > 0) {
        char tmp[2 * EXPECT_MAX];
        size_t take = n < m - 1 ? n : m - 1;
        memcpy(tmp, c->carry, c->carry_len);
        memcpy(tmp + c->carry_len, p, take);
        if (memmem(tmp, c->carry_len + take, c->expect, m) != NULL) {
            c->found = true;
            return;
        }
    }
    if (memmem(p, n, c->expect, m) != NULL) {
        c->found = true;
        return;
    }
    if (n >= m - 1) {
        memcpy(c->carry, p + n - (m - 1), m - 1);
        c->carry_len = m - 1;
    } else {
        size_t keep = c->carry_len < m - 1 - n ? c->carry_len : m - 1 - n;
        memmove(c->carry, c->carry + c->carry_len - keep, keep);
        memcpy(c->carry + keep, p, n);
        c->carry_len = keep + n;
    }
}

static int perr(struct conn *c, const char *what)
{
    c->perr = what;
    return P_ERR;
}

/* Consume what can be consumed of rbuf[rpos, rlen). */
static int parse(struct conn *c)
{
    for (;;) {
        const char *p = c->rbuf + c->rpos;
        size_t avail = c->rlen - c->rpos;
        switch (c->ps) {
        case PS_HEAD: {
            size_t hl = head_end(p, avail);
            if (hl == 0)
                return avail >= HEAD_MAX ? perr(c, "response head too large") : P_MORE;
            int r = parse_head(c, p, hl);
            if (r == P_ERR)
                return P_ERR;
            c->rpos += hl;
            break;              /* an interim response (P_DONE) or the body (P_MORE) follows */
        }
        case PS_BODY_LEN:
        case PS_CHUNK_DATA: {
            size_t k = avail < c->remaining ? avail : (size_t)c->remaining;
            body_feed(c, p, k);
            c->rpos += k;
            c->remaining -= k;
            if (c->remaining > 0)
                return P_MORE;
            if (c->ps == PS_BODY_LEN)
                return P_DONE;
            c->ps = PS_CHUNK_CRLF;
            break;
        }
        case PS_CHUNK_CRLF:
            if (avail == 0)
                return P_MORE;
            if (p[0] == '\n') {
                c->rpos += 1;
            } else if (p[0] == '\r') {
                if (avail < 2)
                    return P_MORE;
                if (p[1] != '\n')
                    return perr(c, "no CRLF after chunk data");
                c->rpos += 2;
            } else {
                return perr(c, "chunk longer than its size");
            }
            c->ps = PS_CHUNK_SIZE;
            break;
        case PS_CHUNK_SIZE: {
            const char *nl = memchr(p, '\n', avail);
            if (nl == NULL)
                return avail > LINE_MAX_LEN ? perr(c, "chunk-size line too long") : P_MORE;
            size_t ll = (size_t)(nl - p), i = 0;
            if (ll > 0 && p[ll - 1] == '\r')
                ll--;
            uint64_t sz = 0;
            for (; i < ll && isxdigit((unsigned char)p[i]); i++) {
                if (sz >> 56)
                    return perr(c, "chunk size overflows");
                int ch = tolower((unsigned char)p[i]);
                sz = sz * 16 + (uint64_t)(isdigit(ch) ? ch - '0' : ch - 'a' + 10);
            }
            if (i == 0)
                return perr(c, "bad chunk size");
            while (i < ll && (p[i] == ' ' || p[i] == '\t'))
                i++;
            if (i < ll && p[i] != ';')
                return perr(c, "bad chunk size");
            c->rpos += (size_t)(nl - p) + 1;
            if (sz == 0) {
                c->ps = PS_TRAILER;
            } else {
                c->remaining = sz;
                c->ps = PS_CHUNK_DATA;
            }
            break;
        }
        case PS_TRAILER: {
            const char *nl = memchr(p, '\n', avail);
            if (nl == NULL)
                return avail > LINE_MAX_LEN ? perr(c, "trailer line too long") : P_MORE;
            size_t ll = (size_t)(nl - p);
            c->rpos += ll + 1;
            if (ll == 0 || (ll == 1 && p[0] == '\r'))
                return P_DONE;
            if (memchr(p, ':', ll) == NULL)
                return perr(c, "bad trailer line");
            break;
        }
        case PS_EOF:
            body_feed(c, p, avail);
            c->rpos = c->rlen;
            return P_MORE;
        }
    }
}

/* A complete response: account for it, then go on with the next attempt. */
static void complete(struct conn *c, uint64_t now)
{
    if (c->rpos < c->rlen) {
        fail_attempt(c, E_PARSE, "bytes after the end of the response");
        return;
    }
    uint64_t us = (now - c->t_start) / 1000;
    S.responses++;
    S.status[c->status]++;
    S.hist[h_index(us)]++;
    S.lat_sum += us;
    if (us < S.lat_min)
        S.lat_min = us;
    if (us > S.lat_max)
        S.lat_max = us;
    const char *result = "ok";
    bool right = false;
    if (c->status < O.status_lo || c->status > O.status_hi) {
        result = "unexpected";
        S.unexpected++;
        if (S.unexpected <= SHOW_MAX)
            show_failure("unexpected status", S.unexpected, c, status_desc, true);
    } else if (c->check_body && !(c->found || (O.exact && c->exact_ok &&
                                                c->body_len == c->expect_len))) {
        result = "wrong";
        S.wrong++;
        if (S.wrong <= SHOW_MAX) {
            fprintf(stderr, "hammer: wrong answer #%" PRIu64 ": %s %s Host %s: expected ",
                    S.wrong, O.method, c->path, c->host);
            put_quoted(stderr, c->expect, c->expect_len);
            fprintf(stderr, ", got %d ", c->status);
            put_quoted(stderr, c->shown, c->shown_len);
            fputc('\n', stderr);
        }
    } else {
        right = true;
    }
    if (TC != NULL) {
        if (right)
            TC[c->tenant].ok++;
        else
            TC[c->tenant].other++;
    }
    if (log_f != NULL) {
        char code[8];
        snprintf(code, sizeof(code), "%d", c->status);
        log_attempt(c, now, code, result);
    }
    c->active = false;
    in_flight--;
    check_max_errors();
    bool keep = O.keepalive && !c->close_after && c->state == C_RECEIVING;
    if (keep)
        c->reuse++;
    else
        conn_close(c, false);
    slot_next(c, now);
}

static void on_readable(struct conn *c, uint32_t events)
{
    for (;;) {
        if (c->rpos == c->rlen) {
            c->rpos = c->rlen = 0;
        } else if (c->rlen == c->rcap) {
            if (c->rpos > 0) {
                memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            } else {
                size_t ncap = c->rcap * 2 > HEAD_MAX ? HEAD_MAX : c->rcap * 2;
                char *nb = ncap > c->rcap ? realloc(c->rbuf, ncap) : NULL;
                if (nb == NULL) {
                    fail_attempt(c, E_PARSE, "response head too large");
                    return;
                }
                c->rbuf = nb;
                c->rcap = ncap;
            }
        }
        size_t room = c->rcap - c->rlen;
        ssize_t n = read(c->fd, c->rbuf + c->rlen, room);
        if (n > 0) {
            c->rlen += (size_t)n;
            S.bytes_in += (uint64_t)n;
            if (!c->active) {   /* nothing was asked: drop the connection */
                conn_close(c, true);
                return;
            }
            c->resp_bytes += (uint64_t)n;
            int r = parse(c);
            if (r == P_ERR) {
                fail_attempt(c, E_PARSE, c->perr);
                return;
            }
            if (r == P_DONE) {
                complete(c, mono_ns());
                return;
            }
            /* Edge-triggered: a short read drained the socket, unless a close is pending
             * (then read on to see it, as no new edge will come). */
            if ((size_t)n < room && !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                return;
            continue;
        }
        if (n == 0) {
            if (c->active && c->ps == PS_EOF) {
                c->close_after = true;
                complete(c, mono_ns());
            } else if (c->active) {
                io_failed(c, 0);
            } else {
                conn_close(c, false);
            }
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        if (c->active)
            io_failed(c, errno);
        else
            conn_close(c, true);
        return;
    }
}

static void on_event(struct conn *c, uint32_t events)
{
    if (c->state == C_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err == 0 && (events & (EPOLLERR | EPOLLHUP)))
            err = ECONNREFUSED;
        if (err != 0) {
            fail_attempt(c, E_CONNECT, strerror(err));
            return;
        }
        c->state = C_SENDING;
        if (!send_request(c))
            return;
    } else if (c->state == C_SENDING && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        if (!send_request(c))
            return;
    }
    if (c->fd >= 0 && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        on_readable(c, events);
}

/* Timeouts, back-offs, and slots that wait for their next attempt. */
static void scan(uint64_t now)
{
    for (unsigned i = 0; i < O.conns; i++) {
        struct conn *c = &conns[i];
        if (c->active && now >= c->deadline) {
            char msg[96];
            snprintf(msg, sizeof(msg), "no %s within %u ms",
                     c->state == C_CONNECTING ? "connection" : "complete response",
                     O.timeout_ms);
            fail_attempt(c, c->state == C_CONNECTING ? E_CONNECT : E_TIMEOUT, msg);
        } else if (c->state == C_WAIT && (now >= c->wake_at || stopping)) {
            slot_next(c, now);
        }
    }
}

/* ---- output ------------------------------------------------------------------------------- */

static bool run_ok(void)
{
    return S.responses > 0 && failures() == 0 && strcmp(stopped_by, "signal") != 0 &&
           strcmp(stopped_by, "time-limit") != 0;
}

static void write_json(FILE *f, double secs)
{
    fprintf(f, "{\n  \"requests\": %" PRIu64 ",\n  \"responses\": %" PRIu64 ",\n", S.issued,
            S.responses);
    fprintf(f, "  \"duration_s\": %.6f,\n  \"rps\": %.1f,\n", secs,
            secs > 0 ? (double)S.responses / secs : 0.0);
    fprintf(f, "  \"status\": {");
    const char *sep = "";
    for (int i = 100; i < 600; i++)
        if (S.status[i] > 0) {
            fprintf(f, "%s\"%d\": %" PRIu64, sep, i, S.status[i]);
            sep = ", ";
        }
    fprintf(f, "},\n  \"errors\": {");
    for (int k = 0; k < E_KINDS; k++)
        fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", err_name[k], S.err[k]);
    fprintf(f, "},\n  \"wrong\": %" PRIu64 ",\n  \"unexpected_status\": %" PRIu64
               ",\n  \"retried\": %" PRIu64 ",\n",
            S.wrong, S.unexpected, S.retried);
    fprintf(f, "  \"latency_us\": {\"min\": %" PRIu64 ", \"mean\": %.1f, \"p50\": %" PRIu64
               ", \"p90\": %" PRIu64 ", \"p95\": %" PRIu64 ", \"p99\": %" PRIu64
               ", \"max\": %" PRIu64 "},\n",
            S.responses ? S.lat_min : 0,
            S.responses ? (double)S.lat_sum / (double)S.responses : 0.0, percentile(50),
            percentile(90), percentile(95), percentile(99), S.lat_max);
    fprintf(f, "  \"connections\": %u,\n  \"connects\": %" PRIu64 ",\n  \"bytes_in\": %" PRIu64
               ",\n",
            O.conns, S.connects, S.bytes_in);
    fprintf(f, "  \"stopped_by\": \"%s\",\n  \"ok\": %s\n}\n", stopped_by,
            run_ok() ? "true" : "false");
}

static void summary(double secs)
{
    fprintf(stderr, "hammer: %" PRIu64 " requests in %.2f s, %.0f req/s, %u connections (%" PRIu64
                    " opened); status",
            S.issued, secs, secs > 0 ? (double)S.responses / secs : 0.0, O.conns, S.connects);
    if (S.responses == 0)
        fprintf(stderr, " none");
    for (int i = 100; i < 600; i++)
        if (S.status[i] > 0)
            fprintf(stderr, " %d=%" PRIu64, i, S.status[i]);
    fprintf(stderr, "; errors");
    for (int k = 0; k < E_KINDS; k++)
        fprintf(stderr, " %s=%" PRIu64, err_name[k], S.err[k]);
    fprintf(stderr, "; wrong %" PRIu64 "; unexpected %" PRIu64 "; retried %" PRIu64
                    "; latency us p50=%" PRIu64 " p90=%" PRIu64 " p99=%" PRIu64 " max=%" PRIu64
                    "; stopped by %s; %s\n",
            S.wrong, S.unexpected, S.retried, percentile(50), percentile(90), percentile(99),
            S.lat_max, stopped_by, run_ok() ? "OK" : "FAILED");
}

/* ---- the run ------------------------------------------------------------------------------ */

static int run(void)
{
    ep = epoll_create1(EPOLL_CLOEXEC);
    conns = calloc(O.conns, sizeof(*conns));
    if (ep < 0 || conns == NULL) {
        fprintf(stderr, "hammer: cannot set up: %s\n", strerror(errno));
        return 1;
    }
    for (unsigned i = 0; i < O.conns; i++) {
        conns[i].fd = -1;
        conns[i].rcap = RBUF_INIT;
        conns[i].rbuf = malloc(RBUF_INIT);
        conns[i].head = malloc(O.head_cap);
        conns[i].body_buf = O.expand_body ? malloc(O.body_cap) : NULL;
        if (conns[i].rbuf == NULL || conns[i].head == NULL ||
            (O.expand_body && conns[i].body_buf == NULL)) {
            fprintf(stderr, "hammer: out of memory\n");
            return 1;
        }
    }
    double limit = O.duration > 0 ? O.duration : N_ONLY_LIMIT_S;
    uint64_t t_begin = mono_ns();
    uint64_t t_stop = t_begin + (uint64_t)(limit * (double)NS);
    uint64_t t_hard = t_stop + (uint64_t)O.timeout_ms * 1000000ull;
    uint64_t last_scan = t_begin, now = t_begin;
    for (unsigned i = 0; i < O.conns && can_issue(); i++)
        slot_next(&conns[i], now);
    if (!can_issue())
        need_scan = true;

    struct epoll_event evs[512];
    for (;;) {
        int n = epoll_wait(ep, evs, (int)TN_ARRAY_LEN(evs), need_scan ? 0 : 5);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "hammer: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = &conns[evs[i].data.u64 >> 32];
            if (c->gen == (uint32_t)evs[i].data.u64 && c->fd >= 0)
                on_event(c, evs[i].events);
        }
        now = mono_ns();
        if (got_signal)
            stop("signal");
        if (now >= t_stop)
            stop(O.duration > 0 ? "duration" : "time-limit");
        if (need_scan || now - last_scan >= SCAN_NS) {
            need_scan = false;
            scan(now);
            last_scan = now;
        }
        if (stopping && in_flight == 0) {
            bool waiting = false;
            for (unsigned i = 0; i < O.conns && !waiting; i++)
                waiting = conns[i].state == C_WAIT;
            if (!waiting)
                break;
        }
        if (now >= t_hard) {    /* a safety net: every deadline is before it */
            for (unsigned i = 0; i < O.conns; i++)
                if (conns[i].active)
                    fail_attempt(&conns[i], E_TIMEOUT, "run time limit reached");
            break;
        }
    }
    double secs = (double)(now - t_begin) / (double)NS;
    for (unsigned i = 0; i < O.conns; i++) {
        conn_close(&conns[i], false);
        free(conns[i].rbuf);
        free(conns[i].head);
        free(conns[i].body_buf);
    }
    free(conns);
    close(ep);

    if (strcmp(stopped_by, "time-limit") == 0)
        fprintf(stderr, "hammer: the %.0f s time limit of -n came after %" PRIu64 " of %" PRIu64
                        " requests (give -d for a longer run)\n",
                N_ONLY_LIMIT_S, S.issued, O.count);
    summary(secs);
    if (log_f != NULL && fclose(log_f) != 0) {
        fprintf(stderr, "hammer: cannot write %s: %s\n", O.log, strerror(errno));
        return 1;
    }
    if (O.json != NULL) {
        bool out = strcmp(O.json, "-") == 0;
        FILE *f = out ? stdout : fopen(O.json, "w");
        if (f == NULL) {
            fprintf(stderr, "hammer: cannot write %s: %s\n", O.json, strerror(errno));
            return 1;
        }
        write_json(f, secs);
        if ((out ? fflush(f) : fclose(f)) != 0) {
            fprintf(stderr, "hammer: cannot write %s: %s\n", O.json, strerror(errno));
            return 1;
        }
    }
    if (TC != NULL) {
        FILE *f = fopen(O.tenant_counts, "w");
        for (uint32_t t = 1; f != NULL && t <= O.tenants; t++)
            if (TC[t].ok + TC[t].other + TC[t].unanswered > 0)
                fprintf(f, "%" PRIu32 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", t, TC[t].ok,
                        TC[t].other, TC[t].unanswered);
        if (f == NULL || fclose(f) != 0) {
            fprintf(stderr, "hammer: cannot write %s: %s\n", O.tenant_counts, strerror(errno));
            return 1;
        }
    }
    return run_ok() ? 0 : 1;
}

/* ---- the self-test server ----------------------------------------------------------------- */

static bool st_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool st_puts(int fd, const char *s)
{
    return st_write(fd, s, strlen(s));
}

/* A chunked "host=HOST\n" in three chunks (one with an extension) and a trailer, written
 * piecewise (or one byte at a time with a pause, when trickle). */
static bool st_chunked(int fd, const char *host, bool trickle)
{
    char msg[1024];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"
                     "5;ext=\"x\"\r\nhost=\r\n%zx\r\n%s\r\n1\r\n\n\r\n0\r\nX-Trailer: yes\r\n\r\n",
                     strlen(host), host);
    if (n < 0 || (size_t)n >= sizeof(msg))
        return false;
    if (!trickle) {
        const char *cuts[] = {"\r\n\r\n", "host=\r\n", "\n\r\n", "0\r\n"};
        const char *p = msg;
        for (size_t i = 0; i < TN_ARRAY_LEN(cuts); i++) {
            const char *q = strstr(p, cuts[i]);
            if (q == NULL)
                break;
            q += strlen(cuts[i]);
            if (!st_write(fd, p, (size_t)(q - p)))
                return false;
            p = q;
        }
        return st_puts(fd, p);
    }
    for (int i = 0; i < n; i++) {
        if (!st_write(fd, msg + i, 1))
            return false;
        usleep(100);
    }
    return true;
}

/* Answer one request; false when the connection must be closed. */
static bool st_respond(int fd, const char *path, const char *host)
{
    char msg[2048];
    int n;
    if (strcmp(path, "/cl") == 0 || strcmp(path, "/continue") == 0 ||
        strcmp(path, "/close") == 0) {
        if (strcmp(path, "/continue") == 0 && !st_puts(fd, "HTTP/1.1 100 Continue\r\n\r\n"))
            return false;
        bool close_it = strcmp(path, "/close") == 0;
        n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s\r\nhost=%s\n",
                     strlen(host) + 6, close_it ? "Connection: close\r\n" : "", host);
        return st_write(fd, msg, (size_t)n) && !close_it;
    }
    if (strcmp(path, "/chunked") == 0 || strcmp(path, "/trickle") == 0)
        return st_chunked(fd, host, strcmp(path, "/trickle") == 0);
    if (strcmp(path, "/lie") == 0) {
        char lie[HOST_MAX];
        snprintf(lie, sizeof(lie), "%s", host);
        if (strncmp(lie, "t7.", 3) == 0)
            lie[1] = '8';
        return st_chunked(fd, lie, false);
    }
    if (strcmp(path, "/eof") == 0) {
        n = snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhost=%s\n",
                     host);
        st_write(fd, msg, (size_t)n);
        return false;
    }
    if (strncmp(path, "/status/", 8) == 0) {
        int code = atoi(path + 8);
        n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %03d Whatever\r\nContent-Length: 11\r\n\r\nstatus %03d\n", code,
                     code);
        return st_write(fd, msg, (size_t)n);
    }
    if (strcmp(path, "/bad") == 0) {
        st_puts(fd, "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n");
        return false;
    }
    if (strcmp(path, "/badchunk") == 0) {
        st_puts(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "zz\r\nhello\r\n0\r\n\r\n");
        return false;
    }
    if (strcmp(path, "/extra") == 0) {
        n = snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhost=%s\n",
                     host);
        st_write(fd, msg, (size_t)n);
        return false;
    }
    if (strcmp(path, "/short") == 0) {
        st_puts(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this\n");
        return false;
    }
    if (strcmp(path, "/reset") == 0) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        return false;
    }
    if (strcmp(path, "/slow") == 0) {
        char sink[512];
        while (read(fd, sink, sizeof(sink)) > 0) {
        }
        return false;
    }
    st_puts(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\n\r\nnot found\n");
    return true;
}

/* The value of header name (lower case, with its colon) in head[0, len), into out. */
static void st_header(const char *head, size_t len, const char *name, char *out, size_t cap)
{
    const char *p = head, *end = head + len, *line;
    size_t ll, nl = strlen(name);
    out[0] = '\0';
    while (next_line(&p, end, &line, &ll))
        if (ll > nl && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl;
            size_t vl = ll - nl;
            trim(&v, &vl);
            snprintf(out, cap, "%.*s", (int)vl, v);
            return;
        }
}

/* /headers: the request's header lines but Host, User-Agent, Content-Length and
 * Connection, each as received followed by a newline, answered with a Content-Length. */
static bool st_headers(int fd, const char *head, size_t len)
{
    static const char *const skip[] = {"host", "user-agent", "content-length", "connection"};
    char body[8192], msg[8448];
    size_t bl = 0;
    const char *p = head, *end = head + len, *line;
    size_t ll;
    next_line(&p, end, &line, &ll);   /* the request line */
    while (next_line(&p, end, &line, &ll) && ll > 0) {
        const char *colon = memchr(line, ':', ll);
        bool skipped = false;
        for (size_t k = 0; colon != NULL && k < TN_ARRAY_LEN(skip); k++)
            skipped = skipped || token_eq(line, (size_t)(colon - line), skip[k]);
        if (skipped || bl + ll + 1 > sizeof(body))
            continue;
        memcpy(body + bl, line, ll);
        bl += ll;
        body[bl++] = '\n';
    }
    int n = snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%.*s", bl,
                     (int)bl, body);
    return n > 0 && (size_t)n < sizeof(msg) && st_write(fd, msg, (size_t)n);
}

static void st_serve(int fd)
{
    char buf[8192];
    size_t len = 0;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (;;) {
        size_t hl;
        while ((hl = head_end(buf, len)) == 0) {
            if (len == sizeof(buf))
                return;
            ssize_t n = read(fd, buf + len, sizeof(buf) - len);
            if (n <= 0)
                return;
            len += (size_t)n;
        }
        char path[PATH_MAX_LEN] = "", host[HOST_MAX], clen[32], connection[64];
        const char *sp1 = memchr(buf, ' ', hl);
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', hl - (size_t)(sp1 + 1 - buf)) : NULL;
        if (sp2 != NULL)
            snprintf(path, sizeof(path), "%.*s", (int)(sp2 - sp1 - 1), sp1 + 1);
        char *q = strchr(path, '?');
        if (q != NULL)
            *q = '\0';
        st_header(buf, hl, "host:", host, sizeof(host));
        st_header(buf, hl, "content-length:", clen, sizeof(clen));
        st_header(buf, hl, "connection:", connection, sizeof(connection));
        if (strcmp(path, "/headers") == 0) {   /* answered now: it reads the head */
            if (clen[0] != '\0' || !st_headers(fd, buf, hl) || strcasecmp(connection, "close") == 0)
                return;
            memmove(buf, buf + hl, len - hl);
            len -= hl;
            continue;
        }
        size_t body = (size_t)strtoull(clen, NULL, 10);
        /* drop the request and its body from the buffer (/echo keeps up to 4 KB of it) */
        char echo[4096];
        size_t echo_len = 0;
        bool is_echo = strcmp(path, "/echo") == 0;
        size_t drop = hl;
        while (len - drop < body) {
            body -= len - drop;
            for (size_t i = drop; is_echo && i < len && echo_len < sizeof(echo); i++)
                echo[echo_len++] = buf[i];
            len = drop = 0;
            ssize_t n = read(fd, buf, sizeof(buf));
            if (n <= 0)
                return;
            len = (size_t)n;
        }
        for (size_t i = drop; is_echo && i < drop + body && echo_len < sizeof(echo); i++)
            echo[echo_len++] = buf[i];
        drop += body;
        memmove(buf, buf + drop, len - drop);
        len -= drop;
        if (is_echo) {
            char msg[4200];
            int n = snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
                             echo_len);
            if (!st_write(fd, msg, (size_t)n) || !st_write(fd, echo, echo_len) ||
                strcasecmp(connection, "close") == 0)
                return;
            continue;
        }
        if (!st_respond(fd, path, host) || strcasecmp(connection, "close") == 0)
            return;
    }
}

static int selftest_server(int port)
{
    int lfd = socket(O.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (struct sockaddr *)&O.sa, O.salen) < 0 || listen(lfd, 512) < 0) {
        fprintf(stderr, "hammer: selftest server on port %d: %s\n", port, strerror(errno));
        return 1;
    }
    signal(SIGCHLD, SIG_IGN);   /* children are reaped by the kernel */
    alarm(SELFTEST_LIFETIME_S); /* bounded, even when nobody stops it */
    fprintf(stderr, "hammer: selftest server listening on port %d\n", port);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            fprintf(stderr, "hammer: accept: %s\n", strerror(errno));
            return 1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(lfd);
            prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with the server */
            signal(SIGCHLD, SIG_DFL);
            st_serve(fd);
            close(fd);
            _exit(0);
        }
        close(fd);
    }
}

/* ---- main --------------------------------------------------------------------------------- */

enum { OPT_EXPECT_STATUS = 256, OPT_JSON, OPT_LOG, OPT_KEEPALIVE, OPT_TIMEOUT, OPT_MAX_ERRORS,
       OPT_SEED, OPT_SELFTEST, OPT_EXPECT_FILE, OPT_EXACT, OPT_TENANT_COUNTS, OPT_HEADER,
       OPT_HEADER_FILE, OPT_SEQUENTIAL, OPT_EXPAND_BODY };

/* A header line "Name: value" (len bytes, no CR LF) that hammer may send for the user: a
 * token name that is none of the headers hammer writes itself (they frame the request and
 * the connection), a colon, and a value of visible characters, spaces and tabs. */
static bool header_ok(const char *s, size_t len)
{
    static const char *const own[] = {"host", "content-length", "transfer-encoding",
                                      "connection"};
    const char *colon = memchr(s, ':', len);
    if (colon == NULL || colon == s)
        return false;
    size_t nl = (size_t)(colon - s);
    for (size_t i = 0; i < nl; i++)
        if (!is_tchar((unsigned char)s[i]))
            return false;
    for (size_t k = 0; k < TN_ARRAY_LEN(own); k++)
        if (token_eq(s, nl, own[k]))
            return false;
    for (const char *p = colon + 1; p < s + len; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch != ' ' && ch != '\t' && (ch <= ' ' || ch >= 0x7f))
            return false;
    }
    return true;
}

/* --header NAME:VALUE, kept as "NAME: VALUE" (the value without the blanks around it). */
static void add_header(const char *arg)
{
    if (O.hdr_count == HDR_MAX)
        usage_error("more than 16 --header options", arg);
    const char *colon = strchr(arg, ':');
    if (colon == NULL || colon == arg)
        usage_error("bad --header (NAME:VALUE)", arg);
    const char *v = colon + 1;
    size_t vl = strlen(v);
    trim(&v, &vl);
    size_t nl = (size_t)(colon - arg);
    char *h = malloc(nl + vl + 3);
    if (h == NULL)
        usage_error("out of memory", NULL);
    memcpy(h, arg, nl);
    memcpy(h + nl, ": ", 2);
    memcpy(h + nl + 2, v, vl);
    h[nl + 2 + vl] = '\0';
    O.hdr_pat[O.hdr_count++] = h;
}

/* --header-file: line d is tenant d's header line; returns the longest line's length. */
static size_t load_header_file(const char *path)
{
    size_t len, longest = 0;
    char *text = read_file(path, &len);
    O.hdr_lines = calloc(O.tenants, sizeof(*O.hdr_lines));
    O.hdr_line_len = calloc(O.tenants, sizeof(*O.hdr_line_len));
    if (O.hdr_lines == NULL || O.hdr_line_len == NULL)
        usage_error("out of memory for --header-file", NULL);
    char *p = text, *end = text + len;
    for (uint32_t i = 0; i < O.tenants; i++) {
        char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        if (nl == NULL)
            usage_error("--header-file has fewer lines than -N tenants", path);
        size_t l = (size_t)(nl - p);
        if (l > 0 && p[l - 1] == '\r')
            l--;
        if (l >= HDR_LINE_MAX || !header_ok(p, l)) {
            char what[96];
            snprintf(what, sizeof(what), "line %" PRIu32 " of --header-file is not a header line "
                     "hammer may send", i + 1);
            usage_error(what, path);
        }
        O.hdr_lines[i] = p;
        O.hdr_line_len[i] = l;
        if (l > longest)
            longest = l;
        p = nl + 1;
    }
    return longest;
}

static void parse_expect_status(const char *s)
{
    if (strcmp(s, "any") == 0) {
        O.status_lo = 100;
        O.status_hi = 599;
    } else if (strlen(s) == 3 && s[0] >= '1' && s[0] <= '5' && strcasecmp(s + 1, "xx") == 0) {
        O.status_lo = (s[0] - '0') * 100;
        O.status_hi = O.status_lo + 99;
    } else {
        O.status_lo = O.status_hi = (int)parse_uint(s, 200, 599, "bad --expect-status");
    }
    snprintf(status_desc, sizeof(status_desc), "expected %s", s);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'},
        {"address", required_argument, NULL, 'a'},
        {"connections", required_argument, NULL, 'c'},
        {"duration", required_argument, NULL, 'd'},
        {"requests", required_argument, NULL, 'n'},
        {"host", required_argument, NULL, 'H'},
        {"tenants", required_argument, NULL, 'N'},
        {"path", required_argument, NULL, 'u'},
        {"method", required_argument, NULL, 'm'},
        {"body", required_argument, NULL, 'b'},
        {"expect", required_argument, NULL, 'e'},
        {"expect-status", required_argument, NULL, OPT_EXPECT_STATUS},
        {"json", required_argument, NULL, OPT_JSON},
        {"expect-file", required_argument, NULL, OPT_EXPECT_FILE},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"log", required_argument, NULL, OPT_LOG},
        {"keepalive", required_argument, NULL, OPT_KEEPALIVE},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"max-errors", required_argument, NULL, OPT_MAX_ERRORS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"tenant-counts", required_argument, NULL, OPT_TENANT_COUNTS},
        {"header", required_argument, NULL, OPT_HEADER},
        {"header-file", required_argument, NULL, OPT_HEADER_FILE},
        {"sequential", no_argument, NULL, OPT_SEQUENTIAL},
        {"expand-body", no_argument, NULL, OPT_EXPAND_BODY},
        {"selftest-server", required_argument, NULL, OPT_SELFTEST},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *addr = "127.0.0.1";
    const char *expect_file = NULL, *header_file = NULL;
    bool seeded = false;
    int selftest_port = 0, ch;
    while ((ch = getopt_long(argc, argv, "p:a:c:d:n:H:N:u:m:b:e:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p': O.port = (int)parse_uint(optarg, 1, 65535, "bad port"); break;
        case 'a': addr = optarg; break;
        case 'c': O.conns = (unsigned)parse_uint(optarg, 1, 100000, "bad -c"); break;
        case 'd': {
            char *end;
            O.duration = strtod(optarg, &end);
            if (*end != '\0' || end == optarg || !(O.duration > 0) || O.duration > 86400)
                usage_error("bad -d (seconds, up to 86400)", optarg);
            break;
        }
        case 'n': O.count = parse_uint(optarg, 1, UINT64_MAX / 2, "bad -n"); break;
        case 'H': O.host_pat = optarg; break;
        case 'N': O.tenants = (uint32_t)parse_uint(optarg, 1, UINT32_MAX, "bad -N"); break;
        case 'u': O.path_pat = optarg; break;
        case 'm': O.method = optarg; break;
        case 'b':
            if (optarg[0] == '@') {
                O.body = read_file(optarg + 1, &O.body_len);
            } else {
                O.body = optarg;
                O.body_len = strlen(optarg);
            }
            break;
        case 'e': O.expect_pat = optarg; break;
        case OPT_EXPECT_STATUS: parse_expect_status(optarg); break;
        case OPT_JSON: O.json = optarg; break;
        case OPT_EXPECT_FILE: expect_file = optarg; break;
        case OPT_EXACT: O.exact = true; break;
        case OPT_LOG: O.log = optarg; break;
        case OPT_KEEPALIVE:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                usage_error("--keepalive takes on or off", optarg);
            O.keepalive = strcmp(optarg, "on") == 0;
            break;
        case OPT_TIMEOUT:
            O.timeout_ms = (unsigned)parse_uint(optarg, 1, 3600000, "bad --timeout");
            break;
        case OPT_MAX_ERRORS:
            O.max_errors = parse_uint(optarg, 1, UINT64_MAX, "bad --max-errors");
            break;
        case OPT_SEED:
            O.seed = parse_uint(optarg, 0, UINT64_MAX, "bad --seed");
            seeded = true;
            break;
        case OPT_TENANT_COUNTS: O.tenant_counts = optarg; break;
        case OPT_HEADER: add_header(optarg); break;
        case OPT_HEADER_FILE: header_file = optarg; break;
        case OPT_SEQUENTIAL: O.sequential = true; break;
        case OPT_EXPAND_BODY: O.expand_body = true; break;
        case OPT_SELFTEST:
            selftest_port = (int)parse_uint(optarg, 1, 65535, "bad --selftest-server port");
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        usage_error("unexpected argument", argv[optind]);
    if (selftest_port > 0) {
        parse_address(addr, selftest_port);
        return selftest_server(selftest_port);
    }
    if (O.port == 0)
        usage_error("-p PORT is required", NULL);
    if (O.duration == 0 && O.count == 0)
        usage_error("-d SECONDS or -n REQUESTS is required", NULL);
    parse_address(addr, O.port);

    /* Check every pattern once with the longest tenant number; requests cannot fail later. */
    char host[HOST_MAX], buf[EXPECT_MAX];
    int hl = expand(O.host_pat, O.tenants, NULL, 0, host, sizeof(host));
    if (hl <= 0 || !is_visible(host) || strpbrk(host, "/?#@") != NULL)
        usage_error("bad -H (a host name, escapes %d and %%, up to 255 bytes)", O.host_pat);
    int pl = expand(O.path_pat, O.tenants, NULL, 0, buf, PATH_MAX_LEN);
    if (pl <= 0 || !is_visible(buf) || (buf[0] != '/' && strcmp(buf, "*") != 0))
        usage_error("bad -u (a path, escapes %d and %%, up to 1023 bytes)", O.path_pat);
    if (O.expect_pat != NULL &&
        expand(O.expect_pat, O.tenants, host, (size_t)hl, buf, sizeof(buf)) < 0)
        usage_error("bad -e (escapes %d, %h and %%, up to 4095 bytes)", O.expect_pat);
    if (expect_file != NULL) {
        if (O.expect_pat != NULL)
            usage_error("-e and --expect-file exclude each other", NULL);
        load_expect_file(expect_file);
    }
    /* The request head: its fixed part, then every extra header at its longest. */
    O.head_cap = REQ_HEAD_MAX;
    for (unsigned i = 0; i < O.hdr_count; i++) {
        int l = expand(O.hdr_pat[i], O.tenants, NULL, 0, buf, HDR_LINE_MAX);
        if (l < 0 || !header_ok(buf, (size_t)l))
            usage_error("bad --header (NAME:VALUE: a header name other than Host, "
                        "Content-Length, Transfer-Encoding and Connection, a value of visible "
                        "characters and blanks, escapes %d and %%, up to 4095 bytes)",
                        O.hdr_pat[i]);
        O.head_cap += (size_t)l + 2;
    }
    if (header_file != NULL)
        O.head_cap += load_header_file(header_file) + 2;
    if (O.expand_body) {
        /* measured at its longest, as the patterns above; the text must hold no NUL */
        if (O.body == NULL || memchr(O.body, '\0', O.body_len) != NULL)
            usage_error("--expand-body needs a -b body without NUL bytes", NULL);
        char *tmp = malloc(O.body_len * 11 + 1);   /* %d grows from 2 to at most 10 bytes */
        if (tmp == NULL)
            usage_error("out of memory", NULL);
        int bl = expand(O.body, O.tenants, NULL, 0, tmp, O.body_len * 11 + 1);
        if (bl < 0)
            usage_error("bad -b for --expand-body (escapes %d and %%)", NULL);
        O.body_cap = (size_t)bl + 1;
        free(tmp);
    }
    if (O.exact && O.expect_pat == NULL && O.expect_lines == NULL)
        usage_error("--exact needs -e or --expect-file", NULL);
    if (O.method[0] == '\0' || strlen(O.method) > 32)
        usage_error("bad -m", O.method);
    for (const char *m = O.method; *m; m++)
        if (!is_tchar((unsigned char)*m))
            usage_error("bad -m", O.method);
    O.head = strcmp(O.method, "HEAD") == 0;
    if (O.head && (O.expect_pat != NULL || O.expect_lines != NULL))
        usage_error("-e makes no sense with HEAD (no bodies)", NULL);
    O.idempotent = O.head || strcmp(O.method, "GET") == 0 || strcmp(O.method, "PUT") == 0 ||
                   strcmp(O.method, "DELETE") == 0 || strcmp(O.method, "OPTIONS") == 0;
    if (O.count > 0 && O.conns > O.count)
        O.conns = (unsigned)O.count;   /* no idle connections that would only be opened */
    if (O.tenant_counts != NULL) {
        if (O.tenants > TC_MAX_TENANTS)
            usage_error("--tenant-counts takes at most 10000000 tenants (-N)", NULL);
        TC = calloc((size_t)O.tenants + 1, sizeof(*TC));
        if (TC == NULL)
            usage_error("--tenant-counts: out of memory", NULL);
    }

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)O.conns + 32) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)O.conns + 32 ? rl.rlim_max : (rlim_t)O.conns + 32;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < (rlim_t)O.conns + 32)
            usage_error("-c is above the open files limit", NULL);
    }
    if (O.log != NULL) {
        log_f = fopen(O.log, "w");
        if (log_f == NULL) {
            fprintf(stderr, "hammer: cannot write %s: %s\n", O.log, strerror(errno));
            return 1;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        wall_off_ns = (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec - mono_ns();
    }
    rng_state = seeded ? O.seed : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = (int)SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return run();
}
