/*
 * app.c — app modules (see app.h).
 * Must not: call the app's init or handler (worker.c and route.c do, with its context set).
 */
#include "core/first.h"
#include "fcgi/app.h"
#include "core/rc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int app_load(const char *path, tn_app_module *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    /* RTLD_LOCAL: two generations' modules never resolve symbols against each other. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(err, errlen, "app %s: cannot load: %s", path, e ? e : "unknown error");
        return TN_NOTFOUND;
    }
    const tn_app *app = dlsym(h, TN_APP_SYMBOL);
    if (app == NULL) {
        snprintf(err, errlen, "app %s: no '%s' symbol (define it with TN_APP_DEFINE)", path,
                 TN_APP_SYMBOL);
        dlclose(h);
        return TN_INVALID;
    }
    if (app->abi != TN_ABI_VERSION) {
        snprintf(err, errlen, "app %s: built for ABI %u, this host speaks ABI %u (rebuild it)",
                 path, app->abi, (unsigned)TN_ABI_VERSION);
        dlclose(h);
        return TN_INVALID;
    }
    if (app->handle == NULL) {
        snprintf(err, errlen, "app %s: no handle function", path);
        dlclose(h);
        return TN_INVALID;
    }
    m->handle = h;
    m->app = app;
    return TN_OK;
}

void app_unload(tn_app_module *m)
{
    if (m->handle != NULL)
        dlclose(m->handle);
    m->handle = NULL;
    m->app = NULL;
}
