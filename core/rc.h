/*
 * rc.h — the project's return-code vocabulary.
 *
 * The codes are defined once, in the public app header (include/tenancy.h), because apps
 * receive and return them too; every module includes this file rather than the app header
 * so that the dependency reads as "core vocabulary". Owns nothing else but the one helper
 * that carries a code and its message out of a function together.
 */
#ifndef TN_CORE_RC_H
#define TN_CORE_RC_H

#include <stdarg.h>
#include <stddef.h>

#include "tenancy.h"

/* Write a message into a caller's error buffer (when err is non-NULL and errlen > 0) and
 * return rc: `return tn_errf(err, errlen, TN_IO, "cannot open %s", path);`. The only way an
 * error buffer is filled (tests/integration/errbuf.sh checks it), so every message is cut
 * the same way and the code that goes with it travels in the same statement. */
int tn_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* tn_errf for a module's own printf-style setter of a buffer it keeps (a connection's last
 * error, db_set_error): the same fill, from a va_list. */
int tn_verrf(char *err, size_t errlen, int rc, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
