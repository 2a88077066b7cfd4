/* check_arena.c — the region allocator: alignment, growth, reset, cleanups, no-malloc reuse. */
#include "core/first.h"
#include "core/arena.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

static int cleanup_order[8];
static int cleanup_n;
static void note(void *p) { cleanup_order[cleanup_n++] = (int)(intptr_t)p; }

START_TEST(test_alignment_and_strings)
{
    arena *a = arena_create(256);
    ck_assert_ptr_nonnull(a);
    for (int i = 1; i < 40; i++) {
        void *p = arena_alloc(a, (size_t)i);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        memset(p, 0xAB, (size_t)i);
    }
    char *s = arena_sprintf(a, "%s-%d", "tenant", 42);
    ck_assert_str_eq(s, "tenant-42");
    ck_assert_str_eq(arena_strndup(a, "abcdef", 3), "abc");
    void *z = arena_calloc(a, 100);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(((unsigned char *)z)[i], 0);
    arena_destroy(a);
}
END_TEST

START_TEST(test_big_blocks_and_reset_reuse)
{
    arena *a = arena_create(1024);
    char *big = arena_alloc(a, 100000);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 100000);
    char *small = arena_alloc(a, 10);
    ck_assert_ptr_nonnull(small);
    arena_reset(a);
    ck_assert_uint_eq(arena_used(a), 0);
    size_t before = arena_mallocs(a);
    /* After reset, a request that fits the first chunk allocates nothing. */
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 20; i++)
            ck_assert_ptr_nonnull(arena_alloc(a, 24));
        arena_reset(a);
    }
    ck_assert_uint_eq(arena_mallocs(a), before);
    arena_destroy(a);
}
END_TEST

START_TEST(test_long_sprintf_spills)
{
    arena *a = arena_create(64);
    char fmt[600];
    memset(fmt, 'x', sizeof(fmt) - 1);
    fmt[sizeof(fmt) - 1] = '\0';
    char *s = arena_sprintf(a, "%s!", fmt);
    ck_assert_uint_eq(strlen(s), sizeof(fmt));
    ck_assert_int_eq(s[sizeof(fmt) - 1], '!');
    arena_destroy(a);
}
END_TEST

START_TEST(test_cleanups_lifo)
{
    arena *a = arena_create(0);
    cleanup_n = 0;
    arena_cleanup_add(a, note, (void *)1);
    arena_cleanup_add(a, note, (void *)2);
    arena_cleanup_add(a, note, (void *)3);
    arena_reset(a);
    ck_assert_int_eq(cleanup_n, 3);
    ck_assert_int_eq(cleanup_order[0], 3);
    ck_assert_int_eq(cleanup_order[2], 1);
    arena_cleanup_add(a, note, (void *)4);
    arena_destroy(a);
    ck_assert_int_eq(cleanup_n, 4);
    ck_assert_int_eq(cleanup_order[3], 4);
}
END_TEST

Suite *arena_suite(void);
Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_alignment_and_strings);
    tcase_add_test(tc, test_big_blocks_and_reset_reuse);
    tcase_add_test(tc, test_long_sprintf_spills);
    tcase_add_test(tc, test_cleanups_lifo);
    suite_add_tcase(s, tc);
    return s;
}
