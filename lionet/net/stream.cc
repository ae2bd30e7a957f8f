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
  std::unique_ptr<char[]> buf(new char[std::min(count, kChunk)]);
  size_t done = 0;
  while (done < count) {
    size_t want = std::min(count - done, kChunk);
    // pread of a regular file does not wait for the network; a slow disk blocks the worker
    // here (file/ offers async reads for that case).
    ssize_t r = ::pread(file_fd, buf.get(), want, offset + static_cast<off_t>(done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Result<size_t>::failure(errno);
    }
    if (r == 0) break;
    auto w = write(buf.get(), static_cast<size_t>(r));
    if (!w) return w;
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
