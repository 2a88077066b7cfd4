/*
 * fuzz_conf.c — the table-driven INI parser (core/conf.c) with tenancyd.conf's own tables,
 * and config_load (fcgi/config.c), which adds the file read, mount.NAME.* and placement.NAME.*
 * keys (config_dynamic_key, which the parse below uses too) and the
 * cross-option checks (tenancy/config.c, core/netaddr.c).
 *
 * The input is the file's bytes. They go through conf_parse_text_targets with the three
 * tables of tenancyd.conf (host, tenancy, admin panel), and through config_load from a
 * memfd, as tenancyd -t reads them (with the admin panel's table added as a config part, as
 * fcgi/main.c adds it).
 *
 * Invariants:
 *   - a parse error always names the file and a line within the text (1..lines), with a
 *     message; conf_error_format writes "name:line: message";
 *   - config_load fails exactly where the text parse fails, on the same line with the same
 *     message; past the parse, only its checks of the whole file may fail (line 0); a file
 *     holding a NUL byte is refused as not text (line 0);
 *   - what parses, dumped back with conf_dump (tenancyd -T), parses again to the same dump.
 */
#include "core/first.h"
#include "core/conf.h"
#include "core/rc.h"
#include "admin/config.h"
#include "fcgi/config.h"
#include "tenancy/config.h"

#include "fuzz_common.h"

#include <sys/mman.h>
#include <unistd.h>

static int memfd = -1;
static char memfd_path[64];

/* The panel's options as config_load reads them: a part with its checks, as the composition
 * root adds it (the parse below reaches only the table). */
static int admin_finish(tn_config *gen, void *obj, char *err, size_t errlen)
{
    return admin_config_finish(obj, &gen->tenancy, gen->arena, err, errlen);
}

static const config_part admin_part = {.name = "admin", .table = admin_config_table,
                                       .size = sizeof(admin_config), .finish = admin_finish};

static int parse(const char *text, tn_config *c, admin_config *ac, arena *a, conf_error *err)
{
    memset(c, 0, sizeof(*c));
    memset(ac, 0, sizeof(*ac));
    c->arena = a;
    conf_target t[] = {{tn_config_table, c},
                       {tenancy_config_table, &c->tenancy},
                       {admin_config_table, ac}};
    return conf_parse_text_targets(t, 3, "fuzz.conf", text, a, config_dynamic_key, err);
}

static char *dump(const tn_config *c, const admin_config *ac, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    FZ_ASSERT(f != NULL, "open_memstream");
    conf_dump(tn_config_table, c, f);
    conf_dump(tenancy_config_table, &c->tenancy, f);
    conf_dump(admin_config_table, ac, f);
    fclose(f);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        FZ_ASSERT(config_add_part(&admin_part) == TN_OK, "config_add_part");
        memfd = memfd_create("fuzz_conf", 0);
        FZ_ASSERT(memfd >= 0, "memfd_create");
        snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
    }
    char *text = fz_copy(data, size, true);
    size_t tl = strlen(text);
    int lines = 1;
    for (size_t i = 0; i < tl; i++)
        lines += text[i] == '\n';

    arena *a = arena_create(0);
    tn_config c;
    admin_config ac;
    conf_error err;
    memset(&err, 0, sizeof(err));
    int rc = parse(text, &c, &ac, a, &err);
    FZ_ASSERT(rc == TN_OK || rc == TN_INVALID, "conf_parse_text_targets returned %d", rc);
    char msg[1024];
    if (rc != TN_OK) {
        FZ_ASSERT(err.line >= 1 && err.line <= lines, "error on line %d of a %d-line text: %s",
                  err.line, lines, err.msg);
        FZ_ASSERT(err.msg[0] != '\0', "an error without a message (line %d)", err.line);
        FZ_ASSERT(strcmp(err.file, "fuzz.conf") == 0, "the error names '%s'", err.file);
        conf_error_format(&err, msg, sizeof(msg));
        char want[32];
        snprintf(want, sizeof(want), "fuzz.conf:%d: ", err.line);
        FZ_ASSERT(strncmp(msg, want, strlen(want)) == 0, "formatted as '%s'", msg);
    } else {
        /* The dump parses back to itself. */
        size_t dl, dl2;
        char *d1 = dump(&c, &ac, &dl);
        arena *a2 = arena_create(0);
        tn_config c2;
        admin_config ac2;
        conf_error err2;
        int rc2 = parse(d1, &c2, &ac2, a2, &err2);
        FZ_ASSERT(rc2 == TN_OK, "the dump does not parse: line %d: %s\n%s", err2.line,
                  err2.msg, d1);
        if (rc2 == TN_OK) {
            char *d2 = dump(&c2, &ac2, &dl2);
            FZ_ASSERT(dl == dl2 && memcmp(d1, d2, dl) == 0,
                      "the dump does not parse back to itself:\n%s----\n%s", d1, d2);
            free(d2);
        }
        arena_destroy(a2);
        free(d1);
    }

    /* The same bytes as a file, through config_load. */
    FZ_ASSERT(ftruncate(memfd, 0) == 0 && pwrite(memfd, data, size, 0) == (ssize_t)size,
              "writing the memfd");
    conf_error lerr;
    memset(&lerr, 0, sizeof(lerr));
    tn_config *cfg = config_load(memfd_path, &lerr);
    if (memchr(data, '\0', size) != NULL) {
        FZ_ASSERT(cfg == NULL && lerr.line == 0 && strstr(lerr.msg, "NUL") != NULL,
                  "a file with a NUL byte: line %d: %s", lerr.line, lerr.msg);
    } else if (rc != TN_OK) {
        FZ_ASSERT(cfg == NULL, "config_load accepted what the parser refuses");
        FZ_ASSERT(lerr.line == err.line && strcmp(lerr.msg, err.msg) == 0,
                  "config_load says line %d '%s', the parser line %d '%s'", lerr.line, lerr.msg,
                  err.line, err.msg);
    } else if (cfg == NULL) {
        FZ_ASSERT(lerr.line == 0 && lerr.msg[0] != '\0',
                  "a whole-file check failed with line %d: '%s'", lerr.line, lerr.msg);
    }
    config_free(cfg);
    arena_destroy(a);
    free(text);
    return 0;
}
