/*
 * sdnotify.h — systemd readiness notification (Type=notify), without libsystemd.
 * Each call is a no-op when NOTIFY_SOCKET is unset.
 */
#ifndef TN_FCGI_SDNOTIFY_H
#define TN_FCGI_SDNOTIFY_H

/* Send one notification ("READY=1", "STATUS=...", "RELOADING=1", "STOPPING=1"). */
void sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
