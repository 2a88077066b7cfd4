/*
 * rc.c — filling an error buffer (tn_errf, the only place a message is formatted into one)
 * and the names of the return codes, for logs and error messages.
 */
#include "core/first.h"
#include "core/rc.h"

#include <stdarg.h>
#include <stdio.h>

int tn_verrf(char *err, size_t errlen, int rc, const char *fmt, va_list ap)
{
    if (err != NULL && errlen > 0)
        vsnprintf(err, errlen, fmt, ap);
    return rc;
}

int tn_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rc = tn_verrf(err, errlen, rc, fmt, ap);
    va_end(ap);
    return rc;
}

const char *tn_rc_str(int rc)
{
    switch (rc) {
    case TN_OK: return "ok";
    case TN_ERR: return "error";
    case TN_AGAIN: return "try again";
    case TN_DECLINED: return "declined";
    case TN_BUSY: return "busy";
    case TN_NOTFOUND: return "not found";
    case TN_INVALID: return "invalid";
    case TN_TOOBIG: return "too big";
    case TN_TIMEOUT: return "timed out";
    case TN_DENIED: return "denied";
    case TN_EXISTS: return "exists";
    case TN_NOMEM: return "out of memory";
    case TN_IO: return "i/o error";
    case TN_DONE: return "done";
    default: return "unknown";
    }
}
