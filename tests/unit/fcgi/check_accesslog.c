/* check_accesslog.c — the access log buffer: whole lines only, written when full, when the
 * oldest waited flush_ms, on flush and close; a pipe gets at most PIPE_BUF per write. */
#include "core/first.h"
#include "fcgi/accesslog.h"
#include "core/rc.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Suite *accesslog_suite(void);

static char dir[64];
static char path[128];

static void setup(void)
{
    strcpy(dir, "/tmp/check_alog.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/access.log", dir);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

/* What the file holds now (NUL-terminated, static). */
static const char *file_now(void)
{
    static char got[16384];
    got[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return got;
    size_t n = fread(got, 1, sizeof(got) - 1, f);
    got[n] = '\0';
    fclose(f);
    return got;
}

static void add(alog *a, const char *line, int64_t now) { alog_line(a, line, strlen(line), now); }

/* A line of len bytes: len - 1 times c, then a newline. */
static void fill_line(char *line, size_t len, char c)
{
    memset(line, c, len - 1);
    line[len - 1] = '\n';
    line[len] = '\0';
}

/* Add a line at `now`; the file must then hold exactly `want`. */
static void step(alog *a, const char *line, int64_t now, const char *want)
{
    add(a, line, now);
    ck_assert_str_eq(file_now(), want);
}

START_TEST(unbuffered_writes_each_line)
{
    alog *a;
    ck_assert_int_eq(alog_open(path, 0, 1000, 0, &a), TN_OK);
    step(a, "{\"n\":1}\n", 0, "{\"n\":1}\n");
    step(a, "{\"n\":2}\n", 0, "{\"n\":1}\n{\"n\":2}\n");
    ck_assert_uint_eq(alog_pending(a), 0);
    alog_close(a);
}
END_TEST

START_TEST(buffered_until_flush_or_close)
{
    alog *a;
    ck_assert_int_eq(alog_open(path, 4096, 1000, 0, &a), TN_OK);
    add(a, "a\n", 10);
    step(a, "b\n", 20, "");
    ck_assert_uint_eq(alog_pending(a), 4);
    alog_flush(a);
    ck_assert_str_eq(file_now(), "a\nb\n");
    step(a, "c\n", 30, "a\nb\n");
    alog_close(a);   /* closing writes what is left */
    ck_assert_str_eq(file_now(), "a\nb\nc\n");
}
END_TEST

/* A full buffer is written before the line that does not fit: never part of a line. */
START_TEST(full_buffer_writes_whole_lines)
{
    alog *a;
    ck_assert_int_eq(alog_open(path, 10, 1000, 0, &a), TN_OK);
    add(a, "1234\n", 0);
    step(a, "5678\n", 0, "");   /* exactly full: stays */
    step(a, "9ab\n", 0, "1234\n5678\n");   /* does not fit: the first two go, this one waits */
    /* longer than the buffer: written at once, after "9ab" */
    step(a, "a line longer than the buffer\n", 0,
         "1234\n5678\n9ab\na line longer than the buffer\n");
    ck_assert_uint_eq(alog_pending(a), 0);
    alog_close(a);
}
END_TEST

/* A busy worker never waits: the oldest line bounds how long lines gather. */
START_TEST(flush_interval_bounds_the_wait)
{
    alog *a;
    ck_assert_int_eq(alog_open(path, 4096, 1000, 0, &a), TN_OK);
    add(a, "t0\n", 5000);
    step(a, "t999\n", 5999, "");
    step(a, "t1000\n", 6000, "t0\nt999\nt1000\n");
    /* the clock starts again with the next line */
    step(a, "t1500\n", 6500, "t0\nt999\nt1000\n");
    step(a, "t2500\n", 7500, "t0\nt999\nt1000\nt1500\nt2500\n");
    alog_close(a);
}
END_TEST

/* A pipe takes writes up to PIPE_BUF atomically, larger ones may interleave with another
 * worker's: the buffer is cut to PIPE_BUF there whatever was asked. */
START_TEST(pipe_buffer_capped_at_pipe_buf)
{
    char fifo[160];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rd, 0);
    alog *a;
    ck_assert_int_eq(alog_open(fifo, 65536, 1000, 0, &a), TN_OK);
    char line[1001];
    fill_line(line, 1000, 'x');
    for (int i = 0; i < PIPE_BUF / 1000; i++)
        add(a, line, 0);
    char got[65536];
    ck_assert_int_eq(read(rd, got, sizeof(got)), -1);   /* nothing yet */
    add(a, line, 0);   /* over PIPE_BUF: what was gathered goes, in one write */
    ck_assert_int_eq(read(rd, got, sizeof(got)), (PIPE_BUF / 1000) * 1000);
    alog_close(a);
    ck_assert_int_eq(read(rd, got, sizeof(got)), 1000);
    close(rd);
    unlink(fifo);
}
END_TEST

/* A file's writeback is started after every `writeback` bytes (the call succeeded: counted),
 * never on a pipe, and the lines are all there. */
START_TEST(writeback_started_every_threshold)
{
    alog *a;
    ck_assert_int_eq(alog_open(path, 0, 1000, 100, &a), TN_OK);
    char line[51];
    fill_line(line, 50, 'w');
    for (int i = 0; i < 10; i++)
        add(a, line, 0);
    ck_assert_uint_eq(alog_writebacks(a), 5);
    alog_close(a);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 500);

    ck_assert_int_eq(alog_open(path, 0, 1000, 0, &a), TN_OK);   /* 0: never */
    for (int i = 0; i < 10; i++)
        add(a, line, 0);
    ck_assert_uint_eq(alog_writebacks(a), 0);
    alog_close(a);

    char fifo[160];
    snprintf(fifo, sizeof(fifo), "%s/fifo-wb", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rd, 0);
    ck_assert_int_eq(alog_open(fifo, 0, 1000, 100, &a), TN_OK);
    for (int i = 0; i < 4; i++)
        add(a, line, 0);
    ck_assert_uint_eq(alog_writebacks(a), 0);
    alog_close(a);
    close(rd);
    unlink(fifo);
}
END_TEST

START_TEST(open_failure_says_why)
{
    alog *a = (alog *)1;
    char bad[200];
    snprintf(bad, sizeof(bad), "%s/no/such/dir/access.log", dir);
    errno = 0;
    ck_assert_int_eq(alog_open(bad, 4096, 1000, 0, &a), TN_ERR);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_ptr_null(a);
    alog_close(NULL);   /* fine */
    alog_flush(NULL);
}
END_TEST

Suite *accesslog_suite(void)
{
    Suite *s = suite_create("accesslog");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, unbuffered_writes_each_line);
    tcase_add_test(tc, buffered_until_flush_or_close);
    tcase_add_test(tc, full_buffer_writes_whole_lines);
    tcase_add_test(tc, flush_interval_bounds_the_wait);
    tcase_add_test(tc, pipe_buffer_capped_at_pipe_buf);
    tcase_add_test(tc, writeback_started_every_threshold);
    tcase_add_test(tc, open_failure_says_why);
    suite_add_tcase(s, tc);
    return s;
}
