/* The core/ unit tests: one suite per module. */
#include "core/first.h"
#include "tests/unit/check_common.h"

Suite *arena_suite(void);
Suite *buf_suite(void);
Suite *conf_suite(void);
Suite *kv_suite(void);
Suite *log_suite(void);
Suite *netaddr_suite(void);
Suite *sha256_suite(void);
Suite *token_suite(void);
Suite *cron_suite(void);
Suite *sched_suite(void);

int main(void)
{
    Suite *s[] = {arena_suite(), buf_suite(), conf_suite(), kv_suite(), log_suite(),
                  netaddr_suite(), sha256_suite(), token_suite(), cron_suite(),
                  sched_suite()};
    return run_suites(s, (int)TN_ARRAY_LEN(s));
}
