/*
 * config.c — the tenancyd option table and cross-option validation (see config.h).
 * Must not: open sockets, files or the app (the master does that after validation), or
 * log — errors go back in conf_error so `tenancyd -t` and reload report them the same way.
 */
#include "core/first.h"
#include "fcgi/config.h"
#include "core/log.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pm_names[] = {"static", "dynamic", "ondemand", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};

#define OFF(f) offsetof(tn_config, f)

/* key, type, offset, default, min, max, enum names, flags, help */
const conf_opt tn_config_table[] = {
    {"listen", CONF_STR, OFF(listen), "/run/tenancy/tenancyd.sock", 0, 0, NULL, 0,
     "FastCGI socket: a unix path, host:port, [v6]:port, inherit (fd 0) or systemd"},
    {"listen.mode", CONF_MODE, OFF(listen_mode), "0660", 0, 0, NULL, 0,
     "permissions of a unix socket"},
    {"listen.owner", CONF_STR, OFF(listen_owner), NULL, 0, 0, NULL, 0,
     "owner (user name) of a unix socket"},
    {"listen.group", CONF_STR, OFF(listen_group), NULL, 0, 0, NULL, 0,
     "group of a unix socket"},
    {"listen.backlog", CONF_INT, OFF(listen_backlog), "511", -1, 65535, NULL, 0,
     "listen queue length (-1: the kernel maximum)"},
    {"listen.shards", CONF_INT, OFF(listen_shards), "1", 1, TN_MAX_SHARDS, NULL, CONF_RESTART,
     "also listen on this many shard sockets, each served by its own share of the workers, "
     "for a web server that hashes the tenant to a shard (1: no shards; pm = static)"},
    {"allowed_clients", CONF_STR, OFF(allowed_clients), "", 0, 0, NULL, 0,
     "IP addresses or prefixes allowed to connect over TCP (empty: any)"},
    {"user", CONF_STR, OFF(user), NULL, 0, 0, NULL, CONF_RESTART,
     "user the workers run as (when started as root)"},
    {"group", CONF_STR, OFF(group), NULL, 0, 0, NULL, CONF_RESTART,
     "group the workers run as (default: the user's group)"},
    {"pid_file", CONF_STR, OFF(pid_file), NULL, 0, 0, NULL, CONF_RESTART,
     "write the master's pid to this file"},
    {"pm", CONF_ENUM, OFF(pm), "dynamic", 0, 0, pm_names, 0,
     "process manager: static, dynamic or ondemand"},
    {"pm.max_children", CONF_INT, OFF(max_children), "5", 1, TN_MAX_CHILDREN, NULL, 0,
     "most workers at once"},
    {"pm.start", CONF_INT, OFF(start), "2", 0, TN_MAX_CHILDREN, NULL, 0,
     "workers started at launch (dynamic)"},
    {"pm.min_spare", CONF_INT, OFF(min_spare), "1", 0, TN_MAX_CHILDREN, NULL, 0,
     "fewest idle workers (dynamic)"},
    {"pm.max_spare", CONF_INT, OFF(max_spare), "3", 1, TN_MAX_CHILDREN, NULL, 0,
     "most idle workers (dynamic)"},
    {"pm.jobs", CONF_INT, OFF(jobs), "1", 0, TN_MAX_JOB_WORKERS, NULL, 0,
     "job workers: processes that run the apps' jobs (tn_job_enqueue), never HTTP requests"},
    {"pm.max_jobs", CONF_INT, OFF(max_jobs), "1000", 0, 1000000000, NULL, 0,
     "jobs a job worker runs before it is replaced (0: no limit)"},
    {"pm.max_spawn_rate", CONF_INT, OFF(max_spawn_rate), "32", 1, 1024, NULL, 0,
     "most workers started per second (dynamic)"},
    {"pm.idle_timeout", CONF_DURATION, OFF(idle_timeout_ms), "10s", 100, 86400000, NULL, 0,
     "an idle worker exits after this (ondemand; dynamic: one above pm.max_spare)"},
    {"pm.max_requests", CONF_INT, OFF(max_requests), "0", 0, 1000000000, NULL, 0,
     "recycle a worker after about this many requests (0: never)"},
    {"pm.max_requests_jitter", CONF_INT, OFF(max_requests_jitter), "10", 0, 50, NULL, 0,
     "spread of pm.max_requests per worker, in percent"},
    {"pm.crash_limit", CONF_INT, OFF(crash_limit), "10", 1, 100000, NULL, 0,
     "crashes within pm.crash_window that engage the respawn brake"},
    {"pm.crash_window", CONF_DURATION, OFF(crash_window_ms), "10s", 1000, 3600000, NULL, 0,
     "window over which crashes are counted"},
    {"pm.respawn_backoff_max", CONF_DURATION, OFF(respawn_backoff_max_ms), "30s", 100, 3600000,
     NULL, 0, "longest delay between respawns while the brake is engaged"},
    {"pm.slice", CONF_USEC, OFF(slice_us), "100us", 0, 100000, NULL, 0,
     "CPU time slice each request worker asks the kernel's scheduler for: picked sooner, run "
     "for less at a time (Linux 6.12 or later; 0: the kernel's default)"},
    {"request_timeout", CONF_DURATION, OFF(request_timeout_ms), "60s", 0, 86400000, NULL, 0,
     "longest a request may take, reading included; the worker is then killed (0: off)"},
    {"slow_request", CONF_DURATION, OFF(slow_request_ms), "0", 0, 86400000, NULL, 0,
     "log requests running longer than this (0: off)"},
    {"queue_timeout", CONF_DURATION, OFF(queue_timeout_ms), "60s", 0, 86400000, NULL, 0,
     "answer 503 at once to a request that waited longer than this (needs REQUEST_START)"},
    {"keepalive_timeout", CONF_DURATION, OFF(keepalive_timeout_ms), "75s", 0, 3600000, NULL, 0,
     "close a kept FastCGI connection idle this long, longer than the web server keeps one "
     "(0: do not keep connections)"},
    {"keepalive_handoff_after", CONF_DURATION, OFF(keepalive_handoff_after_ms), "20ms", 0,
     3600000, NULL, 0,
     "a request running this long makes its worker pass the other connections it holds to "
     "idle workers (0: never)"},
    {"linger_timeout", CONF_DURATION, OFF(linger_timeout_ms), "100ms", 0, 10000, NULL, 0,
     "longest wait for the peer to close after a response"},
    {"stop_timeout", CONF_DURATION, OFF(stop_timeout_ms), "10s", 100, 3600000, NULL, 0,
     "deadline for workers to exit on SIGTERM and for a reload to start"},
    {"max_body", CONF_SIZE, OFF(max_body), "8M", 0, (long long)1 << 40, NULL, 0,
     "largest request body an app may read (larger: 413)"},
    {"max_params", CONF_SIZE, OFF(max_params), "1M", 1024, (long long)1 << 30, NULL, 0,
     "largest FastCGI parameter a request may declare"},
    {"app", CONF_STR, OFF(app), NULL, 0, 0, NULL, 0,
     "path of the app module (.so) at the root; loaded afresh by each reload (optional when "
     "mount.NAME lines mount other apps: unmatched paths then get 404)"},
    {"access_log", CONF_STR, OFF(access_log), "stdout", 0, 0, NULL, 0,
     "file for one JSON line per request (stdout, stderr or a path)"},
    {"access_log_buffer", CONF_SIZE, OFF(access_log_buffer), "32k", 0, 1 << 20, NULL, 0,
     "bytes of access-log lines a worker gathers into one write (0: a write per line)"},
    {"access_log_flush", CONF_DURATION, OFF(access_log_flush_ms), "100ms", 1, 60000, NULL, 0,
     "longest a gathered access-log line waits before it is written"},
    {"access_log_writeback", CONF_SIZE, OFF(access_log_writeback), "256k", 0,
     (long long)1 << 30, NULL, 0,
     "bytes a worker writes to an access-log file before it starts the file's writeback "
     "(0: the kernel's own pace)"},
    {"log_requests", CONF_BOOL, OFF(log_requests), "on", 0, 0, NULL, 0,
     "write the access log (errors are always logged)"},
    {"error_log", CONF_STR, OFF(error_log), "stderr", 0, 0, NULL, CONF_RESTART,
     "file for the error log (stderr or a path)"},
    {"log_level", CONF_ENUM, OFF(log_level), "info", 0, 0, level_names, 0,
     "error, warn, info or debug"},
    {"status_path", CONF_STR, OFF(status_path), "/_tenancy/status", 0, 0, NULL, 0,
     "path answering the JSON status (empty: off)"},
    {"metrics_path", CONF_STR, OFF(metrics_path), "/_tenancy/metrics", 0, 0, NULL, 0,
     "path answering Prometheus metrics (empty: off)"},
    {"ping_path", CONF_STR, OFF(ping_path), "/_tenancy/ping", 0, 0, NULL, 0,
     "path answering pong (empty: off)"},
    {"status_allow", CONF_STR, OFF(status_allow), "127.0.0.1, ::1", 0, 0, NULL, 0,
     "client addresses (REMOTE_ADDR) that may read status, metrics and ping"},
    {"stream.hub", CONF_BOOL, OFF(stream_hub), "on", 0, 0, NULL, 0,
     "run the stream hub, which holds the Server-Sent Events streams apps hand it "
     "(tn_subscribe) so that no worker waits on them (off: tn_subscribe answers TN_ERR)"},
    {"stream.heartbeat", CONF_DURATION, OFF(stream_heartbeat_ms), "15s", 100, 3600000, NULL, 0,
     "a stream with nothing to send gets a comment line this often (shorter than the web "
     "server's read timeout: nginx's fastcgi_read_timeout)"},
    {"stream.max_per_tenant", CONF_INT, OFF(stream_max_per_tenant), "1000", 1, 10000000, NULL,
     0, "most open streams of one tenant (more: tn_subscribe answers TN_BUSY)"},
    {"stream.max_total", CONF_INT, OFF(stream_max_total), "10000", 1, 10000000, NULL, 0,
     "most open streams on this host (more: TN_BUSY)"},
    {"stream.max_buffer", CONF_SIZE, OFF(stream_max_buffer), "256k", 4096, (long long)1 << 30,
     NULL, 0,
     "bytes a slow client's stream may have waiting; over it the stream gets a last "
     "`event: dropped` and is closed"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};

/* The parts added by the composition root (config_add_part), NULL-terminated. */
static const config_part *parts[TN_MAX_CONFIG_PARTS + 1];
static int nparts;

int config_add_part(const config_part *part)
{
    if (nparts >= TN_MAX_CONFIG_PARTS)
        return TN_INVALID;
    parts[nparts++] = part;
    return TN_OK;
}

void config_clear_parts(void)
{
    while (nparts > 0)
        parts[--nparts] = NULL;
}

const config_part *const *config_parts(void) { return parts; }

void *config_part_of(const tn_config *c, const config_part *part)
{
    for (int i = 0; i < nparts; i++)
        if (parts[i] == part)
            return c->parts[i];
    return NULL;
}

const char *config_pm_name(int pm) { return pm_names[pm]; }

bool config_listen_is_unix(const char *spec)
{
    return strncmp(spec, "unix:", 5) == 0 || spec[0] == '/' || spec[0] == '.';
}

const char *config_listen_port(const char *spec)
{
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        return close != NULL && close[1] == ':' ? close + 2 : NULL;
    }
    const char *colon = strrchr(spec, ':');
    return colon == NULL ? spec : colon + 1;
}

