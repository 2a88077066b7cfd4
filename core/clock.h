/*
 * clock.h — monotonic and wall clocks in integer units, inline (hot path).
 */
#ifndef TN_CORE_CLOCK_H
#define TN_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t clock_mono_ms(void) { return clock_mono_ns() / 1000000; }

static inline int64_t clock_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
