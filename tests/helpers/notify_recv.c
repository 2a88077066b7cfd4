/*
 * notify_recv.c — a stand-in for systemd's notification socket, for tests.
 *
 *   notify_recv PATH SECONDS
 *
 * Binds a unix datagram socket at PATH and prints every message it receives (as sent by
 * sd_notify: "READY=1\nSTATUS=...") on its own line, newlines inside a message shown as
 * '|', for SECONDS, then exits 0. Test-only; never installed.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: notify_recv PATH SECONDS\n");
        return 2;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "notify_recv: path too long\n");
        return 2;
    }
    strcpy(sa.sun_path, argv[1]);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    unlink(argv[1]);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        perror("notify_recv");
        return 1;
    }
    time_t end = time(NULL) + atoi(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (time(NULL) < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        char msg[4096];
        ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);
        if (n <= 0)
            continue;
        msg[n] = '\0';
        for (ssize_t i = 0; i < n; i++)
            if (msg[i] == '\n')
                msg[i] = '|';
        printf("%s\n", msg);
    }
    unlink(argv[1]);
    return 0;
}
