/*
 * proto.c — the FastCGI pre-check and record builders (see proto.h).
 * Must not: read past the given length, allocate, or perform I/O.
 */
#include "core/first.h"
#include "fcgi/proto.h"

#include <stdio.h>
#include <string.h>

#define HDR 8

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

static void put_header(unsigned char *o, unsigned char type, unsigned id, size_t clen,
                       unsigned char pad)
{
    o[0] = 1;
    o[1] = type;
    o[2] = (unsigned char)(id >> 8);
    o[3] = (unsigned char)id;
    o[4] = (unsigned char)(clen >> 8);
    o[5] = (unsigned char)clen;
    o[6] = pad;
    o[7] = 0;
}

/* Name-value length parser that runs across PARAMS record boundaries. */
struct nv {
    int phase;            /* 0: name length, 1: value length, 2: skipping data */
    unsigned char lb[4];
    int lbn;              /* bytes of the current length collected */
    int lwant;            /* 1 or 4 */
    uint64_t name_len, value_len, skip, total;
};

/* Feed content bytes; returns false (with *why) when a declared length is too big. */
static bool nv_feed(struct nv *s, const unsigned char *p, size_t n, size_t max, const char **why)
{
    size_t i = 0;
    while (i < n) {
        if (s->phase == 2) {
            uint64_t take = s->skip < n - i ? s->skip : n - i;
            s->skip -= take;
            i += (size_t)take;
            if (s->skip == 0)
                s->phase = 0;
            continue;
        }
        if (s->lbn == 0)
            s->lwant = (p[i] & 0x80) ? 4 : 1;
        s->lb[s->lbn++] = p[i++];
        if (s->lbn < s->lwant)
            continue;
        uint64_t len = s->lwant == 1 ? s->lb[0]
                                     : ((uint64_t)(s->lb[0] & 0x7F) << 24) |
                                           ((uint64_t)s->lb[1] << 16) | ((uint64_t)s->lb[2] << 8) |
                                           s->lb[3];
        s->lbn = 0;
        if (len > max) {
            *why = "a parameter declares a length over max_params";
            return false;
        }
        if (s->phase == 0) {
            s->name_len = len;
            s->phase = 1;
        } else {
            s->value_len = len;
            s->total += s->name_len + s->value_len;
            if (s->total > max) {
                *why = "the parameters declare more than max_params in all";
                return false;
            }
            s->skip = s->name_len + s->value_len;
            s->phase = s->skip ? 2 : 0;
        }
    }
    return true;
}

fp_verdict fcgi_precheck(const unsigned char *p, size_t n, size_t max_params, bool full,
                         fp_result *res)
{
    memset(res, 0, sizeof(*res));
    size_t off = 0;
    bool begun = false;
    unsigned id = 0;
    struct nv nv;
    memset(&nv, 0, sizeof(nv));

    while (off + HDR <= n) {
        const unsigned char *h = p + off;
        if (h[0] != 1) {
            res->why = "not FastCGI version 1";
            return res->verdict = FP_MALFORMED;
        }
        unsigned char type = h[1];
        unsigned rid = be16(h + 2);
        size_t clen = be16(h + 4);
        size_t rlen = HDR + clen + h[6];
        bool whole = off + rlen <= n;

        if (!begun) {
            if (rid == 0) {
                /* A management record: needs its whole content to answer. */
                if (!whole)
                    break;
                res->mgmt_type = type;
                res->mgmt_off = off + HDR;
                res->mgmt_len = clen;
                res->consume = off + rlen;
                return res->verdict = FP_MGMT;
            }
            if (type != FCGI_T_BEGIN) {
                if (type > FCGI_T_UNKNOWN_TYPE) {
                    res->why = "a record of unknown type before BEGIN_REQUEST";
                    return res->verdict = FP_MALFORMED;
                }
                /* A record of a request that is no longer active (an ABORT sent after the
                 * request ended, say): the spec says to ignore it. */
                if (!whole)
                    break;
                res->consume = off + rlen;
                return res->verdict = FP_SKIP;
            }
            if (clen != 8) {
                res->why = "BEGIN_REQUEST has a wrong length";
                return res->verdict = FP_MALFORMED;
            }
            if (!whole)
                break;
            id = rid;
            res->req_id = rid;
            res->role = be16(h + HDR);
            res->keep_conn = (h[HDR + 2] & 1) != 0;
            if (res->role < 1 || res->role > 3) {
                res->consume = off + rlen;
                return res->verdict = FP_BAD_ROLE;
            }
            begun = true;
            off += rlen;
            continue;
        }
        /* libfcgi parses a GET_VALUES it meets in the middle of a request itself, trusting
         * the lengths it declares (CVE-2025-23016) and copying names into a 64-byte stack
         * buffer: refused here. No web server sends one there. */
        if (rid == 0 && type == FCGI_T_GET_VALUES) {
            res->why = "a GET_VALUES record inside a request";
            return res->verdict = FP_MALFORMED;
        }
        if (type == FCGI_T_PARAMS && rid == id) {
            if (clen == 0) {
                /* End of params: every length checked. Is all of STDIN here as well (a GET:
                 * its empty STDIN record came in the same write)? Then reading the request
                 * cannot block. */
                for (size_t o = off + rlen; o + HDR <= n;) {
                    const unsigned char *q = p + o;
                    size_t qlen = HDR + be16(q + 4) + q[6];
                    if (q[0] != 1 || o + qlen > n)
                        break;
                    /* libfcgi parses a GET_VALUES it meets while reading STDIN itself (see
                     * above): refused when it is already here. One that arrives later
                     * still reaches libfcgi. */
                    if (be16(q + 2) == 0 && q[1] == FCGI_T_GET_VALUES) {
                        res->why = "a GET_VALUES record inside a request's body";
                        return res->verdict = FP_MALFORMED;
                    }
                    if (q[1] == FCGI_T_STDIN && be16(q + 2) == id && be16(q + 4) == 0) {
                        res->stdin_done = true;
                        break;
                    }
                    o += qlen;
                }
                return res->verdict = FP_READY;
            }
            size_t avail = n - off - HDR;
            if (avail > clen)
                avail = clen;
            if (!nv_feed(&nv, h + HDR, avail, max_params, &res->why))
                return res->verdict = FP_TOO_BIG;
        }
        /* Any other record (a second BEGIN, a management record, STDIN sent early) is
         * libfcgi's to answer; the params of our request must still all be checked. */
        if (!whole)
            break;
        off += rlen;
    }
    if (full) {
        res->why = begun ? "the parameters do not fit in max_params"
                         : "no BEGIN_REQUEST within the first bytes";
        return res->verdict = begun ? FP_TOO_BIG : FP_MALFORMED;
    }
    return res->verdict = FP_NEED_MORE;
}

