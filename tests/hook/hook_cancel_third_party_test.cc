// tests/hook/hook_cancel_third_party_test.cc: cancellation and deadlines (lionet/sched/cancel.h:
// JoinHandle::cancel(), DeadlineScope, this_fiber::on_cancel, CancelShield) reach unmodified
// third-party blocking clients from Debian packages through the libc hooks, against real
// servers this test starts on 127.0.0.1 (third_party_util.h). The hooked call a client waits in
// (poll, read, recv) returns -1 with errno ECANCELED (cancel) or ETIMEDOUT (deadline), never
// EINTR, which these clients retry: so the client's own call fails promptly. Checked as a user
// notices it:
//   - libpq: SELECT pg_sleep(10) under a 200 ms DeadlineScope: PQexec fails after 200 ms
//     (PQerrorMessage names strerror(ETIMEDOUT)), PQfinish works, and the query runs on in the
//     server; with PQcancel wired through this_fiber::on_cancel the query is gone from
//     pg_stat_activity within 1 s. The same ended by JoinHandle::cancel() from another fiber and
//     from a plain thread (strerror(ECANCELED)).
//   - hiredis: BLPOP k 10 cancelled after 100 ms: redisCommand returns NULL within 300 ms,
//     REDIS_ERR_IO, errstr strerror(ECANCELED); later commands never wait, and a CancelShield
//     lets the cancelled fiber still talk to the server.
//   - libcurl: an easy GET the server holds 10 s, cancelled after 100 ms: curl_easy_perform fails
//     within 500 ms.
//   - MariaDB Connector/C: SELECT SLEEP(10) under a 200 ms DeadlineScope: mysql_query fails
//     within 200-600 ms; in the expired scope a new session never waits, one in a
//     CancelShield works.
// Each test runs on epoll with 2 workers (readiness waits; cancels and deadlines cross workers)
// and on io_uring with 1 worker (the hooks' socket transfers are the kernel's own calls,
// IOManager::completion_io). Timing bounds count from what a user counts from (the start of
// the call for a deadline, the cancel() call for a cancel); sanitizer builds allow kSlack times
// more above.
#include <curl/curl.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "hook_test_util.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/task_group.h"
#include "third_party_util.h"

namespace lionet {
namespace {
using hook_test::free_local_port;
using hook_test::LibMariaDb;
using hook_test::LibPq;
using hook_test::MariaDbServer;
using hook_test::open_lib;
using hook_test::PostgresServer;
using hook_test::Runtime;
using hook_test::ServerProcess;
using hook_test::sym;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

#if defined(LIONET_TSAN) || defined(LIONET_ASAN)
constexpr double kSlack = 4.0;  // upper bounds only: sanitizers slow the client side down
#else
constexpr double kSlack = 1.0;
#endif

const std::string kCanceledText = std::strerror(ECANCELED);  // "Operation canceled"
const std::string kTimedOutText = std::strerror(ETIMEDOUT);  // "Connection timed out"

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Polls pred every 2 ms for up to limit; true once it held.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// A client's error text without its trailing newline (libpq ends its messages with one).
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

struct Backend {
  const char* name;
  int threads;
};
void PrintTo(const Backend& b, std::ostream* os) { *os << b.name << " with " << b.threads << " worker(s)"; }

// Every test once per IO backend (HookIo's convention: io_uring is skipped where the kernel
// refuses it).
class CancelTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    hook_test::runtime_backend() = GetParam().name;
    Runtime probe(1);
    const bool uring = std::string(IOManager::of(probe.sched)->backend()) == "io_uring";
    if (std::string(GetParam().name) == "io_uring" && !uring) GTEST_SKIP() << "io_uring unavailable here";
  }
  void TearDown() override { hook_test::runtime_backend() = "auto"; }
  int threads() const { return GetParam().threads; }
  // "epoll, 2 workers" or "io_uring, 1 worker, completion-based socket calls", for the output.
  static std::string describe(Runtime& rt) {
    IOManager* io = IOManager::of(rt.sched);
    const int n = rt.sched.options().threads;
    return std::string(io->backend()) + ", " + std::to_string(n) + (n == 1 ? " worker" : " workers") +
           (io->completion_io() ? ", completion-based socket calls" : "");
  }
};

