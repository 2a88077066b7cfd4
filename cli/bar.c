/*
 * bar.c — the progress bar of the command's long runs (migrate, tenant create --from-file):
 * count, rate and ETA on stderr when it is a terminal, drawn from the tenant operations'
 * progress events (tenancy/ops.h), at most every 100 ms, and cleared at the end so that
 * the table that follows starts on a clean line.
 *
 * Must not: write to stdout, or anything when stderr is not a terminal.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"

#include <stdio.h>
#include <unistd.h>

void cli_bar_init(cli_bar *b)
{
    b->on = isatty(STDERR_FILENO) == 1;
    b->last = 0;
}

void cli_bar_draw(void *ctx, const ops_progress *p)
{
    cli_bar *b = ctx;
    if (!b->on)
        return;
    int64_t now = clock_mono_ms();
    if (!p->final && now - b->last < 100)
        return;
    b->last = now;
    int total = p->total, done = p->done;
    double secs = (double)p->elapsed_ms / 1000.0;
    double rate = secs > 0 ? done / secs : 0;
    int width = 30, fill = total > 0 ? (int)((long)done * width / total) : width;
    char eta[32] = "--:--";
    if (rate > 0 && done < total) {
        long s = (long)((total - done) / rate + 0.5);
        snprintf(eta, sizeof(eta), "%ld:%02ld", s / 60, s % 60);
    } else if (done == total) {
        snprintf(eta, sizeof(eta), "0:00");
    }
    fprintf(stderr, "\r[");
    for (int i = 0; i < width; i++)
        fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %d/%d %3d%%  %.1f tenants/s  ETA %s", done, total,
            total > 0 ? done * 100 / total : 100, rate, eta);
    if (p->failed > 0)
        fprintf(stderr, "  %d failed", p->failed);
    fputs("\033[K", stderr);
    if (p->final)
        fputs("\r\033[K", stderr);   /* the table follows on a clean line */
    fflush(stderr);
}
