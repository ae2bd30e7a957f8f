// lionet/net/address.cc: Address parsing, formatting and lookup (see address.h).
#include "lionet/net/address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <charconv>
#include <cstring>

#include "lionet/sync/offload.h"

namespace lionet {
namespace {

class GaiCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "getaddrinfo"; }
  std::string message(int ev) const override { return ::gai_strerror(ev); }
};

bool parse_port(std::string_view s, uint16_t* out) noexcept {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

// Splits "host:port" / "[host]:port" / ":port". False if malformed.
bool split_host_port(std::string_view text, std::string_view* host, uint16_t* port) noexcept {
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return false;
    *host = text.substr(1, close - 1);
    return !host->empty() && parse_port(text.substr(close + 2), port);
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  *host = text.substr(0, colon);
  if (host->find(':') != std::string_view::npos) return false;  // bare IPv6 needs brackets
  return parse_port(text.substr(colon + 1), port);
}

// Numeric host only; false if host is not a numeric IPv4/IPv6 address.
bool numeric(std::string_view host, uint16_t port, bool bracketed_ok, Address* out) noexcept {
  char buf[INET6_ADDRSTRLEN + 1];
  if (host.size() >= sizeof buf) return false;
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = '\0';
  sockaddr_storage ss{};
  if (host.empty()) {
    *out = Address::ipv4_any(port);
    return true;
  }
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (::inet_pton(AF_INET, buf, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *out = Address(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in));
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (bracketed_ok && ::inet_pton(AF_INET6, buf, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *out = Address(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in6));
    return true;
  }
  return false;
}
}  // namespace

const std::error_category& gai_category() noexcept {
  static const GaiCategory cat;
  return cat;
}

Address::Address() noexcept { std::memset(&storage_, 0, sizeof storage_); }

Address::Address(const sockaddr* sa, socklen_t len) noexcept : Address() {
  if (len > sizeof storage_) len = sizeof storage_;
  std::memcpy(&storage_, sa, len);
  len_ = len;
}

namespace {
Address ipv4(in_addr_t host_order, uint16_t port) noexcept {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(host_order);
  return Address(reinterpret_cast<sockaddr*>(&a), sizeof a);
}
}  // namespace

Address Address::ipv4_loopback(uint16_t port) noexcept { return ipv4(INADDR_LOOPBACK, port); }

Address Address::ipv4_any(uint16_t port) noexcept { return ipv4(INADDR_ANY, port); }

Address Address::ipv6_loopback(uint16_t port) noexcept {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_loopback;
  return Address(reinterpret_cast<sockaddr*>(&a), sizeof a);
}

Result<Address> Address::parse(std::string_view text) noexcept {
  constexpr std::string_view kUnix = "unix:";
  if (text.substr(0, kUnix.size()) == kUnix) {
    std::string_view path = text.substr(kUnix.size());
    sockaddr_un un{};
    if (path.empty() || path.size() >= sizeof un.sun_path) return Result<Address>::failure(EINVAL);
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, path.data(), path.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    if (path.front() == '@') {
      un.sun_path[0] = '\0';  // abstract namespace: no trailing NUL, length says where it ends
    } else {
      len += 1;  // include the NUL, as the kernel reports it back
    }
    return Address(reinterpret_cast<sockaddr*>(&un), len);
  }
  std::string_view host;
  uint16_t port = 0;
  if (!split_host_port(text, &host, &port)) return Result<Address>::failure(EINVAL);
  Address out;
  bool bracketed = !text.empty() && text.front() == '[';
  if (!numeric(host, port, bracketed, &out)) return Result<Address>::failure(EINVAL);
  return out;
}

Result<std::vector<Address>> Address::lookup(std::string_view host_port, int family) {
  using R = Result<std::vector<Address>>;
  if (auto a = parse(host_port); a.ok()) return std::vector<Address>{*a};
  std::string_view host;
  uint16_t port = 0;
  if (!split_host_port(host_port, &host, &port) || host.empty()) return R::failure(EINVAL);
  std::string host_s(host);
  std::string port_s = std::to_string(port);
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  // getaddrinfo may block for seconds (DNS): off the worker, the fiber parks meanwhile.
  // errno is captured on the pool thread: the fiber's own errno is another thread's.
  int sys_errno = 0;
  int rc = offload([&] {
    int r = ::getaddrinfo(host_s.c_str(), port_s.c_str(), &hints, &res);
    sys_errno = errno;
    return r;
  });
  if (rc == EAI_SYSTEM) return R::failure(sys_errno ? sys_errno : EIO);
  if (rc != 0) return R(std::error_code(rc, gai_category()));
  std::vector<Address> out;
  for (addrinfo* p = res; p; p = p->ai_next) {
    Address a(p->ai_addr, p->ai_addrlen);
    bool dup = false;
    for (const auto& b : out) dup = dup || b == a;
    if (!dup) out.push_back(a);
  }
  ::freeaddrinfo(res);
  if (out.empty()) return R(std::error_code(EAI_NONAME, gai_category()));
  return out;
}

bool Address::is_loopback() const noexcept {
  if (family() == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return family() == AF_UNIX;
}

uint16_t Address::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void Address::set_port(uint16_t port) noexcept {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string Address::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  switch (family()) {
    case AF_INET: {
      auto* a = reinterpret_cast<const sockaddr_in*>(&storage_);
      ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
      return std::string(buf) + ":" + std::to_string(port());
    }
    case AF_INET6: {
      auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
      ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
      std::string out = "[";  // built by appends: GCC 12 warns (-Wrestrict) on "[" + string
      out += buf;
      out += "]:";
      out += std::to_string(port());
      return out;
    }
    case AF_UNIX: {
      auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
      size_t off = offsetof(sockaddr_un, sun_path);
      if (len_ <= off) return "unix:";
      size_t n = len_ - off;
      std::string out = "unix:";
      if (un->sun_path[0] == '\0') {
        out += '@';
        out.append(un->sun_path + 1, n - 1);
      } else {
        out.append(un->sun_path, ::strnlen(un->sun_path, n));
      }
      return out;
    }
    default: return "";
  }
}

bool operator==(const Address& a, const Address& b) noexcept {
  return a.len_ == b.len_ && std::memcmp(&a.storage_, &b.storage_, a.len_) == 0;
}
}  // namespace lionet
