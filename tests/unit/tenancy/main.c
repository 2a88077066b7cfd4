/*
 * The tenancy/ unit tests: tenant records and names (no database), and the registry against
 * SQLite and against PostgreSQL.
 *
 * PostgreSQL comes from TENANCY_TEST_PG (a tenancy storage URI); run.sh beside this file
 * starts a throwaway cluster with tests/pg.sh and sets it. Without it, or when it cannot be
 * reached, this program fails with 99 (a hard error for automake): the registry suite must
 * never pass without having run against a real server.
 *
 * Owns: the list of tenancy/ suites and the temporary folder they share. Add a suite of
 * another tenancy/ module here (one check_<module>.c per module).
 */
#include "core/first.h"
#include "storage/db.h"
#include "tests/unit/check_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Suite *tenant_suite(void);
Suite *request_suite(void);   /* check_request.c: the host normaliser, the routing host */
Suite *lookup_suite(void);
Suite *appcache_suite(void);
Suite *chain_suite(void);
Suite *registry_suite(bool pg);
void registry_tests_init(const char *dir, const char *pg);
Suite *dump_suite(void);   /* check_dump.c: the dump format, copy_type_for */
Suite *rolekey_suite(void);   /* check_rolekey.c: the role key and the SCRAM verifiers */
Suite *operators_suite(void);   /* check_operators.c: the panel's password file */
Suite *events_suite(const char *pg);   /* check_events.c: the host's event log */
Suite *jobs_suite(bool pg);   /* check_jobs.c: the job store, on both backends */
void jobs_tests_init(const char *dir, const char *pg);

/* Remove the flat temporary folder the cases wrote their files into. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int main(void)
{
    const char *pg = getenv("TENANCY_TEST_PG");
    if (pg == NULL || *pg == '\0') {
        fprintf(stderr, "check_tenancy: TENANCY_TEST_PG is not set; run "
                        "tests/unit/tenancy/run.sh, which starts a PostgreSQL for it\n");
        return 99;
    }
    tn_db *probe = NULL;
    char err[512];
    if (db_open(pg, NULL, &probe, err, sizeof(err)) != TN_OK) {
        fprintf(stderr, "check_tenancy: cannot reach PostgreSQL at TENANCY_TEST_PG: %s\n", err);
        return 99;
    }
    db_close(probe);

    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/tenancy-registry.XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("check_tenancy: mkdtemp");
        return 99;
    }
    registry_tests_init(dir, pg);
    jobs_tests_init(dir, pg);
    Suite *s[] = {tenant_suite(),   request_suite(),       lookup_suite(),
                  appcache_suite(), chain_suite(),         registry_suite(false),
                  registry_suite(true), dump_suite(),      rolekey_suite(),
                  operators_suite(), events_suite(pg), jobs_suite(false), jobs_suite(true)};
    int rc = run_suites(s, (int)TN_ARRAY_LEN(s));
    remove_dir(dir);
    return rc;
}
