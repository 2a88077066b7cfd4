/* check_events.c — the host's event log (tenancy/events.h): ids per tenant, reading one
 * tenant and the feed, gaps after the ring wraps, one tenant's flood against another's ids,
 * appenders in several processes, an appender killed while it holds the lock, limits, and
 * the NOTIFY payload across hosts. */
#include "core/first.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/events.h"

#include <check.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* What event_log_since delivered, copied. */
typedef struct got {
    int n;
    uint64_t ids[20000];
    int64_t tenants[20000];
    char first_data[64];
    char first_channel[EVENT_CHANNEL_MAX + 1];
} got;

static int collect(void *ctx, const event_rec *e)
{
    got *g = ctx;
    if (g->n == 0) {
        snprintf(g->first_data, sizeof(g->first_data), "%s", e->data);
        snprintf(g->first_channel, sizeof(g->first_channel), "%s", e->channel);
    }
    if (g->n < (int)(sizeof(g->ids) / sizeof(g->ids[0]))) {
        g->ids[g->n] = e->id;
        g->tenants[g->n] = e->tenant_id;
    }
    g->n++;
    return 0;
}

static got *since(event_log *l, int64_t t, uint64_t after, int *rc)
{
    static got g;
    memset(&g, 0, sizeof(g));
    *rc = event_log_since(l, t, after, collect, &g);
    return &g;
}

static void append_ok(event_log *l, int64_t t, const char *data, uint64_t want_id)
{
    uint64_t id = 0;
    ck_assert_int_eq(event_log_append(l, t, "table:notes", data, strlen(data), &id), TN_OK);
    ck_assert_uint_eq(id, want_id);
}

/* A fresh log makes only the pages it writes: its tenant table comes zeroed from mmap, and
 * writing its zeros would make every page of it in a master that may never see an event. */
START_TEST(test_fresh_log_pages)
{
    size_t ring = 65536;
    int tenants = 100000;   /* a table of megabytes */
    event_log *l = event_log_create(ring, tenants);
    ck_assert_ptr_nonnull(l);
    size_t bytes = event_log_bytes(ring, tenants);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = (bytes + pg - 1) / pg, made = 0;
    unsigned char *v = malloc(np);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(mincore((void *)l, bytes, v), 0);   /* mmap's start: a page's */
    for (size_t i = 0; i < np; i++)
        made += v[i] & 1;
    ck_assert_msg(made <= 2, "%zu of %zu pages made by creating the log", made, np);
    append_ok(l, 42, "x", 1);   /* and it works as ever */
    ck_assert_uint_eq(event_log_last_id(l, 42), 1);
    free(v);
    event_log_destroy(l);
}
END_TEST

