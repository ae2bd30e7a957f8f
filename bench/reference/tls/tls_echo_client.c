/*
 * tls_echo_client - the load generator of LioNet's TLS comparisons.
 *
 * What it stands for: one OpenSSL client, single-threaded and non-blocking on epoll, that
 * drives LioNet's bench_ssl_server and the tls_echo_server reference identically, so their
 * figures can be divided by each other. Two modes:
 *   -m echo  (default) CONNS persistent TLS 1.3 connections, all handshaken before the clock
 *            starts, each with one SIZE-byte message in flight (ping-pong, echo checked).
 *   -m hs    handshake rate: each of CONNS slots connects, completes a TLS 1.3 handshake,
 *            echoes one SIZE-byte message, sends close_notify, closes, and starts over.
 *            Full handshakes, or with -R session resumption from the latest ticket received.
 * The certificate is not verified (self-signed test certificates).
 *
 * Usage: tls_echo_client -p PORT -c CONNS -s SIZE -d SECS [-m echo|hs] [-R] [-h HOST]
 *   defaults: port 9443, 10 connections, 47 bytes, 5 s, echo; -h (or -H) IPv4 address, 127.0.0.1
 * Output: one line per whole second, "INTERVAL t=SECONDS total=REQUESTS hs=HANDSHAKES", then
 *   RESULT mode=echo|hs-full|hs-resume conns=N size=S secs=T requests=R qps=Q MBps_each_way=M
 *          handshakes=H hs_per_s=Y resumed=K errors=E
 * (one line). handshakes counts those completed while the clock ran (0 in echo mode);
 * resumed, those of them that resumed a session; errors, connections that failed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum step { HANDSHAKE, PARKED, SENDING, RECEIVING };

struct link {
    int fd;
    SSL *ssl;
    enum step step;
    size_t done; /* bytes of the current message sent (SENDING) or received (RECEIVING) */
};

static struct {
    const char *host;
    int port, conns, hs_mode, resume;
    size_t size;
    double secs;
} opt = {"127.0.0.1", 9443, 10, 0, 0, 47, 5.0};

static SSL_CTX *ctx;
static SSL_SESSION *ticket; /* the newest session the server gave us (-R) */
static int ep;
static struct sockaddr_in server;
static unsigned char *message, *inbuf;
static int counting; /* handshakes count only while the clock runs */
static unsigned long long n_requests, n_handshakes, n_resumed, n_errors;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* OpenSSL hands us each new session (TLS 1.3: each ticket); keep only the newest. */
static int keep_ticket(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    if (ticket)
        SSL_SESSION_free(ticket);
    ticket = sess;
    return 1; /* the reference is ours now */
}

static void link_open(struct link *l)
{
    const int one = 1;
    l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0 || connect(l->fd, (struct sockaddr *)&server, sizeof server) < 0) {
        perror("tls_echo_client: connect");
        exit(1);
    }
    setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(l->fd, F_SETFL, fcntl(l->fd, F_GETFL) | O_NONBLOCK);
    l->ssl = SSL_new(ctx);
    if (!l->ssl) {
        ERR_print_errors_fp(stderr);
        exit(1);
    }
    SSL_set_fd(l->ssl, l->fd);
    SSL_set_tlsext_host_name(l->ssl, "localhost");
    if (opt.resume && ticket)
        SSL_set_session(l->ssl, ticket);
    SSL_set_connect_state(l->ssl);
    l->step = HANDSHAKE;
    l->done = 0;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    ev.data.ptr = l;
    epoll_ctl(ep, EPOLL_CTL_ADD, l->fd, &ev);
}

static void link_close(struct link *l)
{
    SSL_shutdown(l->ssl); /* sends close_notify; the peer's is not awaited */
    SSL_free(l->ssl);
    close(l->fd); /* also leaves the epoll set */
    l->ssl = NULL;
    l->fd = -1;
}

/* Runs the link's state machine until OpenSSL needs the socket.
 * Returns 0 (waiting for the socket), 1 (hs mode: this connection is done), -1 (failed). */
static int advance(struct link *l)
{
    for (;;) {
        int rc = 0;
        switch (l->step) {
        case PARKED:
            return 0;
        case HANDSHAKE:
            rc = SSL_do_handshake(l->ssl);
            if (rc == 1) {
                if (counting) {
                    n_handshakes++;
                    n_resumed += SSL_session_reused(l->ssl) ? 1 : 0;
                }
                l->step = counting ? SENDING : PARKED;
                l->done = 0;
                continue;
            }
            break;
        case SENDING:
            rc = SSL_write(l->ssl, message + l->done, (int)(opt.size - l->done));
            if (rc > 0) {
                l->done += (size_t)rc;
                if (l->done == opt.size) {
                    l->step = RECEIVING;
                    l->done = 0;
                }
                continue;
            }
            break;
        case RECEIVING: {
            size_t want = opt.size - l->done;
            rc = SSL_read(l->ssl, inbuf, (int)(want < 65536 ? want : 65536));
            if (rc > 0) {
                if (memcmp(inbuf, message + l->done, (size_t)rc) != 0) {
                    fprintf(stderr, "tls_echo_client: the echo differs from what was sent\n");
                    return -1;
                }
                l->done += (size_t)rc;
                if (l->done == opt.size) {
                    n_requests++;
                    if (opt.hs_mode)
                        return 1;
                    l->step = SENDING;
                    l->done = 0;
                }
                continue;
            }
            break;
        }
        }
        int err = SSL_get_error(l->ssl, rc);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
            return 0;
        ERR_print_errors_fp(stderr);
        return -1;
    }
}

