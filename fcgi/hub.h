/*
 * hub.h — the stream hub: one event-driven process per host that holds the Server-Sent
 * Events streams apps hand it (tn_subscribe), so that no worker waits on a listener.
 *
 * The master forks it like a worker, but outside the generations: a reload does not restart
 * it (it reads the new limits from the scoreboard, where the master writes them), recycling
 * workers does not touch it, and when it dies the master starts another after a growing
 * delay. A worker passes it the FastCGI connection of a request (SCM_RIGHTS over a datagram
 * socket pair the master made before any fork) with a fixed message (hub_msg), and forgets
 * the connection without answering: from then on the hub writes the response (the head,
 * the replay, each event, heartbeats) as FCGI_STDOUT records and ends it with an empty
 * STDOUT and END_REQUEST. Its counters are in the scoreboard (sb_hub), for the status JSON
 * and metrics.
 */
#ifndef TN_FCGI_HUB_H
#define TN_FCGI_HUB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fcgi/config.h"
#include "fcgi/scoreboard.h"
#include "tenancy/request.h"

#define HUB_MSG_MAGIC 0x74687531u   /* "thu1": a change of the layout changes it */

/* One hand-off: the request the connection carries and what it subscribes to. */
typedef struct hub_msg {
    uint32_t magic;
    uint16_t fcgi_id;        /* the FastCGI request id the hub answers */
    uint8_t keep_conn;       /* FCGI_KEEP_CONN: after END_REQUEST the connection carries more */
    uint8_t has_last;        /* resume after last_id (Last-Event-ID) */
    int64_t tenant_id;
    uint64_t last_id;
    int64_t started_ms;      /* the request's start (monotonic ms), for the hub's log */
    char slug[64];           /* the tenant's slug (the registry check, log lines) */
    char req_id[40];         /* the request id (log lines) */
    int32_t nchannels;       /* 0: every channel of the tenant */
    char channels[TN_SUB_MAX_CHANNELS][TN_SUB_CHANNEL_MAX + 1];
} hub_msg;

/* What the master gives the hub process. */
typedef struct hub_args {
    const tn_config *cfg;    /* the generation that served when the hub was started */
    scoreboard *sb;
    struct event_log *events;   /* the host's event log (tenancy/events.h; NULL: none) */
    int sock;                /* hand-offs arrive here */
    int pool_sock;           /* kept connections go back to the workers here (-1: close) */
    pid_t master_pid;
    int nclose;              /* the master's descriptors the hub must not keep */
    int close_fds[8 + 3 * (TN_MAX_SHARDS + 1)];
} hub_args;

/* Worker side: pass fd and msg to the hub. TN_OK (the hub owns the connection now; close
 * this process's copy without writing to it), TN_BUSY (its queue is full), TN_ERR. */
int hub_send(int sock, int fd, const hub_msg *msg);

/* Run the hub; never returns. */
TN_NORETURN void hub_main(const hub_args *a);

/* The SSE text of one event (pure; the unit tests call it): "id: <id>\nevent: <channel>\n"
 * and one "data: " line per line of data (CR, LF and CRLF all end a line), then the blank
 * line. Appended to out. */
struct buf;
void hub_format_event(struct buf *out, uint64_t id, const char *channel, const char *data,
                      size_t len);

/* FastCGI STDOUT records carrying len bytes of p for request id (split at 65535 bytes,
 * padded to 8), appended to out. len 0: the empty record that ends the stream. */
void hub_stdout_records(struct buf *out, unsigned id, const char *p, size_t len);

#endif