std::string backend_name(const ::testing::TestParamInfo<Backend>& i) { return i.param.name; }
const Backend kBackends[] = {{"epoll", 2}, {"io_uring", 1}};

// ---------------------------------------------------------------- libpq

// One PQexec("SELECT pg_sleep(10)") in a fiber, as a user writes it, and what it saw.
struct PgSleepRun {
  std::atomic<int> pid{0};  // the backend's, once connected
  std::atomic<bool> querying{false};  // PQexec is about to be called
  bool connected = false;
  Clock::time_point exec_start, exec_end, finish_start, finish_end;
  Clock::time_point callback_start, callback_end;  // the on_cancel callback's run
  int status = -2;  // PQresultStatus of PQexec's result; -1 for NULL
  std::string error;  // PQerrorMessage after PQexec
  int interruption = 0;  // this_fiber::interruption() right after PQexec
  bool callback_fired = false;  // the on_cancel registration fired
  int cancel_rc = -1;  // PQcancel's result in the callback
  std::string cancel_err;
};

// connect; then [DeadlineScope(deadline)] [on_cancel -> PQcancel] PQexec; then PQfinish.
void pg_sleep_in_fiber(const LibPq& pq, const std::string& conninfo, PgSleepRun& out,
                       std::optional<std::chrono::milliseconds> deadline, bool wire_pqcancel) {
  void* conn = pq.connectdb(conninfo.c_str());
  if (pq.status(conn) != hook_test::kConnectionOk) {
    out.error = pq.error_message(conn);
    pq.finish(conn);
    return;
  }
  out.connected = true;
  out.pid.store(pq.backend_pid(conn));
  {
    out.exec_start = Clock::now();
    std::optional<DeadlineScope> scope;  // first: on_cancel watches the deadline in force
    if (deadline) scope.emplace(*deadline);
    OnCancel reg;
    if (wire_pqcancel) {
      reg = this_fiber::on_cancel([&] {
        out.callback_start = Clock::now();
        void* c = pq.get_cancel(conn);
        char err[256] = "";
        out.cancel_rc = pq.cancel(c, err, sizeof err);
        out.cancel_err = err;
        pq.free_cancel(c);
        out.callback_end = Clock::now();
      });
    }
    out.querying.store(true);
    void* r = pq.exec(conn, "SELECT pg_sleep(10)");
    out.exec_end = Clock::now();
    out.interruption = this_fiber::interruption();
    out.status = r ? pq.result_status(r) : -1;
    out.error = one_line(pq.error_message(conn));
    if (r) pq.clear(r);
    out.callback_fired = reg.fired();
  }  // reg: waits for a callback still running; then the scope ends
  out.finish_start = Clock::now();
  pq.finish(conn);
  out.finish_end = Clock::now();
}

// One PostgreSQL server for the suite; a checking session on the test thread (a plain thread,
// where the hooks are plain libc).
class HookCancelLibpq : public CancelTest {
 protected:
  static void SetUpTestSuite() {
    pq_ = new LibPq;
    if (pq_->load()) server_ = new PostgresServer(*pq_, 50);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete pq_;
    pq_ = nullptr;
  }
  void SetUp() override {
    CancelTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(server_, nullptr) << "libpq not found (libpq5): run scripts/install-deps.sh";
    ASSERT_TRUE(server_->error().empty()) << server_->error();
    checker_ = pq_->connectdb(server_->conninfo().c_str());
    ASSERT_EQ(pq_->status(checker_), hook_test::kConnectionOk) << pq_->error_message(checker_);
  }
  void TearDown() override {
    if (checker_) pq_->finish(checker_);
    CancelTest::TearDown();
  }

