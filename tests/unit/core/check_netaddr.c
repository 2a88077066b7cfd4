/* check_netaddr.c — allow-lists of addresses and prefixes. */
#include "core/first.h"
#include "core/netaddr.h"
#include "core/rc.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>

START_TEST(test_match)
{
    arena *a = arena_create(0);
    netaddr_list *l;
    char err[128];
    ck_assert_int_eq(netaddr_list_parse("127.0.0.1, 10.0.0.0/8 ::1 fd00::/8", a, &l, err,
                                        sizeof(err)), TN_OK);
    ck_assert(netaddr_match_text(l, "127.0.0.1"));
    ck_assert(netaddr_match_text(l, "10.200.3.4"));
    ck_assert(!netaddr_match_text(l, "11.0.0.1"));
    ck_assert(netaddr_match_text(l, "::1"));
    ck_assert(netaddr_match_text(l, "fd12::5"));
    ck_assert(!netaddr_match_text(l, "fe80::1"));
    ck_assert(netaddr_match_text(l, "::ffff:10.1.1.1"));   /* mapped v4 */
    ck_assert(!netaddr_match_text(l, "not-an-ip"));
    ck_assert(!netaddr_match_text(l, NULL));
    struct sockaddr_in sin = {.sin_family = AF_INET};
    inet_pton(AF_INET, "10.9.9.9", &sin.sin_addr);
    ck_assert(netaddr_match_sockaddr(l, (struct sockaddr *)&sin, sizeof(sin)));
    inet_pton(AF_INET, "192.168.1.1", &sin.sin_addr);
    ck_assert(!netaddr_match_sockaddr(l, (struct sockaddr *)&sin, sizeof(sin)));
    arena_destroy(a);
}
END_TEST

START_TEST(test_any_and_errors)
{
    arena *a = arena_create(0);
    netaddr_list *l;
    char err[128];
    ck_assert_int_eq(netaddr_list_parse("", a, &l, err, sizeof(err)), TN_OK);
    ck_assert(netaddr_list_any(l));
    ck_assert(netaddr_match_text(l, "8.8.8.8"));
    ck_assert_int_eq(netaddr_list_parse("10.0.0.0/33", a, &l, err, sizeof(err)), TN_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "10.0.0.0/33"));
    ck_assert_int_eq(netaddr_list_parse("localhost", a, &l, err, sizeof(err)), TN_INVALID);
    arena_destroy(a);
}
END_TEST

Suite *netaddr_suite(void);
Suite *netaddr_suite(void)
{
    Suite *s = suite_create("netaddr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_match);
    tcase_add_test(tc, test_any_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
