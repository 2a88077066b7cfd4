/* check_proto.c — the FastCGI pre-check: what reaches libfcgi and what is answered here. */
#include "core/first.h"
#include "fcgi/proto.h"

#include <check.h>
#include <string.h>

static size_t rec(unsigned char *o, int type, unsigned id, const void *content, size_t len)
{
    o[0] = 1;
    o[1] = (unsigned char)type;
    o[2] = (unsigned char)(id >> 8);
    o[3] = (unsigned char)id;
    o[4] = (unsigned char)(len >> 8);
    o[5] = (unsigned char)len;
    o[6] = 0;
    o[7] = 0;
    if (len)
        memcpy(o + 8, content, len);
    return 8 + len;
}

static size_t begin(unsigned char *o, unsigned id, unsigned role, int keep)
{
    unsigned char b[8] = {(unsigned char)(role >> 8), (unsigned char)role,
                          (unsigned char)(keep ? 1 : 0), 0, 0, 0, 0, 0};
    return rec(o, FCGI_T_BEGIN, id, b, 8);
}

START_TEST(test_normal_request_ready)
{
    unsigned char s[512];
    size_t n = begin(s, 1, 1, 1);
    unsigned char nv[] = {4, 3, 'H', 'O', 'S', 'T', 'a', 'b', 'c'};
    n += rec(s + n, FCGI_T_PARAMS, 1, nv, sizeof(nv));
    n += rec(s + n, FCGI_T_PARAMS, 1, NULL, 0);
    fp_result r;
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_READY);
    ck_assert_uint_eq(r.req_id, 1);
    ck_assert(r.keep_conn);
    ck_assert(!r.stdin_done);   /* no STDIN yet: libfcgi's reads may wait */
    size_t params_end = n;
    unsigned char body[] = {'x', 'y'};
    n += rec(s + n, FCGI_T_STDIN, 1, body, sizeof(body));
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_READY);
    ck_assert(!r.stdin_done);   /* a body under way */
    n += rec(s + n, FCGI_T_STDIN, 2, NULL, 0);
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_READY);
    ck_assert(!r.stdin_done);   /* another request id's end does not count */
    size_t with_end = n + rec(s + n, FCGI_T_STDIN, 1, NULL, 0);
    ck_assert_int_eq(fcgi_precheck(s, with_end, 1 << 20, false, &r), FP_READY);
    ck_assert(r.stdin_done);    /* all of it here: no read can block */
    ck_assert_int_eq(fcgi_precheck(s, with_end - 1, 1 << 20, false, &r), FP_READY);
    ck_assert(!r.stdin_done);   /* the end record cut short */
    /* A GET_VALUES inside the body, when it is already here, is refused before libfcgi. */
    unsigned char gv[] = {0x0E, 0x00, 'F', 'C', 'G', 'I', '_', 'M', 'A', 'X', '_', 'C', 'O', 'N', 'N', 'S'};
    size_t with_gv = n + rec(s + n, FCGI_T_GET_VALUES, 0, gv, sizeof(gv));
    ck_assert_int_eq(fcgi_precheck(s, with_gv, 1 << 20, false, &r), FP_MALFORMED);
    ck_assert_ptr_nonnull(r.why);
    n = params_end;
    /* Any prefix short of the end of params needs more bytes. */
    for (size_t k = 1; k < n - 8; k++)
        ck_assert_int_eq(fcgi_precheck(s, k, 1 << 20, false, &r), FP_NEED_MORE);
    /* A full peek buffer without the end of the params means they are over the limit. */
    ck_assert_int_eq(fcgi_precheck(s, 20, 1 << 20, true, &r), FP_TOO_BIG);
}
END_TEST

/* The params of a request before libfcgi reads it, as libfcgi's environment: pairs split
 * across records, long lengths, a name that could pass for another param left out. */
