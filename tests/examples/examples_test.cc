// tests/examples/examples_test.cc: every program in examples/ run as a user runs it: as a child
// process, checking what it prints, its exit status and, for servers, talking to it over
// 127.0.0.1.
//
// The binaries are looked up in <build>/examples/ (this test binary lives in <build>/tests/);
// TEST_EXAMPLES_DIR overrides. When one is missing (LIONET_BUILD_EXAMPLES=OFF, as in the ASan
// preset, or blocking_clients left out for lack of hiredis/libcurl) its tests are skipped with
// a message saying so. Every child runs under a deadline and is killed (SIGKILL) if a test
// fails or times out; waits are on events (output lines, a pidfd), never on sleeps.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../common/sanitizers.h"
#include "../hook/third_party_util.h"

extern char** environ;

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

fs::path examples_dir() {
  if (const char* env = std::getenv("TEST_EXAMPLES_DIR")) return env;
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "examples";
}

// The example's path, or empty if it was not built.
fs::path example(const std::string& name) {
  fs::path p = examples_dir() / name;
  return fs::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0 ? p : fs::path();
}

#define REQUIRE_EXAMPLE(var, name)                                                                         \
  const fs::path var = example(name);                                                                      \
  if (var.empty()) {                                                                                       \
    GTEST_SKIP() << "example '" << name << "' is not built in " << examples_dir()                          \
                 << " (LIONET_BUILD_EXAMPLES=OFF, e.g. the ASan preset, or its dependencies are missing)"; \
  }

// A running example with stdout and stderr on one pipe. Every wait takes the test's deadline;
// the destructor SIGKILLs a child that is still running, so a failing test leaves nothing.
class Child {
 public:
  Child(const fs::path& binary, std::vector<std::string> args, Clock::duration budget)
      : deadline_(Clock::now() + budget) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    out_ = fds[0];
    if (pid_ > 0) pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (pidfd_ >= 0) ::close(pidfd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  void signal(int sig) { ::kill(pid_, sig); }
  const std::string& output() const { return output_; }

  // The first complete line (searching from the last line returned) that contains `needle`;
  // nullopt at end of output or at the deadline.
  std::optional<std::string> line_with(const std::string& needle) {
    for (;;) {
      size_t nl;
      while ((nl = output_.find('\n', scanned_)) != std::string::npos) {
        std::string line = output_.substr(scanned_, nl - scanned_);
        scanned_ = nl + 1;
        if (line.find(needle) != std::string::npos) return line;
      }
      if (!read_more()) return std::nullopt;
    }
  }

  // Reads the rest of the output and reaps the child. The exit status, or nullopt if it was
  // killed by a signal or was still running at the deadline (then it is killed).
  std::optional<int> wait_exit() {
    while (read_more()) {
    }
    int status = 0;
    if (pidfd_ >= 0) {  // the pidfd becomes readable when the child exits
      pollfd p{pidfd_, POLLIN, 0};
      if (::poll(&p, 1, remaining_ms()) != 1) return std::nullopt;
      ::waitpid(pid_, &status, 0);
    } else {  // no pidfd_open (old kernel): poll the child in small steps, still bounded
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (remaining_ms() == 0) return std::nullopt;
        ::usleep(5000);
      }
    }
    pid_ = -1;
    if (!WIFEXITED(status)) return std::nullopt;
    return WEXITSTATUS(status);
  }

 private:
  int remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
  }
  // One read of available output, waiting until the deadline. False at EOF or timeout.
  bool read_more() {
    if (out_ < 0) return false;
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return false;
    char buf[4096];
    ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return false;
    output_.append(buf, static_cast<size_t>(n));
    return true;
  }

  Clock::time_point deadline_;
  pid_t pid_ = -1;
  int out_ = -1;
  int pidfd_ = -1;
  std::string output_;
  size_t scanned_ = 0;
};