/* One name-value length at c[*i] (1 or 4 bytes); false past the end. */
static bool nv_len(const unsigned char *c, size_t n, size_t *i, size_t *len)
{
    if (*i >= n)
        return false;
    if (!(c[*i] & 0x80)) {
        *len = c[(*i)++];
        return true;
    }
    if (n - *i < 4)
        return false;
    *len = ((size_t)(c[*i] & 0x7F) << 24) | ((size_t)c[*i + 1] << 16) | ((size_t)c[*i + 2] << 8) |
           c[*i + 3];
    *i += 4;
    return true;
}

long fcgi_params_join(const unsigned char *p, size_t n, unsigned char *raw, size_t rawcap,
                      const unsigned char **content)
{
    size_t off = 0, have = 0;
    unsigned id = 0;
    bool begun = false;
    const unsigned char *single = NULL;   /* the one record's content, while only one */
    *content = raw;
    while (off + HDR <= n) {
        const unsigned char *h = p + off;
        size_t clen = be16(h + 4), rlen = HDR + clen + h[6];
        if (h[0] != 1 || off + rlen > n)
            return -1;
        if (!begun && h[1] == FCGI_T_BEGIN) {
            begun = true;
            id = be16(h + 2);
        } else if (begun && h[1] == FCGI_T_PARAMS && be16(h + 2) == id) {
            if (clen == 0) {   /* the empty record: the params are whole */
                if (single != NULL)
                    *content = single;   /* all in one record (nginx's way): no copy */
                return (long)have;
            }
            if (clen > rawcap - have)
                return -1;
            if (have == 0) {
                single = h + HDR;
            } else if (single != NULL) {
                memcpy(raw, single, have);   /* a second record: join them after all */
                single = NULL;
            }
            if (single == NULL)
                memcpy(raw + have, h + HDR, clen);
            have += clen;
        }
        off += rlen;
    }
    return -1;
}

/* The next name-value pair of joined params at *i: its lengths, *i at its name; false when
 * the lengths are cut short or run past the end. */
static bool nv_pair(const unsigned char *c, size_t len, size_t *i, size_t *nl, size_t *vl)
{
    return nv_len(c, len, i, nl) && nv_len(c, len, i, vl) && *nl <= len - *i &&
           *vl <= len - *i - *nl;
}

const char *fcgi_param_find(const unsigned char *raw, size_t len, const char *name,
                            size_t *vlen)
{
    size_t want = strlen(name), i = 0;
    while (i < len) {
        size_t nl, vl;
        if (!nv_pair(raw, len, &i, &nl, &vl))
            return NULL;
        if (nl == want && memcmp(raw + i, name, nl) == 0) {
            *vlen = vl;
            return (const char *)raw + i + nl;
        }
        i += nl + vl;
    }
    return NULL;
}