int config_shard_spec(const char *spec, int i, char *out, size_t n)
{
    int w;
    if (config_listen_is_unix(spec)) {
        w = snprintf(out, n, "%s.%d", spec, i);
        return w > 0 && (size_t)w < n ? TN_OK : TN_ERR;
    }
    if (strcmp(spec, "inherit") == 0 || strcmp(spec, "systemd") == 0)
        return TN_ERR;
    const char *port = config_listen_port(spec);
    if (port == NULL)
        return TN_ERR;
    char *end;
    long p = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || p < 1 || p + 1 + i > 65535)
        return TN_ERR;
    w = snprintf(out, n, "%.*s%ld", (int)(port - spec), spec, p + 1 + i);
    return w > 0 && (size_t)w < n ? TN_OK : TN_ERR;
}

int config_check_shards(const tn_config *c, int shards, conf_error *err)
{
    err->line = 0;   /* a message below is about the whole file, not one line of it */
    if (shards <= 1)
        return TN_OK;
    if (c->pm != PM_STATIC)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "listen.shards = %d needs pm = static (every shard must always have "
                       "its workers)", shards);
    if (shards > c->max_children)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "listen.shards (%d) is above pm.max_children (%d): a shard would have "
                       "no worker", shards, c->max_children);
    if (strcmp(c->listen, "inherit") == 0 || strcmp(c->listen, "systemd") == 0)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "listen.shards needs a socket tenancyd opens itself (a unix path or "
                       "host:port), not listen = %s", c->listen);
    char last[300];
    if (config_shard_spec(c->listen, shards - 1, last, sizeof(last)) != TN_OK)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "listen.shards = %d: shard %d of '%s' has no address (a unix path "
                       "gets .0 to .%d, a port the %d ports after it)", shards, shards - 1,
                       c->listen, shards - 1, shards);
    return TN_OK;
}

