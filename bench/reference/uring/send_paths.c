// send_paths: the ways a server can move a large body (a static file) into a TCP socket,
// measured side by side over loopback (issue 24: "sendfile-equivalent: splice, or send from
// registered buffers; measure" and "zero-copy send (IORING_OP_SEND_ZC) for large bodies").
//
//   sendfile     non-blocking sendfile(2), poll(2) on EAGAIN (LioNet's readiness path today)
//   send         non-blocking send(2) from memory, poll(2) on EAGAIN (MEMORY mode)
//   uring-send   IORING_OP_SEND from memory, one SQE per remaining part, completion-based
//   uring-zc     IORING_OP_SEND_ZC from memory (each send posts a result and a notification
//                CQE; the buffer is never written, so sends do not wait for notifications)
//   uring-splice IORING_OP_SPLICE file -> pipe linked to SPLICE pipe -> socket (1 MiB pipe)
//
// The sender runs on CPU 0, a reader thread on CPU 1 reads and discards into a 1 MiB buffer.
// Each mode sends BODIES bodies of SIZE bytes (bounded by count and by 10 s), in rounds that
// interleave the modes. Per mode: MB/s and the sender's CPU per MiB (the process's less the reader thread's),
// and the ratio to sendfile. Usage: send_paths [-s size_bytes] [-n bodies] [-r rounds]
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kSendfile, kSend, kUringSend, kUringZc, kUringSplice, kModes };
static const char* kNames[kModes] = {"sendfile", "send", "uring-send", "uring-zc", "uring-splice"};

static size_t g_size = 1 << 20;
static int g_bodies = 1000;
static long g_errors;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
static double cpu_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
static double thread_cpu_s(void) { return cpu_s(RUSAGE_THREAD); }
static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}
static void die(const char* what) {
  perror(what);
  exit(2);
}

struct reader {
  int fd;
  uint64_t expect;
  uint64_t got;
  double cpu;  // this thread's CPU seconds
};
static void* read_all(void* arg) {
  struct reader* r = arg;
  pin(1);
  char* buf = malloc(1 << 20);
  while (r->got < r->expect) {
    ssize_t n = read(r->fd, buf, 1 << 20);
    if (n <= 0) break;
    r->got += (uint64_t)n;
  }
  free(buf);
  r->cpu = thread_cpu_s();
  return NULL;
}

static void wait_writable(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  poll(&p, 1, 10000);
}

static void submit_wait(struct io_uring* ring, struct io_uring_cqe** cqe) {
  if (io_uring_submit_and_wait(ring, 1) < 0 || io_uring_wait_cqe(ring, cqe) < 0) die("io_uring wait");
}