int fcgi_params_env(const unsigned char *p, size_t n, unsigned char *raw, size_t rawcap,
                    char *out, size_t outcap, char **env, int maxenv)
{
    const unsigned char *c;
    long joined = fcgi_params_join(p, n, raw, rawcap, &c);
    if (joined < 0)
        return -1;
    size_t have = (size_t)joined;
    raw = (unsigned char *)c;   /* read only from here */
    int k = 0;
    size_t i = 0, o = 0;
    while (i < have) {
        size_t nl, vl;
        if (!nv_pair(raw, have, &i, &nl, &vl))
            return -1;
        if (k + 1 >= maxenv || nl + vl + 2 > outcap - o)
            return -1;
        /* A name with '=' or a NUL in it could be read as another param: left out. */
        bool plain = memchr(raw + i, '=', nl) == NULL && memchr(raw + i, '\0', nl) == NULL;
        if (plain) {
            env[k++] = out + o;
            memcpy(out + o, raw + i, nl);
            o += nl;
            out[o++] = '=';
            memcpy(out + o, raw + i + nl, vl);
            o += vl;
            out[o++] = '\0';
        }
        i += nl + vl;
    }
    env[k] = NULL;
    return k;
}

size_t fcgi_end_request(unsigned char *out, size_t cap, unsigned req_id, uint32_t app_status,
                        unsigned char proto_status)
{
    if (cap < 16)
        return 0;
    put_header(out, FCGI_T_END, req_id, 8, 0);
    out[8] = (unsigned char)(app_status >> 24);
    out[9] = (unsigned char)(app_status >> 16);
    out[10] = (unsigned char)(app_status >> 8);
    out[11] = (unsigned char)app_status;
    out[12] = proto_status;
    out[13] = out[14] = out[15] = 0;
    return 16;
}

size_t fcgi_unknown_type(unsigned char *out, size_t cap, unsigned char type)
{
    if (cap < 16)
        return 0;
    put_header(out, FCGI_T_UNKNOWN_TYPE, 0, 8, 0);
    memset(out + 8, 0, 8);
    out[8] = type;
    return 16;
}

static size_t put_nv(unsigned char *o, size_t cap, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    if (nl > 127 || vl > 127 || cap < 2 + nl + vl)
        return 0;
    o[0] = (unsigned char)nl;
    o[1] = (unsigned char)vl;
    memcpy(o + 2, name, nl);
    memcpy(o + 2 + nl, value, vl);
    return 2 + nl + vl;
}

size_t fcgi_get_values_result(unsigned char *out, size_t cap, const unsigned char *content,
                              size_t len, unsigned max_conns, unsigned max_reqs)
{
    if (cap < HDR)
        return 0;
    size_t o = HDR, i = 0;
    char num[16];
    while (i < len) {
        /* Names come with (normally empty) values; lengths of 1 or 4 bytes. */
        size_t lens[2];
        for (int k = 0; k < 2; k++) {
            if (i >= len)
                return 0;
            if (content[i] & 0x80) {
                if (i + 4 > len)
                    return 0;
                lens[k] = ((size_t)(content[i] & 0x7F) << 24) | ((size_t)content[i + 1] << 16) |
                          ((size_t)content[i + 2] << 8) | content[i + 3];
                i += 4;
            } else {
                lens[k] = content[i++];
            }
        }
        if (lens[0] > len - i || lens[1] > len - i - lens[0])
            return 0;
        const char *name = (const char *)content + i;
        size_t nl = lens[0];
        i += lens[0] + lens[1];
        const char *val = NULL;
        if (nl == 14 && memcmp(name, "FCGI_MAX_CONNS", 14) == 0) {
            snprintf(num, sizeof(num), "%u", max_conns);
            val = num;
        } else if (nl == 13 && memcmp(name, "FCGI_MAX_REQS", 13) == 0) {
            snprintf(num, sizeof(num), "%u", max_reqs);
            val = num;
        } else if (nl == 15 && memcmp(name, "FCGI_MPXS_CONNS", 15) == 0) {
            val = "0";
        }
        if (val != NULL) {
            char nbuf[16];
            memcpy(nbuf, name, nl);
            nbuf[nl] = '\0';
            size_t w = put_nv(out + o, cap - o, nbuf, val);
            if (w == 0)
                return 0;
            o += w;
        }
    }
    size_t clen = o - HDR;
    size_t pad = (8 - clen % 8) % 8;
    if (o + pad > cap)
        return 0;
    memset(out + o, 0, pad);
    put_header(out, FCGI_T_GET_VALUES_RESULT, 0, clen, (unsigned char)pad);
    return o + pad;
}

size_t fcgi_simple_response(unsigned char *out, size_t cap, unsigned req_id, const char *text,
                            size_t text_len)
{
    if (text_len > 65535 || cap < HDR + text_len + HDR + 16)
        return 0;
    put_header(out, FCGI_T_STDOUT, req_id, text_len, 0);
    memcpy(out + HDR, text, text_len);
    size_t o = HDR + text_len;
    put_header(out + o, FCGI_T_STDOUT, req_id, 0, 0);
    o += HDR;
    o += fcgi_end_request(out + o, cap - o, req_id, 0, FCGI_REQUEST_COMPLETE);
    return o;
}
