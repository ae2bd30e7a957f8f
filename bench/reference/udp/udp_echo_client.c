/*
 * udp_echo_client - the load client of LioNet's UDP echo benchmark.
 *
 * What it stands for: one fixed client that drives every UDP echo server of a comparison
 * (LioNet's udp_echo_server in both modes, udp_echo_ref) the same way, so that their packets/s
 * can be divided by each other. One thread, one UDP socket connected to the server, sends with
 * sendmmsg and receives with recvmmsg (up to 64 per call) so that it costs no more per
 * datagram than the best server.
 *
 * Usage: udp_echo_client -p PORT [-s SIZE] [-d SECS] [-w WINDOW] [-r RATE] [-h HOST]
 *   -p PORT    server port on HOST (default 9000; HOST default 127.0.0.1, IPv4)
 *   -s SIZE    datagram size in bytes, 16..2048 (default 256)
 *   -d SECS    length of the run (default 4); then up to 0.5 s more to collect late echoes
 *   -w WINDOW  window mode (the default, WINDOW 64): keep WINDOW datagrams in flight; a window
 *              with no echo for 100 ms is counted lost and the window restarts
 *   -r RATE    rate mode: send RATE datagrams/s, evenly (1 ms steps), whatever comes back
 * The client's own receive buffer is 8 MiB (SO_RCVBUFFORCE as root), so losses happen at the
 * server.
 * Each datagram carries its sequence number; an echo of the wrong size or with a sequence
 * number never sent is an error. Output, last line:
 *   RESULT mode=window|rate size=S secs=T window=W rate=R sent=N received=N lost=N pps=P errors=E
 * pps = echoes received per second of the run; lost = sent - received at the end. Exit status
 * 1 on errors or when nothing came back.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define MAX_SIZE 2048

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fd;
static int size = 256;
static uint64_t sent, received, errors;
static char out[BATCH][MAX_SIZE], in[BATCH][MAX_SIZE];
static struct mmsghdr omsg[BATCH], imsg[BATCH];
static struct iovec oiov[BATCH], iiov[BATCH];

/* Sends up to n datagrams (sequence numbers sent, sent+1, ...); returns how many went. */
static int send_some(int n)
{
    if (n > BATCH)
        n = BATCH;
    for (int i = 0; i < n; ++i) {
        uint64_t seq = sent + (uint64_t)i;
        memcpy(out[i], &seq, sizeof seq);
        oiov[i].iov_base = out[i];
        oiov[i].iov_len = (size_t)size;
        memset(&omsg[i].msg_hdr, 0, sizeof omsg[i].msg_hdr);
        omsg[i].msg_hdr.msg_iov = &oiov[i];
        omsg[i].msg_hdr.msg_iovlen = 1;
    }
    int r = sendmmsg(fd, omsg, (unsigned)n, MSG_DONTWAIT);
    if (r < 0) {
        if (errno != EAGAIN && errno != EINTR && errno != ENOBUFS) {
            perror("sendmmsg");
            ++errors;
        }
        return 0;
    }
    sent += (uint64_t)r;
    return r;
}

/* Receives what is queued (waiting up to wait_ms for the first); returns how many came. */
static int recv_some(int wait_ms)
{
    if (wait_ms > 0) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, wait_ms) <= 0)
            return 0;
    }
    for (int i = 0; i < BATCH; ++i) {
        iiov[i].iov_base = in[i];
        iiov[i].iov_len = MAX_SIZE;
        memset(&imsg[i].msg_hdr, 0, sizeof imsg[i].msg_hdr);
        imsg[i].msg_hdr.msg_iov = &iiov[i];
        imsg[i].msg_hdr.msg_iovlen = 1;
    }
    int r = recvmmsg(fd, imsg, BATCH, MSG_DONTWAIT, NULL);
    if (r < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            perror("recvmmsg");
            ++errors;
        }
        return 0;
    }
    for (int i = 0; i < r; ++i) {
        uint64_t seq;
        memcpy(&seq, in[i], sizeof seq);
        if (imsg[i].msg_len != (unsigned)size || seq >= sent)
            ++errors;
    }
    received += (uint64_t)r;
    return r;
}

int main(int argc, char **argv)
{
    int port = 9000, window = 64, opt;
    double secs = 4;
    long rate = 0;
    const char *host = "127.0.0.1";
    while ((opt = getopt(argc, argv, "p:s:d:w:r:h:")) != -1) {
        switch (opt) {
        case 'p': port = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        case 'd': secs = atof(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'r': rate = atol(optarg); break;
        case 'h': host = optarg; break;
        default:
            fprintf(stderr, "usage: %s -p PORT [-s SIZE] [-d SECS] [-w WINDOW] [-r RATE] [-h HOST]\n", argv[0]);
            return 2;
        }
    }
    if (size < 16 || size > MAX_SIZE || secs <= 0 || window < 1 || rate < 0) {
        fprintf(stderr, "udp_echo_client: bad -s, -d, -w or -r\n");
        return 2;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "udp_echo_client: -h takes an IPv4 address\n");
        return 2;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("socket/connect");
        return 1;
    }
    /* A large receive buffer (SO_RCVBUFFORCE when root, else up to rmem_max), so that echoes are
       lost at the server, which is what is measured, not here between two recvmmsg. */
    int rcvbuf = 8 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    for (int i = 0; i < BATCH; ++i)
        memset(out[i], 'a' + i % 26, MAX_SIZE);

    double start = now_s(), end = start + secs, last_echo = start;
    uint64_t written_off = 0; /* window mode: datagrams given up on after 100 ms of silence */
    while (now_s() < end) {
        if (rate > 0) {
            /* Rate mode: what is due by now (at most one batch per step), then what came back;
               sleep in poll up to 1 ms only when nothing is due and nothing is queued. */
            double due = (now_s() - start) * (double)rate;
            if ((double)sent + 1 <= due)
                send_some((int)(due - (double)sent));
            if (recv_some(0) == 0 && (double)sent + 1 > (now_s() - start) * (double)rate)
                recv_some(1);
            continue;
        }
        /* Window mode: top the window up, then take the echoes (waiting up to 10 ms). */
        int64_t inflight = (int64_t)(sent - received - written_off);
        if (inflight < window)
            send_some((int)(window - (inflight < 0 ? 0 : inflight)));
        if (recv_some(0) > 0 || recv_some(10) > 0) {
            last_echo = now_s();
        } else if (now_s() - last_echo > 0.1) {
            written_off = sent - received; /* the window is lost: restart it */
            last_echo = now_s();
        }
    }
    double elapsed = now_s() - start;
    uint64_t received_in_run = received;
    /* Late echoes still count as received (not lost), but not in pps. */
    double drain_end = now_s() + 0.5;
    while (received < sent && now_s() < drain_end)
        recv_some(10);
    uint64_t lost = sent > received ? sent - received : 0;
    double pps = elapsed > 0 ? (double)received_in_run / elapsed : 0;
    printf("RESULT mode=%s size=%d secs=%.3f window=%d rate=%ld sent=%llu received=%llu lost=%llu pps=%.0f errors=%llu\n",
           rate > 0 ? "rate" : "window", size, elapsed, rate > 0 ? 0 : window, rate, (unsigned long long)sent,
           (unsigned long long)received, (unsigned long long)lost, pps, (unsigned long long)errors);
    return errors || received == 0 ? 1 : 0;
}
