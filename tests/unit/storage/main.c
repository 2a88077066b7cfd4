/*
 * The storage/ unit tests: the driver suite against SQLite and against PostgreSQL.
 *
 * PostgreSQL comes from TENANCY_TEST_PG (a tenancy storage URI); run.sh beside this file
 * starts a throwaway cluster with tests/pg.sh and sets it. Without it, or when it cannot
 * be reached, this program fails with 99 (a hard error for automake): the suite must never
 * pass without having run against a real server.
 */
#include "core/first.h"
#include "storage/db.h"
#include "tests/unit/check_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void db_tests_init(const char *dir, const char *pg);
Suite *db_suite(bool pg);
Suite *db_misc_suite(void);

/* Remove the flat temporary folder the SQLite cases wrote their files into. */
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
        fprintf(stderr, "check_storage: TENANCY_TEST_PG is not set; run "
                        "tests/unit/storage/run.sh, which starts a PostgreSQL for it\n");
        return 99;
    }
    tn_db *probe = NULL;
    char err[512];
    if (db_open(pg, NULL, &probe, err, sizeof(err)) != TN_OK) {
        fprintf(stderr, "check_storage: cannot reach PostgreSQL at TENANCY_TEST_PG: %s\n", err);
        return 99;
    }
    db_close(probe);

    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/tenancy-storage.XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("check_storage: mkdtemp");
        return 99;
    }
    db_tests_init(dir, pg);
    Suite *s[] = {db_misc_suite(), db_suite(false), db_suite(true)};
    int rc = run_suites(s, (int)TN_ARRAY_LEN(s));
    remove_dir(dir);
    return rc;
}
