/* check_affinity.c — tenant.affinity (fcgi/affinity.c): the choice of a tenant's home, and a
 * connection sent through a worker's inbox, counted while it waits there and taken whole by
 * the worker of that number; a home too far behind, or the busy worker a connection came
 * from, is not sent to. Two workers in one process, a real scoreboard, real socket pairs. */
#include "core/first.h"
#include "core/clock.h"
#include "fcgi/worker_int.h"
#include "storage/target.h"
#include "tests/unit/check_common.h"

#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Every number gets a share of the tenants; the same tenant always gets the same home. */
START_TEST(test_home_spread)
{
    const uint8_t homes[] = {0, 1, 2, 3};
    int count[4] = {0};
    for (int64_t id = 1; id <= 4000; id++) {
        int h = affinity_home(homes, 4, id);
        ck_assert_int_ge(h, 0);
        ck_assert_int_le(h, 3);
        ck_assert_int_eq(affinity_home(homes, 4, id), h);
        count[h]++;
    }
    for (int i = 0; i < 4; i++)
        ck_assert_msg(count[i] > 800 && count[i] < 1200, "worker %d is home to %d of 4000", i,
                      count[i]);
    ck_assert_int_eq(affinity_home(homes, 0, 7), -1);
}
END_TEST

/* A worker that leaves moves its own tenants only; the others keep their homes (their
 * backends' catalogs stay warm), and its tenants spread over the rest. */
START_TEST(test_home_stable)
{
    const uint8_t four[] = {0, 1, 2, 3}, three[] = {0, 1, 3};
    int moved = 0, spread[4] = {0};
    for (int64_t id = 1; id <= 4000; id++) {
        int before = affinity_home(four, 4, id), after = affinity_home(three, 3, id);
        if (before != 2)
            ck_assert_msg(after == before, "tenant %lld moved from %d to %d", (long long)id,
                          before, after);
        else {
            moved++;
            spread[after]++;
        }
    }
    ck_assert_int_gt(moved, 800);
    ck_assert_int_gt(spread[0], moved / 5);
    ck_assert_int_gt(spread[1], moved / 5);
    ck_assert_int_gt(spread[3], moved / 5);
}
END_TEST

static scoreboard *sb;
static tn_config cfg;
static worker_args args[2];
static int inbox[2][2];
static worker ws[2];

static void two_workers(void)
{
    sb = sb_create();
    ck_assert_ptr_nonnull(sb);
    memset(&cfg, 0, sizeof(cfg));
    cfg.max_children = 2;
    cfg.listen_shards = 1;
    cfg.keepalive_timeout_ms = 75000;
    cfg.tenancy.affinity = AFFINITY_ON;
    cfg.tenancy.enabled = true;
    cfg.tenancy.nplacements = 1;
    cfg.tenancy.placements[0].kind = TARGET_PG_SCHEMA;
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                                    inbox[i]), 0);
    __atomic_store_n(&sb->pool.slots_used, 2, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) {
        sb_slot *s = sb_slot_at(sb, i);
        s->generation = 1;
        s->index = (uint32_t)i;
        s->ready = 1;
        s->state = SB_IDLE;
        args[i] = (worker_args){.cfg = &cfg, .sb = sb, .slot = i, .index = i, .generation = 1,
                                .handoff = {-1, -1}, .shard_fd = -1,
                                .inbox = (const int (*)[2])inbox, .ninbox = 2};
        worker *w = &ws[i];
        memset(w, 0, sizeof(*w));
        w->args = &args[i];
        w->cfg = &cfg;
        w->sb = sb;
        w->slot = s;
        w->max_conns = 16;
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        ck_assert_int_ge(w->ep, 0);
    }
}

/* Both workers watching their own inbox: affinity_setup closes the other numbers' receive
 * ends in a worker process; here both workers share one process, so it is done by hand. */
static void two_watching(void)
{
    two_workers();
    for (int i = 0; i < 2; i++) {
        ws[i].inbox_fd = inbox[i][1];
        ws[i].affinity_n = 2;
    }
}

/* A tenant whose home is worker `home` (of the two). */
static int64_t tenant_at(int home)
{
    const uint8_t homes[] = {0, 1};
    for (int64_t id = 1;; id++)
        if (affinity_home(homes, 2, id) == home)
            return id;
}

/* A connection held by worker w with a request written on it; the peer end in *peer. */
static struct conn *held(worker *w, int *peer, bool kept)
{
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    ck_assert_int_eq(write(sp[1], "request", 7), 7);
    struct conn *c = conn_add(w, sp[0], clock_mono_ms());
    ck_assert_ptr_nonnull(c);
    c->kept = kept;
    *peer = sp[1];
    return c;
}

