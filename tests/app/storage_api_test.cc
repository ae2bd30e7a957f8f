// Tests of lionet/app/storage_api.h (the log store over HTTP) and lionet/app/storage_binding.h
// (the storage: YAML section), in process: a real Scheduler + IOManager + http::Server on
// 127.0.0.1:0 serving add_storage_routes() over a Store in a temporary directory, driven by
// lionet::http::Client (and a raw socket where the client would refuse to send the bytes).
// Every response body is parsed by a strict JSON reader below, so "valid JSON" is checked,
// not assumed.
#include "lionet/app/storage_api.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "lionet/app/storage_binding.h"
#include "lionet/http/client.h"
#include "lionet/storage/file_system.h"
#include "tests/http/http_test_util.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using http::test::RawClient;
using http::test::TestServer;

// ---- A strict JSON reader (RFC 8259): enough to check every byte the API sends. ----------
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  std::string text;  // number as written, or the decoded string (UTF-8)
  std::vector<Json> items;
  // An object's members in order: names[i] names values[i]. (Not a vector of pair<string, Json>:
  // a pair of the incomplete Json is ill-formed, and clang says so.)
  std::vector<std::string> names;
  std::vector<Json> values;

  const Json* get(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return &values[i];
    return nullptr;
  }
  std::string str(std::string_view name) const {
    const Json* j = get(name);
    return j && j->kind == kString ? j->text : "<missing " + std::string(name) + ">";
  }
  int64_t num(std::string_view name) const {
    const Json* j = get(name);
    return j && j->kind == kNumber ? std::strtoll(j->text.c_str(), nullptr, 10) : INT64_MIN;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view s) : s_(s) {}
  // The one value in s (whitespace around it allowed); nullopt if s is not exactly that.
  std::optional<Json> document() {
    Json j;
    ws();
    if (!value(j)) return std::nullopt;
    ws();
    if (i_ != s_.size()) return std::nullopt;
    return j;
  }

 private:
  bool value(Json& j) {
    if (++depth_ > 32 || i_ >= s_.size()) return false;
    bool ok = false;
    const char c = s_[i_];
    if (c == '{') ok = object(j);
    else if (c == '[') ok = array(j);
    else if (c == '"') ok = (j.kind = Json::kString, string(j.text));
    else if (c == '-' || (c >= '0' && c <= '9')) ok = number(j);
    else if (lit("true")) ok = (j.kind = Json::kBool, j.b = true);
    else if (lit("false")) ok = (j.kind = Json::kBool, true);
    else if (lit("null")) ok = true;
    --depth_;
    return ok;
  }
  bool lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool digits() {
    const size_t at = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > at;
  }
  bool number(Json& j) {
    const size_t at = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;  // no leading zeros: "007" is not JSON
    else if (!digits()) return false;
    if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits())) return false;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return false;
    }
    j.kind = Json::kNumber;
    j.text = s_.substr(at, i_ - at);
    return true;
  }
  static void utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  bool hex4(uint32_t& v) {
    if (i_ + 4 > s_.size()) return false;
    v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    return true;
  }
  // Also checks that the raw bytes are UTF-8 (JSON text must be).
  bool string(std::string& out) {
    ++i_;  // '"'
    while (i_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        const char e = s_[i_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp;
            if (!hex4(cp)) return false;
            if (cp >= 0xd800 && cp < 0xdc00) {
              uint32_t lo;
              if (!lit("\\u") || !hex4(lo) || lo < 0xdc00 || lo > 0xdfff) return false;
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
              return false;
            }
            utf8(out, cp);
            break;
          }
          default: return false;
        }
        continue;
      }
      int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
      if (n < 0 || i_ + n >= s_.size()) return false;
      uint32_t cp = n == 0 ? c : c & (0x3f >> n);
      for (int k = 1; k <= n; ++k) {
        const auto d = static_cast<unsigned char>(s_[i_ + k]);
        if ((d & 0xc0) != 0x80) return false;
        cp = (cp << 6) | (d & 0x3f);
      }
      static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
      if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
      out.append(s_.substr(i_, n + 1));
      i_ += n + 1;
    }
    return false;
  }
  bool array(Json& j) {
    j.kind = Json::kArray;
    ++i_;
    ws();
    if (lit("]")) return true;
    for (;;) {
      Json item;
      ws();
      if (!value(item)) return false;
      j.items.push_back(std::move(item));
      ws();
      if (lit("]")) return true;
      if (!lit(",")) return false;
    }
  }
  bool object(Json& j) {
    j.kind = Json::kObject;
    ++i_;
    ws();
    if (lit("}")) return true;
    for (;;) {
      ws();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"' || !string(key)) return false;
      ws();
      if (!lit(":")) return false;
      ws();
      Json v;
      if (!value(v)) return false;
      j.names.push_back(std::move(key));
      j.values.push_back(std::move(v));
      ws();
      if (lit("}")) return true;
      if (!lit(",")) return false;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
};

std::optional<Json> parse_json(std::string_view s) { return JsonReader(s).document(); }

std::string base64_decode(std::string_view b64) {
  std::string out(b64.size() / 4 * 3 + 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (n < 0) return "<bad base64>";
  out.resize(static_cast<size_t>(n));
  // EVP_DecodeBlock keeps the zero bytes that '=' padding stands for.
  if (b64.size() >= 1 && b64.back() == '=') out.pop_back();
  if (b64.size() >= 2 && b64[b64.size() - 2] == '=') out.pop_back();
  return out;
}

std::string percent_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// One record as the GET returns it, decoded (either the text field or its _base64 twin).
struct ReadRecord {
  int64_t offset = -1;
  int64_t timestamp = -1;
  std::string key, value;
};

// ---- A FileSystem whose fdatasync fails on demand (a disk that lost our writes). ----------
class FailingSyncFs final : public storage::FileSystem {
 public:
  std::atomic<bool> fail_sync{false};

  Result<std::unique_ptr<storage::File>> open(const std::string& path, bool create) override {
    auto f = base_.open(path, create);
    if (!f) return f.error();
    return std::unique_ptr<storage::File>(new FailingFile(std::move(f.value()), this));
  }
  Result<std::vector<std::string>> list(const std::string& dir) override { return base_.list(dir); }
  Result<void> create_dirs(const std::string& dir) override { return base_.create_dirs(dir); }
  Result<void> remove(const std::string& path) override { return base_.remove(path); }
  Result<void> sync_dir(const std::string& dir) override { return base_.sync_dir(dir); }

 private:
  class FailingFile final : public storage::File {
   public:
    FailingFile(std::unique_ptr<storage::File> f, FailingSyncFs* fs) : f_(std::move(f)), fs_(fs) {}
    Result<std::size_t> pread(void* buf, std::size_t n, uint64_t off) override { return f_->pread(buf, n, off); }
    Result<void> pwrite(const void* buf, std::size_t n, uint64_t off) override { return f_->pwrite(buf, n, off); }
    Result<void> datasync() override {
      if (fs_->fail_sync.load()) return errno_error(EIO);
      return f_->datasync();
    }
    Result<void> truncate(uint64_t size) override { return f_->truncate(size); }
    Result<void> allocate(uint64_t size) override { return f_->allocate(size); }
    Result<uint64_t> size() override { return f_->size(); }

   private:
    std::unique_ptr<storage::File> f_;
    FailingSyncFs* fs_;
  };
  storage::FileSystem& base_ = storage::default_file_system();
};

// ---- The fixture: a Store, a Router with the storage routes, a Server, a Client. ----------
// Routes: /topics over store_ (options from start()), and /fixed over a second store with
// auto_create_topics off and one configured topic "orders" of 2 partitions.
class StorageApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lionet-storage-api-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void start(storage::StoreOptions so = {}, StorageApiOptions ao = {}, http::ServerOptions ho = {}) {
    so_ = so;
    ao_ = ao;
    ho_ = ho;
    so.data_dir = dir_ + "/main";
    auto s = storage::Store::open(so);
    ASSERT_TRUE(s) << s.error().message();
    store_ = std::move(s.value());
    storage::StoreOptions fixed;
    fixed.data_dir = dir_ + "/fixed";
    fixed.auto_create_topics = false;
    fixed.topics.push_back({.name = "orders", .partitions = 2});
    auto f = storage::Store::open(fixed);
    ASSERT_TRUE(f) << f.error().message();
    fixed_ = std::move(f.value());
    router_ = std::make_unique<http::Router>();
    add_storage_routes(*router_, "/topics", *store_, stats_, ao);
    add_storage_routes(*router_, "/fixed/", *fixed_, stats_, ao);
    ho.refusal = router_->refusal_handler();  // as the lionet binary's servers
    server_ = std::make_unique<TestServer>(router_->handler(), ho);
    server_->start();
  }
  // Pooled client connections first (one made in a fiber is registered with the server's
  // IOManager, and a Socket that outlives its IOManager crashes in its destructor), then the
  // server (its handlers use the stores), then the stores (closing flushes).
  void stop() {
    client_.close_idle();
    server_.reset();
    router_.reset();
    store_.reset();
    fixed_.reset();
  }
  // The same data directories and options, a new server on a new port.
  void restart() {
    stop();
    start(so_, ao_, ho_);
  }

  std::string url(std::string_view path) const { return server_->url(std::string(path)); }
  static std::string records(std::string_view topic, std::string_view p = "0") {
    return "/topics/" + std::string(topic) + "/partitions/" + std::string(p) + "/records";
  }

  http::ClientResponse request(std::string method, std::string path, std::string body = {},
                               std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::ClientRequest q;
    q.method = std::move(method);
    q.url = url(path);
    q.body = std::move(body);
    q.headers = std::move(headers);
    auto r = client_.request(q);
    EXPECT_TRUE(r) << q.method << " " << path << ": " << r.error().message();
    return r ? std::move(r.value()) : http::ClientResponse{};
  }
  http::ClientResponse post(std::string path, std::string body, std::string ctype = "application/octet-stream") {
    return request("POST", std::move(path), std::move(body), {{"Content-Type", std::move(ctype)}});
  }
  http::ClientResponse get(std::string path) { return request("GET", std::move(path)); }

  // POSTs one record; returns its offset (checks the 201 answer's shape).
  int64_t append(std::string_view topic, std::string value, std::string_view key = {}) {
    std::string path = records(topic);
    if (!key.empty()) path += "?key=" + percent_encode(key);
    auto r = post(path, std::move(value));
    EXPECT_EQ(r.status, 201) << r.body;
    auto j = parse_json(r.body);
    EXPECT_TRUE(j) << "not JSON: " << r.body;
    if (!j) return -1;
    EXPECT_EQ(j->str("topic"), topic);
    EXPECT_EQ(j->num("partition"), 0);
    EXPECT_EQ(j->num("count"), 1);
    const Json* offs = j->get("offsets");
    EXPECT_TRUE(offs && offs->items.size() == 1) << r.body;
    return j->num("base_offset");
  }

  // GETs records; parses every line (each must be one JSON object); *next gets X-Next-Offset.
  std::vector<ReadRecord> read(std::string_view path_and_query, int64_t* next = nullptr) {
    auto r = get(std::string(path_and_query));
    EXPECT_EQ(r.status, 200) << path_and_query << " -> " << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/x-ndjson");
    if (next) *next = std::strtoll(std::string(r.header("X-Next-Offset")).c_str(), nullptr, 10);
    EXPECT_FALSE(r.header("X-Next-Offset").empty());
    std::vector<ReadRecord> out;
    std::string_view rest = r.body;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      EXPECT_NE(nl, std::string_view::npos) << "last line without a newline";
      const std::string_view line = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      auto j = parse_json(line);
      EXPECT_TRUE(j && j->kind == Json::kObject) << "not a JSON object: " << line;
      if (!j) continue;
      ReadRecord rec;
      rec.offset = j->num("offset");
      rec.timestamp = j->num("timestamp");
      rec.key = j->get("key_base64") ? base64_decode(j->str("key_base64")) : j->str("key");
      rec.value = j->get("value_base64") ? base64_decode(j->str("value_base64")) : j->str("value");
      EXPECT_EQ(!!j->get("key") + !!j->get("key_base64"), 1) << line;
      EXPECT_EQ(!!j->get("value") + !!j->get("value_base64"), 1) << line;
      out.push_back(std::move(rec));
    }
    return out;
  }

  // Asserts an error answer: the status, a JSON {"error": "..."} containing `words`.
  void expect_error(const http::ClientResponse& r, int status, std::string_view words, std::string_view what) {
    EXPECT_EQ(r.status, status) << what << " -> " << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/json") << what;
    auto j = parse_json(r.body);
    ASSERT_TRUE(j && j->kind == Json::kObject) << what << ": not a JSON object: " << r.body;
    EXPECT_NE(j->str("error").find(words), std::string::npos) << what << " -> " << r.body;
  }

  std::string dir_;
  storage::StoreOptions so_;
  StorageApiOptions ao_;
  http::ServerOptions ho_;
  std::unique_ptr<storage::Store> store_, fixed_;
  std::unique_ptr<http::Router> router_;
  std::unique_ptr<TestServer> server_;
  StorageApiStats stats_;
  http::Client client_;
};

