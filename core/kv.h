/*
 * kv.h — parsers for the key/value texts of HTTP: query strings, form bodies, cookies.
 *
 * They find one field without building a table (requests read one or two fields), decode
 * into caller memory, and never read past the given length. Everything here is fuzzed
 * (tests/fuzz/).
 */
#ifndef TN_CORE_KV_H
#define TN_CORE_KV_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"

/* Percent-decode s[0..n) into out (room for n+1 bytes); '+' becomes ' ' when plus is true.
 * Returns the decoded length; invalid escapes are kept literally. A decoded NUL is refused:
 * returns (size_t)-1. */
size_t kv_url_decode(const char *s, size_t n, char *out, bool plus);

/* The decoded value of `name` in an application/x-www-form-urlencoded text (query string or
 * form body), allocated in a; NULL when absent or undecodable. A field without '=' has the
 * value "". */
char *kv_form_get(const char *text, size_t n, const char *name, arena *a);

/* The value of cookie `name` in a Cookie header (RFC 6265 syntax, quotes removed), in a;
 * NULL when absent. */
char *kv_cookie_get(const char *header, const char *name, arena *a);

/* Iterate the fields of a form text: returns the next position, or NULL at the end; the
 * decoded name and value are allocated in a. */
const char *kv_form_next(const char *p, const char *end, char **name, char **value, arena *a);

/* The value of `name` in a NULL-terminated array of "NAME=value" strings (FastCGI params as
 * libfcgi keeps them), or NULL. As FCGX_GetParam, with the first byte compared before the
 * string call: a request looks up several params among twenty or more. */
const char *kv_env_get(char *const *env, const char *name);

#endif
