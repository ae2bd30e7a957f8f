/*
 * tls_echo_server - the libevent + OpenSSL reference of LioNet's TLS comparisons.
 *
 * What it stands for: a conventional event-loop TLS server in C: one thread, libevent's
 * bufferevent_openssl doing the record layer, OpenSSL's defaults (TLS 1.3 minimum, stateless
 * session tickets), TCP_NODELAY. Whatever it reads it queues back. LioNet's bench_ssl_server
 * (one worker) is reported as a ratio to it; -P runs the very same code without TLS, which
 * separates the cost of TLS from the cost of the event loop.
 *
 * Usage: tls_echo_server -p PORT -c cert.pem -k key.pem [-P]
 *   -p PORT  port on 127.0.0.1 (default 9443)
 *   -c FILE  certificate chain, PEM (default cert.pem)
 *   -k FILE  private key, PEM (default key.pem)
 *   -P       plain TCP through the same bufferevent code (cert and key are not read)
 * Runs until killed; prints one line on stderr once it listens.
 */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct server {
    struct event_base *loop;
    SSL_CTX *tls; /* NULL with -P */
};

static void on_readable(struct bufferevent *bev, void *arg)
{
    (void)arg;
    /* Moves the whole input queue to the output queue without copying the bytes. */
    evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void on_status(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
        bufferevent_free(bev); /* closes the socket and frees the SSL object */
}

static void on_accept(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *peer, int peerlen,
                      void *arg)
{
    (void)lst; (void)peer; (void)peerlen;
    struct server *srv = arg;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    struct bufferevent *bev = NULL;
    if (srv->tls == NULL) {
        bev = bufferevent_socket_new(srv->loop, fd, BEV_OPT_CLOSE_ON_FREE);
    } else {
        SSL *ssl = SSL_new(srv->tls);
        if (ssl)
            bev = bufferevent_openssl_socket_new(srv->loop, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                 BEV_OPT_CLOSE_ON_FREE);
        if (bev) /* clients that close without close_notify are normal here */
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        else if (ssl)
            SSL_free(ssl);
    }
    if (bev == NULL) {
        evutil_closesocket(fd);
        return;
    }
    bufferevent_setcb(bev, on_readable, NULL, on_status, srv);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static SSL_CTX *make_tls(const char *cert, const char *key)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        ERR_print_errors_fp(stderr);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int main(int argc, char **argv)
{
    int port = 9443, plain = 0, ch;
    const char *cert = "cert.pem", *key = "key.pem";
    while ((ch = getopt(argc, argv, "p:c:k:P")) != -1) {
        switch (ch) {
        case 'p': port = atoi(optarg); break;
        case 'c': cert = optarg; break;
        case 'k': key = optarg; break;
        case 'P': plain = 1; break;
        default:
            fprintf(stderr, "usage: %s -p PORT -c cert.pem -k key.pem [-P]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);

    struct server srv = {NULL, NULL};
    if (!plain && (srv.tls = make_tls(cert, key)) == NULL) {
        fprintf(stderr, "tls_echo_server: cannot load %s / %s\n", cert, key);
        return 1;
    }
    srv.loop = event_base_new();
    if (!srv.loop) {
        fprintf(stderr, "tls_echo_server: event_base_new failed\n");
        return 1;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct evconnlistener *lst = evconnlistener_new_bind(srv.loop, on_accept, &srv,
                                                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 4096,
                                                         (struct sockaddr *)&sa, sizeof sa);
    if (!lst) {
        perror("tls_echo_server: listen");
        return 1;
    }
    fprintf(stderr, "tls_echo_server: 127.0.0.1:%d, %s\n", port, plain ? "plain TCP" : "TLS 1.3");
    event_base_dispatch(srv.loop);
    evconnlistener_free(lst);
    event_base_free(srv.loop);
    SSL_CTX_free(srv.tls);
    return 0;
}
