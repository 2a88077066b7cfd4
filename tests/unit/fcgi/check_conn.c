/* check_conn.c — the open-files limit a worker gives itself (fcgi/conn.c): raised to what is
 * wanted, never past the hard limit, never lowered; the connection table sized from it.
 * (Check runs each test in its own process: the limits die with it.) */
#include "core/first.h"
#include "fcgi/worker_int.h"
#include "tests/unit/check_common.h"

#include <sys/resource.h>

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

Suite *conn_suite(void);
Suite *conn_suite(void)
{
    Suite *s = suite_create("conn");
    TCase *tc = tcase_create("conn");
    /* Needs fork mode: the limits it sets must die with its own process (and valgrind,
     * which runs without fork, keeps descriptors of its own that no limit may cut). */
    tcase_set_tags(tc, "fork");
    tcase_add_test(tc, test_fd_limit_raise);
    suite_add_tcase(s, tc);
    return s;
}
