/* core/sched: the thread's fair-scheduler slice, read back from the kernel's own report in
 * /proc (an account the module does not write), its clamping, the way back to the default,
 * and what a request keeps: the nice value, and a policy other than the fair one untouched. */
#include "core/first.h"
#include "core/rc.h"
#include "core/sched.h"
#include "tests/unit/check_common.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

/* se.slice of the calling thread in /proc, in ns; -1 when the kernel does not show it. */
static long long proc_slice_ns(void)
{
    FILE *f = fopen("/proc/thread-self/sched", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long long v = -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "se.slice", 8) == 0) {
            const char *colon = strchr(line, ':');
            if (colon != NULL)
                v = strtoll(colon + 1, NULL, 10);
        }
    fclose(f);
    return v;
}

/* Linux 6.12 or later: a fair task's own slice is part of the kernel's interface. */
static bool kernel_has_slices(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
        return false;
    return major > 6 || (major == 6 && minor >= 12);
}

START_TEST(test_slice_set)
{
    char err[256] = "";
    int64_t dflt = sched_slice_get();
    int rc = sched_slice_set(200, err, sizeof(err));
    if (!kernel_has_slices()) {
        /* An older kernel takes the request and ignores it: said, and nothing moved. */
        ck_assert_int_eq(rc, TN_DECLINED);
        ck_assert_msg(strstr(err, "6.12") != NULL, "%s", err);
        ck_assert_int_eq(sched_slice_get(), dflt);
        return;
    }
    ck_assert_msg(rc == TN_OK, "%s", err);
    ck_assert_int_eq(sched_slice_get(), 200);
    ck_assert_int_eq(proc_slice_ns(), 200000);

    /* outside the kernel's range: asked for at its bound */
    ck_assert_int_eq(sched_slice_set(30, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(proc_slice_ns(), SCHED_SLICE_MIN_US * 1000LL);
    ck_assert_int_eq(sched_slice_set(5000000, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(proc_slice_ns(), SCHED_SLICE_MAX_US * 1000LL);

    /* 0: the kernel's own default again */
    ck_assert_int_eq(sched_slice_set(0, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(sched_slice_get(), dflt);
    ck_assert_int_eq(proc_slice_ns(), dflt * 1000);

    ck_assert_int_eq(sched_slice_set(-1, err, sizeof(err)), TN_INVALID);
}
END_TEST

START_TEST(test_slice_keeps_nice)
{
    char err[256] = "";
    int base = getpriority(PRIO_PROCESS, 0);
    int nicer = base < 17 ? base + 3 : 19;
    ck_assert_int_eq(setpriority(PRIO_PROCESS, 0, nicer), 0);   /* lowering is always allowed */
    int rc = sched_slice_set(300, err, sizeof(err));
    ck_assert_msg(rc == TN_OK || (rc == TN_DECLINED && !kernel_has_slices()), "%s", err);
    ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), nicer);
    ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);
}
END_TEST

/* A thread the administrator put under SCHED_IDLE stays there: in a child, since going back
 * may need a privilege the test lacks. The child reports by its exit status alone (see
 * check_common.h): 0 left alone, 1 wrong answer, 2 policy changed, 3 set-up failed. */
START_TEST(test_slice_other_policy)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct sched_param p = {0};
        if (sched_setscheduler(0, SCHED_IDLE, &p) != 0)
            _exit(3);
        char err[256];
        int rc = sched_slice_set(200, err, sizeof(err));
        if (sched_getscheduler(0) != SCHED_IDLE)
            _exit(2);
        _exit(rc == TN_DECLINED && strstr(err, "policy") != NULL ? 0 : 1);
    }
    ck_assert_int_gt(pid, 0);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

Suite *sched_suite(void);
Suite *sched_suite(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("sched");
    tcase_add_test(tc, test_slice_set);
    tcase_add_test(tc, test_slice_keeps_nice);
    tcase_add_test(tc, test_slice_other_policy);
    suite_add_tcase(s, tc);
    return s;
}
