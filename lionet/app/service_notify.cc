// lionet/app/service_notify.cc: see service_notify.h.
#include "lionet/app/service_notify.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>

#if LIONET_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "lionet/log/log.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/event.h"

namespace lionet::app {

struct ServiceNotify::Heartbeat {
  Event stop;
  JoinHandle<void> fiber;
};

const char* systemd_support() {
#if LIONET_HAVE_SYSTEMD
  return "yes";
#else
  return "no";
#endif
}

ServiceNotify::ServiceNotify() {
#if LIONET_HAVE_SYSTEMD
  const char* sock = std::getenv("NOTIFY_SOCKET");
  enabled_ = sock && *sock;
  uint64_t usec = 0;
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0) watchdog_ = std::chrono::microseconds(usec);
#endif
}

ServiceNotify::~ServiceNotify() { stop_heartbeat(); }

void ServiceNotify::send(const std::string& state) {
#if LIONET_HAVE_SYSTEMD
  if (!enabled_) return;
  if (int r = sd_notify(0, state.c_str()); r < 0)
    LIONET_LOG_WARN(log::get("app"), "sd_notify '{}' failed: {}", state.substr(0, state.find('\n')), -r);
#else
  (void)state;
#endif
}

void ServiceNotify::ready() { send("READY=1"); }

void ServiceNotify::reloading() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const unsigned long long usec =
      static_cast<unsigned long long>(ts.tv_sec) * 1000000ull + static_cast<unsigned long long>(ts.tv_nsec) / 1000;
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

void ServiceNotify::stopping() { send("STOPPING=1"); }

void ServiceNotify::status(const std::string& text) { send("STATUS=" + text); }

void ServiceNotify::main_pid(int pid) { send("MAINPID=" + std::to_string(pid)); }

void ServiceNotify::start_heartbeat(Scheduler& sched, std::function<std::string()> status_text,
                                    std::chrono::milliseconds status_every) {
  if (!enabled_ || heartbeat_) return;
  heartbeat_ = std::make_unique<Heartbeat>();
  const auto tick = watchdog_.count() > 0
                        ? std::min<std::chrono::milliseconds>(
                              status_every, std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_ / 2))
                        : status_every;
  Heartbeat* hb = heartbeat_.get();
  const bool watchdog = watchdog_.count() > 0;
  hb->fiber = sched.spawn(
      [this, hb, tick, status_every, watchdog, status_text = std::move(status_text)] {
        auto last_status = std::chrono::steady_clock::now();
        status(status_text());
        while (!hb->stop.wait_for(tick)) {
          if (watchdog) send("WATCHDOG=1");
          if (std::chrono::steady_clock::now() - last_status >= status_every) {
            last_status = std::chrono::steady_clock::now();
            status(status_text());
          }
        }
      },
      SpawnOptions{.name = "sd-heartbeat"});
}

void ServiceNotify::stop_heartbeat() {
  if (!heartbeat_) return;
  heartbeat_->stop.set();
  CancelShield shield;  // it uses heartbeat_: wait for it even in a cancelled fiber
  heartbeat_->fiber.join();
  heartbeat_.reset();
}
}  // namespace lionet::app
