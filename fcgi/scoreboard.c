/*
 * scoreboard.c — shared-memory worker table (see scoreboard.h).
 * Must not: block, allocate, or take locks — workers update it on the request path, and a
 * worker may die (SIGKILL) in the middle of an update, so readers tolerate half-written
 * slots by retrying on the sequence counter and giving up after a few tries.
 */
#include "core/first.h"
#include "fcgi/scoreboard.h"
#include "core/clock.h"

#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SB_MAGIC 0x54454e414e435931ull   /* "TENANCY1" */

const double sb_bucket_bounds[SB_NBUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1.0,  5.0};

scoreboard *sb_create(void)
{
    void *p = mmap(NULL, sizeof(scoreboard), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    scoreboard *sb = p;
    sb->pool.magic = SB_MAGIC;
    return sb;
}

void sb_destroy(scoreboard *sb)
{
    if (sb != NULL)
        munmap(sb, sizeof(*sb));
}

static const char *const state_names[SB_NSTATES] = {
    "free", "starting", "idle", "keepalive", "reading", "running", "finishing", "exiting"};

const char *sb_state_name(int st)
{
    return st >= 0 && st < SB_NSTATES ? state_names[st] : "unknown";
}

static bool idle_like(int st) { return st == SB_IDLE || st == SB_KEEPALIVE; }
static bool busy_like(int st) { return st == SB_READING || st == SB_RUNNING || st == SB_FINISHING; }

void sb_set_state(scoreboard *sb, sb_slot *s, enum sb_state st)
{
    int old = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
    if (old == (int)st)
        return;
    __atomic_store_n(&s->state, (uint8_t)st, __ATOMIC_RELEASE);
    if (idle_like(old) != idle_like(st))
        __atomic_fetch_add(&sb->pool.idle_workers, idle_like(st) ? 1 : -1, __ATOMIC_RELAXED);
    if (busy_like(old) != busy_like(st)) {
        int32_t now = __atomic_add_fetch(&sb->pool.active_workers, busy_like(st) ? 1 : -1,
                                         __ATOMIC_RELAXED);
        uint32_t max = __atomic_load_n(&sb->pool.max_active, __ATOMIC_RELAXED);
        while (now > 0 && (uint32_t)now > max &&
               !__atomic_compare_exchange_n(&sb->pool.max_active, &max, (uint32_t)now, true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
}

void sb_slot_free(scoreboard *sb, sb_slot *s)
{
    sb_set_state(sb, s, SB_FREE);
    s->pid = 0;
    s->ready = 0;
    s->req_start_ns = 0;
    s->tenant_id = 0;
    s->held = 0;
}

static void write_begin(sb_slot *s)
{
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
}

static void write_end(sb_slot *s)
{
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
}

static void copy_text(char *dst, size_t n, const char *src)
{
    size_t l = src ? strnlen(src, n - 1) : 0;
    if (l)
        memcpy(dst, src, l);
    dst[l] = '\0';
}

void sb_reading_begin(scoreboard *sb, sb_slot *s, int64_t start_ns)
{
    write_begin(s);
    s->method[0] = s->uri[0] = s->req_id[0] = s->tenant[0] = s->audit_id[0] = '\0';
    s->req_seq++;
    write_end(s);
    __atomic_store_n(&s->req_start_ns, start_ns, __ATOMIC_RELEASE);
    sb_set_state(sb, s, SB_READING);
}

void sb_request_begin(sb_slot *s, const char *method, const char *uri, const char *req_id)
{
    write_begin(s);
    copy_text(s->method, sizeof(s->method), method);
    copy_text(s->uri, sizeof(s->uri), uri);
    copy_text(s->req_id, sizeof(s->req_id), req_id);
    s->tenant[0] = '\0';
    write_end(s);
}

void sb_set_tenant(sb_slot *s, const char *tenant)
{
    write_begin(s);
    copy_text(s->tenant, sizeof(s->tenant), tenant);
    write_end(s);
}

void sb_set_audit(sb_slot *s, const char *id)
{
    write_begin(s);
    copy_text(s->audit_id, sizeof(s->audit_id), id);
    write_end(s);
}

void sb_request_end(scoreboard *sb, sb_slot *s, int status, int64_t duration_us)
{
    s->last_status = status;
    s->last_duration_us = duration_us;
    s->requests++;
    __atomic_store_n(&s->req_start_ns, 0, __ATOMIC_RELEASE);
    sb_pool *p = &sb->pool;
    sb_inc(&p->requests);
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        sb_inc(&p->status_class[cls]);
    __atomic_fetch_add(&p->duration_sum_us, (uint64_t)duration_us, __ATOMIC_RELAXED);
    double secs = (double)duration_us / 1e6;
    int b = 0;
    while (b < SB_NBUCKETS && secs > sb_bucket_bounds[b])
        b++;
    sb_inc(&p->duration_bucket[b]);
}

void sb_slot_read(const sb_slot *s, sb_slot *out)
{
    for (int tries = 0; tries < 16; tries++) {
        uint32_t before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        memcpy(out, s, sizeof(*out));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == before)
            return;
    }
    /* A writer died mid-update or is very busy: take the copy but keep strings terminated. */
    memcpy(out, s, sizeof(*out));
    out->method[sizeof(out->method) - 1] = '\0';
    out->uri[sizeof(out->uri) - 1] = '\0';
    out->tenant[sizeof(out->tenant) - 1] = '\0';
    out->req_id[sizeof(out->req_id) - 1] = '\0';
    out->audit_id[sizeof(out->audit_id) - 1] = '\0';
}

/* ---- the hub's per-tenant table ------------------------------------------------------------ *
 * Open addressing, linear probing. Entries are never removed (a count goes back to 0 and the
 * entry is reused by the same tenant), so a probe never meets a hole that hides a tenant
 * behind it; the hub compacts the table when it is full of zero counts (sb_hub_tenant_add).
 */
static inline uint32_t hub_hash(int64_t id)
{
    uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 40) & (SB_HUB_TENANTS - 1);
}

int32_t sb_hub_tenant_count(const sb_hub *h, int64_t tenant_id)
{
    uint32_t i = hub_hash(tenant_id);
    for (int n = 0; n < SB_HUB_TENANTS; n++, i = (i + 1) & (SB_HUB_TENANTS - 1)) {
        int64_t t = __atomic_load_n(&h->tenants[i].tenant_id, __ATOMIC_ACQUIRE);
        if (t == 0)
            return 0;
        if (t == tenant_id)
            return __atomic_load_n(&h->tenants[i].subscribers, __ATOMIC_RELAXED);
    }
    return 0;
}

/* Rebuild the table with the tenants that still have subscribers (the hub only). */
static void hub_compact(sb_hub *h)
{
    static sb_hub_tenant keep[SB_HUB_TENANTS];
    int n = 0;
    for (int i = 0; i < SB_HUB_TENANTS; i++)
        if (h->tenants[i].tenant_id != 0 && h->tenants[i].subscribers > 0)
            keep[n++] = h->tenants[i];
    for (int i = 0; i < SB_HUB_TENANTS; i++) {
        __atomic_store_n(&h->tenants[i].tenant_id, 0, __ATOMIC_RELEASE);
        h->tenants[i].subscribers = 0;
    }
    for (int k = 0; k < n; k++) {
        uint32_t i = hub_hash(keep[k].tenant_id);
        while (h->tenants[i].tenant_id != 0)
            i = (i + 1) & (SB_HUB_TENANTS - 1);
        h->tenants[i].subscribers = keep[k].subscribers;
        __atomic_store_n(&h->tenants[i].tenant_id, keep[k].tenant_id, __ATOMIC_RELEASE);
    }
}

bool sb_hub_tenant_add(sb_hub *h, int64_t tenant_id, int delta)
{
    for (int pass = 0; pass < 2; pass++) {
        uint32_t i = hub_hash(tenant_id);
        for (int n = 0; n < SB_HUB_TENANTS; n++, i = (i + 1) & (SB_HUB_TENANTS - 1)) {
            sb_hub_tenant *e = &h->tenants[i];
            if (e->tenant_id == tenant_id) {
                __atomic_add_fetch(&e->subscribers, delta, __ATOMIC_RELAXED);
                return true;
            }
            if (e->tenant_id == 0) {
                if (delta <= 0)
                    return true;
                e->subscribers = delta;
                __atomic_store_n(&e->tenant_id, tenant_id, __ATOMIC_RELEASE);
                return true;
            }
        }
        if (delta <= 0)
            return true;
        hub_compact(h);   /* full: drop the tenants with no subscriber left, and try again */
    }
    return false;
}

void sb_jobs_wake(sb_jobs *j)
{
    __atomic_add_fetch(&j->wake, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &j->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
