/*
 * watch.c — LISTEN for registry changes and bump the local generation (see watch.h).
 * Must not: read or change the registry's tables (it only listens), or exit on a lost
 * connection (it reconnects; the master restarts it if it dies anyway).
 */
#include "core/first.h"
#include "tenancy/watch.h"
#include "core/clock.h"
#include "core/log.h"
#include "storage/db.h"
#include "tenancy/gen.h"

#include <poll.h>
#include <string.h>

bool watch_needed(const tenancy_config *cfg)
{
    const char *b = cfg->enabled ? db_uri_backend(cfg->registry_uri) : NULL;
    return b != NULL && strcmp(b, "postgres") == 0;
}

static void bump(const tenancy_config *cfg, gen_map **g)
{
    char err[256];
    if (*g == NULL && gen_open(cfg->gen_path, true, true, g, err, sizeof(err)) != TN_OK) {
        log_error("registry watcher: %s", err);
        *g = NULL;
        return;
    }
    gen_bump(*g);
}

int watch_run(const tenancy_config *cfg, volatile sig_atomic_t *stop)
{
    gen_map *g = NULL;
    int64_t delay = 1000;
    while (!*stop) {
        tn_db *db = NULL;
        char err[512];
        if (db_open(cfg->registry_uri, NULL, &db, err, sizeof(err)) != TN_OK ||
            db_listen(db, "tenancy_registry") != TN_OK) {
            log_warn("registry watcher: cannot listen (%s); retrying in %lld ms",
                     db ? tn_db_error(db) : err, (long long)delay);
            db_close(db);
            for (int64_t end = clock_mono_ms() + delay; !*stop && clock_mono_ms() < end;)
                poll(NULL, 0, 100);
            delay = delay * 2 > 30000 ? 30000 : delay * 2;
            continue;
        }
        delay = 1000;
        log_info("registry watcher: listening for changes from other hosts");
        bump(cfg, &g);   /* anything missed while not listening */
        while (!*stop) {
            int rc = db_wait_notify(db, 1000);   /* a signal ends the wait early: TN_TIMEOUT */
            if (rc == TN_OK) {
                bump(cfg, &g);
            } else if (rc != TN_TIMEOUT) {
                log_warn("registry watcher: connection lost: %s", tn_db_error(db));
                break;
            }
        }
        db_close(db);
    }
    gen_close(g);
    return 0;
}
