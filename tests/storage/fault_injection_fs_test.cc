// tests/storage/fault_injection_fs_test.cc: the fault-injecting file layer itself (it must
// really lose unsynced bytes, or the power-loss tests prove nothing), and its implementation.
#include "tests/storage/fault_injection_fs.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "tests/storage/storage_test_util.h"

namespace lionet::storage::test {

class FaultFile final : public File {
 public:
  FaultFile(FaultInjectionFs* fs, std::string path, std::unique_ptr<File> f)
      : fs_(fs), path_(std::move(path)), f_(std::move(f)) {}
  Result<std::size_t> pread(void* buf, std::size_t n, uint64_t off) override { return f_->pread(buf, n, off); }
  Result<void> pwrite(const void* buf, std::size_t n, uint64_t off) override {
    std::size_t allowed = n;
    Result<void> r = fs_->before_write(n, &allowed);
    if (allowed > 0) {
      fs_->on_change(path_);
      if (auto w = f_->pwrite(buf, allowed, off); !w) return w;
    }
    return r;
  }
  Result<void> datasync() override {
    if (auto r = fs_->before_write(0, nullptr); !r) return r;
    // No real fdatasync: the crash is simulated, so only the record of what was synced counts
    // (and the tests stay fast on a VM where fdatasync costs milliseconds).
    fs_->on_sync(path_, *f_);
    return {};
  }
  Result<void> truncate(uint64_t size) override {
    if (auto r = fs_->before_write(0, nullptr); !r) return r;
    fs_->on_change(path_);
    return f_->truncate(size);
  }
  Result<uint64_t> size() override { return f_->size(); }
  Result<void> allocate(uint64_t size) override {
    if (auto r = fs_->before_write(0, nullptr); !r) return r;
    fs_->on_change(path_);
    return f_->allocate(size);
  }

 private:
  FaultInjectionFs* fs_;
  std::string path_;
  std::unique_ptr<File> f_;
};

Result<void> FaultInjectionFs::before_write(std::size_t n, std::size_t* allowed) {
  std::lock_guard<std::mutex> g(mu_);
  if (frozen_) {
    if (allowed) *allowed = 0;
    return Result<void>::failure(EIO);
  }
  if (allowed && writes_left_ >= 0) {
    if (writes_left_ == 0) {
      *allowed = n ? rng_() % n : 0;  // torn: a prefix lands, then the power goes
      frozen_ = true;
      return Result<void>::failure(EIO);
    }
    writes_left_--;
  }
  return {};
}

void FaultInjectionFs::on_sync(const std::string& path, File& f) {
  std::string content;
  auto size = f.size();
  content.resize(size ? *size : 0);
  auto n = f.pread(content.data(), content.size(), 0);
  content.resize(n ? *n : 0);
  std::lock_guard<std::mutex> g(mu_);
  files_[path].durable = std::move(content);
  files_[path].changed = false;
  datasyncs_++;
}

void FaultInjectionFs::on_change(const std::string& path) {
  std::lock_guard<std::mutex> g(mu_);
  files_[path].changed = true;
}

Result<std::unique_ptr<File>> FaultInjectionFs::open(const std::string& path, bool create) {
  const bool existed = std::filesystem::exists(path);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (frozen_ && create && !existed) return Result<std::unique_ptr<File>>::failure(EIO);
  }
  auto f = base_.open(path, create);
  if (!f) return f;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!files_.count(path)) {
      State s;
      if (existed) {
        s.durable = read_file(path);  // found on disk: durable as found
      } else {
        s.name_durable = false;
      }
      files_[path] = std::move(s);
    }
  }
  return std::unique_ptr<File>(new FaultFile(this, path, std::move(*f)));
}

Result<void> FaultInjectionFs::remove(const std::string& path) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (frozen_) return Result<void>::failure(EIO);
    files_.erase(path);
  }
  return base_.remove(path);
}

Result<void> FaultInjectionFs::sync_dir(const std::string& dir) {
  std::lock_guard<std::mutex> g(mu_);
  if (frozen_) return Result<void>::failure(EIO);
  for (auto& [path, s] : files_) {
    if (dir_of(path) == dir) s.name_durable = true;
  }
  return {};  // simulated, like datasync()
}