START_TEST(test_params_env)
{
    unsigned char s[4096], raw[4096];
    char text[4096], *env[8];
    size_t n = begin(s, 3, 1, 1);
    /* "TENANT_HOST=acme.example.com" cut in the middle of its value, then a 200-byte value
     * (a 4-byte length), "A=B" as a name (left out), and an empty value */
    unsigned char p1[] = {11, 16, 'T', 'E', 'N', 'A', 'N', 'T', '_', 'H', 'O', 'S', 'T',
                          'a', 'c', 'm', 'e', '.', 'e'};
    unsigned char p2[] = {'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm'};
    unsigned char p3[16 + 200];
    size_t k = 0;
    p3[k++] = 4;
    p3[k++] = 0x80;
    p3[k++] = 0;
    p3[k++] = 0;
    p3[k++] = 200;
    memcpy(p3 + k, "LONG", 4);
    k += 4;
    memset(p3 + k, 'v', 200);
    k += 200;
    unsigned char p4[] = {3, 1, 'A', '=', 'B', 'x', 5, 0, 'E', 'M', 'P', 'T', 'Y'};
    unsigned char body[] = {'z'};
    n += rec(s + n, FCGI_T_PARAMS, 3, p1, sizeof(p1));
    n += rec(s + n, FCGI_T_STDIN, 3, body, sizeof(body));   /* early STDIN is passed over */
    n += rec(s + n, FCGI_T_PARAMS, 3, p2, sizeof(p2));
    n += rec(s + n, FCGI_T_PARAMS, 3, p3, k);
    n += rec(s + n, FCGI_T_PARAMS, 3, p4, sizeof(p4));
    size_t before_end = n;
    n += rec(s + n, FCGI_T_PARAMS, 3, NULL, 0);
    fp_result r;
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_READY);
    int got = fcgi_params_env(s, n, raw, sizeof(raw), text, sizeof(text), env, 8);
    ck_assert_int_eq(got, 3);
    ck_assert_str_eq(env[0], "TENANT_HOST=acme.example.com");
    ck_assert_int_eq(strlen(env[1]), 5 + 200);
    ck_assert(strncmp(env[1], "LONG=vvv", 8) == 0);
    ck_assert_str_eq(env[2], "EMPTY=");
    ck_assert_ptr_null(env[3]);
    /* One param found in the joined bytes; joined in raw, as they came in four records */
    const unsigned char *content = NULL;
    long joined = fcgi_params_join(s, n, raw, sizeof(raw), &content);
    ck_assert_int_eq(joined, (long)(sizeof(p1) + sizeof(p2) + k + sizeof(p4)));
    ck_assert_ptr_eq(content, raw);
    size_t vl = 0;
    const char *v = fcgi_param_find(content, (size_t)joined, "TENANT_HOST", &vl);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(vl, 16);
    ck_assert(memcmp(v, "acme.example.com", 16) == 0);
    ck_assert_ptr_nonnull(fcgi_param_find(content, (size_t)joined, "EMPTY", &vl));
    ck_assert_int_eq(vl, 0);
    ck_assert_ptr_null(fcgi_param_find(content, (size_t)joined, "TENANT", &vl));   /* a prefix */
    ck_assert_ptr_null(fcgi_param_find(content, (size_t)joined, "MISSING", &vl));
    /* In one record they are read where they are, not copied */
    unsigned char one[512];
    size_t o = begin(one, 2, 1, 1);
    size_t at = o + 8;
    o += rec(one + o, FCGI_T_PARAMS, 2, p4, sizeof(p4));
    o += rec(one + o, FCGI_T_PARAMS, 2, NULL, 0);
    ck_assert_int_eq(fcgi_params_join(one, o, raw, sizeof(raw), &content), (long)sizeof(p4));
    ck_assert_ptr_eq(content, one + at);
    ck_assert_ptr_nonnull(fcgi_param_find(content, sizeof(p4), "EMPTY", &vl));
    /* Not a whole header, or not room for it: refused, never read past. */
    ck_assert_int_eq(fcgi_params_env(s, before_end, raw, sizeof(raw), text, sizeof(text), env, 8),
                     -1);
    ck_assert_int_eq(fcgi_params_env(s, n - 1, raw, sizeof(raw), text, sizeof(text), env, 8), -1);
    ck_assert_int_eq(fcgi_params_env(s, n, raw, 100, text, sizeof(text), env, 8), -1);
    ck_assert_int_eq(fcgi_params_env(s, n, raw, sizeof(raw), text, 100, env, 8), -1);
    ck_assert_int_eq(fcgi_params_env(s, n, raw, sizeof(raw), text, sizeof(text), env, 3), -1);
    /* A pair whose declared value runs past the params' end. */
    size_t m = begin(s, 1, 1, 0);
    unsigned char bad[] = {1, 9, 'X', 'a'};
    m += rec(s + m, FCGI_T_PARAMS, 1, bad, sizeof(bad));
    m += rec(s + m, FCGI_T_PARAMS, 1, NULL, 0);
    ck_assert_int_eq(fcgi_params_env(s, m, raw, sizeof(raw), text, sizeof(text), env, 8), -1);
}
END_TEST

