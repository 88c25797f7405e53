/* The floor the machine allows: a minimal TCP/UDP ping-pong and TCP stream on loopback,
 * blocking or spinning, with nothing but the system calls. wirebench is measured against it.
 *
 *   reference pingpong tcp|udp SIZE SECONDS [spin]   -> one-way latency, microseconds (RTT/2)
 *   reference stream SECONDS [WRITE_SIZE [rcvlowat] [nagle]]  -> receiver throughput, bit/s
 * "rcvlowat" sets SO_RCVLOWAT to one read on the receiver, so that it wakes once per read rather
 * than once per segment (what wirebench's TCP receivers do by default). The loop turns Nagle off
 * (TCP_NODELAY) unless "nagle" is given.
 * With REF_CLIENT_CPU / REF_SERVER_CPU set, each side is pinned to that CPU.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pin(const char *var) {
    const char *v = getenv(var);
    if (!v) return;
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(atoi(v), &set);
    sched_setaffinity(0, sizeof set, &set);
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static int xfer(int fd, char *b, size_t n, int rx, int spin) {
    size_t off = 0;
    while (off < n) {
        ssize_t r = rx ? recv(fd, b + off, n - off, spin ? MSG_DONTWAIT : 0) : send(fd, b + off, n - off, 0);
        if (r == 0) return -1;
        if (r < 0) { if (spin) continue; return -1; }
        off += r;
    }
    return 0;
}

static int has(int argc, char **argv, int from, const char *word) {
    for (int i = from; i < argc; i++) if (!strcmp(argv[i], word)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: see the comment at the top\n"); return 2; }
    int stream = !strcmp(argv[1], "stream");
    int udp = !stream && !strcmp(argv[2], "udp");
    size_t size = stream ? (argc > 3 ? atol(argv[3]) : 131072) : atol(argv[3]);
    double secs = atof(argv[stream ? 2 : 4]);
    int spin = !stream && argc > 5 && !strcmp(argv[5], "spin");
    int type = udp ? SOCK_DGRAM : SOCK_STREAM;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    int ls = socket(AF_INET, type, 0), one = 1;
    bind(ls, (struct sockaddr *)&a, sizeof a);
    getsockname(ls, (struct sockaddr *)&a, &al);
    if (!udp) listen(ls, 1);
    char *buf = calloc(1, size ? size : 1);
    /* Real bytes, as every tool sends: an untouched calloc buffer of this size maps the
       shared zero page, whose copies always hit the cache and flatter the floor. */
    memset(buf, 0x5a, size ? size : 1);
    pid_t child = fork();
    if (child == 0) { /* server: echo, or sink */
        pin("REF_SERVER_CPU");
        int fd = ls;
        if (!udp) { fd = accept(ls, 0, 0); setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }
        if (stream) {
            int lowat = (int)size;
            if (has(argc, argv, 4, "rcvlowat")) setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
            while (recv(fd, buf, size, 0) > 0) {}
            return 0;
        }
        for (;;) {
            if (udp) {
                struct sockaddr_in p; socklen_t pl = sizeof p;
                ssize_t r = recvfrom(fd, buf, size, spin ? MSG_DONTWAIT : 0, (struct sockaddr *)&p, &pl);
                if (r < 0) { if (spin) continue; return 0; }
                if (r == 1 && buf[0] == 'q' && size > 1) return 0;
                sendto(fd, buf, r, 0, (struct sockaddr *)&p, pl);
            } else if (xfer(fd, buf, size, 1, spin) || xfer(fd, buf, size, 0, 0)) return 0;
        }
    }
    pin("REF_CLIENT_CPU");
    int fd = socket(AF_INET, type, 0);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    if (!udp && !(stream && has(argc, argv, 4, "nagle"))) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double t0 = now(), end = t0 + secs, t = t0;
    unsigned long n = 0;
    if (stream) {
        while ((t = now()) < end) { if (xfer(fd, buf, size, 0, 0)) break; n++; }
        shutdown(fd, SHUT_WR);
        waitpid(child, 0, 0); /* the receiver has drained everything */
        printf("%.0f\n", n * (double)size * 8 / (now() - t0));
        return 0;
    }
    for (int w = 0; w < 100; w++) { if (udp) { send(fd, buf, size, 0); recv(fd, buf, size, 0); } else if (xfer(fd, buf, size, 0, 0) || xfer(fd, buf, size, 1, spin)) return 1; }
    t0 = now();
    while ((t = now()) < end) {
        if (udp) { send(fd, buf, size, 0); while (recv(fd, buf, size, spin ? MSG_DONTWAIT : 0) < 0) {} }
        else if (xfer(fd, buf, size, 0, 0) || xfer(fd, buf, size, 1, spin)) return 1;
        n++;
    }
    printf("%.3f\n", (now() - t0) / n / 2 * 1e6);
    if (udp) { buf[0] = 'q'; send(fd, buf, 1, 0); } else close(fd);
    kill(child, 9);
    waitpid(child, 0, 0);
    return 0;
}
