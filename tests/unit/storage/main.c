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
#include "tests/unit/storage/storage_test.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void db_tests_init(const char *dir, const char *pg);
Suite *db_suite(bool pg);
Suite *db_misc_suite(void);
void migrate_tests_init(const char *pg);   /* check_migrate.c */
void migrate_tests_fini(void);
Suite *migrate_suite(bool pg);
Suite *migrate_misc_suite(void);
Suite *target_suite(void);   /* check_target.c */
Suite *pool_suite(void);     /* check_pool.c */
Suite *catalog_suite(void);  /* check_catalog.c */
Suite *membound_suite(void); /* check_membound.c */

const char *st_pg;           /* storage_test.h */
char st_dir[256];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Remove the temporary folder the SQLite cases wrote their files (and folders) into. */
static void remove_dir(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
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
    migrate_tests_init(pg);
    st_pg = pg;
    snprintf(st_dir, sizeof(st_dir), "%s", dir);
    Suite *s[] = {db_misc_suite(), db_suite(false), db_suite(true), migrate_misc_suite(),
                  migrate_suite(false), migrate_suite(true), target_suite(),
                  pool_suite(), membound_suite(), catalog_suite()};
    int rc = run_suites(s, (int)TN_ARRAY_LEN(s));
    remove_dir(dir);
    migrate_tests_fini();
    return rc;
}
