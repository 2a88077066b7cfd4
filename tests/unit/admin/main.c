/* The admin/ unit tests. */
#include "core/first.h"
#include "tests/unit/check_common.h"

Suite *admin_suite(void);

int main(void)
{
    Suite *s[] = {admin_suite()};
    return run_suites(s, (int)TN_ARRAY_LEN(s));
}
