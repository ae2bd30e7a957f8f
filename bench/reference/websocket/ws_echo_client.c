// bench/reference/websocket/ws_echo_client.c: a lean WebSocket echo load client in plain C (one
// thread, epoll, no library), for scripts/bench-websocket.sh's echo rows. The fiber client
// (bench/websocket_load) spends about as much CPU per message as the servers it measures, so
// on a 2-CPU machine it set the pace for both (its CPU share was ~0.99); this one does the least
// a client can: per message one write of a prebuilt masked frame and one read, so the server's
// speed shows.
//
//   ws_echo_client -p PORT [-c CONNS] [-s SIZE] [-d SECS] [--path /echo]
//
// CONNS connections (default 100) to 127.0.0.1:PORT, each upgraded with a fixed
// Sec-WebSocket-Key and then keeping exactly one SIZE-byte (default 64) binary message in
// flight: send, read the echo, compare every byte, send again, for SECS seconds (default 4).
// The frame of each connection is masked once with a key from getrandom(2) and reused (a
// server cannot tell; a real client would draw a key per frame). Round trips are timed per
// message into log buckets (within 1.6%).
// Last line: RESULT mode=echo conns= size= secs= messages= msgs_per_s= p50_us= p99_us=
//            client_cpu= errors=
// (client_cpu: this process's user + system time over the measured wall time; near 1.0 means
// the client set the pace.) Every loop is bounded in count and time; only 127.0.0.1; exit 1 on
// any error (a connection that failed to open, a short or failed write, a wrong echo, a close).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kBuckets = 1024 };

typedef struct {
  int fd;
  unsigned char* frame;  // the masked frame this connection sends
  size_t frame_len;
  unsigned char* in;     // bytes of the echo read so far
  size_t have, want;     // want: header + payload of the unmasked echo
  int64_t sent_ns;
} Conn;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
// Log buckets of 1/64 of a doubling (1.6%) from 1 us.
static int bucket_of(int64_t ns) {
  double us = ns / 1000.0;
  if (us < 1) return 0;
  int b = (int)(log2(us) * 64) + 1;
  return b >= kBuckets ? kBuckets - 1 : b;
}
static double us_of_bucket(int b) { return b == 0 ? 1.0 : exp2((b - 1) / 64.0); }
static double percentile(const uint64_t* h, uint64_t n, double p) {
  uint64_t want = (uint64_t)ceil(n * p), seen = 0;
  for (int b = 0; b < kBuckets; b++) {
    seen += h[b];
    if (seen >= want && seen > 0) return us_of_bucket(b);
  }
  return 0;
}

static int write_all(int fd, const void* p, size_t n) {
  const char* c = p;
  int64_t give_up = now_ns() + 10000000000LL;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w > 0) {
      c += w;
      n -= (size_t)w;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (now_ns() > give_up) return -1;
      struct timespec t = {0, 100000};
      nanosleep(&t, NULL);
    } else {
      return -1;
    }
  }
  return 0;
}

