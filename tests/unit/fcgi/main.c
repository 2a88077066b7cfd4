/* The fcgi/ unit tests: one suite per module. */
#include "core/first.h"
#include "tests/unit/check_common.h"

Suite *proto_suite(void);
Suite *config_suite(void);
Suite *listen_suite(void);
Suite *guard_suite(void);
Suite *accesslog_suite(void);
Suite *handler_suite(void);
Suite *mount_suite(void);   /* check_mount.c: mount lines, their checks, the match */
Suite *hub_suite(void);     /* check_hub.c: SSE text, STDOUT records, the tenant table */
Suite *conn_suite(void);    /* check_conn.c: the open-files limit a worker raises */
Suite *scoreboard_suite(void);   /* check_scoreboard.c: what readers of every slot touch */
Suite *affinity_suite(void);     /* check_affinity.c: homes, inboxes, what is not sent */

int main(void)
{
    Suite *s[] = {proto_suite(), config_suite(),    listen_suite(),
                  guard_suite(), accesslog_suite(), handler_suite(),
                  mount_suite(), hub_suite(),       conn_suite(),
                  scoreboard_suite(), affinity_suite()};
    return run_suites(s, (int)TN_ARRAY_LEN(s));
}
