/*
 * out.c — the data app's answers and values: the JSON error shape, JSON bodies in and out,
 * and the conversion of each column type from JSON and CSV to the text we bind (values read
 * back are jsonout.c's).
 *
 * Owns: the error body {"code","message","details","hint":null} (PostgREST's shape) and the
 * mapping of storage codes to HTTP statuses; the value rules of README's type map.
 *
 * Must not: write SQL, or send anything after an error body (one answer per request).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "data.h"

int dt_error(dt_req *d, int status, const char *code, const char *message,
             const char *details)
{
    /* An answer on a catalog taken without its version statement confirms it first; a stale
     * one answers nothing here, and the request is served again (catcache.c, data.c). */
    if (dt_catcache_confirm(d) != TN_OK)
        return TN_OK;
    json_t *body = json_pack("{s:s, s:s, s:s?, s:n}", "code", code, "message", message,
                             "details", details, "hint");
    if (status == 401)
        tn_add_header(d->r, "WWW-Authenticate", "Bearer");
    int rc = body != NULL ? dt_send_json(d, status, body) : tn_send_error(d->r, status, message);
    json_decref(body);
    return rc;
}

int dt_errorf(dt_req *d, int status, const char *code, const char *details, const char *fmt,
              ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return dt_error(d, status, code, msg, details);
}

int dt_db_error(dt_req *d, int rc, const char *what)
{
    return dt_db_error_why(d, rc, what, d->db != NULL ? tn_db_error(d->db) : "");
}

int dt_db_error_why(dt_req *d, int rc, const char *what, const char *why)
{
    if (d->stale)
        return TN_OK;   /* not an error: served again (dt_error) */
    switch (rc) {
    case TN_EXISTS:
        return dt_error(d, 409, "conflict", what, why);
    case TN_INVALID:
        return dt_error(d, 400, "rejected", what, why);
    case TN_DENIED:
        return dt_error(d, 403, "denied", what, why);
    case TN_TOOBIG:
        return dt_error(d, 413, "too_large", what, why);
    case TN_BUSY:
    case TN_TIMEOUT:
        tn_add_header(d->r, "Retry-After", "1");
        return dt_error(d, 503, "busy", what, why);
    default:
        tn_log(d->r, TN_LOG_ERROR, "%s: %s (%s)", what, tn_rc_str(rc), why);
        return dt_error(d, 500, "storage_error", what, NULL);
    }
}

int dt_send_json(dt_req *d, int status, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL)
        return TN_NOMEM;
    tn_set_status(d->r, status);
    tn_add_header(d->r, "Content-Type", "application/json; charset=utf-8");
    int rc = tn_puts(d->r, text);
    if (rc == TN_OK)
        rc = tn_puts(d->r, "\n");
    free(text);
    return rc;
}

int dt_send_json_text(dt_req *d, int status, const char *text, size_t len)
{
    tn_set_status(d->r, status);
    tn_add_header(d->r, "Content-Type", "application/json; charset=utf-8");
    return tn_write(d->r, text, len);
}

int dt_body_raw(dt_req *d, const char **data, size_t *len)
{
    int rc = tn_body(d->r, data, len);
    if (rc == TN_TOOBIG)
        return dt_error(d, 413, "body_too_large", "the request body is over the size limit",
                        NULL) == TN_OK ? TN_DONE : TN_IO;
    return rc;
}

static bool is_json_type(const char *ct)
{
    return ct == NULL || strncasecmp(ct, "application/json", 16) == 0;
}