static int validate(tn_config *c, conf_error *err)
{
    char msg[256];
    err->line = 0;   /* as in config_check_shards */
    if (c->app != NULL && c->app[0] == '\0')
        c->app = NULL;
    if (mount_set_finish(&c->mounts, msg, sizeof(msg)) != TN_OK)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "%s", msg);
    if (c->app == NULL && c->mounts.n == 0)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "app: no app module configured (app = /path/to/module.so, or "
                       "mount.NAME.prefix and mount.NAME.app)");
    if (c->pm == PM_DYNAMIC) {
        if (c->min_spare > c->max_spare)
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "pm.min_spare (%d) is above pm.max_spare (%d)", c->min_spare,
                           c->max_spare);
        if (c->max_spare > c->max_children)
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "pm.max_spare (%d) is above pm.max_children (%d)",
                           c->max_spare, c->max_children);
        if (c->start > c->max_children)
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "pm.start (%d) is above pm.max_children (%d)", c->start,
                           c->max_children);
    }
    if (config_check_shards(c, c->listen_shards, err) != TN_OK)
        return TN_INVALID;
    if (c->slow_request_ms > 0 && c->request_timeout_ms > 0 &&
        c->slow_request_ms >= c->request_timeout_ms)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "slow_request must be shorter than request_timeout");
    const char *paths[] = {c->status_path, c->metrics_path, c->ping_path};
    for (size_t i = 0; i < TN_ARRAY_LEN(paths); i++)
        if (paths[i] != NULL && paths[i][0] != '\0' && paths[i][0] != '/')
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "status, metrics and ping paths must start with '/': '%s'",
                           paths[i]);
    if (netaddr_list_parse(c->allowed_clients, c->arena, &c->allowed, msg, sizeof(msg)) != TN_OK)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "allowed_clients: %s", msg);
    if (netaddr_list_parse(c->status_allow, c->arena, &c->status_allowed, msg, sizeof(msg)) !=
        TN_OK)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "status_allow: %s", msg);
    if (tenancy_config_finish(&c->tenancy, c->arena, msg, sizeof(msg)) != TN_OK)
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "%s", msg);
    for (int i = 0; i < nparts; i++)
        if (parts[i]->finish != NULL &&
            parts[i]->finish(c, c->parts[i], msg, sizeof(msg)) != TN_OK)
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "%s", msg);
    return TN_OK;
}

