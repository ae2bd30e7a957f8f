// http/auth.h: the Authorization parsers, the htpasswd and token file parsers (bcrypt only,
// errors naming file:line), bcrypt verification through libxcrypt, constant-time comparison,
// the verified-credential cache (bound, FIFO eviction, invalidation and the generation that
// keeps a verification started before a reload out), the brute-force brake (threshold, window,
// block, bound on addresses), certificate subject/SAN matching, and Authenticator over a real
// server with curl (401 challenges, 200, the cache, 429 + Retry-After).
#include "lionet/http/auth.h"
#include "lionet/base/base64.h"

#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/pem.h>

#include <cstdio>
#include <string>

#include "http_test_util.h"

namespace lionet::http {
namespace {
using namespace std::chrono_literals;

// A bcrypt hash of password at cost 4 (the cheapest: tests stay fast), as htpasswd -B makes.
std::string bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  EXPECT_NE(crypt_gensalt_rn("$2y$", 4, nullptr, 0, salt, sizeof salt), nullptr);
  crypt_data data{};
  const char* h = crypt_rn(password.c_str(), salt, &data, sizeof data);
  EXPECT_NE(h, nullptr);
  return h ? h : "";
}

std::string base64(const std::string& in) { return lionet::base64_encode(in); }

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const AuthFileError& e) {
    return e.what();
  }
  return "";
}

Address v4(uint32_t host_order) {
  Address a;
  auto* in = reinterpret_cast<sockaddr_in*>(a.sockaddr_ptr());
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(host_order);
  in->sin_port = htons(1234);
  a.set_length(sizeof(sockaddr_in));
  return a;
}

TEST(HttpAuthParse, BasicAuthorization) {
  auto c = parse_basic_authorization("Basic " + base64("alice:s3cr:et"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->user, "alice");
  EXPECT_EQ(c->password, "s3cr:et");  // the first ':' splits (RFC 7617: user-ids have none)
  EXPECT_TRUE(parse_basic_authorization("basic   " + base64("a:")));  // scheme case-insensitive
  EXPECT_EQ(parse_basic_authorization("BASIC " + base64("u:p"))->password, "p");
  EXPECT_FALSE(parse_basic_authorization("Basic " + base64("nocolon")));
  EXPECT_FALSE(parse_basic_authorization("Basic"));
  EXPECT_FALSE(parse_basic_authorization("Basic "));
  EXPECT_FALSE(parse_basic_authorization("Basicx " + base64("u:p")));
  EXPECT_FALSE(parse_basic_authorization("Bearer " + base64("u:p")));
  EXPECT_FALSE(parse_basic_authorization("Basic dTpw="));  // bad length
  EXPECT_FALSE(parse_basic_authorization("Basic d=pw"));  // '=' inside
  EXPECT_FALSE(parse_basic_authorization("Basic dT!w"));
  EXPECT_FALSE(parse_basic_authorization("Basic " + base64("u:" + std::string(4000, 'x'))));  // over 4096
}

TEST(HttpAuthParse, BearerAuthorization) {
  EXPECT_EQ(parse_bearer_authorization("Bearer abc-._~+/123=="), "abc-._~+/123==");
  EXPECT_EQ(parse_bearer_authorization("bearer  tok "), "tok");
  EXPECT_FALSE(parse_bearer_authorization("Bearer"));
  EXPECT_FALSE(parse_bearer_authorization("Bearer a b"));
  EXPECT_FALSE(parse_bearer_authorization("Bearer ==a"));
  EXPECT_FALSE(parse_bearer_authorization("Bearer a=b"));
  EXPECT_FALSE(parse_bearer_authorization("Basic abc"));
  EXPECT_TRUE(authorization_scheme_is("Bearer x", "bearer"));
  EXPECT_FALSE(authorization_scheme_is("Bearerx", "bearer"));
}

TEST(HttpAuthParse, HtpasswdAcceptsBcryptOnlyAndNamesTheLine) {
  const std::string h = bcrypt("pw");
  auto e = parse_htpasswd("# users\n\nalice:" + h + "\r\nbob:" + h + "\n", "u.htpasswd");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].user, "alice");
  EXPECT_EQ(e[1].hash, h);
  auto err = [&](const std::string& text) { return error_of([&] { parse_htpasswd(text, "u.htpasswd"); }); };
  EXPECT_EQ(err("ok:" + h + "\nplain:secret\n"),
            "u.htpasswd:2: plain-text or DES crypt entries are refused: only bcrypt is accepted (make them with "
            "htpasswd -B)");
  EXPECT_NE(err("a:$apr1$abc$def\n").find("u.htpasswd:1: MD5-crypt ($apr1$)"), std::string::npos);
  EXPECT_NE(err("a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n").find("SHA-1 ({SHA})"), std::string::npos);
  EXPECT_NE(err("a:$6$salt$hash\n").find("SHA-crypt"), std::string::npos);
  EXPECT_NE(err("a:abJnggxhB/yWI\n").find("DES crypt"), std::string::npos);
  EXPECT_NE(err("a:$2y$05$short\n").find("not a well-formed bcrypt"), std::string::npos);
  EXPECT_NE(err("a:$2y$03$" + h.substr(7) + "\n").find("cost 3"), std::string::npos);
  EXPECT_NE(err("no colon here\n").find("u.htpasswd:1: not user:hash"), std::string::npos);
  EXPECT_NE(err(":" + h + "\n").find("empty user name"), std::string::npos);
  EXPECT_EQ(err("a:" + h + "\na:" + h + "\n"), "u.htpasswd:2: user 'a' is also on line 1");
  // The message never repeats a hash or a password.
  EXPECT_EQ(err("plain:hunter2\n").find("hunter2"), std::string::npos);
}

