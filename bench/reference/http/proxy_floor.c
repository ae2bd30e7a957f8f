// bench/reference/http/proxy_floor.c: the "physical limit" of scripts/bench-proxy.sh: an HTTP/1.1
// keep-alive reverse proxy in plain C that does the least a proxy can per request (one thread,
// edge-triggered epoll with every fd registered once, one upstream connection per client
// connection opened with it and kept for its life, the request forwarded byte for byte without
// a header rewritten, the response streamed through a 64 KiB buffer, and no read(2) that would
// only return EAGAIN: a short read means the socket is drained until its next edge). It is not a proxy anyone
// should run (GET/HEAD without bodies only, responses must carry Content-Length, no timeouts, no
// pool shared between clients, no error answers: anything else drops the connection), but no
// proxy can move requests faster on the machine, so its ratio to nginx is the ceiling of any
// proxy's in the benchmark's layout.
//
// Usage: proxy_floor -p PORT -u UPSTREAM_PORT   (both on 127.0.0.1; runs until killed; one line
//                                                on stderr once it listens)
// Build: cc -O2 -o proxy_floor proxy_floor.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

#define BUF (64 * 1024)

enum state { READ_REQUEST, RELAY_RESPONSE };

struct pair;
struct end {  // what an epoll event points at: one side of a pair
  struct pair* p;
};
struct pair {
  int c, u;  // client and upstream sockets
  struct end ce, ue;
  enum state st;
  int c_ready, u_ready;       // an EPOLLIN edge came and no read has drained the socket since
  size_t req_len;            // request bytes read so far
  size_t out_head, out_tail;  // response bytes in out[] not yet written to the client
  int head_done;              // the response's header has been seen
  uint64_t left;              // response bytes still to come from the upstream
  char req[8192];
  char out[BUF];
};

static struct sockaddr_in upstream;
static int epfd;

static void drop(struct pair* p) {
  close(p->c);
  close(p->u);
  free(p);
}

// The response's total length from its header in out[0, n), or 0 if the header is not whole
// yet, or -1 if it has no Content-Length (the floor handles nothing else).
static int64_t response_length(const char* b, size_t n) {
  const char* end = memmem(b, n, "\r\n\r\n", 4);
  if (!end) return n >= BUF ? -1 : 0;
  const char* cl = memmem(b, (size_t)(end - b), "\r\nContent-Length:", 17);
  if (!cl) cl = memmem(b, (size_t)(end - b), "\r\ncontent-length:", 17);
  if (!cl) return -1;
  return (int64_t)(end + 4 - b) + strtoll(cl + 17, NULL, 10);
}

// Runs the pair as far as it can go without blocking. -1: drop it.
static int run(struct pair* p) {
  for (;;) {
    if (p->st == READ_REQUEST) {
      if (!p->c_ready) return 0;
      size_t want = sizeof p->req - p->req_len;
      ssize_t n = read(p->c, p->req + p->req_len, want);
      if (n < 0 && errno == EAGAIN) p->c_ready = 0;
      if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
      if (n == 0) return -1;
      if ((size_t)n < want) p->c_ready = 0;
      p->req_len += (size_t)n;
      if (!memmem(p->req, p->req_len, "\r\n\r\n", 4)) {
        if (p->req_len == sizeof p->req) return -1;
        continue;
      }
      if (write(p->u, p->req, p->req_len) != (ssize_t)p->req_len) return -1;  // small: one write
      p->req_len = 0;
      p->st = RELAY_RESPONSE;
      p->head_done = 0;
      p->out_head = p->out_tail = 0;
      continue;
    }
    if (p->out_head < p->out_tail) {  // to the client first
      ssize_t n = write(p->c, p->out + p->out_head, p->out_tail - p->out_head);
      if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
      p->out_head += (size_t)n;
      if (p->out_head < p->out_tail) continue;
      p->out_head = p->out_tail = 0;
      if (p->head_done && p->left == 0) p->st = READ_REQUEST;
      continue;
    }
    if (!p->u_ready) return 0;
    size_t room = BUF - p->out_tail;
    if (p->head_done && p->left < room) room = (size_t)p->left;
    ssize_t n = read(p->u, p->out + p->out_tail, room);
    if (n < 0 && errno == EAGAIN) p->u_ready = 0;
    if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    if (n == 0) return -1;
    if ((size_t)n < room) p->u_ready = 0;
    p->out_tail += (size_t)n;
    if (!p->head_done) {
      int64_t total = response_length(p->out, p->out_tail);
      if (total < 0) return -1;
      if (total == 0) continue;  // not the whole header yet
      if ((uint64_t)total < p->out_tail) return -1;  // more than one response
      p->head_done = 1;
      p->left = (uint64_t)total - p->out_tail;
    } else {
      p->left -= (uint64_t)n;
    }
  }
}

static void add(int fd, struct end* e) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = e};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) perror("epoll_ctl");
}

int main(int argc, char** argv) {
  int port = 9000, uport = 0, o, one = 1;
  while ((o = getopt(argc, argv, "p:u:")) != -1) {
    if (o == 'p') {
      port = atoi(optarg);
    } else if (o == 'u') {
      uport = atoi(optarg);
    } else {
      fprintf(stderr, "usage: %s -p PORT -u UPSTREAM_PORT\n", argv[0]);
      return 2;
    }
  }
  if (!uport) {
    fprintf(stderr, "usage: %s -p PORT -u UPSTREAM_PORT\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  upstream = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)uport),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
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
  fprintf(stderr, "proxy_floor listening on 127.0.0.1:%d, upstream 127.0.0.1:%d\n", port, uport);
  struct epoll_event evs[512];
  for (;;) {
    int n = epoll_wait(epfd, evs, 512, -1);
    for (int i = 0; i < n; i++) {
      struct end* e = evs[i].data.ptr;
      if (e) {
        struct pair* p = e->p;
        uint32_t ev = evs[i].events;
        int in = (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
        if (in) {
          if (e == &p->ce) p->c_ready = 1;
          else p->u_ready = 1;
        }
        // a write edge matters only to a client with response bytes waiting
        if (!in && !(e == &p->ce && p->out_head < p->out_tail)) continue;
        if (run(p) < 0) {
          // the other end's event of this batch, if any, must not see the freed pair
          for (int j = i + 1; j < n; j++) {
            struct end* f = evs[j].data.ptr;
            if (f && f->p == e->p) evs[j].data.ptr = NULL, evs[j].events = 0;
          }
          drop(e->p);
        }
        continue;
      }
      if (!(evs[i].events & EPOLLIN)) continue;  // a cleared event of a dropped pair
      int fd;
      while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
        struct pair* p = calloc(1, sizeof *p);
        int u = socket(AF_INET, SOCK_STREAM, 0);
        if (!p || u < 0 || connect(u, (struct sockaddr*)&upstream, sizeof upstream) != 0) {
          if (u >= 0) close(u);
          close(fd);
          free(p);
          continue;
        }
        setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (fcntl(u, F_SETFL, fcntl(u, F_GETFL) | O_NONBLOCK) != 0) {
          close(u);
          close(fd);
          free(p);
          continue;
        }
        p->c = fd;
        p->u = u;
        p->ce.p = p->ue.p = p;
        add(fd, &p->ce);
        add(u, &p->ue);
      }
    }
  }
}
