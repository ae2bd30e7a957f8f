// tests/hook/third_party_util.h: the real third-party servers the hook tests run against and the
// loaders of their client libraries, shared by hook_third_party_test.cc and
// hook_cancel_third_party_test.cc. Every server listens on 127.0.0.1 only, on a free private
// port, and is killed (and its scratch directory removed) when its object dies. The client
// libraries are loaded with dlopen, so hook_tests needs no link dependency on them; their
// read/write/poll/connect calls bind to the hooks this executable exports exactly as they would
// if linked normally. A missing package makes the test FAIL with a message naming
// scripts/install-deps.sh, never skip.
#pragma once

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace lionet::hook_test {

inline uint16_t free_local_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return 0;
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool port_accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// A server process on 127.0.0.1, stopped with stop_signal (then SIGKILL after 2 s) when the
// object dies. Its stdout goes to /dev/null (start-up banners).
class ServerProcess {
 public:
  ServerProcess(std::vector<std::string> argv, uint16_t port, int stop_signal = SIGTERM) : stop_signal_(stop_signal) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);  // quiet start-up banners
    const int rc = ::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
    ::posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      return;
    }
    for (int i = 0; i < 200 && !ready_; ++i) {  // up to 10 s to come up
      ready_ = port_accepts(port);
      if (!ready_) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {  // it exited: no point waiting on
          pid_ = -1;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  ~ServerProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, stop_signal_);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  bool ready() const { return ready_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
  int stop_signal_;
};

inline void* open_lib(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_GLOBAL)) return h;
  }
  return nullptr;
}

template <class T>
T sym(void* lib, const char* name) {
  return reinterpret_cast<T>(::dlsym(lib, name));
}

// argv run through the shell, its output (stdout and stderr) into the file `log` (written by
// this process's shell, as root if we are); the exit status as system() gives it.
inline int run_logged(const std::vector<std::string>& argv, const std::string& log) {
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  return std::system((cmd + ">'" + log + "' 2>&1").c_str());
}
// The same with its output discarded.
inline int run_quiet(const std::vector<std::string>& argv) { return run_logged(argv, "/dev/null"); }

// argv run as `user` when we are root (setpriv execs: no process in between). Database servers
// refuse to run as root.
inline std::vector<std::string> as_user(const std::string& user, std::vector<std::string> argv) {
  if (::geteuid() != 0) return argv;
  std::vector<std::string> v{"setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups", "--"};
  v.insert(v.end(), argv.begin(), argv.end());
  return v;
}
inline std::vector<std::string> as_postgres(std::vector<std::string> argv) { return as_user("postgres", argv); }
inline std::vector<std::string> as_mysql(std::vector<std::string> argv) { return as_user("mysql", argv); }

// A scratch directory (mkdtemp of tmpl, which ends in XXXXXX), owned by `owner` when we are
// root, removed with everything in it when the object dies.
class TempDir {
 public:
  explicit TempDir(std::string tmpl, const std::string& owner = "") {
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    path_ = tmpl;
    if (!owner.empty() && ::geteuid() == 0 && run_quiet({"chown", owner + ":" + owner, path_}) != 0)
      chown_failed_ = true;
  }
  ~TempDir() {
    if (!path_.empty()) run_quiet({"rm", "-rf", path_});
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty() && !chown_failed_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool chown_failed_ = false;
};

// The last `lines` lines of a text file (a server's error log, for a failure message).
inline std::string tail_of(const std::string& file, int lines = 15) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out.empty() ? "(" + file + " is empty or missing)\n" : out;
}

// A python3 http.server on 127.0.0.1:argv[1] that holds each GET before answering "hello <path>":
// 0.2 s, or N seconds for a path /sleep/N.
constexpr const char* kHttpServer = R"PY(
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(float(self.path[len("/sleep/"):]) if self.path.startswith("/sleep/") else 0.2)
        body = ("hello " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
)PY";

// ---- PostgreSQL: libpq's synchronous API and a server of the test's own ----