// key=value fields of a line (as in "result: processed=5 status=ok" or a RESULT line).
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> f;
  size_t pos = 0;
  while (pos < line.size()) {
    size_t end = line.find(' ', pos);
    if (end == std::string::npos) end = line.size();
    std::string word = line.substr(pos, end - pos);
    if (size_t eq = word.find('='); eq != std::string::npos) f[word.substr(0, eq)] = word.substr(eq + 1);
    pos = end + 1;
  }
  return f;
}

unsigned long long sum_of_squares(unsigned long long k) {
  unsigned long long s = 0;
  for (unsigned long long i = 1; i <= k; ++i) s += i * i;
  return s;
}

// A blocking client socket to 127.0.0.1:port with 5 s send/receive timeouts (plain kernel
// calls: this test binary does not run fibers).
int connect_local(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string recv_exactly(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, out.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

// One HTTP/1.1 request with Connection: close over a fresh connection; the whole response
// (head and body) as the server sent it, "" if the connection failed.
std::string http_exchange(uint16_t port, const std::string& method, const std::string& target,
                          const std::string& body = "") {
  int fd = connect_local(port);
  if (fd < 0) return "";
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  std::string out;
  if (send_all(fd, req)) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int status_of(const std::string& response) {
  return response.size() > 12 && response.compare(0, 9, "HTTP/1.1 ") == 0 ? std::atoi(response.c_str() + 9) : 0;
}
std::string body_of(const std::string& response) {
  size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}
// True if the head has the header line "Name: value" (name case-insensitive, value exact).
bool has_header(const std::string& response, const std::string& name, const std::string& value) {
  std::string head = response.substr(0, response.find("\r\n\r\n"));
  for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string want = "\r\n" + name + ": ";
  for (char& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  size_t p = head.find(want);
  if (p == std::string::npos) return false;
  std::string original = response.substr(p + want.size(), value.size());
  return original == value;
}

// ---------------------------------------------------------------------------------------------

TEST(HelloFibers, PrintsWhatHappensAndExitsZero) {
  REQUIRE_EXAMPLE(bin, "hello_fibers");
  Child c(bin, {}, 20s);
  ASSERT_TRUE(c.started());
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
  EXPECT_NE(c.output().find("the answer is 42"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("caught from a fiber: boom"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("10 of 10 sleepers"), std::string::npos) << c.output();
  // The exception reached join(): not a warning, and no "()" for a fiber without a name.
  EXPECT_EQ(c.output().find("[warning]"), std::string::npos) << c.output();
  EXPECT_EQ(c.output().find(" ()"), std::string::npos) << c.output();
}

// The examples' default ports are not the ones `make run` (the shipped conf/) holds, so the two
// READMEs followed in order do not end in "Address already in use".
TEST(Examples, DefaultPortsAreNotTheShippedConfsPorts) {
  std::ifstream conf(std::string(LIONET_SOURCE_DIR) + "/conf/server.yml");
  const std::string yml((std::istreambuf_iterator<char>(conf)), {});
  for (const char* ex : {"http_hello.cc", "static_server.cc", "echo_server.cc", "reverse_proxy.cc"}) {
    std::ifstream src(std::string(LIONET_SOURCE_DIR) + "/examples/" + ex);
    const std::string code((std::istreambuf_iterator<char>(src)), {});
    const auto at = code.find("std::atoi(argv[");
    ASSERT_NE(at, std::string::npos) << ex;
    const auto colon = code.find(": ", at);
    const int port = std::atoi(code.c_str() + colon + 1);
    ASSERT_GT(port, 0) << ex;
    const std::string p = "127.0.0.1:" + std::to_string(port);
    EXPECT_TRUE(yml.find(p + "\"") == std::string::npos && yml.find(p + "'") == std::string::npos)
        << ex << " defaults to port " << port << ", which the shipped conf/ listens on";
  }
}

TEST(EchoServer, EchoesEveryConnectionAndExitsZeroOnSigterm) {
  REQUIRE_EXAMPLE(bin, "echo_server");
  Child c(bin, {"0"}, 30s);  // port 0: an ephemeral port, printed on the first line
  ASSERT_TRUE(c.started());
  auto line = c.line_with("echo server on 127.0.0.1:");
  ASSERT_TRUE(line) << "no start-up line: " << c.output();
  const int port = std::atoi(line->substr(line->find("127.0.0.1:") + 10).c_str());
  ASSERT_GT(port, 0) << *line;

  // Three connections at once, interleaved: each must get back exactly its own bytes.
  constexpr int kConns = 3;
  int fds[kConns];
  for (int& fd : fds) {
    fd = connect_local(static_cast<uint16_t>(port));
    ASSERT_GE(fd, 0) << "connect to 127.0.0.1:" << port;
  }
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < kConns; ++i) {
      std::string msg(3000 + round * 100, static_cast<char>('a' + i));
      msg += "|conn" + std::to_string(i) + "round" + std::to_string(round);
      ASSERT_TRUE(send_all(fds[i], msg));
      ASSERT_EQ(recv_exactly(fds[i], msg.size()), msg) << "connection " << i << " round " << round;
    }
  }
  for (int i = 1; i < kConns; ++i) ::close(fds[i]);

  // SIGTERM with one idle connection still open: the server stops accepting, ends the idle
  // connection (the client reads end of stream) and exits 0 well within its 2 s drain.
  const auto t0 = Clock::now();
  c.signal(SIGTERM);
  char byte;
  EXPECT_EQ(::recv(fds[0], &byte, 1, 0), 0) << "the open connection was not closed by the shutdown";
  ::close(fds[0]);
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_LT(connect_local(static_cast<uint16_t>(port)), 0) << "still accepting after exit";
}

struct PipelineCase {
  int items, workers, threads;
};
class ChannelPipeline : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(ChannelPipeline, EveryItemArrivesExactlyOnce) {
  REQUIRE_EXAMPLE(bin, "channel_pipeline");
  const PipelineCase p = GetParam();
  Child c(bin, {std::to_string(p.items), std::to_string(p.workers), "0", std::to_string(p.threads)}, 30s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("result:");
  ASSERT_TRUE(line) << c.output();
  auto f = fields(*line);
  EXPECT_EQ(f["processed"], std::to_string(p.items)) << *line;
  EXPECT_EQ(f["sum_of_squares"], std::to_string(sum_of_squares(p.items))) << *line;
  EXPECT_EQ(f["status"], "ok") << *line;
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
}

INSTANTIATE_TEST_SUITE_P(Shapes, ChannelPipeline,
                         ::testing::Values(PipelineCase{50000, 7, 2}, PipelineCase{20000, 1, 1},
                                           PipelineCase{3000, 200, 2}, PipelineCase{1, 4, 2}, PipelineCase{0, 3, 1}));

// Each item takes a worker 1 ms (a fiber sleep), so 2,000,000 items would take 500 s: SIGTERM
// after the first progress report must stop the producer, let the sent items through, and
// exit 0 with a checksum that matches the number processed.
TEST(ChannelPipelineSignal, SigtermStopsEarlyWithAConsistentChecksum) {
  REQUIRE_EXAMPLE(bin, "channel_pipeline");
  Child c(bin, {"2000000", "16", "1000", "2"}, 30s);
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(c.line_with("progress:")) << c.output();
  const auto t0 = Clock::now();
  c.signal(SIGTERM);
  auto line = c.line_with("result:");
  ASSERT_TRUE(line) << c.output();
  auto f = fields(*line);
  const unsigned long long k = std::strtoull(f["processed"].c_str(), nullptr, 10);
  EXPECT_GT(k, 0u) << *line;
  EXPECT_LT(k, 2000000u) << *line;
  EXPECT_EQ(f["sum_of_squares"], std::to_string(sum_of_squares(k))) << *line;
  EXPECT_EQ(f["status"], "stopped") << *line;
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
  EXPECT_LT(Clock::now() - t0, 5s);
}

TEST(ChannelPipelineArgs, RejectsOutOfRangeArguments) {
  REQUIRE_EXAMPLE(bin, "channel_pipeline");
  for (std::vector<std::string> args : {std::vector<std::string>{"-1"}, {"10", "0"}, {"3000000"}}) {
    Child c(bin, args, 10s);
    ASSERT_TRUE(c.started());
    EXPECT_EQ(c.wait_exit(), 2) << args[0] << ": " << c.output();
    EXPECT_NE(c.output().find("usage:"), std::string::npos) << c.output();
  }
}

// 100 hiredis fibers (PING + BLPOP 0.2 s) and 50 libcurl fibers (GET held 0.2 s) on ONE worker
// thread: every call succeeds, one call alone really takes the 0.2 s, and the batches take far
// less than the calls one after another (not a tight timing bound: under 50%; ~1% is typical).
TEST(BlockingClients, ManyBlockingCallsOverlapOnOneWorker) {
  REQUIRE_EXAMPLE(bin, "blocking_clients");
  if (::access("/usr/bin/redis-server", X_OK) != 0 && std::system("command -v redis-server >/dev/null") != 0) {
    FAIL() << "redis-server is not installed: run scripts/install-deps.sh";
  }
  Child c(bin, {"100", "50"}, 60s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("RESULT ");
  ASSERT_TRUE(line) << c.output();
  auto f = fields(*line);
  EXPECT_EQ(f["redis_ok"], "100") << *line;
  EXPECT_EQ(f["http_ok"], "50") << *line;
  EXPECT_EQ(f["errors"], "0") << *line;
  for (const char* lib : {"redis", "http"}) {
    const double alone = std::atof(f[std::string(lib) + "_alone_s"].c_str());
    const double serial = std::atof(f[std::string(lib) + "_serial_s"].c_str());
    const double wall = std::atof(f[std::string(lib) + "_wall_s"].c_str());
    EXPECT_GE(alone, 0.19) << lib << ": a call alone did not wait for its server: " << *line;
    EXPECT_GE(wall, 0.19) << lib << ": the batch did not wait for its server: " << *line;
    EXPECT_LT(wall, 0.5 * serial) << lib << ": the calls did not overlap: " << *line;
  }
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
}

// A redis port given on the command line is used as is; when nothing answers there the program
// says so in one line and exits 2 (a setup failure), without running any fiber.
TEST(BlockingClients, NamesTheGivenPortWhenNothingAnswers) {
  REQUIRE_EXAMPLE(bin, "blocking_clients");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // a bound port nobody listens on
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string port = std::to_string(ntohs(a.sin_port));
  Child c(bin, {"5", "0", port}, 15s);
  ASSERT_TRUE(c.started());
  EXPECT_EQ(c.wait_exit(), 2) << c.output();
  EXPECT_NE(c.output().find("nothing answers on 127.0.0.1:" + port), std::string::npos) << c.output();
  EXPECT_EQ(c.output().find("RESULT"), std::string::npos) << c.output();
  ::close(fd);
}

// The router's handlers over real connections, then graceful stop on SIGTERM. One worker
// thread: the ten /slow requests overlap because each parks only its fiber.
TEST(HttpHello, RoutesAnswerAndSlowHandlersOverlapOnOneThread) {
  REQUIRE_EXAMPLE(bin, "http_hello");
  Child c(bin, {"0", "1"}, 30s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("http_hello on http://127.0.0.1:");
  ASSERT_TRUE(line) << c.output();
  const uint16_t port = static_cast<uint16_t>(std::atoi(line->substr(line->find("127.0.0.1:") + 10).c_str()));
  ASSERT_GT(port, 0) << *line;

  std::string r = http_exchange(port, "GET", "/hello");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "hello world\n") << r;
  EXPECT_TRUE(has_header(r, "X-Example", "http_hello")) << r;  // the after middleware

  r = http_exchange(port, "GET", "/hello/Ada%20Lovelace");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "hello, Ada Lovelace\n") << r;

  const std::string payload = std::string(100000, 'x') + "end";
  r = http_exchange(port, "POST", "/echo", payload);
  EXPECT_EQ(status_of(r), 200) << r.substr(0, 200);
  EXPECT_EQ(body_of(r), payload);
  EXPECT_TRUE(has_header(r, "X-Body-Bytes", std::to_string(payload.size()))) << r.substr(0, 300);

  r = http_exchange(port, "GET", "/nowhere");
  EXPECT_EQ(status_of(r), 404) << r;
  EXPECT_TRUE(has_header(r, "X-Example", "http_hello")) << r;
  r = http_exchange(port, "POST", "/hello");
  EXPECT_EQ(status_of(r), 405) << r;
  EXPECT_TRUE(has_header(r, "Allow", "GET")) << r;
  EXPECT_EQ(status_of(http_exchange(port, "GET", "/slow?ms=abc")), 400);

  constexpr int kSlow = 10;
  std::vector<std::thread> clients;
  std::vector<std::string> answers(kSlow);
  const auto t0 = Clock::now();
  for (int i = 0; i < kSlow; ++i) {
    clients.emplace_back([&, i] { answers[i] = http_exchange(port, "GET", "/slow?ms=300"); });
  }
  for (auto& t : clients) t.join();
  const auto took = Clock::now() - t0;
  for (const auto& a : answers) EXPECT_EQ(body_of(a), "waited 300 ms\n") << a;
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 1500ms) << "10 x 300 ms handlers did not overlap on one thread";

  r = http_exchange(port, "GET", "/stats");
  // Counted: /hello, /hello/{name}, /echo, the 400 /slow and the ten slow ones (404/405 never
  // reach a handler).
  EXPECT_EQ(body_of(r), "handled " + std::to_string(4 + kSlow) + " requests\n") << r;

  c.signal(SIGTERM);
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
  EXPECT_NE(c.output().find("stopped (all requests finished)"), std::string::npos) << c.output();
}

// SIGTERM while a slow request is in flight: the server stops accepting but the request still
// gets its full answer, then the program exits 0.
TEST(HttpHello, SigtermLetsTheRequestInFlightFinish) {
  REQUIRE_EXAMPLE(bin, "http_hello");
  Child c(bin, {"0", "2"}, 30s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("http_hello on http://127.0.0.1:");
  ASSERT_TRUE(line) << c.output();
  const uint16_t port = static_cast<uint16_t>(std::atoi(line->substr(line->find("127.0.0.1:") + 10).c_str()));
  int fd = connect_local(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /slow?ms=500 HTTP/1.1\r\nHost: x\r\n\r\n"));
  // The request has reached its handler once /stats counts it (the /stats handler itself does
  // not count): an event to wait for, bounded by the test's deadline.
  const auto give_up = Clock::now() + 10s;
  while (body_of(http_exchange(port, "GET", "/stats")) != "handled 1 requests\n") {
    ASSERT_LT(Clock::now(), give_up) << "the slow request never reached its handler";
  }
  c.signal(SIGTERM);
  std::string r;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) r.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "waited 500 ms\n") << r;
  EXPECT_TRUE(has_header(r, "Connection", "close")) << r;
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
}

// The library proxy in front of its two in-process applications: weighted round robin (B twice
// as often as A), X-Forwarded-For added, a slow upstream answered 504 by read_timeout while the
// proxy keeps serving, its own route beside it, and the per-upstream figures at exit.
TEST(ReverseProxy, BalancesAddsForwardedForAndTimesOut) {
  REQUIRE_EXAMPLE(bin, "reverse_proxy");
  Child c(bin, {"0"}, 30s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("reverse_proxy on http://127.0.0.1:");
  ASSERT_TRUE(line) << c.output();
  const uint16_t port = static_cast<uint16_t>(std::atoi(line->substr(line->find("127.0.0.1:") + 10).c_str()));
  ASSERT_GT(port, 0) << *line;
  int a = 0, b = 0;
  for (int i = 0; i < 30; ++i) {
    std::string r = http_exchange(port, "GET", "/app/whoami");
    ASSERT_EQ(status_of(r), 200) << r;
    const std::string body = body_of(r);
    EXPECT_NE(body.find("X-Forwarded-For: 127.0.0.1"), std::string::npos) << body;
    a += body.starts_with("app A");
    b += body.starts_with("app B");
  }
  EXPECT_EQ(a, 10);
  EXPECT_EQ(b, 20);
  const auto t0 = Clock::now();
  std::string r = http_exchange(port, "GET", "/app/slow");
  const auto took = Clock::now() - t0;
  EXPECT_EQ(status_of(r), 504) << r;
  EXPECT_GE(took, 800ms);
  EXPECT_LT(took, 2500ms);
  r = http_exchange(port, "GET", "/local");
  EXPECT_EQ(body_of(r), "served by the proxy itself\n") << r;
  c.signal(SIGTERM);
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
  // One upstream timed out once (and was marked down: the other served /local's neighbours).
  EXPECT_NE(c.output().find("requests, 1 failures"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("requests, 0 failures"), std::string::npos) << c.output();
}

// Two runs on one directory: the second recovers the first's records and continues after them;
// every record each run appended is read back in its writer's order; the temporary-directory
// mode cleans up after itself.
TEST(LogStore, AppendsReadsBackAndContinuesAfterARestart) {
  REQUIRE_EXAMPLE(bin, "log_store");
  char tmpl[] = "/tmp/lionet-examples-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct Cleanup {
    std::string d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{dir};

  for (int run = 0; run < 2; ++run) {
    Child c(bin, {dir, "600", "5"}, 60s);
    ASSERT_TRUE(c.started());
    auto line = c.line_with("result:");
    ASSERT_TRUE(line) << c.output();
    auto f = fields(*line);
    EXPECT_EQ(f["start"], std::to_string(600 * run)) << *line;
    EXPECT_EQ(f["end"], std::to_string(600 * (run + 1))) << *line;
    EXPECT_EQ(f["read_back"], "600") << *line;
    EXPECT_EQ(f["reopened_end"], std::to_string(600 * (run + 1))) << *line;
    EXPECT_EQ(f["status"], "ok") << *line;
    EXPECT_EQ(c.wait_exit(), 0) << c.output();
  }
  EXPECT_TRUE(fs::exists(fs::path(dir) / "events-0" / "00000000000000000000.log"));
  int logs = 0;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "events-0")) logs += e.path().extension() == ".log";
  EXPECT_GT(logs, 1) << "16 KiB segments should have rolled";

  Child t(bin, {"", "200", "2"}, 60s);  // "" = a temporary directory, removed at the end
  ASSERT_TRUE(t.started());
  auto where = t.line_with("data in ");
  ASSERT_TRUE(where) << t.output();
  const std::string tmp = where->substr(8, where->find(" (temporary)") - 8);
  EXPECT_EQ(t.wait_exit(), 0) << t.output();
  EXPECT_NE(t.output().find("status=ok"), std::string::npos) << t.output();
  EXPECT_FALSE(fs::exists(tmp)) << tmp;
}

// The body of a response in Transfer-Encoding: chunked, decoded ("" on a framing error).
std::string dechunk(const std::string& body) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) return "";
    const size_t n = std::strtoul(body.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (n == 0) return out;
    if (eol + 2 + n + 2 > body.size()) return "";
    out.append(body, eol + 2, n);
    pos = eol + 2 + n + 2;
  }
}

// Files of 100 B, 20 KB and 300 KB under each of the four mode prefixes: every body arrives
// intact, framed as the mode says (AUTO: memory / chunk / sendfile by size); a second MEMORY
// hit is served from the cache; Range gives 206; a path leaving the root is 404; SIGTERM exit 0.
TEST(StaticServer, EveryModeServesEveryFileIntact) {
  REQUIRE_EXAMPLE(bin, "static_server");
  char tmpl[] = "/tmp/lionet-examples-static-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  struct Cleanup {
    std::string d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{tmpl};
  const fs::path root = fs::path(tmpl) / "www";
  fs::create_directories(root);
  std::map<std::string, std::string> content;
  for (auto [name, size] :
       {std::pair<const char*, size_t>{"small.txt", 100}, {"mid.bin", 20000}, {"big.bin", 300000}}) {
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
    FILE* f = std::fopen((root / name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
    content[name] = data;
  }
  {
    FILE* f = std::fopen((fs::path(tmpl) / "secret.txt").c_str(), "wb");
    std::fputs("secret", f);
    std::fclose(f);
  }

  Child c(bin, {root.string(), "0"}, 30s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("static_server on http://127.0.0.1:");
  ASSERT_TRUE(line) << c.output();
  const uint16_t port = static_cast<uint16_t>(std::atoi(line->substr(line->find("127.0.0.1:") + 10).c_str()));
  ASSERT_GT(port, 0) << *line;

  struct Expect {
    const char* prefix;
    bool chunked[3];  // small, mid, big
  };
  const char* names[3] = {"small.txt", "mid.bin", "big.bin"};
  for (const Expect& e : {Expect{"/memory/", {false, false, false}}, Expect{"/chunk/", {true, true, true}},
                          Expect{"/sendfile/", {false, false, false}}, Expect{"/auto/", {false, true, false}}}) {
    for (int i = 0; i < 3; ++i) {
      const std::string target = std::string(e.prefix) + names[i];
      std::string r = http_exchange(port, "GET", target);
      ASSERT_EQ(status_of(r), 200) << target << "\n" << r.substr(0, 300);
      const bool chunked = has_header(r, "Transfer-Encoding", "chunked");
      EXPECT_EQ(chunked, e.chunked[i]) << target << "\n" << r.substr(0, 300);
      if (!chunked) {
        EXPECT_TRUE(has_header(r, "Content-Length", std::to_string(content[names[i]].size()))) << target;
      }
      EXPECT_TRUE(chunked ? dechunk(body_of(r)) == content[names[i]] : body_of(r) == content[names[i]])
          << target << ": body differs";
    }
  }
  EXPECT_EQ(body_of(http_exchange(port, "GET", "/memory/small.txt")), content["small.txt"]);
  std::string st = body_of(http_exchange(port, "GET", "/stats"));
  EXPECT_NE(st.find("/memory: memory_hits=1 "), std::string::npos) << st;

  int fd = connect_local(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(
      send_all(fd, "GET /sendfile/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-1099\r\nConnection: close\r\n\r\n"));
  std::string r;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) r.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(status_of(r), 206) << r.substr(0, 300);
  EXPECT_EQ(body_of(r), content["big.bin"].substr(1000, 100));

  for (const char* evil : {"/memory/../secret.txt", "/chunk/%2e%2e/secret.txt", "/auto/..%2fsecret.txt"}) {
    std::string a = http_exchange(port, "GET", evil);
    EXPECT_EQ(status_of(a), 404) << evil << "\n" << a.substr(0, 300);
    EXPECT_EQ(a.find("secret\n"), std::string::npos);
    EXPECT_EQ(body_of(a).find("secret"), std::string::npos) << evil;
  }

  c.signal(SIGTERM);
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
}

TEST(StaticServer, AMissingRootIsOneClearLineAndExit1) {
  REQUIRE_EXAMPLE(bin, "static_server");
  Child c(bin, {"/nonexistent/lionet-static-root", "0"}, 15s);
  ASSERT_TRUE(c.started());
  EXPECT_EQ(c.wait_exit(), 1) << c.output();
  EXPECT_NE(c.output().find("/nonexistent/lionet-static-root"), std::string::npos) << c.output();
}

// A port already taken: one line naming the address, exit 1, no hang on the way out.
TEST(HttpHello, APortInUseIsOneClearLineAndExit1) {
  REQUIRE_EXAMPLE(bin, "http_hello");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string port = std::to_string(ntohs(a.sin_port));
  Child c(bin, {port, "1"}, 15s);
  ASSERT_TRUE(c.started());
  EXPECT_EQ(c.wait_exit(), 1) << c.output();
  EXPECT_NE(c.output().find("127.0.0.1:" + port), std::string::npos) << c.output();
  ::close(fd);
}

}  // namespace

// examples/deadlines.cc against a PostgreSQL server of the test's own: a quick query answers 200;
// a 10 s pg_sleep under the route's 1 s timeout answers 504 in 1-1.5 s and, with PQcancel wired
// through on_cancel, the query is gone from pg_stat_activity within 1 s of that answer; a curl
// that gives up after 0.2 s ends its handler within 100 ms and its query within 1 s.
TEST(Deadlines, SlowQueryAnswers504AndIsCancelledOnTheServerAndWhenTheClientLeaves) {
  REQUIRE_EXAMPLE(bin, "deadlines");
  lionet::hook_test::LibPq pq;
  ASSERT_TRUE(pq.load()) << "libpq not found (libpq5): run scripts/install-deps.sh";
  lionet::hook_test::PostgresServer pg(pq, 50);
  ASSERT_TRUE(pg.error().empty()) << pg.error();
  Child c(bin, {"0", pg.conninfo()}, 60s);
  ASSERT_TRUE(c.started());
  auto line = c.line_with("deadlines on http://127.0.0.1:");
  ASSERT_TRUE(line) << c.output();
  const uint16_t port = static_cast<uint16_t>(std::atoi(line->substr(line->find("127.0.0.1:") + 10).c_str()));
  std::string r = http_exchange(port, "GET", "/sleep?seconds=0.1");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "slept 0.1 s\n") << r;
  const auto t0 = Clock::now();
  r = http_exchange(port, "GET", "/sleep?seconds=10");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(status_of(r), 504) << r;
  EXPECT_GE(s, 0.99);
  EXPECT_LT(s, 1.5 * lionet::test::kSlowdown);
  // The query is stopped on the server, not only abandoned by the client: how many
  // pg_sleep(10) queries run there once none does or `give_up` passes (-1: the check failed).
  auto sleeps_running_by = [&](Clock::time_point give_up) {
    void* probe = pq.connectdb(pg.conninfo().c_str());
    int active = -1;
    if (pq.status(probe) == lionet::hook_test::kConnectionOk) {
      do {
        void* res = pq.exec(probe,
                            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(10%' AND "
                            "state = 'active' AND pid <> pg_backend_pid()");
        active = res && pq.result_status(res) == lionet::hook_test::kTuplesOk ? std::atoi(pq.getvalue(res, 0, 0)) : -1;
        if (res) pq.clear(res);
        if (active != 0) std::this_thread::sleep_for(20ms);
      } while (active != 0 && Clock::now() < give_up);
    }
    pq.finish(probe);
    return active;
  };
  EXPECT_EQ(sleeps_running_by(Clock::now() + 1s), 0) << "pg_sleep(10) still running on the server 1 s after the 504";

  // curl gives up after 0.2 s while the query runs: its hang-up cancels the handler
  // (cancel_on_disconnect), whose PQexec fails at once; /stats counts it as it ends.
  const std::string curl =
      "curl -s -o /dev/null --max-time 0.2 'http://127.0.0.1:" + std::to_string(port) + "/sleep?seconds=10'";
  EXPECT_NE(std::system(curl.c_str()), 0) << "curl should have timed out";
  const auto hung_up = Clock::now();
  std::string stats;
  do {
    stats = body_of(http_exchange(port, "GET", "/stats"));
    if (stats != "completed 1 failed 2\n") std::this_thread::sleep_for(5ms);
  } while (stats != "completed 1 failed 2\n" && Clock::now() < hung_up + 2s);
  const double ended_ms = std::chrono::duration<double, std::milli>(Clock::now() - hung_up).count();
  EXPECT_EQ(stats, "completed 1 failed 2\n");
  EXPECT_LT(ended_ms, 100.0 * lionet::test::kSlowdown) << "the handler ran on after its client left";
  EXPECT_EQ(sleeps_running_by(hung_up + 1s), 0) << "pg_sleep(10) still running on the server 1 s after curl hung up";

  c.signal(SIGTERM);
  EXPECT_EQ(c.wait_exit(), 0) << c.output();
  EXPECT_NE(c.output().find("completed 1 failed 2"), std::string::npos) << c.output();
}