std::string all_bytes() {
  std::string s;
  for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
  return s;
}

TEST_F(StorageApiTest, SingleAppendReadsBackKeyAndValueIntact) {
  start();
  // JSON-special characters, every control character, DEL, and multi-byte UTF-8 (2, 3, 4 bytes).
  std::string special = "quote\" backslash\\ slash/ caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 ";
  for (int c = 0; c < 0x20; ++c) special += static_cast<char>(c);
  special += '\x7f';
  struct Case {
    std::string key, value;
  };
  const std::vector<Case> cases = {
      {"", "hello"},
      {"k 1/\xc3\xa9", special},
      {std::string("\xff\x00key", 5), all_bytes()},  // neither is UTF-8: both sent as base64
      {"plain", std::string("\xc0\xaf", 2)},  // an overlong '/' is not UTF-8 either
      {"surrogate", "\xed\xa0\x80"},  // nor is an encoded surrogate
      {"", std::string(1, '\0')},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(append("t1", cases[i].value, cases[i].key), static_cast<int64_t>(i));
  }
  int64_t next = -1;
  auto got = read(records("t1") + "?offset=0", &next);
  ASSERT_EQ(got.size(), cases.size());
  EXPECT_EQ(next, static_cast<int64_t>(cases.size()));
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(got[i].offset, static_cast<int64_t>(i));
    EXPECT_EQ(got[i].key, cases[i].key) << i;
    EXPECT_EQ(got[i].value, cases[i].value) << i;
    EXPECT_GT(got[i].timestamp, now_ms - 60'000);
    EXPECT_LE(got[i].timestamp, now_ms + 1000);
  }
  // The documented rule: text that is UTF-8 goes as a JSON string, other bytes as base64, and so
  // does text whose escapes would more than double it (33 control characters of 64 bytes).
  auto raw = get(records("t1") + "?offset=1&max_bytes=1");
  EXPECT_NE(raw.body.find("\"value_base64\":"), std::string::npos) << raw.body;
  EXPECT_NE(raw.body.find("\"key\":\"k 1/\xc3\xa9\""), std::string::npos) << raw.body;
  // 8 KiB of NUL bytes: base64 (about 11 KiB), not 48 KiB of \u0000.
  const int64_t nul_at = append("t1", std::string(8192, '\0'), "nul");
  auto nul = get(records("t1") + "?offset=" + std::to_string(nul_at) + "&max_bytes=1");
  EXPECT_NE(nul.body.find("\"value_base64\":\"AAAA"), std::string::npos) << nul.body.substr(0, 200);
  EXPECT_LT(nul.body.size(), 2u * 8192) << "escaped instead of base64";
  // A little escaping stays a JSON string.
  const int64_t text_at = append("t1", "line 1\nline 2\ttab \x01", "text");
  auto text = get(records("t1") + "?offset=" + std::to_string(text_at) + "&max_bytes=1");
  EXPECT_NE(text.body.find("\"value\":\"line 1\\nline 2\\ttab \\u0001\""), std::string::npos) << text.body;
  auto bin = get(records("t1") + "?offset=2&max_bytes=1");
  EXPECT_NE(bin.body.find("\"key_base64\":\"/wBrZXk=\""), std::string::npos) << bin.body;
  // A later offset alone.
  got = read(records("t1") + "?offset=4&max_bytes=1");
  ASSERT_GE(got.size(), 1u);
  EXPECT_EQ(got[0].value, "\xed\xa0\x80");
  // The partition in the answer is the number, not the path segment ("00" is not JSON).
  auto zero = post("/topics/t1/partitions/00/records", "z");
  ASSERT_EQ(zero.status, 201) << zero.body;
  auto zj = parse_json(zero.body);
  ASSERT_TRUE(zj) << "not JSON: " << zero.body;
  EXPECT_EQ(zj->num("partition"), 0);
  EXPECT_EQ(zj->num("base_offset"), 8);
  // A plain '+' in the key is a space (form encoding), %2B a plus.
  EXPECT_EQ(append("t1", "v", "a+b"), 9);
  auto r = post(records("t1") + "?key=x+y", "w");
  EXPECT_EQ(r.status, 201);
  got = read(records("t1") + "?offset=9");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].key, "a+b");
  EXPECT_EQ(got[1].key, "x y");
}

