/*
 * netaddr.c — address lists with prefixes (see netaddr.h).
 */
#include "core/first.h"
#include "core/netaddr.h"
#include "core/rc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    int family;                 /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int prefix;
};

struct netaddr_list {
    bool any;
    size_t n;
    struct entry e[];
};

static int parse_one(const char *tok, struct entry *e)
{
    char host[64];
    const char *slash = strchr(tok, '/');
    size_t hl = slash ? (size_t)(slash - tok) : strlen(tok);
    if (hl == 0 || hl >= sizeof(host))
        return TN_INVALID;
    memcpy(host, tok, hl);
    host[hl] = '\0';
    int max;
    if (inet_pton(AF_INET, host, e->addr) == 1) {
        e->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, host, e->addr) == 1) {
        e->family = AF_INET6;
        max = 128;
    } else {
        return TN_INVALID;
    }
    e->prefix = max;
    if (slash != NULL) {
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (*end != '\0' || end == slash + 1 || p < 0 || p > max)
            return TN_INVALID;
        e->prefix = (int)p;
    }
    return TN_OK;
}

int netaddr_list_parse(const char *text, arena *a, netaddr_list **out, char *err, size_t errlen)
{
    size_t count = 1;
    for (const char *p = text; *p; p++)
        if (*p == ',' || *p == ' ')
            count++;
    netaddr_list *l = arena_calloc(a, sizeof(*l) + count * sizeof(struct entry));
    char *copy = arena_strdup(a, text);
    if (l == NULL || copy == NULL) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    char *save = NULL;
    for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        if (strcmp(tok, "any") == 0) {
            l->any = true;
            continue;
        }
        if (parse_one(tok, &l->e[l->n]) != TN_OK) {
            return tn_errf(err, errlen, TN_INVALID, "'%s' is not an IP address or prefix", tok);
        }
        l->n++;
    }
    if (l->n == 0)
        l->any = true;
    *out = l;
    return TN_OK;
}

bool netaddr_list_any(const netaddr_list *l) { return l == NULL || l->any; }

static bool prefix_eq(const unsigned char *a, const unsigned char *b, int bits)
{
    int bytes = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)bytes) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xFF << (8 - rest));
    return (a[bytes] & mask) == (b[bytes] & mask);
}

static bool match_raw(const netaddr_list *l, int family, const unsigned char *addr)
{
    if (netaddr_list_any(l))
        return true;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    unsigned char v4[4];
    bool has_v4 = false;
    if (family == AF_INET) {
        memcpy(v4, addr, 4);
        has_v4 = true;
    } else if (memcmp(addr, mapped, 12) == 0) {
        memcpy(v4, addr + 12, 4);
        has_v4 = true;
    }
    for (size_t i = 0; i < l->n; i++) {
        const struct entry *e = &l->e[i];
        if (e->family == AF_INET && has_v4 && prefix_eq(e->addr, v4, e->prefix))
            return true;
        if (e->family == AF_INET6 && family == AF_INET6 && prefix_eq(e->addr, addr, e->prefix))
            return true;
    }
    return false;
}

bool netaddr_match_sockaddr(const netaddr_list *l, const struct sockaddr *sa, socklen_t len)
{
    if (netaddr_list_any(l))
        return true;
    if (sa->sa_family == AF_UNIX)
        return true;   /* unix sockets are guarded by file permissions, not addresses */
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
        return match_raw(l, AF_INET, (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6))
        return match_raw(l, AF_INET6,
                         (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

bool netaddr_match_text(const netaddr_list *l, const char *addr)
{
    if (netaddr_list_any(l))
        return true;
    if (addr == NULL)
        return false;
    unsigned char raw[16];
    if (inet_pton(AF_INET, addr, raw) == 1)
        return match_raw(l, AF_INET, raw);
    if (inet_pton(AF_INET6, addr, raw) == 1)
        return match_raw(l, AF_INET6, raw);
    return false;
}
