/*
 * events_remote.c — events across hosts through PostgreSQL LISTEN/NOTIFY (see events.h).
 *
 * The publishing side only builds the payload (the chain sends it on its registry
 * connection: registry_notify). The listening side is a connection of its own that the hub
 * polls: it never blocks, so the hub's event loop stays the only place that waits.
 *
 * Must not: read or write the registry's tables, block (the hub's loop waits, not this), or
 * append an event of this host's own origin a second time.
 */
#include "core/first.h"
#include "tenancy/events.h"
#include "core/log.h"
#include "core/rc.h"
#include "storage/db.h"
#include "tenancy/tenant.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct events_remote {
    tn_db *db;
    event_log *log;
    arena *a;            /* one notification's parsing, reset after each */
    int appended;
    uint64_t malformed;
};

void events_notify_payload(buf *out, uint64_t origin, int64_t tenant_id, const char *channel,
                           const char *data, size_t len)
{
    buf_printf(out, "{\"origin\":\"%016" PRIx64 "\",\"tenant\":%" PRId64 ",\"channel\":",
               origin, tenant_id);
    buf_json_str(out, channel);
    buf_puts(out, ",\"data\":");
    if (len > EVENTS_NOTIFY_DATA_MAX)
        buf_json_str(out, EVENTS_TOO_BIG);
    else
        buf_json_strn(out, data ? data : "", len);
    buf_putc(out, '}');
}

static void *arena_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

int events_notify_parse(const char *payload, arena *a, uint64_t *origin, int64_t *tenant_id,
                        const char **channel, const char **data)
{
    tenant_setting *kv = NULL;
    int n = settings_parse(payload, &kv, arena_cb, a);
    if (n < 0)
        return TN_INVALID;
    const char *o = NULL, *t = NULL;
    *channel = *data = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(kv[i].key, "origin") == 0)
            o = kv[i].value;
        else if (strcmp(kv[i].key, "tenant") == 0)
            t = kv[i].value;
        else if (strcmp(kv[i].key, "channel") == 0)
            *channel = kv[i].value;
        else if (strcmp(kv[i].key, "data") == 0)
            *data = kv[i].value;
    }
    if (o == NULL || t == NULL || *channel == NULL || *data == NULL ||
        !event_channel_valid(*channel))
        return TN_INVALID;
    char *end = NULL;
    *origin = strtoull(o, &end, 16);
    if (end == o || *end != '\0' || strlen(o) != 16)
        return TN_INVALID;
    long long tid = strtoll(t, &end, 10);
    if (end == t || *end != '\0' || tid <= 0)
        return TN_INVALID;
    *tenant_id = tid;
    return TN_OK;
}

bool events_remote_needed(const tenancy_config *cfg)
{
    const char *b = cfg->enabled ? db_uri_backend(cfg->registry_uri) : NULL;
    return b != NULL && strcmp(b, "postgres") == 0;
}

int events_remote_open(const tenancy_config *cfg, event_log *log, events_remote **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (!events_remote_needed(cfg))
        return tn_errf(err, errlen, TN_INVALID, "the registry is not PostgreSQL");
    events_remote *er = calloc(1, sizeof(*er));
    if (er == NULL || (er->a = arena_create(16384)) == NULL) {
        free(er);
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    er->log = log;
    int rc = db_open(cfg->registry_uri, NULL, &er->db, err, errlen);
    if (rc == TN_OK && db_listen(er->db, EVENTS_NOTIFY_CHANNEL) != TN_OK)
        rc = tn_errf(err, errlen, TN_IO, "LISTEN %s: %s", EVENTS_NOTIFY_CHANNEL,
                     tn_db_error(er->db));
    if (rc != TN_OK) {
        events_remote_close(er);
        return rc == TN_INVALID ? rc : TN_IO;
    }
    *out = er;
    return TN_OK;
}

int events_remote_fd(const events_remote *er) { return er ? db_socket(er->db) : -1; }

static void take(void *ctx, const char *channel, const char *payload)
{
    events_remote *er = ctx;
    if (strcmp(channel, EVENTS_NOTIFY_CHANNEL) != 0)
        return;
    uint64_t origin;
    int64_t tenant;
    const char *ch, *data;
    if (events_notify_parse(payload, er->a, &origin, &tenant, &ch, &data) != TN_OK) {
        if (er->malformed++ == 0)
            log_warn("events: a malformed notification on %s ignored", EVENTS_NOTIFY_CHANNEL);
    } else if (origin != event_log_origin(er->log)) {
        int rc = event_log_append_from(er->log, origin, tenant, ch, data, strlen(data), NULL);
        if (rc == TN_OK)
            er->appended++;
        else
            log_warn("events: an event from host %016" PRIx64 " for tenant %" PRId64
                     " not kept: %s", origin, tenant, tn_rc_str(rc));
    }
    arena_reset(er->a);
}

int events_remote_poll(events_remote *er)
{
    er->appended = 0;
    int rc = db_wait_notify_each(er->db, 0, take, er);
    if (rc != TN_OK && rc != TN_TIMEOUT)
        return TN_IO;
    return er->appended;
}

void events_remote_close(events_remote *er)
{
    if (er == NULL)
        return;
    db_close(er->db);
    arena_destroy(er->a);
    free(er);
}
