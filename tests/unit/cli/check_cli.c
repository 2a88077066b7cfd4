/*
 * check_cli.c — cli/conf: what the `tenancy` command reads of tenancyd.conf. The rows it
 * declares for itself must stay the rows of the modules that own them (key, type, default),
 * and a file written for the whole host (pm.*, admin.*, placements) must load.
 */
#include "core/first.h"
#include "admin/config.h"
#include "cli/conf.h"
#include "core/rc.h"
#include "fcgi/config.h"
#include "tenancy/placement.h"
#include "tests/unit/check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The owner's row of key, in any of the host's tables. */
static const conf_opt *owner_row(const char *key)
{
    const conf_opt *tables[] = {tn_config_table, admin_config_table, tenancy_config_table};
    for (size_t i = 0; i < TN_ARRAY_LEN(tables); i++) {
        const conf_opt *o = conf_find(tables[i], key);
        if (o != NULL)
            return o;
    }
    return NULL;
}

START_TEST(test_rows_match_owners)
{
    int n = 0;
    for (const conf_opt *o = cli_config_table; o->key != NULL; o++, n++) {
        const conf_opt *own = owner_row(o->key);
        ck_assert_msg(own != NULL, "%s: no module owns it", o->key);
        ck_assert_msg(own->type == o->type, "%s: type drifted", o->key);
        ck_assert_msg(same_str(own->def, o->def), "%s: default drifted", o->key);
        ck_assert_msg(own->min == o->min && own->max == o->max, "%s: bounds drifted", o->key);
        /* never a second row of a tenancy option: that table is linked whole */
        ck_assert_msg(conf_find(tenancy_config_table, o->key) == NULL, "%s", o->key);
    }
    ck_assert_int_eq(n, 3);
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_load_host_file)
{
    char dir[] = "/tmp/check_cli.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/tenancyd.conf", dir);
    write_file(path, "app = /nowhere/app.so\n"
                     "user = www-data\n"
                     "state_dir = /var/lib/t\n"
                     "placement.main.dsn = postgres:host=/tmp dbname=x\n"
                     "placement.main.mode = schema\n"
                     "[pm]\nmax_children = 7\n"
                     "[admin]\nhost = admin.localhost\nrow_cap = 5\n"
                     "[tenant]\nresolvers = host\n");
    conf_error cerr;
    cli_config *c = cli_config_load(path, &cerr);
    char msg[1024];
    conf_error_format(&cerr, msg, sizeof(msg));
    ck_assert_msg(c != NULL, "%s", msg);
    ck_assert_str_eq(c->user, "www-data");
    ck_assert_ptr_null(c->group);
    ck_assert_str_eq(c->password_file, "/var/lib/t/admin.passwd");
    ck_assert_ptr_nonnull(tenancy_placement(&c->tenancy, "main"));
    ck_assert_str_eq(c->tenancy.registry_uri, "sqlite:/var/lib/t/control.db");
    cli_config_free(c);

    /* the command's own rows and the tenancy options are still checked */
    write_file(path, "state_dir = /var/lib/t\nadmin.password_file = /etc/pw\n");
    c = cli_config_load(path, &cerr);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->password_file, "/etc/pw");
    cli_config_free(c);
    write_file(path, "lookup_cache = maybe\n");
    ck_assert_ptr_null(cli_config_load(path, &cerr));
    write_file(path, "placement.BAD NAME.dsn = x\n");
    ck_assert_ptr_null(cli_config_load(path, &cerr));
    write_file(path, "user = a\nuser = b\n");
    ck_assert_ptr_null(cli_config_load(path, &cerr));
    unlink(path);
    ck_assert_ptr_null(cli_config_load(path, &cerr));
    rmdir(dir);
}
END_TEST

/* placement.NAME.login = group: its group logins named after the placement, a tenant's
 * group from its storage name alone (the same every time, spread over the groups), and the
 * settings that cannot go together refused with the file and line. */
START_TEST(test_load_group_logins)
{
    char dir[] = "/tmp/check_cli.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], msg[1024];
    snprintf(path, sizeof(path), "%s/tenancyd.conf", dir);
    write_file(path, "state_dir = /var/lib/t\n"
                     "placement.eu-1.dsn = postgres:host=/tmp dbname=x\n"
                     "placement.eu-1.login = group\n"
                     "placement.eu-1.login_groups = 3\n"
                     "placement.us.dsn = postgres:host=/tmp dbname=x\n"
                     "placement.us.login = group\n");
    conf_error cerr;
    cli_config *c = cli_config_load(path, &cerr);
    conf_error_format(&cerr, msg, sizeof(msg));
    ck_assert_msg(c != NULL, "%s", msg);
    const placement *eu = tenancy_placement(&c->tenancy, "eu-1");
    ck_assert_int_eq(eu->login_groups, 3);
    ck_assert_str_eq(eu->group_roles[0], "tn_eu_1_0");
    ck_assert_str_eq(eu->group_roles[2], "tn_eu_1_2");
    ck_assert_int_eq(tenancy_placement(&c->tenancy, "us")->login_groups, PLACEMENT_GROUPS_DEFAULT);
    int seen[3] = {0};
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t_org%d", i);
        storage_target t, again;
        ck_assert_int_eq(placement_target_of(&c->tenancy, "eu-1", name, NULL, &t), TN_OK);
        ck_assert_int_eq(placement_target_of(&c->tenancy, "eu-1", name, NULL, &again), TN_OK);
        ck_assert_ptr_nonnull(t.group_role);
        ck_assert_ptr_eq(t.group_role, again.group_role);
        ck_assert_str_eq(t.role, name);
        ck_assert(!t.login_as_role);
        int g = placement_group_of(name, 3);
        ck_assert_str_eq(t.group_role, eu->group_roles[g]);
        seen[g]++;
    }
    for (int g = 0; g < 3; g++)   /* about a third each */
        ck_assert_msg(seen[g] > 60, "group %d has %d of 300", g, seen[g]);
    storage_target t;
    ck_assert_int_eq(placement_target_of(&c->tenancy, "sqlite", "/x/a.db", NULL, &t), TN_OK);
    ck_assert_ptr_null(t.group_role);
    cli_config_free(c);

    const char *bad[][2] = {
        {"placement.p.dsn = postgres:host=/tmp dbname=x\nplacement.p.login_groups = 4\n",
         "only with login = group"},
        {"placement.p.dsn = postgres:host=/tmp dbname=x\nplacement.p.mode = database\n"
         "placement.p.login = group\n",
         "schema mode only"},
        {"placement.p.dsn = postgres:host=/tmp dbname=x\nplacement.p.login = group\n"
         "placement.p.login_groups = 65\n",
         "tenancyd.conf:4: placement.p.login_groups: expected a count from 1 to 64"},
        {"placement.p.dsn = postgres:host=/tmp dbname=x\nplacement.p.login = groups\n",
         "expected shared, tenant or group"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text), "state_dir = /var/lib/t\n%s", bad[i][0]);
        write_file(path, text);
        ck_assert_msg(cli_config_load(path, &cerr) == NULL, "accepted: %s", bad[i][0]);
        conf_error_format(&cerr, msg, sizeof(msg));
        ck_assert_msg(strstr(msg, bad[i][1]) != NULL, "%s: got '%s'", bad[i][1], msg);
    }
    unlink(path);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("conf");
    tcase_add_test(tc, test_rows_match_owners);
    tcase_add_test(tc, test_load_host_file);
    tcase_add_test(tc, test_load_group_logins);
    suite_add_tcase(s, tc);
    Suite *all[] = {s};
    return run_suites(all, 1);
}