TEST_F(StorageApiTest, NdjsonBodyIsOneBatchWithConsecutiveOffsets) {
  start();
  EXPECT_EQ(append("b", "first"), 0);
  auto r = post(records("b"), "{\"a\":1}\n{\"b\":2}\nthree\n", "application/x-ndjson");
  ASSERT_EQ(r.status, 201) << r.body;
  auto j = parse_json(r.body);
  ASSERT_TRUE(j) << r.body;
  EXPECT_EQ(j->num("base_offset"), 1);
  EXPECT_EQ(j->num("count"), 3);  // the final newline is not a fourth, empty record
  ASSERT_EQ(j->get("offsets")->items.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(j->get("offsets")->items[i].text, std::to_string(1 + i));
  // One batch: a one-byte read at its first offset still returns all three records, and a read
  // from the middle returns the rest of it.
  auto got = read(records("b") + "?offset=1&max_bytes=1");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].value, "{\"a\":1}");
  EXPECT_EQ(got[1].value, "{\"b\":2}");
  EXPECT_EQ(got[2].value, "three");
  got = read(records("b") + "?offset=2&max_bytes=1");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].offset, 2);
  // No final newline; CRLF line ends (ndjson allows them) lose their CR; media type
  // parameters and letter case do not matter; ?key= keys every record of the batch.
  r = post(records("b") + "?key=user%2042", "x\r\ny", "Application/X-NDJSON; charset=utf-8");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(parse_json(r.body)->num("base_offset"), 4);
  got = read(records("b") + "?offset=4");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].value, "x");
  EXPECT_EQ(got[1].value, "y");
  EXPECT_EQ(got[0].key, "user 42");
  EXPECT_EQ(got[1].key, "user 42");
  // Another media type that merely starts with the same letters is one plain record.
  r = post(records("b"), "p\nq\n", "application/x-ndjsonish");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(parse_json(r.body)->num("count"), 1);
  // The batch counts once in appends and thrice in records.
  EXPECT_EQ(stats_.appends.value(), 4u);
  EXPECT_EQ(stats_.append_records.value(), 1u + 3u + 2u + 1u);
}

