/*
 * sdnotify.c — the sd_notify datagram protocol (see sdnotify.h).
 */
#include "core/first.h"
#include "fcgi/sdnotify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void sd_notifyf(const char *fmt, ...)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || (path[0] != '/' && path[0] != '@') || strlen(path) >= 108)
        return;
    char dgram[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dgram, sizeof(dgram), fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if ((size_t)n >= sizeof(dgram))
        n = sizeof(dgram) - 1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path));
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0';   /* abstract namespace */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    (void)!sendto(fd, dgram, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    close(fd);
}
