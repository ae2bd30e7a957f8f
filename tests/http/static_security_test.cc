// StaticFiles security: a list of attack request targets (dot-dot in every encoding, encoded
// slashes and backslashes, NUL bytes, overlong UTF-8, double encoding, empty segments,
// absolute-form, symlinks to outside the root, to /etc, through /proc magic links, a FIFO),
// sent as raw bytes (no client normalisation) to a server using openat2 and to one using the
// realpath fallback. Each must be refused by StaticFiles itself (403/404: none of them is left
// to the request parser's 400) and the secret file just outside the root must never appear.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "http_test_util.h"
#include "lionet/http/router.h"
#include "lionet/http/static_files.h"

namespace lionet::http {
namespace {
using test::RawClient;
using test::TestServer;
using namespace std::chrono_literals;

struct Tree {
  std::string dir, root, secret;
  Tree() {
    char tmpl[] = "/tmp/lionet-static-sec-XXXXXX";
    dir = mkdtemp(tmpl);
    root = dir + "/root";
    ::mkdir(root.c_str(), 0755);
    ::mkdir((root + "/sub").c_str(), 0755);
    std::random_device rd;
    secret = "LIONET-SECRET-" + std::to_string(rd()) + "-" + std::to_string(rd());
    put(dir + "/secret.txt", secret);
    put(root + "/public.txt", "public");
    put(root + "/sub/a.txt", "sub a");
    link("..", root + "/link_parent");
    link("../secret.txt", root + "/link_secret");
    link(dir + "/secret.txt", root + "/link_abs_secret");
    link("/etc", root + "/link_etc");
    link("/proc/self/root", root + "/link_proc");
    link("/proc/self/cwd", root + "/link_cwd");
    link("public.txt", root + "/link_inside");
    link("../../secret.txt", root + "/sub/link_up2");
    ::mkfifo((root + "/fifo").c_str(), 0644);
  }
  ~Tree() { test::shell("rm -rf " + dir); }
  static void put(const std::string& p, const std::string& d) { std::ofstream(p, std::ios::binary) << d; }
  static void link(const std::string& target, const std::string& at) {
    ASSERT_EQ(::symlink(target.c_str(), at.c_str()), 0) << at;
  }
};

const std::vector<std::string> kAttacks = {
    "/../secret.txt",
    "/../../secret.txt",
    "/..%2fsecret.txt",
    "/..%2Fsecret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/.%2e/secret.txt",
    "/%2e./secret.txt",
    "/%2e%2e%2fsecret.txt",
    "/..%5csecret.txt",
    "/..%5Csecret.txt",
    "/..\\secret.txt",
    "/%5c..%5csecret.txt",
    "/%2e%2e%5csecret.txt",
    "/sub/../../secret.txt",
    "/sub/%2e%2e/%2e%2e/secret.txt",
    "/sub/..%2f..%2fsecret.txt",
    "/sub/%2e%2e%2f%2e%2e%2fsecret.txt",
    "/./../secret.txt",
    "/%2e/%2e%2e/secret.txt",
    "/%00../secret.txt",
    "/..%00/secret.txt",
    "/public.txt%00.html",
    "/%c0%ae%c0%ae/secret.txt",
    "/%c0%ae%c0%ae%c0%afsecret.txt",
    "/%e0%80%ae%e0%80%ae/secret.txt",
    "/%c0%2e%c0%2e/secret.txt",
    "/%252e%252e/secret.txt",
    "/..%252fsecret.txt",
    "/%252e%252e%252fsecret.txt",
    "//../secret.txt",
    "//etc/passwd",
    "///etc/passwd",
    "/%2fetc%2fpasswd",
    "/%2Fetc/passwd",
    "/....//secret.txt",
    "/..;/secret.txt",
    "/..",
    "/%2e%2e",
    "/sub/..",
    "/link_parent/secret.txt",
    "/link_parent",
    "/link_secret",
    "/link_abs_secret",
    "/link_etc/passwd",
    "/link_etc/",
    "/link_proc/etc/passwd",
    "/link_cwd/secret.txt",
    "/sub/link_up2",
    "/fifo",
    "http://127.0.0.1/../secret.txt",
    "http://127.0.0.1/%2e%2e/secret.txt",
    "http://127.0.0.1//etc/passwd",
};

struct Answer {
  int status = 0;
  std::string raw;
};

Answer fetch(uint16_t port, const std::string& target) {
  RawClient c(port);
  c.send("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  Answer a;
  a.raw = c.read_until_closed(5s);
  if (a.raw.size() >= 12 && a.raw.compare(0, 9, "HTTP/1.1 ") == 0) a.status = std::atoi(a.raw.c_str() + 9);
  return a;
}

class StaticSecurity : public ::testing::TestWithParam<bool> {};  // param: realpath fallback

TEST_P(StaticSecurity, AttackPathsNeverServeOutsideRoot) {
  static Tree tree;
  StaticOptions o;
  o.root = tree.root;
  o.force_realpath_check = GetParam();
  StaticFiles files(o);
  Router r;
  r.prefix("GET", "/", files.handler());
  TestServer srv(r.handler());
  srv.start();
  ASSERT_GE(kAttacks.size(), 30u);
  for (const std::string& t : kAttacks) {
    Answer a = fetch(srv.port(), t);
    EXPECT_TRUE(a.status == 403 || a.status == 404) << t << " -> " << a.status << "\n" << a.raw;
    EXPECT_EQ(a.raw.find(tree.secret), std::string::npos) << t << " leaked the secret";
    EXPECT_EQ(a.raw.find("root:x:0:0"), std::string::npos) << t << " leaked /etc/passwd";
  }
  // Legitimate paths still work, including a symlink that stays inside the root.
  EXPECT_EQ(fetch(srv.port(), "/public.txt").status, 200);
  EXPECT_EQ(fetch(srv.port(), "/link_inside").status, 200);
  Answer sub = fetch(srv.port(), "/sub/a.txt");
  EXPECT_EQ(sub.status, 200);
  EXPECT_NE(sub.raw.find("sub a"), std::string::npos);
  EXPECT_EQ(fetch(srv.port(), "/pub%6cic.txt").status, 200) << "percent-encoded ordinary letters decode";
  // Out through a symlink and back in: openat2(RESOLVE_BENEATH) refuses the excursion; the
  // realpath fallback judges only where the file is (inside), so it serves it. Either way no
  // byte from outside the root.
  Answer back = fetch(srv.port(), "/link_parent/root/public.txt");
  EXPECT_EQ(back.status, GetParam() ? 200 : 403);
}

INSTANTIATE_TEST_SUITE_P(Resolver, StaticSecurity, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "RealpathFallback" : "Openat2"; });

TEST(StaticSecurityOptions, FollowSymlinksOutsideRootOnlyWhenAllowed) {
  static Tree tree;
  StaticOptions o;
  o.root = tree.root;
  o.follow_symlinks_outside_root = true;
  StaticFiles files(o);
  Router r;
  r.prefix("GET", "/", files.handler());
  TestServer srv(r.handler());
  srv.start();
  Answer a = fetch(srv.port(), "/link_secret");
  EXPECT_EQ(a.status, 200);
  EXPECT_NE(a.raw.find(tree.secret), std::string::npos) << "allowed by the option";
  // Dot-dot and encoded separators are still refused with the option on.
  for (const char* t : {"/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/sub/../../secret.txt"}) {
    Answer b = fetch(srv.port(), t);
    EXPECT_TRUE(b.status == 404 || b.status == 400) << t << " -> " << b.status;
    EXPECT_EQ(b.raw.find(tree.secret), std::string::npos) << t;
  }
  EXPECT_EQ(fetch(srv.port(), "/fifo").status, 403) << "only regular files, and no hang on a FIFO";
}
}  // namespace
}  // namespace lionet::http
