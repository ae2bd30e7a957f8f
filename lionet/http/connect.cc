// lionet/http/connect.cc: connect_stream (see connect.h).
#include "lionet/http/connect.h"

#include <cerrno>
#include <string>

#include "lionet/http/detail/client_tls.h"
#include "lionet/net/socket.h"
#include "lionet/net/socket_stream.h"

namespace lionet::http {

Result<std::unique_ptr<Stream>> connect_stream(std::span<const Address> addrs, const ConnectOptions& o, int* fd) {
  if (o.tls && !o.tls_context) return errno_error(EPROTONOSUPPORT);
  std::error_code last = errno_error(EHOSTUNREACH);
  for (const Address& a : addrs) {
    auto s = Socket::connect_to(a, Deadline::at(o.connect_deadline));
    if (!s) {
      last = s.error();
      continue;
    }
    const int connected = s->fd();
    if (!o.tls) {
      if (fd) *fd = connected;
      return std::unique_ptr<Stream>(new SocketStream(std::move(*s)));
    }
    auto t = detail::client_tls_stream(o.tls_context, std::move(*s), o.host, o.deadline, o.alpn);
    if (!t) {
      last = t.error();
      continue;
    }
    if (fd) *fd = connected;
    return std::move(*t);
  }
  return last;
}

Result<std::unique_ptr<Stream>> connect_stream(const std::string& host, int port, const ConnectOptions& o, int* fd) {
  if (o.tls && !o.tls_context) return errno_error(EPROTONOSUPPORT);
  // An IPv6 literal comes bracketed from a URL's host or bare from a config: lookup wants [..].
  const bool bare_v6 = host.find(':') != std::string::npos && host.front() != '[';
  auto addrs = Address::lookup((bare_v6 ? "[" + host + "]" : host) + ":" + std::to_string(port));
  if (!addrs) return addrs.error();
  return connect_stream(*addrs, o, fd);
}

}  // namespace lionet::http
