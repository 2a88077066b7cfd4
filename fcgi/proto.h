/*
 * proto.h — what the host reads of the FastCGI stream before libfcgi does, and the few
 * records it writes itself.
 *
 * libfcgi 2.4.2 (as Debian ships it) answers FCGI_GET_VALUES only when another record
 * follows, drops unknown roles without FCGI_UNKNOWN_ROLE, and aborts the whole process when
 * a PARAMS record declares a name and value whose lengths overflow an int. So each worker
 * first peeks at the start of a request (MSG_PEEK, nothing consumed) and runs this pure
 * checker over the bytes: management records are answered here, bad roles refused per the
 * spec, and declared lengths over `max_params` refused before any allocation. Only a stream
 * that passes is handed to libfcgi. The checker never reads past n and keeps no state
 * between calls; it is fuzzed (tests/fuzz/fuzz_proto.c).
 */
#ifndef TN_FCGI_PROTO_H
#define TN_FCGI_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    FCGI_T_BEGIN = 1, FCGI_T_ABORT = 2, FCGI_T_END = 3, FCGI_T_PARAMS = 4, FCGI_T_STDIN = 5,
    FCGI_T_STDOUT = 6, FCGI_T_STDERR = 7, FCGI_T_DATA = 8, FCGI_T_GET_VALUES = 9,
    FCGI_T_GET_VALUES_RESULT = 10, FCGI_T_UNKNOWN_TYPE = 11
};
enum { FCGI_REQUEST_COMPLETE = 0, FCGI_CANT_MPX_CONN = 1, FCGI_OVERLOADED = 2,
       FCGI_UNKNOWN_ROLE = 3 };

typedef enum fp_verdict {
    FP_NEED_MORE,   /* not enough bytes to decide: wait for more */
    FP_READY,       /* hand the connection to libfcgi */
    FP_MGMT,        /* a management record (request id 0) to answer and consume */
    FP_BAD_ROLE,    /* BEGIN_REQUEST with a role we do not play: answer FCGI_UNKNOWN_ROLE */
    FP_SKIP,        /* a record of no active request (e.g. a late ABORT): consume, ignore */
    FP_MALFORMED,   /* refuse: close the connection */
    FP_TOO_BIG      /* the request's params are over max_params: answer 431, then close */
} fp_verdict;

typedef struct fp_result {
    fp_verdict verdict;
    size_t consume;          /* FP_MGMT/FP_BAD_ROLE/FP_SKIP: bytes to read off */
    unsigned req_id;         /* FP_READY/FP_BAD_ROLE/FP_TOO_BIG: the request id */
    unsigned role;
    bool keep_conn;
    bool stdin_done;         /* FP_READY: the request's whole STDIN is in the input too */
    unsigned char mgmt_type; /* FP_MGMT */
    size_t mgmt_off, mgmt_len; /* FP_MGMT: the record's content within the input */
    const char *why;         /* FP_MALFORMED/FP_TOO_BIG: a short reason for the log */
} fp_result;

/* Inspect the first n bytes of a connection's pending input. Before a BEGIN_REQUEST,
 * management records are to be answered and records of other (inactive) request ids are to
 * be skipped, as the spec says. After it, every PARAMS record of the request is checked up
 * to the empty one that ends them; other records in between are passed over (libfcgi
 * answers a second BEGIN with CANT_MPX_CONN). `full` says that n is all the peek buffer
 * could hold: the caller sizes it above max_params plus record overhead, so a full buffer
 * without the end of the params means the params are over the limit (FP_TOO_BIG, as is a
 * declared length or sum of lengths over max_params). */
fp_verdict fcgi_precheck(const unsigned char *p, size_t n, size_t max_params, bool full,
                         fp_result *res);

/* The content of the PARAMS records of the request whose header an FP_READY input holds (the
 * first n bytes): its length, or -1 when the input is not such a header or it does not fit in
 * raw (rawcap bytes). *content is where it is: inside p when it came in one record, else
 * joined in raw. */
long fcgi_params_join(const unsigned char *p, size_t n, unsigned char *raw, size_t rawcap,
                      const unsigned char **content);

/* The value of param `name` in joined PARAMS content (not NUL-terminated: *vlen bytes), or
 * NULL when absent or the content is malformed before it. */
const char *fcgi_param_find(const unsigned char *raw, size_t len, const char *name,
                            size_t *vlen);

/* The params of the request whose header an FP_READY input holds (the first n bytes), as a
 * NULL-terminated environment of "NAME=VALUE" strings, libfcgi's form: the content of its
 * PARAMS records joined in raw (rawcap bytes), the strings in out (outcap bytes), pointers in
 * env (maxenv, the NULL included). A value with a NUL in it ends there, as libfcgi's does.
 * Returns the number of params, or -1 when the input is not such a header or does not fit. */
int fcgi_params_env(const unsigned char *p, size_t n, unsigned char *raw, size_t rawcap,
                    char *out, size_t outcap, char **env, int maxenv);

/* Record builders; each returns the bytes written, or 0 when cap is too small. */
size_t fcgi_end_request(unsigned char *out, size_t cap, unsigned req_id, uint32_t app_status,
                        unsigned char proto_status);
size_t fcgi_unknown_type(unsigned char *out, size_t cap, unsigned char type);
/* Answer a GET_VALUES content with the variables we know (others are omitted, per spec). */
size_t fcgi_get_values_result(unsigned char *out, size_t cap, const unsigned char *content,
                              size_t len, unsigned max_conns, unsigned max_reqs);
/* A whole response: STDOUT with `text` (headers and body), empty STDOUT, END_REQUEST. */
size_t fcgi_simple_response(unsigned char *out, size_t cap, unsigned req_id, const char *text,
                            size_t text_len);

#endif
