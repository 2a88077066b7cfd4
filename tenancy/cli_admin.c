/*
 * cli_admin.c — `tenancy admin passwd`: set the admin panel's password of one user.
 *
 *   tenancy admin passwd [USER] [--stdin | --generate]
 *
 * The password is hashed with libxcrypt's yescrypt (crypt_gensalt "$y$" with the library's
 * default cost and a random salt, then crypt_r) and stored as a `user:hash` line in
 * admin.password_file (default state_dir/admin.passwd), replacing that user's line. The file
 * is written whole to a temporary file beside it (mode 0640) and renamed over, so a reader
 * (a worker checking a login) never sees half of it; when root writes it and tenancyd.conf
 * names a `user`, the file is given to that user, who must read it.
 *
 * Without an option the password is asked twice on the terminal (not echoed); --stdin reads
 * one line; --generate makes a random one and prints it (make demo's one-time password).
 *
 * A new password ends every login made with the old one without this command doing more:
 * each panel session keeps a fingerprint of the password it was opened under, and the panel
 * refuses (and deletes) a session whose fingerprint is no longer its user's (admin/auth.c).
 *
 * Owns: the password file's format and writing it. Must not: print a password except the
 * one --generate made, keep one in memory longer than needed, or touch the registry (the
 * panel's sessions are the panel's: admin/sessions.c).
 */
#include "core/first.h"
#include "tenancy/cli_int.h"
#include "admin/config.h"
#include "core/rc.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#define PW_MIN 8
#define PW_MAX 1024

/* One line from fd into out (without the newline). 0, or -1 at EOF before anything. */
static int read_line(FILE *f, char *out, size_t n)
{
    if (fgets(out, (int)n, f) == NULL)
        return -1;
    out[strcspn(out, "\r\n")] = '\0';
    return 0;
}

static int prompt(const char *what, char *out, size_t n)
{
    FILE *tty = fopen("/dev/tty", "r+e");
    if (tty == NULL)
        return -1;
    struct termios old, quiet;
    bool restore = tcgetattr(fileno(tty), &old) == 0;
    if (restore) {
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
    }
    fputs(what, tty);
    fflush(tty);
    int rc = read_line(tty, out, n);
    if (restore)
        tcsetattr(fileno(tty), TCSAFLUSH, &old);
    fputc('\n', tty);
    fclose(tty);
    return rc;
}

static int generate(char *out, size_t n)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[18];
    if (n < 25 || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return -1;
    /* 24 characters of 6 random bits each, taken from the 144 bits in order. */
    for (size_t i = 0; i < 24; i++) {
        size_t bit = i * 6;
        unsigned v = (unsigned)raw[bit / 8] << 8 |
                     (bit / 8 + 1 < sizeof(raw) ? raw[bit / 8 + 1] : 0u);
        out[i] = b64[(v >> (10 - bit % 8)) & 63];
    }
    out[24] = '\0';
    explicit_bzero(raw, sizeof(raw));
    return 0;
}

/* The file with `user`'s line replaced (*replaced: the user had a password) or added, into
 * b. */
static int new_contents(const char *path, const char *user, const char *hash, buf *b,
                        bool *replaced, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    *replaced = false;
    size_t ul = strlen(user);
    if (f != NULL) {
        char line[2048];
        while (fgets(line, sizeof(line), f) != NULL) {
            if (strncmp(line, user, ul) == 0 && line[ul] == ':') {
                if (!*replaced)
                    buf_printf(b, "%s:%s\n", user, hash);
                *replaced = true;
                continue;
            }
            buf_puts(b, line);
            if (line[strlen(line) - 1] != '\n')
                buf_putc(b, '\n');
        }
        fclose(f);
    } else if (errno != ENOENT) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return TN_IO;
    }
    if (!*replaced)
        buf_printf(b, "%s:%s\n", user, hash);
    return b->oom ? TN_NOMEM : TN_OK;
}

