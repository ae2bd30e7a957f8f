// lionet/http/static_path.cc: StaticFiles' request path to a file: opening beneath the root
// (open_beneath: openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, or openat and a
// /proc/self/fd realpath prefix check), resolution (open_entry: regular files only, a
// directory's index; resolve: 404 / 403 / the 301 "dir" -> "dir/") and try_files (its
// candidates expanded, tried and checked at construction). Owns every open of a file under
// the root (static_cache.cc's siblings go through open_beneath too); the lexical checks serve()
// runs first (safe_relative, contains_encoded_separator) are inline in detail/static_files.h,
// serving is static_files.cc and the cache the entries go into is static_cache.cc.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "lionet/base/tsan.h"
#include "lionet/http/detail/static_files.h"

namespace lionet::http {

using detail::FileEntry;
using detail::forbidden;
using detail::not_found;
using detail::safe_relative;

namespace {

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

}  // namespace

int StaticFiles::Impl::open_beneath(int dirfd, const char* rel) {
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

}  // namespace lionet::http
