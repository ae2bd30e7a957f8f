/*
 * echo_client - the load generator of LioNet's echo comparisons.
 *
 * What it stands for: one fixed client that drives every echo server in a comparison (LioNet,
 * epoll_echo_server, go_echo_server, asio_echo_server) the same way, so that their QPS can be
 * divided by each other. Ping-pong: each connection has exactly one SIZE-byte message in flight;
 * the next one leaves when the whole echo is back and matched byte for byte.
 *
 * Usage: echo_client -p PORT -c CONNS -s SIZE -d SECS [-t THREADS] [-h HOST] [-n]
 *   -p PORT     server port (default 9000)
 *   -c CONNS    connections, all opened before the clock starts (default 100)
 *   -s SIZE     message size in bytes (default 256)
 *   -d SECS     length of the run; the load stops at SECS (default 5)
 *   -t THREADS  client threads, each with its own epoll set and share of the connections (1)
 *   -h HOST     server IPv4 address or name (default 127.0.0.1; -H is the same)
 *   -n          leave Nagle on (default: TCP_NODELAY)
 * Output: one line per whole second, "INTERVAL t=SECONDS total=REQUESTS_SO_FAR", then
 *   RESULT conns=N size=S secs=T requests=R qps=Q MBps_each_way=M errors=E
 * errors counts connections lost (reset, closed, or an echo that did not match); exit status
 * 1 when there were any.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    int broken;
    int out_armed;  /* EPOLLOUT is in the interest set */
    size_t written; /* bytes of the current message sent */
    size_t echoed;  /* bytes of its echo received and checked */
};

struct worker {
    pthread_t tid;
    struct conn *conns;
    int nconns;
    atomic_ullong completed; /* read by the main thread for the per-second lines */
    unsigned long long lost;
};

static struct {
    const char *host;
    int port, conns, threads, nodelay;
    size_t size;
    double secs;
} opt = {"127.0.0.1", 9000, 100, 1, 1, 256, 5.0};

static unsigned char *pattern; /* the message every connection sends */
static struct timespec t_begin;
static double deadline;        /* seconds on CLOCK_MONOTONIC */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double since_begin(void)
{
    return mono() - ((double)t_begin.tv_sec + (double)t_begin.tv_nsec * 1e-9);
}

