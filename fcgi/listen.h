/*
 * listen.h — the FastCGI listen socket: create, inherit, describe, measure.
 *
 * The master owns the socket; workers only accept on it. We bind it ourselves (never
 * FCGX_OpenSocket, which exit()s on errors, speaks IPv4 only and unlinks a live socket):
 * unix paths with mode/owner/group, host:port for IPv4 and [addr]:port for IPv6, fd 0 as
 * handed over by spawn-fcgi, mod_fcgid or lighttpd (`inherit`), or fd 3 from systemd socket
 * activation (`systemd`). A unix path left behind by a dead master is reclaimed; one that a
 * live process still listens on is refused.
 *
 * Shards (listen.shards = N > 1): N more sockets beside the main one, shard i at `PATH.i`
 * for a unix path and at port + 1 + i for host:port. Each worker accepts on the main socket
 * and on shard (its index mod N), so a web server that hashes the tenant's host over the
 * shard sockets sends each tenant to the same few workers, whose database connections then
 * keep that share of tenants warm (storage/README.md). The main socket still takes anything.
 */
#ifndef TN_FCGI_LISTEN_H
#define TN_FCGI_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

#include "fcgi/config.h"

typedef struct tn_listener {
    int fd;
    bool is_unix;
    bool owned_path;          /* we created the unix path: unlink it on exit */
    char spec[256];           /* the `listen` value it was made from */
    char path[108];           /* unix socket path */
    int nshards;              /* shard sockets (0: none) */
    int shard_fd[TN_MAX_SHARDS];
    char shard_path[TN_MAX_SHARDS][108];   /* unix paths of the shards (unlinked on close) */
} tn_listener;

/* Open the socket `cfg->listen` describes. Returns TN_OK or TN_ERR with a message in err. */
int listen_open(const tn_config *cfg, tn_listener *l, char *err, size_t errlen);

/* The shard a worker with this index serves (-1: no shards); its socket is shard_fd[it]. */
int listen_shard(const tn_listener *l, int index);

/* Close (shards too); unlink the unix paths we created when `unlink_path`. */
void listen_close(tn_listener *l, bool unlink_path);

/* Same socket for this configuration? (a reload keeps it when true, shards included:
 * listen.shards changes only with a restart) */
bool listen_same(const tn_listener *l, const tn_config *cfg);

/* Connections waiting in the accept queue now, and the queue's capacity. Works for TCP
 * (TCP_INFO) and for unix sockets (sock_diag), where php-fpm reports 0. TN_OK or TN_ERR. */
int listen_queue(const tn_listener *l, unsigned *waiting, unsigned *capacity);

#endif
