/*
 * fuzz_proto.c — fcgi_precheck (fcgi/proto.c) over raw FastCGI bytes, and the record
 * builders the worker answers with.
 *
 * Input: one byte choosing max_params (64 B to 64 KiB), then the stream as a client would
 * send it. The stream is copied to a heap block of exactly its length, so AddressSanitizer
 * catches any read past n.
 *
 * Invariants (each verdict is checked against the bytes, read here independently):
 *   - with `full` the verdict is never NEED_MORE; MALFORMED always says why;
 *   - more bytes never change a decided verdict: what a prefix decides (anything but
 *     NEED_MORE), the whole stream decides the same, with the same consume/id/role —
 *     except READY turning MALFORMED when the body that follows holds a GET_VALUES;
 *   - MGMT, SKIP and BAD_ROLE describe the first record exactly, whole within n;
 *   - READY means: the first record is a BEGIN_REQUEST (id != 0, length 8, role 1-3), and
 *     the records after it hold, before the empty PARAMS record of that id, PARAMS content
 *     whose every declared name and value length, and their sum, are at most max_params;
 *   - READY hands libfcgi no FCGI_GET_VALUES management record before the end of the
 *     params: libfcgi parses one with its own unchecked ReadParams (the aborting lengths of
 *     CVE-2025-23016) and answers it in a 64-byte stack buffer that four names overflow;
 *   - fcgi_params_env, over any bytes and with small or exact room (heap blocks of exactly
 *     that size), returns -1 or the number of NULL-terminated "NAME=VALUE" strings it wrote,
 *     each inside its text block, each name free of '=';
 *   - fcgi_get_values_result gives one well-formed GET_VALUES_RESULT record within cap
 *     (padded to 8, only the three variables, decimal values), or 0.
 */
#include "core/first.h"
#include "fcgi/proto.h"

#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#define HDR 8

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

/* Name-value lengths of a params stream, per the spec; false when one is over max or the
 * sum is. Partial lengths at the end are not counted (libfcgi fails on them). */
static bool nv_lengths_ok(const unsigned char *c, size_t n, size_t max)
{
    size_t i = 0;
    uint64_t sum = 0;
    for (;;) {
        uint64_t len[2];
        for (int k = 0; k < 2; k++) {
            if (i >= n)
                return true;
            if (c[i] & 0x80) {
                if (n - i < 4)
                    return true;
                len[k] = ((uint64_t)(c[i] & 0x7F) << 24) | ((uint64_t)c[i + 1] << 16) |
                         ((uint64_t)c[i + 2] << 8) | c[i + 3];
                i += 4;
            } else {
                len[k] = c[i++];
            }
            if (len[k] > max)
                return false;
        }
        sum += len[0] + len[1];
        if (sum > max)
            return false;
        uint64_t skip = len[0] + len[1];
        if (skip >= n - i)
            return true;
        i += (size_t)skip;
    }
}

static void check_ready(const unsigned char *p, size_t n, size_t max, const fp_result *r)
{
    FZ_ASSERT(n >= 2 * HDR + 8, "READY with %zu bytes", n);
    FZ_ASSERT(p[0] == 1 && p[1] == FCGI_T_BEGIN && be16(p + 4) == 8,
              "READY but the first record is no BEGIN_REQUEST");
    unsigned id = be16(p + 2);
    FZ_ASSERT(id != 0 && id == r->req_id, "READY for id %u, the BEGIN says %u", r->req_id, id);
    unsigned role = be16(p + HDR);
    FZ_ASSERT(role >= 1 && role <= 3 && role == r->role, "READY with role %u", role);
    FZ_ASSERT(r->keep_conn == ((p[HDR + 2] & 1) != 0), "keep_conn differs from the flags");
    size_t off = HDR + 8 + p[6];
    unsigned char *params = malloc(n + 1);
    size_t plen = 0;
    bool ended = false, mgmt = false;
    while (off + HDR <= n) {
        const unsigned char *h = p + off;
        size_t clen = be16(h + 4), rlen = HDR + clen + h[6];
        unsigned rid = be16(h + 2);
        FZ_ASSERT(h[0] == 1, "READY over a record of version %u", h[0]);
        if (h[1] == FCGI_T_PARAMS && rid == id && clen == 0) {
            ended = true;
            break;
        }
        FZ_ASSERT(off + rlen <= n, "READY while a record before the end of params is cut");
        if (rid == 0 && h[1] == FCGI_T_GET_VALUES)
            mgmt = true;
        if (h[1] == FCGI_T_PARAMS && rid == id) {
            memcpy(params + plen, h + HDR, clen);
            plen += clen;
        }
        off += rlen;
    }
    FZ_ASSERT(ended, "READY without the empty PARAMS record that ends the params");
    FZ_ASSERT(nv_lengths_ok(params, plen, max),
              "READY for params that declare a length over max_params (%zu)", max);
    free(params);
    FZ_ASSERT(!mgmt,
              "READY with an FCGI_GET_VALUES record inside the params: libfcgi parses it");
}

