/*
 * sched.h — the CPU time slice a process asks the kernel's fair scheduler for.
 *
 * Linux's fair scheduler (EEVDF, from 6.6) runs a task for a slice before it looks at the
 * others; since 6.12 a task may ask for its own slice (sched_setattr's sched_runtime, 100 us
 * to 100 ms). A shorter slice gets a task picked sooner when it wakes or is preempted, and
 * runs it for less at a time. A FastCGI worker whose requests take microseconds, sharing
 * the cores with the web server that feeds it, is the task that interface is for.
 *
 * Owns: reading and setting the calling thread's slice, keeping its policy, nice value and
 * flags. Must not: change the policy (a real-time, idle or deadline thread is left alone),
 * or log (callers decide whether a kernel without the interface is worth a line).
 */
#ifndef TN_CORE_SCHED_H
#define TN_CORE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define SCHED_SLICE_MIN_US 100      /* the kernel raises a smaller request to this */
#define SCHED_SLICE_MAX_US 100000   /* and lowers a larger one to this */

/* The calling thread's slice in microseconds, as the kernel reports it (its default when none
 * was asked for); -1 when the kernel does not say (before Linux 3.14, or seccomp). */
int64_t sched_slice_get(void);

/* Ask for a slice of `us` microseconds for the calling thread (0: back to the kernel's
 * default). TN_OK when the kernel took it (read back: the kernel clamps to
 * [SCHED_SLICE_MIN_US, SCHED_SLICE_MAX_US]); TN_DECLINED, nothing changed, when the thread
 * does not run under the fair scheduler's normal or batch policy, or when the kernel has no
 * per-task slice (before 6.12 it accepts the request and ignores it); TN_ERR when the kernel
 * refused (err says why). */
int sched_slice_set(int64_t us, char *err, size_t errlen);

#endif