TEST_F(StorageApiTest, MaxBytesPagesThroughAndOffsetDefaultsToTheStart) {
  StorageApiOptions ao;
  ao.default_read_bytes = 1000;
  ao.max_read_bytes = 2000;
  start({}, ao);
  // Stored in Kafka's batch format: 61 bytes of batch header + 9 of record varints + the value
  // (101-102 bytes here) = 171-172 bytes per one-record batch.
  const std::string value(100, 'v');
  constexpr int kRecords = 50;
  for (int i = 0; i < kRecords; ++i) ASSERT_EQ(append("page", value + std::to_string(i)), i);
  // Page with max_bytes=500 following X-Next-Offset: every record exactly once, in order.
  std::vector<int64_t> seen;
  int64_t offset = 0;
  for (int page = 0; page < 2 * kRecords && offset < kRecords; ++page) {
    int64_t next = -1;
    auto got = read(records("page") + "?offset=" + std::to_string(offset) + "&max_bytes=500", &next);
    ASSERT_FALSE(got.empty());
    EXPECT_LE(got.size(), 3u);  // 2 x 172 <= 500 < 3 x 171
    for (const auto& r : got) {
      EXPECT_EQ(r.value, value + std::to_string(r.offset));
      seen.push_back(r.offset);
    }
    EXPECT_EQ(next, got.back().offset + 1);
    offset = next;
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; ++i) EXPECT_EQ(seen[i], i);
  // At the end: 200, no records, X-Next-Offset stays.
  int64_t next = -1;
  EXPECT_TRUE(read(records("page") + "?offset=50", &next).empty());
  EXPECT_EQ(next, 50);
  // No max_bytes: default_read_bytes (5 x 172 <= 1000 < 6 x 171); a huge one: capped at
  // max_read_bytes (11 x 172 <= 2000 < 12 x 171).
  EXPECT_EQ(read(records("page")).size(), 5u);
  EXPECT_EQ(read(records("page") + "?max_bytes=99999999999").size(), 11u);
  // No offset: the partition's start, which retention moved past 0.
  stop();
  storage::StoreOptions so;
  so.log.segment_bytes = 1024;  // the smallest a Log takes: six 160-byte batches a segment
  so.log.retention_bytes = 1000;  // keep about the last 1000 bytes
  start(so, ao);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(append("page", value), kRecords + i);  // rolls
  ASSERT_TRUE(store_->enforce_retention());
  storage::Log* log = store_->log("page", 0).value();
  ASSERT_GT(log->start_offset(), 0);
  auto got = read(records("page") + "?max_bytes=1");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].offset, log->start_offset());
  // Below the start is out of range, with the range in the message.
  auto r = get(records("page") + "?offset=0");
  expect_error(r, 416, "valid offsets: " + std::to_string(log->start_offset()) + " to 70", "offset=0");
}

