// examples/static_server.cc: serve a directory over HTTP with each of the four file modes of
// lionet::http::StaticFiles, side by side, so their answers can be compared with curl -i.
//
//   ./static_server [root] [port]      (defaults "." and 8091: not 8080, which `make run` holds; port 0 = any free port, printed)
//   curl -i http://127.0.0.1:8091/chunk/some/file.txt
//
// The same root under four prefixes:
//   /memory/...    MEMORY: bytes cached in memory (LRU), Content-Length, one writev
//   /chunk/...     CHUNK: read in 16 KiB pieces, sent Transfer-Encoding: chunked
//   /sendfile/...  SENDFILE: kernel sendfile(2) from the file, Content-Length
//   /auto/...      AUTO: MEMORY under 4 KiB, SENDFILE from 64 KiB, CHUNK in between
//   /stats         memory-cache hits and misses per prefix
// Every mode does ETag / Last-Modified (304), a single Range (206), index.html for "dir/",
// and refuses paths that leave the root (404). SIGINT/SIGTERM: stop, exit 0.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http/static_files.h"
#include "lionet/sched/scheduler.h"

namespace http = lionet::http;

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : ".";
  const int port = argc > 2 ? std::atoi(argv[2]) : 8091;
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "usage: %s [root] [port]\n", argv[0]);
    return 2;
  }

  sigset_t sigs;  // SIGINT/SIGTERM blocked in every thread; main waits for them below
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  lionet::Scheduler sched({.threads = 2, .name = "static"});  // comes with its IO driver

  // One StaticFiles per mode. The constructor checks the root (throws with a clear message).
  struct Mount {
    const char* prefix;
    http::FileMode mode;
  };
  const Mount mounts[] = {{"/memory", http::FileMode::kMemory},
                          {"/chunk", http::FileMode::kChunk},
                          {"/sendfile", http::FileMode::kSendfile},
                          {"/auto", http::FileMode::kAuto}};
  std::vector<std::unique_ptr<http::StaticFiles>> files;
  http::Router router;
  try {
    for (const Mount& m : mounts) {
      http::StaticOptions o;
      o.root = root;
      o.mode = m.mode;
      o.chunk_size = 16 * 1024;
      o.memory_max = 4 * 1024;  // AUTO thresholds, small so a few test files show all three
      o.sendfile_min = 64 * 1024;
      files.push_back(std::make_unique<http::StaticFiles>(o));
      // prefix(): "/chunk/a/b.txt" reaches the handler with param("**") = "a/b.txt".
      router.prefix("GET,HEAD", m.prefix, files.back()->handler());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "static_server: %s\n", e.what());
    return 1;
  }
  router.get("/stats", [&](http::Request&, http::Response& res) {
    std::string text;
    for (size_t i = 0; i < files.size(); ++i) {
      auto s = files[i]->stats();
      text += std::string(mounts[i].prefix) + ": memory_hits=" + std::to_string(s.memory_hits) +
              " memory_misses=" + std::to_string(s.memory_misses) + "\n";
    }
    res.reply(200, text);
  });

  http::Server server(sched, router.handler());
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "static_server: %s\n", e.what());
    return 1;
  }
  server.start();
  std::printf("static_server on http://%s serving %s, Ctrl-C to stop\n", server.addresses()[0].to_string().c_str(),
              root.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  server.stop(std::chrono::seconds(5));
  sched.stop();
  return 0;
}
