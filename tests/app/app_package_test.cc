// tests/app/app_package_test.cc: the Debian packages of `make package` (packaging/): cpack
// builds them from this build directory, `dpkg -x` unpacks them into a throwaway root, and the
// unpacked /usr/sbin/lionet serves the unpacked /etc/lionet conf (its /var and /usr/share paths
// and ports pointed into the throwaway root): the page, the storage API and /healthz answer.
// systemd-analyze verify accepts the units, and lintian (scripts/install-deps.sh installs both)
// must report no error.
#include <fstream>
#include <sstream>

#include "tests/app/app_process.h"

namespace lionet::app::testing {
namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
}

TEST(AppPackage, DebInstallsAndTheInstalledBinaryServesTheInstalledConf) {
  const fs::path bin = find_binary();
  ASSERT_FALSE(bin.empty()) << "lionet binary not found (build it, or set TEST_LIONET_BINARY)";
  const fs::path build = bin.parent_path().parent_path();
  ASSERT_TRUE(fs::exists(build / "CPackConfig.cmake")) << build;
  ASSERT_EQ(::system("command -v cpack >/dev/null && command -v dpkg-shlibdeps >/dev/null"), 0)
      << "cpack or dpkg-shlibdeps missing: run scripts/install-deps.sh";
  TempConf work;
  const fs::path out = fs::path(work.path()) / "out";
  const fs::path root = fs::path(work.path()) / "root";
  int rc = -1;
  const std::string log = sh("cd '" + build.string() + "' && cpack -G DEB -B '" + out.string() +
                                 "' -D CPACK_OUTPUT_FILE_PREFIX='" + (out / "packages").string() + "' 2>&1",
                             &rc);
  ASSERT_EQ(rc, 0) << log;
  const fs::path deb = out / "packages" / "lionet_0.1.0-1_amd64.deb";
  const fs::path dev = out / "packages" / "lionet-dev_0.1.0-1_amd64.deb";
  ASSERT_TRUE(fs::exists(deb) && fs::exists(dev)) << log;

  // The control data a user's apt sees.
  const std::string depends = sh("dpkg-deb -f '" + deb.string() + "' Depends");
  EXPECT_NE(depends.find("adduser"), std::string::npos) << depends;
  EXPECT_NE(depends.find("libssl3"), std::string::npos) << depends;  // from dpkg-shlibdeps
  EXPECT_NE(depends.find("libsystemd0"), std::string::npos) << depends;
  const std::string conffiles = sh("dpkg-deb -I '" + deb.string() + "' conffiles");
  EXPECT_NE(conffiles.find("/etc/lionet/server.yml"), std::string::npos) << conffiles;
  EXPECT_NE(sh("dpkg-deb -I '" + deb.string() + "' postinst").find("adduser --system"), std::string::npos);

  ASSERT_EQ(::system(("dpkg -x '" + deb.string() + "' '" + root.string() + "' && dpkg -x '" + dev.string() + "' '" +
                      root.string() + "'")
                         .c_str()),
            0);
  for (const char* f : {"usr/sbin/lionet", "etc/lionet/server.yml", "etc/lionet/storage.yml", "etc/lionet/log.yml",
                        "usr/share/lionet/www/index.html", "lib/systemd/system/lionet.service",
                        "lib/systemd/system/lionet.socket", "etc/logrotate.d/lionet", "usr/share/man/man8/lionet.8.gz",
                        "usr/share/doc/lionet/copyright", "usr/include/lionet/net/tcp_server.h", "usr/lib/liblionet.a",
                        "usr/lib/cmake/lionet/lionetConfig.cmake", "usr/share/lionet/gdb/lionet.py"})
    EXPECT_TRUE(fs::exists(root / f)) << f;

  // The installed conf names the installed paths, and keeps every comment of conf/.
  const std::string server = slurp(root / "etc/lionet/server.yml");
  EXPECT_NE(server.find("root: /usr/share/lionet/www"), std::string::npos);
  EXPECT_NE(server.find("/var/log/lionet/access.log"), std::string::npos);
  EXPECT_EQ(server.find("examples/www, mode"), std::string::npos);
  EXPECT_EQ(server.find("path: var/"), std::string::npos);
  EXPECT_NE(slurp(root / "etc/lionet/storage.yml").find("data_dir: /var/lib/lionet/data"), std::string::npos);
  const std::string shipped = slurp(fs::path(LIONET_SOURCE_DIR) / "conf/server.yml");
  auto comment_lines = [](const std::string& s) {
    int n = 0;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);)
      n += l.find_first_not_of(' ') != std::string::npos && l[l.find_first_not_of(' ')] == '#';
    return n;
  };
  EXPECT_EQ(comment_lines(server), comment_lines(shipped));
  const std::string unit = slurp(root / "lib/systemd/system/lionet.service");
  for (const char* k : {"Type=notify", "ExecStart=/usr/sbin/lionet -c /etc/lionet", "ProtectSystem=strict",
                        "ReadWritePaths=/var/lib/lionet /var/log/lionet", "NoNewPrivileges=yes",
                        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE", "AmbientCapabilities=CAP_NET_BIND_SERVICE",
                        "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID"})
    EXPECT_NE(unit.find(k), std::string::npos) << k;
  // systemd's own check of the units (works without systemd as PID 1); the one complaint
  // allowed is the binary missing at /usr/sbin on this machine (it is in the scratch root).
  const fs::path units = fs::path(work.path()) / "units";
  fs::create_directories(units);
  for (const char* u : {"lionet.service", "lionet.socket"}) fs::copy_file(root / "lib/systemd/system" / u, units / u);
  const std::string verify =
      sh("cd '" + units.string() + "' && systemd-analyze verify --man=no ./lionet.service ./lionet.socket 2>&1");
  std::istringstream vin(verify);
  for (std::string line; std::getline(vin, line);)
    EXPECT_NE(line.find("/usr/sbin/lionet is not executable"), std::string::npos) << line;
  EXPECT_NE(slurp(root / "etc/logrotate.d/lionet").find("--signal=HUP"), std::string::npos);
  // lionet(8) carries the options of --help and every key of REFERENCE.md.
  const std::string man = sh("gzip -dc '" + (root / "usr/share/man/man8/lionet.8.gz").string() + "'");
  for (const char* k : {".SH OPTIONS", "print\\-config", "SIGUSR2", "storage.data_dir", "LIONET_STORAGE_DATA_DIR"})
    EXPECT_NE(man.find(k), std::string::npos) << k;

  // The installed binary on the installed conf, its absolute paths moved into the root and its
  // ports to free ones (the machine may be serving 8080 already).
  const fs::path conf = fs::path(work.path()) / "conf";
  fs::create_directories(conf);
  const int http = free_port(), https = free_port(), echo = free_port(), syslog = free_port();
  for (const char* f : {"server.yml", "storage.yml", "log.yml"}) {
    std::string text = slurp(root / "etc/lionet" / f);
    for (const char* dir : {"/var/lib/lionet", "/var/log/lionet", "/usr/share/lionet"})
      replace_all(text, dir, root.string() + dir);
    replace_all(text, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(http));
    replace_all(text, "127.0.0.1:8443", "127.0.0.1:" + std::to_string(https));
    replace_all(text, "127.0.0.1:8081", "127.0.0.1:" + std::to_string(echo));
    replace_all(text, "127.0.0.1:5514", "127.0.0.1:" + std::to_string(syslog));
    std::ofstream(conf / f) << text;
  }
  const std::string installed = (root / "usr/sbin/lionet").string();
  const std::string version = sh("'" + installed + "' --version");
  EXPECT_NE(version.find("systemd: yes"), std::string::npos) << version;
  ::setenv("TEST_LIONET_BINARY", installed.c_str(), 1);
  Process p({"-c", conf.string()});
  ::unsetenv("TEST_LIONET_BINARY");
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("running with")) << p.output();
  const std::string base = "http://127.0.0.1:" + std::to_string(http);
  const Curl page = curl(base + "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, slurp(root / "usr/share/lionet/www/index.html"));
  EXPECT_EQ(curl(base + "/healthz").status, 200);
  EXPECT_EQ(curl("-d installed " + base + "/topics/pkg/partitions/0/records").status, 201);
  const Curl rec = curl("'" + base + "/topics/pkg/partitions/0/records?offset=0'");
  EXPECT_EQ(rec.status, 200);
  EXPECT_NE(rec.body.find("\"value\":\"installed\""), std::string::npos) << rec.body;
  EXPECT_EQ(curl("-k https://127.0.0.1:" + std::to_string(https) + "/healthz").status, 200);
  EXPECT_TRUE(fs::is_directory(root / "var/lib/lionet/data/pkg-0")) << "storage outside the installed data_dir";
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();

  // lintian: no error (warnings are listed in the test's output).
  ASSERT_EQ(::system("command -v lintian >/dev/null"), 0) << "lintian missing: run scripts/install-deps.sh";
  const std::string lint = sh("lintian --tag-display-limit 0 '" + deb.string() + "' '" + dev.string() + "' 2>&1", &rc);
  std::printf("lintian:\n%s", lint.c_str());
  EXPECT_EQ(lint.find("\nE: "), std::string::npos) << lint;
  EXPECT_NE(lint.rfind("E: ", 0), 0u) << lint;
}
}  // namespace
}  // namespace lionet::app::testing
