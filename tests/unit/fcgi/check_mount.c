/* check_mount.c — mounts (fcgi/mount.c): the mount lines through the config loader, their
 * checks with file and line, the order they are matched in, and the longest-prefix match. */
#include "core/first.h"
#include "fcgi/config.h"
#include "fcgi/mount.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tn_config *load_text(const char *text, conf_error *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/tenancyd-mount-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    tn_config *c = config_load(path, err);
    unlink(path);
    return c;
}

/* The file is refused at `line` (0: not tied to a line) with `needle` in the message. */
static void refused(const char *text, int line, const char *needle)
{
    conf_error err;
    tn_config *c = load_text(text, &err);
    ck_assert_msg(c == NULL, "accepted: %s", text);
    ck_assert_msg(err.line == line, "line %d, expected %d: %s", err.line, line, err.msg);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' not in '%s'", needle, err.msg);
}

START_TEST(test_parse)
{
    conf_error err;
    tn_config *c = load_text("app = /x/root.so\n"
                             "mount.data.prefix = /api\n"
                             "mount.data.app = /x/data.so\n"
                             "[mount.v2]\n"
                             "app = /x/v2.so\n"
                             "prefix = /api/v2\n",
                             &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    ck_assert_str_eq(c->app, "/x/root.so");
    ck_assert_int_eq(c->mounts.n, 2);
    /* longest first, whatever the order of the file */
    ck_assert_str_eq(c->mounts.m[0].name, "v2");
    ck_assert_str_eq(c->mounts.m[0].prefix, "/api/v2");
    ck_assert_str_eq(c->mounts.m[0].app, "/x/v2.so");
    ck_assert_int_eq(c->mounts.m[0].len, 7);
    ck_assert_str_eq(c->mounts.m[1].name, "data");
    config_free(c);

    /* Mounts alone: no root app needed (unmatched paths get 404). */
    c = load_text("mount.a.prefix = /a\nmount.a.app = /x/a.so\n", &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    ck_assert_ptr_null(c->app);
    config_free(c);
    /* Neither: refused, as before mounts existed. */
    refused("listen = /tmp/x.sock\n", 0, "no app module");
}
END_TEST

START_TEST(test_refusals)
{
    refused("app = /r.so\n\nmount.a.prefix = api\n", 3, "must start with '/'");
    refused("app = /r.so\nmount.a.prefix = /api/\n", 2, "must not end with '/'");
    refused("app = /r.so\nmount.a.prefix = /\n", 2, "the root");
    refused("app = /r.so\nmount.a.prefix = /api/../x\n", 2, "'..' segment");
    refused("app = /r.so\nmount.a.prefix = /..\n", 2, "'..' segment");
    refused("app = /r.so\nmount.a.prefix = /a/./b\n", 2, "'.' or '..' segment");
    refused("app = /r.so\nmount.a.prefix = /a//b\n", 2, "empty segment");
    refused("app = /r.so\nmount.a.prefix = /a%2fb\n", 2, "may hold only");
    refused("app = /r.so\nmount.a.prefix = /a b\n", 2, "may hold only");
    refused("app = /r.so\nmount.a.prefix = \n", 2, "empty value");
    refused("app = /r.so\nmount.a.prefix = /a\nmount.b.prefix = /a\n", 3,
            "'/a' is mounted already (mount.a)");
    refused("app = /r.so\nmount.a.prefix = /a\nmount.a.prefix = /b\n", 3, "already set");
    refused("app = /r.so\nmount.A.prefix = /a\n", 2, "expected mount.NAME.prefix");
    refused("app = /r.so\nmount.a.path = /a\n", 2, "expected mount.NAME.prefix");
    refused("app = /r.so\nmount.prefix = /a\n", 2, "expected mount.NAME.prefix");
    /* incomplete: said once the file is read, naming the mount */
    refused("app = /r.so\nmount.a.prefix = /a\n", 0, "mount.a has no app");
    refused("app = /r.so\nmount.a.app = /a.so\n", 0, "mount.a has no prefix");
    /* bounded */
    char text[4096] = "app = /r.so\n";
    for (int i = 0; i <= TN_MAX_MOUNTS; i++) {
        size_t n = strlen(text);
        snprintf(text + n, sizeof(text) - n, "mount.m%d.prefix = /m%d\nmount.m%d.app = /m.so\n",
                 i, i, i);
    }
    char want[64];
    snprintf(want, sizeof(want), "at most %d mounts", TN_MAX_MOUNTS);
    refused(text, 2 + 2 * TN_MAX_MOUNTS, want);
    char longp[TN_MOUNT_PREFIX_MAX + 40] = "app = /r.so\nmount.a.prefix = /";
    size_t n = strlen(longp);
    memset(longp + n, 'x', TN_MOUNT_PREFIX_MAX);
    strcpy(longp + n + TN_MOUNT_PREFIX_MAX, "\n");
    refused(longp, 2, "too long");
}
END_TEST

START_TEST(test_match)
{
    conf_error err;
    tn_config *c = load_text("app = /r.so\n"
                             "mount.a.prefix = /api\nmount.a.app = /a.so\n"
                             "mount.b.prefix = /api/v2\nmount.b.app = /b.so\n"
                             "mount.c.prefix = /demo\nmount.c.app = /c.so\n",
                             &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    const mount_set *s = &c->mounts;
    struct {
        const char *path, *name, *rest;
    } cases[] = {
        {"/api", "a", "/"},
        {"/api/", "a", "/"},
        {"/api/x/y", "a", "/x/y"},
        {"/apix", NULL, NULL},        /* a segment boundary, not a string prefix */
        {"/api/v2", "b", "/"},        /* the longest prefix wins */
        {"/api/v2/k", "b", "/k"},
        {"/api/v20", "a", "/v20"},
        {"/demo/greet", "c", "/greet"},
        {"/Demo", NULL, NULL},        /* case matters, as in nginx's locations */
        {"/", NULL, NULL},
        {"", NULL, NULL},
        {"/ap", NULL, NULL},
    };
    for (size_t i = 0; i < TN_ARRAY_LEN(cases); i++) {
        const char *rest = NULL;
        int k = mount_match(s, cases[i].path, &rest);
        if (cases[i].name == NULL) {
            ck_assert_msg(k == -1, "%s matched %d", cases[i].path, k);
            continue;
        }
        ck_assert_msg(k >= 0, "%s matched nothing", cases[i].path);
        ck_assert_str_eq(s->m[k].name, cases[i].name);
        ck_assert_str_eq(rest, cases[i].rest);
    }
    config_free(c);
}
END_TEST

Suite *mount_suite(void);
Suite *mount_suite(void)
{
    Suite *s = suite_create("mount");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_match);
    suite_add_tcase(s, tc);
    return s;
}
