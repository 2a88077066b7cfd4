/*
 * signals.h — signal handling for the master: every handler writes one byte to a self-pipe.
 *
 * Why: a handler may interrupt the master anywhere (inside malloc, half-way through a
 * child-table update); doing work there corrupts state. So a handler only records the signal
 * as a byte on a non-blocking pipe and restores errno; the master loop reads the pipe and
 * acts. Signals are blocked across fork() (signals_block/unblock) so a child never runs the
 * master's handlers; the child then calls signals_reset_child().
 */
#ifndef TN_FCGI_SIGNALS_H
#define TN_FCGI_SIGNALS_H

#include <signal.h>

/* Install the master's handlers. Returns the read end of the self-pipe, or -1. */
int signals_init_master(void);

/* Next recorded signal number, or 0 when none is pending. */
int signals_next(void);

/* Block every signal, saving the mask in *old; restore it. */
void signals_block_all(sigset_t *old);
void signals_restore(const sigset_t *old);

/* In a child after fork: close the self-pipe, default every handler the master installed. */
void signals_reset_child(void);

#endif
