/*
 * check_common.h — shared helpers for the Check suites.
 *
 * A process a test forks never uses Check's macros, not even an assertion that passes:
 * each passing ck_assert writes a record to the runner's message file, which the forked
 * child shares with the test, and a child SIGKILLed in the middle of that write leaves a
 * torn record the runner cannot read ("Bad message type"), failing the whole suite. A
 * child reports through its exit status or a pipe; the test asserts after the child's
 * branch.
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
