/*
 * sched.c — the calling thread's fair-scheduler slice (see sched.h).
 *
 * glibc has no wrapper for sched_getattr/sched_setattr: the system calls are made directly,
 * with the kernel's structure declared here (linux/sched/types.h clashes with <sched.h>).
 * The first version of the structure (48 bytes) is all that is needed; the kernel accepts it
 * and reports E2BIG only when asked to fill a smaller one than it has fields for, which
 * getattr's size argument rules out.
 *
 * Owns: the two system calls and what a slice request keeps. Must not: log, or touch a
 * thread that is not under SCHED_OTHER or SCHED_BATCH.
 */
#include "core/first.h"
#include "core/rc.h"
#include "core/sched.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct kattr {   /* struct sched_attr, version 0 */
    uint32_t size;
    uint32_t policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime;   /* ns; for a fair task, its slice (6.12 and later) */
    uint64_t deadline;
    uint64_t period;
};

#define POLICY_OTHER 0
#define POLICY_BATCH 3
#define FLAG_RESET_ON_FORK 0x01u   /* the only flag a fair task's request carries over */

static int get_attr(struct kattr *a)
{
    memset(a, 0, sizeof(*a));
#ifdef SYS_sched_getattr
    return (int)syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof(*a), 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int64_t sched_slice_get(void)
{
    struct kattr a;
    if (get_attr(&a) != 0)
        return -1;
    return (int64_t)(a.runtime / 1000);
}

int sched_slice_set(int64_t us, char *err, size_t errlen)
{
    struct kattr a;
    if (us < 0)
        return tn_errf(err, errlen, TN_INVALID, "a time slice of %lld us", (long long)us);
    if (get_attr(&a) != 0)
        return tn_errf(err, errlen, TN_DECLINED, "sched_getattr: %s", strerror(errno));
    if (a.policy != POLICY_OTHER && a.policy != POLICY_BATCH)
        return tn_errf(err, errlen, TN_DECLINED, "not under the fair scheduler (policy %u)",
                       a.policy);
    int64_t want = us == 0 ? 0 : us < SCHED_SLICE_MIN_US ? SCHED_SLICE_MIN_US
                               : us > SCHED_SLICE_MAX_US ? SCHED_SLICE_MAX_US : us;
    a.size = sizeof(a);
    a.flags &= FLAG_RESET_ON_FORK;
    a.runtime = (uint64_t)want * 1000;
    a.deadline = a.period = 0;
#ifdef SYS_sched_setattr
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
        return tn_errf(err, errlen, TN_ERR, "sched_setattr: %s", strerror(errno));
#else
    return tn_errf(err, errlen, TN_DECLINED, "no sched_setattr on this system");
#endif
    if (want == 0)
        return TN_OK;   /* the kernel's default: whatever it reports now is right */
    struct kattr now;
    if (get_attr(&now) != 0 || now.runtime != (uint64_t)want * 1000) {
        /* A kernel without per-task slices took the request and ignored it. */
        return tn_errf(err, errlen, TN_DECLINED,
                       "the kernel keeps its own time slice (a slice per process needs Linux "
                       "6.12 or later)");
    }
    return TN_OK;
}