START_TEST(test_huge_declared_lengths_refused)
{
    /* The Debian libfcgi SIGABRT probe: name 0x7FFFFFF0, value 0x0E. */
    unsigned char s[256];
    size_t n = begin(s, 1, 1, 0);
    unsigned char nv[] = {0xFF, 0xFF, 0xFF, 0xF0, 0x80, 0x00, 0x00, 0x0E};
    n += rec(s + n, FCGI_T_PARAMS, 1, nv, sizeof(nv));
    fp_result r;
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_TOO_BIG);
    ck_assert_ptr_nonnull(r.why);
    /* Length bytes split across two PARAMS records are still seen. */
    n = begin(s, 1, 1, 0);
    unsigned char a[] = {0xD0, 0x00};
    unsigned char b[] = {0x00, 0x00, 0x01};
    n += rec(s + n, FCGI_T_PARAMS, 1, a, sizeof(a));
    n += rec(s + n, FCGI_T_PARAMS, 1, b, sizeof(b));
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_TOO_BIG);
    /* Many small params adding up over the limit. */
    n = begin(s, 1, 1, 0);
    unsigned char c[] = {0x80, 0x00, 0x01, 0x00, 0x80, 0x00, 0x01, 0x00};   /* 256 + 256 */
    n += rec(s + n, FCGI_T_PARAMS, 1, c, sizeof(c));
    ck_assert_int_eq(fcgi_precheck(s, n, 400, false, &r), FP_TOO_BIG);
    ck_assert_uint_eq(r.req_id, 1);   /* the 431 goes to this request */
    ck_assert_ptr_nonnull(r.why);
    /* One name length over the limit is refused as soon as it is read: a sender that stops
     * there must not hold the connection waiting for a value length. */
    n = begin(s, 1, 1, 0);
    unsigned char d[] = {0x80, 0x00, 0x01, 0x00};   /* a name of 256 */
    n += rec(s + n, FCGI_T_PARAMS, 1, d, sizeof(d));
    ck_assert_int_eq(fcgi_precheck(s, n, 200, false, &r), FP_TOO_BIG);
    ck_assert_str_eq(r.why, "a parameter declares a length over max_params");
    ck_assert_int_eq(fcgi_precheck(s, n, 256, false, &r), FP_NEED_MORE);   /* at the limit */
}
END_TEST

/* The same pairs in one PARAMS record (lengths read at once) and in one-byte records (read
 * byte by byte across records) get the same verdict and reason, under every limit. */
