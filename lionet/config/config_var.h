// lionet/config/config_var.h: one typed configuration variable.
//
// Owns: ConfigVarBase (name, description, type-erased parse/install, listeners) and
// ConfigVar<T> (the typed value, its default and validator). Vars are created by
// Registry::define() (registry.h) and live as long as someone holds the shared_ptr.
// Must not: read files or the environment (the registry does), or be read by core layers
// (ARCHITECTURE decision 10: only app/ binds vars to Options structs).
//
// Thread-safety:
//  - value()/snapshot() may run in parallel with everything, including a reload: the value
//    is an immutable shared_ptr<const T> swapped under value_mutex_, which readers hold only
//    to copy the pointer (a refcount increment); value() copies T outside the lock. A plain
//    mutex rather than glibc's reader-preferring rwlock, so readers cannot starve a reload.
//  - set() and Registry loads serialise on write_mutex_; listeners run in the setting thread,
//    under write_mutex_, in commit order, after the new value is visible to readers.
//  - remove_listener() may run in parallel with a notification: when it returns (called from
//    any thread other than the one notifying), the listener is not running and will not run
//    again, so the listener's captures may be destroyed.
//  - A listener must not set() the var it listens to (that throws std::logic_error).
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lionet/config/traits.h"
#include "lionet/config/validator.h"

namespace lionet::config {

class ConfigVarBase {
 public:
  virtual ~ConfigVarBase() = default;
  ConfigVarBase(const ConfigVarBase&) = delete;
  ConfigVarBase& operator=(const ConfigVarBase&) = delete;

  // Dotted name, e.g. "fiber.stack_size".
  const std::string& name() const noexcept { return name_; }
  const std::string& description() const noexcept { return description_; }
  // The environment variable that overrides it, e.g. "LIONET_FIBER_STACK_SIZE".
  const std::string& env_name() const noexcept { return env_name_; }

  virtual YAML::Node to_yaml() const = 0;  // current value
  virtual YAML::Node default_to_yaml() const = 0;  // default value

  // Converts and validates n without touching the var. Throws ConversionError.
  virtual std::shared_ptr<const void> parse(const YAML::Node& n) const = 0;
  // Installs a value from parse() and notifies listeners if it differs. Returns whether it did.
  virtual bool install(std::shared_ptr<const void> value) = 0;
  // Back to the default (notifies if that changes the value).
  virtual void reset() = 0;

  void remove_listener(uint64_t id);

 protected:
  ConfigVarBase(std::string name, std::string description, std::string env_name)
      : name_(std::move(name)), description_(std::move(description)), env_name_(std::move(env_name)) {}

  using ErasedListener = std::function<void(const void* old_value, const void* new_value)>;
  uint64_t add_erased_listener(ErasedListener fn);
  // Calls every listener; caller holds write_mutex_.
  void notify(const void* old_value, const void* new_value);
  // Takes write_mutex_, refusing re-entry from one of this var's own listeners.
  std::unique_lock<std::mutex> lock_for_write();

  mutable std::mutex value_mutex_;  // protects the value pointer of ConfigVar<T>

 private:
  std::string name_;
  std::string description_;
  std::string env_name_;
  std::mutex write_mutex_;  // serialises writers and notifications
  std::mutex listeners_mutex_;  // protects listeners_ and next_id_
  std::vector<std::pair<uint64_t, std::shared_ptr<ErasedListener>>> listeners_;
  uint64_t next_id_ = 1;
  // The thread currently running listeners (default id when none); written under write_mutex_.
  std::atomic<std::thread::id> notifying_thread_{};
};

template <class T>
class ConfigVar final : public ConfigVarBase {
 public:
  using Listener = std::function<void(const T& old_value, const T& new_value)>;

  ConfigVar(std::string name, T default_value, std::string description, std::string env_name, Validator<T> validator)
      : ConfigVarBase(std::move(name), std::move(description), std::move(env_name)),
        default_(std::make_shared<const T>(std::move(default_value))),
        value_(default_),
        validator_(std::move(validator)) {
    if (auto err = validate(*default_)) {
      throw std::logic_error("config var '" + this->name() + "': default value rejected: " + *err);
    }
  }

  // A copy of the current value.
  T value() const { return *snapshot(); }
  // The current value without copying it; stays valid (and unchanged) while held.
  std::shared_ptr<const T> snapshot() const {
    std::lock_guard lock(value_mutex_);
    return value_;
  }
  const T& default_value() const noexcept { return *default_; }

  // Validates and sets; throws std::invalid_argument("<name>: <reason>") if rejected.
  // Returns whether the value changed (listeners ran).
  bool set(T v) {
    if (auto err = validate(v)) throw std::invalid_argument(name() + ": " + *err);
    return install(std::make_shared<const T>(std::move(v)));
  }

  // Returns an id for remove_listener().
  uint64_t add_listener(Listener fn) {
    return add_erased_listener([fn = std::move(fn)](const void* o, const void* n) {
      fn(*static_cast<const T*>(o), *static_cast<const T*>(n));
    });
  }

  std::optional<std::string> validate(const T& v) const { return validator_ ? validator_(v) : std::nullopt; }

  YAML::Node to_yaml() const override { return encode(*snapshot()); }
  YAML::Node default_to_yaml() const override { return encode(*default_); }

  std::shared_ptr<const void> parse(const YAML::Node& n) const override {
    T v = decode<T>(n);
    if (auto err = validate(v)) throw ConversionError(n.Mark(), "invalid value: " + *err);
    return std::make_shared<const T>(std::move(v));
  }

  bool install(std::shared_ptr<const void> value) override {
    auto next = std::static_pointer_cast<const T>(std::move(value));
    auto lock = lock_for_write();
    // Only writers (serialised by write_mutex_) change value_, so reading it here unlocked is safe.
    if (same(*value_, *next)) return false;
    std::shared_ptr<const T> prev;
    {
      std::lock_guard vl(value_mutex_);
      prev = std::exchange(value_, next);
    }
    notify(prev.get(), next.get());
    return true;
  }

  void reset() override { install(default_); }

 private:
  static bool same(const T& a, const T& b) {
    if constexpr (std::equality_comparable<T>) {
      return a == b;
    } else {
      return YAML::Dump(encode(a)) == YAML::Dump(encode(b));
    }
  }

  const std::shared_ptr<const T> default_;
  std::shared_ptr<const T> value_;  // guarded by value_mutex_; written under write_mutex_ too
  const Validator<T> validator_;
};
}  // namespace lionet::config
