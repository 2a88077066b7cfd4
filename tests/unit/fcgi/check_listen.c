/* check_listen.c — sockets: stale unix path reclaimed, live one refused, queue measured; an
 * IPv6 address listens on IPv6 only; the shard of a worker index. */
#include "core/first.h"
#include "fcgi/listen.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static tn_config cfg_for(const char *listen)
{
    tn_config c;
    memset(&c, 0, sizeof(c));
    c.listen = listen;
    c.listen_mode = 0660;
    c.listen_backlog = 16;
    return c;
}

START_TEST(test_unix_stale_live_and_queue)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/tenancy-listen-%d.sock", (int)getpid());
    tn_config c = cfg_for(path);
    tn_listener l, l2;
    char err[256];
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_OK);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660);
    /* A second server on the same live path is refused, and the path survives. */
    ck_assert_int_eq(listen_open(&c, &l2, err, sizeof(err)), TN_ERR);
    ck_assert_ptr_nonnull(strstr(err, "in use"));
    ck_assert_int_eq(stat(path, &st), 0);
    /* Queue: two connections waiting, nobody accepting. */
    int cs[2];
    for (int i = 0; i < 2; i++) {
        cs[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, path);
        ck_assert_int_eq(connect(cs[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
    }
    unsigned q, cap;
    ck_assert_int_eq(listen_queue(&l, &q, &cap), TN_OK);
    ck_assert_uint_eq(q, 3);   /* ours, plus the liveness probe of the refused open */
    ck_assert_uint_eq(cap, 16);
    close(cs[0]);
    close(cs[1]);
    /* A dead server's path (closed without unlink) is reclaimed. */
    listen_close(&l, false);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_OK);
    listen_close(&l, true);
    ck_assert_int_ne(stat(path, &st), 0);
}
END_TEST

START_TEST(test_tcp_v4_v6_and_errors)
{
    tn_listener l;
    char err[256];
    tn_config c = cfg_for("127.0.0.1:0");
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_ERR);   /* port 0 refused */
    c = cfg_for("127.0.0.1:39517");
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_OK);
    unsigned q, cap;
    ck_assert_int_eq(listen_queue(&l, &q, &cap), TN_OK);
    ck_assert_uint_eq(q, 0);
    ck_assert_uint_eq(cap, 16);   /* listen.backlog, as for a unix socket */
    listen_close(&l, true);
    c = cfg_for("[::1]:39518");
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_OK);
    ck_assert(!l.is_unix);
    ck_assert(listen_same(&l, &c));
    listen_close(&l, true);
    c = cfg_for("[::1:39518");
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_ERR);
    c = cfg_for("systemd");
    ck_assert_int_eq(listen_open(&c, &l, err, sizeof(err)), TN_ERR);
    ck_assert_ptr_nonnull(strstr(err, "LISTEN_FDS"));
}
END_TEST

/* [address]:port is IPv6 only: an IPv4 listener on the same port beside it is another socket. */
START_TEST(test_v6_only)
{
    tn_listener l6, l4;
    char err[256];
    tn_config c6 = cfg_for("[::]:39519");
    ck_assert_int_eq(listen_open(&c6, &l6, err, sizeof(err)), TN_OK);
    tn_config c4 = cfg_for("0.0.0.0:39519");
    ck_assert_int_eq(listen_open(&c4, &l4, err, sizeof(err)), TN_OK);
    listen_close(&l4, true);
    listen_close(&l6, true);
}
END_TEST

/* Worker index i serves shard i mod N (listen.h); no shards, no shard. */
START_TEST(test_shard_of_index)
{
    tn_listener l;
    memset(&l, 0, sizeof(l));
    ck_assert_int_eq(listen_shard(&l, 0), -1);
    ck_assert_int_eq(listen_shard(&l, 3), -1);
    l.nshards = 2;
    int want2[] = {0, 1, 0, 1, 0};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(listen_shard(&l, i), want2[i]);
    l.nshards = 3;
    int want3[] = {0, 1, 2, 0, 1};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(listen_shard(&l, i), want3[i]);
}
END_TEST

Suite *listen_suite(void);
Suite *listen_suite(void)
{
    Suite *s = suite_create("listen");
    TCase *tc = tcase_create("fcgi");
    tcase_add_test(tc, test_unix_stale_live_and_queue);
    tcase_add_test(tc, test_tcp_v4_v6_and_errors);
    tcase_add_test(tc, test_v6_only);
    tcase_add_test(tc, test_shard_of_index);
    suite_add_tcase(s, tc);
    return s;
}