static void check_first_record(const unsigned char *p, size_t n, const fp_result *r,
                               fp_verdict v)
{
    FZ_ASSERT(n >= HDR && p[0] == 1, "verdict %d without a whole version-1 header", v);
    size_t rlen = HDR + be16(p + 4) + p[6];
    FZ_ASSERT(rlen <= n, "verdict %d for a record cut at %zu of %zu", v, n, rlen);
    FZ_ASSERT(r->consume == rlen, "consume %zu for a record of %zu", r->consume, rlen);
    unsigned rid = be16(p + 2);
    if (v == FP_MGMT) {
        FZ_ASSERT(rid == 0 && r->mgmt_type == p[1], "MGMT for id %u type %u", rid, p[1]);
        FZ_ASSERT(r->mgmt_off == HDR && r->mgmt_len == be16(p + 4), "MGMT content misplaced");
    } else if (v == FP_SKIP) {
        FZ_ASSERT(rid != 0 && p[1] != FCGI_T_BEGIN && p[1] <= FCGI_T_UNKNOWN_TYPE,
                  "SKIP of type %u id %u", p[1], rid);
    } else {
        FZ_ASSERT(p[1] == FCGI_T_BEGIN && be16(p + 4) == 8 && rid != 0 && rid == r->req_id,
                  "BAD_ROLE for no BEGIN_REQUEST");
        unsigned role = be16(p + HDR);
        FZ_ASSERT((role < 1 || role > 3) && role == r->role, "BAD_ROLE for role %u", role);
    }
}

static void check_values_result(const unsigned char *content, size_t len, size_t cap)
{
    unsigned char *out = malloc(cap ? cap : 1);
    size_t w = fcgi_get_values_result(out, cap, content, len, 12, 34);
    if (w == 0) {
        free(out);
        return;
    }
    FZ_ASSERT(w <= cap, "GET_VALUES_RESULT of %zu bytes in %zu", w, cap);
    FZ_ASSERT(w % 8 == 0 && w >= HDR, "GET_VALUES_RESULT not padded: %zu", w);
    FZ_ASSERT(out[0] == 1 && out[1] == FCGI_T_GET_VALUES_RESULT && be16(out + 2) == 0,
              "not a GET_VALUES_RESULT record");
    size_t clen = be16(out + 4);
    FZ_ASSERT(HDR + clen + out[6] == w && out[6] < 8, "record length mismatch");
    size_t i = HDR;
    while (i < HDR + clen) {
        FZ_ASSERT(i + 2 <= HDR + clen, "a cut pair");
        size_t nl = out[i], vl = out[i + 1];
        FZ_ASSERT(nl < 128 && vl < 128 && i + 2 + nl + vl <= HDR + clen, "a pair overruns");
        const char *name = (const char *)out + i + 2;
        const char *val = name + nl;
        bool known = (nl == 14 && memcmp(name, "FCGI_MAX_CONNS", 14) == 0) ||
                     (nl == 13 && memcmp(name, "FCGI_MAX_REQS", 13) == 0) ||
                     (nl == 15 && memcmp(name, "FCGI_MPXS_CONNS", 15) == 0);
        FZ_ASSERT(known, "an unknown variable in GET_VALUES_RESULT");
        FZ_ASSERT(vl > 0, "an empty value");
        for (size_t k = 0; k < vl; k++)
            FZ_ASSERT(val[k] >= '0' && val[k] <= '9', "a value that is not a number");
        i += 2 + nl + vl;
    }
    free(out);
}

