/*
 * check_rolekey.c — tenancy/rolekey: the role key, the passwords derived from it, and the
 * SCRAM verifiers made for CREATE ROLE (checked against an independent PBKDF2: Python's
 * hashlib gave the expected strings; a real server login with them is isolation.sh's).
 */
#include "core/first.h"
#include "core/rc.h"
#include "tenancy/rolekey.h"
#include "tests/unit/check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char PW[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

START_TEST(test_scram_known)
{
    uint8_t salt[16];
    for (int i = 0; i < 16; i++)
        salt[i] = (uint8_t)i;
    static const struct {
        int it;
        const char *want;
    } v[] = {
        {1, "SCRAM-SHA-256$1:AAECAwQFBgcICQoLDA0ODw==$Su2/fuCgKsVydyQ4jNmV6ZhkJS6V1QTh23sAnt17DsE=:"
            "vw98V6coe39QnOsQCA/CrObRCs9HG+Dln4+5fec27Fs="},
        {64, "SCRAM-SHA-256$64:AAECAwQFBgcICQoLDA0ODw==$K4X+xZnYe1tJwfUj6o6sSq7rTb1CYtXdeuhosmnnA/0=:"
             "E/xSSfHi1QBGpj0VO7UTDtn00mO5DhT72YOWkB1Lzw4="},
        {4096, "SCRAM-SHA-256$4096:AAECAwQFBgcICQoLDA0ODw==$Beix37AE7bLybag0SlrsZYGiPAj+3BJZDTNVZDEdle"
               "M=:BLKY+J0tYy32ZnzdC+wLrCz5MeAi16uSWf2Jm4RgD/8="},
    };
    for (size_t i = 0; i < TN_ARRAY_LEN(v); i++) {
        char out[200];
        ck_assert_int_eq(rolekey_scram(PW, salt, v[i].it, out, sizeof(out)), TN_OK);
        ck_assert_str_eq(out, v[i].want);
    }
    char small[40];
    ck_assert_int_eq(rolekey_scram(PW, salt, 1, small, sizeof(small)), TN_TOOBIG);
    /* a new salt each time: two verifiers of one password differ */
    char a[200], b[200];
    ck_assert_int_eq(rolekey_verifier(PW, a, sizeof(a)), TN_OK);
    ck_assert_int_eq(rolekey_verifier(PW, b, sizeof(b)), TN_OK);
    ck_assert_str_ne(a, b);
    ck_assert(strncmp(a, "SCRAM-SHA-256$64:", 17) == 0);
}
END_TEST

START_TEST(test_rolekey_file)
{
    char dir[] = "/tmp/check_rolekey.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], err[512], pw[65], pw2[65];
    snprintf(path, sizeof(path), "%s/role.key", dir);
    tenancy_config c;
    memset(&c, 0, sizeof(c));
    c.role_key_path = path;
    /* no key: said so, and what to run */
    ck_assert_int_eq(rolekey_password(&c, "t_a", pw, err, sizeof(err)), TN_NOTFOUND);
    ck_assert(strstr(err, "tenancy init") != NULL);
    int made = 0;
    ck_assert_int_eq(rolekey_create(&c, (uid_t)-1, (gid_t)-1, &made, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(made, 1);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq((int)st.st_size, 65);
    /* a second init keeps the key */
    ck_assert_int_eq(rolekey_create(&c, (uid_t)-1, (gid_t)-1, &made, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(made, 0);
    /* one password per role, the same every time, 64 hex digits */
    ck_assert_int_eq(rolekey_password(&c, "t_a", pw, err, sizeof(err)), TN_OK);
    ck_assert_int_eq((int)strlen(pw), 64);
    ck_assert_int_eq(rolekey_password(&c, "t_a", pw2, err, sizeof(err)), TN_OK);
    ck_assert_str_eq(pw, pw2);
    ck_assert_int_eq(rolekey_password(&c, "t_b", pw2, err, sizeof(err)), TN_OK);
    ck_assert_str_ne(pw, pw2);
    /* a malformed key file is an error, not a weak key */
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not hex\n", f);
    fclose(f);
    ck_assert_int_eq(rolekey_password(&c, "t_a", pw, err, sizeof(err)), TN_IO);
    ck_assert(strstr(err, "64 hex digits") != NULL);
    unlink(path);
    rmdir(dir);
}
END_TEST

Suite *rolekey_suite(void);
Suite *rolekey_suite(void)
{
    Suite *s = suite_create("rolekey");
    TCase *tc = tcase_create("rolekey");
    tcase_add_test(tc, test_scram_known);
    tcase_add_test(tc, test_rolekey_file);
    suite_add_tcase(s, tc);
    return s;
}