  // How many `SELECT pg_sleep(10)` backend `pid` runs now (0 or 1; -1 if the check failed).
  // Filtered by pid, so this checking query (another backend) never counts itself.
  int active_sleeps(int pid) {
    const std::string q = "SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                          " AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE 'SELECT pg_sleep(10)%'";
    void* r = pq_->exec(checker_, q.c_str());
    int n = -1;
    if (r && pq_->result_status(r) == hook_test::kTuplesOk && pq_->ntuples(r) == 1)
      n = std::atoi(pq_->getvalue(r, 0, 0));
    if (r) pq_->clear(r);
    return n;
  }
  // Waits (bounded) until backend pid runs the query (want 1) or no longer does (want 0); the
  // time it was seen so, or nullopt.
  std::optional<Clock::time_point> wait_active(int pid, int want, std::chrono::milliseconds limit) {
    std::optional<Clock::time_point> at;
    wait_for(
        [&] {
          if (active_sleeps(pid) != want) return false;
          at = Clock::now();
          return true;
        },
        limit);
    return at;
  }
  // Stops backend pid's query from here (cleanup after a test that left it running).
  void cancel_backend(int pid) {
    void* r = pq_->exec(checker_, ("SELECT pg_cancel_backend(" + std::to_string(pid) + ")").c_str());
    if (r) pq_->clear(r);
    wait_active(pid, 0, 5s);
  }
  // What every ended PQexec shows: a failure result (PGRES_FATAL_ERROR) or NULL, whose message
  // names the errno the hooked poll returned; PQfinish afterwards returns at once.
  // With PQcancel wired (pqcancel_wired), the server's own answer to it may reach PQexec before
  // the fiber's interrupted read does: PostgreSQL's "canceling statement due to user request"
  // is then the failure, as correct for the user (the query failed and is gone); seen once in
  // 20 runs on a loaded machine.
  static void expect_failed_with(const PgSleepRun& run, const std::string& errno_text, bool pqcancel_wired = false) {
    EXPECT_TRUE(run.connected) << run.error;
    EXPECT_NE(run.status, hook_test::kTuplesOk) << "PQexec succeeded: the query was not interrupted";
    EXPECT_NE(run.status, hook_test::kCommandOk);
    const bool by_server =
        pqcancel_wired && run.error.find("canceling statement due to user request") != std::string::npos;
    EXPECT_TRUE(run.error.find(errno_text) != std::string::npos || by_server)
        << "PQerrorMessage: " << run.error << " (expected it to name " << errno_text << ")";
    EXPECT_LT(ms_between(run.finish_start, run.finish_end), 100.0 * kSlack) << "PQfinish after the failure";
  }

  // Runs pg_sleep(10) in a fiber with PQcancel wired, waits until the server runs it, then
  // cancel(rt, handle) cancels the fiber and returns when it called cancel(). Checks what a
  // user sees: PQexec fails promptly naming ECANCELED, the query is gone soon after.
  template <class Cancel>
  void cancel_pg_sleep(const char* from, Cancel cancel) {
    PgSleepRun run;
    Runtime rt(threads());
    auto h = rt.sched.spawn([&] { pg_sleep_in_fiber(*pq_, server_->conninfo(), run, std::nullopt, true); });
    ASSERT_TRUE(wait_for([&] { return run.querying.load() || h.done(); }, 10s));
    ASSERT_TRUE(run.connected) << run.error;
    ASSERT_TRUE(wait_active(run.pid, 1, 5s).has_value()) << "never saw pg_sleep(10) active on the server";
    const Clock::time_point cancel_at = cancel(rt, h);
    h.join();
    const auto gone = wait_active(run.pid, 0, 5s);
    if (!gone) cancel_backend(run.pid);  // cleanup; the checks below fail
    const double ret_ms = ms_between(cancel_at, run.exec_end);
    const double gone_ms = gone ? ms_between(cancel_at, *gone) : -1;
    std::printf(
        "[hook] libpq (%s): pg_sleep(10) cancelled from %s after %.1f ms: PQexec failed %.1f ms after cancel() "
        "(\"%s\"), PQfinish %.1f ms; on_cancel ran PQcancel from %.1f to %.1f ms after cancel(); the query was "
        "gone from pg_stat_activity %.1f ms after cancel()\n",
        describe(rt).c_str(), from, ms_between(run.exec_start, cancel_at), ret_ms, run.error.c_str(),
        ms_between(run.finish_start, run.finish_end), ms_between(cancel_at, run.callback_start),
        ms_between(cancel_at, run.callback_end), gone_ms);
    expect_failed_with(run, kCanceledText, /*pqcancel_wired=*/true);
    EXPECT_EQ(run.interruption, ECANCELED);
    EXPECT_LE(ret_ms, 300.0 * kSlack);
    EXPECT_TRUE(run.callback_fired) << "cancel() did not fire the on_cancel registration";
    EXPECT_EQ(run.cancel_rc, 1) << "PQcancel: " << run.cancel_err;
    ASSERT_TRUE(gone.has_value()) << "pg_sleep(10) still runs 5 s after the cancel";
    EXPECT_LE(gone_ms, 1000.0 * kSlack);
  }

