// lionet/app/pprof.cc: see pprof.h.
#include "lionet/app/pprof.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/fiber/stack_trace.h"
#include "lionet/log/log.h"
#include "lionet/net/address.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/scheduler.h"

namespace lionet::app {
namespace {
const std::shared_ptr<spdlog::logger>& pprof_log() {
  static const auto lg = log::get("app");
  return lg;
}

struct Profiler {
  int (*start)(const char*) = nullptr;
  void (*stop)() = nullptr;
  std::string error;
  Profiler() {
    void* h = ::dlopen("libprofiler.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = ::dlerror();
      error = std::string("CPU profiles need gperftools' libprofiler (Debian package libgoogle-perftools4): ") +
              (why ? why : "dlopen failed");
      return;
    }
    start = reinterpret_cast<int (*)(const char*)>(::dlsym(h, "ProfilerStart"));
    stop = reinterpret_cast<void (*)()>(::dlsym(h, "ProfilerStop"));
    if (!start || !stop) error = "libprofiler.so.0 lacks ProfilerStart/ProfilerStop";
  }
};

const Profiler& profiler() {
  static const Profiler p;
  return p;
}

std::atomic<bool> g_busy{false};

}  // namespace

const std::string& pprof_unavailable_reason() { return profiler().error; }

namespace {
// pprof's symbolz protocol (what Go's net/http/pprof serves): GET answers "num_symbols: 1" (we
// can name addresses); POST with "0xADDR+0xADDR..." answers one "0xADDR name" line per address
// that has a name. pprof asks it for a profile fetched over HTTP before it looks for the
// binaries itself, so a server on another machine is profiled with its own names.
void serve_symbols(http::Request& req, http::Response& res) {
  if (req.method() != "POST") {
    res.set_header("Content-Type", "text/plain");
    res.reply(200, "num_symbols: 1\n");
    return;
  }
  std::string body;
  if (!req.read_body(body)) {
    res.reply(400, "unreadable body\n");
    return;
  }
  std::vector<uintptr_t> addrs;
  for (std::size_t p = 0; p < body.size() && addrs.size() < 1000000;) {
    std::size_t e = body.find_first_of("+\n ", p);
    if (e == std::string::npos) e = body.size();
    std::string_view tok(body.data() + p, e - p);
    if (tok.starts_with("0x") || tok.starts_with("0X")) tok.remove_prefix(2);
    uintptr_t a = 0;
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), a, 16);
    if (ec == std::errc() && end == tok.data() + tok.size() && !tok.empty()) addrs.push_back(a);
    p = e + 1;
  }
  const std::vector<std::string> names = function_names_on_plain_thread(addrs);
  std::string out;
  char buf[32];
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    if (names[i].empty()) continue;
    std::snprintf(buf, sizeof buf, "0x%llx ", static_cast<unsigned long long>(addrs[i]));
    out += buf;
    out += names[i];
    out += '\n';
  }
  res.set_header("Content-Type", "text/plain");
  res.reply(200, std::move(out));
}
}  // namespace

http::Handler pprof_handler(PprofOptions options) {
  return [options](http::Request& req, http::Response& res) {
    if (!options.allow_remote) {
      auto peer = req.peer_address();
      if (!peer.ok() || !peer.value().is_loopback()) {
        res.reply(403, "CPU profiles are served to loopback clients only (allow_remote: true to change)\n");
        return;
      }
    }
    const std::string_view where = req.path();
    if (where.ends_with("/symbol")) return serve_symbols(req, res);
    if (!where.ends_with("/profile")) {
      res.reply(404, "the pprof route serves <path>/profile?seconds=N and <path>/symbol\n");
      return;
    }
    if (req.method() != "GET") {
      res.reply(405, "GET <path>/profile?seconds=N\n");
      return;
    }
    long seconds = 30;
    if (auto s = req.query_param("seconds")) {
      auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), seconds);
      if (ec != std::errc() || end != s->data() + s->size() || seconds < 1 || seconds > options.max_seconds.count()) {
        res.reply(400, "seconds must be 1.." + std::to_string(options.max_seconds.count()) + "\n");
        return;
      }
    }
    const Profiler& p = profiler();
    if (!p.error.empty()) {
      res.reply(503, p.error + "\n");
      return;
    }
    if (g_busy.exchange(true, std::memory_order_acq_rel)) {
      res.reply(409, "a CPU profile is being taken; one at a time\n");
      return;
    }
    struct Release {
      ~Release() { g_busy.store(false, std::memory_order_release); }
    } release;
    char path[] = "/tmp/lionet-pprof-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) {
      res.reply(500, "no temporary file for the profile\n");
      return;
    }
    ::close(fd);
    if (!p.start(path)) {
      ::unlink(path);
      res.reply(500, "ProfilerStart failed (is CPUPROFILE set, or a profile already running?)\n");
      return;
    }
    LIONET_LOG_INFO(pprof_log(), "CPU profile for {} s requested by {}", seconds,
                    req.peer_address().ok() ? req.peer_address().value().to_string() : std::string("?"));
    const bool full = this_fiber::sleep_for(std::chrono::seconds(seconds));  // a hang-up cancels it
    p.stop();
    std::string data;
    {
      CancelShield shield;  // read the file even if the client left: it is removed below either way
      std::ifstream in(path, std::ios::binary);
      data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    ::unlink(path);
    if (!full) return;  // the client went away, or the server stops: nobody to answer
    res.set_header("Content-Type", "application/octet-stream");
    res.set_header("Content-Disposition", "attachment; filename=\"profile\"");
    res.reply(200, std::move(data));
  };
}

}  // namespace lionet::app
