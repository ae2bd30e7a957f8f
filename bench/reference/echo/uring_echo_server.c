/*
 * uring_echo_server - the completion-based io_uring reference of LioNet's echo benchmarks.
 *
 * What it stands for: how fast echo can be on this machine through io_uring with no runtime in
 * the way, so that the io_uring backend's figures (issue 24: ">= 1.05x the epoll backend") can be
 * read against what io_uring itself gives here. One thread, one ring, everything as SQEs: a
 * multishot accept, then per connection a recv into a fixed 64 KiB buffer and a send of what
 * it got (the rest again after a short send), batched into one io_uring_enter per loop
 * (io_uring_submit_and_wait). TCP_NODELAY, as epoll_echo_server.
 *
 * Usage: uring_echo_server -p PORT [-w] [-n]
 *   -p PORT  TCP port, bound on 127.0.0.1 only (default 9000)
 *   -w       echo with a write(2) syscall instead of a send SQE (recv stays an SQE)
 *   -n       a plain ring: no IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (by default they are
 *            asked for, and dropped with a note if the kernel refuses them: Linux < 6.1)
 * Runs until killed; prints one line on stderr once it listens.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CLIENT_BUF (64 * 1024)

enum { OP_ACCEPT = 1, OP_RECV = 2, OP_SEND = 3 };

struct client {
    int fd;
    size_t head, tail; /* bytes buf[head, tail) are received but not yet sent back */
    unsigned char buf[CLIENT_BUF];
};

static struct io_uring ring;
static int lfd = -1;
static int use_write = 0;

/* user_data: the operation in the low 2 bits, the client pointer (or 0) above them. */
static uint64_t tag(struct client *cl, int op) { return (uint64_t)(uintptr_t)cl | (uint64_t)op; }

static struct io_uring_sqe *sqe(void)
{
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    if (!s) { /* the submission queue is full: hand it to the kernel and take a fresh one */
        io_uring_submit(&ring);
        s = io_uring_get_sqe(&ring);
    }
    return s;
}

static void arm_accept(void)
{
    struct io_uring_sqe *s = sqe();
    io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, tag(NULL, OP_ACCEPT));
}

static void arm_recv(struct client *cl)
{
    struct io_uring_sqe *s = sqe();
    io_uring_prep_recv(s, cl->fd, cl->buf, sizeof cl->buf, 0);
    io_uring_sqe_set_data64(s, tag(cl, OP_RECV));
}

static void arm_send(struct client *cl)
{
    struct io_uring_sqe *s = sqe();
    io_uring_prep_send(s, cl->fd, cl->buf + cl->head, cl->tail - cl->head, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, tag(cl, OP_SEND));
}

static void drop(struct client *cl)
{
    close(cl->fd); /* no operation of cl is in flight: each client has one at a time */
    free(cl);
}

static void on_accept(int res)
{
    const int one = 1;
    if (res < 0)
        return; /* out of descriptors and the like: the next connection may fare better */
    setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct client *cl = malloc(sizeof *cl);
    if (!cl) {
        close(res);
        return;
    }
    cl->fd = res;
    cl->head = cl->tail = 0;
    arm_recv(cl);
}

/* Echoes what a recv brought: a send SQE (or write(2) with -w); -1 when the client goes. */
static int on_recv(struct client *cl, int res)
{
    if (res <= 0)
        return res == -EINTR || res == -EAGAIN ? (arm_recv(cl), 0) : -1;
    cl->head = 0;
    cl->tail = (size_t)res;
    if (!use_write) {
        arm_send(cl);
        return 0;
    }
    while (cl->head < cl->tail) {
        ssize_t n = write(cl->fd, cl->buf + cl->head, cl->tail - cl->head);
        if (n > 0) {
            cl->head += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            arm_send(cl); /* the socket is full: let the ring finish it */
            return 0;
        } else {
            return -1;
        }
    }
    arm_recv(cl);
    return 0;
}

static int on_send(struct client *cl, int res)
{
    if (res < 0)
        return res == -EINTR || res == -EAGAIN ? (arm_send(cl), 0) : -1;
    cl->head += (size_t)res;
    if (cl->head < cl->tail)
        arm_send(cl); /* a short send: the rest */
    else
        arm_recv(cl);
    return 0;
}

int main(int argc, char **argv)
{
    int port = 9000, plain = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w"))
            use_write = 1;
        else if (!strcmp(argv[i], "-n"))
            plain = 1;
        else {
            fprintf(stderr, "usage: %s -p PORT [-w] [-n]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    p.cq_entries = 65536; /* one recv or send in flight per client: room for 64k clients */
    if (!plain)
        p.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int r = io_uring_queue_init_params(4096, &ring, &p);
    if (r == -EINVAL && !plain) {
        fprintf(stderr, "uring_echo_server: SINGLE_ISSUER|DEFER_TASKRUN refused; a plain ring\n");
        p.flags &= ~(unsigned)(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
        plain = 1;
        r = io_uring_queue_init_params(4096, &ring, &p);
    }
    if (r < 0) {
        fprintf(stderr, "uring_echo_server: io_uring_queue_init_params: %s\n", strerror(-r));
        return 1;
    }
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 4096) < 0) {
        perror("uring_echo_server: bind/listen");
        return 1;
    }
    arm_accept();
    fprintf(stderr, "uring_echo_server: listening on 127.0.0.1:%d (%s, %s)\n", port,
            plain ? "plain ring" : "single issuer, deferred task run", use_write ? "write(2)" : "send SQEs");
    for (;;) {
        r = io_uring_submit_and_wait(&ring, 1);
        if (r < 0 && r != -EINTR && r != -EBUSY) {
            fprintf(stderr, "uring_echo_server: io_uring_submit_and_wait: %s\n", strerror(-r));
            return 1;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            const int op = (int)(cqe->user_data & 3);
            struct client *cl = (struct client *)(uintptr_t)(cqe->user_data & ~(uint64_t)3);
            if (op == OP_ACCEPT) {
                on_accept(cqe->res);
                if (!(cqe->flags & IORING_CQE_F_MORE))
                    arm_accept(); /* the multishot accept ended (an error): start another */
            } else if ((op == OP_RECV ? on_recv(cl, cqe->res) : on_send(cl, cqe->res)) < 0) {
                drop(cl);
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
}
