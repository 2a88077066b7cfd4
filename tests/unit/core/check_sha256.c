/* core/sha256: the FIPS 180-4 test vectors, one-shot and fed in pieces of every size, with the
 * CPU's SHA instructions (where there are) and with the portable code, which must agree. */
#include "core/first.h"
#include "core/sha256.h"
#include "tests/unit/check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *msg;
    const char *hex;
} vec[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",   /* 56 bytes: two blocks */
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
     "lmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

START_TEST(test_sha256_vectors)
{
    sha256_accelerated(_i == 0);   /* loop 0: as the process would; 1: portable */
    char h[65];
    for (size_t i = 0; i < TN_ARRAY_LEN(vec); i++) {
        sha256_hex(vec[i].msg, strlen(vec[i].msg), h);
        ck_assert_str_eq(h, vec[i].hex);
    }
    /* a million 'a's, fed 1,000 at a time */
    char a[1000];
    memset(a, 'a', sizeof(a));
    tn_sha256 s;
    tn_sha256_init(&s);
    for (int i = 0; i < 1000; i++)
        tn_sha256_update(&s, a, sizeof(a));
    tn_sha256_final_hex(&s, h);
    ck_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* Every split of a 200-byte message into two updates gives the one-shot digest (covers
 * padding that spills into a second block, and the whole-block fast path). */
START_TEST(test_sha256_pieces)
{
    unsigned char m[200];
    for (size_t i = 0; i < sizeof(m); i++)
        m[i] = (unsigned char)(i * 37 + 11);
    for (size_t len = 0; len <= sizeof(m); len += 7) {
        char want[65], got[65];
        sha256_hex(m, len, want);
        for (size_t cut = 0; cut <= len; cut++) {
            tn_sha256 s;
            tn_sha256_init(&s);
            tn_sha256_update(&s, m, cut);
            tn_sha256_update(&s, m + cut, len - cut);
            tn_sha256_final_hex(&s, got);
            ck_assert_str_eq(got, want);
        }
    }
}
END_TEST

/* Both compressions give the same digest of messages of every length up to four blocks (on a
 * CPU without the SHA instructions both runs are the portable code). */
START_TEST(test_sha256_both)
{
    unsigned char m[260];
    unsigned seed = 7;
    for (size_t i = 0; i < sizeof(m); i++)
        m[i] = (unsigned char)rand_r(&seed);
    for (size_t len = 0; len <= sizeof(m); len++) {
        char fast[65], plain[65];
        sha256_accelerated(true);
        sha256_hex(m, len, fast);
        sha256_accelerated(false);
        sha256_hex(m, len, plain);
        ck_assert_str_eq(fast, plain);
    }
    sha256_accelerated(true);
}
END_TEST

/* RFC 4231's cases 1, 2 and 6 (a key longer than a block is hashed first). */
START_TEST(test_hmac_sha256_vectors)
{
    static const char *const want[] = {
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"};
    unsigned char k1[20], k6[131];
    memset(k1, 0x0b, sizeof(k1));
    memset(k6, 0xaa, sizeof(k6));
    const struct {
        const void *key;
        size_t keylen;
        const char *msg;
    } c[] = {{k1, sizeof(k1), "Hi There"},
             {"Jefe", 4, "what do ya want for nothing?"},
             {k6, sizeof(k6), "Test Using Larger Than Block-Size Key - Hash Key First"}};
    for (size_t i = 0; i < TN_ARRAY_LEN(c); i++) {
        uint8_t mac[32];
        char hex[65];
        hmac_sha256(c[i].key, c[i].keylen, c[i].msg, strlen(c[i].msg), mac);
        for (int j = 0; j < 32; j++)
            snprintf(hex + 2 * j, 3, "%02x", mac[j]);
        ck_assert_str_eq(hex, want[i]);
    }
}
END_TEST

Suite *sha256_suite(void);
Suite *sha256_suite(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("sha256");
    tcase_add_loop_test(tc, test_sha256_vectors, 0, 2);
    tcase_add_test(tc, test_sha256_both);
    tcase_add_test(tc, test_sha256_pieces);
    tcase_add_test(tc, test_hmac_sha256_vectors);
    suite_add_tcase(s, tc);
    return s;
}