TEST_F(StorageApiTest, ListsTopicsWithPartitionCounts) {
  storage::StoreOptions so;
  so.topics.push_back({.name = "three", .partitions = 3});
  start(so);
  append("alpha", "x");
  auto r = get("/topics");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  auto j = parse_json(r.body);
  ASSERT_TRUE(j) << r.body;
  const Json* topics = j->get("topics");
  ASSERT_TRUE(topics && topics->kind == Json::kArray) << r.body;
  ASSERT_EQ(topics->items.size(), 2u) << r.body;
  EXPECT_EQ(topics->items[0].str("name"), "alpha");
  EXPECT_EQ(topics->items[0].num("partitions"), 1);
  EXPECT_EQ(topics->items[1].str("name"), "three");
  EXPECT_EQ(topics->items[1].num("partitions"), 3);
  r = get("/fixed");
  EXPECT_EQ(r.body, "{\"topics\":[{\"name\":\"orders\",\"partitions\":2}]}\n");
}

// Only appends create topics (auto_create_topics on): a read of an unknown topic is 404 and
// leaves neither a topic in the list nor a directory in the data dir.
TEST_F(StorageApiTest, ReadOfUnknownTopicIs404AndCreatesNothing) {
  start();
  expect_error(get(records("ghost") + "?offset=0"), 404, "topic 'ghost' partition 0: no such topic", "GET ghost");
  expect_error(get(records("ghost", "7")), 404, "no such topic", "GET ghost partition 7");
  EXPECT_EQ(get("/topics").body, "{\"topics\":[]}\n");
  EXPECT_TRUE(store_->list_topics().empty());
  EXPECT_FALSE(fs::exists(dir_ + "/main/ghost-0"));
  EXPECT_TRUE(fs::is_empty(dir_ + "/main"));
  // A known topic's partition past its count is 404 too, and does not grow it.
  ASSERT_EQ(append("real", "x"), 0);
  expect_error(get(records("real", "1")), 404, "no such partition", "GET real partition 1");
  EXPECT_EQ(store_->describe("real").value().partitions.size(), 1u);
  // An append still creates the topic; then it reads.
  ASSERT_EQ(append("ghost", "boo"), 0);
  EXPECT_EQ(get("/topics").body,
            "{\"topics\":[{\"name\":\"ghost\",\"partitions\":1},{\"name\":\"real\",\"partitions\":1}]}\n");
  EXPECT_EQ(read(records("ghost")).size(), 1u);
}

