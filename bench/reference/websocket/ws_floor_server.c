// bench/reference/websocket/ws_floor_server.c: the "physical limit" of scripts/bench-websocket.sh's
// echo and broadcast rows: a WebSocket server in plain C doing the least a server can per
// message (one thread, one level-triggered epoll set, one read() and one write() per message,
// frames unmasked in place, TCP_NODELAY), with none of what a real server needs (no UTF-8 check,
// no fragments, no limits beyond its buffer, no close handshake: a close frame or a bad frame
// drops the connection). No server can do these faster on the machine, so its figures are the
// ceiling of LioNet's (and gorilla's).
//   GET /broadcast  joins the one room: a message received on any of its connections is written
//                   to every connection of the room, one write(2) each, in a loop (as
//                   gorilla's reference does; a socket that is full keeps the rest in its
//                   buffer for EPOLLOUT)
//   any other path  echo: every message is sent back (a ping is answered with a pong)
//
// Usage: ws_floor_server -p PORT     (127.0.0.1 only; runs until killed; one line on stderr once
//                                     it listens)
// Build: cc -O2 -o ws_floor_server ws_floor_server.c -lcrypto   (SHA-1 and base64 of the
//        handshake from OpenSSL's libcrypto)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (256 * 1024)

struct conn {
  int fd;
  int upgraded;
  int room;               // 1 + its index in room[], 0 if not in the room
  size_t have;            // bytes in in[] not yet consumed
  size_t out_head, out_tail;  // out[out_head, out_tail) still to write
  unsigned char in[BUF];
  unsigned char out[BUF];
};

static int epfd;
static struct conn** room;
static size_t room_len, room_cap;

static void want(struct conn* c, int op, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.ptr = c};
  if (epoll_ctl(epfd, op, c->fd, &ev) < 0) perror("epoll_ctl");
}

static void drop(struct conn* c) {
  if (c->room) {  // swap-remove
    room[c->room - 1] = room[--room_len];
    room[c->room - 1]->room = c->room;
  }
  close(c->fd);
  free(c);
}

// 1: all written, 0: the socket is full (EPOLLOUT armed), -1: gone
static int flush(struct conn* c) {
  while (c->out_head < c->out_tail) {
    ssize_t n = write(c->fd, c->out + c->out_head, c->out_tail - c->out_head);
    if (n > 0) {
      c->out_head += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      want(c, EPOLL_CTL_MOD, EPOLLOUT);
      return 0;
    } else {
      return -1;
    }
  }
  c->out_head = c->out_tail = 0;
  return 1;
}

static int handshake(struct conn* c) {
  c->in[c->have < BUF ? c->have : BUF - 1] = 0;
  char* end = strstr((char*)c->in, "\r\n\r\n");
  if (!end) return c->have >= BUF - 1 ? -1 : 0;
  char* k = strcasestr((char*)c->in, "\r\nSec-WebSocket-Key:");
  if (!k || k > end) return -1;
  k += 20;
  while (*k == ' ') k++;
  char* ke = strstr(k, "\r\n");
  char src[128];
  size_t kl = (size_t)(ke - k);
  if (kl > 64) return -1;
  memcpy(src, k, kl);
  memcpy(src + kl, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
  unsigned char sha[SHA_DIGEST_LENGTH];
  SHA1((unsigned char*)src, kl + 36, sha);
  char acc[64];
  EVP_EncodeBlock((unsigned char*)acc, sha, SHA_DIGEST_LENGTH);
  int n = snprintf((char*)c->out, BUF,
                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\n\r\n", acc);
  c->out_head = 0;
  c->out_tail = (size_t)n;
  size_t used = (size_t)(end + 4 - (char*)c->in);
  c->upgraded = 1;
  if (strncmp((char*)c->in, "GET /broadcast ", 15) == 0 || strncmp((char*)c->in, "GET /broadcast?", 15) == 0) {
    if (room_len == room_cap) {
      room_cap = room_cap ? room_cap * 2 : 1024;
      room = realloc(room, room_cap * sizeof *room);
      if (!room) abort();
    }
    room[room_len++] = c;
    c->room = (int)room_len;
  }
  memmove(c->in, c->in + used, c->have - used);
  c->have -= used;
  return 1;
}

// dst = src ^ key, eight bytes at a time (a byte loop costs ~1 ns a byte: 16 us a 16 KiB frame)
static void unmask(unsigned char* dst, const unsigned char* src, size_t n, const unsigned char* key) {
  uint32_t k4;
  memcpy(&k4, key, 4);
  const uint64_t k8 = ((uint64_t)k4 << 32) | k4;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, src + i, 8);
    v ^= k8;
    memcpy(dst + i, &v, 8);
  }
  for (; i < n; i++) dst[i] = src[i] ^ key[i & 3];
}

