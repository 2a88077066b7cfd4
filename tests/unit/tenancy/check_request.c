/*
 * check_request.c — tenancy/request.c's host names: the one normaliser
 * (request_host_normalise) and the routing host a request computes once
 * (request_route_host). No database, no files.
 *
 * Owns: these cases only. The tenant-name rule itself is checked case by case in
 * check_tenant.c (tenant_host_normalise is a wrapper over the same function).
 */
#include "core/first.h"
#include "tenancy/request.h"
#include "core/arena.h"
#include "core/buf.h"
#include "tenancy/tenant.h"

#include <check.h>
#include <string.h>

/* ---- the normaliser ------------------------------------------------------------------------- */

static void norm(const char *in, const char *want, bool want_valid)
{
    char out[300];
    bool valid = !want_valid;
    size_t n = request_host_normalise(in, out, sizeof(out), &valid);
    ck_assert_msg(strcmp(out, want) == 0, "'%s' gave '%s', not '%s'", in, out, want);
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_msg(valid == want_valid, "'%s' valid = %d", in, valid);
}

START_TEST(test_normalise)
{
    norm("Example.COM", "example.com", true);
    norm("example.com:8080", "example.com", true);
    norm("acme.example.com.", "acme.example.com", true);
    norm("ACME.example.com.:443", "acme.example.com", true);
    /* the lexical form whatever the validity: the app's tn_host and the access log */
    norm("example.com:", "example.com", false);
    norm("example.com:8a", "example.com", false);
    norm("[::1]:8080", "[::1]", false);
    norm("[FE80::1]", "[fe80::1]", false);
    norm("1.2.3.4", "1.2.3.4", false);
    norm("a_b.example", "a_b.example", false);
    norm("", "", false);
    norm(NULL, "", false);
}
END_TEST

/* The wrappers agree with the one normaliser: tenant_host_normalise is its name when valid,
 * request_normalise_host its name whatever the validity. */
START_TEST(test_wrappers_agree)
{
    const char *in[] = {"Example.COM:80", "[::1]:80", "a..b", "x.123", "xn--bcher-kva.ch.",
                        "host:", "-a.example", "UPPER"};
    arena *a = arena_create(0);
    for (size_t i = 0; i < TN_ARRAY_LEN(in); i++) {
        char one[300], t[300];
        bool valid;
        size_t n = request_host_normalise(in[i], one, sizeof(one), &valid);
        size_t tn = tenant_host_normalise(in[i], t, sizeof(t));
        ck_assert_uint_eq(tn, valid ? n : 0);
        if (valid)
            ck_assert_str_eq(t, one);
        ck_assert_str_eq(request_normalise_host(a, in[i]), one);
    }
    arena_destroy(a);
}
END_TEST

START_TEST(test_normalise_bounds)
{
    char name[300], out[254];
    for (int i = 0; i < 4; i++)
        memcpy(name + 64 * i, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.", 64);
    name[253] = '\0';   /* 253 bytes: the longest name */
    bool valid;
    ck_assert_uint_eq(request_host_normalise(name, out, sizeof(out), &valid), 253);
    ck_assert(valid);
    name[253] = 'a';
    name[254] = '\0';   /* 254: too long, and does not fit with its NUL either */
    ck_assert_uint_eq(request_host_normalise(name, out, sizeof(out), &valid), 0);
    ck_assert(!valid);
    ck_assert_str_eq(out, "");
    ck_assert_uint_eq(request_host_normalise("example.com", out, 0, &valid), 0);
}
END_TEST

/* ---- the routing host ----------------------------------------------------------------------- */

struct fake {
    const char *names[4], *values[4];
    int n, asked;
};

static const char *fparam(void *tx, const char *name)
{
    struct fake *f = tx;
    f->asked++;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return f->values[i];
    return NULL;
}

static int fread_(void *tx, char *p, int n)
{
    (void)tx, (void)p, (void)n;
    return 0;
}

static int fwrite_(void *tx, const char *p, size_t n)
{
    (void)tx, (void)p, (void)n;
    return 0;
}

static const tn_transport fake_tp = {fparam, fread_, fwrite_};
static const char *const params[] = {"TENANT_HOST", "HTTP_HOST"};

/* The routing host of a request with the given params, through request_route_host. */
static int route(struct fake *f, tn_request *r, arena *a, buf *h, buf *o)
{
    request_init(r, &fake_tp, f, a, h, o, 0, "t", 0);
    f->asked = 0;
    return request_route_host(r, params, 2);
}

START_TEST(test_route_host)
{
    arena *a = arena_create(0);
    buf h = BUF_INIT, o = BUF_INIT;
    tn_request r;
    struct fake f = {{"TENANT_HOST", "HTTP_HOST"}, {"Acme.Example.com.", "other.example"}, 2, 0};
    ck_assert_int_eq(route(&f, &r, a, &h, &o), RH_OK);
    ck_assert_str_eq(r.route_host, "acme.example.com");
    ck_assert_uint_eq(r.route_host_len, strlen("acme.example.com"));
    /* the app's host is HTTP_HOST's, as before */
    ck_assert_str_eq(tn_host(&r), "other.example");
    /* computed once: a second call asks the transport nothing */
    int asked = f.asked;
    ck_assert_int_eq(request_route_host(&r, params, 2), RH_OK);
    ck_assert_int_eq(f.asked, asked);

    /* an empty first param: the next one */
    f.values[0] = "";
    ck_assert_int_eq(route(&f, &r, a, &h, &o), RH_OK);
    ck_assert_str_eq(r.route_host, "other.example");
    /* invalid: an IPv6 literal, a port that is not one */
    f.values[0] = "[::1]:80";
    ck_assert_int_eq(route(&f, &r, a, &h, &o), RH_INVALID);
    ck_assert_str_eq(r.route_host, "");
    ck_assert_str_eq(tn_host(&r), "other.example");
    f.values[0] = "acme.example:x";
    ck_assert_int_eq(route(&f, &r, a, &h, &o), RH_INVALID);
    /* absent */
    f.n = 0;
    ck_assert_int_eq(route(&f, &r, a, &h, &o), RH_ABSENT);
    ck_assert_str_eq(r.route_host, "");
    ck_assert_str_eq(tn_host(&r), "");
    buf_free(&h);
    buf_free(&o);
    arena_destroy(a);
}
END_TEST

Suite *request_suite(void);
Suite *request_suite(void)
{
    Suite *s = suite_create("request");
    TCase *tc = tcase_create("hosts");
    tcase_add_test(tc, test_normalise);
    tcase_add_test(tc, test_wrappers_agree);
    tcase_add_test(tc, test_normalise_bounds);
    tcase_add_test(tc, test_route_host);
    suite_add_tcase(s, tc);
    return s;
}