TEST_F(StorageApiTest, EveryErrorIsJsonWithTheRightStatus) {
  storage::StoreOptions so;
  so.log.max_batch_bytes = 4096;
  StorageApiOptions ao;
  ao.max_records_per_post = 100;
  http::ServerOptions ho;
  ho.limits.max_body_bytes = 64 << 10;
  start(so, ao, ho);
  ASSERT_EQ(append("e", "one"), 0);
  ASSERT_EQ(append("e", "two"), 1);
  const uint64_t errors_before = stats_.errors.value();
  int errors = 0;
  auto check = [&](const http::ClientResponse& r, int status, std::string_view words, std::string_view what) {
    expect_error(r, status, words, what);
    ++errors;
  };
  // 400: names and numbers.
  check(get("/topics/b%20d/partitions/0/records"), 400, "invalid topic name", "topic with %20");
  check(get("/topics/..%2F/partitions/0/records"), 400, "invalid topic name", "topic ..%2F");
  check(get("/topics/" + std::string(201, 'a') + "/partitions/0/records"), 400, "invalid topic name", "long topic");
  check(get(records("e", "x")), 400, "invalid partition", "partition x");
  check(get(records("e", "-1")), 400, "invalid partition", "partition -1");
  check(get(records("e", "%31")), 400, "invalid partition", "partition %31");
  check(get(records("e", "4294967296")), 400, "invalid partition", "partition 2^32");
  check(get(records("e") + "?offset=abc"), 400, "non-negative numbers", "offset=abc");
  check(get(records("e") + "?offset=-1"), 400, "non-negative numbers", "offset=-1: malformed like abc");
  check(get(records("e") + "?offset=1x"), 400, "non-negative numbers", "offset=1x");
  check(get(records("e") + "?offset="), 400, "non-negative numbers", "offset=");
  check(get(records("e") + "?offset=99999999999999999999"), 400, "non-negative numbers", "offset overflow");
  check(get(records("e") + "?max_bytes=0"), 400, "max_bytes > 0", "max_bytes=0");
  check(get(records("e") + "?max_bytes=-1"), 400, "non-negative numbers", "max_bytes=-1");
  check(get(records("e") + "?offset=%zz"), 400, "percent-encoding", "offset=%zz");
  check(post(records("e") + "?key=%f", "v"), 400, "percent-encoding", "key=%f");
  check(post(records("e"), ""), 400, "empty body", "empty POST");
  check(post(records("e"), "", "application/x-ndjson"), 400, "empty body", "empty ndjson POST");
  // 404: unknown topic (auto-create off), partition past the topic's count.
  check(get("/fixed/nope/partitions/0/records"), 404, "no such topic", "unknown topic GET");
  check(post("/fixed/nope/partitions/0/records", "v"), 404, "no such topic", "unknown topic POST");
  check(get("/fixed/orders/partitions/2/records"), 404, "no such partition", "partition 2 of 2");
  // 416: outside [start, end], the range in the message.
  check(get(records("e") + "?offset=3"), 416, "valid offsets: 0 to 2", "offset past the end");

  // 413: a record over max_batch_bytes, a body over max_body_bytes (Content-Length and
  // chunked), more records than max_records_per_post.
  check(post(records("e"), std::string(5000, 'r')), 413, "larger than max_batch_bytes (4096 bytes)",
        "record too large");
  // A Content-Length over max_body_bytes is refused from the head, before the handler runs and
  // the body is read: the routes' refusal answer words it as JSON too.
  check(post(records("e"), std::string(100 << 10, 'b')), 413, "max_body_bytes (Content-Length: 102400)",
        "Content-Length over max_body_bytes");
  {
    http::ClientRequest q;
    q.method = "POST";
    q.url = url(records("e"));
    q.body_writer = [](http::BodyWriter& w) -> Result<void> {
      const std::string piece(16 << 10, 'c');
      for (int i = 0; i < 8; ++i)
        if (auto r = w.write(piece); !r) return r;
      return {};
    };
    auto r = client_.request(q);
    ASSERT_TRUE(r) << r.error().message();
    check(*r, 413, "max_body_bytes", "chunked body too large");
  }
  std::string many;
  for (int i = 0; i < 101; ++i) many += "r\n";
  check(post(records("e"), many, "application/x-ndjson"), 413, "more than 100 records", "101 records");
  EXPECT_EQ(stats_.errors.value() - errors_before, static_cast<uint64_t>(errors));
  // None of the failed POSTs appended anything; the 100-record limit itself is fine.
  many.resize(200);
  auto r = post(records("e"), many, "application/x-ndjson");
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(parse_json(r.body)->num("base_offset"), 2);
  // 405 from the Router, with Allow.
  r = request("PUT", records("e"), "v");
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.header("Allow").find("POST"), std::string_view::npos);
  // A raw path with bytes that are not ASCII never reaches the routes (the parser answers 400),
  // so error messages quote ASCII only; json_string still turns any non-UTF-8 byte into U+FFFD.
  RawClient raw(server_->server().addresses()[0].port());
  ASSERT_TRUE(raw.send("GET /topics/\xff\xfe/partitions/0/records HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(raw.read_until_closed().rfind("HTTP/1.1 400", 0), 0u);
}

TEST_F(StorageApiTest, CorruptBatchAnswers500NamingTheOffset) {
  storage::StoreOptions so;
  so.log.segment_bytes = 1024;  // one 1060-byte batch per segment: all but the last are sealed
  start(so);
  const std::string value(1000, 'v');
  for (int i = 0; i < 4; ++i) ASSERT_EQ(append("c", value), i);
  stop();
  // Flip a value byte of offset 1 (segment 1, sealed): its CRC fails, its framing holds.
  const std::string seg = dir_ + "/main/c-0/00000000000000000001.log";
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f) << seg;
    f.seekp(40 + 20 + 50);
    f.put('X');
  }
  start(so);
  EXPECT_EQ(read(records("c") + "?offset=0&max_bytes=160").size(), 1u);
  expect_error(get(records("c") + "?offset=1"), 500, "offset 1", "corrupt batch");
  EXPECT_EQ(read(records("c") + "?offset=2")[0].value, value);  // the rest reads on
  EXPECT_EQ(read(records("c") + "?offset=3")[0].value, value);
}

TEST_F(StorageApiTest, FailedFsyncAnswers503AndReadsGoOn) {
  FailingSyncFs failing;
  storage::StoreOptions so;
  so.log.fs = &failing;
  start(so);
  ASSERT_EQ(append("f", "kept"), 0);
  failing.fail_sync = true;
  // The append whose fdatasync fails is not acknowledged: an IO error.
  expect_error(post(records("f"), "lost"), 500, "append to topic 'f' partition 0 failed: Input/output error",
               "failed fdatasync");
  failing.fail_sync = false;
  // The log refuses appends from now on (after a failed fsync the kernel may have dropped the
  // pages: retrying would lie): 503. It still serves what it has.
  for (int i = 0; i < 2; ++i) expect_error(post(records("f"), "later"), 503, "refuses appends", "after it");
  auto got = read(records("f") + "?offset=0&max_bytes=1");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].value, "kept");
  stop();  // before `failing` goes away
}

TEST_F(StorageApiTest, AcknowledgedRecordsSurviveCloseAndReopen) {
  start();
  std::vector<std::string> want;
  for (int i = 0; i < 10; ++i) {
    want.push_back("single-" + std::to_string(i));
    ASSERT_EQ(append("durable", want.back(), "k" + std::to_string(i)), i);
  }
  std::string batch;
  for (int i = 0; i < 10; ++i) {
    want.push_back("batched-" + std::to_string(i));
    batch += want.back() + "\n";
  }
  auto r = post(records("durable"), batch, "application/x-ndjson");
  ASSERT_EQ(r.status, 201) << r.body;
  restart();
  auto got = read(records("durable") + "?offset=0&max_bytes=100000");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].offset, static_cast<int64_t>(i));
    EXPECT_EQ(got[i].value, want[i]);
    EXPECT_EQ(got[i].key, i < 10 ? "k" + std::to_string(i) : "");
  }
  EXPECT_EQ(append("durable", "after"), 20);
}