void FaultInjectionFs::crash(CrashMode mode) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto it = files_.begin(); it != files_.end();) {
    const std::string& path = it->first;
    if (!it->second.name_durable) {
      std::filesystem::remove(path);
      it = files_.erase(it);
      continue;
    }
    // Not written since its last sync: unchanged, so skip the costly reopen.
    if (!it->second.changed) {
      ++it;
      continue;
    }
    std::string now = read_file(path);
    std::string after = it->second.durable;
    // The unsynced bytes start where the file first differs from its durable content: the
    // end of the durable data when the log appends past it, or inside a preallocated tail of
    // zeros that the durable content already holds.
    std::size_t d = 0;
    while (d < now.size() && d < after.size() && now[d] == after[d]) d++;
    if (mode == CrashMode::kKeepTornPrefix && d < now.size()) {
      // A prefix of what was really written lands; past it the durable bytes stay.
      const std::size_t keep = d + rng_() % (now.size() - d + 1);
      std::string torn = now.substr(0, keep);
      if (keep < after.size()) torn += after.substr(keep);
      after = std::move(torn);
    } else if (mode == CrashMode::kGarbageTail && (now.size() > after.size() || d < now.size())) {
      const std::size_t room = std::max(now.size(), after.size()) - d;
      std::size_t n = 1 + rng_() % std::max<std::size_t>(room, 1);
      if (after.size() < d + n) after.resize(d + n);
      for (std::size_t i = 0; i < n; i++) after[d + i] = static_cast<char>(rng_());
    }
    write_file(path, after);
    it->second.changed = false;
    ++it;
  }
  frozen_ = false;
  writes_left_ = -1;
}

namespace {

TEST(StorageFaultInjectionFs, LosesExactlyWhatWasNotSynced) {
  TempDir d;
  FaultInjectionFs fs;
  const std::string a = d.sub("a"), b = d.sub("b");
  {
    auto fa = fs.open(a, true).value();
    ASSERT_TRUE(fs.sync_dir(d.path()).ok());  // a's name is durable, b's (below) is not
    ASSERT_TRUE(fa->pwrite("hello", 5, 0).ok());
    ASSERT_TRUE(fa->datasync().ok());
    ASSERT_TRUE(fa->pwrite(" world", 6, 5).ok());  // never synced
    auto fb = fs.open(b, true).value();
    ASSERT_TRUE(fb->pwrite("x", 1, 0).ok());
    ASSERT_TRUE(fb->datasync().ok());
  }
  EXPECT_EQ(read_file(a), "hello world");
  fs.crash(CrashMode::kDropUnsynced);
  EXPECT_EQ(read_file(a), "hello");
  EXPECT_FALSE(std::filesystem::exists(b));
}

TEST(StorageFaultInjectionFs, WritesIntoPreallocatedSpaceAreLostLikeAppends) {
  TempDir d;
  FaultInjectionFs fs;
  const std::string a = d.sub("a");
  {
    auto f = fs.open(a, true).value();
    ASSERT_TRUE(fs.sync_dir(d.path()).ok());
    ASSERT_TRUE(f->pwrite("head", 4, 0).ok());
    ASSERT_TRUE(f->allocate(16).ok());
    ASSERT_TRUE(f->datasync().ok());  // durable: "head" + 12 zeros
    ASSERT_TRUE(f->pwrite("tail", 4, 4).ok());  // same size, never synced
  }
  EXPECT_EQ(read_file(a), std::string("headtail") + std::string(8, '\0'));
  fs.crash(CrashMode::kDropUnsynced);
  EXPECT_EQ(read_file(a), std::string("head") + std::string(12, '\0'));
}

TEST(StorageFaultInjectionFs, FreezeAfterWritesTearsTheNextWrite) {
  TempDir d;
  FaultInjectionFs fs(5);
  auto f = fs.open(d.sub("f"), true).value();
  fs.freeze_after_writes(1);
  EXPECT_TRUE(f->pwrite("abcd", 4, 0).ok());
  std::string big(1000, 'z');
  EXPECT_EQ(f->pwrite(big.data(), big.size(), 4).error(), std::errc::io_error);
  EXPECT_LT(std::filesystem::file_size(d.sub("f")), 1004u);
  EXPECT_EQ(f->datasync().error(), std::errc::io_error);  // frozen
}

}  // namespace
}  // namespace lionet::storage::test
