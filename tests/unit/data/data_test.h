/* data_test.h — what the apps/data suites share: an allocator that frees at teardown. */
#ifndef TN_TESTS_UNIT_DATA_TEST_H
#define TN_TESTS_UNIT_DATA_TEST_H

#include <check.h>
#include <stdlib.h>

#include "apps/data/data.h"

Suite *data_sqltext_suite(void);
Suite *data_csv_suite(void);
Suite *data_dump_suite(void);
Suite *data_json_suite(void);

/* Blocks kept in a list and freed by test_mem_free: the tests' stand-in for the request
 * arena, so that the leak checkers see nothing left behind. */
typedef struct test_block {
    struct test_block *next;
    max_align_t data[];
} test_block;

static inline void *test_alloc(void *ctx, size_t n)
{
    test_block **head = ctx;
    test_block *b = malloc(sizeof(*b) + n);
    if (b == NULL)
        return NULL;
    b->next = *head;
    *head = b;
    return b->data;
}

static inline void test_mem_free(test_block **head)
{
    while (*head != NULL) {
        test_block *n = (*head)->next;
        free(*head);
        *head = n;
    }
}

#endif