  static inline LibPq* pq_ = nullptr;
  static inline PostgresServer* server_ = nullptr;
  void* checker_ = nullptr;
};
INSTANTIATE_TEST_SUITE_P(Backends, HookCancelLibpq, ::testing::ValuesIn(kBackends), backend_name);

TEST_P(HookCancelLibpq, DeadlineEndsPQexecButWithoutPQcancelTheQueryRunsOn) {
  PgSleepRun run;
  Runtime rt(threads());
  rt.sched.spawn([&] { pg_sleep_in_fiber(*pq_, server_->conninfo(), run, 200ms, /*wire_pqcancel=*/false); }).join();
  const double exec_ms = ms_between(run.exec_start, run.exec_end);
  // Closing the connection does not stop the query (sched/cancel.h, on_cancel): the server
  // still runs it, which is what PQcancel is for (the next tests).
  const int still = run.pid.load() > 0 ? active_sleeps(run.pid) : -1;
  if (run.pid.load() > 0) cancel_backend(run.pid);
  std::printf(
      "[hook] libpq (%s): pg_sleep(10) in a 200 ms DeadlineScope: PQexec failed after %.1f ms (\"%s\"), PQfinish "
      "%.1f ms; the server still ran the query: %s\n",
      describe(rt).c_str(), exec_ms, run.error.c_str(), ms_between(run.finish_start, run.finish_end),
      still == 1 ? "yes" : "no");
  expect_failed_with(run, kTimedOutText);
  EXPECT_EQ(run.interruption, ETIMEDOUT);
  EXPECT_GE(exec_ms, 200.0);
  EXPECT_LE(exec_ms, 500.0 * kSlack);
  EXPECT_EQ(still, 1) << "the server stopped pg_sleep(10) on its own after PQfinish";
}

TEST_P(HookCancelLibpq, DeadlineWithPQcancelOnCancelStopsTheQueryOnTheServer) {
  PgSleepRun run;
  Runtime rt(threads());
  auto h = rt.sched.spawn([&] { pg_sleep_in_fiber(*pq_, server_->conninfo(), run, 200ms, /*wire_pqcancel=*/true); });
  ASSERT_TRUE(wait_for([&] { return run.querying.load() || h.done(); }, 10s));
  const bool seen = wait_active(run.pid, 1, 1s).has_value();  // it ran there before the deadline
  h.join();
  const auto deadline_at = run.exec_start + 200ms;
  const auto gone = wait_active(run.pid, 0, 5s);
  if (!gone) cancel_backend(run.pid);  // cleanup; the checks below fail
  const double exec_ms = ms_between(run.exec_start, run.exec_end);
  const double gone_ms = gone ? ms_between(deadline_at, *gone) : -1;
  std::printf(
      "[hook] libpq (%s): pg_sleep(10) in a 200 ms DeadlineScope + on_cancel(PQcancel): PQexec failed after %.1f "
      "ms, PQfinish %.1f ms; on_cancel ran PQcancel from %.1f to %.1f ms after the deadline; the query was gone "
      "from pg_stat_activity %.1f ms after the deadline\n",
      describe(rt).c_str(), exec_ms, ms_between(run.finish_start, run.finish_end),
      ms_between(deadline_at, run.callback_start), ms_between(deadline_at, run.callback_end), gone_ms);
  EXPECT_TRUE(seen) << "never saw pg_sleep(10) active on the server";
  expect_failed_with(run, kTimedOutText, /*pqcancel_wired=*/true);
  EXPECT_GE(exec_ms, 200.0);
  EXPECT_LE(exec_ms, 500.0 * kSlack);
  EXPECT_TRUE(run.callback_fired) << "the deadline did not fire the on_cancel registration";
  EXPECT_EQ(run.cancel_rc, 1) << "PQcancel: " << run.cancel_err;
  ASSERT_TRUE(gone.has_value()) << "pg_sleep(10) still runs 5 s after the deadline";
  EXPECT_LE(gone_ms, 1000.0 * kSlack);
}

