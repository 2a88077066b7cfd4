/*
 * check_hub.c — the pure parts of fcgi/hub.c: the SSE text of an event (one data line per
 * line of data, whatever the line ends), the STDOUT records around it (split at 65535,
 * padded to 8), and the scoreboard's per-tenant stream table the workers read.
 *
 * Owns: these cases. The process itself (hand-offs, heartbeats, ends) is driven through
 * nginx by tests/integration/stream.sh.
 */
#include "core/first.h"
#include "core/buf.h"
#include "fcgi/hub.h"
#include "fcgi/scoreboard.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

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

Suite *hub_suite(void);
Suite *hub_suite(void)
{
    Suite *s = suite_create("hub");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_event_text);
    tcase_add_test(tc, test_records);
    tcase_add_test(tc, test_tenant_table);
    suite_add_tcase(s, tc);
    return s;
}
