/*
 * signals.c — the master's self-pipe (see signals.h).
 * Must not: do anything in a handler but write(2) one byte and restore errno.
 */
#include "core/first.h"
#include "fcgi/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int sp[2] = {-1, -1};

static const int handled[] = {SIGHUP, SIGQUIT, SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGCHLD};

static void on_signal(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    /* If the pipe is full the master is already awake with work queued: dropping is fine,
     * except that SIGCHLD coalescing is harmless because reaping loops until none is left. */
    (void)!write(sp[1], &b, 1);
    errno = saved;
}

int signals_init_master(void)
{
    if (pipe2(sp, O_NONBLOCK | O_CLOEXEC) < 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;   /* no SA_RESTART: let poll() return at once */
    for (size_t i = 0; i < TN_ARRAY_LEN(handled); i++)
        sigaction(handled[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return sp[0];
}

int signals_next(void)
{
    unsigned char b;
    ssize_t n = read(sp[0], &b, 1);
    return n == 1 ? b : 0;
}

void signals_block_all(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, old);
}

void signals_restore(const sigset_t *old) { sigprocmask(SIG_SETMASK, old, NULL); }

void signals_reset_child(void)
{
    if (sp[0] >= 0)
        close(sp[0]);
    if (sp[1] >= 0)
        close(sp[1]);
    sp[0] = sp[1] = -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < TN_ARRAY_LEN(handled); i++)
        sigaction(handled[i], &sa, NULL);
}