TEST_P(HookCancelLibpq, CancelFromAnotherFiberEndsPQexecAndPQcancelStopsTheQuery) {
  cancel_pg_sleep("another fiber", [](Runtime& rt, JoinHandle<void>& h) {
    Clock::time_point at;
    rt.sched
        .spawn([&] {
          this_fiber::sleep_for(50ms);
          at = Clock::now();
          h.cancel();
        })
        .join();
    return at;
  });
}

TEST_P(HookCancelLibpq, CancelFromAPlainThreadEndsPQexecAndPQcancelStopsTheQuery) {
  cancel_pg_sleep("a plain thread", [](Runtime&, JoinHandle<void>& h) {
    std::this_thread::sleep_for(50ms);
    const auto at = Clock::now();
    h.cancel();  // from the test thread
    return at;
  });
}

// A TaskGroup whose first child fails: its sibling blocked in libpq's PQexec is cancelled, its
// on_cancel runs PQcancel, wait() rethrows the first failure, and the query is gone.
TEST_P(HookCancelLibpq, TaskGroupFirstFailureCancelsASiblingInPQexec) {
  PgSleepRun run;
  Runtime rt(threads());
  Clock::time_point failed_at;
  std::string rethrown;
  rt.sched
      .spawn([&] {
        TaskGroup group;
        group.spawn([&] { pg_sleep_in_fiber(*pq_, server_->conninfo(), run, std::nullopt, true); });
        group.spawn([&] {
          while (!run.querying.load()) this_fiber::sleep_for(5ms);
          this_fiber::sleep_for(100ms);  // the query runs on the server by now
          failed_at = Clock::now();
          throw std::runtime_error("sibling failed");
        });
        try {
          group.wait();
        } catch (const std::runtime_error& e) {
          rethrown = e.what();
        }
      })
      .join();
  const auto gone = wait_active(run.pid, 0, 5s);
  if (!gone) cancel_backend(run.pid);  // cleanup; the checks below fail
  const double ret_ms = ms_between(failed_at, run.exec_end);
  std::printf(
      "[hook] libpq (%s): TaskGroup sibling failed; PQexec in the other child failed %.1f ms later, the query was "
      "gone %.1f ms later\n",
      describe(rt).c_str(), ret_ms, gone ? ms_between(failed_at, *gone) : -1.0);
  EXPECT_EQ(rethrown, "sibling failed");
  expect_failed_with(run, kCanceledText, /*pqcancel_wired=*/true);
  EXPECT_LE(ret_ms, 300.0 * kSlack);
  EXPECT_TRUE(run.callback_fired);
  EXPECT_EQ(run.cancel_rc, 1) << "PQcancel: " << run.cancel_err;
  ASSERT_TRUE(gone.has_value()) << "pg_sleep(10) still runs 5 s after the sibling failed";
  EXPECT_LE(ms_between(failed_at, *gone), 1000.0 * kSlack);
}

// ---------------------------------------------------------------- hiredis, libcurl, MariaDB

class HookCancelThirdParty : public CancelTest {
 protected:
  // One MariaDB server for the suite, started by the first test that needs it (mariadb-install-db
  // takes seconds).
  static void TearDownTestSuite() {
    mariadb_.reset();
    delete my_;
    my_ = nullptr;
  }
  static inline LibMariaDb* my_ = nullptr;
  static inline bool my_loaded_ = false;
  static inline std::unique_ptr<MariaDbServer> mariadb_;
};
INSTANTIATE_TEST_SUITE_P(Backends, HookCancelThirdParty, ::testing::ValuesIn(kBackends), backend_name);

