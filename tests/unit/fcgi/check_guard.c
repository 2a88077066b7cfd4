/* check_guard.c — the read guard under libfcgi: a request's records pass unchanged, whatever
 * the read sizes; a record of request id 0 inside it stops the stream there. */
#include "core/first.h"
#include "fcgi/guard.h"

#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int OS_Read(int fd, char *buf, size_t len);
Suite *guard_suite(void);

/* Append one record (type, request id, content) to out at *n. */
static void rec(unsigned char *out, size_t *n, int type, int id, const char *content, size_t len)
{
    unsigned char h[8] = {1, (unsigned char)type, (unsigned char)(id >> 8), (unsigned char)id,
                          (unsigned char)(len >> 8), (unsigned char)len, (unsigned char)(len % 8 ? 8 - len % 8 : 0), 0};
    memcpy(out + *n, h, 8);
    memcpy(out + *n + 8, content, len);
    memset(out + *n + 8 + len, 0, h[6]);
    *n += 8 + len + h[6];
}

/* A request stream (with a GET_VALUES record inside its STDIN when asked); its length. */
static size_t request(unsigned char *out, bool mgmt_in_stdin)
{
    size_t n = 0;
    rec(out, &n, 1, 1, "\0\1\1\0\0\0\0\0", 8);
    rec(out, &n, 4, 1, "\16\3REQUEST_METHODGET", 19);
    rec(out, &n, 4, 1, "", 0);
    rec(out, &n, 5, 1, "hello body", 10);
    if (mgmt_in_stdin)
        rec(out, &n, 9, 0, "\377\377\377\360\200\0\0\16", 8);
    rec(out, &n, 5, 1, "", 0);
    return n;
}

/* Read all of what fd holds through the guard, `step` bytes at a time; the bytes read go to
 * got, and *err to the errno of a refusal (0: none). */
static size_t drain(int fd, size_t step, unsigned char *got, size_t cap, int *err)
{
    size_t n = 0;
    *err = 0;
    while (n < cap) {
        int r = OS_Read(fd, (char *)got + n, step < cap - n ? step : cap - n);
        if (r < 0) {
            *err = errno;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    return n;
}

/* A socket whose peer wrote a request (with the management record when asked) and closed:
 * its read end; the bytes written in in[], their count in *len. */
static int written_request(bool bad, unsigned char *in, size_t *len)
{
    *len = request(in, bad);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(write(sv[0], in, *len), (ssize_t)*len);
    close(sv[0]);
    return sv[1];
}

START_TEST(test_guard_passes_and_refuses)
{
    static const size_t steps[] = {1, 3, 7, 8, 9, 64, 4096};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        for (int bad = 0; bad <= 1; bad++) {
            unsigned char in[512], got[512];
            size_t len;
            int fd = written_request(bad, in, &len);
            guard_begin(fd);
            int err;
            size_t n = drain(fd, steps[k], got, sizeof(got), &err);
            bool refused = guard_end();
            close(fd);
            if (!bad) {
                /* everything, unchanged, and no refusal */
                ck_assert_uint_eq(n, len);
                ck_assert_int_eq(memcmp(got, in, len), 0);
                ck_assert_int_eq(err, 0);
                ck_assert(!refused);
            } else {
                /* the bytes before the management record's header, never its header whole */
                size_t before = len - 16 - 8;   /* its 16 bytes and the empty STDIN after */
                ck_assert_msg(n >= before && n <= before + 7,
                              "step %zu: passed %zu of %zu bytes before the record", steps[k], n,
                              before);
                ck_assert_int_eq(memcmp(got, in, n < before ? n : before), 0);
                ck_assert_int_eq(err, EPROTO);
                ck_assert(refused);
            }
        }
    }
}
END_TEST

/* Only request id 0 is a management record: a request whose id has a zero low byte (256,
 * as a web server that multiplexes may number it) passes whole, whatever the read sizes. */
START_TEST(test_guard_high_request_ids_pass)
{
    static const size_t steps[] = {1, 3, 8, 4096};
    static const int ids[] = {256, 512, 65280};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
            unsigned char in[512], got[512];
            size_t len = 0;
            rec(in, &len, 1, ids[i], "\0\1\1\0\0\0\0\0", 8);
            rec(in, &len, 4, ids[i], "\16\3REQUEST_METHODGET", 19);
            rec(in, &len, 4, ids[i], "", 0);
            rec(in, &len, 5, ids[i], "hello body", 10);
            rec(in, &len, 5, ids[i], "", 0);
            int sv[2];
            ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
            ck_assert_int_eq(write(sv[0], in, len), (ssize_t)len);
            close(sv[0]);
            guard_begin(sv[1]);
            int err;
            size_t n = drain(sv[1], steps[k], got, sizeof(got), &err);
            bool refused = guard_end();
            close(sv[1]);
            ck_assert_msg(!refused && err == 0, "id %d, step %zu: refused", ids[i], steps[k]);
            ck_assert_uint_eq(n, len);
            ck_assert_int_eq(memcmp(got, in, len), 0);
        }
    }
}
END_TEST

START_TEST(test_guard_other_fds_untouched)
{
    unsigned char in[512], got[512];
    size_t len;
    int fd = written_request(true, in, &len);
    guard_begin(fd + 100);   /* another descriptor is guarded */
    int err;
    ck_assert_uint_eq(drain(fd, 5, got, sizeof(got), &err), len);
    ck_assert(!guard_end());
    guard_begin(fd);         /* and after guard_end nothing is */
    ck_assert(!guard_end());
    close(fd);
}
END_TEST

Suite *guard_suite(void)
{
    Suite *s = suite_create("guard");
    TCase *tc = tcase_create("guard");
    tcase_add_test(tc, test_guard_passes_and_refuses);
    tcase_add_test(tc, test_guard_high_request_ids_pass);
    tcase_add_test(tc, test_guard_other_fds_untouched);
    suite_add_tcase(s, tc);
    return s;
}