TEST(HttpAuthParse, TokenFileTakesTokensAndDigests) {
  const Sha256Digest d = sha256("tok-2");
  std::string hex;
  for (unsigned char c : d) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  auto t = parse_token_file("# tokens\n tok-1 \n\nsha256:" + hex + "\ntok-1\n", "t.txt");
  ASSERT_EQ(t.size(), 2u);  // the duplicate kept once
  EXPECT_EQ(t[0], sha256("tok-1"));
  EXPECT_EQ(t[1], d);
  auto err = [&](const std::string& text) { return error_of([&] { parse_token_file(text, "t.txt"); }); };
  EXPECT_NE(err("ok\nbad token\n").find("t.txt:2: not a bearer token"), std::string::npos);
  EXPECT_NE(err("sha256:abc\n").find("t.txt:1: sha256: needs 64 hex digits"), std::string::npos);
  EXPECT_NE(err("sha256:" + std::string(64, 'g') + "\n").find("64 hex digits"), std::string::npos);
  auto tokens = BearerTokens::from_digests(t);
  EXPECT_TRUE(tokens->contains("tok-1"));
  EXPECT_TRUE(tokens->contains("tok-2"));
  EXPECT_FALSE(tokens->contains("tok-3"));
  EXPECT_FALSE(tokens->contains(""));
}

TEST(HttpAuthParse, UnreadableFileIsNamed) {
  EXPECT_EQ(error_of([] { HtpasswdUsers::load("/nonexistent/u.htpasswd"); }),
            "/nonexistent/u.htpasswd: No such file or directory");
  EXPECT_EQ(error_of([] { BearerTokens::load("/nonexistent/t.txt"); }),
            "/nonexistent/t.txt: No such file or directory");
  EXPECT_EQ(error_of([] { HtpasswdUsers::load("/dev/zero"); }), "/dev/zero: not a regular file");
  EXPECT_EQ(error_of([] { BearerTokens::load("/tmp"); }), "/tmp: not a regular file");
}

TEST(HttpAuthVerify, BcryptThroughLibxcrypt) {
  auto users = HtpasswdUsers::from_entries({{"alice", bcrypt("right")}, {"bob", bcrypt("other")}});
  EXPECT_TRUE(users->verify("alice", "right"));
  EXPECT_FALSE(users->verify("alice", "wrong"));
  EXPECT_FALSE(users->verify("alice", ""));
  EXPECT_FALSE(users->verify("bob", "right"));
  EXPECT_FALSE(users->verify("carol", "right"));  // unknown: a decoy bcrypt, then false
  EXPECT_FALSE(HtpasswdUsers::from_entries({})->verify("a", "b"));
  EXPECT_TRUE(constant_time_equal("abc", "abc", 3));
  EXPECT_FALSE(constant_time_equal("abc", "abd", 3));
}

TEST(HttpAuthCache, BoundedFifoAndInvalidatedOnReload) {
  CredentialCache c(8);
  const auto k0 = CredentialCache::key_of("Basic a");
  EXPECT_EQ(k0, CredentialCache::key_of("Basic a"));
  EXPECT_NE(k0, CredentialCache::key_of("Basic b"));
  EXPECT_NE(k0, sha256("Basic a"));  // keyed: not the plain digest
  for (int i = 0; i < 100; ++i) c.insert(CredentialCache::key_of("v" + std::to_string(i)), c.generation());
  EXPECT_EQ(c.size(), 8u);  // the bound
  EXPECT_FALSE(c.contains(CredentialCache::key_of("v0")));  // oldest evicted
  EXPECT_TRUE(c.contains(CredentialCache::key_of("v99")));
  EXPECT_TRUE(c.contains(CredentialCache::key_of("v92")));
  EXPECT_FALSE(c.contains(CredentialCache::key_of("v91")));
  const uint64_t before = c.generation();
  c.clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_FALSE(c.contains(CredentialCache::key_of("v99")));
  c.insert(k0, before);  // verified against the old credentials: dropped
  EXPECT_FALSE(c.contains(k0));
  c.insert(k0, c.generation());
  EXPECT_TRUE(c.contains(k0));
  CredentialCache off(0);
  off.insert(k0, off.generation());
  EXPECT_FALSE(off.contains(k0));
}