// 16 fibers x 25 POSTs (fewer under sanitizers) on the server's own two-worker scheduler, all
// through one Client: every acknowledged offset is distinct, they are exactly 0..N-1, and every
// value reads back once.
TEST_F(StorageApiTest, ConcurrentPostsFromManyFibersGetDistinctOffsets) {
  start();
  constexpr int kFibers = 16;
  constexpr int kPerFiber = 100 / http::test::kScale / 4;
  std::mutex mu;  // guards offsets and failures; never held across a park
  std::map<int64_t, std::string> offsets;
  std::vector<std::string> failures;
  std::vector<JoinHandle<void>> fibers;
  for (int f = 0; f < kFibers; ++f) {
    fibers.push_back(server_->sched().spawn([&, f] {
      for (int i = 0; i < kPerFiber; ++i) {
        std::string value = "f";  // appended, not "f" + ...: gcc 12's -Wrestrict false positive
        value += std::to_string(f) + "-" + std::to_string(i);
        auto r = client_.post(url(records("conc")), value);
        std::lock_guard lock(mu);
        std::optional<Json> j;
        if (!r || r->status != 201 || !(j = parse_json(r->body))) {
          failures.push_back(value + ": " + (r ? r->body : r.error().message()));
          continue;
        }
        if (!offsets.emplace(j->num("base_offset"), value).second) failures.push_back(value + ": offset reused");
      }
    }));
  }
  for (auto& h : fibers) h.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures[0];
  constexpr int kTotal = kFibers * kPerFiber;
  ASSERT_EQ(offsets.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(offsets.begin()->first, 0);
  EXPECT_EQ(offsets.rbegin()->first, kTotal - 1);
  auto got = read(records("conc") + "?offset=0&max_bytes=1000000");
  ASSERT_EQ(got.size(), static_cast<size_t>(kTotal));
  for (const auto& r : got) EXPECT_EQ(r.value, offsets[r.offset]);
  EXPECT_EQ(stats_.appends.value(), static_cast<uint64_t>(kTotal));
}

TEST_F(StorageApiTest, StatsCountersMove) {
  start();
  append("s", "12345", "ab");  // 7 bytes
  auto r = post(records("s"), "x\nyz\n", "application/x-ndjson");  // 3 bytes
  ASSERT_EQ(r.status, 201);
  EXPECT_EQ(stats_.appends.value(), 2u);
  EXPECT_EQ(stats_.append_records.value(), 3u);
  EXPECT_EQ(stats_.append_bytes.value(), 10u);
  EXPECT_EQ(read(records("s") + "?offset=0").size(), 3u);
  EXPECT_EQ(read(records("s") + "?offset=3").size(), 0u);
  EXPECT_EQ(stats_.reads.value(), 2u);
  EXPECT_EQ(stats_.read_records.value(), 3u);
  EXPECT_EQ(stats_.read_bytes.value(), 10u);
  EXPECT_EQ(stats_.errors.value(), 0u);
  get(records("s") + "?offset=9");
  EXPECT_EQ(stats_.errors.value(), 1u);
  EXPECT_EQ(stats_.reads.value(), 2u);
}

// ---- storage: YAML -> StoreOptions / StorageApiOptions ----------------------------------

TEST(StorageBinding, DefaultsAreTheOptionsStructs) {
  config::Registry r("LIONET_STORAGETEST_UNUSED_");
  StorageConfig c = define_storage_config(r);
  const storage::StoreOptions so = store_options(c);
  const storage::StoreOptions def;
  EXPECT_EQ(so.data_dir, def.data_dir);
  EXPECT_EQ(so.log.segment_bytes, def.log.segment_bytes);
  EXPECT_EQ(so.log.segment_ms, def.log.segment_ms);
  EXPECT_EQ(so.log.index_interval_bytes, def.log.index_interval_bytes);
  EXPECT_EQ(so.log.flush_policy, def.log.flush_policy);
  EXPECT_EQ(so.log.flush_messages, def.log.flush_messages);
  EXPECT_EQ(so.log.flush_ms, def.log.flush_ms);
  EXPECT_EQ(so.log.retention_bytes, def.log.retention_bytes);
  EXPECT_EQ(so.log.retention_ms, def.log.retention_ms);
  EXPECT_EQ(so.log.max_batch_bytes, def.log.max_batch_bytes);
  EXPECT_EQ(so.auto_create_topics, def.auto_create_topics);
  EXPECT_EQ(so.default_partitions, def.default_partitions);
  EXPECT_TRUE(so.topics.empty());
  const StorageApiOptions ao = storage_api_options(c);
  EXPECT_EQ(ao.max_read_bytes, 1u << 20);
  EXPECT_EQ(ao.default_read_bytes, 64u << 10);
  EXPECT_EQ(ao.max_records_per_post, 10000u);
}

TEST(StorageBinding, YamlFileYieldsStoreOptions) {
  char tmpl[] = "/tmp/lionet-storage-binding-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  std::ofstream(dir / "storage.yml") << R"(storage:
  data_dir: /var/lib/lionet-test
  segment_bytes: 1048576
  segment_ms: 3600000
  index_interval_bytes: 1024
  flush:
    policy: messages
    messages: 500
    ms: 250
  retention:
    bytes: 10485760
    ms: 86400000
  max_batch_bytes: 65536
  auto_create_topics: false
  default_partitions: 4
  api:
    max_read_bytes: 262144
    default_read_bytes: 8192
    max_records_per_post: 50
  topics:
    - name: orders
      partitions: 3
      segment_bytes: 65536
      flush: {policy: none}
      retention: {ms: 1000}
    - name: audit.log
      flush: {policy: every_batch, messages: 7, ms: 9}
      index_interval_bytes: 512
      segment_ms: 0
      retention: {bytes: -1}
)";
  config::Registry r("LIONET_STORAGETEST_UNUSED_");
  StorageConfig c = define_storage_config(r);
  auto report = r.load_file(dir / "storage.yml");
  EXPECT_TRUE(report.unknown_keys.empty());
  const storage::StoreOptions so = store_options(c);
  EXPECT_EQ(so.data_dir, "/var/lib/lionet-test");
  EXPECT_EQ(so.log.segment_bytes, 1048576u);
  EXPECT_EQ(so.log.segment_ms, 3600000);
  EXPECT_EQ(so.log.index_interval_bytes, 1024u);
  EXPECT_EQ(so.log.flush_policy, storage::FlushPolicy::kMessages);
  EXPECT_EQ(so.log.flush_messages, 500u);
  EXPECT_EQ(so.log.flush_ms, 250);
  EXPECT_EQ(so.log.retention_bytes, 10485760);
  EXPECT_EQ(so.log.retention_ms, 86400000);
  EXPECT_EQ(so.log.max_batch_bytes, 65536u);
  EXPECT_FALSE(so.auto_create_topics);
  EXPECT_EQ(so.default_partitions, 4u);
  ASSERT_EQ(so.topics.size(), 2u);
  storage::TopicOptions orders{.name = "orders", .partitions = 3};
  orders.segment_bytes = 65536;
  orders.flush_policy = storage::FlushPolicy::kNone;
  orders.retention_ms = 1000;
  EXPECT_EQ(so.topics[0], orders);
  storage::TopicOptions audit{.name = "audit.log"};
  audit.flush_policy = storage::FlushPolicy::kEveryBatch;
  audit.flush_messages = 7;
  audit.flush_ms = 9;
  audit.index_interval_bytes = 512;
  audit.segment_ms = 0;
  audit.retention_bytes = -1;
  EXPECT_EQ(so.topics[1], audit);
  const StorageApiOptions ao = storage_api_options(c);
  EXPECT_EQ(ao.max_read_bytes, 262144u);
  EXPECT_EQ(ao.default_read_bytes, 8192u);
  EXPECT_EQ(ao.max_records_per_post, 50u);
  // Topics round-trip through to_yaml (what --print-config shows).
  YAML::Node n = config::ConfigTraits<storage::TopicOptions>::to_yaml(orders);
  EXPECT_EQ(config::ConfigTraits<storage::TopicOptions>::from_yaml(n), orders);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

struct BrokenStorage {
  const char* yaml;
  const char* expected;  // substring of the error (file:line:column: key '...': reason)
};
class StorageBindingRejects : public ::testing::TestWithParam<BrokenStorage> {};

TEST_P(StorageBindingRejects, NamingFileLineAndKey) {
  config::Registry r("LIONET_STORAGETEST_UNUSED_");
  StorageConfig c = define_storage_config(r);
  std::string err;
  try {
    r.load_string(GetParam().yaml, "storage.yml");
  } catch (const config::ConfigError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find(GetParam().expected), std::string::npos) << "error: '" << err << "'\nyaml:\n" << GetParam().yaml;
  // Nothing of a rejected file is applied.
  EXPECT_EQ(store_options(c).log.flush_policy, storage::FlushPolicy::kEveryBatch);
  EXPECT_TRUE(store_options(c).topics.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Broken, StorageBindingRejects,
    ::testing::Values(
        BrokenStorage{"storage:\n  flush:\n    policy: sometimes\n", "storage.yml:3:13: key 'storage.flush.policy'"},
        BrokenStorage{"storage:\n  segment_bytes: 3000000000\n", "storage.yml:2:18: key 'storage.segment_bytes'"},
        BrokenStorage{"storage:\n  data_dir: ''\n", "key 'storage.data_dir'"},
        BrokenStorage{"storage:\n  api:\n    max_records_per_post: 0\n", "key 'storage.api.max_records_per_post'"},
        BrokenStorage{"storage:\n  topics:\n    - name: a\n      colour: blue\n",
                      "storage.yml:4:7: key 'storage.topics[0]"},
        BrokenStorage{"storage:\n  topics:\n    - name: a\n      colour: blue\n", "colour"},
        BrokenStorage{"storage:\n  topics:\n    - name: a\n    - name: b\n      flush: {policy: often}\n",
                      "storage.yml:5:23: key 'storage.topics[1].flush.policy'"},
        BrokenStorage{"storage:\n  topics:\n    - name: a\n      flush: {every: 1}\n", "every"},
        BrokenStorage{"storage:\n  topics:\n    - name: 'a b'\n", "storage.yml:3:13: key 'storage.topics[0].name'"},
        BrokenStorage{"storage:\n  topics:\n    - partitions: 2\n", "key 'storage.topics[0]"},
        BrokenStorage{"storage:\n  topics:\n    - {name: a, partitions: 0}\n", "key 'storage.topics[0].partitions'"},
        BrokenStorage{"storage:\n  topics:\n    - {name: a, segment_bytes: 3000000000}\n",
                      "key 'storage.topics[0].segment_bytes'"},
        BrokenStorage{"storage:\n  topics:\n    - {name: a, index_interval_bytes: 0}\n",
                      "key 'storage.topics[0].index_interval_bytes'"},
        BrokenStorage{"storage:\n  topics:\n    - {name: a, flush: {messages: 0}}\n",
                      "key 'storage.topics[0].flush.messages'"},
        BrokenStorage{"storage:\n  topics:\n    - {name: a, retention: {bytes: -2}}\n",
                      "key 'storage.topics[0].retention.bytes'"},
        BrokenStorage{"storage:\n  topics:\n    - {name: a}\n    - {name: a}\n", "listed twice"}));

}  // namespace
}  // namespace lionet::app
