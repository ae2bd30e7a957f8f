/*
 * epoll_echo_server - the "physical limit" reference of LioNet's echo benchmarks.
 *
 * What it stands for: the least work a server can do per echoed message on Linux: one thread,
 * one epoll set, one read() and one write() per message, a fixed 64 KiB buffer per client and
 * TCP_NODELAY. LioNet's bench_server (one worker) is reported as a ratio to this program.
 *
 * Usage: epoll_echo_server -p PORT [-e] [-n]
 *   -p PORT  TCP port, bound on 127.0.0.1 only (default 9000)
 *   -e       edge-triggered epoll (default: level-triggered, one read per wake-up)
 *   -n       leave Nagle on (do not set TCP_NODELAY on accepted sockets)
 * Runs until killed; prints one line on stderr once it listens.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CLIENT_BUF (64 * 1024)
#define EVENT_BATCH 512

struct client {
    int fd;
    size_t head, tail; /* bytes buf[head, tail) are read but not yet written back */
    unsigned char buf[CLIENT_BUF];
};

static int epfd = -1;
static int edge_mode = 0;
static int set_nodelay = 1;

static void want(struct client *cl, int op, uint32_t events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events | (edge_mode ? EPOLLET : 0);
    ev.data.ptr = cl;
    if (epoll_ctl(epfd, op, cl->fd, &ev) < 0)
        perror("epoll_ctl");
}

static void drop(struct client *cl)
{
    close(cl->fd); /* closing the last reference also leaves the epoll set */
    free(cl);
}

/* Writes back the pending bytes. 1: all gone, 0: the socket is full, -1: the peer is gone. */
static int write_back(struct client *cl)
{
    while (cl->head < cl->tail) {
        ssize_t n = write(cl->fd, cl->buf + cl->head, cl->tail - cl->head);
        if (n > 0) {
            cl->head += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            return -1;
        }
    }
    cl->head = cl->tail = 0;
    return 1;
}

/* Reads and echoes: once in level-triggered mode, until EAGAIN in edge-triggered mode.
 * Returns -1 when the client should be dropped. */
static int read_and_echo(struct client *cl)
{
    for (;;) {
        ssize_t n = read(cl->fd, cl->buf, sizeof cl->buf);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        cl->head = 0;
        cl->tail = (size_t)n;
        int r = write_back(cl);
        if (r < 0)
            return -1;
        if (r == 0) { /* stop reading until the peer takes what we owe it */
            want(cl, EPOLL_CTL_MOD, EPOLLOUT);
            return 0;
        }
        if (!edge_mode)
            return 0;
    }
}

static int on_event(struct client *cl, uint32_t events)
{
    if (cl->tail > cl->head) { /* blocked on output: only EPOLLOUT is of interest */
        int r = write_back(cl);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        want(cl, EPOLL_CTL_MOD, EPOLLIN);
        return edge_mode ? read_and_echo(cl) : 0;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        return read_and_echo(cl);
    return 0;
}

static void accept_all(int lfd)
{
    const int one = 1;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            return; /* EAGAIN, or out of descriptors: try again on the next wake-up */
        }
        if (set_nodelay)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct client *cl = malloc(sizeof *cl);
        if (!cl) {
            close(fd);
            continue;
        }
        cl->fd = fd;
        cl->head = cl->tail = 0;
        want(cl, EPOLL_CTL_ADD, EPOLLIN);
    }
}

static int listen_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("socket");
        return -1;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 4096) < 0) {
        perror("bind/listen");
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    int port = 9000;
    int c;
    while ((c = getopt(argc, argv, "p:en")) != -1) {
        switch (c) {
        case 'p': port = atoi(optarg); break;
        case 'e': edge_mode = 1; break;
        case 'n': set_nodelay = 0; break;
        default:
            fprintf(stderr, "usage: %s -p PORT [-e] [-n]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);

    int lfd = listen_loopback(port);
    if (lfd < 0)
        return 1;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        perror("epoll_create1");
        return 1;
    }
    struct epoll_event lev;
    memset(&lev, 0, sizeof lev);
    lev.events = EPOLLIN;
    lev.data.ptr = NULL; /* NULL marks the listening socket */
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &lev);
    fprintf(stderr, "epoll_echo_server: 127.0.0.1:%d, %s-triggered\n", port, edge_mode ? "edge" : "level");

    struct epoll_event ready[EVENT_BATCH];
    for (;;) {
        int n = epoll_wait(epfd, ready, EVENT_BATCH, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct client *cl = ready[i].data.ptr;
            if (cl == NULL)
                accept_all(lfd);
            else if (on_event(cl, ready[i].events) < 0)
                drop(cl);
        }
    }
}
