// lionet/http/static_cache.cc: StaticFiles' open-file cache: the map and its two LRU lists
// (entries holding an fd, bounded by open_file_cache; entries holding bytes, by cache_bytes),
// put / drop / evict under Impl::mu, entries made with their ETag and Last-Modified
// (make_entry), precompressed siblings (sibling, with negative entries), MEMORY mode's bytes
// (bytes_of) and invalidate / invalidate_all. The per-request hit path (cache_find, still_fresh,
// lookup) is in static_files.cc beside serve(), so that it inlines there. Owns the map, the lists and their lock (never
// held across I/O); the types are detail/static_files.h, opening and resolving a path is
// static_path.cc, serving is static_files.cc.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>
#include <mutex>

#include "lionet/http/date.h"
#include "lionet/http/detail/chars.h"
#include "lionet/http/detail/static_files.h"
#include "lionet/http/mime.h"

namespace lionet::http {

using detail::Encoding;
using detail::FdOwner;
using detail::FileEntry;
using detail::mtime_ns_of;
using detail::read_exact;

void StaticFiles::Impl::erase_locked(Map::iterator it) {
  if (it->second.in_memory) {
    cached_bytes -= it->second.entry->size;
    mem_lru.erase(it->second.pos);
  } else {
    fd_lru.erase(it->second.pos);
  }
  map.erase(it);
}

void StaticFiles::Impl::cache_drop(std::string_view key, const FileEntry* e) {
  std::lock_guard lk(mu);
  if (auto it = map.find(key); it != map.end() && it->second.entry.get() == e) erase_locked(it);
}

void StaticFiles::Impl::cache_put(std::shared_ptr<const FileEntry> e) {
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

std::shared_ptr<FileEntry> StaticFiles::Impl::make_entry(std::string key, std::string path, int fd,
                                                         const struct stat& st, std::string_view etag_tag) {
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
  e->content_type = mime_type_for(e->path);
  FieldBlock v, t;
  if (v.add("ETag", e->etag) && v.add("Last-Modified", e->last_modified) && v.add("Accept-Ranges", "bytes") &&
      t.add("Content-Type", e->content_type)) {
    e->validator_fields = std::move(v);
    e->type_field = std::move(t);
  }
  e->fd = std::make_shared<FdOwner>(fd);
  if (valid_ms > 0) e->checked_ms.store(detail::coarse_now_ms(), std::memory_order_relaxed);
  return e;
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
      if (valid_ms > 0) m->checked_ms.store(detail::coarse_now_ms(), std::memory_order_relaxed);
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
    m->content_type = e.content_type;
    m->validator_fields = e.validator_fields;
    m->type_field = e.type_field;
    m->data = bytes;
    m->checked_ms.store(e.checked_ms.load(std::memory_order_relaxed), std::memory_order_relaxed);
    cache_put(std::move(m));
  }
  return bytes;
}

std::size_t StaticFiles::invalidate(std::string_view rel_path) {
  while (rel_path.starts_with("./")) rel_path.remove_prefix(2);
  while (rel_path.size() > 1 && rel_path.back() == '/') rel_path.remove_suffix(1);
  Impl& im = *impl_;
  std::size_t dropped = 0;
  std::lock_guard lk(im.mu);
  for (auto it = im.map.begin(); it != im.map.end();) {
    const std::string& p = it->second.entry->path;
    const bool hit =
        p == rel_path || (p.size() > rel_path.size() && p.starts_with(rel_path) && p[rel_path.size()] == '/');
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

}  // namespace lionet::http