/* The keys no table has (obj is the tn_config): mount.NAME.KEY lines are the host's
 * (mount.h), placement.NAME.KEY lines belong to the tenancy options. */
int config_dynamic_key(void *obj, const char *key, const char *value, arena *a, char *err,
                       size_t errlen)
{
    tn_config *c = obj;
    int rc = mount_set_key(&c->mounts, key, value, a, err, errlen);
    if (rc != TN_NOTFOUND)
        return rc;
    return tenancy_config_placement(&c->tenancy, key, value, a, err, errlen);
}

tn_config *config_load(const char *path, conf_error *err)
{
    arena *a = arena_create(8192);
    tn_config *c = a != NULL ? arena_calloc(a, sizeof(*c)) : NULL;
    if (c == NULL)
        goto oom;
    c->arena = a;
    conf_target targets[2 + TN_MAX_CONFIG_PARTS] = {{tn_config_table, c},
                                                    {tenancy_config_table, &c->tenancy}};
    for (int i = 0; i < nparts; i++) {
        c->parts[i] = arena_calloc(a, parts[i]->size);
        if (c->parts[i] == NULL)
            goto oom;
        targets[2 + i] = (conf_target){parts[i]->table, c->parts[i]};
    }
    if (conf_load_targets(targets, 2 + nparts, path, a, config_dynamic_key, err) != TN_OK)
        goto fail;
    c->path = arena_strdup(a, path);
    if (validate(c, err) != TN_OK)
        goto fail;
    return c;
oom:
    snprintf(err->file, sizeof(err->file), "%s", path);
    err->line = 0;
    tn_errf(err->msg, sizeof(err->msg), TN_NOMEM, "out of memory");
fail:
    arena_destroy(a);
    return NULL;
}

void config_free(tn_config *cfg)
{
    if (cfg != NULL)
        arena_destroy(cfg->arena);
}
