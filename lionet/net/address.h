// lionet/net/address.h: lionet::Address, one socket address: IPv4, IPv6 or Unix-domain.
//
// Owns: parsing ("1.2.3.4:80", "[::1]:80", ":80" = 0.0.0.0:80, "unix:/path", "unix:@name"
// for the Linux abstract namespace), formatting (the same forms), and name lookup.
// Must not: block a worker thread. lookup() runs getaddrinfo() on the offload pool
// (sync/offload.h) while the calling fiber parks; purely numeric input skips the resolver.
//
// A value type (a sockaddr_storage and its length): cheap to copy, no allocation.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/result.h"

namespace lionet {

// getaddrinfo()'s EAI_* codes (message from gai_strerror): the errors of Address::lookup().
const std::error_category& gai_category() noexcept;

class Address {
 public:
  // An empty address: family() == AF_UNSPEC, length() == 0.
  Address() noexcept;
  // From a kernel-filled sockaddr (accept, getsockname). len <= sizeof(sockaddr_storage).
  Address(const sockaddr* sa, socklen_t len) noexcept;

  static Address ipv4_loopback(uint16_t port) noexcept;  // 127.0.0.1:port
  static Address ipv4_any(uint16_t port) noexcept;  // 0.0.0.0:port
  static Address ipv6_loopback(uint16_t port) noexcept;  // [::1]:port

  // Numeric forms only (no resolver): "a.b.c.d:port", "[v6]:port", ":port", "unix:/path",
  // "unix:@abstract". EINVAL for anything else (a missing or non-numeric port, a port above
  // 65535, a path longer than sun_path).
  static Result<Address> parse(std::string_view text) noexcept;

  // "host:port" or "[host]:port" with a host name (or a numeric form, which returns at once).
  // family: AF_UNSPEC (both), AF_INET or AF_INET6. Stream-socket results, resolver order,
  // duplicates removed. Errors: EINVAL for malformed text, gai_category() codes from
  // getaddrinfo. From a fiber the resolver runs on the offload pool while the fiber parks.
  static Result<std::vector<Address>> lookup(std::string_view host_port, int family = AF_UNSPEC);

  int family() const noexcept { return storage_.ss_family; }
  bool is_ip() const noexcept { return family() == AF_INET || family() == AF_INET6; }
  // 127.0.0.0/8, ::1, ::ffff:127.x.x.x, or a Unix socket: a peer on this host.
  bool is_loopback() const noexcept;
  bool empty() const noexcept { return len_ == 0; }
  // 0 for Unix addresses.
  uint16_t port() const noexcept;
  // No effect on Unix addresses.
  void set_port(uint16_t port) noexcept;

  const sockaddr* sockaddr_ptr() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* sockaddr_ptr() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t length() const noexcept { return len_; }
  static constexpr socklen_t capacity() noexcept { return sizeof(sockaddr_storage); }
  // After the kernel filled sockaddr_ptr() (getsockname etc.).
  void set_length(socklen_t len) noexcept { len_ = len; }

  // The forms parse() accepts; "" for an empty address, "unix:" for an unnamed Unix socket.
  std::string to_string() const;

  friend bool operator==(const Address& a, const Address& b) noexcept;

 private:
  sockaddr_storage storage_;
  socklen_t len_ = 0;
};
}  // namespace lionet
