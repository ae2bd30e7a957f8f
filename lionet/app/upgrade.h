// lionet/app/upgrade.h: zero-downtime binary upgrade without a service manager (nginx's
// SIGUSR2): the running process starts the binary at its own path (which a package upgrade has
// renamed a new version over) with its listening sockets, and the new process takes over.
//
// Owns: starting the new process, the handover protocol over a socketpair between the two, and
// its failure cases. Must not: stop servers itself (main.cc passes what "hand over" means), or
// run anywhere but the signal thread (the old side) and main() (the new side).
//
// The handover, numbered as it runs:
//   1. Old (SIGUSR2): socketpair; posix_spawn(<exe resolved at start>, <same argv>) with the
//      listening sockets at fds 3.. (LIONET_LISTEN_FDS=n, LIONET_LISTEN_FDNAMES=server names,
//      read by app/inherited_listeners.h exactly as systemd's LISTEN_FDS) and its end of the
//      socketpair at LIONET_UPGRADE_FD. The old process keeps accepting.
//   2. New: loads and checks the configuration (a bad one exits: the old one sees end of
//      stream and keeps serving, nothing changed).
//   3. New, if it has a storage to open: sends "RELEASE" and waits. The store is one writer's
//      (two processes appending to one segment would interleave), so the old process hands over
//      now: it stops accepting without shutting the shared listening sockets down (connections
//      that arrive meanwhile wait in their backlog: none is refused), drains its connections,
//      flushes and closes the store, and answers "RELEASED".
//   4. New: adopts the sockets (no bind), opens the store, starts serving, sends "READY".
//   5. Old: on READY (if it had not handed over at 3, it does now: the two processes accepted
//      side by side until this point) it exits 0. The new process is re-parented to init.
// Under systemd (Type=notify, NotifyAccess=main) the old process, still the main PID, tells
// systemd MAINPID=<new pid> before it exits, so the service goes on with the new process; the
// new one sends no READY=1 of its own (systemd would drop it: not the main PID yet).
// Failures: the new process exits or says nothing within the timeout before 3 -> the old one
// logs why, reaps or kills it, and keeps serving. After 3 the old process no longer serves; if
// the new one then fails, the old one exits 1 (the sockets close with it: a supervisor must
// restart it).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace lionet::app {

// The old process's side.
class BinaryUpgrade {
 public:
  // Resolves the executable now: /proc/self/exe's target (a binary replaced later shows there
  // as "... (deleted)"), else argv[0]. Keeps argv for the new process.
  BinaryUpgrade(int argc, char** argv);

  struct Listener {
    std::string name;  // the server's name: LIONET_LISTEN_FDNAMES
    int fd = -1;  // stays owned by the caller
  };
  enum class Outcome {
    kFailed,  // the new process did not take over; this one serves on
    kHandedOver,  // the new process serves; hand_over ran: exit 0
    kFailedAfterRelease,  // hand_over ran, then the new process failed: exit 1
  };
  // Steps 1-5. hand_over: stop accepting (keeping the sockets), drain, close the store; runs
  // at most once. timeout bounds the wait for each of the new process's messages.
  Outcome run(const std::vector<Listener>& listeners, const std::function<void()>& hand_over,
              std::chrono::milliseconds timeout);
  const std::string& executable() const { return exe_; }
  // The new process of the last run() (-1 before).
  int new_pid() const { return new_pid_; }

 private:
  std::string exe_;
  int new_pid_ = -1;
  std::vector<std::string> argv_;
};

// The new process's side (LIONET_UPGRADE_FD in the environment).
class UpgradeChannel {
 public:
  // Reads and unsets LIONET_UPGRADE_FD; inactive when absent.
  static UpgradeChannel from_environment();
  UpgradeChannel() = default;
  UpgradeChannel(UpgradeChannel&& o) noexcept;
  UpgradeChannel& operator=(UpgradeChannel&& o) noexcept;
  ~UpgradeChannel();

  bool active() const { return fd_ >= 0; }
  // Step 3: returns once the old process released the store; throws std::runtime_error if it
  // went away or did not answer within timeout.
  void release_store(std::chrono::milliseconds timeout);
  // Step 4's "READY", then closes the channel.
  void ready();

 private:
  int fd_ = -1;
};
}  // namespace lionet::app
