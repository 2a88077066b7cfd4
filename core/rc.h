/*
 * rc.h — the project's return-code vocabulary.
 *
 * Core owns the codes: every module speaks them, and core calls nothing of ours, so they are
 * declared here and not taken from the public app header. Apps receive and return the same
 * codes, so include/tenancy.h declares them too, value for value; fcgi/app.c (where an app's
 * code enters the host) holds the two equal with a compile-time assert over TN_RC_LIST.
 * Both headers declare the enum under the one guard TN_RC_DECLARED, so a file may include
 * them in either order and gets one declaration. Owns nothing else but the helpers that
 * name a code and carry a code and its message out of a function together.
 */
#ifndef TN_CORE_RC_H
#define TN_CORE_RC_H

#include <stdarg.h>
#include <stddef.h>

/* Every code once: X(name, value, short lower-case text). Add a code here and in
 * include/tenancy.h (then bump TN_ABI_VERSION); the assert in fcgi/app.c fails until both
 * agree. */
#define TN_RC_LIST(X)                                                                        \
    X(TN_OK, 0, "ok")                       /* done */                                       \
    X(TN_ERR, -1, "error")                  /* failed; errno or the log says why */          \
    X(TN_AGAIN, -2, "try again")            /* not now; retry later */                       \
    X(TN_DECLINED, -3, "declined")          /* not mine: the next stage decides */           \
    X(TN_BUSY, -4, "busy")                  /* a limit is reached */                         \
    X(TN_NOTFOUND, -5, "not found")         /* no such thing */                              \
    X(TN_INVALID, -6, "invalid")            /* bad input; nothing was changed */             \
    X(TN_TOOBIG, -7, "too big")             /* input over a configured size limit */         \
    X(TN_TIMEOUT, -8, "timed out")          /* a deadline passed */                          \
    X(TN_DENIED, -9, "denied")              /* not allowed */                                \
    X(TN_EXISTS, -10, "exists")             /* already there */                              \
    X(TN_NOMEM, -11, "out of memory")       /* out of memory */                              \
    X(TN_IO, -12, "i/o error")              /* the peer or a file failed */                  \
    X(TN_DONE, 1, "done")                   /* a stage answered the request itself */

#ifndef TN_RC_DECLARED
#define TN_RC_DECLARED
#define TN_RC_ENUMERATOR(name, value, text) name = value,
typedef enum tn_rc { TN_RC_LIST(TN_RC_ENUMERATOR) } tn_rc;
#undef TN_RC_ENUMERATOR
#endif

/* A short, static, lower-case name for a return code ("ok", "not found", ...; "unknown"
 * for anything else). Also part of the app API (include/tenancy.h). */
const char *tn_rc_str(int rc);

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
