// lionet/storage/store.cc: topics and partitions over Logs.
#include "lionet/storage/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <shared_mutex>

#include "lionet/storage/file_system.h"

namespace lionet::storage {

bool valid_topic_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

LogOptions TopicOptions::apply(const LogOptions& base) const {
  LogOptions o = base;
  if (segment_bytes) o.segment_bytes = *segment_bytes;
  if (segment_ms) o.segment_ms = *segment_ms;
  if (index_interval_bytes) o.index_interval_bytes = *index_interval_bytes;
  if (flush_policy) o.flush_policy = *flush_policy;
  if (flush_messages) o.flush_messages = *flush_messages;
  if (flush_ms) o.flush_ms = *flush_ms;
  if (retention_bytes) o.retention_bytes = *retention_bytes;
  if (retention_ms) o.retention_ms = *retention_ms;
  return o;
}

std::string Store::partition_dir(std::string_view topic, uint32_t p) const {
  return opt_.data_dir + "/" + std::string(topic) + "-" + std::to_string(p);
}

Store::~Store() {
  // The logs close first (members are destroyed after this body: release the lock by hand
  // only once they are gone).
  topics_.clear();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // drops the flock
}

Result<void> Store::lock_data_dir() {
  lock_fd_ = ::open(opt_.data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ < 0) return std::error_code(errno, std::system_category());
  // flock, not fcntl locks: held per open file description, so a second Store in the same
  // process is refused too, and the lock goes with the descriptor (a crash releases it).
  while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int e = errno == EWOULDBLOCK ? EBUSY : errno;
    return std::error_code(e, std::system_category());
  }
  return {};
}

Result<std::unique_ptr<Store>> Store::open(const StoreOptions& options) {
  if (options.data_dir.empty() || options.default_partitions == 0) return make_error_code(Errc::kInvalidArgument);
  std::unique_ptr<Store> store(new Store(options));
  FileSystem& fs = options.log.fs ? *options.log.fs : default_file_system();
  if (auto r = fs.create_dirs(options.data_dir); !r) return r.error();
  if (auto r = store->lock_data_dir(); !r) return r.error();
  // Topics on disk: "<topic>-<n>" directories; the partition count is the largest n + 1.
  std::map<std::string, uint32_t> found;
  auto names = fs.list(options.data_dir);
  if (!names) return names.error();
  for (const std::string& n : *names) {
    auto dash = n.rfind('-');
    if (dash == std::string::npos || dash + 1 == n.size()) continue;
    std::string_view num(n.c_str() + dash + 1);
    if (!std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }) || num.size() > 5) continue;
    std::string topic = n.substr(0, dash);
    if (!valid_topic_name(topic)) continue;
    uint32_t p = static_cast<uint32_t>(std::stoul(std::string(num)));
    found[topic] = std::max(found[topic], p + 1);
  }
  std::unique_lock<lionet::SharedMutex> g(store->mu_);
  for (const TopicOptions& t : options.topics) {
    TopicOptions o = t;
    if (auto it = found.find(t.name); it != found.end()) o.partitions = std::max(o.partitions, it->second);
    if (auto r = store->create_locked(o); !r) return r.error();
  }
  for (const auto& [name, parts] : found) {
    if (store->topics_.count(name)) continue;
    TopicOptions o;
    o.name = name;
    o.partitions = parts;
    if (auto r = store->create_locked(o); !r) return r.error();
  }
  return store;
}

Result<void> Store::create_locked(const TopicOptions& options) {
  if (!valid_topic_name(options.name) || options.partitions == 0 || options.partitions > 10000) {
    return make_error_code(Errc::kInvalidArgument);
  }
  auto it = topics_.find(options.name);
  if (it == topics_.end()) {
    auto t = std::make_unique<Topic>();
    t->options = options;
    t->log_options = options.apply(opt_.log);
    it = topics_.emplace(options.name, std::move(t)).first;
  }
  Topic& t = *it->second;
  while (t.partitions.size() < options.partitions) {
    auto log = Log::open(partition_dir(options.name, static_cast<uint32_t>(t.partitions.size())), t.log_options);
    if (!log) return log.error();
    t.partitions.push_back(std::move(*log));
  }
  t.options.partitions = static_cast<uint32_t>(t.partitions.size());
  return {};
}

Result<void> Store::create_topic(const TopicOptions& options) {
  std::unique_lock<lionet::SharedMutex> g(mu_);
  return create_locked(options);
}

Result<Log*> Store::find(std::string_view topic, uint32_t partition) const {
  std::shared_lock<lionet::SharedMutex> g(mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return make_error_code(Errc::kNotFound);
  if (partition >= it->second->partitions.size()) return make_error_code(Errc::kInvalidArgument);
  return it->second->partitions[partition].get();
}

Result<Log*> Store::log(std::string_view topic, uint32_t partition) {
  if (auto l = find(topic, partition); l || l.error() != Errc::kNotFound) return l;
  if (!opt_.auto_create_topics) return make_error_code(Errc::kNotFound);
  if (partition >= opt_.default_partitions) return make_error_code(Errc::kInvalidArgument);
  std::unique_lock<lionet::SharedMutex> g(mu_);
  if (topics_.find(topic) == topics_.end()) {  // not created meanwhile by another caller
    TopicOptions o;
    o.name = std::string(topic);
    o.partitions = opt_.default_partitions;
    if (auto r = create_locked(o); !r) return r.error();
  }
  auto& t = *topics_.find(topic)->second;
  if (partition >= t.partitions.size()) return make_error_code(Errc::kInvalidArgument);
  return t.partitions[partition].get();
}

std::vector<std::string> Store::list_topics() const {
  std::shared_lock<lionet::SharedMutex> g(mu_);
  std::vector<std::string> v;
  for (const auto& [name, t] : topics_) v.push_back(name);
  return v;
}

Result<TopicInfo> Store::describe(std::string_view topic) const {
  std::shared_lock<lionet::SharedMutex> g(mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return make_error_code(Errc::kNotFound);
  TopicInfo info;
  info.name = it->first;
  info.dir_pattern = opt_.data_dir + "/" + it->first + "-<partition>";
  info.options = it->second->log_options;
  for (std::size_t p = 0; p < it->second->partitions.size(); p++) {
    const Log& l = *it->second->partitions[p];
    info.partitions.push_back(
        PartitionInfo{static_cast<uint32_t>(p), l.start_offset(), l.end_offset(), l.size_bytes(), l.segment_count()});
  }
  return info;
}

Result<void> Store::flush() {
  std::shared_lock<lionet::SharedMutex> g(mu_);
  for (auto& [name, t] : topics_) {
    for (auto& l : t->partitions) {
      if (auto r = l->flush(); !r) return r;
    }
  }
  return {};
}

Result<std::size_t> Store::enforce_retention() {
  std::shared_lock<lionet::SharedMutex> g(mu_);
  std::size_t n = 0;
  for (auto& [name, t] : topics_) {
    for (auto& l : t->partitions) {
      auto r = l->enforce_retention();
      if (!r) return r.error();
      n += *r;
    }
  }
  return n;
}

}  // namespace lionet::storage
