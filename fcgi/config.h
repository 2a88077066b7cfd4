/*
 * config.h — tenancyd's configuration: one struct per generation, one table of options.
 *
 * A generation is parsed into its own arena and either fully accepted or thrown away, so a
 * reload with a bad file never disturbs the running one (the master keeps the old
 * generation and logs file:line). Every option is a row of the table in config.c, documented
 * in doc/tenancyd.conf.5; tests/integration/optscan.sh fails when a row is undocumented.
 */
#ifndef TN_FCGI_CONFIG_H
#define TN_FCGI_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/arena.h"
#include "core/conf.h"
#include "admin/config.h"
#include "core/netaddr.h"
#include "tenancy/config.h"

enum pm_mode { PM_STATIC = 0, PM_DYNAMIC = 1, PM_ONDEMAND = 2 };

/* Hard cap on workers of one generation; the scoreboard holds two generations. */
#define TN_MAX_CHILDREN 512
/* Most listen.shards (each shard is one more socket in the master and in nginx's upstream). */
#define TN_MAX_SHARDS 64

typedef struct tn_config {
    arena *arena;              /* owns every string below */
    const char *path;          /* the file it was read from */
    unsigned generation;

    const char *listen;
    int listen_mode;
    const char *listen_owner;
    const char *listen_group;
    int listen_backlog;
    int listen_shards;         /* 1: one socket; N: also N shard sockets (listen.h) */
    const char *allowed_clients;
    netaddr_list *allowed;     /* parsed allowed_clients */

    const char *user;
    const char *group;
    const char *pid_file;

    int pm;
    int max_children;
    int start;
    int min_spare;
    int max_spare;
    int max_spawn_rate;
    int64_t idle_timeout_ms;
    int max_requests;
    int max_requests_jitter;   /* percent */
    int crash_limit;
    int64_t crash_window_ms;
    int64_t respawn_backoff_max_ms;

    int64_t request_timeout_ms;
    int64_t slow_request_ms;
    int64_t queue_timeout_ms;
    int64_t keepalive_timeout_ms;
    int64_t keepalive_handoff_after_ms;
    int64_t linger_timeout_ms;
    int64_t stop_timeout_ms;
    int64_t max_body;
    int64_t max_params;

    const char *app;

    const char *access_log;
    int64_t access_log_buffer;
    int64_t access_log_flush_ms;
    bool log_requests;
    const char *error_log;
    int log_level;

    const char *status_path;
    const char *metrics_path;
    const char *ping_path;
    const char *status_allow;
    netaddr_list *status_allowed;

    tenancy_config tenancy;    /* the tenancy chain's options (tenancy/config.h) */
    admin_config admin;        /* the admin panel's options (admin/config.h) */
} tn_config;

extern const conf_opt tn_config_table[];

/* Read and validate a whole configuration. Returns a new generation (owning its arena) or
 * NULL with err filled ("file:line: message" via conf_error_format). */
tn_config *config_load(const char *path, conf_error *err);

/* Free a generation. NULL is accepted. */
void config_free(tn_config *cfg);

/* Every option table of tenancyd.conf, in order ({NULL, NULL} ends it), for --options and
 * the documentation check. */
extern const conf_opt *const tn_config_tables[];

/* The listen value names a unix socket (a path, or unix:PATH)? */
bool config_listen_is_unix(const char *spec);

/* Where the port starts in a host:port, [v6]:port or bare port listen value; NULL for a
 * bracketed address without "]:". */
const char *config_listen_port(const char *spec);

/* The address of shard i of listen value `spec` (a unix path or host:port): `PATH.i`, or
 * port + 1 + i. TN_OK, or TN_ERR when the spec cannot have shards or the name does not fit. */
int config_shard_spec(const char *spec, int i, char *out, size_t n);

/* Can this configuration serve `shards` shard sockets (pm static, a worker for each, a
 * socket tenancyd opens itself)? TN_OK, or TN_INVALID with err set. Part of config_load;
 * a reload that keeps the running socket (listen.shards needs a restart) checks the new
 * generation against the shards of that socket. */
int config_check_shards(const tn_config *c, int shards, conf_error *err);

/* Names for log lines and status. */
const char *config_pm_name(int pm);

#endif
