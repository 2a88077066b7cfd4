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

#include <errno.h>
#include <libpq-fe.h>
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
            tn_db_exec(db, "LISTEN tenancy_registry", 0, NULL) != TN_OK) {
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
        PGconn *pg = tn_db_native(db);
        while (!*stop) {
            struct pollfd p = {.fd = PQsocket(pg), .events = POLLIN};
            int n = poll(&p, 1, 1000);
            if (n < 0 && errno != EINTR)
                break;
            if (n <= 0)
                continue;
            if (!PQconsumeInput(pg)) {
                log_warn("registry watcher: connection lost: %s", PQerrorMessage(pg));
                break;
            }
            bool any = false;
            PGnotify *nt;
            while ((nt = PQnotifies(pg)) != NULL) {
                any = true;
                PQfreemem(nt);
            }
            if (any)
                bump(cfg, &g);
        }
        db_close(db);
    }
    gen_close(g);
    return 0;
}
