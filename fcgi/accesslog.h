/*
 * accesslog.h — a worker's access log: whole lines gathered in a buffer, written together.
 *
 * A write per request line costs a system call (and the file's lock) on every request;
 * gathering lines and writing them together costs one per batch. Lines are never split
 * across writes, so workers sharing one file or pipe never interleave inside a line: a
 * regular file (O_APPEND) takes batches up to the configured size; a pipe, socket or
 * terminal at most PIPE_BUF bytes, the most the system writes atomically there. Lines go
 * out when the buffer is full or when the oldest is flush_ms old: a busy worker notices at
 * its next line, an idle one wakes for it (alog_due). Before a reopen and when the worker
 * leaves they go too; a crash loses at most the last flush_ms of lines.
 *
 * Writeback: left alone, the kernel keeps a busy log's pages dirty for half a minute and then
 * writes them in bursts, and every fsync of the tenants' storage that meets such a burst waits
 * behind it. After every `writeback` bytes it wrote to a regular file, a worker asks the
 * kernel to start writing the file out (sync_file_range, without waiting), so that little of
 * the log is dirty at any time (PostgreSQL's *_flush_after settings do the same for its files).
 *
 * Must not: allocate or lock on the write path, or write part of a line.
 */
#ifndef TN_FCGI_ACCESSLOG_H
#define TN_FCGI_ACCESSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct alog alog;

/* Open path ("stdout", "stderr" or a file, created 0640, appended to) with a buffer of
 * `buffer` bytes (0: a write per line) flushed after flush_ms, and the file's writeback
 * started after every `writeback` bytes written (0: never; pipes and terminals: never).
 * TN_OK and *out; TN_ERR with errno when the file cannot be opened; TN_NOMEM. */
int alog_open(const char *path, size_t buffer, int64_t flush_ms, size_t writeback, alog **out);

/* How many times this log started the file's writeback (for tests and the curious). */
uint64_t alog_writebacks(const alog *a);

/* Add one whole line (its newline included); now_ms is any monotonic millisecond clock. */
void alog_line(alog *a, const char *line, size_t n, int64_t now_ms);

/* When the gathered lines must be written (a time of now_ms's clock), or -1: none. */
int64_t alog_due(const alog *a);

/* Write what is gathered. Async-signal-safe when no alog_line runs meanwhile. */
void alog_flush(alog *a);

/* Bytes gathered and not yet written. */
size_t alog_pending(const alog *a);

/* Flush, close the file (not stdout or stderr) and free. NULL is fine. */
void alog_close(alog *a);

#endif
