/*
 * check_common.h — shared helpers for the Check suites.
 */
#ifndef TN_TESTS_CHECK_COMMON_H
#define TN_TESTS_CHECK_COMMON_H

#include <check.h>
#include <stdlib.h>

/* Run the given suites; exit status for automake (0 pass, 1 fail). */
static inline int run_suites(Suite **suites, int n)
{
    SRunner *sr = srunner_create(suites[0]);
    for (int i = 1; i < n; i++)
        srunner_add_suite(sr, suites[i]);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