START_TEST(test_append_since_read)
{
    event_log *l = event_log_create(65536, 16);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_ge(event_log_wake_fd(l), 0);
    append_ok(l, 7, "{\"a\":1}", 1);
    append_ok(l, 7, "two", 2);
    append_ok(l, 9, "nine-1", 1);
    append_ok(l, 7, "three", 3);
    append_ok(l, 9, "nine-2", 2);
    ck_assert_uint_eq(event_log_last_id(l, 7), 3);
    ck_assert_uint_eq(event_log_last_id(l, 9), 2);
    ck_assert_uint_eq(event_log_last_id(l, 8), 0);

    int rc;
    got *g = since(l, 7, 0, &rc);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, 3);
    ck_assert_uint_eq(g->ids[0], 1);
    ck_assert_uint_eq(g->ids[2], 3);
    ck_assert_str_eq(g->first_data, "{\"a\":1}");
    ck_assert_str_eq(g->first_channel, "table:notes");
    for (int i = 0; i < g->n; i++)
        ck_assert_int_eq(g->tenants[i], 7);   /* never another tenant's */
    g = since(l, 7, 2, &rc);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, 1);
    ck_assert_uint_eq(g->ids[0], 3);
    g = since(l, 7, 3, &rc);   /* up to date */
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, 0);
    g = since(l, 9, 0, &rc);
    ck_assert_int_eq(g->n, 2);
    ck_assert_str_eq(g->first_data, "nine-1");
    g = since(l, 7, 4, &rc);   /* an id this log never gave (ids restarted): a gap */
    ck_assert_int_eq(rc, TN_NOTFOUND);
    g = since(l, 8, 0, &rc);   /* never seen: nothing, no gap */
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, 0);

    /* the feed: every tenant, in sequence order, from the start, then only what is new */
    arena *a = arena_create(4096);
    event_cursor c = {0, 0};
    event_rec out[8];
    uint64_t lost = 99;
    ck_assert_int_eq(event_log_read(l, &c, out, 8, a, &lost), 5);
    ck_assert_uint_eq(lost, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(out[i].seq, (uint64_t)i + 1);
    ck_assert_int_eq(out[2].tenant_id, 9);
    ck_assert_str_eq(out[3].data, "three");
    ck_assert_uint_eq(out[3].origin, event_log_origin(l));
    ck_assert_int_eq(event_log_read(l, &c, out, 8, a, &lost), 0);
    append_ok(l, 9, "nine-3", 3);
    ck_assert_int_eq(event_log_read(l, &c, out, 8, a, &lost), 1);
    ck_assert_str_eq(out[0].data, "nine-3");
    /* a cursor at "now" sees only later events */
    event_cursor now;
    ck_assert_int_eq(event_log_cursor_now(l, &now), TN_OK);
    ck_assert_int_eq(event_log_read(l, &now, out, 8, a, NULL), 0);
    append_ok(l, 7, "four", 4);
    ck_assert_int_eq(event_log_read(l, &now, out, 8, a, NULL), 1);
    ck_assert_uint_eq(out[0].id, 4);
    /* the wake-up was written */
    uint64_t v = 0;
    ck_assert_int_eq(read(event_log_wake_fd(l), &v, sizeof(v)), (int)sizeof(v));
    ck_assert_uint_eq(v, 7);
    arena_destroy(a);
    event_log_destroy(l);
}
END_TEST

/* Once the ring wraps, the oldest events go: a reader behind them gets a gap, exactly at the
 * boundary, and the feed says how many it lost. */
START_TEST(test_wrap_gap)
{
    event_log *l = event_log_create(8192, 16);
    char data[101];
    memset(data, 'd', 100);
    data[100] = '\0';
    for (uint64_t i = 1; i <= 300; i++)
        append_ok(l, 1, data, i);
    event_log_stats st;
    event_log_get_stats(l, &st);
    ck_assert_uint_gt(st.evicted, 200);
    ck_assert_uint_lt(st.evicted, 300);
    ck_assert_uint_le(st.used_bytes, 8192);
    uint64_t e = st.evicted;   /* ids 1..e are gone */
    int rc;
    got *g = since(l, 1, 0, &rc);
    ck_assert_int_eq(rc, TN_NOTFOUND);
    ck_assert_int_eq(g->n, 0);
    g = since(l, 1, e - 1, &rc);
    ck_assert_int_eq(rc, TN_NOTFOUND);
    g = since(l, 1, e, &rc);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, (int)(300 - e));
    for (int i = 0; i < g->n; i++)
        ck_assert_uint_eq(g->ids[i], e + 1 + (uint64_t)i);
    g = since(l, 1, 295, &rc);
    ck_assert_int_eq(g->n, 5);
    ck_assert_uint_eq(g->ids[0], 296);

    arena *a = arena_create(65536);
    event_cursor c = {0, 0};
    event_rec out[400];
    uint64_t lost = 0;
    int n = event_log_read(l, &c, out, 400, a, &lost);
    ck_assert_int_eq(n, (int)(300 - e));
    ck_assert_uint_eq(lost, e);
    ck_assert_uint_eq(out[0].id, e + 1);
    for (int i = 1; i < n; i++)
        ck_assert_uint_eq(out[i].seq, out[i - 1].seq + 1);
    /* a reader that fell behind by more than the ring */
    event_cursor behind = c;
    for (uint64_t i = 301; i <= 700; i++)
        append_ok(l, 1, data, i);
    arena_reset(a);
    n = event_log_read(l, &behind, out, 400, a, &lost);
    ck_assert_int_gt(n, 0);
    ck_assert_uint_gt(lost, 0);
    ck_assert_uint_eq(lost + (uint64_t)n, 400);
    arena_destroy(a);
    event_log_destroy(l);
}
END_TEST

