/*
 * app.h — loading an app module.
 *
 * Workers load the app after fork, so the master never runs app code and every reload
 * picks up the file as it is on disk now (a new build deploys with one SIGHUP).
 */
#ifndef TN_FCGI_APP_H
#define TN_FCGI_APP_H

#include <stddef.h>

#include "tenancy.h"

typedef struct tn_app_module {
    const tn_app *app;
    int (*job)(tn_request *r, const tn_job *job);   /* the job handler (NULL: none, or ABI 1) */
} tn_app_module;

/* dlopen the module and check its `tenancy_app` symbol and ABI version. A loaded module
 * stays for the life of the process (a worker loads one and exits with it).
 * Returns TN_OK, or TN_NOTFOUND / TN_INVALID with a message in err. */
int app_load(const char *path, tn_app_module *m, char *err, size_t errlen);

#endif