START_TEST(test_pairs_whole_or_split_agree)
{
    unsigned char nv[600];
    size_t k = 0;
    static const size_t lens[][2] = {{4, 3}, {200, 1}, {1, 150}, {0, 0}, {9, 130}};
    for (size_t p = 0; p < sizeof(lens) / sizeof(lens[0]); p++) {
        for (int j = 0; j < 2; j++) {
            size_t l = lens[p][j];
            if (l > 127) {
                nv[k++] = (unsigned char)(0x80 | (l >> 24));
                nv[k++] = (unsigned char)(l >> 16);
                nv[k++] = (unsigned char)(l >> 8);
            }
            nv[k++] = (unsigned char)l;
        }
        memset(nv + k, 'a', lens[p][0] + lens[p][1]);
        k += lens[p][0] + lens[p][1];
    }
    static unsigned char whole[1200], split[8 * 600 + 100];
    size_t nw = begin(whole, 1, 1, 0);
    nw += rec(whole + nw, FCGI_T_PARAMS, 1, nv, k);
    nw += rec(whole + nw, FCGI_T_PARAMS, 1, NULL, 0);
    size_t ns = begin(split, 1, 1, 0);
    for (size_t i = 0; i < k; i++)
        ns += rec(split + ns, FCGI_T_PARAMS, 1, nv + i, 1);
    ns += rec(split + ns, FCGI_T_PARAMS, 1, NULL, 0);
    size_t limits[] = {1 << 20, 498, 497, 300, 200, 199, 150, 149, 3, 0};   /* 498 in all */
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        fp_result a, b;
        fp_verdict va = fcgi_precheck(whole, nw, limits[i], false, &a);
        fp_verdict vb = fcgi_precheck(split, ns, limits[i], false, &b);
        ck_assert_msg(va == vb, "limit %zu: %d vs %d", limits[i], (int)va, (int)vb);
        ck_assert_int_eq(va, limits[i] >= 498 ? FP_READY : FP_TOO_BIG);
        if (va == FP_TOO_BIG)
            ck_assert_str_eq(a.why, b.why);
    }
}
END_TEST

START_TEST(test_management_and_roles)
{
    unsigned char s[256];
    unsigned char names[] = {14, 0, 'F', 'C', 'G', 'I', '_', 'M', 'A', 'X', '_', 'C', 'O', 'N',
                             'N', 'S', 15, 0, 'F', 'C', 'G', 'I', '_', 'M', 'P', 'X', 'S', '_',
                             'C', 'O', 'N', 'N', 'S', 3, 0, 'F', 'O', 'O'};
    size_t n = rec(s, FCGI_T_GET_VALUES, 0, names, sizeof(names));
    fp_result r;
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_MGMT);
    ck_assert_uint_eq(r.consume, n);
    unsigned char out[256];
    size_t len = fcgi_get_values_result(out, sizeof(out), s + r.mgmt_off, r.mgmt_len, 8, 8);
    ck_assert_uint_gt(len, 8);
    ck_assert_int_eq(out[1], FCGI_T_GET_VALUES_RESULT);
    ck_assert_uint_eq(len % 8, 0);
    ck_assert(memmem(out, len, "FCGI_MAX_CONNS8", 15) != NULL);
    ck_assert(memmem(out, len, "FCGI_MPXS_CONNS0", 16) != NULL);
    ck_assert(memmem(out, len, "FOO", 3) == NULL);   /* unknown names are omitted */

    n = begin(s, 7, 9, 0);
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_BAD_ROLE);
    ck_assert_uint_eq(r.req_id, 7);
    /* The three roles the spec defines, and only they, go on: the ones just outside them
     * are answered here as well. */
    for (unsigned role = 0; role <= 4; role++) {
        n = begin(s, 7, role, 0);
        ck_assert_msg(fcgi_precheck(s, n, 1 << 20, false, &r) ==
                          (role >= 1 && role <= 3 ? FP_NEED_MORE : FP_BAD_ROLE),
                      "role %u", role);
    }
    len = fcgi_end_request(out, sizeof(out), 7, 0, FCGI_UNKNOWN_ROLE);
    ck_assert_uint_eq(len, 16);
    ck_assert_int_eq(out[12], FCGI_UNKNOWN_ROLE);
}
END_TEST

/* libfcgi answers a GET_VALUES it meets among the params itself, trusting its lengths: one
 * there is refused, whether it comes right after BEGIN or between two PARAMS records, and
 * whatever names it asks for, before the params end. */
