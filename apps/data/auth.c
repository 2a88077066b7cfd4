/*
 * auth.c — the data app's whole bearer check, in one place.
 *
 * Owns: reading `Authorization: Bearer <key>`, asking the host whether the key is one of the
 * request's own tenant (tn_key_check), and the answers when it is not: 401 with
 * `WWW-Authenticate: Bearer` for a missing, malformed or refused key, 403 for a write with a
 * read-only key.
 *
 * Must not: compare or store keys itself (the registry holds their hashes; the host checks),
 * or log a token.
 */
#include <string.h>
#include <strings.h>

#include "data.h"

static const char *bearer_token(const tn_request *r)
{
    const char *h = tn_header(r, "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    return *h != '\0' ? h : NULL;
}

int dt_auth(dt_req *d)
{
    const char *token = bearer_token(d->r);
    if (token == NULL)
        return dt_error(d, 401, "unauthorized", "an API key is required",
                        "Authorization: Bearer <key>") == TN_OK ? TN_DONE : TN_IO;
    unsigned flags = 0;
    int rc = tn_key_check(d->r, token, &flags);
    if (rc == TN_OK) {
        d->key_flags = flags;
        return TN_OK;
    }
    if (rc == TN_DENIED || rc == TN_INVALID)
        return dt_error(d, 401, "unauthorized", "the API key is not valid for this tenant",
                        tn_request_error(d->r)) == TN_OK ? TN_DONE : TN_IO;
    tn_log(d->r, TN_LOG_ERROR, "checking an API key: %s (%s)", tn_rc_str(rc),
           tn_request_error(d->r));
    tn_add_header(d->r, "Retry-After", "1");
    return dt_error(d, 503, "unavailable", "API keys cannot be checked now", NULL) == TN_OK
               ? TN_DONE
               : TN_IO;
}

bool dt_can_write(const dt_req *d)
{
    return (d->key_flags & TN_KEY_READ_ONLY) == 0;
}

int dt_forbid_read_only(dt_req *d)
{
    return dt_error(d, 403, "read_only_key", "this API key may only read", NULL);
}