// One body of g_size bytes from file fd `file` (or memory `mem`) into socket `s`.
static int send_body(int mode, int s, int file, const char* mem, struct io_uring* ring, int pipefd[2],
                     long* zc_pending) {
  size_t off = 0;
  while (off < g_size) {
    ssize_t n = 0;
    if (mode == kSendfile || mode == kSend) {
      if (mode == kSendfile) {
        off_t o = (off_t)off;
        n = sendfile(s, file, &o, g_size - off);
      } else {
        n = send(s, mem + off, g_size - off, MSG_NOSIGNAL);
      }
      if (n < 0 && errno == EAGAIN) {
        wait_writable(s);
        continue;
      }
      if (n <= 0) return -1;
    } else if (mode == kUringSend || mode == kUringZc) {
      struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (mode == kUringSend)
        io_uring_prep_send(sqe, s, mem + off, g_size - off, MSG_NOSIGNAL);
      else
        io_uring_prep_send_zc(sqe, s, mem + off, g_size - off, MSG_NOSIGNAL, 0);
      sqe->user_data = 1;
      for (;;) {
        struct io_uring_cqe* cqe;
        submit_wait(ring, &cqe);
        if (cqe->flags & IORING_CQE_F_NOTIF) {  // an earlier zero-copy send's buffer is free
          --*zc_pending;
          io_uring_cqe_seen(ring, cqe);
          continue;
        }
        n = cqe->res;
        if (cqe->flags & IORING_CQE_F_MORE) ++*zc_pending;
        io_uring_cqe_seen(ring, cqe);
        break;
      }
      if (n <= 0) return -1;
    } else {  // splice: file -> pipe, then pipe -> socket, linked
      const size_t chunk = g_size - off < (1u << 20) ? g_size - off : (1u << 20);
      struct io_uring_sqe* a = io_uring_get_sqe(ring);
      io_uring_prep_splice(a, file, (int64_t)off, pipefd[1], -1, (unsigned)chunk, 0);
      a->flags |= IOSQE_IO_LINK;
      a->user_data = 1;
      struct io_uring_sqe* b = io_uring_get_sqe(ring);
      io_uring_prep_splice(b, pipefd[0], -1, s, -1, (unsigned)chunk, 0);
      b->user_data = 2;
      int in = -1, out = -1;
      if (io_uring_submit_and_wait(ring, 2) < 0) die("io_uring splice");
      for (int i = 0; i < 2; ++i) {
        struct io_uring_cqe* cqe;
        if (io_uring_wait_cqe(ring, &cqe) < 0) die("io_uring wait");
        if (cqe->user_data == 1) in = cqe->res; else out = cqe->res;
        io_uring_cqe_seen(ring, cqe);
      }
      if (in <= 0) return -1;
      if (out < 0 && out != -EAGAIN) return -1;
      if (out < 0) out = 0;
      while (out < in) {  // the socket took part or none of it (splice does not wait on a
                          // non-blocking socket): wait for room, move the rest of the pipe
        wait_writable(s);
        struct io_uring_sqe* c = io_uring_get_sqe(ring);
        io_uring_prep_splice(c, pipefd[0], -1, s, -1, (unsigned)(in - out), 0);
        c->user_data = 2;
        struct io_uring_cqe* cqe;
        submit_wait(ring, &cqe);
        const int more = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        if (more == -EAGAIN) continue;
        if (more <= 0) return -1;
        out += more;
      }
      n = out;
    }
    off += (size_t)n;
  }
  return 0;
}