/* One tenant filling the ring with big events pushes another's out, but the other's ids go
 * on from where they were, in order, and its reader learns of the gap rather than missing
 * events silently. */
START_TEST(test_flood_keeps_other_ids)
{
    event_log *l = event_log_create(131072, 16);
    char big[16001];
    memset(big, 'B', 16000);
    big[16000] = '\0';
    uint64_t a_id = 0, b_id = 0;
    for (int round = 0; round < 50; round++) {
        append_ok(l, 100, "small", ++a_id);
        for (int k = 0; k < 3; k++)
            append_ok(l, 200, big, ++b_id);
        int rc;
        got *g = since(l, 100, a_id - 1, &rc);
        ck_assert_int_eq(rc, TN_OK);
        ck_assert_int_eq(g->n, 1);
        ck_assert_uint_eq(g->ids[0], a_id);
    }
    ck_assert_uint_eq(event_log_last_id(l, 100), 50);
    ck_assert_uint_eq(event_log_last_id(l, 200), 150);
    int rc;
    got *g = since(l, 100, 0, &rc);
    ck_assert_int_eq(rc, TN_NOTFOUND);
    /* what is kept of A is in order, ends at 50, and every id is A's */
    event_log_stats st;
    event_log_get_stats(l, &st);
    ck_assert_uint_gt(st.evicted, 100);
    for (uint64_t after = 49; after > 0; after--) {
        g = since(l, 100, after, &rc);
        if (rc == TN_NOTFOUND)
            break;
        ck_assert_int_eq(g->n, (int)(50 - after));
        for (int i = 0; i < g->n; i++) {
            ck_assert_uint_eq(g->ids[i], after + 1 + (uint64_t)i);
            ck_assert_int_eq(g->tenants[i], 100);
        }
    }
    event_log_destroy(l);
}
END_TEST

START_TEST(test_limits)
{
    event_log *l = event_log_create(65536, 2);
    char *big = malloc(20000);
    memset(big, 'x', 20000);
    uint64_t id = 5;
    ck_assert_int_eq(event_log_append(l, 1, "c", big, 16384, &id), TN_TOOBIG);
    ck_assert_uint_eq(id, 0);
    ck_assert_int_eq(event_log_append(l, 1, "c", big, 15000, &id), TN_OK);
    ck_assert_int_eq(event_log_append(l, 0, "c", "x", 1, &id), TN_INVALID);
    ck_assert_int_eq(event_log_append(l, 2, "c", "x", 1, &id), TN_OK);
    ck_assert_int_eq(event_log_append(l, 3, "c", "x", 1, &id), TN_BUSY);   /* table full */
    ck_assert_int_eq(event_log_append(l, 2, "c", "x", 1, &id), TN_OK);      /* known: fine */
    ck_assert_uint_eq(id, 2);
    ck_assert(event_channel_valid("table:notes"));
    ck_assert(event_channel_valid("schema"));
    ck_assert(event_channel_valid("a.b_c-d:e"));
    ck_assert(!event_channel_valid(""));
    ck_assert(!event_channel_valid("a b"));
    ck_assert(!event_channel_valid("a\nb"));
    char long_name[70];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    ck_assert(!event_channel_valid(long_name));
    long_name[64] = '\0';
    ck_assert(event_channel_valid(long_name));
    free(big);
    event_log_destroy(l);
}
END_TEST

/* Appenders in several processes at once: every append gets its own id, per tenant exactly
 * 1..N, and the feed sees each once. */
