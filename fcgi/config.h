/*
 * config.h — tenancyd's configuration: one struct per generation, the host's table of
 * options, and the loader that reads every module's table from the one file.
 *
 * A generation is parsed into its own arena and either fully accepted or thrown away, so a
 * reload with a bad file never disturbs the running one (the master keeps the old
 * generation and logs file:line). The host's options and the tenancy chain's (which the
 * master and the workers read themselves) are in every generation; any other module's
 * options (the admin panel's) come as a part the composition root registers (config_part),
 * so this folder never names that module. Every option is a row of a table, documented in
 * doc/tenancyd.conf.5; tests/integration/optscan.sh fails when a row is undocumented.
 */
#ifndef TN_FCGI_CONFIG_H
#define TN_FCGI_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/arena.h"
#include "core/conf.h"
#include "core/netaddr.h"
#include "fcgi/mount.h"
#include "tenancy/config.h"

enum pm_mode { PM_STATIC = 0, PM_DYNAMIC = 1, PM_ONDEMAND = 2 };

/* Hard cap on workers of one generation; the scoreboard holds two generations. */
#define TN_MAX_CHILDREN 512
#define TN_MAX_JOB_WORKERS 64   /* pm.jobs */
/* Most option tables a composition root may add (config_add_part). */
#define TN_MAX_CONFIG_PARTS 8
/* Most listen.shards (each shard is one more socket in the master and in nginx's upstream). */
#define TN_MAX_SHARDS 64
/* tenant.affinity: the workers numbered below this may be a tenant's home (each is one more
 * socket pair in the master and a descriptor in every worker). */
#define TN_AFFINITY_MAX 64

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
    int64_t slice_us;          /* the time slice a request worker asks the kernel for (0: its own) */

    int64_t request_timeout_ms;
    int64_t slow_request_ms;
    int64_t queue_timeout_ms;
    int64_t keepalive_timeout_ms;
    int64_t keepalive_handoff_after_ms;
    int64_t linger_timeout_ms;
    int64_t stop_timeout_ms;
    int64_t max_body;
    int64_t max_params;

    const char *app;           /* the app at the root (NULL: none, when mounts exist) */
    mount_set mounts;          /* the apps at path prefixes (mount.h), longest first */

    const char *access_log;
    int64_t access_log_buffer;
    int64_t access_log_flush_ms;
    int64_t access_log_writeback;
    bool log_requests;
    /* the stream hub (fcgi/hub.h) */
    bool stream_hub;
    /* the job workers (fcgi/jobs.h) */
    int jobs;
    int max_jobs;
    int64_t stream_heartbeat_ms;
    int stream_max_per_tenant;
    int stream_max_total;
    int64_t stream_max_buffer;
    const char *error_log;
    int log_level;

    const char *status_path;
    const char *metrics_path;
    const char *ping_path;
    const char *status_allow;
    netaddr_list *status_allowed;

    tenancy_config tenancy;    /* the tenancy chain's options (tenancy/config.h) */
    void *parts[TN_MAX_CONFIG_PARTS];   /* the registered parts' structs, in their order */
} tn_config;

extern const conf_opt tn_config_table[];

/* A module's share of tenancyd.conf beyond the host's and the chain's options: its table,
 * the struct the table fills (`size` bytes, zeroed, in the generation's arena), and a check
 * run once the whole file is read. The composition root adds the parts before the first
 * config_load; every generation (a reload's too) then reads them, in the order added. */
typedef struct config_part {
    const char *name;
    const conf_opt *table;
    size_t size;
    /* Derived forms and checks, after the host's and the chain's (so it may read and extend
     * gen->tenancy). TN_OK, or TN_INVALID / TN_NOMEM with err set: the generation is
     * refused, its message reported without a line, as the host's own checks are. NULL:
     * nothing to do. */
    int (*finish)(tn_config *gen, void *obj, char *err, size_t errlen);
} config_part;

/* Add a part (before any config_load). TN_OK, or TN_INVALID when TN_MAX_CONFIG_PARTS are
 * there already. */
int config_add_part(const config_part *part);

/* Forget every part: for the unit tests that run several cases in one process (CK_FORK=no);
 * the daemon never calls it. */
void config_clear_parts(void);

/* The parts added, in order (NULL-terminated), for --options and -T. */
const config_part *const *config_parts(void);

/* The struct of `part` in generation c; NULL when the part was not added. */
void *config_part_of(const tn_config *c, const config_part *part);

/* Read and validate a whole configuration. Returns a new generation (owning its arena) or
 * NULL with err filled ("file:line: message" via conf_error_format). */
tn_config *config_load(const char *path, conf_error *err);

/* The keys no table has, as config_load reads them (obj a tn_config): mount.NAME.* lines,
 * then placement.NAME.* lines (a conf_dynamic_fn; the conf fuzz target parses with it too). */
int config_dynamic_key(void *obj, const char *key, const char *value, arena *a, char *err,
                       size_t errlen);

/* Free a generation. NULL is accepted. */
void config_free(tn_config *cfg);

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
