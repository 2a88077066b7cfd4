/* The apps/data unit tests: the data app's pure parts (apps/data/sqltext.c, csv.c, dump.c,
 * jsonout.c). */
#include "tests/unit/check_common.h"
#include "tests/unit/data/data_test.h"

int main(void)
{
    Suite *s[] = {data_sqltext_suite(), data_csv_suite(), data_dump_suite(), data_json_suite()};
    return run_suites(s, (int)(sizeof(s) / sizeof(s[0])));
}
