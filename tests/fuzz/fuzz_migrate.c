/*
 * fuzz_migrate.c — the migration folder reader of storage/migrate.c: migrate_load (file
 * names, versions, order, duplicates), migrate_read_file (whole files, NUL bytes) and the
 * checksums it records.
 *
 * Input: up to 8 files, each [name length][name][content length, 2 bytes big-endian]
 * [content]. They are written to a fresh folder (under $TMPDIR, made once per process and
 * emptied between inputs); a name that cannot be a file name (empty, '/', NUL, "." or "..")
 * is skipped, as is a second file of the same name.
 *
 * Invariants, against a model of the rules in migrate.h:
 *   - migrate_load succeeds exactly when every *.sql file that is not hidden is named
 *     VERSION_NAME.sql (VERSION: 1-32 digits; NAME: letters, digits, '_' and '-'), holds
 *     no NUL byte, no two versions are equal as numbers, and name order is version order;
 *     other files are ignored; a refusal says why (err not empty);
 *   - on success the set has every such file once, in file-name order, with its version
 *     and name split from the file name, and the SHA-256 of its bytes (a reference here) as
 *     64 lower-case hex digits; migrate_latest is the last version ("" for none).
 */
#include "core/first.h"
#include "core/rc.h"
#include "storage/migrate.h"

#include "fuzz_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

static char dir[64];

/* ---- the folder ------------------------------------------------------------------------------ */

typedef struct file {
    char name[256];
    const unsigned char *content;
    size_t len;
} file;

static void empty_dir(void)
{
    DIR *d = opendir(dir);
    FZ_ASSERT(d != NULL, "opendir %s", dir);
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

static void cleanup(void)
{
    if (dir[0] != '\0') {
        empty_dir();
        rmdir(dir);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/tenancy-fuzz-mig-XXXXXX", tmp ? tmp : "/tmp");
    FZ_ASSERT(mkdtemp(dir) != NULL, "mkdtemp");
    atexit(cleanup);
    return 0;
}

/* ---- the model ------------------------------------------------------------------------------- */

static bool considered(const char *f)
{
    size_t n = strlen(f);
    return f[0] != '.' && n >= 4 && strcmp(f + n - 4, ".sql") == 0;
}

static bool well_named(const char *f, size_t *vlen)
{
    size_t n = strlen(f), v = 0;
    while (f[v] >= '0' && f[v] <= '9')
        v++;
    if (v < 1 || v > 32 || f[v] != '_' || n < v + 1 + 1 + 4)
        return false;
    for (size_t i = v + 1; i < n - 4; i++) {
        char c = f[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    *vlen = v;
    return true;
}

/* The version's number as digits without leading zeros ("0" for zero). */
static void canon(const char *v, size_t n, char *out)
{
    size_t i = 0;
    while (i + 1 < n && v[i] == '0')
        i++;
    memcpy(out, v + i, n - i);
    out[n - i] = '\0';
}

static int num_cmp(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a, b);
}

static int by_name(const void *x, const void *y)
{
    return strcmp(((const file *)x)->name, ((const file *)y)->name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    file files[8];
    int nf = 0;
    size_t i = 0;
    while (nf < 8 && i < size) {
        size_t nl = data[i++];
        if (nl > size - i)
            break;
        file *f = &files[nf];
        memcpy(f->name, data + i, nl);
        f->name[nl] = '\0';
        i += nl;
        if (size - i < 2)
            break;
        size_t cl = (size_t)data[i] << 8 | data[i + 1];
        i += 2;
        if (cl > size - i)
            cl = size - i;
        f->content = data + i;
        f->len = cl;
        i += cl;
        bool ok = nl > 0 && strlen(f->name) == nl && strchr(f->name, '/') == NULL &&
                  strcmp(f->name, ".") != 0 && strcmp(f->name, "..") != 0;
        for (int k = 0; k < nf && ok; k++)
            ok = strcmp(files[k].name, f->name) != 0;
        if (ok)
            nf++;
    }

    empty_dir();
    char path[512];
    for (int k = 0; k < nf; k++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[k].name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        FZ_ASSERT(fd >= 0, "creating %s", path);
        FZ_ASSERT(files[k].len == 0 || write(fd, files[k].content, files[k].len) == (ssize_t)files[k].len,
                  "writing %s", path);
        close(fd);
    }

    /* The model: the files that count, in name order. */
    file sql[8];
    int ns = 0;
    bool valid = true;
    for (int k = 0; k < nf; k++)
        if (considered(files[k].name))
            sql[ns++] = files[k];
    qsort(sql, (size_t)ns, sizeof(*sql), by_name);
    char ver[8][40];
    for (int k = 0; k < ns && valid; k++) {
        size_t vl;
        if (!well_named(sql[k].name, &vl) || memchr(sql[k].content, '\0', sql[k].len) != NULL) {
            valid = false;
            break;
        }
        canon(sql[k].name, vl, ver[k]);
        for (int j = 0; j < k && valid; j++)
            if (num_cmp(ver[j], ver[k]) >= 0)
                valid = false;   /* a duplicate, or name order is not version order */
    }

    migration_set *s = NULL;
    char err[1024] = "";
    int rc = migrate_load(dir, &s, err, sizeof(err));
    if (!valid) {
        FZ_ASSERT(rc == TN_INVALID, "migrate_load returned %d for a folder the rules refuse", rc);
        FZ_ASSERT(s == NULL && err[0] != '\0', "a refusal without a reason");
        return 0;
    }
    FZ_ASSERT(rc == TN_OK, "migrate_load refused a valid folder (%d): %s", rc, err);
    FZ_ASSERT(migrate_count(s) == ns, "%d migrations loaded, %d expected", migrate_count(s), ns);
    for (int k = 0; k < ns; k++) {
        const migration_info *m = migrate_at(s, k);
        FZ_ASSERT(m != NULL && strcmp(m->file, sql[k].name) == 0, "migration %d is %s, not %s", k,
                  m ? m->file : "(none)", sql[k].name);
        size_t vl;
        FZ_ASSERT(well_named(m->file, &vl), "bad name loaded");
        FZ_ASSERT(strlen(m->version) == vl && strncmp(m->version, m->file, vl) == 0,
                  "version %s of %s", m->version, m->file);
        FZ_ASSERT(strlen(m->name) == strlen(m->file) - vl - 5 &&
                      strncmp(m->name, m->file + vl + 1, strlen(m->name)) == 0,
                  "name %s of %s", m->name, m->file);
        char want[65];
        fz_sha256_hex(sql[k].content, sql[k].len, want);
        FZ_ASSERT(strcmp(m->checksum, want) == 0, "checksum of %s: %s, not %s", m->file,
                  m->checksum, want);
    }
    FZ_ASSERT(migrate_at(s, ns) == NULL && migrate_at(s, -1) == NULL, "migrate_at out of range");
    const char *latest = migrate_latest(s);
    FZ_ASSERT(ns == 0 ? latest[0] == '\0' : strcmp(latest, migrate_at(s, ns - 1)->version) == 0,
              "migrate_latest is '%s'", latest);
    migrate_free(s);
    return 0;
}