// libpq (libpq5), its handles as void*: no libpq header needed to build.
struct LibPq {
  void* lib = nullptr;
  void* (*connectdb)(const char*) = nullptr;
  int (*status)(const void*) = nullptr;
  char* (*error_message)(const void*) = nullptr;
  void* (*exec)(void*, const char*) = nullptr;
  int (*result_status)(const void*) = nullptr;
  int (*ntuples)(const void*) = nullptr;
  char* (*getvalue)(const void*, int, int) = nullptr;
  void (*clear)(void*) = nullptr;
  void (*finish)(void*) = nullptr;
  int (*backend_pid)(const void*) = nullptr;
  void* (*get_cancel)(void*) = nullptr;  // PQgetCancel
  int (*cancel)(void*, char*, int) = nullptr;  // PQcancel
  void (*free_cancel)(void*) = nullptr;  // PQfreeCancel
  bool load() {
    lib = open_lib({"libpq.so.5", "libpq.so"});
    if (!lib) return false;
    connectdb = sym<decltype(connectdb)>(lib, "PQconnectdb");
    status = sym<decltype(status)>(lib, "PQstatus");
    error_message = sym<decltype(error_message)>(lib, "PQerrorMessage");
    exec = sym<decltype(exec)>(lib, "PQexec");
    result_status = sym<decltype(result_status)>(lib, "PQresultStatus");
    ntuples = sym<decltype(ntuples)>(lib, "PQntuples");
    getvalue = sym<decltype(getvalue)>(lib, "PQgetvalue");
    clear = sym<decltype(clear)>(lib, "PQclear");
    finish = sym<decltype(finish)>(lib, "PQfinish");
    backend_pid = sym<decltype(backend_pid)>(lib, "PQbackendPID");
    get_cancel = sym<decltype(get_cancel)>(lib, "PQgetCancel");
    cancel = sym<decltype(cancel)>(lib, "PQcancel");
    free_cancel = sym<decltype(free_cancel)>(lib, "PQfreeCancel");
    return connectdb && status && error_message && exec && result_status && ntuples && getvalue && clear && finish &&
           backend_pid && get_cancel && cancel && free_cancel;
  }
};
constexpr int kConnectionOk = 0;  // CONNECTION_OK
constexpr int kCommandOk = 1;  // PGRES_COMMAND_OK
constexpr int kTuplesOk = 2;  // PGRES_TUPLES_OK

inline std::string postgres_bin_dir() {
  for (const char* v : {"17", "16", "15", "14", "13"}) {
    std::string d = std::string("/usr/lib/postgresql/") + v + "/bin";
    if (::access((d + "/postgres").c_str(), X_OK) == 0 && ::access((d + "/initdb").c_str(), X_OK) == 0) return d;
  }
  return "";
}