// Blocking connect + upgrade; returns the fd (non-blocking afterwards) or -1.
static int open_conn(int port, const char* path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) goto fail;
  char req[512];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                   path, port);
  if (write_all(fd, req, (size_t)n) != 0) goto fail;
  // Read the response byte by byte up to the blank line (a server sends nothing more before
  // our first frame), so no frame byte is consumed here.
  char resp[2048];
  size_t got = 0;
  while (got + 1 < sizeof resp) {
    ssize_t r = read(fd, resp + got, 1);
    if (r <= 0) goto fail;
    got++;
    if (got >= 4 && memcmp(resp + got - 4, "\r\n\r\n", 4) == 0) break;
  }
  resp[got] = 0;
  if (strncmp(resp, "HTTP/1.1 101", 12) != 0 || !strstr(resp, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")) goto fail;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) goto fail;
  return fd;
fail:
  close(fd);
  return -1;
}

int main(int argc, char** argv) {
  int port = 0, conns = 100, secs = 4;
  size_t size = 64;
  const char* path = "/echo";
  static struct option longs[] = {{"path", required_argument, 0, 'P'}, {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "p:c:s:d:", longs, NULL)) != -1) {
    switch (o) {
      case 'p': port = atoi(optarg); break;
      case 'c': conns = atoi(optarg); break;
      case 's': size = (size_t)atol(optarg); break;
      case 'd': secs = atoi(optarg); break;
      case 'P': path = optarg; break;
      default: goto usage;
    }
  }
  if (port <= 0 || conns <= 0 || conns > 60000 || size == 0 || size > (1u << 24) || secs <= 0 || secs > 3600) {
  usage:
    fprintf(stderr, "usage: %s -p PORT [-c CONNS] [-s SIZE] [-d SECS] [--path /P]\n", argv[0]);
    return 2;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  unsigned char* payload = malloc(size);
  for (size_t i = 0; i < size; i++) payload[i] = (unsigned char)(i * 31 + 7);
  const size_t echo_hdr = size < 126 ? 2 : size <= 0xffff ? 4 : 10;

  Conn* cs = calloc((size_t)conns, sizeof *cs);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  long errors = 0;
  for (int i = 0; i < conns; i++) {
    Conn* c = &cs[i];
    c->fd = open_conn(port, path);
    if (c->fd < 0) {
      fprintf(stderr, "connection %d failed to open\n", i);
      errors++;
      continue;
    }
    unsigned char key[4];
    if (getrandom(key, 4, 0) != 4) memset(key, 0x5a, 4);
    const size_t h = echo_hdr + 4;
    c->frame = malloc(h + size);
    c->frame[0] = 0x82;  // FIN, binary
    if (size < 126) {
      c->frame[1] = (unsigned char)(0x80 | size);
    } else if (size <= 0xffff) {
      c->frame[1] = 0x80 | 126;
      c->frame[2] = (unsigned char)(size >> 8);
      c->frame[3] = (unsigned char)size;
    } else {
      c->frame[1] = 0x80 | 127;
      for (int k = 0; k < 8; k++) c->frame[2 + k] = (unsigned char)((uint64_t)size >> (56 - 8 * k));
    }
    memcpy(c->frame + echo_hdr, key, 4);
    for (size_t k = 0; k < size; k++) c->frame[h + k] = payload[k] ^ key[k & 3];
    c->frame_len = h + size;
    c->want = echo_hdr + size;
    c->in = malloc(c->want);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  }
  if (errors) {
    fprintf(stderr, "%ld connection(s) failed\n", errors);
    printf("RESULT mode=echo conns=%d size=%zu secs=%d messages=0 msgs_per_s=0 p50_us=0 p99_us=0 client_cpu=0 errors=%ld\n",
           conns, size, secs, errors);
    return 1;
  }

  uint64_t* hist = calloc(kBuckets, sizeof *hist);
  uint64_t messages = 0;
  const int64_t start = now_ns(), end = start + (int64_t)secs * 1000000000LL;
  const double cpu0 = cpu_s();
  for (int i = 0; i < conns; i++) {
    cs[i].sent_ns = now_ns();
    if (write_all(cs[i].fd, cs[i].frame, cs[i].frame_len) != 0) errors++;
  }
  struct epoll_event evs[256];
  int64_t t = start;
  while (!errors && t < end) {
    int n = epoll_wait(ep, evs, 256, 100);
    if (n < 0 && errno != EINTR) {
      errors++;
      break;
    }
    t = now_ns();
    for (int i = 0; i < n; i++) {
      Conn* c = evs[i].data.ptr;
      ssize_t r = read(c->fd, c->in + c->have, c->want - c->have);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) {
        fprintf(stderr, "read: %s\n", r == 0 ? "closed by the server" : strerror(errno));
        errors++;
        break;
      }
      c->have += (size_t)r;
      if (c->have < c->want) continue;
      if (c->in[0] != 0x82 || (c->in[1] & 0x80) || memcmp(c->in + echo_hdr, payload, size) != 0) {
        fprintf(stderr, "wrong echo\n");
        errors++;
        break;
      }
      c->have = 0;
      hist[bucket_of(t - c->sent_ns)]++;
      messages++;
      c->sent_ns = t;
      if (t < end && write_all(c->fd, c->frame, c->frame_len) != 0) {
        errors++;
        break;
      }
    }
  }
  const double wall = (now_ns() - start) / 1e9;
  const double cpu = (cpu_s() - cpu0) / wall;
  printf("echo: %d conns x %zu B for %.2f s: %llu messages, %.0f msgs/s, p50 %.1f us, p99 %.1f us, client CPU %.3f\n",
         conns, size, wall, (unsigned long long)messages, messages / wall, percentile(hist, messages, 0.5),
         percentile(hist, messages, 0.99), cpu);
  printf("RESULT mode=echo conns=%d size=%zu secs=%d messages=%llu msgs_per_s=%.0f p50_us=%.1f p99_us=%.1f "
         "client_cpu=%.3f errors=%ld\n",
         conns, size, secs, (unsigned long long)messages, messages / wall, percentile(hist, messages, 0.5),
         percentile(hist, messages, 0.99), cpu, errors);
  for (int i = 0; i < conns; i++) close(cs[i].fd);
  return errors ? 1 : 0;
}
