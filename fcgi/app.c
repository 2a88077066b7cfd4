/*
 * app.c — app modules (see app.h).
 * Must not: call the app's init or handler (worker.c and route.c do, with its context set).
 */
#include "core/first.h"
/* The public header before core/rc.h: the codes declared in this file are then the ones apps
 * are built with, and the assert below compares core's list with them. */
#ifdef TN_CORE_RC_H
#error "fcgi/app.c must see include/tenancy.h before core/rc.h"
#endif
#include "fcgi/app.h"
#include "core/log.h"
#include "core/rc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* An app returns codes and passes log levels compiled from include/tenancy.h, and the host
 * reads them with core's: the two must agree value for value. */
#define TN_RC_SAME(name, value, text)                                                        \
    _Static_assert(name == (value), #name " differs between include/tenancy.h and core/rc.h");
TN_RC_LIST(TN_RC_SAME)
#undef TN_RC_SAME
#define TN_LOG_SAME(name, value)                                                             \
    _Static_assert(name == (value), #name " differs between include/tenancy.h and core/log.h");
TN_LOG_LIST(TN_LOG_SAME)
#undef TN_LOG_SAME

int app_load(const char *path, tn_app_module *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    /* RTLD_LOCAL: two generations' modules never resolve symbols against each other. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        return tn_errf(err, errlen, TN_NOTFOUND,
                       "app %s: cannot load: %s", path, e ? e : "unknown error");
    }
    const tn_app *app = dlsym(h, TN_APP_SYMBOL);
    int rc = TN_OK;
    /* The message reads the module's own tn_app, so it is written before the dlclose. */
    if (app == NULL)
        rc = tn_errf(err, errlen, TN_INVALID,
                     "app %s: no '%s' symbol (define it with TN_APP_DEFINE)", path, TN_APP_SYMBOL);
    else if (app->abi != 1 && app->abi != TN_ABI_VERSION)
        rc = tn_errf(err, errlen, TN_INVALID,
                     "app %s: built for ABI %u, this host speaks ABI 1 and %u (rebuild it)",
                     path, app->abi, (unsigned)TN_ABI_VERSION);
    else if (app->handle == NULL)
        rc = tn_errf(err, errlen, TN_INVALID, "app %s: no handle function", path);
    if (rc != TN_OK) {
        dlclose(h);
        return rc;
    }
    m->app = app;
    /* An ABI 1 module's tn_app ends before `job`: never read past it. */
    m->job = app->abi >= 2 ? app->job : NULL;
    return TN_OK;
}