TEST_P(HookCancelThirdParty, HiredisBlpopEndsWhenTheFiberIsCancelled) {
  if (::access("/usr/bin/redis-server", X_OK) != 0) {
    FAIL() << "redis-server is not installed (/usr/bin/redis-server): run scripts/install-deps.sh";
  }
  void* lib = open_lib({"libhiredis.so", "libhiredis.so.1.1.0", "libhiredis.so.0.14"});
  ASSERT_NE(lib, nullptr) << "libhiredis not found (libhiredis-dev): run scripts/install-deps.sh: " << ::dlerror();
  auto connect = sym<decltype(&redisConnect)>(lib, "redisConnect");
  auto command = sym<decltype(&redisCommand)>(lib, "redisCommand");
  auto free_reply = sym<decltype(&freeReplyObject)>(lib, "freeReplyObject");
  auto free_ctx = sym<decltype(&redisFree)>(lib, "redisFree");
  ASSERT_TRUE(connect && command && free_reply && free_ctx);

  const uint16_t port = free_local_port();
  ASSERT_NE(port, 0);
  ServerProcess redis({"/usr/bin/redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"},
                      port);
  ASSERT_TRUE(redis.ready()) << "redis-server did not start on 127.0.0.1:" << port;

  // cmd on c (an integer reply expected): "" if it worked, else why it failed.
  auto run_command = [&](redisContext* c, const char* cmd) -> std::string {
    auto* r = static_cast<redisReply*>(command(c, cmd));
    std::string why;
    if (r == nullptr) why = c->errstr;
    else if (r->type != REDIS_REPLY_INTEGER) why = "reply of type " + std::to_string(r->type);
    if (r) free_reply(r);
    return why;
  };
  // The same on a new session.
  auto session = [&](const char* cmd) -> std::string {
    redisContext* c = connect("127.0.0.1", port);
    if (c == nullptr) return "redisConnect returned NULL";
    std::string why = c->err ? std::string("redisConnect: ") + c->errstr : run_command(c, cmd);
    free_ctx(c);
    return why;
  };
  struct {
    std::atomic<bool> blocking{false};
    std::string connect_error;
    Clock::time_point start, end;
    bool reply_null = false;
    int reply_type = 0;
    int err = 0;
    std::string errstr;
    std::string later;  // a command on a second open session after the cancel
    double later_ms = 0;
    std::string shielded;  // a new session's command in a CancelShield after the cancel
  } run;
  Runtime rt(threads());
  auto h = rt.sched.spawn([&] {
    redisContext* c = connect("127.0.0.1", port);
    redisContext* c2 = connect("127.0.0.1", port);
    if (c == nullptr || c->err || c2 == nullptr || c2->err) {
      run.connect_error = c && c->err ? c->errstr : c2 && c2->err ? c2->errstr : "redisConnect returned NULL";
      if (c) free_ctx(c);
      if (c2) free_ctx(c2);
      return;
    }
    run.start = Clock::now();
    run.blocking.store(true);
    auto* r = static_cast<redisReply*>(command(c, "BLPOP lionet:cancel:k 10"));
    run.end = Clock::now();
    run.reply_null = r == nullptr;
    run.reply_type = r ? r->type : 0;
    run.err = c->err;
    run.errstr = c->errstr;
    if (r) free_reply(r);
    free_ctx(c);
    // Cancelled: a later call that has to wait (the reply's read) fails at once...
    const auto t = Clock::now();
    run.later = run_command(c2, "INCR lionet:cancel:later");
    run.later_ms = ms_between(t, Clock::now());
    free_ctx(c2);
    // ...but cleanup in a CancelShield still talks to the server.
    CancelShield shield;
    run.shielded = session("RPUSH lionet:cancel:cleanup done");
  });
  ASSERT_TRUE(wait_for([&] { return run.blocking.load() || h.done(); }, 10s));
  std::this_thread::sleep_for(100ms);
  const auto cancel_at = Clock::now();
  h.cancel();
  h.join();
  ASSERT_TRUE(run.connect_error.empty()) << "redisConnect: " << run.connect_error;
  const double ret_ms = ms_between(cancel_at, run.end);
  std::printf(
      "[hook] hiredis (%s): BLPOP k 10 cancelled after %.1f ms: redisCommand returned %s %.1f ms after cancel() "
      "(err %d, \"%s\"); then a command on another open session failed in %.1f ms (\"%s\"), a new session in a "
      "CancelShield %s\n",
      describe(rt).c_str(), ms_between(run.start, cancel_at), run.reply_null ? "NULL" : "a reply", ret_ms, run.err,
      run.errstr.c_str(), run.later_ms, run.later.c_str(),
      run.shielded.empty() ? "worked" : ("failed: " + run.shielded).c_str());
  EXPECT_TRUE(run.reply_null || run.reply_type == REDIS_REPLY_ERROR) << "BLPOP gave a reply of type " << run.reply_type;
  EXPECT_EQ(run.err, REDIS_ERR_IO);
  EXPECT_EQ(run.errstr, kCanceledText);
  EXPECT_GE(ms_between(run.start, run.end), 100.0) << "BLPOP ended before the cancel";
  EXPECT_LE(ret_ms, 300.0 * kSlack);
  // A later command fails at once where it has to wait for its reply; where the local server's
  // reply is already there when hiredis reads, it completes (a call that need not wait does).
  EXPECT_TRUE(run.later.empty() || run.later.find(kCanceledText) != std::string::npos)
      << "after the cancel: " << run.later;
  EXPECT_LT(run.later_ms, 50.0 * kSlack);
  EXPECT_EQ(run.shielded, "") << "in a CancelShield";
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

TEST_P(HookCancelThirdParty, LibcurlGetEndsWhenTheFiberIsCancelled) {
  void* lib = open_lib({"libcurl.so.4", "libcurl.so"});
  ASSERT_NE(lib, nullptr) << "libcurl not found (libcurl4-openssl-dev): run scripts/install-deps.sh: " << ::dlerror();
  auto global_init = sym<decltype(&curl_global_init)>(lib, "curl_global_init");
  auto easy_init = sym<decltype(&curl_easy_init)>(lib, "curl_easy_init");
  auto setopt = sym<decltype(&curl_easy_setopt)>(lib, "curl_easy_setopt");
  auto perform = sym<decltype(&curl_easy_perform)>(lib, "curl_easy_perform");
  auto cleanup = sym<decltype(&curl_easy_cleanup)>(lib, "curl_easy_cleanup");
  auto strerror_ = sym<decltype(&curl_easy_strerror)>(lib, "curl_easy_strerror");
  ASSERT_TRUE(global_init && easy_init && setopt && perform && cleanup && strerror_);
  ASSERT_EQ(global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);  // on this thread: not thread-safe

  const uint16_t port = free_local_port();
  ASSERT_NE(port, 0);
  ServerProcess http({"python3", "-c", hook_test::kHttpServer, std::to_string(port)}, port);
  ASSERT_TRUE(http.ready()) << "python3 http.server did not start on 127.0.0.1:" << port;

  struct {
    std::atomic<bool> performing{false};
    Clock::time_point start, end;
    CURLcode rc = CURLE_OK;
    char errbuf[CURL_ERROR_SIZE] = "";
  } run;
  Runtime rt(threads());
  auto h = rt.sched.spawn([&] {
    CURL* e = easy_init();
    if (e == nullptr) return;
    const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/sleep/10";  // held 10 s
    setopt(e, CURLOPT_URL, url.c_str());
    setopt(e, CURLOPT_NOSIGNAL, 1L);
    setopt(e, CURLOPT_TIMEOUT, 30L);
    setopt(e, CURLOPT_WRITEFUNCTION, &discard);
    setopt(e, CURLOPT_ERRORBUFFER, run.errbuf);
    run.start = Clock::now();
    run.performing.store(true);
    run.rc = perform(e);
    run.end = Clock::now();
    cleanup(e);
  });
  ASSERT_TRUE(wait_for([&] { return run.performing.load() || h.done(); }, 10s));
  std::this_thread::sleep_for(100ms);
  const auto cancel_at = Clock::now();
  h.cancel();
  h.join();
  ASSERT_TRUE(run.performing.load()) << "curl_easy_init failed";
  const double ret_ms = ms_between(cancel_at, run.end);
  std::printf(
      "[hook] libcurl (%s): GET held 10 s cancelled after %.1f ms: curl_easy_perform returned %d (\"%s\"%s%s) %.1f "
      "ms after cancel()\n",
      describe(rt).c_str(), ms_between(run.start, cancel_at), static_cast<int>(run.rc), strerror_(run.rc),
      run.errbuf[0] ? ": " : "", run.errbuf, ret_ms);
  EXPECT_NE(run.rc, CURLE_OK);
  EXPECT_GE(ms_between(run.start, run.end), 100.0) << "the GET ended before the cancel";
  EXPECT_LE(ret_ms, 500.0 * kSlack);
}

TEST_P(HookCancelThirdParty, MariadbSleepEndsAtTheDeadline) {
  if (my_ == nullptr) {
    my_ = new LibMariaDb;
    my_loaded_ = my_->load();
  }
  ASSERT_TRUE(my_loaded_) << "libmariadb.so.3 not found (Debian: libmariadb-dev): run scripts/install-deps.sh";
  double boot_ms = 0;
  if (!mariadb_) {
    const auto boot = Clock::now();
    mariadb_ = std::make_unique<MariaDbServer>(*my_);
    boot_ms = ms_between(boot, Clock::now());
  }
  ASSERT_TRUE(mariadb_->error().empty()) << mariadb_->error();
  const LibMariaDb& my = *my_;
  const uint16_t port = mariadb_->port();

  // A new session's SELECT 1 in the fiber: "" if it worked, else mysql_error.
  auto session = [&]() -> std::string {
    void* m = my.init(nullptr);
    if (m == nullptr) return "mysql_init returned NULL";
    std::string why;
    if (my.real_connect(m, "127.0.0.1", "root", "", nullptr, port, nullptr, 0) == nullptr || my.query(m, "SELECT 1"))
      why = my.error(m);
    else if (void* res = my.store_result(m)) my.free_result(res);
    my.close(m);
    return why;
  };
  struct {
    std::string connect_error;
    Clock::time_point start, end, close_start, close_end;
    int rc = 0;
    unsigned err = 0;
    std::string error;
    int interruption = 0;
    std::string later;  // a new session in the expired scope, unshielded
    double later_ms = 0;
    std::string shielded;  // the same in a CancelShield
  } run;
  Runtime rt(threads());
  rt.sched
      .spawn([&] {
        void* m = my.init(nullptr);
        if (m == nullptr) {
          run.connect_error = "mysql_init returned NULL";
          return;
        }
        if (my.real_connect(m, "127.0.0.1", "root", "", nullptr, port, nullptr, 0) == nullptr) {
          run.connect_error = my.error(m);
          my.close(m);
          return;
        }
        run.start = Clock::now();
        {
          DeadlineScope d(200ms);
          run.rc = my.query(m, "SELECT SLEEP(10)");
          run.end = Clock::now();
          run.interruption = this_fiber::interruption();
          run.err = my.errnum(m);
          run.error = my.error(m);
          if (run.rc == 0) {
            if (void* res = my.store_result(m)) my.free_result(res);
          }
          // Still in the expired scope: a new session never waits (fails, or completes at once)...
          const auto t = Clock::now();
          run.later = session();
          run.later_ms = ms_between(t, Clock::now());
          // ...unless shielded.
          CancelShield shield;
          run.shielded = session();
        }
        run.close_start = Clock::now();
        my.close(m);
        run.close_end = Clock::now();
      })
      .join();
  ASSERT_TRUE(run.connect_error.empty()) << "mysql_real_connect: " << run.connect_error;
  const double ms = ms_between(run.start, run.end);
  std::printf(
      "[hook] mariadb (%s): SELECT SLEEP(10) in a 200 ms DeadlineScope: mysql_query failed after %.1f ms (%u: "
      "\"%s\"), mysql_close %.1f ms; then in the expired scope a new session failed in %.1f ms (\"%s\"), one in a "
      "CancelShield %s%s\n",
      describe(rt).c_str(), ms, run.err, run.error.c_str(), ms_between(run.close_start, run.close_end), run.later_ms,
      run.later.c_str(), run.shielded.empty() ? "worked" : ("failed: " + run.shielded).c_str(),
      boot_ms > 0
          ? (" (the server took " + std::to_string(static_cast<int>(boot_ms)) + " ms to install and start)").c_str()
          : "");
  EXPECT_NE(run.rc, 0) << "mysql_query succeeded: the query was not interrupted";
  EXPECT_NE(run.err, 0u);
  EXPECT_EQ(run.interruption, ETIMEDOUT);
  EXPECT_GE(ms, 200.0);
  EXPECT_LE(ms, 600.0 * kSlack);
  EXPECT_LT(ms_between(run.close_start, run.close_end), 100.0 * kSlack) << "mysql_close after the failure";
  // A new session in the expired scope never waits: it fails at once where it would have to
  // wait, and may complete where the server's bytes are already there (localhost, io_uring's
  // inline completion): what cancel.h promises for calls that need not wait.
  EXPECT_LT(run.later_ms, 50.0 * kSlack) << run.later;
  EXPECT_EQ(run.shielded, "") << "in a CancelShield";
}

}  // namespace
}  // namespace lionet
