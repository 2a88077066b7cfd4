/*
 * subscribe.c — GET /subscribe?tables=a,b: the tenant's change feed as Server-Sent Events.
 *
 * Owns: turning the request into a subscription of the host's stream hub (tn_subscribe):
 * the channels "table:<t>" of each table asked for (each must exist; "table" for a name too
 * long for a channel, as dt_publish does) and "schema", or every
 * channel of the tenant when no table is named; the resume point is the Last-Event-ID
 * header, which tn_subscribe reads. From TN_OK on the hub answers the request and this
 * worker is free. Events are published on those channels by the writes of this app
 * ("table:<t>" after each committed write, "schema" after a schema change).
 *
 * Must not: write anything after a successful hand-off, or subscribe to another tenant's
 * channels (the hub keys every stream by the request's own tenant).
 */
#include <stdio.h>
#include <string.h>

#include "data.h"

#define MAX_TABLES 15   /* and "schema": the 16 channels a stream may have */

int dt_subscribe(dt_req *d)
{
    tn_request *r = d->r;
    const char *list = tn_query_arg(r, "tables");
    const char *ch[MAX_TABLES + 1];
    int n = 0;
    if (list != NULL && *list != '\0') {
        char *copy = tn_strdup(r, list);
        if (copy == NULL)
            return TN_NOMEM;
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t != NULL;
             t = strtok_r(NULL, ",", &save)) {
            if (n == MAX_TABLES)
                return dt_errorf(d, 400, "too_many_tables", list,
                                 "a stream follows at most %d tables", MAX_TABLES);
            if (dt_table_find(d, t) == NULL)
                return dt_errorf(d, 404, "unknown_table", t, "no table %s", t);
            char *c = tn_sprintf(r, "table:%s", t);
            if (c == NULL)
                return TN_NOMEM;
            /* A name too long for a channel: its events go on "table" (dt_publish). */
            ch[n++] = strlen(c) > 64 ? "table" : c;
        }
        ch[n++] = "schema";
    }
    int rc = tn_subscribe(r, ch, n, NULL);
    switch (rc) {
    case TN_OK:
        return TN_OK;   /* the hub answers from here */
    case TN_INVALID:
        return dt_error(d, 400, "bad_subscription", tn_request_error(r), NULL);
    case TN_BUSY:
        tn_add_header(r, "Retry-After", "5");
        return dt_error(d, 503, "too_many_streams", tn_request_error(r), NULL);
    default:
        tn_add_header(r, "Retry-After", "5");
        return dt_error(d, 503, "streams_unavailable", tn_request_error(r), NULL);
    }
}