// initdb into a scratch directory and postgres on a free port of 127.0.0.1 (as the `postgres`
// user when run as root: the server refuses root), trust authentication for user postgres.
// Construct on a plain thread; error() is empty once a real session has been taken. The
// destructor stops it with SIGINT (fast shutdown: sessions still running a query are ended, so
// one that a test left in pg_sleep cannot hold the shutdown) and removes the directory.
class PostgresServer {
 public:
  PostgresServer(const LibPq& pq, int max_connections = 200) {
    const std::string bin = postgres_bin_dir();
    if (bin.empty()) {
      error_ = "PostgreSQL server not installed (/usr/lib/postgresql/*/bin): run scripts/install-deps.sh";
      return;
    }
    dir_ = std::make_unique<TempDir>("/tmp/lionet-pg-XXXXXX", "postgres");
    if (!dir_->ok()) {
      error_ = "cannot make a scratch directory owned by postgres under /tmp";
      return;
    }
    const std::string dir = dir_->path();
    if (run_quiet(as_postgres(
            {bin + "/initdb", "-D", dir + "/data", "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"})) != 0) {
      error_ = "initdb failed";
      return;
    }
    port_ = free_local_port();
    if (port_ == 0) {
      error_ = "no free port on 127.0.0.1";
      return;
    }
    server_ = std::make_unique<ServerProcess>(
        as_postgres({bin + "/postgres", "-D", dir + "/data", "-p", std::to_string(port_), "-k", dir, "-c",
                     "listen_addresses=127.0.0.1", "-c", "max_connections=" + std::to_string(max_connections), "-c",
                     "fsync=off", "-c", "logging_collector=off"}),
        port_, SIGINT);
    if (!server_->ready()) {
      error_ = "postgres did not start on 127.0.0.1:" + std::to_string(port_);
      return;
    }
    conninfo_ = "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres connect_timeout=20";
    // The port accepts before startup has ended (a session then fails with "the database system
    // is starting up", seen once in make test): wait for one real session, from this plain thread.
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {  // up to 10 s
      void* c = pq.connectdb(conninfo_.c_str());
      up = pq.status(c) == kConnectionOk;
      pq.finish(c);
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!up) error_ = "postgres on 127.0.0.1:" + std::to_string(port_) + " never took a session";
  }
  ~PostgresServer() { server_.reset(); }  // then dir_ goes
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  const std::string& error() const { return error_; }
  const std::string& conninfo() const { return conninfo_; }
  uint16_t port() const { return port_; }

 private:
  std::unique_ptr<TempDir> dir_;  // declared first: removed after the server has stopped
  std::unique_ptr<ServerProcess> server_;
  std::string error_;
  std::string conninfo_;
  uint16_t port_ = 0;
};

// ---- MariaDB: its C client (libmariadb3, Connector/C) and a server of the test's own ----

// libmariadb.so.3, MYSQL* and MYSQL_RES* as void*: no header needed to build.
struct LibMariaDb {
  void* lib = nullptr;
  void* (*init)(void*) = nullptr;  // mysql_init
  void* (*real_connect)(void*, const char* host, const char* user, const char* passwd, const char* db, unsigned port,
                        const char* unix_socket, unsigned long flags) = nullptr;
  int (*query)(void*, const char*) = nullptr;
  const char* (*error)(void*) = nullptr;  // mysql_error
  unsigned (*errnum)(void*) = nullptr;  // mysql_errno
  void* (*store_result)(void*) = nullptr;
  char** (*fetch_row)(void*) = nullptr;
  void (*free_result)(void*) = nullptr;
  void (*close)(void*) = nullptr;
  bool load() {
    lib = open_lib({"libmariadb.so.3", "libmariadb.so"});
    if (!lib) return false;
    init = sym<decltype(init)>(lib, "mysql_init");
    real_connect = sym<decltype(real_connect)>(lib, "mysql_real_connect");
    query = sym<decltype(query)>(lib, "mysql_query");
    error = sym<decltype(error)>(lib, "mysql_error");
    errnum = sym<decltype(errnum)>(lib, "mysql_errno");
    store_result = sym<decltype(store_result)>(lib, "mysql_store_result");
    fetch_row = sym<decltype(fetch_row)>(lib, "mysql_fetch_row");
    free_result = sym<decltype(free_result)>(lib, "mysql_free_result");
    close = sym<decltype(close)>(lib, "mysql_close");
    return init && real_connect && query && error && errnum && store_result && fetch_row && free_result && close;
  }
};

// mariadb-install-db into a scratch directory, then mariadbd on a free port of 127.0.0.1 with
// that datadir and a socket in it (as the `mysql` user when run as root), no defaults files
// read. User root has no password (--auth-root-authentication-method=normal makes root@127.0.0.1
// a password user with an empty password). Construct on a plain thread (it also makes the first
// mysql_init, which initialises the library and is not thread-safe); error() is empty once a
// real session has run SELECT 1, and otherwise says why, with the tail of the server's log.
class MariaDbServer {
 public:
  static constexpr const char* kServer = "/usr/sbin/mariadbd";
  static constexpr const char* kInstallDb = "/usr/bin/mariadb-install-db";