TEST(HttpAuthBrake, BlocksAfterMaxFailuresWithinTheWindow) {
  AuthBrake b({.max_failures = 3, .failure_window = 10s, .block_for = 60s, .max_addresses = 100});
  const TimePoint t0 = now();
  const Address a = v4(0x7f000002), other = v4(0x7f000003);
  EXPECT_FALSE(b.failure(a, t0));
  EXPECT_FALSE(b.failure(a, t0 + 1s));
  EXPECT_FALSE(b.blocked(a, t0 + 1s));
  EXPECT_TRUE(b.failure(a, t0 + 2s));  // the third within 10 s
  auto left = b.blocked(a, t0 + 2s);
  ASSERT_TRUE(left);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(*left).count(), 60);
  EXPECT_FALSE(b.blocked(other, t0 + 2s));
  EXPECT_FALSE(b.blocked(a, t0 + 63s));  // block_for over
  // Failures spread wider than the window never block.
  EXPECT_FALSE(b.failure(other, t0));
  EXPECT_FALSE(b.failure(other, t0 + 11s));
  EXPECT_FALSE(b.failure(other, t0 + 22s));
  EXPECT_FALSE(b.blocked(other, t0 + 22s));
  b.success(other);  // a success forgets the count
  EXPECT_FALSE(b.failure(other, t0 + 23s));
  EXPECT_FALSE(b.failure(other, t0 + 24s));
  EXPECT_FALSE(b.blocked(other, t0 + 24s));
}

TEST(HttpAuthBrake, DistinctAddressesCannotGrowItPastTheBound) {
  AuthBrake b({.max_failures = 2, .failure_window = 60s, .block_for = 60s, .max_addresses = 100});
  const TimePoint t0 = now();
  const Address victim = v4(0x0a000001);
  b.failure(victim, t0);
  for (uint32_t i = 0; i < 10000; ++i) b.failure(v4(0x0b000000 + i), t0);
  EXPECT_EQ(b.size(), 100u);
  // The least recently failed address went: the victim's count starts again.
  EXPECT_FALSE(b.failure(victim, t0));
  EXPECT_TRUE(b.failure(victim, t0));
  EXPECT_TRUE(b.blocked(victim, t0));
  EXPECT_EQ(b.size(), 100u);
}

// A CA and a client certificate with a subject and SANs, made by the openssl CLI.
struct ClientCerts {
  std::string dir;
  bool ok = false;
  explicit ClientCerts() {
    char tmpl[] = "/tmp/lionet-auth-cert-XXXXXX";
    dir = mkdtemp(tmpl);
    int st = -1;
    test::shell("cd " + dir +
                    " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "
                    "/CN=test-ca 2>/dev/null"
                    " && openssl req -newkey rsa:2048 -nodes -keyout c.key -out c.csr -subj /O=Example/CN=ops "
                    "2>/dev/null"
                    " && printf 'subjectAltName=DNS:ops.example,email:ops@example.com,URI:spiffe://x/ops\\n' > ext"
                    " && openssl x509 -req -in c.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out c.pem -days 2 "
                    "-extfile ext 2>/dev/null",
                &st);
    ok = st == 0;
  }
  ~ClientCerts() { test::shell("rm -rf " + dir); }
  X509* load() const {
    FILE* f = std::fopen((dir + "/c.pem").c_str(), "r");
    if (!f) return nullptr;
    X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
    std::fclose(f);
    return x;
  }
};

