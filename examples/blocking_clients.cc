// examples/blocking_clients.cc: unmodified blocking client libraries (hiredis, libcurl) in
// fibers. Their connect/read/write/poll calls land in LioNet's hooks (lionet/hook/hook.h), so a
// call that would block parks only its fiber: 100 slow calls on ONE worker thread take about as
// long as one of them.
//
//   ./blocking_clients [redis_fibers] [http_fibers] [redis_port]
//       redis_fibers  fibers that each connect, PING and BLPOP with a 0.2 s timeout (default 100)
//       http_fibers   fibers that each GET, with libcurl, a page that takes 0.2 s (default 50)
//       redis_port    0 (default): start redis-server (from PATH) on a free 127.0.0.1 port and
//                     stop it at the end; N: use the redis-server already on 127.0.0.1:N
//
// For each library it prints the wall time of the batch next to what making the calls one
// after another would take, and ends with one line
//   RESULT redis_ok=100 redis_failed=0 redis_alone_s=0.201 redis_serial_s=20.1 redis_wall_s=0.3 ... errors=0
// (alone_s: one call timed with nothing else running; serial_s: that times the fiber count).
// Exit status: 0 when every call succeeded, 1 when some failed, 2 on a setup problem.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lionet/hook/hook.h"
#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"

namespace {
using Clock = std::chrono::steady_clock;
constexpr double kHoldSeconds = 0.2;  // how long each call is kept waiting by its server

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- Setup helpers (plain code, run on the main thread before any fiber) ----

// A port that was free a moment ago (bind to port 0, read it back, close).
uint16_t free_local_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

bool port_accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// Starts redis-server on 127.0.0.1:port without persistence. PR_SET_PDEATHSIG kills it if
// this program dies first (even by SIGKILL), so no server is ever left behind.
pid_t start_redis(uint16_t port) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();  // before any thread exists: fork is simple here
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
  int devnull = ::open("/dev/null", O_WRONLY);
  ::dup2(devnull, 1);  // quiet start-up banner; errors still reach stderr
  std::string p = std::to_string(port);
  ::execlp("redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly",
           "no", "--daemonize", "no", "--loglevel", "warning", static_cast<char*>(nullptr));
  ::_exit(127);  // exec failed: not on PATH
}

// Waits up to `seconds` for the server to accept; false if it exited or never came up.
bool wait_until_up(pid_t pid, uint16_t port, int seconds) {
  for (int i = 0; i < seconds * 50; ++i) {
    if (port_accepts(port)) return true;
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// One batch of fibers: how many calls succeeded and how long the batch took. The calls of
// the first fiber (kAlone of them, one after another, before the others start) are timed
// alone: that is what one call costs, and N times it is what the N calls cost without fibers.
constexpr int kAlone = 3;
struct Batch {
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  double alone_s = 0;  // one call, nothing else running
  double wall_s = 0;  // all N calls in N fibers at once
  double serial_s(int n) const { return alone_s * n; }
};

void report(const char* what, int fibers, const Batch& b) {
  std::printf("%s: %d fibers on 1 worker thread: %d ok, %d failed\n", what, fibers, b.ok.load(), b.failed.load());
  std::printf("  one call alone %.3f s; %d calls one after another ~%.2f s; in %d fibers at once %.3f s (%.0fx)\n",
              b.alone_s, fibers, b.serial_s(fibers), fibers, b.wall_s,
              b.wall_s > 0 ? b.serial_s(fibers) / b.wall_s : 0.0);
}

// ---- The fibers' code: ordinary blocking calls, exactly as in a thread-per-client program ----

// hiredis: connect, PING, then BLPOP on an empty list, which the server holds for 0.2 s and
// then answers with nil. Each call blocks in read()/poll(); the hooks park this fiber instead.
void redis_client(uint16_t port, int i, Batch& b) {
  redisContext* c = redisConnect("127.0.0.1", port);
  bool ok = c != nullptr && c->err == 0;
  if (ok) {
    auto* pong = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = pong != nullptr && pong->type == REDIS_REPLY_STATUS && std::strcmp(pong->str, "PONG") == 0;
    if (pong) freeReplyObject(pong);
  }
  if (ok) {
    std::string key = "lionet:example:empty" + std::to_string(i % 10);
    auto* r = static_cast<redisReply*>(redisCommand(c, "BLPOP %s 0.2", key.c_str()));
    ok = r != nullptr && r->type == REDIS_REPLY_NIL;  // nil: timed out, nothing was pushed
    if (r) freeReplyObject(r);
  }
  if (!ok) std::fprintf(stderr, "redis fiber %d: %s\n", i, c && c->err ? c->errstr : "unexpected reply");
  if (c) redisFree(c);
  (ok ? b.ok : b.failed).fetch_add(1);
}

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// libcurl's easy API: one blocking GET. libcurl waits in poll(); the hook parks the fiber.
void http_client(uint16_t port, int i, Batch& b) {
  const std::string path = "/item/" + std::to_string(i);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  std::string body;
  CURL* h = curl_easy_init();
  if (h == nullptr) {
    b.failed.fetch_add(1);
    return;
  }
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM-based timeouts (never with threads or fibers)
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  const bool ok = rc == CURLE_OK && status == 200 && body == "hello " + path;
  if (!ok) std::fprintf(stderr, "http fiber %d: %s, status %ld\n", i, curl_easy_strerror(rc), status);
  (ok ? b.ok : b.failed).fetch_add(1);
}

// The tiny HTTP responder the curl fibers talk to: one fiber per connection (TcpServer), reads
// the request head, waits 0.2 s with a plain usleep() (hooked: parks only this fiber), answers
// "hello <path>" and closes. Good enough for this example, not an HTTP server.
void slow_hello(lionet::SocketStream& s) {
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 8192) {
    auto n = s.read(buf, sizeof buf);
    if (!n || *n == 0) return;
    head.append(buf, *n);
  }
  const size_t sp1 = head.find(' ');
  const size_t sp2 = head.find(' ', sp1 + 1);
  const std::string body = "hello " + (sp2 != std::string::npos ? head.substr(sp1 + 1, sp2 - sp1 - 1) : "?");
  ::usleep(static_cast<useconds_t>(kHoldSeconds * 1e6));
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  (void)s.write(response);
}

// First kAlone calls one after another in one fiber (timed: alone_s), then `fibers` calls in
// as many fibers at once (timed: wall_s).
template <class F>
void run_batch(lionet::Scheduler& sched, int fibers, Batch& b, F client) {
  if (fibers == 0) return;
  const int alone = fibers < kAlone ? fibers : kAlone;
  Batch warmup;  // its successes are not counted below; its failures are
  auto t0 = Clock::now();
  sched
      .spawn([&] {
        for (int i = 0; i < alone; ++i) client(i, warmup);
      })
      .join();
  b.alone_s = seconds_since(t0) / alone;
  b.failed.fetch_add(warmup.failed.load());

  t0 = Clock::now();
  std::vector<lionet::JoinHandle<void>> hs;
  for (int i = 0; i < fibers; ++i) hs.push_back(sched.spawn([&b, &client, i] { client(i, b); }));
  for (auto& h : hs) h.join();
  b.wall_s = seconds_since(t0);
}
}  // namespace

