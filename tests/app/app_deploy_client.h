// tests/app/app_deploy_client.h: the client the deployment tests (socket activation, binary
// upgrade) run across a restart: sequential HTTP/1.1 requests, one connection each
// (Connection: close), counting every connection error (refused, reset, end of stream before a
// whole response) and every answer that is not 200.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "tests/app/app_process.h"

namespace lionet::app::testing {

struct RequestLoop {
  std::atomic<int> done{0};  // requests answered 200
  std::atomic<int> conn_errors{0};  // connect/read/write failed or the response was cut
  std::atomic<int> bad_status{0};
  std::string first_error;

  // One request: true if a whole 200 response came back.
  bool one(int port, const std::string& request) {
    const int s = connect_to(port);
    if (s < 0) return fail("connect: " + std::string(std::strerror(errno)));
    std::size_t off = 0;
    while (off < request.size()) {
      const ssize_t n = ::send(s, request.data() + off, request.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        ::close(s);
        return fail("send: " + std::string(std::strerror(errno)));
      }
      off += static_cast<std::size_t>(n);
    }
    std::string resp;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(s, buf, sizeof buf);
      if (n < 0) {
        ::close(s);
        return fail("read: " + std::string(std::strerror(errno)));
      }
      if (n == 0) break;
      resp.append(buf, static_cast<std::size_t>(n));
    }
    ::close(s);
    const auto head_end = resp.find("\r\n\r\n");
    if (head_end == std::string::npos) return fail("end of stream before a response head");
    if (resp.rfind("HTTP/1.1 200", 0) != 0 && resp.rfind("HTTP/1.1 201", 0) != 0) {
      bad_status.fetch_add(1);
      if (first_error.empty()) first_error = resp.substr(0, resp.find("\r\n"));
      return false;
    }
    // The body must be whole: Content-Length bytes after the head.
    const auto cl = resp.find("Content-Length: ");
    if (cl != std::string::npos && cl < head_end) {
      const std::size_t len = std::stoul(resp.substr(cl + 16));
      if (resp.size() - head_end - 4 < len) return fail("response body cut");
    }
    done.fetch_add(1);
    return true;
  }

 private:
  bool fail(const std::string& why) {
    if (conn_errors.fetch_add(1) == 0) first_error = why;
    return false;
  }
};

inline std::string get_request(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
}
inline std::string post_request(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}
}  // namespace lionet::app::testing