TEST(HttpAuthClientCert, SubjectInRfc2253FormAndSans) {
  ClientCerts c;
  ASSERT_TRUE(c.ok) << "openssl could not make the certificates";
  X509* x = c.load();
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(certificate_subject(x), "CN=ops,O=Example");
  EXPECT_EQ(certificate_sans(x),
            (std::vector<std::string>{"DNS:ops.example", "email:ops@example.com", "URI:spiffe://x/ops"}));
  EXPECT_TRUE((ClientCertRule{{"CN=ops,O=Example"}, {}}.allows(x)));
  EXPECT_FALSE((ClientCertRule{{"CN=ops"}, {}}.allows(x)));
  EXPECT_TRUE((ClientCertRule{{"CN=ops"}, {"URI:spiffe://x/ops"}}.allows(x)));
  EXPECT_FALSE((ClientCertRule{{}, {"DNS:other"}}.allows(x)));
  EXPECT_TRUE((ClientCertRule{}.allows(x)));  // no lists: any verified certificate
  EXPECT_FALSE((ClientCertRule{}.allows(nullptr)));
  X509_free(x);
}

// Authenticator in front of a handler on a real server, with curl.
class HttpAuthServer : public ::testing::Test {
 protected:
  void start(AuthOptions o) {
    auth_ = std::make_shared<Authenticator>(std::move(o));
    server_ =
        std::make_unique<test::TestServer>(auth_->wrap([](Request&, Response& s) { s.reply(200, "secret stuff\n"); }));
    server_->start();
  }
  // "<status> <WWW-Authenticate or Retry-After value>" of a curl request.
  std::string curl(const std::string& args) {
    int st = -1;
    std::string out = test::shell("curl -s -o /dev/null -D - " + args + " " + server_->url("/x") + " 2>&1", &st);
    EXPECT_EQ(st, 0) << "curl failed (is it installed?)";
    std::string status = out.size() > 12 ? out.substr(9, 3) : "?";
    for (const char* h : {"www-authenticate: ", "retry-after: "}) {
      std::string lower = out;
      for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (auto p = lower.find(h); p != std::string::npos) {
        const auto b = p + std::strlen(h);
        status += " " + out.substr(b, out.find('\r', b) - b);
      }
    }
    return status;
  }
  std::shared_ptr<Authenticator> auth_;
  std::unique_ptr<test::TestServer> server_;
};

TEST_F(HttpAuthServer, BasicChallengesVerifiesCachesAndBrakes) {
  start({.kind = AuthKind::kBasic, .realm = "lionet test", .brake = {.max_failures = 3, .block_for = 30s}});
  auth_->set_users(HtpasswdUsers::from_entries({{"alice", bcrypt("right")}}));
  EXPECT_EQ(curl(""), "401 Basic realm=\"lionet test\", charset=\"UTF-8\"");
  EXPECT_EQ(curl("-u alice:right"), "200");
  EXPECT_EQ(auth_->cache().size(), 1u);
  EXPECT_EQ(curl("-u alice:right"), "200");  // from the cache
  EXPECT_EQ(auth_->stats().successes.value(), 2u);
  EXPECT_EQ(curl("-u alice:wrong"), "401 Basic realm=\"lionet test\", charset=\"UTF-8\"");
  // A reload empties the cache: the old password no longer passes by its cached digest.
  auth_->set_users(HtpasswdUsers::from_entries({{"alice", bcrypt("new")}}));
  EXPECT_EQ(auth_->cache().size(), 0u);
  EXPECT_EQ(curl("-u alice:right").substr(0, 3), "401");
  EXPECT_EQ(curl("-u alice:new"), "200");  // a success clears the address's count
  EXPECT_EQ(curl("-u alice:x1").substr(0, 3), "401");
  EXPECT_EQ(curl("-u alice:x2").substr(0, 3), "401");
  EXPECT_EQ(curl("-u alice:x3").substr(0, 3), "401");  // the third failure starts the block
  EXPECT_EQ(curl("-u alice:new"), "429 30");  // even the right password, while blocked
  EXPECT_EQ(auth_->stats().braked.value(), 1u);
  EXPECT_EQ(auth_->stats().failures.value(), 6u);  // none, wrong, old, x1..x3
}

TEST_F(HttpAuthServer, BearerTokens) {
  start({.kind = AuthKind::kBearer, .realm = "api"});
  auth_->set_tokens(BearerTokens::from_digests({sha256("t0ken")}));
  EXPECT_EQ(curl(""), "401 Bearer realm=\"api\"");
  EXPECT_EQ(curl("-H 'Authorization: Bearer t0ken'"), "200");
  EXPECT_EQ(curl("-H 'Authorization: Bearer nope'"), "401 Bearer realm=\"api\", error=\"invalid_token\"");
  EXPECT_EQ(curl("-H 'Authorization: Basic dTpw'"), "401 Bearer realm=\"api\", error=\"invalid_token\"");
}

TEST_F(HttpAuthServer, ClientCertWithoutTlsIsForbidden) {
  start({.kind = AuthKind::kClientCert});
  EXPECT_EQ(curl(""), "403");
}

}  // namespace
}  // namespace lionet::http