START_TEST(test_send_and_take)
{
    two_watching();
    int64_t now = clock_mono_ms();
    int peer;
    /* A tenant at home in worker 0 is served there: nothing moves. */
    struct conn *c = held(&ws[0], &peer, true);
    ck_assert(!affinity_send_home(&ws[0], c, tenant_at(0), -1, now));
    ck_assert_int_eq(ws[0].nconns, 1);
    /* One at home in worker 1 goes there, unread, and counts as queued for worker 1 until
     * worker 1 looks at its request. */
    ck_assert(affinity_send_home(&ws[0], c, tenant_at(1), -1, now));
    ck_assert_int_eq(ws[0].nconns, 0);
    ck_assert_uint_eq(sb_get(&sb->pool.affinity_sent), 1);
    ck_assert_int_eq(sb->pool.affine_queued[1], 1);
    affinity_take(&ws[1], now);
    ck_assert_int_eq(ws[1].nconns, 1);
    struct conn *t = &ws[1].conns[0];
    ck_assert(t->kept && t->ready && t->routed && t->stay);
    char got[16] = "";
    ck_assert_int_eq(recv(t->fd, got, sizeof(got), MSG_PEEK), 7);
    ck_assert_int_eq(memcmp(got, "request", 7), 0);   /* the request, still unread */
    ck_assert_int_eq(sb->pool.affine_queued[1], 0);    /* out of the inbox, */
    ck_assert_uint_eq(ws[1].slot->affine_pending, 1);  /* still not looked at */
    affinity_unqueue(&ws[1], t);
    ck_assert_uint_eq(ws[1].slot->affine_pending, 0);
    ck_assert(!t->routed);
    /* A connection that leaves the table before its request is looked at is counted out. */
    int peer2;
    struct conn *d = held(&ws[0], &peer2, false);
    ck_assert(affinity_send_home(&ws[0], d, tenant_at(1), -1, now));
    affinity_take(&ws[1], now);
    ck_assert_int_eq(ws[1].nconns, 2);
    ck_assert(!ws[1].conns[1].kept);
    ck_assert_uint_eq(ws[1].slot->affine_pending, 1);
    conn_drop(&ws[1], &ws[1].conns[1]);
    ck_assert_uint_eq(ws[1].slot->affine_pending, 0);
    close(peer);
    close(peer2);
}
END_TEST

START_TEST(test_not_sent)
{
    two_watching();
    int64_t now = clock_mono_ms();
    int peer;
    struct conn *c = held(&ws[0], &peer, true);
    int64_t away = tenant_at(1);
    /* Not back to the busy worker it came from. */
    ck_assert(!affinity_send_home(&ws[0], c, away, 1, now));
    /* Not to a home more than AFFINITY_SLACK further behind than this worker: in its inbox,
     * and taken but not looked at. */
    sb->pool.affine_queued[1] = AFFINITY_SLACK;
    ws[1].slot->affine_pending = 1;
    ck_assert(!affinity_send_home(&ws[0], c, away, -1, now));
    ck_assert_uint_eq(sb_get(&sb->pool.affinity_spilled), 1);
    ws[0].slot->affine_pending = 1;   /* as far behind, give or take the slack: it goes */
    ck_assert(affinity_send_home(&ws[0], c, away, -1, now));
    ck_assert_int_eq(sb->pool.affine_queued[1], AFFINITY_SLACK + 1);
    /* Not to a worker that is leaving (the list of homes is read again after
     * AFFINITY_LIVE_MS): worker 1's tenants are then served where they arrive. */
    sb_slot_at(sb, 1)->state = SB_EXITING;
    sb->pool.affine_queued[1] = 0;
    int peer2;
    struct conn *d = held(&ws[0], &peer2, true);
    ck_assert(!affinity_send_home(&ws[0], d, away, -1, now + AFFINITY_LIVE_MS));
    ck_assert_int_eq(ws[0].nhomes, 1);
    close(peer);
    close(peer2);
}
END_TEST

Suite *affinity_suite(void);
Suite *affinity_suite(void)
{
    Suite *s = suite_create("affinity");
    TCase *tc = tcase_create("affinity");
    tcase_add_test(tc, test_home_spread);
    tcase_add_test(tc, test_home_stable);
    tcase_add_test(tc, test_send_and_take);
    tcase_add_test(tc, test_not_sent);
    suite_add_tcase(s, tc);
    return s;
}
