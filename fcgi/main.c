/*
 * main.c — tenancyd: command line, configuration check, then the master.
 *
 *   tenancyd -c FILE        run in the foreground (systemd style)
 *   tenancyd -c FILE -t     check the configuration (and that every app loads); exit 0 or 1
 *   tenancyd -c FILE -T     check, then print the effective configuration
 *   tenancyd --options      list every option with its default and help (for the docs check)
 *
 * The composition root: the only file that knows every module. It adds the admin panel's
 * options to the loader (a config part) and puts the request handlers in the workers' list
 * in their order: the panel (by its host), the host's endpoints (by their paths), then the
 * tenancy chain with the app (every other request); and it points the master's hook for a
 * worker that died under a console statement at the panel's audit log.
 */
#include "core/first.h"
#include "admin/admin.h"
#include "core/log.h"
#include "core/rc.h"
#include "fcgi/app.h"
#include "fcgi/config.h"
#include "fcgi/handler.h"
#include "fcgi/master.h"
#include "fcgi/route.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: tenancyd -c FILE [-t | -T]\n"
               "       tenancyd --options | --version\n"
               "\n"
               "  -c, --config FILE   configuration file (see tenancyd.conf(5))\n"
               "  -t, --test          check the configuration and the app modules, then exit\n"
               "  -T, --test-dump     check, then print the effective configuration\n"
               "      --options       list every option with its default\n"
               "  -V, --version       print the version\n");
}

/* The panel's options, once the host's and the chain's are in: admin_config_finish, then
 * admin.host joins the central domains, so that no tenant is ever served at the panel's
 * name (the panel claims its requests before the chain sees them anyway). */
static int admin_part_finish(tn_config *gen, void *obj, char *err, size_t errlen)
{
    admin_config *ac = obj;
    int rc = admin_config_finish(ac, &gen->tenancy, gen->arena, err, errlen);
    if (rc != TN_OK || !ac->enabled)
        return rc;
    tenancy_config *t = &gen->tenancy;
    const char **cent = arena_alloc(gen->arena, (size_t)(t->ncentrals + 2) * sizeof(*cent));
    if (cent == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    for (int i = 0; i < t->ncentrals; i++)
        cent[i] = t->centrals[i];
    cent[t->ncentrals] = ac->host_norm;
    t->centrals = cent;
    t->ncentrals++;
    return TN_OK;
}

static const config_part admin_part = {.name = "admin", .table = admin_config_table,
                                       .size = sizeof(admin_config),
                                       .finish = admin_part_finish};

/* Every module's options and the workers' handlers, before the first configuration is read
 * (a reload reads the same parts; every worker inherits the list). */
static int compose(void)
{
    if (config_add_part(&admin_part) != TN_OK ||
        handlers_add(&admin_handler, &admin_part) != TN_OK ||
        handlers_add(&route_endpoints, NULL) != TN_OK || handlers_add(&route_chain, NULL) != TN_OK)
        return TN_ERR;
    return TN_OK;
}

static void list_table(const conf_opt *table)
{
    for (const conf_opt *o = table; o->key; o++)
        printf("%s\t%s\t%s\n", o->key, o->def ? o->def : "", o->help);
}

static void list_options(void)
{
    list_table(tn_config_table);
    list_table(tenancy_config_table);
    for (const config_part *const *p = config_parts(); *p != NULL; p++)
        list_table((*p)->table);
}

/* tenancyd -T: every option's effective value, in the order of --options. */
static void dump_config(const tn_config *cfg)
{
    conf_dump(tn_config_table, cfg, stdout);
    conf_dump(tenancy_config_table, &cfg->tenancy, stdout);
    for (const config_part *const *p = config_parts(); *p != NULL; p++)
        conf_dump((*p)->table, config_part_of(cfg, *p), stdout);
    for (int i = 0; i < cfg->mounts.n; i++)
        printf("mount.%s.prefix = %s\nmount.%s.app = %s\n", cfg->mounts.m[i].name,
               cfg->mounts.m[i].prefix, cfg->mounts.m[i].name, cfg->mounts.m[i].app);
}

/* The master's hook for a worker that died under a console statement: the audit log is the
 * panel's (admin/), which the master does not know; this file knows both. */
static void audit_died(const tn_config *cfg, const char *audit_id, const char *req_id,
                       const char *how)
{
    char err[512];
    const admin_config *ac = config_part_of(cfg, &admin_part);
    if (admin_audit_died(ac, audit_id, req_id, how, err, sizeof(err)) != TN_OK)
        log_error("cannot close audit entry %s (%s): %s", audit_id, how, err);
}

/* Load every app (the root's and each mount's) in a child so their constructors cannot
 * disturb this process. */
static int check_apps(const tn_config *cfg)
{
    pid_t pid = fork();
    if (pid < 0)
        return TN_ERR;
    if (pid == 0) {
        int bad = 0;
        for (int i = -1; i < cfg->mounts.n; i++) {
            const char *path = i < 0 ? cfg->app : cfg->mounts.m[i].app;
            tn_app_module m;
            char err[512];
            if (path != NULL && app_load(path, &m, err, sizeof(err)) != TN_OK) {
                if (i < 0)
                    fprintf(stderr, "%s\n", err);
                else
                    fprintf(stderr, "mount.%s: %s\n", cfg->mounts.m[i].name, err);
                bad = 1;
            }
        }
        _exit(bad);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return TN_ERR;
    return TN_OK;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'}, {"test", no_argument, NULL, 't'},
        {"test-dump", no_argument, NULL, 'T'},    {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},         {"options", no_argument, NULL, 'O'},
        {NULL, 0, NULL, 0}};
    const char *path = NULL;
    int test = 0;
    int c;
    if (compose() != TN_OK) {
        fprintf(stderr, "tenancyd: too many option tables or request handlers\n");
        return 1;
    }
    while ((c = getopt_long(argc, argv, "c:tTVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': path = optarg; break;
        case 't': test = 1; break;
        case 'T': test = 2; break;
        case 'V': printf("tenancyd %s\n", PACKAGE_VERSION); return 0;
        case 'O': list_options(); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (path == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    log_init("tenancyd", TN_LOG_INFO);
    /* Descriptors inherited from whoever started us (Apache's pipes under mod_fcgid, say) are
     * not ours: close them, keeping stdio and the socket systemd may pass as fd 3. */
    close_range(getenv("LISTEN_FDS") != NULL ? 4 : 3, ~0U, 0);

    conf_error err;
    tn_config *cfg = config_load(path, &err);
    if (cfg == NULL) {
        char msg[1024];
        conf_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "tenancyd: %s\n", msg);
        return 1;
    }
    if (test) {
        int rc = check_apps(cfg) == TN_OK ? 0 : 1;
        if (rc == 0) {
            if (test == 2)
                dump_config(cfg);
            fprintf(stderr, "tenancyd: configuration %s is valid\n", path);
        }
        config_free(cfg);
        return rc;
    }
    log_set_level(cfg->log_level);
    if (log_open(cfg->error_log) != TN_OK) {
        fprintf(stderr, "tenancyd: cannot open error_log %s\n", cfg->error_log);
        config_free(cfg);
        return 1;
    }
    master_hooks hooks = {.audit_died = audit_died};
    return master_run(cfg, path, &hooks);
}
