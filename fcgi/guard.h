/*
 * guard.h — the read guard under libfcgi: no management record inside a request.
 *
 * libfcgi parses an FCGI_GET_VALUES record it meets in the middle of a request's stream
 * itself, into a 64-byte stack buffer and with lengths it does not bound: a peer that sends
 * one there kills the worker (stack smashing, or a huge allocation). precheck (proto.c)
 * refuses one already in the socket when the request starts; this guard covers what arrives
 * later. tenancyd defines libfcgi's own read function (OS_Read, the one libfcgi calls
 * through its PLT for every read of a request) and exports it, so libfcgi's reads come here:
 * the guard follows the record headers of the request being served and, at the first record
 * of request id 0 after the request began, hands libfcgi no more bytes (a read error), so
 * libfcgi sees a broken stream instead of parsing the record. Between requests (and for any
 * other descriptor) it is a plain read().
 *
 * Must not: change a byte it passes, or block longer than read() would.
 */
#ifndef TN_FCGI_GUARD_H
#define TN_FCGI_GUARD_H

#include <stdbool.h>

/* Guard the reads of the request starting now on fd (its first byte is a record header). */
void guard_begin(int fd);

/* Stop guarding; true when it refused a management record in this request. */
bool guard_end(void);

/* Do libfcgi's reads come through the guard (OS_Read exported and bound to ours)? */
bool guard_active(void);

#endif
