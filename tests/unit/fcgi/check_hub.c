/*
 * check_hub.c — the pure parts of fcgi/hub.c: the SSE text of an event (one data line per
 * line of data, whatever the line ends), the STDOUT records around it (split at 65535,
 * padded to 8), and the scoreboard's per-tenant stream table the workers read.
 *
 * And the hub's own limits, with the hub process itself: hand-offs of socket pairs that stand
 * for the web server's connections, taken one after the other, so the per-tenant limit of
 * the hub is tested apart from the worker's (which refuses before handing off, and is what
 * the integration test meets first).
 *
 * Owns: these cases. Hand-offs from real workers, heartbeats and ends are driven through
 * nginx by tests/integration/stream.sh.
 */
#include "core/first.h"
#include "core/buf.h"
#include "fcgi/hub.h"
#include "fcgi/scoreboard.h"

#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void event_is(const char *data, const char *want)
{
    buf b = BUF_INIT;
    hub_format_event(&b, 7, "table:a", data, strlen(data));
    buf_putc(&b, '\0');
    ck_assert_msg(strcmp(b.p, want) == 0, "'%s' gave '%s'", data, b.p);
    buf_free(&b);
}

START_TEST(test_event_text)
{
    event_is("x", "id: 7\nevent: table:a\ndata: x\n\n");
    event_is("", "id: 7\nevent: table:a\ndata: \n\n");
    event_is("a\nb", "id: 7\nevent: table:a\ndata: a\ndata: b\n\n");
    event_is("a\r\nb\rc", "id: 7\nevent: table:a\ndata: a\ndata: b\ndata: c\n\n");
    /* a trailing line end ends the last line, it does not add an empty one */
    event_is("a\n", "id: 7\nevent: table:a\ndata: a\n\n");
    event_is("a\n\nb", "id: 7\nevent: table:a\ndata: a\ndata: \ndata: b\n\n");
}
END_TEST

START_TEST(test_records)
{
    buf b = BUF_INIT;
    hub_stdout_records(&b, 0x1234, "hello", 5);
    ck_assert_uint_eq(b.len, 8 + 5 + 3);
    const unsigned char *p = (const unsigned char *)b.p;
    ck_assert_uint_eq(p[0], 1);
    ck_assert_uint_eq(p[1], 6);   /* FCGI_STDOUT */
    ck_assert_uint_eq(p[2], 0x12);
    ck_assert_uint_eq(p[3], 0x34);
    ck_assert_uint_eq(p[4] << 8 | p[5], 5);
    ck_assert_uint_eq(p[6], 3);
    ck_assert(memcmp(b.p + 8, "hello", 5) == 0);
    buf_reset(&b);
    hub_stdout_records(&b, 1, "", 0);   /* the stream's end */
    ck_assert_uint_eq(b.len, 8);
    buf_reset(&b);
    size_t big = 70000;
    char *d = malloc(big);
    memset(d, 'x', big);
    hub_stdout_records(&b, 1, d, big);
    p = (const unsigned char *)b.p;
    ck_assert_uint_eq(p[4] << 8 | p[5], 65535);
    size_t second = 8 + 65535 + 1;   /* padded to 65536 */
    ck_assert_uint_eq(p[second + 4] << 8 | p[second + 5], big - 65535);
    ck_assert_uint_eq(b.len % 8, 0);
    free(d);
    buf_free(&b);
}
END_TEST

START_TEST(test_tenant_table)
{
    sb_hub *h = calloc(1, sizeof(*h));
    ck_assert(sb_hub_tenant_add(h, 42, 1));
    ck_assert(sb_hub_tenant_add(h, 42, 1));
    ck_assert_int_eq(sb_hub_tenant_count(h, 42), 2);
    ck_assert_int_eq(sb_hub_tenant_count(h, 43), 0);
    ck_assert(sb_hub_tenant_add(h, 42, -2));
    ck_assert_int_eq(sb_hub_tenant_count(h, 42), 0);
    /* full of tenants whose streams ended: compacted, then the new one fits */
    for (int64_t t = 1000; t < 1000 + SB_HUB_TENANTS; t++) {
        ck_assert(sb_hub_tenant_add(h, t, 1));
        ck_assert(sb_hub_tenant_add(h, t, -1));
    }
    ck_assert(sb_hub_tenant_add(h, 7, 1));
    ck_assert_int_eq(sb_hub_tenant_count(h, 7), 1);
    /* full of tenants with streams: refused */
    memset(h, 0, sizeof(*h));
    for (int64_t t = 1; t <= SB_HUB_TENANTS; t++)
        ck_assert(sb_hub_tenant_add(h, t, 1));
    ck_assert(!sb_hub_tenant_add(h, 999999, 1));
    ck_assert_int_eq(sb_hub_tenant_count(h, SB_HUB_TENANTS), 1);
    free(h);
}
END_TEST

