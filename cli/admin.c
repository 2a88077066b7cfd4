/*
 * admin.c — `tenancy admin passwd`: set the admin panel's password of one user.
 *
 *   tenancy admin passwd [USER] [--stdin | --generate]
 *
 * The password is hashed with libxcrypt's yescrypt (crypt_gensalt "$y$" with the library's
 * default cost and a random salt, then crypt_r) and stored as a `user:hash` line in
 * admin.password_file (default state_dir/admin.passwd), replacing that user's line
 * (tenancy/operators.c writes the file whole, then renames it over); when root writes it and
 * tenancyd.conf names a `user`, the file is given to that user, who must read it.
 *
 * Without an option the password is asked twice on the terminal (not echoed); --stdin reads
 * one line; --generate makes a random one and prints it (make demo's one-time password).
 *
 * A new password ends every login made with the old one without this command doing more:
 * each panel session keeps a fingerprint of the password it was opened under, and the panel
 * refuses (and deletes) a session whose fingerprint is no longer its user's (admin/auth.c).
 *
 * Owns: asking for the password and hashing it. Must not: print a password except the
 * one --generate made, keep one in memory longer than needed, or touch the registry (the
 * panel's sessions are the panel's: admin/sessions.c).
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/rc.h"
#include "tenancy/operators.h"

#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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

int cli_admin_passwd(cli *c, const cli_args *a)
{
    const char *user = a->npos > 0 ? a->pos[0] : "admin";
    if (!operators_name_ok(user))
        return cli_usage(c, "a user name is 1-64 of A-Z, a-z, 0-9, '.', '_', '-' and '@'");
    bool from_stdin = cli_opt(a, "--stdin") != NULL, gen = cli_opt(a, "--generate") != NULL;
    if (from_stdin && gen)
        return cli_usage(c, "--stdin and --generate exclude each other");
    const char *path = c->cfg->password_file;
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
    char err[4400];
    uid_t uid;
    gid_t gid;
    /* The workers read the file: theirs when root writes it. */
    ops_env oe;
    cli_ops_env(c, &oe);
    bool replaced = false;
    int rc = ops_workers_owner(&oe, &uid, &gid, err, sizeof(err));
    if (rc == TN_OK)
        rc = operators_write_hash(path, user, hash, uid, gid, &replaced, err, sizeof(err));
    explicit_bzero(&cd, sizeof(cd));
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