START_TEST(test_fork_appenders)
{
    enum { KIDS = 4, EACH = 3000 };
    event_log *l = event_log_create(4 << 20, 64);
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            int bad = 0;
            for (int i = 0; i < EACH; i++) {
                char d[32];
                int n = snprintf(d, sizeof(d), "k%d-%d", k, i);
                /* half to the shared tenant 1, half to the child's own */
                bad += event_log_append(l, i % 2 ? 1 : 10 + k, "c", d, (size_t)n, NULL) != TN_OK;
            }
            _exit(bad ? 1 : 0);
        }
        ck_assert_int_ge(kids[k], 0);
    }
    for (int k = 0; k < KIDS; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ck_assert_uint_eq(event_log_last_id(l, 1), KIDS * EACH / 2);
    for (int k = 0; k < KIDS; k++)
        ck_assert_uint_eq(event_log_last_id(l, 10 + k), EACH / 2);
    int rc;
    got *g = since(l, 1, 0, &rc);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, KIDS * EACH / 2);
    for (int i = 0; i < g->n; i++)
        ck_assert_uint_eq(g->ids[i], (uint64_t)i + 1);
    event_log_stats st;
    event_log_get_stats(l, &st);
    ck_assert_uint_eq(st.seq, KIDS * EACH);
    ck_assert_uint_eq(st.appended, KIDS * EACH);
    ck_assert_uint_eq(st.evicted, 0);
    event_log_destroy(l);
}
END_TEST

static int hold_fd = -1;

/* Called with the log's lock held: tell the parent, then wait to be killed. */
static int hold_forever(void *ctx, const event_rec *e)
{
    (void)ctx;
    (void)e;
    char one = 1;
    if (write(hold_fd, &one, 1) != 1)
        _exit(3);
    for (;;)
        pause();
    return 0;
}

/* A process SIGKILLed while it holds the lock does not wedge the log: the next locker takes
 * it over, and ids go on, never reused. */
START_TEST(test_killed_holder)
{
    event_log *l = event_log_create(65536, 16);
    append_ok(l, 5, "one", 1);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        hold_fd = p[1];
        event_log_since(l, 5, 0, hold_forever, NULL);
        _exit(2);
    }
    ck_assert_int_ge(pid, 0);
    char b;
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 5000), 1);
    ck_assert_int_eq(read(p[0], &b, 1), 1);
    /* held: another locker waits, then gives up */
    uint64_t id = 0;
    ck_assert_int_eq(event_log_append(l, 5, "c", "two", 3, &id), TN_BUSY);
    kill(pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_int_eq(event_log_append(l, 5, "c", "three", 5, &id), TN_OK);
    ck_assert_uint_eq(id, 2);
    event_log_stats s;
    event_log_get_stats(l, &s);
    ck_assert_uint_eq(s.recovered, 1);
    int rc;
    got *g = since(l, 5, 0, &rc);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, 2);
    ck_assert_uint_eq(g->ids[1], 2);
    close(p[0]);
    close(p[1]);
    event_log_destroy(l);
}
END_TEST

/* Appenders killed at random points of their appends (in the middle of one, often): after
 * each, the log is consistent: a tenant's kept ids strictly increase, the next id is above
 * all of them, and the ring wraps on as before. */
START_TEST(test_killed_appenders)
{
    event_log *l = event_log_create(16384, 16);
    for (int round = 0; round < 30; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            char d[200];
            memset(d, 'k', sizeof(d));
            for (unsigned i = 0;; i++)
                event_log_append(l, 1 + (i % 3), "c", d, 50 + i % 150, NULL);
        }
        ck_assert_int_ge(pid, 0);
        usleep(2000 + (useconds_t)(round * 397) % 5000);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        for (int64_t t = 1; t <= 3; t++) {
            uint64_t last = event_log_last_id(l, t);
            int rc;
            got *g = since(l, t, last > 20 ? last - 20 : 0, &rc);
            ck_assert_int_eq(rc, TN_OK);
            for (int i = 1; i < g->n; i++)
                ck_assert_uint_gt(g->ids[i], g->ids[i - 1]);
            if (g->n > 0)
                ck_assert_uint_le(g->ids[g->n - 1], last);
            uint64_t id = 0;
            ck_assert_int_eq(event_log_append(l, t, "c", "after", 5, &id), TN_OK);
            ck_assert_uint_gt(id, last);
        }
    }
    event_log_destroy(l);
}
END_TEST