int main(int argc, char** argv) {
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-s")) g_size = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "-n")) g_bodies = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  pin(0);
  // The body: a file in the page cache (tmpfs or not, it is read once first) and its mapping.
  char path[] = "/tmp/send_paths.XXXXXX";
  int file = mkstemp(path);
  if (file < 0) die("mkstemp");
  unlink(path);
  char* mem = malloc(g_size);
  for (size_t i = 0; i < g_size; ++i) mem[i] = (char)(i * 131 + 7);
  if (write(file, mem, g_size) != (ssize_t)g_size) die("write");

  struct io_uring ring;
  if (io_uring_queue_init(64, &ring, 0) < 0) die("io_uring_queue_init");
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0) die("pipe");
  if (fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20) < 0) die("F_SETPIPE_SZ (raise /proc/sys/fs/pipe-max-size)");

  int lst = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(lst, (struct sockaddr*)&a, sizeof a) || listen(lst, 8) || getsockname(lst, (struct sockaddr*)&a, &al))
    die("listen");

  double mbps[kModes] = {0}, cpu_per_mib[kModes] = {0};
  double samples_mbps[kModes][16], samples_cpu[kModes][16];
  if (rounds > 16) rounds = 16;
  for (int r = 0; r < rounds; ++r) {
    for (int m = 0; m < kModes; ++m) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, (struct sockaddr*)&a, sizeof a)) die("connect");
      int c = accept(lst, NULL, NULL);
      fcntl(s, F_SETFL, O_NONBLOCK);
      struct reader rd = {.fd = c, .expect = (uint64_t)g_size * (uint64_t)g_bodies};
      pthread_t t;
      pthread_create(&t, NULL, read_all, &rd);
      long zc_pending = 0;
      int bodies = 0;
      const double t0 = now_s(), c0 = cpu_s(RUSAGE_SELF);
      for (; bodies < g_bodies && now_s() - t0 < 10; ++bodies)
        if (send_body(m, s, file, mem, &ring, pipefd, &zc_pending) != 0) {
          fprintf(stderr, "%s: body %d failed (%s)\n", kNames[m], bodies, strerror(errno));
          ++g_errors;
          break;
        }
      while (zc_pending > 0) {  // every zero-copy buffer released before the figure is taken
        struct io_uring_cqe* cqe;
        if (io_uring_wait_cqe(&ring, &cqe) < 0) die("io_uring wait");
        if (cqe->flags & IORING_CQE_F_NOTIF) --zc_pending;
        io_uring_cqe_seen(&ring, cqe);
      }
      shutdown(s, SHUT_WR);
      pthread_join(t, NULL);
      // The sender's CPU: the whole process's (io_uring's io-wq workers, which run the splices,
      // included) less the reader thread's.
      const double cpu = cpu_s(RUSAGE_SELF) - c0 - rd.cpu;
      const double secs = now_s() - t0;
      if (rd.got != (uint64_t)g_size * (uint64_t)bodies) {
        fprintf(stderr, "%s: the reader got %llu bytes of %llu\n", kNames[m], (unsigned long long)rd.got,
                (unsigned long long)g_size * (unsigned long long)bodies);
        ++g_errors;
      }
      const double mib = (double)g_size * bodies / (1 << 20);
      samples_mbps[m][r] = mib / secs;
      samples_cpu[m][r] = cpu * 1e6 / mib;
      printf("round %d %-12s %9.0f MiB/s  sender %6.1f us CPU per MiB\n", r + 1, kNames[m], mib / secs,
             cpu * 1e6 / mib);
      close(s);
      close(c);
    }
  }
  // Medians across rounds.
  for (int m = 0; m < kModes; ++m) {
    for (int i = 0; i < rounds; ++i)
      for (int j = i + 1; j < rounds; ++j) {
        if (samples_mbps[m][j] < samples_mbps[m][i]) {
          double x = samples_mbps[m][i]; samples_mbps[m][i] = samples_mbps[m][j]; samples_mbps[m][j] = x;
        }
        if (samples_cpu[m][j] < samples_cpu[m][i]) {
          double x = samples_cpu[m][i]; samples_cpu[m][i] = samples_cpu[m][j]; samples_cpu[m][j] = x;
        }
      }
    mbps[m] = samples_mbps[m][rounds / 2];
    cpu_per_mib[m] = samples_cpu[m][rounds / 2];
  }
  printf("\nmedians of %d rounds, %zu-byte bodies (ratio: throughput vs sendfile; CPU vs sendfile)\n", rounds, g_size);
  for (int m = 0; m < kModes; ++m)
    printf("%-12s %9.0f MiB/s  %5.2fx   sender %6.1f us/MiB  %5.2fx\n", kNames[m], mbps[m], mbps[m] / mbps[0],
           cpu_per_mib[m], cpu_per_mib[m] / cpu_per_mib[0]);
  printf("RESULT size=%zu sendfile_mibps=%.0f send_mibps=%.0f uring_send_mibps=%.0f uring_zc_mibps=%.0f "
         "uring_splice_mibps=%.0f sendfile_us_per_mib=%.1f send_us_per_mib=%.1f uring_send_us_per_mib=%.1f "
         "uring_zc_us_per_mib=%.1f uring_splice_us_per_mib=%.1f errors=%ld\n",
         g_size, mbps[0], mbps[1], mbps[2], mbps[3], mbps[4], cpu_per_mib[0], cpu_per_mib[1], cpu_per_mib[2],
         cpu_per_mib[3], cpu_per_mib[4], g_errors);
  return g_errors ? 1 : 0;
}
