// lionet/http/static_files.cc: StaticFiles (see static_files.h): path checks, resolution
// beneath the root, conditional/range logic, and the three body paths.
#include "lionet/http/static_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <algorithm>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include "lionet/base/tsan.h"
#include "lionet/http/date.h"
#include "lionet/http/detail/chars.h"
#include "lionet/http/headers.h"
#include "lionet/http/mime.h"
#include "lionet/http/status.h"
#include "lionet/http/url.h"

namespace lionet::http {

std::optional<FileMode> parse_file_mode(std::string_view s) {
  if (s == "memory") return FileMode::kMemory;
  if (s == "chunk") return FileMode::kChunk;
  if (s == "sendfile") return FileMode::kSendfile;
  if (s == "auto") return FileMode::kAuto;
  return std::nullopt;
}

std::string_view file_mode_name(FileMode m) noexcept {
  switch (m) {
    case FileMode::kMemory: return "memory";
    case FileMode::kChunk: return "chunk";
    case FileMode::kSendfile: return "sendfile";
    case FileMode::kAuto: return "auto";
  }
  return "?";
}

namespace {

// Owns an fd; the shared_ptr handed to Response keeps it open until the bytes are out.
struct FdOwner {
  int fd;
  explicit FdOwner(int f) noexcept : fd(f) {}
  ~FdOwner() {
    if (fd >= 0) ::close(fd);
  }
  FdOwner(const FdOwner&) = delete;
  FdOwner& operator=(const FdOwner&) = delete;
};

int64_t mtime_ns_of(const struct stat& st) noexcept {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// True if the If-None-Match list names etag (weak comparison, as RFC 9110 asks for GET) or "*".
bool etag_matches(std::string_view list, std::string_view etag) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = trim_ows(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item == "*") return true;
    if (item.size() > 2 && (item[0] == 'W' || item[0] == 'w') && item[1] == '/') item.remove_prefix(2);
    if (item == etag) return true;
  }
  return false;
}

enum class RangeResult { kNone, kOk, kUnsatisfiable };

// A single "bytes=a-b" / "a-" / "-n" range. kNone for several ranges or a malformed header
// (the full body is sent, as RFC 9110 allows).
RangeResult parse_range(std::string_view h, uint64_t size, uint64_t& off, uint64_t& len) {
  h = trim_ows(h);
  if (h.size() < 6 || !iequals(h.substr(0, 6), "bytes=")) return RangeResult::kNone;
  std::string_view spec = trim_ows(h.substr(6));
  if (spec.empty() || spec.find(',') != std::string_view::npos) return RangeResult::kNone;
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return RangeResult::kNone;
  std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
  auto parse = [](std::string_view t, uint64_t& v) {
    if (t.empty() || t.size() > 19) return false;
    auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
  };
  uint64_t first = 0, last = 0;
  if (a.empty()) {  // suffix: the last n bytes
    if (!parse(b, last)) return RangeResult::kNone;
    if (last == 0 || size == 0) return RangeResult::kUnsatisfiable;
    len = std::min(last, size);
    off = size - len;
    return RangeResult::kOk;
  }
  if (!parse(a, first)) return RangeResult::kNone;
  if (b.empty()) {
    last = size ? size - 1 : 0;
  } else {
    if (!parse(b, last) || last < first) return RangeResult::kNone;
    if (size && last >= size) last = size - 1;
  }
  if (first >= size) return RangeResult::kUnsatisfiable;
  off = first;
  len = last - first + 1;
  return RangeResult::kOk;
}

// Checks the decoded relative path: segments separated by '/', none empty (except a
// trailing '/'), ".", "..", and no NUL or backslash. Returns false to answer 404.
bool safe_relative(std::string_view p) {
  if (p.find('\0') != std::string_view::npos || p.find('\\') != std::string_view::npos) return false;
  if (!p.empty() && p.back() == '/') p.remove_suffix(1);
  if (p.empty()) return true;  // the root itself
  size_t start = 0;
  for (;;) {
    size_t slash = p.find('/', start);
    std::string_view seg = p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// A try_files candidate for the request path rel (decoded, checked): every "$uri" replaced by
// "/" + rel, runs of '/' merged (where two parts meet: "$uri/" of "a/").
void expand_candidate(std::string_view pattern, std::string_view rel, std::string& out) {
  out.clear();
  for (size_t i = 0; i < pattern.size();) {
    if (pattern.substr(i, 4) == "$uri") {
      out.push_back('/');
      out.append(rel.data(), rel.size());
      i += 4;
    } else {
      out.push_back(pattern[i++]);
    }
  }
  out.erase(std::unique(out.begin(), out.end(), [](char a, char b) { return a == '/' && b == '/'; }), out.end());
}

bool contains_encoded_separator(std::string_view raw) {
  for (size_t i = 0; i + 2 < raw.size(); ++i) {
    if (raw[i] != '%') continue;
    char h = raw[i + 1], l = static_cast<char>(raw[i + 2] | 0x20);
    if ((h == '2' && l == 'f') || (h == '5' && l == 'c')) return true;
  }
  return false;
}

// One resolved file: what a request needs to answer without touching the file system again.
// Immutable once published in the cache (checked_ms aside), so readers hold no lock.
struct FileEntry {
  std::string key;   // its cache key (the decoded request path, or "<path>\0<suffix>")
  std::string path;  // relative to the root, as opened (a directory's index appended)
  bool missing = false;  // a precompressed sibling that does not exist (a negative entry)
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  time_t mtime_sec = 0;
  ino_t ino = 0;
  dev_t dev = 0;
  std::string etag, last_modified;
  std::shared_ptr<FdOwner> fd;              // null when data holds the bytes (or missing)
  std::shared_ptr<const std::string> data;  // MEMORY: the file's bytes
  mutable std::atomic<int64_t> checked_ms{0};  // CLOCK_MONOTONIC_COARSE ms of the last check

  bool same_file(const struct stat& st) const noexcept {
    return S_ISREG(st.st_mode) && size == static_cast<uint64_t>(st.st_size) && mtime_ns == mtime_ns_of(st) &&
           ino == st.st_ino && dev == st.st_dev;
  }
};

int64_t coarse_now_ms() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Encodings a route may serve from precompressed siblings.
struct Encoding {
  std::string_view name, suffix;
};
constexpr Encoding kEncodings[] = {{"br", ".br"}, {"gzip", ".gz"}, {"zstd", ".zst"}};

// A qvalue ("1", "0.5", "0.000") is above zero; a malformed one counts as zero.
bool qvalue_positive(std::string_view v) {
  v = trim_ows(v);
  if (v.empty() || v.size() > 5 || (v[0] != '0' && v[0] != '1')) return false;
  if (v.size() > 1 && v[1] != '.') return false;
  for (size_t i = 2; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return false;
  if (v[0] == '1') return true;
  return v.find_first_of("123456789", 2) != std::string_view::npos;
}

// True if an Accept-Encoding field value allows `coding` (RFC 9110 12.5.3): listed with q > 0,
// or "*" with q > 0 and the coding not listed. "x-gzip" counts as "gzip".
bool accepts_encoding(std::string_view header, std::string_view coding) {
  std::optional<bool> star;
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    size_t semi = item.find(';');
    std::string_view name = trim_ows(item.substr(0, semi));
    bool positive = true;
    while (semi != std::string_view::npos) {
      item.remove_prefix(semi + 1);
      semi = item.find(';');
      std::string_view param = trim_ows(item.substr(0, semi));
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=')
        positive = qvalue_positive(param.substr(2));
    }
    if (iequals(name, coding) || (coding == "gzip" && iequals(name, "x-gzip"))) return positive;
    if (name == "*") star = positive;
  }
  return star.value_or(false);
}

}  // namespace

struct StaticFiles::Impl {
  StaticOptions opt;
  int root_fd = -1;
  std::string root_real;  // realpath of the root, for the fallback check
  std::atomic<bool> use_openat2{true};  // relaxed: a one-way latch to the fallback
  std::vector<Encoding> encodings;      // opt.precompressed, resolved
  int64_t valid_ms = 0;

  // The cache of resolved files. Entries holding an fd are bounded by open_file_cache (fd_lru),
  // entries holding bytes by cache_bytes (mem_lru); each entry is on exactly one list.
  std::mutex mu;  // guards map, the lists and cached_bytes; never held across I/O
  struct Slot {
    std::shared_ptr<const FileEntry> entry;
    std::list<std::string>::iterator pos;
    bool in_memory;
  };
  std::unordered_map<std::string, Slot> map;
  std::list<std::string> fd_lru, mem_lru;  // most recent first
  size_t cached_bytes = 0;

  std::atomic<uint64_t> memory_hits{0}, memory_misses{0}, files_served{0}, bytes_sent{0};
  std::atomic<uint64_t> open_hits{0}, open_misses{0}, precompressed_served{0};

  ~Impl() {
    if (root_fd >= 0) ::close(root_fd);
  }

  // Opens rel (decoded, checked) beneath dirfd. -1 with errno on failure.
  int open_beneath(int dirfd, const char* rel) {
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    if (use_openat2.load(std::memory_order_relaxed)) {
      struct open_how how {};
      how.flags = static_cast<uint64_t>(flags);
      how.resolve = RESOLVE_NO_MAGICLINKS | (opt.follow_symlinks_outside_root ? 0 : RESOLVE_BENEATH);
      long fd = ::syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
      if (fd >= 0) tsan_fd_forget(static_cast<int>(fd));
      if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
      use_openat2.store(false, std::memory_order_relaxed);  // benign race: every thread reaches the same conclusion
    }
    int fd = ::openat(dirfd, rel, flags);
    if (fd < 0 || opt.follow_symlinks_outside_root) return fd;
    char link[64], real[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, real, sizeof real);
    std::string_view r(real, n > 0 ? static_cast<size_t>(n) : 0);
    bool inside = n > 0 && static_cast<size_t>(n) < sizeof real &&
                  (r == root_real || (r.size() > root_real.size() && r.substr(0, root_real.size()) == root_real &&
                                      (root_real == "/" || r[root_real.size()] == '/')));
    if (!inside) {
      ::close(fd);
      errno = EXDEV;
      return -1;
    }
    return fd;
  }

  // ---- the cache ----------------------------------------------------------------------------
  std::shared_ptr<const FileEntry> cache_find(const std::string& key) {
    std::lock_guard lk(mu);
    auto it = map.find(key);
    if (it == map.end()) return nullptr;
    auto& lru = it->second.in_memory ? mem_lru : fd_lru;
    lru.splice(lru.begin(), lru, it->second.pos);
    return it->second.entry;
  }

  void erase_locked(std::unordered_map<std::string, Slot>::iterator it) {
    if (it->second.in_memory) {
      cached_bytes -= it->second.entry->size;
      mem_lru.erase(it->second.pos);
    } else {
      fd_lru.erase(it->second.pos);
    }
    map.erase(it);
  }

  // Drops key's entry if it is still `e` (a newer one put meanwhile stays).
  void cache_drop(const std::string& key, const FileEntry* e) {
    std::lock_guard lk(mu);
    if (auto it = map.find(key); it != map.end() && it->second.entry.get() == e) erase_locked(it);
  }

  // Publishes e under e->key, replacing what was there, then evicts past the bounds.
  void cache_put(std::shared_ptr<const FileEntry> e) {
    bool in_memory = e->data != nullptr;
    if (in_memory ? e->size > opt.cache_bytes : opt.open_file_cache == 0) return;
    std::lock_guard lk(mu);
    if (auto it = map.find(e->key); it != map.end()) erase_locked(it);
    auto& lru = in_memory ? mem_lru : fd_lru;
    lru.push_front(e->key);
    if (in_memory) cached_bytes += e->size;
    std::string key = e->key;  // not e->key beside std::move(e): argument order is unspecified
    map.emplace(std::move(key), Slot{std::move(e), lru.begin(), in_memory});
    while (fd_lru.size() > opt.open_file_cache) erase_locked(map.find(fd_lru.back()));
    while (cached_bytes > opt.cache_bytes && !mem_lru.empty()) erase_locked(map.find(mem_lru.back()));
  }

  // Still the file the entry describes: within open_file_cache_valid of the last check, or one
  // stat of its path finds the same inode, device, size and mtime (a missing sibling: still
  // absent). stat follows symlinks without RESOLVE_BENEATH, which is safe here: the entry was
  // opened beneath the root, and only that same inode passes.
  bool still_fresh(const FileEntry& e) {
    int64_t now = 0;
    if (valid_ms > 0) {
      now = coarse_now_ms();
      if (now - e.checked_ms.load(std::memory_order_relaxed) < valid_ms) return true;
    }
    struct stat st;
    bool ok = ::fstatat(root_fd, e.path.c_str(), &st, 0) == 0 ? !e.missing && e.same_file(st)
                                                              : e.missing && errno == ENOENT;
    if (ok && valid_ms > 0) e.checked_ms.store(now, std::memory_order_relaxed);
    return ok;
  }

  // The cached entry for key if it is still fresh (else dropped), or null.
  std::shared_ptr<const FileEntry> lookup(const std::string& key) {
    std::shared_ptr<const FileEntry> e = cache_find(key);
    if (e && !still_fresh(*e)) {
      cache_drop(key, e.get());
      e = nullptr;
    }
    return e;
  }

  std::shared_ptr<FileEntry> make_entry(std::string key, std::string path, int fd, const struct stat& st,
                                        std::string_view etag_tag) {
    auto e = std::make_shared<FileEntry>();
    e->key = std::move(key);
    e->path = std::move(path);
    e->size = static_cast<uint64_t>(st.st_size);
    e->mtime_ns = mtime_ns_of(st);
    e->mtime_sec = st.st_mtim.tv_sec;
    e->ino = st.st_ino;
    e->dev = st.st_dev;
    e->etag.reserve(48);
    e->etag.push_back('"');
    detail::append_hex(e->etag, e->size);
    e->etag.push_back('-');
    detail::append_hex(e->etag, static_cast<uint64_t>(e->mtime_ns));
    if (!etag_tag.empty()) {
      e->etag.push_back('-');
      e->etag.append(etag_tag.data(), etag_tag.size());
    }
    e->etag.push_back('"');
    e->last_modified = format_http_date(e->mtime_sec);
    e->fd = std::make_shared<FdOwner>(fd);
    if (valid_ms > 0) e->checked_ms.store(coarse_now_ms(), std::memory_order_relaxed);
    return e;
  }

  // Opens rel (decoded, checked) beneath the root: a regular file, or with `index` a
  // directory's index file; the entry is published in the cache under key. Null with errno set
  // otherwise: ENOENT/ENOTDIR/ENAMETOOLONG (absent), EISDIR (a directory and not `index`),
  // anything else (refused: outside the root, not a regular file, ...).
  std::shared_ptr<const FileEntry> open_entry(const std::string& key, const std::string& rel, bool index);

  // Resolves the request path rel (decoded, checked) beneath the root: a regular file's entry,
  // or null once the request has been answered (404, 403, or the 301 for "dir").
  std::shared_ptr<const FileEntry> resolve(Request& req, Response& res, const std::string& rel, bool trailing_slash);

  // try_files: the entry of the first candidate that exists for rel (decoded, checked), or null.
  std::shared_ptr<const FileEntry> try_candidates(const std::string& rel);
  // try_files found nothing (or the method is not GET/HEAD): the fallback, or fallback_status.
  void fall_back(Request& req, Response& res);

  // Answers from base (a regular file's entry): representation, conditionals, range, body.
  void respond(Request& req, Response& res, std::shared_ptr<const FileEntry> base);

  // The precompressed sibling of base for enc, if it exists and is not older than base.
  std::shared_ptr<const FileEntry> sibling(const FileEntry& base, const Encoding& enc);

  // MEMORY mode: the bytes of e, read and cached on first use; null after a read error.
  std::shared_ptr<const std::string> bytes_of(const FileEntry& e);

  void serve(Request& req, Response& res, std::string_view rel_raw);
};

namespace {
void not_found(Response& res) { res.reply(404, "not found\n"); }
void forbidden(Response& res) { res.reply(403, "forbidden\n"); }

// Reads exactly len bytes at off (pread: the hooks run regular-file reads safely in fibers).
bool read_exact(int fd, char* dst, uint64_t len, uint64_t off) {
  while (len > 0) {
    ssize_t n = ::pread(fd, dst, len, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // the file ended early (truncated under us)
    if (n <= 0) return false;
    dst += n;
    len -= static_cast<uint64_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return true;
}
}  // namespace

std::shared_ptr<const FileEntry> StaticFiles::Impl::open_entry(const std::string& key, const std::string& rel,
                                                               bool index) {
  int fd = open_beneath(root_fd, rel.empty() ? "." : rel.c_str());
  if (fd < 0) return nullptr;
  // errno is set after the close: a hooked close() may touch it.
  auto fail = [&fd](int err) -> std::shared_ptr<const FileEntry> {
    ::close(fd);
    errno = err;
    return nullptr;
  };
  std::string path = rel;
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail(EACCES);
  if (S_ISDIR(st.st_mode)) {
    if (!index) return fail(EISDIR);
    int ifd = open_beneath(fd, opt.index.c_str());
    if (ifd < 0) return fail(errno);
    ::close(fd);
    fd = ifd;
    if (::fstat(fd, &st) != 0) return fail(EACCES);
    path += opt.index;
  }
  if (!S_ISREG(st.st_mode)) return fail(EACCES);
  std::shared_ptr<const FileEntry> e = make_entry(key, std::move(path), fd, st, {});  // the entry owns fd
  cache_put(e);
  return e;
}

std::shared_ptr<const FileEntry> StaticFiles::Impl::resolve(Request& req, Response& res, const std::string& rel,
                                                            bool trailing_slash) {
  std::shared_ptr<const FileEntry> e = open_entry(rel, rel, trailing_slash);
  if (e) return e;
  if (errno == EISDIR) {  // "dir" -> "dir/", so that relative links in its index resolve beneath it
    std::string loc(req.path());
    loc += '/';
    if (!req.query().empty()) loc.append("?").append(req.query());
    if (!res.set_header("Location", loc)) return not_found(res), nullptr;
    res.reply(301, "moved permanently\n");
    return nullptr;
  }
  errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG ? not_found(res) : forbidden(res);
  return nullptr;
}

std::shared_ptr<const FileEntry> StaticFiles::Impl::try_candidates(const std::string& rel) {
  std::string c;
  for (const std::string& pattern : opt.try_files) {
    expand_candidate(pattern, rel, c);
    const bool dir = c.back() == '/';  // c starts with '/' (checked at construction)
    c.erase(0, 1);
    if (!safe_relative(c)) continue;  // cannot happen: rel and the fixed parts were checked
    std::shared_ptr<const FileEntry> e = lookup(c);
    if (e) {
      open_hits.fetch_add(1, std::memory_order_relaxed);
      return e;
    }
    open_misses.fetch_add(1, std::memory_order_relaxed);
    // Any failure, not only absence, moves on (as nginx's try_files): a candidate outside the
    // root or not a regular file is never served, and the next may be.
    if ((e = open_entry(c, c, dir))) return e;
  }
  return nullptr;
}

void StaticFiles::Impl::fall_back(Request& req, Response& res) {
  if (opt.fallback) return opt.fallback(req, res);
  const int status = opt.fallback_status ? opt.fallback_status : 404;
  if (status == 404) return not_found(res);
  if (!status_has_body(status)) {
    res.set_status(status);
    res.set_body(std::string_view());
    return;
  }
  std::string body(reason_phrase(status));
  body += '\n';
  res.reply(status, body);
}

std::shared_ptr<const FileEntry> StaticFiles::Impl::sibling(const FileEntry& base, const Encoding& enc) {
  std::string key = base.path;
  key += '\0';
  key += enc.suffix;
  std::shared_ptr<const FileEntry> e = lookup(key);
  if (!e) {
    std::string path = base.path + std::string(enc.suffix);
    int fd = open_beneath(root_fd, path.c_str());
    struct stat st;
    if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      e = make_entry(std::move(key), std::move(path), fd, st, enc.name);
    } else {
      if (fd >= 0) ::close(fd);
      if (errno != ENOENT && fd < 0) return nullptr;  // not cached: only absence is remembered
      auto m = std::make_shared<FileEntry>();
      m->key = std::move(key);
      m->path = std::move(path);
      m->missing = true;
      if (valid_ms > 0) m->checked_ms.store(coarse_now_ms(), std::memory_order_relaxed);
      e = std::move(m);
    }
    cache_put(e);
  }
  if (e->missing || e->mtime_ns < base.mtime_ns) return nullptr;  // absent, or older than the file
  return e;
}

std::shared_ptr<const std::string> StaticFiles::Impl::bytes_of(const FileEntry& e) {
  if (e.data) {
    memory_hits.fetch_add(1, std::memory_order_relaxed);
    return e.data;
  }
  memory_misses.fetch_add(1, std::memory_order_relaxed);
  auto bytes = std::make_shared<std::string>();
  bytes->resize(e.size);
  if (!read_exact(e.fd->fd, bytes->data(), e.size, 0)) return nullptr;
  if (e.size <= opt.cache_bytes) {
    auto m = std::make_shared<FileEntry>();
    m->key = e.key;
    m->path = e.path;
    m->size = e.size;
    m->mtime_ns = e.mtime_ns;
    m->mtime_sec = e.mtime_sec;
    m->ino = e.ino;
    m->dev = e.dev;
    m->etag = e.etag;
    m->last_modified = e.last_modified;
    m->data = bytes;
    m->checked_ms.store(e.checked_ms.load(std::memory_order_relaxed), std::memory_order_relaxed);
    cache_put(std::move(m));
  }
  return bytes;
}

void StaticFiles::Impl::serve(Request& req, Response& res, std::string_view rel_raw) {
  std::string_view method = req.method();
  if (method != "GET" && method != "HEAD") {
    if (opt.fallback && !opt.try_files.empty()) return opt.fallback(req, res);  // a file cannot be POSTed
    res.set_header("Allow", "GET, HEAD");
    res.reply(405, "method not allowed\n");
    return;
  }
  if (contains_encoded_separator(rel_raw)) return not_found(res);
  std::optional<std::string> decoded = percent_decode(rel_raw);
  if (!decoded || !safe_relative(*decoded)) return not_found(res);
  const std::string& rel = *decoded;
  if (!opt.try_files.empty()) {
    std::shared_ptr<const FileEntry> found = try_candidates(rel);
    if (!found) return fall_back(req, res);
    return respond(req, res, std::move(found));
  }
  // The redirect decision uses the URL as sent: "/static" mounted at "/static" must become
  // "/static/" too, or relative links in its index would resolve against the parent.
  bool trailing_slash = req.path().empty() ? (rel.empty() || rel.back() == '/') : req.path().back() == '/';

  std::shared_ptr<const FileEntry> base = lookup(rel);
  if (base && (rel.empty() || rel.back() == '/') != trailing_slash) base = nullptr;  // "/dir" must redirect
  if (base) {
    open_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    open_misses.fetch_add(1, std::memory_order_relaxed);
    base = resolve(req, res, rel, trailing_slash);
    if (!base) return;
  }
  respond(req, res, std::move(base));
}

void StaticFiles::Impl::respond(Request& req, Response& res, std::shared_ptr<const FileEntry> base) {
  // The representation: the file, or a precompressed sibling the client accepts.
  const FileEntry* file = base.get();
  std::shared_ptr<const FileEntry> encoded;
  if (!encodings.empty()) {
    res.set_header("Vary", "Accept-Encoding");
    if (std::string_view ae = req.header("Accept-Encoding"); !ae.empty()) {
      for (const Encoding& enc : encodings) {
        if (!accepts_encoding(ae, enc.name)) continue;
        if ((encoded = sibling(*base, enc))) {
          res.set_header("Content-Encoding", enc.name);
          file = encoded.get();
          break;
        }
      }
    }
  }

  const uint64_t size = file->size;
  res.set_header("ETag", file->etag);
  res.set_header("Last-Modified", file->last_modified);
  res.set_header("Accept-Ranges", "bytes");

  // Conditional GET: If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2).
  std::string_view inm = req.header("If-None-Match");
  bool not_modified = false;
  if (!inm.empty()) {
    not_modified = etag_matches(inm, file->etag);
  } else if (std::string_view ims = req.header("If-Modified-Since"); !ims.empty()) {
    if (auto t = parse_http_date(trim_ows(ims))) not_modified = file->mtime_sec <= *t;
  }
  if (not_modified) {
    res.set_status(304);
    res.set_body(std::string_view());
    return;
  }

  res.set_content_type(mime_type_for(base->path));
  uint64_t off = 0, len = size;
  int status = 200;
  if (std::string_view range = req.header("Range"); !range.empty()) {
    std::string_view if_range = trim_ows(req.header("If-Range"));
    bool range_applies = if_range.empty() || if_range == file->etag || if_range == file->last_modified;
    if (range_applies) {
      switch (parse_range(range, size, off, len)) {
        case RangeResult::kNone:
          off = 0;
          len = size;
          break;
        case RangeResult::kUnsatisfiable: {
          std::string cr = "bytes */" + std::to_string(size);
          res.set_header("Content-Range", cr);
          res.reply(416, "range not satisfiable\n");
          return;
        }
        case RangeResult::kOk: {
          status = 206;
          std::string cr = "bytes " + std::to_string(off) + "-" + std::to_string(off + len - 1) + "/" +
                           std::to_string(size);
          res.set_header("Content-Range", cr);
          break;
        }
      }
    }
  }
  res.set_status(status);
  files_served.fetch_add(1, std::memory_order_relaxed);
  if (encoded) precompressed_served.fetch_add(1, std::memory_order_relaxed);
  if (!req.is_head()) bytes_sent.fetch_add(len, std::memory_order_relaxed);

  FileMode mode = opt.mode;
  if (mode == FileMode::kAuto)
    mode = size < opt.memory_max ? FileMode::kMemory : size >= opt.sendfile_min ? FileMode::kSendfile : FileMode::kChunk;
  if (!file->fd) mode = FileMode::kMemory;  // its bytes are cached: no fd kept

  switch (mode) {
    case FileMode::kMemory: {
      std::shared_ptr<const std::string> bytes = bytes_of(*file);
      if (!bytes) {
        res.reply(500, "read error\n");
        return;
      }
      std::string_view all(*bytes);
      res.set_body_view(all.substr(off, len), std::move(bytes));
      return;
    }
    case FileMode::kChunk: {
      size_t chunk = opt.chunk_size ? opt.chunk_size : 64 * 1024;
      res.set_body_writer([owner = file->fd, off, len, chunk](BodyWriter& w) -> Result<void> {
        std::unique_ptr<char[]> buf(new char[std::min<uint64_t>(chunk, std::max<uint64_t>(len, 1))]);
        uint64_t pos = off, left = len;
        while (left > 0) {
          uint64_t want = std::min<uint64_t>(chunk, left);
          if (!read_exact(owner->fd, buf.get(), want, pos)) return errno_error(errno);
          if (auto r = w.write(std::string_view(buf.get(), want), want == left); !r) return r;
          pos += want;
          left -= want;
        }
        return {};
      });
      return;
    }
    case FileMode::kSendfile:
    case FileMode::kAuto: {
      res.set_file(file->fd->fd, static_cast<off_t>(off), len, file->fd);
      return;
    }
  }
}

StaticFiles::StaticFiles(StaticOptions o) : impl_(std::make_shared<Impl>()) {
  impl_->opt = std::move(o);
  const std::string& root = impl_->opt.root;
  auto fail = [&](const std::string& why) { throw std::runtime_error("static root '" + root + "': " + why); };
  if (root.empty()) fail("empty path");
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  impl_->root_fd = fd;
  char real[4096];
  if (!::realpath(root.c_str(), real)) fail(std::strerror(errno));
  impl_->root_real = real;
  if (::faccessat(fd, ".", R_OK | X_OK, 0) != 0) fail(std::strerror(errno));
  impl_->use_openat2.store(!impl_->opt.force_realpath_check);
  if (impl_->opt.index.empty() || impl_->opt.index.find('/') != std::string::npos) fail("bad index name");
  for (const std::string& name : impl_->opt.precompressed) {
    auto it = std::find_if(std::begin(kEncodings), std::end(kEncodings), [&](const Encoding& e) { return e.name == name; });
    if (it == std::end(kEncodings)) fail("unknown precompressed encoding '" + name + "' (expected br, gzip or zstd)");
    if (std::find_if(impl_->encodings.begin(), impl_->encodings.end(), [&](const Encoding& e) { return e.name == name; }) !=
        impl_->encodings.end())
      fail("precompressed encoding '" + name + "' listed twice");
    impl_->encodings.push_back(*it);
  }
  if (impl_->opt.open_file_cache_valid.count() < 0) fail("negative open_file_cache_valid");
  for (const std::string& c : impl_->opt.try_files)
    if (std::string why = try_files_candidate_error(c); !why.empty()) fail("try_files: " + why);
  const int fs = impl_->opt.fallback_status;
  if (fs != 0 && (fs < 200 || fs > 599)) fail("fallback_status " + std::to_string(fs) + " is not in 200..599");
  impl_->valid_ms = impl_->opt.open_file_cache_valid.count();
}

StaticFiles::~StaticFiles() = default;

std::string try_files_candidate_error(std::string_view candidate) {
  std::string quoted(1, '\'');  // not "'" + std::string(...): gcc 12's -Wrestrict false positive
  quoted.append(candidate.data(), candidate.size()).push_back('\'');
  if (!candidate.starts_with("$uri") && !candidate.starts_with("/"))
    return quoted + " starts with neither $uri nor '/' (a path relative to the root)";
  // Its fixed parts, with "$uri" standing for a checked path ("/x"), must be a safe path.
  std::string sample;
  expand_candidate(candidate, "x", sample);
  if (!safe_relative(std::string_view(sample).substr(1)))
    return quoted + " has a '.', '..' or empty segment, a backslash or a NUL";
  return {};
}

void StaticFiles::serve(Request& req, Response& res, std::string_view rel_path) { impl_->serve(req, res, rel_path); }

Handler StaticFiles::handler() {
  return [impl = impl_](Request& q, Response& s) { impl->serve(q, s, q.param("**")); };
}

std::size_t StaticFiles::invalidate(std::string_view rel_path) {
  while (rel_path.starts_with("./")) rel_path.remove_prefix(2);
  while (rel_path.size() > 1 && rel_path.back() == '/') rel_path.remove_suffix(1);
  Impl& im = *impl_;
  std::size_t dropped = 0;
  std::lock_guard lk(im.mu);
  for (auto it = im.map.begin(); it != im.map.end();) {
    const std::string& p = it->second.entry->path;
    const bool hit = p == rel_path || (p.size() > rel_path.size() && p.starts_with(rel_path) &&
                                       p[rel_path.size()] == '/');
    auto next = std::next(it);
    if (hit) {
      im.erase_locked(it);
      ++dropped;
    }
    it = next;
  }
  return dropped;
}

void StaticFiles::invalidate_all() {
  Impl& im = *impl_;
  std::lock_guard lk(im.mu);
  im.map.clear();
  im.fd_lru.clear();
  im.mem_lru.clear();
  im.cached_bytes = 0;
}

StaticFiles::Stats StaticFiles::stats() const {
  return {impl_->memory_hits.load(std::memory_order_relaxed), impl_->memory_misses.load(std::memory_order_relaxed),
          impl_->files_served.load(std::memory_order_relaxed), impl_->bytes_sent.load(std::memory_order_relaxed),
          impl_->open_hits.load(std::memory_order_relaxed), impl_->open_misses.load(std::memory_order_relaxed),
          impl_->precompressed_served.load(std::memory_order_relaxed)};
}

const StaticOptions& StaticFiles::options() const noexcept { return impl_->opt; }

}  // namespace lionet::http