START_TEST(test_notify_payload)
{
    buf b = BUF_INIT;
    events_notify_payload(&b, 0x0123456789abcdefull, 42, "table:notes", "line1\n\"q\"", 9);
    ck_assert(!b.oom);
    ck_assert_str_eq(b.p, "{\"origin\":\"0123456789abcdef\",\"tenant\":42,\"channel\":"
                          "\"table:notes\",\"data\":\"line1\\n\\\"q\\\"\"}");
    arena *a = arena_create(4096);
    uint64_t origin;
    int64_t tenant;
    const char *ch, *data;
    ck_assert_int_eq(events_notify_parse(b.p, a, &origin, &tenant, &ch, &data), TN_OK);
    ck_assert_uint_eq(origin, 0x0123456789abcdefull);
    ck_assert_int_eq(tenant, 42);
    ck_assert_str_eq(ch, "table:notes");
    ck_assert_str_eq(data, "line1\n\"q\"");
    /* too big for NOTIFY: a marker instead of the data */
    char *big = malloc(EVENTS_NOTIFY_DATA_MAX + 2);
    memset(big, 'x', EVENTS_NOTIFY_DATA_MAX + 1);
    big[EVENTS_NOTIFY_DATA_MAX + 1] = '\0';
    buf_reset(&b);
    events_notify_payload(&b, 1, 2, "c", big, EVENTS_NOTIFY_DATA_MAX + 1);
    ck_assert_uint_lt(b.len, 200);
    ck_assert_int_eq(events_notify_parse(b.p, a, &origin, &tenant, &ch, &data), TN_OK);
    ck_assert_str_eq(data, EVENTS_TOO_BIG);
    free(big);
    /* refused: not an object, a bad channel, no tenant, a short origin */
    ck_assert_int_eq(events_notify_parse("changed", a, &origin, &tenant, &ch, &data), TN_INVALID);
    ck_assert_int_eq(events_notify_parse("{\"origin\":\"0123456789abcdef\",\"tenant\":1,"
                                         "\"channel\":\"a b\",\"data\":\"\"}",
                                         a, &origin, &tenant, &ch, &data), TN_INVALID);
    ck_assert_int_eq(events_notify_parse("{\"origin\":\"0123456789abcdef\",\"channel\":\"a\","
                                         "\"data\":\"\"}",
                                         a, &origin, &tenant, &ch, &data), TN_INVALID);
    ck_assert_int_eq(events_notify_parse("{\"origin\":\"12\",\"tenant\":1,\"channel\":\"a\","
                                         "\"data\":\"\"}",
                                         a, &origin, &tenant, &ch, &data), TN_INVALID);
    /* a remote event goes into the log with this host's next id, its origin kept */
    event_log *l = event_log_create(65536, 4);
    append_ok(l, 2, "local", 1);
    uint64_t id = 0;
    ck_assert_int_eq(event_log_append_from(l, 77, 2, "c", "remote", 6, &id), TN_OK);
    ck_assert_uint_eq(id, 2);
    event_cursor c = {0, 0};
    event_rec out[4];
    ck_assert_int_eq(event_log_read(l, &c, out, 4, a, NULL), 2);
    ck_assert_uint_eq(out[1].origin, 77);
    ck_assert_uint_ne(out[0].origin, 77);
    event_log_destroy(l);
    arena_destroy(a);
    buf_free(&b);
}
END_TEST

static const char *pg_uri;

