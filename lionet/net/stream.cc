// lionet/net/stream.cc: Stream's helpers and default sendfile (see stream.h).
#include "lionet/net/stream.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace lionet {

Result<size_t> Stream::sendfile(int file_fd, off_t offset, size_t count) {
  return sendfile_by_copy(file_fd, offset, count);
}

Result<size_t> Stream::sendfile_by_copy(int file_fd, off_t offset, size_t count) {
  constexpr size_t kChunk = 64 * 1024;
  if (count == 0) return size_t{0};
  // Heap, not the fiber's stack: fiber stacks are small (fiber.stack_size).
  const size_t cap = std::min(count, kChunk);
  std::unique_ptr<char[]> buf(new char[cap]);
  return copy_from_file(file_fd, offset, count, buf.get(), cap, [this](const char* p, size_t n) -> Result<void> {
    if (auto w = write(p, n); !w) return w.error();
    return {};
  });
}

Result<size_t> copy_from_file(int file_fd, off_t offset, size_t count, char* buf, size_t cap,
                              const std::function<Result<void>(const char*, size_t)>& out) {
  size_t done = 0;
  while (done < count) {
    const size_t want = std::min(count - done, cap);
    const ssize_t r = ::pread(file_fd, buf, want, offset + static_cast<off_t>(done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Result<size_t>::failure(errno);
    }
    if (r == 0) break;  // the file ended
    if (auto w = out(buf, static_cast<size_t>(r)); !w) return w.error();
    done += static_cast<size_t>(r);
  }
  return done;
}

Result<size_t> Stream::read_full(void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  size_t got = 0;
  while (got < n) {
    auto r = read(p + got, n - got);
    if (!r) return r;
    if (*r == 0) break;
    got += *r;
  }
  return got;
}
}  // namespace lionet
