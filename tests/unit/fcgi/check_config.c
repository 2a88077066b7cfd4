/* check_config.c — tenancyd's option table: defaults parse, cross-option checks, errors. */
#include "core/first.h"
#include "fcgi/config.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static tn_config *load_text(const char *text, conf_error *err)
{
    snprintf(path, sizeof(path), "/tmp/tenancyd-conf-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    tn_config *c = config_load(path, err);
    unlink(path);
    return c;
}

START_TEST(test_minimal_and_defaults)
{
    conf_error err;
    tn_config *c = load_text("app = /x/hello.so\n", &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->pm, PM_DYNAMIC);
    ck_assert_int_eq(c->max_children, 5);
    ck_assert_int_eq(c->request_timeout_ms, 60000);
    ck_assert_str_eq(c->status_path, "/_tenancy/status");
    ck_assert(c->log_requests);
    ck_assert_int_eq(c->tenancy.jobs_hooks, HOOKS_AUTO);
    config_free(c);
}
END_TEST

/* jobs.hooks: off, on or auto; a boolean's other spellings are refused, naming the line */
START_TEST(test_jobs_hooks)
{
    conf_error err;
    char msg[1024];
    static const struct {
        const char *value;
        int want;
    } ok[] = {{"off", HOOKS_OFF}, {"on", HOOKS_ON}, {"auto", HOOKS_AUTO}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char text[96];
        snprintf(text, sizeof(text), "app = /x.so\njobs.hooks = %s\n", ok[i].value);
        tn_config *c = load_text(text, &err);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(c->tenancy.jobs_hooks, ok[i].want);
        config_free(c);
    }
    tn_config *c = load_text("app = /x.so\njobs.hooks = yes\n", &err);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.line, 2);
    conf_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "off, on, auto") != NULL, "%s", msg);
}
END_TEST

START_TEST(test_sections_and_errors)
{
    conf_error err;
    char msg[1024];
    tn_config *c = load_text("app = /x.so\n[pm]\nmax_children = 8\nmin_spare = 2\nmax_spare = 4\n",
                             &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->max_children, 8);
    config_free(c);

    c = load_text("app = /x.so\npm = dynamic\npm.min_spare = 5\npm.max_spare = 2\n", &err);
    ck_assert_ptr_null(c);
    conf_error_format(&err, msg, sizeof(msg));
    ck_assert_ptr_nonnull(strstr(msg, "pm.min_spare (5) is above pm.max_spare (2)"));

    c = load_text("listen = /tmp/x.sock\n", &err);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.msg, "no app module"));

    c = load_text("app = /x.so\n\npm.max_children = 0\n", &err);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.line, 3);

    c = load_text("app = /x.so\nallowed_clients = 10.0.0.0/40\n", &err);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.msg, "allowed_clients"));

    c = load_text("app = /x.so\nslow_request = 5s\nrequest_timeout = 2s\n", &err);
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_every_option_has_help_and_valid_default)
{
    for (const conf_opt *o = tn_config_table; o->key; o++) {
        ck_assert_msg(o->help != NULL && o->help[0] != '\0', "%s has no help", o->key);
    }
}
END_TEST

/* A part the composition root adds: its keys are read into its own struct of each
 * generation, its check runs after the host's and the chain's, and its refusal refuses the
 * generation. Without the part, its keys are unknown. */
struct part_opts {
    int n;
    const char *word;
};
static const conf_opt part_table[] = {
    {"part.n", CONF_INT, offsetof(struct part_opts, n), "7", 0, 100, NULL, 0, "a number"},
    {"part.word", CONF_STR, offsetof(struct part_opts, word), "", 0, 0, NULL, 0, "a word"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};

static int part_finish(tn_config *gen, void *obj, char *err, size_t errlen)
{
    const struct part_opts *p = obj;
    if (strcmp(p->word, "no") == 0)
        return tn_errf(err, errlen, TN_INVALID, "part.word: no (%d children)", gen->max_children);
    return TN_OK;
}

static const config_part part = {"part", part_table, sizeof(struct part_opts), part_finish};

START_TEST(test_parts)
{
    conf_error err;
    char msg[1024];
    tn_config *c = load_text("app = /x.so\npart.n = 3\n", &err);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.line, 2);   /* not added yet: an unknown option */
    ck_assert_ptr_eq(config_parts()[0], NULL);

    ck_assert_int_eq(config_add_part(&part), TN_OK);
    ck_assert_ptr_eq(config_parts()[0], &part);
    c = load_text("app = /x.so\n[part]\nn = 3\n", &err);
    ck_assert_ptr_nonnull(c);
    const struct part_opts *p = config_part_of(c, &part);
    ck_assert_int_eq(p->n, 3);
    ck_assert_str_eq(p->word, "");
    config_free(c);

    c = load_text("app = /x.so\npm.max_children = 9\npart.word = no\n", &err);
    ck_assert_ptr_null(c);
    conf_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "part.word: no (9 children)") != NULL, "%s", msg);

    for (int i = 1; i < TN_MAX_CONFIG_PARTS; i++)
        ck_assert_int_eq(config_add_part(&part), TN_OK);
    ck_assert_int_eq(config_add_part(&part), TN_INVALID);
    config_clear_parts();   /* the cases after it read files without the part */
}
END_TEST

Suite *config_suite(void);
Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("fcgi");
    tcase_add_test(tc, test_minimal_and_defaults);
    tcase_add_test(tc, test_sections_and_errors);
    tcase_add_test(tc, test_jobs_hooks);
    tcase_add_test(tc, test_every_option_has_help_and_valid_default);
    tcase_add_test(tc, test_parts);
    suite_add_tcase(s, tc);
    return s;
}