  explicit MariaDbServer(const LibMariaDb& my) {
    if (::access(kServer, X_OK) != 0 || ::access(kInstallDb, X_OK) != 0) {
      error_ = std::string("MariaDB server not installed (") + kServer + ", " + kInstallDb +
               "; Debian package mariadb-server): run scripts/install-deps.sh";
      return;
    }
    dir_ = std::make_unique<TempDir>("/tmp/lionet-my-XXXXXX", "mysql");
    if (!dir_->ok()) {
      error_ = "cannot make a scratch directory owned by mysql under /tmp";
      return;
    }
    const std::string dir = dir_->path();
    log_ = dir + "/error.log";
    // mariadb-install-db failed once in 0.6 s in a whole ASan run (its output was not kept then):
    // it is the third-party server's set-up, not what the tests check, so a failure is printed
    // with its output and the set-up tried once more in a fresh datadir.
    const std::string install_log = dir + "/install.log";
    for (int attempt = 1;; ++attempt) {
      const std::string data = dir + "/data" + std::to_string(attempt);
      if (run_logged(as_mysql({kInstallDb, "--no-defaults", "--datadir=" + data,
                               "--auth-root-authentication-method=normal", "--skip-test-db"}),
                     install_log) == 0) {
        data_ = data;
        break;
      }
      const std::string why =
          "mariadb-install-db --no-defaults --datadir=" + data + " failed; its output:\n" + tail_of(install_log);
      if (attempt == 2) {
        error_ = why;
        return;
      }
      std::fprintf(stderr, "%s\n(trying once more)\n", why.c_str());
    }
    port_ = free_local_port();
    if (port_ == 0) {
      error_ = "no free port on 127.0.0.1";
      return;
    }
    server_ = std::make_unique<ServerProcess>(
        as_mysql({kServer, "--no-defaults", "--datadir=" + data_, "--socket=" + dir + "/mysqld.sock",
                  "--pid-file=" + dir + "/mysqld.pid", "--log-error=" + log_, "--port=" + std::to_string(port_),
                  "--bind-address=127.0.0.1", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                  // small enough for the default RLIMIT_NOFILE (else a warning on stderr at start)
                  "--max-connections=50", "--table-open-cache=400"}),
        port_);
    if (!server_->ready()) {
      error_ = "mariadbd did not start on 127.0.0.1:" + std::to_string(port_) + "; its log:\n" + tail_of(log_);
      return;
    }
    // As for postgres: wait for a real session, which runs a query, from this plain thread.
    std::string last;
    for (int i = 0; i < 200; ++i) {  // up to 10 s
      void* m = my.init(nullptr);
      if (m == nullptr) {
        error_ = "mysql_init failed";
        return;
      }
      bool ok = my.real_connect(m, "127.0.0.1", "root", "", nullptr, port_, nullptr, 0) != nullptr &&
                my.query(m, "SELECT 1") == 0;
      if (ok) {
        void* res = my.store_result(m);
        char** row = res ? my.fetch_row(res) : nullptr;
        ok = row && row[0] && std::string(row[0]) == "1";
        if (res) my.free_result(res);
      } else {
        last = my.error(m);
      }
      my.close(m);
      if (ok) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    error_ = "mariadbd on 127.0.0.1:" + std::to_string(port_) + " never ran SELECT 1 for root (" + last +
             "); its log:\n" + tail_of(log_);
  }
  ~MariaDbServer() { server_.reset(); }  // then dir_ goes
  MariaDbServer(const MariaDbServer&) = delete;
  MariaDbServer& operator=(const MariaDbServer&) = delete;

  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }
  const std::string& log_file() const { return log_; }

 private:
  std::unique_ptr<TempDir> dir_;  // declared first: removed after the server has stopped
  std::unique_ptr<ServerProcess> server_;
  std::string error_;
  std::string log_;
  std::string data_;  // the datadir mariadb-install-db made
  uint16_t port_ = 0;
};

}  // namespace lionet::hook_test
