// lionet/app/inherited_listeners.h: listening sockets this process was handed at start instead
// of binding them itself: by systemd socket activation (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES:
// sd_listen_fds(3)'s protocol, fds from 3 on) or by the lionet process it replaces in a binary
// upgrade (LIONET_LISTEN_FDS, LIONET_LISTEN_FDNAMES: the same layout, app/upgrade.h).
//
// Owns: reading those variables (and removing them from the environment, so nothing this
// process starts inherits them), matching each fd to a configured listener, closing the fds no
// listener claimed. Must not: bind, or know what a server does with its socket.
//
// Matching (take()): a server's listen address gets, in this order,
//   1. an unclaimed fd named after the server whose local address is that address;
//   2. an unclaimed fd named after the server (the socket unit decides the address: a
//      FileDescriptorName=web socket on 0.0.0.0:80 serves server 'web' whatever it lists);
//   3. an unclaimed fd, whatever its name, whose local address is that address.
// Only stream sockets are offered (a UDP listener is bound by the server: syslog's UDP
// sockets use SO_REUSEPORT, so a new process binds them next to the old one).
#pragma once

#include <string>
#include <vector>

#include "lionet/net/address.h"

namespace lionet::app {

class InheritedListeners {
 public:
  struct Fd {
    int fd = -1;
    std::string name;  // LISTEN_FDNAMES entry ("" if none)
    std::string address;  // its local address, Address::to_string()
    bool claimed = false;
  };

  // Reads systemd's variables (honoured only when LISTEN_PID is this process), else the
  // upgrade's, and unsets both sets. Empty when neither is there.
  static InheritedListeners from_environment();

  bool empty() const { return fds_.empty(); }
  // "systemd socket activation" or "binary upgrade" (for the log).
  const std::string& source() const { return source_; }
  const std::vector<Fd>& fds() const { return fds_; }
  // The fd for server `server` listening on `address` (rules above), now owned by the caller;
  // -1 when none matches (then the server binds as usual).
  int take(const std::string& server, const Address& address);
  // Closes every fd nothing took; returns one "name address" line per fd closed.
  std::vector<std::string> close_unclaimed();

 private:
  std::string source_;
  std::vector<Fd> fds_;
};
}  // namespace lionet::app
