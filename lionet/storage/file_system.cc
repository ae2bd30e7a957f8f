// lionet/storage/file_system.cc: the POSIX File / FileSystem (plain fds, pread/pwrite/fdatasync).
#include "lionet/storage/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace lionet::storage {
namespace {

class PosixFile final : public File {
 public:
  explicit PosixFile(int fd) : fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }
  int native_handle() const override { return fd_; }

  Result<std::size_t> pread(void* buf, std::size_t n, uint64_t off) override {
    std::size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Result<std::size_t>::failure(errno);
      }
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

  Result<void> pwrite(const void* buf, std::size_t n, uint64_t off) override {
    std::size_t done = 0;
    while (done < n) {
      ssize_t r = ::pwrite(fd_, static_cast<const char*>(buf) + done, n - done, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Result<void>::failure(errno);
      }
      done += static_cast<std::size_t>(r);
    }
    return {};
  }

  Result<void> datasync() override {
    if (::fdatasync(fd_) != 0) return Result<void>::failure(errno);
    return {};
  }

  Result<void> truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return Result<void>::failure(errno);
    return {};
  }

  Result<void> allocate(uint64_t size) override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Result<void>::failure(errno);
    if (static_cast<uint64_t>(st.st_size) >= size) return {};
    const off_t from = st.st_size;
    int r;
    do {
      r = ::fallocate(fd_, 0, from, static_cast<off_t>(size) - from);
    } while (r != 0 && errno == EINTR);
    if (r != 0) return Result<void>::failure(errno);
    return {};
  }

  Result<uint64_t> size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Result<uint64_t>::failure(errno);
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  int fd_;
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> open(const std::string& path, bool create) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0) return Result<std::unique_ptr<File>>::failure(errno);
    return std::unique_ptr<File>(new PosixFile(fd));
  }

  Result<std::vector<std::string>> list(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return Result<std::vector<std::string>>::failure(errno);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(d);
    return names;
  }

  Result<void> create_dirs(const std::string& dir) override {
    if (dir.empty()) return Result<void>::failure(EINVAL);
    std::string prefix;  // one buffer, assigned each round (gcc 12 -Wdangling-pointer misread a per-round temporary)
    for (std::size_t pos = 1;; pos++) {
      pos = dir.find('/', pos);
      prefix.assign(dir, 0, pos);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return Result<void>::failure(errno);
      if (pos == std::string::npos) break;
    }
    return {};
  }

  Result<void> remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Result<void>::failure(errno);
    return {};
  }

  Result<void> sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Result<void>::failure(errno);
    int r = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (r != 0) return Result<void>::failure(err);
    return {};
  }
};

}  // namespace

FileSystem& default_file_system() {
  static PosixFileSystem* fs = new PosixFileSystem();  // never destroyed: usable at exit
  return *fs;
}

}  // namespace lionet::storage