int dt_body_json(dt_req *d, json_t **out)
{
    const char *data;
    size_t len;
    *out = NULL;
    if (!is_json_type(tn_header(d->r, "Content-Type")))
        return dt_error(d, 415, "unsupported_media_type", "the body must be application/json",
                        tn_header(d->r, "Content-Type")) == TN_OK ? TN_DONE : TN_IO;
    int rc = dt_body_raw(d, &data, &len);
    if (rc != TN_OK)
        return rc;
    json_error_t je;
    *out = json_loadb(data != NULL ? data : "", len, JSON_DECODE_ANY, &je);
    if (*out != NULL)
        return TN_OK;
    char where[64];
    snprintf(where, sizeof(where), "line %d, column %d", je.line, je.column);
    return dt_errorf(d, 400, "invalid_json", where, "the body is not valid JSON: %s",
                     je.text) == TN_OK ? TN_DONE : TN_IO;
}

static const char *bool_text(const dt_req *d, bool v)
{
    if (d->dialect == REST_SQLITE)
        return v ? "1" : "0";
    return v ? "true" : "false";
}

int dt_value_text(dt_req *d, int type, const json_t *v, const char **text, const char **why)
{
    *text = NULL;
    if (json_is_null(v))
        return TN_OK;
    switch (type) {
    case DT_INTEGER:
        if (!json_is_integer(v))
            break;
        *text = tn_sprintf(d->r, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return TN_OK;
    case DT_REAL:
        if (!json_is_number(v))
            break;
        *text = json_is_integer(v)
                    ? tn_sprintf(d->r, "%" JSON_INTEGER_FORMAT, json_integer_value(v))
                    : tn_sprintf(d->r, "%.17g", json_real_value(v));
        return TN_OK;
    case DT_BOOLEAN:
        if (!json_is_boolean(v))
            break;
        *text = bool_text(d, json_is_true(v));
        return TN_OK;
    case DT_TIMESTAMP:
        if (!json_is_string(v) || !dt_timestamp_ok(json_string_value(v)))
            break;
        *text = tn_strdup(d->r, json_string_value(v));
        return *text != NULL ? TN_OK : TN_NOMEM;
    case DT_JSON: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        *text = s != NULL ? tn_strdup(d->r, s) : NULL;
        free(s);
        return *text != NULL ? TN_OK : TN_NOMEM;
    }
    default:
        if (!json_is_string(v) || memchr(json_string_value(v), '\0', json_string_length(v)))
            break;
        /* copied: the JSON document is freed before the statement runs */
        *text = tn_strdup(d->r, json_string_value(v));
        return *text != NULL ? TN_OK : TN_NOMEM;
    }
    *why = tn_sprintf(d->r, "expected %s", dt_type_name(type));
    return TN_INVALID;
}

int dt_csv_value_text(dt_req *d, int type, const char *s, const char **text, const char **why)
{
    *text = s;
    if (s == NULL)
        return TN_OK;
    bool ok = true;
    switch (type) {
    case DT_INTEGER:
        ok = dt_int_text(s);
        break;
    case DT_REAL:
        ok = dt_real_text(s);
        break;
    case DT_BOOLEAN:
        ok = strcmp(s, "true") == 0 || strcmp(s, "false") == 0 || strcmp(s, "1") == 0 ||
             strcmp(s, "0") == 0;
        *text = bool_text(d, s[0] == 't' || s[0] == '1');
        break;
    case DT_TIMESTAMP:
        ok = dt_timestamp_ok(s);
        break;
    case DT_JSON: {
        json_t *v = json_loads(s, JSON_DECODE_ANY, NULL);
        ok = v != NULL;
        json_decref(v);
        break;
    }
    default:
        break;
    }
    if (!ok)
        *why = tn_sprintf(d->r, "expected %s", dt_type_name(type));
    return ok ? TN_OK : TN_INVALID;
}

const char *dt_now(dt_req *d)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    return tn_sprintf(d->r, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                      ts.tv_nsec / 1000000);
}

json_t *dt_row_object(const dt_req *d, tn_rows *rows, const int *types)
{
    json_t *o = json_object();
    int n = tn_rows_ncols(rows);
    for (int i = 0; o != NULL && i < n; i++)
        json_object_set_new(o, tn_rows_colname(rows, i),
                            dt_value_json(d, types[i], tn_rows_get(rows, i)));
    return o;
}
