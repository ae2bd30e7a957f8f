// Test helpers for tests/kafka: a Store and a kafka::Server on 127.0.0.1 (ephemeral port) on a
// two-worker Scheduler, and a raw-socket client that writes request frames with the layer's own
// Writer and reads response frames (plain blocking sockets on the test thread, 10 s timeouts).
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/server.h"
#include "lionet/storage/store.h"

namespace lionet::kafka::testing {

class KafkaFixture {
 public:
  explicit KafkaFixture(storage::FlushPolicy policy = storage::FlushPolicy::kNone, ServerOptions options = {})
      : policy_(policy), options_(std::move(options)) {
    char tmpl[] = "/var/tmp/lionet-kafka-test-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    sched_ = std::make_unique<Scheduler>(SchedulerOptions{.threads = 2, .name = "kafkat"});
    open();
  }
  ~KafkaFixture() {
    close();
    sched_->stop();
    sched_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Stops the server and closes the store (a restart keeps the data directory).
  void close() {
    if (server_) server_->stop(std::chrono::seconds(2));
    server_.reset();
    store_.reset();
  }
  // With the constructor's ServerOptions.
  void open() { open(options_); }
  void open(ServerOptions o) {
    storage::StoreOptions so;
    so.data_dir = dir_ + "/data";
    so.log.flush_policy = policy_;
    store_ = storage::Store::open(so).value();
    server_ = std::make_unique<Server>(*sched_, *store_, o);
    server_->listen(Address::parse("127.0.0.1:0").value());
    server_->start();
    port_ = server_->addresses().front().port();
  }
  int port() const { return port_; }
  storage::Store& store() { return *store_; }
  Server& server() { return *server_; }
  const std::string& dir() const { return dir_; }

 private:
  storage::FlushPolicy policy_;
  ServerOptions options_;
  std::string dir_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect");
  }
  ~RawClient() { ::close(fd_); }
  // Sends one request (header v1); returns its correlation id.
  int32_t send(int16_t api, int16_t version, const std::function<void(Writer&)>& body) {
    std::string f;
    Writer w(f);
    const std::size_t at = w.reserve_i32();
    w.i16(api);
    w.i16(version);
    w.i32(++corr_);
    w.nullable_string(std::string_view("raw-test"));
    if (body) body(w);
    w.patch_i32(at, static_cast<int32_t>(f.size() - 4));
    send_raw(f);
    return corr_;
  }
  void send_raw(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + off, bytes.size() - off);
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }
  // One response frame (without its size prefix); "" at end of stream or timeout.
  std::string recv() {
    char sz[4];
    if (!read_n(sz, 4)) return {};
    Reader r(std::string_view(sz, 4));
    std::string body(static_cast<std::size_t>(r.i32()), '\0');
    if (!read_n(body.data(), body.size())) return {};
    return body;
  }
  // True when the server closed the connection within the timeout: end of stream, or a reset
  // (a close with unread request bytes in its receive buffer sends RST).
  bool closed_by_server() {
    char c;
    const ssize_t n = ::read(fd_, &c, 1);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  int fd() const { return fd_; }

 private:
  bool read_n(char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t k = ::read(fd_, p, n);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }
  int fd_ = -1;
  int32_t corr_ = 0;
};

// Whether a shell command (a tool's version probe: "kcat -V") runs and exits 0.
inline bool have(const std::string& probe) { return ::system((probe + " >/dev/null 2>&1").c_str()) == 0; }

// Creates `topic` in the store (fails the test if it cannot).
inline void create(storage::Store& s, const std::string& topic, uint32_t partitions = 1) {
  storage::TopicOptions to;
  to.name = topic;
  to.partitions = partitions;
  ASSERT_TRUE(s.create_topic(to));
}

}  // namespace lionet::kafka::testing
