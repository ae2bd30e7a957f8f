// lionet/app/service_notify.h: what the lionet binary tells its service manager (systemd's
// sd_notify(3) protocol, through libsystemd): READY=1 once every listener is bound and the
// storage opened; RELOADING=1 with MONOTONIC_USEC=... and then READY=1 around a SIGHUP reload
// (Type=notify-reload's contract, also fine for Type=notify); STOPPING=1 at SIGTERM/SIGINT;
// a STATUS= line ("3 connection(s), 120.5 requests/s") every few seconds; and WATCHDOG=1 when
// the unit sets WatchdogSec=.
//
// Owns: those messages and the heartbeat fiber that sends STATUS= and WATCHDOG=1. Must not:
// decide when the process is ready or reloading (main.cc does), or read configuration.
//
// The heartbeat is a fiber on the main pool's scheduler, not a thread: if that scheduler stalls
// (every worker stuck in a busy fiber, a deadlock), WATCHDOG=1 stops and systemd restarts the
// service after WatchdogSec. It sends every half watchdog interval (systemd's advice), and
// STATUS= every `status_every`.
//
// Without NOTIFY_SOCKET (not started by systemd) every call is a no-op; built without libsystemd
// (LIONET_WITH_SYSTEMD=OFF) too, and `lionet --version` says so.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace lionet {
class Scheduler;
}

namespace lionet::app {

class ServiceNotify {
 public:
  ServiceNotify();
  ~ServiceNotify();  // stops the heartbeat
  ServiceNotify(const ServiceNotify&) = delete;
  ServiceNotify& operator=(const ServiceNotify&) = delete;

  // Built with libsystemd and NOTIFY_SOCKET is set.
  bool enabled() const { return enabled_; }
  // WatchdogSec as systemd passed it (WATCHDOG_USEC for this pid), zero when off.
  std::chrono::microseconds watchdog_interval() const { return watchdog_; }

  void ready();
  void reloading();  // RELOADING=1 + MONOTONIC_USEC (CLOCK_MONOTONIC, microseconds)
  void stopping();
  void status(const std::string& text);
  // MAINPID=pid: the process systemd follows from now on (a binary upgrade's new process).
  void main_pid(int pid);

  // The heartbeat fiber on `sched` (see above); `status_text` runs on it. Call once, after
  // ready(). Nothing happens when !enabled().
  void start_heartbeat(Scheduler& sched, std::function<std::string()> status_text,
                       std::chrono::milliseconds status_every = std::chrono::seconds(5));
  // Before the scheduler stops. Idempotent.
  void stop_heartbeat();

  struct Heartbeat;

 private:
  void send(const std::string& state);
  bool enabled_ = false;
  std::chrono::microseconds watchdog_{0};
  std::unique_ptr<Heartbeat> heartbeat_;
};

// "yes" / "no": compiled with libsystemd (for --version).
const char* systemd_support();
}  // namespace lionet::app