/* Advances a link; in hs mode replaces finished or failed connections by new ones. */
static void service(struct link *l)
{
    for (;;) {
        int r = advance(l);
        if (r == 0)
            return;
        if (r < 0)
            n_errors++;
        link_close(l);
        if (!opt.hs_mode)
            return; /* a failed persistent connection stays closed */
        link_open(l);
    }
}

int main(int argc, char **argv)
{
    int ch;
    while ((ch = getopt(argc, argv, "h:H:p:c:s:d:m:R")) != -1) {
        switch (ch) {
        case 'h': case 'H': opt.host = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 'c': opt.conns = atoi(optarg); break;
        case 's': opt.size = (size_t)strtoull(optarg, NULL, 10); break;
        case 'd': opt.secs = atof(optarg); break;
        case 'm':
            if (strcmp(optarg, "hs") == 0) opt.hs_mode = 1;
            else if (strcmp(optarg, "echo") == 0) opt.hs_mode = 0;
            else goto usage;
            break;
        case 'R': opt.resume = 1; break;
        default: goto usage;
        }
    }
    if (opt.conns < 1 || opt.size < 1 || opt.secs <= 0)
        goto usage;
    signal(SIGPIPE, SIG_IGN);

    message = malloc(opt.size);
    inbuf = malloc(65536);
    for (size_t i = 0; i < opt.size; i++)
        message[i] = (unsigned char)('0' + (i * 5 + i / 43) % 75);
    memset(&server, 0, sizeof server);
    server.sin_family = AF_INET;
    server.sin_port = htons((uint16_t)opt.port);
    if (inet_pton(AF_INET, strcmp(opt.host, "localhost") ? opt.host : "127.0.0.1", &server.sin_addr) != 1) {
        fprintf(stderr, "tls_echo_client: not an IPv4 address: %s\n", opt.host);
        return 2;
    }

    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    if (opt.resume) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, keep_ticket);
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct link *links = calloc((size_t)opt.conns, sizeof *links);
    struct epoll_event ready[1024];

    if (!opt.hs_mode) { /* echo: every handshake done before the clock starts */
        for (int i = 0; i < opt.conns; i++) {
            link_open(&links[i]);
            if (advance(&links[i]) < 0)
                return 1;
        }
        double give_up = mono() + 30;
        for (;;) {
            int pending = 0;
            for (int i = 0; i < opt.conns; i++)
                pending += links[i].step == HANDSHAKE;
            if (!pending)
                break;
            if (mono() > give_up) {
                fprintf(stderr, "tls_echo_client: handshakes did not finish in 30 s\n");
                return 1;
            }
            int n = epoll_wait(ep, ready, 1024, 100);
            for (int i = 0; i < n; i++)
                if (advance(ready[i].data.ptr) < 0)
                    return 1;
        }
    }

    counting = 1;
    double start = mono(), stop = start + opt.secs;
    if (opt.hs_mode) {
        for (int i = 0; i < opt.conns; i++)
            link_open(&links[i]);
    }
    for (int i = 0; i < opt.conns; i++) {
        if (links[i].step == PARKED)
            links[i].step = SENDING;
        service(&links[i]);
    }

    int next_sec = 1;
    for (;;) {
        int n = epoll_wait(ep, ready, 1024, 10);
        double t = mono();
        if (next_sec <= (int)opt.secs && t >= start + next_sec) {
            printf("INTERVAL t=%.3f total=%llu hs=%llu\n", t - start, n_requests, n_handshakes);
            fflush(stdout);
            next_sec++;
        }
        if (t >= stop)
            break;
        for (int i = 0; i < n; i++) {
            struct link *l = ready[i].data.ptr;
            if (l->ssl)
                service(l);
        }
    }
    double elapsed = mono() - start;
    printf("RESULT mode=%s conns=%d size=%zu secs=%.2f requests=%llu qps=%.0f MBps_each_way=%.1f "
           "handshakes=%llu hs_per_s=%.0f resumed=%llu errors=%llu\n",
           opt.hs_mode ? (opt.resume ? "hs-resume" : "hs-full") : "echo", opt.conns, opt.size, elapsed,
           n_requests, (double)n_requests / elapsed, (double)n_requests * (double)opt.size / elapsed / 1e6,
           n_handshakes, (double)n_handshakes / elapsed, n_resumed, n_errors);
    return 0;

usage:
    fprintf(stderr, "usage: %s -p PORT -c CONNS -s SIZE -d SECS [-m echo|hs] [-R] [-h HOST]\n", argv[0]);
    return 2;
}