static void notify(tn_db *db, const char *payload)
{
    const char *p[] = {EVENTS_NOTIFY_CHANNEL, payload};
    ck_assert_int_eq(tn_db_exec(db, "SELECT pg_notify($1, $2)", 2, p), TN_OK);
}

/* Wait for the listener's socket, then take what came; the total appended. */
static int poll_remote(events_remote *er, int want)
{
    int total = 0;
    for (int i = 0; i < 50 && total < want; i++) {
        struct pollfd pf = {.fd = events_remote_fd(er), .events = POLLIN};
        poll(&pf, 1, 100);
        int n = events_remote_poll(er);
        ck_assert_int_ge(n, 0);
        total += n;
    }
    return total;
}

/* The hub's side across hosts, against a real PostgreSQL: another host's events are appended
 * with this host's ids; this host's own, malformed payloads and other channels are not. */
START_TEST(test_remote_listen)
{
    tenancy_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.enabled = true;
    cfg.registry_uri = pg_uri;
    ck_assert(events_remote_needed(&cfg));
    event_log *l = event_log_create(65536, 16);
    append_ok(l, 3, "local-1", 1);
    events_remote *er = NULL;
    char err[512];
    ck_assert_msg(events_remote_open(&cfg, l, &er, err, sizeof(err)) == TN_OK, "%s", err);
    ck_assert_int_ge(events_remote_fd(er), 0);
    ck_assert_int_eq(events_remote_poll(er), 0);   /* nothing yet, and no wait */

    tn_db *db = NULL;
    ck_assert_int_eq(db_open(pg_uri, NULL, &db, err, sizeof(err)), TN_OK);
    buf b = BUF_INIT;
    events_notify_payload(&b, event_log_origin(l), 3, "c", "mine", 4);
    notify(db, b.p);   /* this host's own: already in the log */
    notify(db, "{\"origin\":\"zz\"}");
    const char *p2[] = {"tenancy_registry", "changed"};
    ck_assert_int_eq(tn_db_exec(db, "SELECT pg_notify($1, $2)", 2, p2), TN_OK);
    buf_reset(&b);
    events_notify_payload(&b, event_log_origin(l) ^ 1, 3, "table:notes", "from afar", 9);
    notify(db, b.p);
    ck_assert_int_eq(poll_remote(er, 1), 1);
    ck_assert_int_eq(poll_remote(er, 1), 0);   /* nothing more arrives */
    int rc;
    got *g = since(l, 3, 0, &rc);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(g->n, 2);
    ck_assert_uint_eq(g->ids[1], 2);   /* this host's next id */
    g = since(l, 3, 1, &rc);
    ck_assert_str_eq(g->first_data, "from afar");
    ck_assert_str_eq(g->first_channel, "table:notes");
    /* a lost connection says so */
    ck_assert_int_eq(tn_db_exec(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                    "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()",
                                0, NULL), TN_OK);
    rc = 0;
    for (int i = 0; i < 50 && rc >= 0; i++) {
        struct pollfd pf = {.fd = events_remote_fd(er), .events = POLLIN};
        poll(&pf, 1, 100);
        rc = events_remote_poll(er);
    }
    ck_assert_int_eq(rc, TN_IO);
    events_remote_close(er);
    db_close(db);
    buf_free(&b);
    event_log_destroy(l);
}
END_TEST

Suite *events_suite(const char *pg);
Suite *events_suite(const char *pg)
{
    pg_uri = pg;
    Suite *s = suite_create("events");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fresh_log_pages);
    tcase_add_test(tc, test_append_since_read);
    tcase_add_test(tc, test_wrap_gap);
    tcase_add_test(tc, test_flood_keeps_other_ids);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_fork_appenders);
    tcase_add_test(tc, test_killed_holder);
    tcase_add_test(tc, test_killed_appenders);
    tcase_add_test(tc, test_notify_payload);
    suite_add_tcase(s, tc);
    TCase *remote = tcase_create("remote");
    tcase_set_timeout(remote, 30);
    tcase_add_test(remote, test_remote_listen);
    suite_add_tcase(s, remote);
    return s;
}
