/*
 * netaddr.h — IP address lists ("127.0.0.1, 10.0.0.0/8, ::1, fd00::/8") and matching.
 *
 * Used for the FastCGI peer allow-list (`allowed_clients`) and for who may read the status
 * endpoints. IPv4-mapped IPv6 peers (::ffff:a.b.c.d) match IPv4 entries.
 */
#ifndef TN_CORE_NETADDR_H
#define TN_CORE_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "core/arena.h"

typedef struct netaddr_list netaddr_list;

/* Parse a comma/space separated list; "" or "any" gives a list that matches everything.
 * Returns TN_OK or TN_INVALID with the offending entry in err. */
int netaddr_list_parse(const char *text, arena *a, netaddr_list **out, char *err, size_t errlen);

bool netaddr_list_any(const netaddr_list *l);
bool netaddr_match_sockaddr(const netaddr_list *l, const struct sockaddr *sa, socklen_t len);
/* Match a textual address (REMOTE_ADDR). Unparseable text never matches. */
bool netaddr_match_text(const netaddr_list *l, const char *addr);

#endif
