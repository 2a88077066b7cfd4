/*
 * listen.c — listen sockets (see listen.h).
 * Must not: accept connections (workers do), or log (errors are returned to the master).
 */
#include "core/first.h"
#include "fcgi/listen.h"
#include "core/rc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static bool is_listening_socket(int fd)
{
    int v = 0;
    socklen_t len = sizeof(v);
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == 0 && v;
}

static int open_unix(const tn_config *cfg, const char *path, tn_listener *l, char *err,
                     size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return tn_errf(err, errlen, TN_ERR, "listen: unix socket path too long (max %zu): %s",
                       sizeof(sa.sun_path) - 1, path);
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return tn_errf(err, errlen, TN_ERR, "listen: socket: %s", strerror(errno));
    }
    /* Create it with the right mode from the start: no window where it is world-writable. */
    mode_t old = umask((mode_t)(0777 & ~cfg->listen_mode));
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    if (rc < 0 && errno == EADDRINUSE) {
        /* Stale (a dead master left it) or live (another tenancyd)? Ask it. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            umask(old);
            close(fd);
            return tn_errf(err, errlen, TN_ERR, "listen: %s is in use by a running server", path);
        }
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(path);
        rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    }
    umask(old);
    if (rc < 0) {
        rc = tn_errf(err, errlen, TN_ERR, "listen: bind %s: %s", path, strerror(errno));
        close(fd);   /* not unlinked: the path may be another program's */
        return rc;
    }
    if (chmod(path, (mode_t)cfg->listen_mode) < 0) {
        rc = tn_errf(err, errlen, TN_ERR, "listen: chmod %s: %s", path, strerror(errno));
        goto fail;
    }
    if (cfg->listen_owner != NULL || cfg->listen_group != NULL) {
        uid_t uid = (uid_t)-1;
        gid_t gid = (gid_t)-1;
        if (cfg->listen_owner != NULL) {
            struct passwd *pw = getpwnam(cfg->listen_owner);
            if (pw == NULL) {
                rc = tn_errf(err, errlen, TN_ERR, "listen.owner: no such user '%s'",
                             cfg->listen_owner);
                goto fail;
            }
            uid = pw->pw_uid;
        }
        if (cfg->listen_group != NULL) {
            struct group *gr = getgrnam(cfg->listen_group);
            if (gr == NULL) {
                rc = tn_errf(err, errlen, TN_ERR, "listen.group: no such group '%s'",
                             cfg->listen_group);
                goto fail;
            }
            gid = gr->gr_gid;
        }
        if (chown(path, uid, gid) < 0) {
            rc = tn_errf(err, errlen, TN_ERR, "listen: chown %s: %s", path, strerror(errno));
            goto fail;
        }
    }
    if (listen(fd, cfg->listen_backlog < 0 ? SOMAXCONN * 64 : cfg->listen_backlog) < 0) {
        rc = tn_errf(err, errlen, TN_ERR, "listen: listen %s: %s", path, strerror(errno));
        goto fail;
    }
    l->fd = fd;
    l->is_unix = true;
    l->owned_path = true;
    snprintf(l->path, sizeof(l->path), "%s", path);
    return TN_OK;
fail:
    close(fd);
    unlink(path);
    return rc;
}

static int open_inet(const tn_config *cfg, const char *spec, tn_listener *l, char *err,
                     size_t errlen)
{
    char host[256];
    const char *port = config_listen_port(spec);
    if (port == NULL) {
        return tn_errf(err, errlen, TN_ERR, "listen: expected [address]:port, got '%s'", spec);
    }
    if (spec[0] == '[')   /* "[" address "]:" port */
        snprintf(host, sizeof(host), "%.*s", (int)(port - spec - 3), spec + 1);
    else if (port == spec)
        snprintf(host, sizeof(host), "%s", "127.0.0.1");
    else
        snprintf(host, sizeof(host), "%.*s", (int)(port - spec - 1), spec);
    char *end;
    long p = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || p < 1 || p > 65535) {
        return tn_errf(err, errlen, TN_ERR, "listen: invalid port in '%s'", spec);
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai != 0) {
        return tn_errf(err, errlen, TN_ERR,
                       "listen: cannot resolve '%s': %s", host, gai_strerror(gai));
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int rc = tn_errf(err, errlen, TN_ERR, "listen: socket: %s", strerror(errno));
        freeaddrinfo(res);
        return rc;
    }
    int rc, one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (res->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0) {
        rc = tn_errf(err, errlen, TN_ERR, "listen: bind %s: %s", spec, strerror(errno));
        goto fail;
    }
    if (listen(fd, cfg->listen_backlog < 0 ? SOMAXCONN * 64 : cfg->listen_backlog) < 0) {
        rc = tn_errf(err, errlen, TN_ERR, "listen: listen %s: %s", spec, strerror(errno));
        goto fail;
    }
    freeaddrinfo(res);
    l->fd = fd;
    l->is_unix = false;
    return TN_OK;
fail:
    freeaddrinfo(res);
    close(fd);
    return rc;
}

