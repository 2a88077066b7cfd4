/*
 * sha256.c — SHA-256 (FIPS 180-4), incremental and one-shot (see sha256.h).
 *
 * Owns: the compression function and the padding. The compression is the portable C below,
 * or, on x86-64 CPUs that have them, the SHA extensions (SHA-NI: four rounds per
 * instruction pair), chosen once per process: the data API hashes the caller's token on
 * every request. Must not: allocate, or keep anything between calls beyond the caller's
 * tn_sha256 (the choice of compression is the process's).
 */
#include "core/first.h"
#include "core/sha256.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SHA_NI 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress_c(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    /* The working variables a..h in locals the compiler keeps in registers (the data API
     * hashes a token on every request) */
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] +
                      w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

#ifdef SHA_NI
/* One block with the SHA extensions. They keep the state as (A,B,E,F) and (C,D,G,H) and
 * the schedule four words per register: W[i] from the four before it by msg1 (the sigma0
 * part), the words at distance 7 (alignr) and msg2 (the sigma1 part). */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8],
                                                                      const uint8_t *p)
{
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    const __m128i abef0 = abef, cdgh0 = cdgh;
    __m128i w[16];
    for (int i = 0; i < 16; i++) {
        if (i < 4)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), swap);
        else
            w[i] = _mm_sha256msg2_epu32(
                _mm_add_epi32(_mm_sha256msg1_epu32(w[i - 4], w[i - 3]),
                              _mm_alignr_epi8(w[i - 1], w[i - 2], 4)),
                w[i - 1]);
        __m128i m = _mm_add_epi32(w[i], _mm_loadu_si128((const __m128i *)&K[4 * i]));
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(m, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}
#endif

static void (*compress_fn)(uint32_t h[8], const uint8_t *p);

bool sha256_accelerated(bool allow)
{
    compress_fn = compress_c;
#ifdef SHA_NI
    /* CPUID directly: clang's __builtin_cpu_supports does not know "sha" (gcc's does) */
    unsigned a, b, c, d;
    bool sse = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_1) && (c & bit_SSSE3);
    bool sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
    if (allow && sse && sha)
        compress_fn = compress_ni;
#endif
    return compress_fn != compress_c;
}

static void compress(uint32_t h[8], const uint8_t *p)
{
    if (compress_fn == NULL)
        sha256_accelerated(true);
    compress_fn(h, p);
}

void tn_sha256_init(tn_sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof(h0));
    s->bytes = 0;
    s->used = 0;
}

void tn_sha256_update(tn_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->bytes += n;
    if (s->used == 0)   /* whole blocks straight from the input */
        for (; n >= 64; p += 64, n -= 64)
            compress(s->h, p);
    while (n > 0) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used == 64) {
            compress(s->h, s->block);
            s->used = 0;
        }
    }
}

void tn_sha256_final(tn_sha256 *s, uint8_t out[32])
{
    uint64_t bits = s->bytes * 8;
    s->block[s->used++] = 0x80;
    if (s->used > 56) {
        memset(s->block + s->used, 0, 64 - s->used);
        compress(s->h, s->block);
        s->used = 0;
    }
    memset(s->block + s->used, 0, 56 - s->used);
    for (int i = 0; i < 8; i++)
        s->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress(s->h, s->block);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void tn_sha256_final_hex(tn_sha256 *s, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t d[32];
    tn_sha256_final(s, d);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

void sha256(const void *data, size_t n, uint8_t out[32])
{
    tn_sha256 s;
    tn_sha256_init(&s);
    tn_sha256_update(&s, data, n);
    tn_sha256_final(&s, out);
}

void sha256_hex(const void *data, size_t n, char out[65])
{
    tn_sha256 s;
    tn_sha256_init(&s);
    tn_sha256_update(&s, data, n);
    tn_sha256_final_hex(&s, out);
}

void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, uint8_t out[32])
{
    uint8_t k[64] = {0}, pad[64], inner[32];
    if (keylen > sizeof(k))
        sha256(key, keylen, k);   /* a long key is hashed first (RFC 2104) */
    else if (keylen > 0)
        memcpy(k, key, keylen);
    tn_sha256 s;
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    tn_sha256_init(&s);
    tn_sha256_update(&s, pad, sizeof(pad));
    tn_sha256_update(&s, msg, n);
    tn_sha256_final(&s, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    tn_sha256_init(&s);
    tn_sha256_update(&s, pad, sizeof(pad));
    tn_sha256_update(&s, inner, sizeof(inner));
    tn_sha256_final(&s, out);
}
