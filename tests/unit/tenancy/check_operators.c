/*
 * check_operators.c — tenancy/operators: the operators' name rule and the password file
 * (a user's line read back, replaced in place, others kept, a missing file made).
 */
#include "core/first.h"
#include "core/rc.h"
#include "tenancy/operators.h"
#include "tests/unit/check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(test_name_rule)
{
    ck_assert(operators_name_ok("admin"));
    ck_assert(operators_name_ok("ops.team-1_x@example.org"));
    char max[66];
    memset(max, 'a', 64);
    max[64] = '\0';
    ck_assert(operators_name_ok(max));
    max[64] = 'a';
    max[65] = '\0';
    ck_assert(!operators_name_ok(max));
    ck_assert(!operators_name_ok(""));
    ck_assert(!operators_name_ok("a:b"));   /* ':' ends the name in the file */
    ck_assert(!operators_name_ok("a b"));
    ck_assert(!operators_name_ok("a\nb"));
}
END_TEST

START_TEST(test_file_default)
{
    arena *a = arena_create(1024);
    ck_assert_str_eq(operators_file(NULL, "/var/lib/t", a), "/var/lib/t/admin.passwd");
    ck_assert_str_eq(operators_file("", "/var/lib/t", a), "/var/lib/t/admin.passwd");
    ck_assert_str_eq(operators_file("/etc/pw", "/var/lib/t", a), "/etc/pw");
    arena_destroy(a);
}
END_TEST

static void slurp(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = '\0';
    fclose(f);
}

START_TEST(test_write_read)
{
    char dir[] = "/tmp/check_operators.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], err[512], hash[256], text[1024];
    snprintf(path, sizeof(path), "%s/admin.passwd", dir);
    ck_assert_int_eq(operators_read_hash(path, "admin", hash, sizeof(hash)), TN_IO);
    /* made when missing, mode 0640 */
    ck_assert_int_eq(operators_write_hash(path, "admin", "$y$one", (uid_t)-1, (gid_t)-1, NULL, err,
                                          sizeof(err)), TN_OK);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0640);
    ck_assert_int_eq(operators_write_hash(path, "bob", "$y$bob", (uid_t)-1, (gid_t)-1, NULL, err,
                                          sizeof(err)), TN_OK);
    /* a prefix of a name is another user */
    ck_assert_int_eq(operators_write_hash(path, "adm", "$y$adm", (uid_t)-1, (gid_t)-1, NULL, err,
                                          sizeof(err)), TN_OK);
    bool replaced = true;
    ck_assert_int_eq(operators_write_hash(path, "carol", "$y$carol", (uid_t)-1, (gid_t)-1,
                                          &replaced, err, sizeof(err)), TN_OK);
    ck_assert(!replaced);
    ck_assert_int_eq(operators_write_hash(path, "admin", "$y$two", (uid_t)-1, (gid_t)-1,
                                          &replaced, err, sizeof(err)), TN_OK);
    ck_assert(replaced);
    slurp(path, text, sizeof(text));
    ck_assert_str_eq(text, "admin:$y$two\nbob:$y$bob\nadm:$y$adm\ncarol:$y$carol\n");
    ck_assert_int_eq(operators_read_hash(path, "admin", hash, sizeof(hash)), TN_OK);
    ck_assert_str_eq(hash, "$y$two");
    ck_assert_int_eq(operators_read_hash(path, "adm", hash, sizeof(hash)), TN_OK);
    ck_assert_str_eq(hash, "$y$adm");
    ck_assert_int_eq(operators_read_hash(path, "dave", hash, sizeof(hash)), TN_NOTFOUND);
    /* a folder that is not there: said, nothing left behind */
    char bad[300];
    snprintf(bad, sizeof(bad), "%s/no/such/file", dir);
    ck_assert_int_eq(operators_write_hash(bad, "admin", "$y$x", (uid_t)-1, (gid_t)-1, NULL, err,
                                          sizeof(err)), TN_IO);
    ck_assert(strstr(err, "cannot create") != NULL);
    unlink(path);
    rmdir(dir);
}
END_TEST

Suite *operators_suite(void);
Suite *operators_suite(void)
{
    Suite *s = suite_create("operators");
    TCase *tc = tcase_create("file");
    tcase_add_test(tc, test_name_rule);
    tcase_add_test(tc, test_file_default);
    tcase_add_test(tc, test_write_read);
    suite_add_tcase(s, tc);
    return s;
}