static int adopt(int fd, const char *what, tn_listener *l, char *err, size_t errlen)
{
    if (!is_listening_socket(fd)) {
        return tn_errf(err, errlen, TN_ERR,
                       "listen: %s: fd %d is not a listening socket", what, fd);
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_UNIX) {
        l->is_unix = true;
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        snprintf(l->path, sizeof(l->path), "%.*s", (int)sizeof(l->path) - 1, un->sun_path);
    }
    /* Move it off fd 0 so stdin can be /dev/null; keep it out of exec'ed children. */
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0) {
        return tn_errf(err, errlen, TN_ERR, "listen: dup: %s", strerror(errno));
    }
    if (fd == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0 && null != 0) {
            dup2(null, 0);
            close(null);
        }
    } else {
        close(fd);
    }
    l->fd = nfd;
    l->owned_path = false;
    return TN_OK;
}

static int open_spec(const tn_config *cfg, const char *spec, tn_listener *l, char *err,
                     size_t errlen)
{
    if (!config_listen_is_unix(spec))
        return open_inet(cfg, spec, l, err, errlen);
    return open_unix(cfg, strncmp(spec, "unix:", 5) == 0 ? spec + 5 : spec, l, err, errlen);
}

int listen_shard(const tn_listener *l, int index)
{
    return l->nshards > 0 ? index % l->nshards : -1;
}

int listen_open(const tn_config *cfg, tn_listener *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    const char *spec = cfg->listen;
    snprintf(l->spec, sizeof(l->spec), "%s", spec);
    if (strcmp(spec, "inherit") == 0)
        return adopt(0, "inherit", l, err, errlen);
    if (strcmp(spec, "systemd") == 0) {
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        if (pid == NULL || fds == NULL || atol(pid) != (long)getpid() || atoi(fds) < 1) {
            return tn_errf(err, errlen, TN_ERR,
                           "listen = systemd, but no socket was passed (LISTEN_FDS)");
        }
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        return adopt(3, "systemd", l, err, errlen);
    }
    if (open_spec(cfg, spec, l, err, errlen) != TN_OK)
        return TN_ERR;
    if (cfg->listen_shards <= 1)
        return TN_OK;
    for (int i = 0; i < cfg->listen_shards; i++) {
        char sspec[300];
        tn_listener one;
        memset(&one, 0, sizeof(one));
        if (config_shard_spec(spec, i, sspec, sizeof(sspec)) != TN_OK) {
            int rc = tn_errf(err, errlen, TN_ERR, "listen.shards: no address for shard %d of '%s'",
                             i, spec);
            listen_close(l, true);
            return rc;
        }
        if (open_spec(cfg, sspec, &one, err, errlen) != TN_OK) {
            listen_close(l, true);
            return TN_ERR;
        }
        l->shard_fd[i] = one.fd;
        snprintf(l->shard_path[i], sizeof(l->shard_path[i]), "%s", one.path);
        l->nshards = i + 1;
    }
    return TN_OK;
}

void listen_close(tn_listener *l, bool unlink_path)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    if (unlink_path && l->owned_path && l->path[0] != '\0')
        unlink(l->path);
    for (int i = 0; i < l->nshards; i++) {
        close(l->shard_fd[i]);
        if (unlink_path && l->shard_path[i][0] != '\0')
            unlink(l->shard_path[i]);
    }
    l->nshards = 0;
}

bool listen_same(const tn_listener *l, const tn_config *cfg)
{
    return l->fd >= 0 && strcmp(l->spec, cfg->listen) == 0;
}

static int unix_queue(int fd, unsigned *waiting, unsigned *capacity)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return TN_ERR;
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return TN_ERR;
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } msg = {
        .nlh = {.nlmsg_len = sizeof(msg), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                .nlmsg_flags = NLM_F_REQUEST},
        .req = {.sdiag_family = AF_UNIX, .udiag_states = 1u << 10 /* TCP_LISTEN */,
                .udiag_ino = (unsigned)st.st_ino, .udiag_show = UDIAG_SHOW_RQLEN,
                .udiag_cookie = {~0u, ~0u}},
    };
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    int rc = TN_ERR;
    if (sendto(nl, &msg, sizeof(msg), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        goto out;
    char reply[1024];
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = recv(nl, reply, sizeof(reply), 0);
    if (n <= 0)
        goto out;
    struct nlmsghdr *h = (struct nlmsghdr *)reply;
    if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
        goto out;
    struct unix_diag_msg *m = NLMSG_DATA(h);
    struct rtattr *attr = (struct rtattr *)(m + 1);
    int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
    for (; RTA_OK(attr, len); attr = RTA_NEXT(attr, len)) {
        if (attr->rta_type == UNIX_DIAG_RQLEN) {
            struct unix_diag_rqlen *q = RTA_DATA(attr);
            *waiting = q->udiag_rqueue;
            *capacity = q->udiag_wqueue;
            rc = TN_OK;
        }
    }
out:
    close(nl);
    return rc;
}

int listen_queue(const tn_listener *l, unsigned *waiting, unsigned *capacity)
{
    *waiting = *capacity = 0;
    if (l->fd < 0)
        return TN_ERR;
    if (l->is_unix)
        return unix_queue(l->fd, waiting, capacity);
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(l->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
        return TN_ERR;
    /* For a listening TCP socket the kernel reports the accept queue in these fields. */
    *waiting = ti.tcpi_unacked;
    *capacity = ti.tcpi_sacked;
    return TN_OK;
}
