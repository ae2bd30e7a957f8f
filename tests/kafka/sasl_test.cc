// lionet/kafka/sasl.h + acl.h, and SASL through the server over a raw socket: RFC 7677's
// SCRAM-SHA-256 test vector; RFC 5802's flow with a client written here (SHA-256 and SHA-512:
// the server's signature checked, a wrong password, an unknown user answered like a wrong
// password, a changed nonce or channel binding refused); PLAIN (RFC 4616); the message
// parsers' refusals; the users file (comments, CRLF, bad lines named by number without the
// password, mode 0644 refused naming the file); ACL patterns. Over the socket: ApiVersions
// advertises SaslHandshake/SaslAuthenticate, any other API before authentication closes the
// connection, an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM listing the enabled ones, a
// wrong password SASL_AUTHENTICATION_FAILED with a message and then the close, the v0 flow of
// bare tokens, and per-user permissions answering TOPIC_/GROUP_AUTHORIZATION_FAILED in place.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "kafka_test_util.h"
#include "lionet/base/base64.h"
#include "lionet/kafka/acl.h"
#include "lionet/kafka/protocol.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/kafka/sasl.h"
#include "lionet/storage/store.h"

namespace lionet::kafka {
namespace {
using testing::KafkaFixture;
using testing::RawClient;

const EVP_MD* md_of(SaslMechanism m) { return m == SaslMechanism::kScramSha512 ? EVP_sha512() : EVP_sha256(); }

std::string hmac(const EVP_MD* md, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(md, key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

// A SCRAM client (RFC 5802 section 3), for the server to talk to.
struct ScramClient {
  SaslMechanism mech;
  std::string user, password, nonce = "fyko+d2lbbFgONRv9qkxdawL";
  std::string first_bare, server_first, auth_message, salted;

  std::string first() {
    first_bare = "n=" + user + ",r=" + nonce;
    return "n,," + first_bare;
  }
  // The client-final for `sf`; "" when sf is not well formed.
  std::string final_for(const std::string& sf) {
    server_first = sf;
    const auto r = sf.find("r="), s = sf.find(",s="), i = sf.find(",i=");
    if (r != 0 || s == std::string::npos || i == std::string::npos) return "";
    const std::string full_nonce = sf.substr(2, s - 2);
    const std::string salt = *base64_decode(sf.substr(s + 3, i - s - 3));
    const int iters = std::stoi(sf.substr(i + 3));
    const EVP_MD* md = md_of(mech);
    salted.assign(static_cast<std::size_t>(EVP_MD_get_size(md)), '\0');
    PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                      reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()), iters, md,
                      static_cast<int>(salted.size()), reinterpret_cast<unsigned char*>(salted.data()));
    const std::string without_proof = "c=biws,r=" + full_nonce;
    auth_message = first_bare + "," + server_first + "," + without_proof;
    const std::string client_key = hmac(md, salted, "Client Key");
    unsigned char h[EVP_MAX_MD_SIZE];
    unsigned int hn = 0;
    EVP_Digest(client_key.data(), client_key.size(), h, &hn, md, nullptr);
    const std::string sig = hmac(md, std::string(reinterpret_cast<char*>(h), hn), auth_message);
    std::string proof = client_key;
    for (std::size_t k = 0; k < proof.size(); ++k) proof[k] = static_cast<char>(proof[k] ^ sig[k]);
    return without_proof + ",p=" + base64_encode(proof);
  }
  std::string expected_server_final() const {
    const EVP_MD* md = md_of(mech);
    return "v=" + base64_encode(hmac(md, hmac(md, salted, "Server Key"), auth_message));
  }
};

std::unique_ptr<SaslUsers> users(std::string_view text = "alice:alice-secret\nbob:bob-secret\n") {
  std::string err;
  auto u = SaslUsers::parse(text, err);
  EXPECT_TRUE(u) << err;
  return u;
}

TEST(KafkaSasl, ScramSha256MatchesTheTestVectorOfRfc7677) {
  // RFC 7677 section 3: user "user", password "pencil".
  SaslUsers u;
  SaslUsers::User cred;
  cred.sha256 =
      scram_credential(SaslMechanism::kScramSha256, "pencil", *base64_decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096);
  u.set("user", cred);
  SaslExchange x(u, SaslMechanism::kScramSha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
  std::string out;
  ASSERT_EQ(x.step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO", out), SaslExchange::Step::kContinue) << x.error();
  EXPECT_EQ(out, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
  ASSERT_EQ(
      x.step("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7"
             "AndVQ=",
             out),
      SaslExchange::Step::kDone)
      << x.error();
  EXPECT_EQ(out, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
  EXPECT_EQ(x.principal(), "user");
}

TEST(KafkaSasl, ScramFlowOfRfc5802WithSha256AndSha512) {
  auto u = users();
  for (SaslMechanism m : {SaslMechanism::kScramSha256, SaslMechanism::kScramSha512}) {
    SCOPED_TRACE(std::string(mechanism_name(m)));
    {  // the right password: the server proves it knows the credential too
      ScramClient c{m, "alice", "alice-secret"};
      SaslExchange x(*u, m);
      std::string sf, sfinal;
      ASSERT_EQ(x.step(c.first(), sf), SaslExchange::Step::kContinue) << x.error();
      EXPECT_NE(sf.find(",i=4096"), std::string::npos) << sf;
      ASSERT_EQ(x.step(c.final_for(sf), sfinal), SaslExchange::Step::kDone) << x.error();
      EXPECT_EQ(sfinal, c.expected_server_final());
      EXPECT_EQ(x.principal(), "alice");
    }
    {  // a wrong password
      ScramClient c{m, "alice", "wrong"};
      SaslExchange x(*u, m);
      std::string sf, out;
      ASSERT_EQ(x.step(c.first(), sf), SaslExchange::Step::kContinue);
      EXPECT_EQ(x.step(c.final_for(sf), out), SaslExchange::Step::kFailed);
      EXPECT_NE(x.error().find("invalid credentials"), std::string::npos) << x.error();
      EXPECT_EQ(x.step(c.final_for(sf), out), SaslExchange::Step::kFailed);  // over
    }
    {  // an unknown user gets a server-first like anyone (a stable salt), then the same failure
      ScramClient c{m, "mallory", "x"};
      SaslExchange x(*u, m), y(*u, m);
      std::string sf, sf2, out;
      ASSERT_EQ(x.step(c.first(), sf), SaslExchange::Step::kContinue);
      ASSERT_EQ(y.step(c.first(), sf2), SaslExchange::Step::kContinue);
      EXPECT_EQ(sf.substr(sf.find(",s=")), sf2.substr(sf2.find(",s=")));
      EXPECT_EQ(x.step(c.final_for(sf), out), SaslExchange::Step::kFailed);
      EXPECT_NE(x.error().find("invalid credentials"), std::string::npos) << x.error();
    }
    {  // a nonce other than the exchange's, a channel binding other than the gs2 header
      ScramClient c{m, "bob", "bob-secret"};
      SaslExchange x(*u, m);
      std::string sf, out;
      ASSERT_EQ(x.step(c.first(), sf), SaslExchange::Step::kContinue);
      std::string f = c.final_for(sf);
      std::string bad = f;
      bad.replace(bad.find(",r=") + 3, 1, "Z");
      EXPECT_EQ(x.step(bad, out), SaslExchange::Step::kFailed);
      SaslExchange y(*u, m);
      ASSERT_EQ(y.step(c.first(), sf), SaslExchange::Step::kContinue);
      f = c.final_for(sf);
      f.replace(0, 6, "c=eSws");  // "y,," instead of "n,,"
      EXPECT_EQ(y.step(f, out), SaslExchange::Step::kFailed);
    }
  }
}

TEST(KafkaSasl, PlainChecksThePasswordAgainstTheSaltedCredential) {
  auto u = users();
  std::string out;
  SaslExchange ok(*u, SaslMechanism::kPlain);
  EXPECT_EQ(ok.step(std::string("\0bob\0bob-secret", 15), out), SaslExchange::Step::kDone) << ok.error();
  EXPECT_EQ(ok.principal(), "bob");
  EXPECT_EQ(out, "");
  SaslExchange authz(*u, SaslMechanism::kPlain);
  EXPECT_EQ(authz.step(std::string("bob\0bob\0bob-secret", 18), out), SaslExchange::Step::kDone) << authz.error();
  for (const std::string& bad : {std::string("\0bob\0wrong", 10), std::string("\0eve\0bob-secret", 15),
                                std::string("alice\0bob\0bob-secret", 20), std::string("\0bob", 4),
                                std::string("\0\0x", 3), std::string("\0bob\0", 5)}) {
    SaslExchange x(*u, SaslMechanism::kPlain);
    EXPECT_EQ(x.step(bad, out), SaslExchange::Step::kFailed);
    EXPECT_EQ(x.error().find("secret"), std::string::npos);
  }
}

TEST(KafkaSasl, ParsersRefuseMalformedScramMessages) {
  ScramClientFirst f;
  EXPECT_EQ(parse_scram_client_first("n,,n=us=2Cer=3D,r=abc,ext=1", f), nullptr);
  EXPECT_EQ(f.user, "us,er=");
  EXPECT_EQ(f.nonce, "abc");
  EXPECT_EQ(f.gs2_header, "n,,");
  EXPECT_EQ(parse_scram_client_first("n,a=bob,n=bob,r=abc", f), nullptr);
  for (const char* bad :
       {"", "n", "n,", "x,,n=u,r=a", "p=tls-unique,,n=u,r=a", "n,,m=x,n=u,r=a", "n,,n=,r=a", "n,,n=u",
        "n,,n=u,r=", "n,,n=u=2X,r=a", "n,,r=a,n=u", "n,a=eve,n=bob,r=a", "n,,n=u,r=a b", "n,,n=u,r=a,x"}) {
    EXPECT_NE(parse_scram_client_first(bad, f), nullptr) << bad;
  }
  ScramClientFinal c;
  EXPECT_EQ(parse_scram_client_final("c=biws,r=abc,p=AAAA", c), nullptr);
  EXPECT_EQ(c.without_proof, "c=biws,r=abc");
  for (const char* bad : {"", "c=biws,r=abc", "c=biws,r=abc,p=", "r=abc,p=AAAA", "c=biws,p=AAAA", "c=biws,r=,p=AAAA"})
    EXPECT_NE(parse_scram_client_final(bad, c), nullptr) << bad;
  EXPECT_FALSE(base64_decode("AAA"));
  EXPECT_FALSE(base64_decode("A==="));
  EXPECT_FALSE(base64_decode("AB=="));  // non-canonical trailing bits
  EXPECT_EQ(*base64_decode("AA=="), std::string(1, '\0'));
}

TEST(KafkaSasl, UsersFileSkipsCommentsAndNamesBadLinesWithoutThePassword) {
  std::string err;
  auto u = SaslUsers::parse("# users\n\n  # indented comment\r\nalice:pa:ss\r\nbob:x\n", err, 16);
  ASSERT_TRUE(u) << err;
  EXPECT_EQ(u->size(), 2u);
  EXPECT_TRUE(u->find("alice"));
  EXPECT_FALSE(u->find("carol"));
  SaslExchange x(*u, SaslMechanism::kPlain);  // the password is everything after the first ':'
  std::string out;
  EXPECT_EQ(x.step(std::string("\0alice\0pa:ss", 12), out), SaslExchange::Step::kDone);
  struct Bad {
    const char* text;
    const char* error;
  };
  for (const Bad& b : {Bad{"alice:ok\nnocolon-secret\n", "line 2: expected name:password"},
                       Bad{":secret1\n", "line 1: empty user name"}, Bad{"alice:\n", "line 1: empty password"},
                       Bad{"a:secret1\nb:x\na:secret2\n", "line 3: user 'a' is given twice"},
                       Bad{"a\tb:secret1\n", "line 1: a control character"}}) {
    EXPECT_FALSE(SaslUsers::parse(b.text, err, 16)) << b.text;
    EXPECT_NE(err.find(b.error), std::string::npos) << err;
    EXPECT_EQ(err.find("secret"), std::string::npos) << err;
  }
}

TEST(KafkaSasl, UsersFileMustBeReadableByItsOwnerOnly) {
  char tmpl[] = "/var/tmp/lionet-sasl-test-XXXXXX";
  ASSERT_TRUE(::mkdtemp(tmpl));
  const std::string path = std::string(tmpl) + "/users.txt";
  std::ofstream(path) << "alice:secret\n";
  ::chmod(path.c_str(), 0644);
  std::string err;
  EXPECT_FALSE(SaslUsers::load(path, err));
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("0644"), std::string::npos) << err;
  EXPECT_NE(SaslUsers::check_file(path).find("chmod 600"), std::string::npos);
  ::chmod(path.c_str(), 0600);
  EXPECT_TRUE(SaslUsers::load(path, err, 16)) << err;
  EXPECT_EQ(SaslUsers::check_file(path), "");
  ::chmod(path.c_str(), 0400);
  EXPECT_EQ(SaslUsers::check_file(path), "");
  EXPECT_NE(SaslUsers::check_file(path + ".missing").find("cannot open"), std::string::npos);
  std::ofstream(path, std::ios::trunc) << "alice:secret\nbroken\n";
  ::chmod(path.c_str(), 0600);
  EXPECT_NE(SaslUsers::check_file(path).find("line 2"), std::string::npos);
  std::filesystem::remove_all(tmpl);
}

TEST(KafkaSasl, AclPatternsAndTheDefaultEntry) {
  EXPECT_TRUE(name_matches("*", "anything"));
  EXPECT_TRUE(name_matches("orders*", "orders"));
  EXPECT_TRUE(name_matches("orders*", "orders-eu"));
  EXPECT_FALSE(name_matches("orders*", "order"));
  EXPECT_TRUE(name_matches("orders", "orders"));
  EXPECT_FALSE(name_matches("orders", "orders-eu"));
  EXPECT_EQ(Acl().for_user("alice"), nullptr);  // no ACLs: everything allowed
  Acl a({{"alice", {{"orders"}, {"orders*"}, {"*"}}}, {"*", {{}, {"public*"}, {}}}});
  const Permissions* alice = a.for_user("alice");
  ASSERT_TRUE(alice);
  EXPECT_TRUE(alice->may_produce("orders"));
  EXPECT_FALSE(alice->may_produce("orders-eu"));
  EXPECT_TRUE(alice->may_consume("orders-eu"));
  EXPECT_TRUE(alice->may_describe("orders-eu"));
  EXPECT_TRUE(alice->may_use_group("g"));
  const Permissions* bob = a.for_user("bob");  // the "*" entry
  ASSERT_TRUE(bob);
  EXPECT_TRUE(bob->may_consume("public-news"));
  EXPECT_FALSE(bob->may_produce("public-news"));
  EXPECT_FALSE(bob->may_use_group("g"));
  Acl strict({{"alice", {{"*"}, {"*"}, {"*"}}}});
  ASSERT_TRUE(strict.for_user("bob"));  // neither an entry nor "*": nothing
  EXPECT_FALSE(strict.for_user("bob")->may_describe("x"));
}

// ---------------------------------------------------------------- over the server

ServerOptions sasl_options(std::string_view acl_user = "") {
  ServerOptions o;
  auto cfg = std::make_shared<SaslConfig>();
  cfg->mechanisms = {SaslMechanism::kScramSha256, SaslMechanism::kPlain};
  std::string err;
  cfg->users = SaslUsers::parse("alice:alice-secret\nbob:bob-secret\n", err, 64);
  if (!acl_user.empty()) cfg->acl = Acl({{std::string(acl_user), {{"allowed*"}, {"allowed*"}, {"good*"}}}});
  o.broker.sasl = std::move(cfg);
  return o;
}

int16_t handshake(RawClient& c, std::string_view mech, int16_t version, std::vector<std::string>* listed = nullptr) {
  const int32_t corr = c.send(17, version, [&](Writer& w) { w.string(mech); });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  const int16_t err = r.i16();
  const int32_t n = r.array_count();
  for (int32_t i = 0; i < n; ++i) {
    const auto s = r.string();
    if (listed) listed->emplace_back(s);
  }
  EXPECT_TRUE(r.ok() && r.at_end());
  return err;
}

struct AuthAnswer {
  int16_t error = -99;
  std::optional<std::string> message;
  std::string bytes;
};

AuthAnswer authenticate(RawClient& c, std::string_view token, int16_t version = 1) {
  const int32_t corr = c.send(36, version, [&](Writer& w) { w.bytes(token); });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  AuthAnswer a;
  a.error = r.i16();
  if (auto m = r.nullable_string()) a.message = std::string(*m);
  a.bytes = std::string(r.bytes());
  if (version >= 1) {
    EXPECT_EQ(r.i64(), 0);
  }
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return a;
}

int16_t metadata_error(RawClient& c, const std::string& topic) {
  const int32_t corr = c.send(3, 4, [&](Writer& w) {
    w.array_count(1);
    w.string(topic);
    w.boolean(true);
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  r.i32();
  const int32_t nb = r.array_count();
  for (int32_t i = 0; i < nb; ++i) {
    r.i32();
    r.string();
    r.i32();
    r.nullable_string();
  }
  r.nullable_string();
  r.i32();
  EXPECT_EQ(r.array_count(), 1);
  return r.i16();
}

void plain_login(RawClient& c, const std::string& user, const std::string& password) {
  ASSERT_EQ(handshake(c, "PLAIN", 1), 0);
  const AuthAnswer a = authenticate(c, std::string("\0", 1) + user + std::string("\0", 1) + password);
  ASSERT_EQ(a.error, 0) << a.message.value_or("");
}

TEST(KafkaSaslServer, OnlyTheSaslApisAreServedBeforeAuthentication) {
  KafkaFixture fx(storage::FlushPolicy::kNone, sasl_options());
  {
    RawClient c(fx.port());
    const int32_t corr = c.send(18, 2, nullptr);
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    EXPECT_EQ(r.i16(), 0);
    bool hs = false, auth = false;
    for (int32_t i = 0, n = r.array_count(); i < n; ++i) {
      const int16_t k = r.i16();
      r.i16();
      const int16_t max = r.i16();
      hs |= k == 17 && max == 1;
      auth |= k == 36 && max == 2;
    }
    EXPECT_TRUE(hs && auth);
    c.send(3, 4, [](Writer& w) {
      w.array_count(0);
      w.boolean(false);
    });
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawClient c(fx.port());
    std::vector<std::string> listed;
    EXPECT_EQ(handshake(c, "GSSAPI", 1, &listed), 33);
    EXPECT_EQ(listed, (std::vector<std::string>{"SCRAM-SHA-256", "PLAIN"}));
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawClient c(fx.port());
    ASSERT_EQ(handshake(c, "PLAIN", 1), 0);
    const AuthAnswer a = authenticate(c, std::string("\0alice\0wrong", 12));
    EXPECT_EQ(a.error, 58);
    EXPECT_NE(a.message.value_or("").find("invalid credentials"), std::string::npos);
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawClient c(fx.port());
    plain_login(c, "alice", "alice-secret");
    EXPECT_EQ(metadata_error(c, "t1"), 0);  // served, and auto-created
  }
  {  // SaslAuthenticate v2, the flexible version (header v2, compact fields, tagged fields)
    RawClient c(fx.port());
    ASSERT_EQ(handshake(c, "PLAIN", 1), 0);
    const std::string token("\0bob\0bob-secret", 15);
    const int32_t corr = c.send(36, 2, [&](Writer& w) {
      w.uvarint(0);  // the request header's tagged fields
      w.compact_bytes(token);
      w.uvarint(0);
    });
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    EXPECT_EQ(r.uvarint32(), 0u);  // response header v1
    EXPECT_EQ(r.i16(), 0);
    EXPECT_EQ(r.uvarint32(), 0u);  // null error message
    EXPECT_EQ(r.compact_bytes(), "");
    EXPECT_EQ(r.i64(), 0);
    r.skip_tagged_fields();
    EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
    EXPECT_EQ(metadata_error(c, "t1"), 0);
  }
  {  // a SCRAM-SHA-256 exchange in SaslAuthenticate v0
    RawClient c(fx.port());
    ASSERT_EQ(handshake(c, "SCRAM-SHA-256", 1), 0);
    ScramClient sc{SaslMechanism::kScramSha256, "bob", "bob-secret"};
    const AuthAnswer first = authenticate(c, sc.first(), 0);
    ASSERT_EQ(first.error, 0);
    const AuthAnswer fin = authenticate(c, sc.final_for(first.bytes), 0);
    ASSERT_EQ(fin.error, 0) << fin.message.value_or("");
    EXPECT_EQ(fin.bytes, sc.expected_server_final());
    EXPECT_EQ(metadata_error(c, "t1"), 0);
  }
  const BrokerStats s = fx.server().broker().stats();
  EXPECT_EQ(s.sasl_ok[static_cast<int>(SaslMechanism::kPlain)], 2u);
  EXPECT_EQ(s.sasl_ok[static_cast<int>(SaslMechanism::kScramSha256)], 1u);
  EXPECT_EQ(s.sasl_failed[static_cast<int>(SaslMechanism::kPlain)], 1u);
  EXPECT_EQ(s.unauthenticated, 1u);
}

TEST(KafkaSaslServer, TheV0HandshakeCarriesBareTokens) {
  KafkaFixture fx(storage::FlushPolicy::kNone, sasl_options());
  auto bare = [](RawClient& c, const std::string& token) {
    std::string f;
    Writer w(f);
    w.i32(static_cast<int32_t>(token.size()));
    w.raw(token);
    c.send_raw(f);
  };
  {
    RawClient c(fx.port());
    ASSERT_EQ(handshake(c, "PLAIN", 0), 0);
    bare(c, std::string("\0bob\0bob-secret", 15));
    char sz[4];
    ASSERT_EQ(::read(c.fd(), sz, 4), 4);  // an empty token: success
    EXPECT_EQ(std::string(sz, 4), std::string(4, '\0'));
    EXPECT_EQ(metadata_error(c, "t2"), 0);
  }
  {
    RawClient c(fx.port());
    ASSERT_EQ(handshake(c, "SCRAM-SHA-256", 0), 0);
    ScramClient sc{SaslMechanism::kScramSha256, "alice", "alice-secret"};
    bare(c, sc.first());
    const std::string sf = c.recv();
    bare(c, sc.final_for(sf));
    EXPECT_EQ(c.recv(), sc.expected_server_final());
    EXPECT_EQ(metadata_error(c, "t2"), 0);
  }
  {
    RawClient c(fx.port());
    ASSERT_EQ(handshake(c, "PLAIN", 0), 0);
    bare(c, std::string("\0bob\0nope", 9));
    EXPECT_TRUE(c.closed_by_server());
  }
}

TEST(KafkaSaslServer, PermissionsAnswerAuthorizationFailuresInPlace) {
  KafkaFixture fx(storage::FlushPolicy::kNone, sasl_options("alice"));
  storage::TopicOptions to;
  to.name = "secret";
  ASSERT_TRUE(fx.store().create_topic(to));
  RawClient c(fx.port());
  plain_login(c, "alice", "alice-secret");
  EXPECT_EQ(metadata_error(c, "allowed-1"), 0);
  EXPECT_EQ(metadata_error(c, "secret"), 29);
  EXPECT_EQ(metadata_error(c, "never-made"), 29);
  EXPECT_FALSE(fx.store().describe("never-made"));  // not auto-created for a refused user
  // Produce v7 to the refused topic: TOPIC_AUTHORIZATION_FAILED in the partition's place.
  std::string records;
  encode_batch(std::vector<OutRecord>{{0, 1, std::string_view("k"), std::string_view("v"), {}}}, records);
  for (const std::string topic : {"secret", "allowed-1"}) {
    const int32_t corr = c.send(0, 7, [&](Writer& w) {
      w.nullable_string(std::nullopt);
      w.i16(-1);
      w.i32(5000);
      w.array_count(1);
      w.string(topic);
      w.array_count(1);
      w.i32(0);
      w.nullable_bytes(std::string_view(records));
    });
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    EXPECT_EQ(r.array_count(), 1);
    r.string();
    EXPECT_EQ(r.array_count(), 1);
    r.i32();
    EXPECT_EQ(r.i16(), topic == "secret" ? 29 : 0) << topic;
  }
  // FindCoordinator v2 and JoinGroup v5 for a group outside "good*": GROUP_AUTHORIZATION_FAILED.
  for (const std::string group : {"bad", "good-1"}) {
    const int32_t corr = c.send(10, 2, [&](Writer& w) {
      w.string(group);
      w.i8(0);
    });
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();
    EXPECT_EQ(r.i16(), group == "bad" ? 30 : 0);
  }
  const int32_t corr = c.send(11, 5, [&](Writer& w) {
    w.string("bad");
    w.i32(10000);
    w.i32(10000);
    w.string("");
    w.nullable_string(std::nullopt);
    w.string("consumer");
    w.array_count(1);
    w.string("range");
    w.bytes("");
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  r.i32();
  EXPECT_EQ(r.i16(), 30);
  const BrokerStats s = fx.server().broker().stats();
  EXPECT_GE(s.topic_denied, 3u);
  EXPECT_EQ(s.group_denied, 2u);
}

}  // namespace
}  // namespace lionet::kafka
