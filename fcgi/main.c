/*
 * main.c — tenancyd: command line, configuration check, then the master.
 *
 *   tenancyd -c FILE        run in the foreground (systemd style)
 *   tenancyd -c FILE -t     check the configuration (and that the app loads); exit 0 or 1
 *   tenancyd -c FILE -T     check, then print the effective configuration
 *   tenancyd --options      list every option with its default and help (for the docs check)
 *
 * The composition root: the only file that knows every module.
 */
#include "core/first.h"
#include "admin/admin.h"
#include "core/log.h"
#include "core/rc.h"
#include "fcgi/app.h"
#include "fcgi/config.h"
#include "fcgi/master.h"

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
               "  -t, --test          check the configuration and the app module, then exit\n"
               "  -T, --test-dump     check, then print the effective configuration\n"
               "      --options       list every option with its default\n"
               "  -V, --version       print the version\n");
}

static void list_options(void)
{
    for (int t = 0; tn_config_tables[t] != NULL; t++)
        for (const conf_opt *o = tn_config_tables[t]; o->key; o++)
            printf("%s\t%s\t%s\n", o->key, o->def ? o->def : "", o->help);
}

/* The master's hook for a worker that died under a console statement: the audit log is the
 * panel's (admin/), which the master does not know; this file knows both. */
static void audit_died(const tn_config *cfg, const char *audit_id, const char *req_id,
                       const char *how)
{
    char err[512];
    if (admin_audit_died(&cfg->admin, audit_id, req_id, how, err, sizeof(err)) != TN_OK)
        log_error("cannot close audit entry %s (%s): %s", audit_id, how, err);
}

/* Load the app in a child so its constructors cannot disturb this process. */
static int check_app(const char *path)
{
    pid_t pid = fork();
    if (pid < 0)
        return TN_ERR;
    if (pid == 0) {
        tn_app_module m;
        char err[512];
        if (app_load(path, &m, err, sizeof(err)) != TN_OK) {
            fprintf(stderr, "%s\n", err);
            _exit(1);
        }
        _exit(0);
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
        int rc = check_app(cfg->app) == TN_OK ? 0 : 1;
        if (rc == 0) {
            if (test == 2) {
                conf_dump(tn_config_table, cfg, stdout);
                conf_dump(tenancy_config_table, &cfg->tenancy, stdout);
                conf_dump(admin_config_table, &cfg->admin, stdout);
            }
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