int main(int argc, char** argv) {
  const int redis_fibers = argc > 1 ? std::atoi(argv[1]) : 100;
  const int http_fibers = argc > 2 ? std::atoi(argv[2]) : 50;
  int redis_port = argc > 3 ? std::atoi(argv[3]) : 0;
  if (redis_fibers < 0 || redis_fibers > 2000 || http_fibers < 0 || http_fibers > 2000 || redis_port < 0 ||
      redis_port > 65535) {
    std::fprintf(stderr, "usage: %s [redis_fibers<=2000] [http_fibers<=2000] [redis_port]\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::signal(SIGPIPE, SIG_IGN);  // a server going away must give EPIPE, not kill us

  // Each fiber holds one or two sockets at once: make room for a few thousand fds.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
  ::setrlimit(RLIMIT_NOFILE, &rl);

  // 1. The servers: our own redis-server unless a port was given.
  //    (Three tries: another program may take the free port before redis-server binds it.)
  pid_t redis_pid = -1;
  bool redis_up = redis_fibers == 0;
  if (!redis_up && redis_port != 0) redis_up = wait_until_up(-1, static_cast<uint16_t>(redis_port), 1);
  for (int attempt = 0; !redis_up && redis_port == 0 && attempt < 3; ++attempt) {
    const uint16_t port = free_local_port();
    redis_pid = start_redis(port);
    redis_up = wait_until_up(redis_pid, port, 10);
    if (redis_up) {
      redis_port = port;
    } else {  // exited (already reaped) or hung: make sure it is gone before the next try
      ::kill(redis_pid, SIGKILL);
      ::waitpid(redis_pid, nullptr, 0);
    }
  }
  if (!redis_up) {
    if (redis_port != 0) {
      std::fprintf(stderr, "nothing answers on 127.0.0.1:%d\n", redis_port);
    } else {
      std::fprintf(stderr, "could not start redis-server (installed and on PATH? scripts/install-deps.sh)\n");
    }
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);  // once, before any thread

  // 2. ONE worker thread; the scheduler comes with its IO driver, so hooked fd calls park
  //    fibers. Linking liblionet's hook objects is what makes hiredis' and libcurl's libc calls
  //    ours.
  lionet::hook::ensure_linked();
  lionet::Scheduler sched({.threads = 1, .name = "clients"});

  // 3. The HTTP responder runs on the same worker thread as the clients.
  lionet::TcpServer http(sched, slow_hello);
  http.listen(lionet::Address::ipv4_loopback(0));
  http.start();
  const uint16_t http_port = http.addresses()[0].port();

  // 4. The two batches, one after the other. Every fiber runs plain blocking code.
  Batch redis, web;
  run_batch(sched, redis_fibers, redis,
            [port = static_cast<uint16_t>(redis_port)](int i, Batch& b) { redis_client(port, i, b); });
  report("redis (connect + PING + BLPOP 0.2 s)", redis_fibers, redis);
  run_batch(sched, http_fibers, web, [http_port](int i, Batch& b) { http_client(http_port, i, b); });
  report("libcurl (GET held 0.2 s by the server)", http_fibers, web);

  // 5. Shut down: the responder, the scheduler, then our redis-server.
  http.stop(std::chrono::seconds(1));
  sched.stop();
  curl_global_cleanup();
  if (redis_pid > 0) {
    ::kill(redis_pid, SIGTERM);
    ::waitpid(redis_pid, nullptr, 0);
  }

  const int errors = redis.failed.load() + web.failed.load();
  std::printf(
      "RESULT redis_ok=%d redis_failed=%d redis_alone_s=%.3f redis_serial_s=%.3f redis_wall_s=%.3f "
      "http_ok=%d http_failed=%d http_alone_s=%.3f http_serial_s=%.3f http_wall_s=%.3f errors=%d\n",
      redis.ok.load(), redis.failed.load(), redis.alone_s, redis.serial_s(redis_fibers), redis.wall_s, web.ok.load(),
      web.failed.load(), web.alone_s, web.serial_s(http_fibers), web.wall_s, errors);
  return errors == 0 ? 0 : 1;
}
