// examples/echo_server.cc: a TCP echo server in plain blocking style.
//
//   ./echo_server [port]          (default 7777; try: nc 127.0.0.1 7777)
//
// Each connection gets its own fiber. s.read() and s.write() look blocking, but while one
// connection waits for bytes its fiber is parked and the worker threads serve the others.
#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"

int main(int argc, char** argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 7777;

  // Block SIGINT/SIGTERM in every thread; main waits for them below.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // 1. Worker threads that run fibers; the scheduler comes with the IO reactor (epoll) that
  //    wakes them.
  lionet::Scheduler sched({.threads = 2});

  // 2. The per-connection code: a loop, written as if sockets blocked.
  lionet::TcpServer server(sched, [](lionet::SocketStream& s) {
    char buf[4096];
    for (;;) {
      auto n = s.read(buf, sizeof buf);  // parks this fiber until bytes arrive
      if (!n || *n == 0) return;  // error or end of stream: returning closes it
      if (!s.write(buf, *n)) return;  // writes everything, or fails (peer gone)
    }
  });

  // 3. Listen (throws with a clear message if the port is taken) and start accepting.
  server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  server.start();
  std::printf("echo server on %s, Ctrl-C to stop\n", server.addresses()[0].to_string().c_str());
  std::fflush(stdout);  // show the line at once, also when stdout is a pipe

  // 4. On Ctrl-C: stop accepting, give open connections 2 s to finish, then close them.
  int sig = 0;
  sigwait(&sigs, &sig);
  server.stop(std::chrono::seconds(2));
  sched.stop();
  return 0;
}
