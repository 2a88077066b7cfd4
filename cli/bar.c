/*
 * bar.c — the progress bar of the command's long runs (migrate, run, tenant create
 * --from-file): count, rate and ETA on stderr when it is a terminal, drawn from the tenant
 * operations' progress events (tenancy/ops.h), at most every 100 ms, and cleared at the end
 * so that the table that follows starts on a clean line. With --progress-file FILE the same
 * events also go to FILE (ops_progress_write: the panel's job page reads it), at most every
 * 250 ms and at each tenant's end.
 *
 * Must not: write to stdout, or anything to stderr when it is not a terminal.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"

#include <stdio.h>
#include <unistd.h>

void cli_bar_init(cli_bar *b, const char *file)
{
    b->on = isatty(STDERR_FILENO) == 1;
    b->last = 0;
    b->file = file;
    b->file_last = 0;
    b->slug[0] = b->outcome[0] = '\0';
}

void cli_bar_draw(void *ctx, const ops_progress *p)
{
    cli_bar *b = ctx;
    int64_t now = clock_mono_ms();
    if (b->file != NULL && p->slug != NULL) {
        snprintf(b->slug, sizeof(b->slug), "%s", p->slug);
        snprintf(b->outcome, sizeof(b->outcome), "%s", p->outcome ? p->outcome : "");
    }
    if (b->file != NULL && (p->final || p->slug != NULL || now - b->file_last >= 250)) {
        ops_progress q = *p;   /* a tick names the last tenant that finished */
        q.slug = b->slug;
        q.outcome = b->outcome;
        (void)ops_progress_write(b->file, &q);   /* the run does not depend on it */
        b->file_last = now;
    }
    if (!b->on)
        return;
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