static void interest(int ep, struct conn *c, int with_out)
{
    if (c->out_armed == with_out)
        return;
    c->out_armed = with_out;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | (with_out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void lose(struct worker *w, struct conn *c)
{
    if (c->broken)
        return;
    c->broken = 1;
    w->lost++;
    close(c->fd);
}

/* Sends the rest of the current message; arms EPOLLOUT when the socket is full. */
static int push(int ep, struct conn *c)
{
    while (c->written < opt.size) {
        ssize_t n = send(c->fd, pattern + c->written, opt.size - c->written, MSG_NOSIGNAL);
        if (n > 0) {
            c->written += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            interest(ep, c, 1);
            return 0;
        } else {
            return -1;
        }
    }
    interest(ep, c, 0);
    return 0;
}

/* Takes in what the server echoed, reading until the socket is drained (the usual non-blocking
 * loop); each time a message is complete, starts the next one. Returns -1 if the connection is
 * lost. */
static int pull(int ep, struct conn *c, struct worker *w, unsigned char *scratch, size_t cap)
{
    for (;;) {
        size_t left = opt.size - c->echoed;
        ssize_t n = recv(c->fd, scratch, left < cap ? left : cap, 0);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        if (memcmp(scratch, pattern + c->echoed, (size_t)n) != 0) {
            fprintf(stderr, "echo_client: the echo differs from what was sent\n");
            return -1;
        }
        c->echoed += (size_t)n;
        if (c->echoed == opt.size && c->written == opt.size) {
            atomic_fetch_add_explicit(&w->completed, 1, memory_order_relaxed);
            c->echoed = c->written = 0;
            if (push(ep, c) < 0)
                return -1;
        }
    }
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    size_t cap = opt.size < 65536 ? opt.size : 65536;
    unsigned char *scratch = malloc(cap ? cap : 1);
    if (ep < 0 || !scratch) {
        perror("echo_client: worker setup");
        exit(1);
    }
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    for (int i = 0; i < w->nconns; i++)
        if (push(ep, &w->conns[i]) < 0)
            lose(w, &w->conns[i]);

    struct epoll_event ready[256];
    for (;;) {
        double left = deadline - mono();
        if (left <= 0)
            break;
        int wait_ms = left > 0.05 ? 50 : (int)(left * 1000) + 1;
        int n = epoll_wait(ep, ready, 256, wait_ms);
        for (int i = 0; i < n; i++) {
            struct conn *c = ready[i].data.ptr;
            if (c->broken)
                continue;
            if ((ready[i].events & EPOLLOUT) && push(ep, c) < 0) {
                lose(w, c);
                continue;
            }
            if ((ready[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && pull(ep, c, w, scratch, cap) < 0)
                lose(w, c);
        }
    }
    for (int i = 0; i < w->nconns; i++)
        if (!w->conns[i].broken)
            close(w->conns[i].fd);
    free(scratch);
    close(ep);
    return NULL;
}

static int dial(const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, sa, len) < 0) {
        perror("echo_client: connect");
        exit(1);
    }
    if (opt.nodelay) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s -p PORT -c CONNS -s SIZE -d SECS [-t THREADS] [-h HOST] [-n]\n", prog);
    exit(2);
}

int main(int argc, char **argv)
{
    int ch;
    while ((ch = getopt(argc, argv, "h:H:p:c:s:d:t:n")) != -1) {
        switch (ch) {
        case 'h': case 'H': opt.host = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 'c': opt.conns = atoi(optarg); break;
        case 's': opt.size = (size_t)strtoull(optarg, NULL, 10); break;
        case 'd': opt.secs = atof(optarg); break;
        case 't': opt.threads = atoi(optarg); break;
        case 'n': opt.nodelay = 0; break;
        default: usage(argv[0]);
        }
    }
    if (opt.conns < 1 || opt.size < 1 || opt.secs <= 0)
        usage(argv[0]);
    if (opt.threads < 1)
        opt.threads = 1;
    if (opt.threads > opt.conns)
        opt.threads = opt.conns;
    signal(SIGPIPE, SIG_IGN);

    pattern = malloc(opt.size);
    for (size_t i = 0; i < opt.size; i++) /* printable, and no period shorter than 37 bytes */
        pattern[i] = (unsigned char)('!' + (i * 11 + i / 37) % 90);

    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", opt.port);
    struct addrinfo hints, *ai;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(opt.host, portstr, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "echo_client: %s: %s\n", opt.host, gai_strerror(gai));
        return 1;
    }

    /* Every connection is open before the clock starts; then each thread takes its share. */
    struct conn *all = calloc((size_t)opt.conns, sizeof *all);
    for (int i = 0; i < opt.conns; i++)
        all[i].fd = dial(ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);

    struct worker *ws = calloc((size_t)opt.threads, sizeof *ws);
    clock_gettime(CLOCK_MONOTONIC, &t_begin);
    deadline = (double)t_begin.tv_sec + (double)t_begin.tv_nsec * 1e-9 + opt.secs;
    for (int t = 0, first = 0; t < opt.threads; t++) {
        ws[t].nconns = opt.conns / opt.threads + (t < opt.conns % opt.threads ? 1 : 0);
        ws[t].conns = all + first;
        first += ws[t].nconns;
        atomic_init(&ws[t].completed, 0);
        pthread_create(&ws[t].tid, NULL, run_worker, &ws[t]);
    }

    /* One progress line per whole second: a harness may drop seconds disturbed by other load. */
    for (int sec = 1; sec <= (int)opt.secs; sec++) {
        struct timespec at = t_begin;
        at.tv_sec += sec;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
        }
        unsigned long long sum = 0;
        for (int t = 0; t < opt.threads; t++)
            sum += atomic_load_explicit(&ws[t].completed, memory_order_relaxed);
        printf("INTERVAL t=%.3f total=%llu\n", since_begin(), sum);
        fflush(stdout);
    }

    unsigned long long requests = 0, errors = 0;
    for (int t = 0; t < opt.threads; t++) {
        pthread_join(ws[t].tid, NULL);
        requests += atomic_load(&ws[t].completed);
        errors += ws[t].lost;
    }
    double elapsed = since_begin();
    double qps = (double)requests / elapsed;
    printf("RESULT conns=%d size=%zu secs=%.2f requests=%llu qps=%.0f MBps_each_way=%.1f errors=%llu\n",
           opt.conns, opt.size, elapsed, requests, qps, qps * (double)opt.size / 1e6, errors);
    return errors ? 1 : 0;
}