START_TEST(test_get_values_inside_params_refused)
{
    unsigned char s[256];
    unsigned char names[] = {14, 0, 'F', 'C', 'G', 'I', '_', 'M', 'A', 'X', '_', 'C', 'O', 'N',
                             'N', 'S'};
    unsigned char nv[] = {4, 3, 'H', 'O', 'S', 'T', 'a', 'b', 'c'};
    for (int where = 0; where < 2; where++) {
        size_t n = begin(s, 1, 1, 1);
        if (where == 1)
            n += rec(s + n, FCGI_T_PARAMS, 1, nv, sizeof(nv));
        n += rec(s + n, FCGI_T_GET_VALUES, 0, names, sizeof(names));
        size_t gv_end = n;
        n += rec(s + n, FCGI_T_PARAMS, 1, nv, sizeof(nv));
        n += rec(s + n, FCGI_T_PARAMS, 1, NULL, 0);
        fp_result r;
        ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_MALFORMED);
        ck_assert_ptr_nonnull(r.why);
        ck_assert_msg(strstr(r.why, "GET_VALUES"), "%s", r.why);
        /* refused as soon as the record is here, not only once the params end */
        ck_assert_int_eq(fcgi_precheck(s, gv_end, 1 << 20, false, &r), FP_MALFORMED);
    }
}
END_TEST

START_TEST(test_stale_records_skipped_and_foreign_records_passed_over)
{
    unsigned char s[512];
    fp_result r;
    /* A late ABORT of a finished request, then the next request: skip, then ready. */
    size_t n = rec(s, FCGI_T_ABORT, 1, NULL, 0);
    size_t first = n;
    n += begin(s + n, 1, 1, 1);
    n += rec(s + n, FCGI_T_PARAMS, 1, NULL, 0);
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_SKIP);
    ck_assert_uint_eq(r.consume, first);
    ck_assert_int_eq(fcgi_precheck(s + first, n - first, 1 << 20, false, &r), FP_READY);
    /* Huge lengths after an interleaved BEGIN of another id are still caught. */
    n = begin(s, 1, 1, 1);
    n += begin(s + n, 2, 1, 0);
    unsigned char nv[] = {0xFF, 0xFF, 0xFF, 0xF0, 0x80, 0x00, 0x00, 0x0E};
    n += rec(s + n, FCGI_T_PARAMS, 1, nv, sizeof(nv));
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_TOO_BIG);
}
END_TEST

START_TEST(test_garbage_refused)
{
    unsigned char s[64] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    fp_result r;
    ck_assert_int_eq(fcgi_precheck(s, 27, 1 << 20, false, &r), FP_MALFORMED);
    size_t n = rec(s, 77, 1, "x", 1);
    ck_assert_int_eq(fcgi_precheck(s, n, 1 << 20, false, &r), FP_MALFORMED);
    unsigned char bad_begin[16];
    n = rec(bad_begin, FCGI_T_BEGIN, 1, "abc", 3);
    ck_assert_int_eq(fcgi_precheck(bad_begin, n, 1 << 20, false, &r), FP_MALFORMED);
}
END_TEST

START_TEST(test_simple_response)
{
    unsigned char out[256];
    const char *t = "Status: 504 Gateway Timeout\r\n\r\n";
    size_t n = fcgi_simple_response(out, sizeof(out), 3, t, strlen(t));
    ck_assert_uint_eq(n, 8 + strlen(t) + 8 + 16);
    ck_assert_int_eq(out[1], FCGI_T_STDOUT);
    ck_assert_int_eq(out[3], 3);
    ck_assert_int_eq(out[n - 16 + 1], FCGI_T_END);
    ck_assert_uint_eq(fcgi_simple_response(out, 10, 3, t, strlen(t)), 0);
}
END_TEST

Suite *proto_suite(void);
Suite *proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("fcgi");
    tcase_add_test(tc, test_normal_request_ready);
    tcase_add_test(tc, test_params_env);
    tcase_add_test(tc, test_huge_declared_lengths_refused);
    tcase_add_test(tc, test_pairs_whole_or_split_agree);
    tcase_add_test(tc, test_get_values_inside_params_refused);
    tcase_add_test(tc, test_management_and_roles);
    tcase_add_test(tc, test_stale_records_skipped_and_foreign_records_passed_over);
    tcase_add_test(tc, test_garbage_refused);
    tcase_add_test(tc, test_simple_response);
    suite_add_tcase(s, tc);
    return s;
}