// Turns every whole client frame in in[] into an unmasked server frame in out[]. -1: drop.
static int frames(struct conn* c) {
  size_t p = 0;
  while (c->have - p >= 2) {
    unsigned char* f = c->in + p;
    int op = f[0] & 0x0f;
    if (!(f[1] & 0x80) || op == 0x8 || (f[0] & 0x70)) return -1;  // unmasked, close, RSV
    uint64_t len = f[1] & 0x7f;
    size_t h = 2;
    if (len == 126) {
      if (c->have - p < 4) break;
      len = ((uint64_t)f[2] << 8) | f[3];
      h = 4;
    } else if (len == 127) {
      if (c->have - p < 10) break;
      len = 0;
      for (int i = 0; i < 8; i++) len = (len << 8) | f[2 + i];
      h = 10;
    }
    if (len > BUF / 2) return -1;
    if (c->have - p < h + 4 + len) break;
    unsigned char* key = f + h;
    unsigned char* pl = f + h + 4;
    size_t oh = len < 126 ? 2 : len < 65536 ? 4 : 10;
    if (c->out_tail + oh + len > BUF) break;  // written after this flush
    unsigned char* o = c->out + c->out_tail;
    o[0] = (unsigned char)(0x80 | (op == 0x9 ? 0xA : op));  // a ping is answered by a pong
    if (oh == 2) {
      o[1] = (unsigned char)len;
    } else if (oh == 4) {
      o[1] = 126;
      o[2] = (unsigned char)(len >> 8);
      o[3] = (unsigned char)len;
    } else {
      o[1] = 127;
      for (int i = 0; i < 8; i++) o[2 + i] = (unsigned char)(len >> (56 - 8 * i));
    }
    unmask(o + oh, pl, (size_t)len, key);
    p += h + 4 + len;
    if (c->room && op != 0x9) {  // to every connection of the room, this one last
      for (size_t r = 0; r < room_len; r++) {
        struct conn* m = room[r];
        if (m == c) continue;
        if (m->out_head < m->out_tail) {  // already waiting for EPOLLOUT: queue behind
          if (m->out_tail + oh + len <= BUF) memcpy(m->out + m->out_tail, o, oh + len), m->out_tail += oh + len;
          continue;
        }
        ssize_t n = write(m->fd, o, oh + len);
        if (n < 0) n = 0;
        if ((size_t)n < oh + len) {  // the rest when it can take it
          memcpy(m->out, o + n, oh + len - (size_t)n);
          m->out_head = 0;
          m->out_tail = oh + len - (size_t)n;
          want(m, EPOLL_CTL_MOD, EPOLLOUT);
        }
      }
    }
    c->out_tail += oh + len;
  }
  memmove(c->in, c->in + p, c->have - p);
  c->have -= p;
  return 0;
}

static int on_event(struct conn* c) {
  if (c->out_tail > c->out_head) {  // waiting to write: finish that first
    int r = flush(c);
    if (r <= 0) return r;
    want(c, EPOLL_CTL_MOD, EPOLLIN);
  }
  ssize_t n = read(c->fd, c->in + c->have, BUF - 1 - c->have);
  if (n == 0) return -1;
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
  c->have += (size_t)n;
  if (!c->upgraded) {
    int r = handshake(c);
    if (r <= 0) return r;
  }
  if (frames(c) < 0) return -1;
  return flush(c) < 0 ? -1 : 0;
}

int main(int argc, char** argv) {
  int port = 9000, o;
  while ((o = getopt(argc, argv, "p:")) != -1) {
    if (o == 'p') {
      port = atoi(optarg);
    } else {
      fprintf(stderr, "usage: %s -p PORT\n", argv[0]);
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 4096)) {
    perror("listen");
    return 1;
  }
  epfd = epoll_create1(0);
  struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(epfd, EPOLL_CTL_ADD, l, &lev);
  fprintf(stderr, "ws_floor_server listening on 127.0.0.1:%d\n", port);
  struct epoll_event evs[512];
  for (;;) {
    int n = epoll_wait(epfd, evs, 512, -1);
    for (int i = 0; i < n; i++) {
      struct conn* c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct conn* nc = calloc(1, sizeof *nc);
          if (!nc) {
            close(fd);
            continue;
          }
          nc->fd = fd;
          want(nc, EPOLL_CTL_ADD, EPOLLIN);
        }
        continue;
      }
      if (on_event(c) < 0) drop(c);
    }
  }
}
