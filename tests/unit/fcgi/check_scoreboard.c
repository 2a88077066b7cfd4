/* check_scoreboard.c — the scoreboard's shared memory (fcgi/scoreboard.h, fcgi/status.c):
 * a reader of every worker slot stops at the highest slot the master ever gave, so a master
 * with a few workers never makes the pages of the other slots (shared memory has no zero
 * page: reading a page makes it); a request's end counts its status class and its duration
 * bucket. */
#include "core/first.h"
#include "fcgi/scoreboard.h"
#include "fcgi/status.h"
#include "tests/unit/check_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Pages of [p, p + n) that are resident. */
static size_t resident(const void *p, size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);   /* mincore wants a page start */
    n += (uintptr_t)p - a;
    p = (const void *)a;
    size_t np = (n + pg - 1) / pg;
    unsigned char *v = malloc(np);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(mincore((void *)p, n, v), 0);
    size_t k = 0;
    for (size_t i = 0; i < np; i++)
        k += v[i] & 1;
    free(v);
    return k;
}

START_TEST(test_counts_touch_used_slots_only)
{
    scoreboard *sb = sb_create();
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(sb_slots_used(sb), 0);
    /* Two workers in slots 0 and 1, as the master gives them. */
    for (int i = 0; i < 2; i++) {
        sb_set_state(sb, sb_slot_at(sb, i), i == 0 ? SB_IDLE : SB_RUNNING);
        sb->pool.slots_used = i + 1;
    }
    sb_counts c;
    status_count(sb, &c);
    ck_assert_uint_eq(c.total, 2);
    ck_assert_uint_eq(c.idle, 1);
    /* The slots' pages beyond the first few were never made. */
    size_t slots_bytes = sizeof(sb->slots);
    ck_assert_uint_le(resident(sb->slots, slots_bytes), 2);
    /* A slot past slots_used is not looked at (the master always raises it first). */
    sb_set_state(sb, sb_slot_at(sb, 700), SB_IDLE);
    status_count(sb, &c);
    ck_assert_uint_eq(c.total, 2);
    sb->pool.slots_used = 701;
    status_count(sb, &c);
    ck_assert_uint_eq(c.total, 3);
    sb_destroy(sb);
}
END_TEST

/* A request's end counts its status class (1xx..5xx) and its duration in the first bucket
 * whose bound it does not exceed: the buckets are Prometheus's, each "le" its bound. */
START_TEST(test_request_end_counts)
{
    scoreboard *sb = sb_create();
    ck_assert_ptr_nonnull(sb);
    sb_slot *s = sb_slot_at(sb, 0);
    sb_request_end(sb, s, 200, 500);       /* exactly the first bound, 0.0005 s */
    sb_request_end(sb, s, 503, 1000);      /* exactly the second, 0.001 s */
    sb_request_end(sb, s, 404, 1001);      /* just above it */
    sb_request_end(sb, s, 502, 6000000);   /* above the last bound: +Inf */
    ck_assert_uint_eq(sb_get(&sb->pool.requests), 4);
    ck_assert_uint_eq(s->requests, 4);
    ck_assert_uint_eq(sb_get(&sb->pool.status_class[2]), 1);
    ck_assert_uint_eq(sb_get(&sb->pool.status_class[4]), 1);
    ck_assert_uint_eq(sb_get(&sb->pool.status_class[5]), 2);
    ck_assert_uint_eq(sb_get(&sb->pool.duration_bucket[0]), 1);
    ck_assert_uint_eq(sb_get(&sb->pool.duration_bucket[1]), 1);
    ck_assert_uint_eq(sb_get(&sb->pool.duration_bucket[2]), 1);
    ck_assert_uint_eq(sb_get(&sb->pool.duration_bucket[SB_NBUCKETS]), 1);
    ck_assert_uint_eq(sb_get(&sb->pool.duration_sum_us), 500 + 1000 + 1001 + 6000000);
    sb_destroy(sb);
}
END_TEST

Suite *scoreboard_suite(void);
Suite *scoreboard_suite(void)
{
    Suite *s = suite_create("scoreboard");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_counts_touch_used_slots_only);
    tcase_add_test(tc, test_request_end_counts);
    suite_add_tcase(s, tc);
    return s;
}