/* ---- the hub's limits, with the hub process ---------------------------------------------- */

/* Hand the hub one stream of `tenant`: a socket pair, one end passed as the web server's
 * connection; returns the end the test reads the answer from. */
static int hand_off(int sock, int64_t tenant, unsigned id)
{
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    hub_msg m;
    memset(&m, 0, sizeof(m));
    m.magic = HUB_MSG_MAGIC;
    m.fcgi_id = (uint16_t)id;
    m.tenant_id = tenant;
    snprintf(m.slug, sizeof(m.slug), "t%lld", (long long)tenant);
    snprintf(m.req_id, sizeof(m.req_id), "r%u", id);
    ck_assert_int_eq(hub_send(sock, sp[1], &m), TN_OK);
    close(sp[1]);
    return sp[0];
}

/* Read from fd until its text holds `want` (TRUE) or 5 s passed or it closed (FALSE); the
 * FastCGI records' headers are read with it and do not matter to a substring. */
static bool answer_has(int fd, const char *want)
{
    char got[4096];
    size_t n = 0;
    for (int waited = 0; waited < 5000 && n < sizeof(got) - 1;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) == 0) {
            waited += 100;
            continue;
        }
        ssize_t r = read(fd, got + n, sizeof(got) - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (memmem(got, n, want, strlen(want)) != NULL)
            return true;
    }
    return false;
}

START_TEST(test_hub_limits)
{
    scoreboard *sb = sb_create();
    ck_assert_ptr_nonnull(sb);
    sb->hub.max_per_tenant = 2;
    sb->hub.max_total = 4;
    static tn_config cfg;   /* no user to become, no tenancy: no registry to read */
    int hs[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, hs), 0);
    pid_t me = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(hs[0]);
        hub_args a = {.cfg = &cfg, .sb = sb, .events = NULL, .sock = hs[1], .pool_sock = -1,
                      .master_pid = me};
        hub_main(&a);
    }
    close(hs[1]);
    const char *ok = "Status: 200 OK", *no = "too many streams";
    /* tenant 42: two streams taken, the third refused by the hub (the worker did not look) */
    int a1 = hand_off(hs[0], 42, 1), a2 = hand_off(hs[0], 42, 2), a3 = hand_off(hs[0], 42, 3);
    ck_assert_msg(answer_has(a1, ok), "the first stream of a tenant was not taken");
    ck_assert_msg(answer_has(a2, ok), "the second stream (the limit is 2) was not taken");
    ck_assert_msg(answer_has(a3, no), "a third stream of the tenant was not refused");
    /* another tenant is not held by 42's streams */
    int b1 = hand_off(hs[0], 43, 4);
    ck_assert_msg(answer_has(b1, ok), "tenant 43's stream was refused for tenant 42's");
    /* the host's limit: 3 streams held, a fourth taken, a fifth refused */
    int b2 = hand_off(hs[0], 44, 5), b3 = hand_off(hs[0], 45, 6);
    ck_assert_msg(answer_has(b2, ok), "the fourth stream (max_total 4) was not taken");
    ck_assert_msg(answer_has(b3, no), "a fifth stream over max_total was not refused");
    /* one of 42's streams ends: the tenant has room again */
    close(a1);
    int a4 = -1;
    bool taken = false;
    for (int i = 0; i < 50 && !taken; i++) {   /* the hub sees the close on its own time */
        if (a4 >= 0)
            close(a4);
        a4 = hand_off(hs[0], 42, (unsigned)(10 + i));
        char b[256];
        struct pollfd p = {.fd = a4, .events = POLLIN};
        taken = poll(&p, 1, 100) == 1 && read(a4, b, sizeof(b)) > 0 &&
                memmem(b, sizeof(b), ok, strlen(ok)) != NULL;
    }
    ck_assert_msg(taken, "a stream ended but its tenant stayed at the limit");
    kill(pid, SIGTERM);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    int fds[] = {a2, a3, a4, b1, b2, b3, hs[0]};
    for (size_t i = 0; i < TN_ARRAY_LEN(fds); i++)
        close(fds[i]);
}
END_TEST

Suite *hub_suite(void);
Suite *hub_suite(void)
{
    Suite *s = suite_create("hub");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_event_text);
    tcase_add_test(tc, test_records);
    tcase_add_test(tc, test_tenant_table);
    suite_add_tcase(s, tc);
    TCase *proc = tcase_create("process");
    tcase_add_test(proc, test_hub_limits);
    tcase_set_timeout(proc, 30);
    suite_add_tcase(s, proc);
    return s;
}