static fp_verdict run(const unsigned char *p, size_t n, size_t max, bool full, fp_result *r)
{
    memset(r, 0xA5, sizeof(*r));
    fp_verdict v = fcgi_precheck(p, n, max, full, r);
    FZ_ASSERT(v == r->verdict, "the returned verdict and res->verdict differ");
    FZ_ASSERT(v >= FP_NEED_MORE && v <= FP_TOO_BIG, "verdict %d", v);
    if (full)
        FZ_ASSERT(v != FP_NEED_MORE, "NEED_MORE although the buffer is full");
    if (v == FP_MALFORMED || v == FP_TOO_BIG)
        FZ_ASSERT(r->why != NULL && r->why[0] != '\0', "MALFORMED or TOO_BIG without a reason");
    if (v == FP_READY)
        check_ready(p, n, max, r);
    if (v == FP_MGMT || v == FP_SKIP || v == FP_BAD_ROLE)
        check_first_record(p, n, r, v);
    return v;
}

static void check_params_env(const unsigned char *p, size_t n, size_t room)
{
    unsigned char *raw = malloc(room ? room : 1);
    char *text = malloc(room ? room : 1);
    char *env[64];
    int k = fcgi_params_env(p, n, raw, room, text, room, env, 64);
    FZ_ASSERT(k >= -1 && k < 64, "fcgi_params_env returned %d", k);
    for (int i = 0; i < k; i++) {
        FZ_ASSERT(env[i] >= text && env[i] < text + room, "a param outside its block");
        size_t len = strnlen(env[i], (size_t)(text + room - env[i]));
        FZ_ASSERT(env[i] + len < text + room, "a param without its NUL");
        const char *eq = memchr(env[i], '=', len);
        FZ_ASSERT(eq != NULL, "a param without '='");
    }
    if (k >= 0)
        FZ_ASSERT(env[k] == NULL, "the environment is not NULL-terminated");
    free(raw);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t maxes[] = {64, 256, 1024, 4096, 16384, 65536};
    if (size < 1)
        return 0;
    size_t max = maxes[data[0] % 6];
    size_t n = size - 1;
    unsigned char *p = (unsigned char *)fz_copy(data + 1, n, false);

    fp_result whole, part;
    fp_verdict v = run(p, n, max, false, &whole);
    run(p, n, max, true, &part);

    /* What a prefix decided stays decided. */
    for (int k = 1; k < 8 && n > 0; k++) {
        size_t cut = n * (size_t)k / 8;
        unsigned char *q = (unsigned char *)fz_copy(p, cut, false);
        fp_verdict pv = run(q, cut, max, false, &part);
        /* The one exception: a prefix that ends before a GET_VALUES in the request's body
         * is READY, and the stream that holds it is refused (a look further, see proto.c). */
        bool body_gv = pv == FP_READY && v == FP_MALFORMED && whole.why != NULL &&
                       strcmp(whole.why, "a GET_VALUES record inside a request's body") == 0;
        if (pv != FP_NEED_MORE && !body_gv) {
            FZ_ASSERT(pv == v, "a prefix of %zu bytes says %d, the stream of %zu says %d", cut,
                      pv, n, v);
            FZ_ASSERT(part.consume == whole.consume && part.req_id == whole.req_id &&
                          part.role == whole.role && part.mgmt_len == whole.mgmt_len,
                      "a prefix decided differently");
        }
        free(q);
    }

    /* The answer the worker builds for a management record (its reply buffer is 256). */
    if (v == FP_MGMT && whole.mgmt_type == FCGI_T_GET_VALUES)
        check_values_result(p + whole.mgmt_off, whole.mgmt_len, 256);
    /* And the builder over the raw bytes, with small and large room. */
    check_values_result(p, n, 16);
    check_values_result(p, n, 256);
    check_values_result(p, n, 65536 + 16);

    /* The params as the worker reads them before libfcgi does (tenant.queue_wait). */
    check_params_env(p, n, 64);
    check_params_env(p, n, n + 64);

    unsigned char rec[16];
    FZ_ASSERT(fcgi_end_request(rec, 15, 1, 0, 0) == 0, "END_REQUEST in 15 bytes");
    FZ_ASSERT(fcgi_end_request(rec, 16, 0xFFFF, 7, 3) == 16 && rec[1] == FCGI_T_END &&
                  be16(rec + 2) == 0xFFFF && be16(rec + 4) == 8 && rec[12] == 3,
              "END_REQUEST malformed");
    free(p);
    return 0;
}