static int write_file(cli *c, const char *path, const buf *b, char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.new.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return TN_IO;
    }
    bool ok = write(fd, b->p, b->len) == (ssize_t)b->len && fsync(fd) == 0;
    /* The workers read it: give it to tenancyd.conf's user when root writes it. */
    if (ok && geteuid() == 0 && c->cfg->user != NULL && c->cfg->user[0] != '\0') {
        struct passwd *pw = getpwnam(c->cfg->user);
        gid_t gid = pw ? pw->pw_gid : (gid_t)-1;
        if (pw != NULL && c->cfg->group != NULL && c->cfg->group[0] != '\0') {
            struct group *gr = getgrnam(c->cfg->group);
            gid = gr ? gr->gr_gid : gid;
        }
        ok = pw != NULL && fchown(fd, pw->pw_uid, gid) == 0;
    }
    if (close(fd) != 0)
        ok = false;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return TN_IO;
    }
    return TN_OK;
}

static int admin_part_finish(tn_config *gen, void *obj, char *err, size_t errlen)
{
    return admin_config_finish(obj, &gen->tenancy, gen->arena, err, errlen);
}

const config_part cli_admin_part = {.name = "admin", .table = admin_config_table,
                                    .size = sizeof(admin_config),
                                    .finish = admin_part_finish};

int cli_admin_passwd(cli *c, const cli_args *a)
{
    const char *user = a->npos > 0 ? a->pos[0] : "admin";
    if (!admin_user_name_ok(user))
        return cli_usage(c, "a user name is 1-64 of A-Z, a-z, 0-9, '.', '_', '-' and '@'");
    bool from_stdin = cli_opt(a, "--stdin") != NULL, gen = cli_opt(a, "--generate") != NULL;
    if (from_stdin && gen)
        return cli_usage(c, "--stdin and --generate exclude each other");
    const admin_config *ac = config_part_of(c->cfg, &cli_admin_part);
    const char *path = ac->password_file;
    char pw[PW_MAX + 2], again[PW_MAX + 2];
    if (gen) {
        if (generate(pw, sizeof(pw)) != 0)
            return cli_fail(c, TN_IO, "no random bytes available");
    } else if (from_stdin) {
        if (read_line(stdin, pw, sizeof(pw)) != 0)
            return cli_fail(c, TN_INVALID, "no password on standard input");
    } else {
        if (prompt("New password: ", pw, sizeof(pw)) != 0)
            return cli_usage(c, "no terminal to ask on: use --stdin or --generate");
        if (prompt("Again: ", again, sizeof(again)) != 0 || strcmp(pw, again) != 0) {
            explicit_bzero(pw, sizeof(pw));
            explicit_bzero(again, sizeof(again));
            return cli_fail(c, TN_INVALID, "the two passwords differ");
        }
        explicit_bzero(again, sizeof(again));
    }
    size_t len = strlen(pw);
    if (len < PW_MIN || len > PW_MAX) {
        explicit_bzero(pw, sizeof(pw));
        return cli_fail(c, TN_INVALID, "a password is %d to %d characters", PW_MIN, PW_MAX);
    }
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    static struct crypt_data cd;
    const char *hash = NULL;
    if (crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof(setting)) != NULL)
        hash = crypt_r(pw, setting, &cd);
    if (hash == NULL || hash[0] != '$') {
        explicit_bzero(pw, sizeof(pw));
        return cli_fail(c, TN_ERR, "yescrypt is not available in this libcrypt");
    }
    buf b = BUF_INIT;
    char err[4400];
    bool replaced;
    int rc = new_contents(path, user, hash, &b, &replaced, err, sizeof(err));
    explicit_bzero(&cd, sizeof(cd));
    if (rc == TN_OK)
        rc = write_file(c, path, &b, err, sizeof(err));
    buf_free(&b);
    if (rc != TN_OK) {
        explicit_bzero(pw, sizeof(pw));
        return cli_fail(c, rc, "%s", err);
    }
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"user\":");
        buf_json_str(&c->out, user);
        buf_puts(&c->out, ",\"file\":");
        buf_json_str(&c->out, path);
        buf_puts(&c->out, ",\"replaced\":");
        buf_puts(&c->out, replaced ? "true" : "false");
        if (gen) {
            buf_puts(&c->out, ",\"password\":");
            buf_json_str(&c->out, pw);
        }
        buf_putc(&c->out, '}');
    } else {
        if (gen)
            printf("password of '%s' set in %s: %s\n", user, path, pw);
        else
            printf("password of '%s' set in %s\n", user, path);
        if (replaced)
            printf("the panel refuses the sessions '%s' opened with the old password from now "
                   "on\n", user);
    }
    explicit_bzero(pw, sizeof(pw));
    return 0;
}
