// tests/storage/fault_injection_fs.h: a FileSystem for tests that simulates power loss (the
// pattern of RocksDB's FaultInjectionTestFS and LevelDB's fault_injection_test).
//
// Owns: a record, per file path, of the bytes that were durable at its last fdatasync, and of
// the names created since their directory's last fsync. Must not: be used outside tests.
//
// Model: a file's durable content is what it held at its last datasync() (a file that existed
// before the first open counts as durable as found). A file created since the last sync_dir()
// of its directory has no durable name. crash() (call it with no Log open: destroy the Log
// after freeze() so its closing flush cannot sync anything) rewrites every tracked file to its
// durable content, removes files without a durable name, and per CrashMode adds to the
// unsynced tail: nothing, a prefix of the bytes that were really written (a torn write), or
// garbage. Removals are treated as durable at once (a simplification: a removed segment
// does not come back).
#pragma once

#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include "lionet/storage/file_system.h"

namespace lionet::storage::test {

enum class CrashMode { kDropUnsynced, kKeepTornPrefix, kGarbageTail };

class FaultInjectionFs final : public FileSystem {
 public:
  explicit FaultInjectionFs(uint32_t seed = 1) : base_(default_file_system()), rng_(seed) {}

  Result<std::unique_ptr<File>> open(const std::string& path, bool create) override;
  Result<std::vector<std::string>> list(const std::string& dir) override { return base_.list(dir); }
  Result<void> create_dirs(const std::string& dir) override { return base_.create_dirs(dir); }
  Result<void> remove(const std::string& path) override;
  Result<void> sync_dir(const std::string& dir) override;

  // From now on every write/sync fails with EIO (the machine is going down).
  void freeze() {
    std::lock_guard<std::mutex> g(mu_);
    frozen_ = true;
  }
  // After `n` more successful pwrites, the next one writes a random prefix of its bytes and
  // freezes the file system (a write torn by the power cut). -1: never.
  void freeze_after_writes(int n) {
    std::lock_guard<std::mutex> g(mu_);
    writes_left_ = n;
  }
  // Power loss: see the file comment. Unfreezes.
  void crash(CrashMode mode);
  int datasyncs() const {
    std::lock_guard<std::mutex> g(mu_);
    return datasyncs_;
  }

 private:
  friend class FaultFile;
  struct State {
    std::string durable;  // content at the last datasync
    bool name_durable = true;  // false while created and its directory not synced since
    bool changed = false;  // written, truncated or allocated since the last sync
  };
  Result<void> before_write(std::size_t n, std::size_t* allowed);  // EIO when frozen
  void on_sync(const std::string& path, File& f);
  void on_change(const std::string& path);
  static std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

  FileSystem& base_;
  mutable std::mutex mu_;
  std::map<std::string, State> files_;
  bool frozen_ = false;
  int writes_left_ = -1;
  int datasyncs_ = 0;
  std::mt19937 rng_;
};

}  // namespace lionet::storage::test
