/*
 * first.h — the first include of every .c file in the project.
 *
 * Owns: the build configuration (config.h) and the feature macros every file relies on, so
 * that no file sees a different libc than another. Must not declare anything of its own.
 */
#ifndef TN_FIRST_H
#define TN_FIRST_H

#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TN_UNUSED __attribute__((unused))
#define TN_MUSTCHECK __attribute__((warn_unused_result))
#define TN_NORETURN __attribute__((noreturn))
#define TN_LIKELY(x) __builtin_expect(!!(x), 1)
#define TN_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* The request path's functions: GCC gathers TN_HOT ones in .text.hot, so a request's code
 * sits on a few pages (one TLB entry and few cache lines each, while other processes push
 * it out of the caches between requests); TN_COLD ones (errors, logging) go to
 * .text.unlikely, and the branches that call them leave the hot functions' bodies. */
#define TN_HOT __attribute__((hot))
#define TN_COLD __attribute__((cold))
#else
#define TN_HOT
#define TN_COLD
#define TN_UNUSED
#define TN_MUSTCHECK
#define TN_NORETURN
#define TN_LIKELY(x) (x)
#define TN_UNLIKELY(x) (x)
#endif

#define TN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
