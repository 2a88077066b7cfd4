/* check_conn.c — the open-files limit a worker gives itself (fcgi/conn.c): raised to what is
 * wanted, never past the hard limit, never lowered; the connection table sized from it.
 * (Check runs each test in its own process: the limits die with it.) And how a connection
 * that is not kept is closed: at once when the request was all read, lingering otherwise. */
#include "core/first.h"
#include "core/clock.h"
#include "fcgi/worker_int.h"
#include "tests/unit/check_common.h"

#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static rlim_t soft(void)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    return rl.rlim_cur;
}

static void set_limits(rlim_t cur, rlim_t max)
{
    struct rlimit rl = {cur, max};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

START_TEST(test_fd_limit_raise)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4000)
        ck_abort_msg("the hard RLIMIT_NOFILE (%llu) is too low for this test",
                     (unsigned long long)rl.rlim_max);
    set_limits(256, 3000);   /* a lower hard limit: what a process may not pass */
    ck_assert_int_eq(fd_limit_raise(1200), 1200);
    ck_assert_uint_eq(soft(), 1200);
    ck_assert_int_eq(fd_limit_raise(500), 1200);    /* never lowered */
    ck_assert_int_eq(fd_limit_raise(5000), 3000);   /* up to the hard limit */
    ck_assert_uint_eq(soft(), 3000);
    /* the connection table: MAX_CONNS when the limit leaves room, fewer when it does not */
    ck_assert_int_eq(conn_table_size(), MAX_CONNS);
    set_limits(300, 300);
    ck_assert_int_eq(conn_table_size(), 300 - CONN_FD_RESERVE);
}
END_TEST

/* One close by conn_close_fd over a socket pair whose peer never closes its side: the peer
 * sent `sent`, the host read `read` of it and answered; returns the milliseconds the close
 * took, and checks that the peer gets the whole answer and then an orderly end, not a reset. */
static int64_t timed_close(const char *sent, size_t read_n, bool request_done)
{
    static worker w;
    static tn_config cfg;
    cfg.linger_timeout_ms = 300;
    w.cfg = &cfg;
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    ck_assert_int_eq(write(sp[1], sent, strlen(sent)), (ssize_t)strlen(sent));
    char in[64];
    ck_assert_int_eq(read(sp[0], in, read_n), (ssize_t)read_n);
    ck_assert_int_eq(write(sp[0], "answer", 6), 6);
    w.now_ns = clock_mono_ns();
    int64_t t0 = clock_mono_ms();
    conn_close_fd(&w, sp[0], request_done);
    int64_t took = clock_mono_ms() - t0;
    char out[16];
    ck_assert_int_eq(read(sp[1], out, sizeof(out)), 6);
    ck_assert(memcmp(out, "answer", 6) == 0);
    ck_assert_int_eq(read(sp[1], out, sizeof(out)), 0);   /* an end, not ECONNRESET */
    close(sp[1]);
    return took;
}

START_TEST(test_close_linger)
{
    /* all of the request read: closed at once, not after linger_timeout */
    ck_assert_int_lt(timed_close("request", 7, true), 100);
    /* input left unread: drained, then closed when linger_timeout is over */
    ck_assert_int_ge(timed_close("request and more", 7, true), 250);
    /* not known to be the whole request (an error path): lingers as before */
    ck_assert_int_ge(timed_close("request", 7, false), 250);
}
END_TEST

Suite *conn_suite(void);
Suite *conn_suite(void)
{
    Suite *s = suite_create("conn");
    TCase *tc = tcase_create("conn");
    /* Needs fork mode: the limits it sets must die with its own process (and valgrind,
     * which runs without fork, keeps descriptors of its own that no limit may cut). */
    tcase_set_tags(tc, "fork");
    tcase_add_test(tc, test_fd_limit_raise);
    tcase_add_test(tc, test_close_linger);
    suite_add_tcase(s, tc);
    return s;
}
