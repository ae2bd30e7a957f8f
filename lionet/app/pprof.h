// lionet/app/pprof.h: the `pprof` route type: a CPU profile of the whole process over HTTP, in
// the format `go tool pprof` and Google's pprof read (gperftools' CPU profile).
//
//   go tool pprof -top 'http://127.0.0.1:8080/debug/pprof/profile?seconds=10'
//
// The route's path is the prefix (/debug/pprof in the shipped conf), as in Go's net/http/pprof:
// GET <path>/profile?seconds=N (1..max_seconds, default 30): samples every thread's CPU time at 100 Hz
// (SIGPROF, ITIMER_PROF) for N seconds and answers the profile. One at a time: a second
// request meanwhile gets 409. A client that hangs up ends its profile early (the handler's
// sleep is cancelled). <path>/symbol answers pprof's symbol look-ups (symbolz: GET, and POST of
// "0xADDR+0xADDR..."), so a profile fetched from another machine gets this process's function
// names. Off unless a route is configured; loopback clients only unless the route
// says allow_remote: true (a profile shows the program's functions and costs CPU while it runs).
//
// How: libprofiler from gperftools (Debian libgoogle-perftools4), loaded with dlopen(RTLD_LOCAL)
// on the first request, for the reason fiber/stack_trace.h gives: it brings libunwind, whose
// _Unwind_* exports would otherwise take over C++ exception unwinding. Where it is missing the
// route answers 503 naming the package. It writes the profile to a temporary file that the
// handler reads back and removes.
#pragma once

#include <chrono>

#include "lionet/http/router.h"

namespace lionet::app {

struct PprofOptions {
  bool allow_remote = false;  // serve non-loopback clients too
  std::chrono::seconds max_seconds{600};
};

http::Handler pprof_handler(PprofOptions options);

// Empty if libprofiler can be loaded here, else why not (the 503's text).
const std::string& pprof_unavailable_reason();

}  // namespace lionet::app
