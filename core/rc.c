/*
 * rc.c — filling an error buffer (tn_errf, the only place a message is formatted into one)
 * and the names of the return codes (from the one list in rc.h), for logs and error messages.
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
#define TN_RC_CASE(name, value, text) case name: return text;
    TN_RC_LIST(TN_RC_CASE)
#undef TN_RC_CASE
    default: return "unknown";
    }
}
