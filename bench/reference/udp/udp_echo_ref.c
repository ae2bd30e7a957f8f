/*
 * udp_echo_ref - the reference server of LioNet's UDP echo benchmark.
 *
 * What it stands for: the least work a server can do per echoed datagram on Linux: one thread,
 * one blocking UDP socket, recvmmsg(MSG_WAITFORONE) of up to BATCH datagrams (sleeps for the
 * first, takes what else is queued), then one sendmmsg of them back to their senders. No
 * epoll, no copies. LioNet's udp_echo_server (one worker) is reported as a ratio to it.
 *
 * Usage: udp_echo_ref -p PORT [-b BATCH]
 *   -p PORT   UDP port, bound on 127.0.0.1 only (default 9000)
 *   -b BATCH  datagrams per system call, 1..1024 (default 64, LioNet's UdpSocket::kMaxBatch)
 * Slots hold 2048 bytes (longer datagrams are cut). Runs until SIGINT/SIGTERM, then prints
 *   RESULT received=N sent=N batches=N errors=E
 * (errors: failed recvmmsg/sendmmsg calls other than EINTR).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SLOT 2048
#define MAX_BATCH 1024

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    int port = 9000, batch = 64, opt;
    while ((opt = getopt(argc, argv, "p:b:")) != -1) {
        if (opt == 'p')
            port = atoi(optarg);
        else if (opt == 'b')
            batch = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s -p PORT [-b BATCH]\n", argv[0]);
            return 2;
        }
    }
    if (batch < 1 || batch > MAX_BATCH || port < 0 || port > 65535) {
        fprintf(stderr, "udp_echo_ref: bad -p or -b\n");
        return 2;
    }
    /* No SA_RESTART: a stop signal interrupts the blocking recvmmsg (EINTR). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("bind");
        return 1;
    }
    fprintf(stderr, "udp_echo_ref: 127.0.0.1:%d, batch %d\n", port, batch);

    static char bufs[MAX_BATCH][SLOT];
    static struct mmsghdr msgs[MAX_BATCH];
    static struct iovec iovs[MAX_BATCH];
    static struct sockaddr_storage peers[MAX_BATCH];
    unsigned long long received = 0, sent = 0, batches = 0, errors = 0;
    while (!stop) {
        for (int i = 0; i < batch; ++i) {
            iovs[i].iov_base = bufs[i];
            iovs[i].iov_len = SLOT;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_name = &peers[i];
            msgs[i].msg_hdr.msg_namelen = sizeof peers[i];
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(fd, msgs, (unsigned)batch, MSG_WAITFORONE, NULL);
        if (n <= 0) {
            if (n < 0 && errno != EINTR)
                ++errors;
            continue;
        }
        received += (unsigned long long)n;
        ++batches;
        /* Send each back with its received length to its sender (msg_name/namelen as filled). */
        for (int i = 0; i < n; ++i)
            iovs[i].iov_len = msgs[i].msg_len;
        int done = 0;
        while (done < n) {
            int m = sendmmsg(fd, msgs + done, (unsigned)(n - done), 0);
            if (m < 0) {
                if (errno == EINTR && !stop)
                    continue;
                ++errors;
                break;
            }
            done += m;
        }
        sent += (unsigned long long)done;
    }
    close(fd);
    printf("RESULT received=%llu sent=%llu batches=%llu errors=%llu\n", received, sent, batches, errors);
    return 0;
}
