// lionet/config/registry.h: the set of config vars and the loading of YAML files onto them.
//
// Owns: Registry (define/find vars, load a file/dir/string, environment overrides, dump of the
// effective config), ConfigError, LoadReport, and Config (static shorthands on the
// process-wide Registry::global()).
// Must not: be read by core layers (fiber/, sched/, io/, hook/ ...): ARCHITECTURE decision 10.
// Only app/ defines vars and copies them into Options structs.
//
// Mapping YAML onto vars. A var named "a.b.c" is the key c inside mapping b inside mapping a
// of any loaded file. The value under that key may itself be a mapping or sequence when the
// var's type is a container or struct. A key that is neither a var nor a section holding vars
// is "unknown": loading collects every unknown key with its position, logs ONE warning naming
// them all (logger "config") and returns them in LoadReport::unknown_keys.
//
// Environment. Each var can be overridden by LIONET_<NAME>, where <NAME> is the dotted name
// upper-cased with '.' replaced by '_': fiber.stack_size <- LIONET_FIBER_STACK_SIZE,
// log.loggers <- LIONET_LOG_LOGGERS. Nesting is flattened the same way at every depth
// (a.b.c_d <- LIONET_A_B_C_D); define() refuses two vars that would share a variable. The
// value is parsed as YAML, so containers work too: LIONET_LOG_LOGGERS='[{name: root}]'.
// Environment values are applied on every load, after (and so over) the files. A LIONET_*
// variable that names no var is reported as an unknown key.
//
// Atomicity. A load parses and validates everything it will apply (all files, then the
// environment) before changing any var: a bad file leaves every var as it was. Then each
// changed var is installed and its listeners run. Keys absent from the files keep their
// current value (loading overlays; reset_all() goes back to defaults).
//
// Thread-safety: define/find/load/dump may be called from any thread; loads are serialised.
// Reading a var while a load runs is safe (see config_var.h).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "lionet/config/config_var.h"

namespace lionet::config {

// A configuration that cannot be applied. what() reads
//   "<source>:<line>:<column>: key '<key>': <reason>"
// where source is a file path or "environment variable LIONET_X"; line/column are 1-based
// (0 when unknown, and then omitted from what()); key is empty for syntax errors.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string source, int line, int column, std::string key, std::string reason);
  const std::string& source() const noexcept { return source_; }
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  const std::string& key() const noexcept { return key_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string source_;
  int line_;
  int column_;
  std::string key_;
  std::string reason_;
};

struct UnknownKey {
  std::string key;  // dotted, e.g. "fiber.stak_size"
  std::string source;  // file path or "environment"
  int line = 0;  // 1-based, 0 for the environment
  int column = 0;
};

struct LoadReport {
  std::vector<std::string> sources;  // files read, in order
  std::vector<std::string> changed;  // vars whose value changed, sorted
  std::vector<UnknownKey> unknown_keys;  // in order of appearance
};

struct LoadOptions {
  bool apply_environment = true;  // apply LIONET_* overrides after the files
  bool warn_unknown = true;  // log the one warning about unknown keys
};

class Registry {
 public:
  // env_prefix: the prefix of overriding environment variables.
  explicit Registry(std::string env_prefix = "LIONET_");
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry used by the lionet binary.
  static Registry& global();

  // Creates a var. Throws std::logic_error if the name is malformed (segments of [a-z0-9_]
  // joined by '.'), already defined, a prefix of another var ("fiber" vs "fiber.stack_size"),
  // collides with another var's environment variable, or the default fails the validator.
  template <class T, class V = std::nullptr_t>
  std::shared_ptr<ConfigVar<T>> define(std::string name, T default_value, std::string description,
                                       V validator = nullptr) {
    Validator<T> check;
    if constexpr (!std::is_same_v<V, std::nullptr_t>) check = std::move(validator);
    check_new_name(name);
    auto var = std::make_shared<ConfigVar<T>>(name, std::move(default_value), std::move(description), env_name_of(name),
                                              std::move(check));
    add(var, typeid(T));
    return var;
  }

  // The var of that name and type; nullptr if there is none. Throws std::logic_error if it
  // exists with another type.
  template <class T>
  std::shared_ptr<ConfigVar<T>> find(std::string_view name) const {
    auto base = find_base(name, typeid(T));
    return std::static_pointer_cast<ConfigVar<T>>(base);
  }
  // Any var by name (nullptr if none).
  std::shared_ptr<ConfigVarBase> find_base(std::string_view name) const;
  // All vars, sorted by name.
  std::vector<std::shared_ptr<ConfigVarBase>> vars() const;

  // Throw ConfigError; see "Atomicity" above.
  LoadReport load_file(const std::filesystem::path& file, LoadOptions opts = {});
  // Every *.yml / *.yaml directly in dir, in sorted file-name order (later files win).
  LoadReport load_dir(const std::filesystem::path& dir, LoadOptions opts = {});
  // load_dir for a directory, load_file otherwise.
  LoadReport load_path(const std::filesystem::path& path, LoadOptions opts = {});
  // source_name stands in for the file name in errors.
  LoadReport load_string(std::string_view yaml, std::string_view source_name = "<string>", LoadOptions opts = {});
  // Only the environment overrides.
  LoadReport apply_environment(LoadOptions opts = {});

  // Every var back to its default.
  void reset_all();

  // The effective configuration as YAML text: every var (defaults filled in), nested by
  // section, each preceded by "# <description>". Loading the text back changes nothing.
  std::string dump() const;

  std::string env_name_of(std::string_view var_name) const;

  // Environment variables starting with `prefix` are not config overrides (the project's
  // own build, test and hand-over variables share LIONET_): they are neither applied nor
  // reported as unknown keys.
  void ignore_environment(std::string prefix);

 private:
  struct Document;
  void check_new_name(const std::string& name) const;
  void add(std::shared_ptr<ConfigVarBase> var, const std::type_info& type);
  std::shared_ptr<ConfigVarBase> find_base(std::string_view name, const std::type_info& type) const;
  LoadReport load_documents(std::vector<Document> docs, LoadOptions opts);

  struct Entry {
    std::shared_ptr<ConfigVarBase> var;
    const std::type_info* type;
  };
  const std::string env_prefix_;
  mutable std::mutex mutex_;  // protects vars_ and env_ignored_
  std::vector<std::string> env_ignored_;
  std::map<std::string, Entry, std::less<>> vars_;
  std::mutex load_mutex_;  // serialises loads
};

// Shorthands on Registry::global().
struct Config {
  static LoadReport load_file(const std::filesystem::path& f) { return Registry::global().load_file(f); }
  static LoadReport load_dir(const std::filesystem::path& d) { return Registry::global().load_dir(d); }
  static LoadReport load_path(const std::filesystem::path& p) { return Registry::global().load_path(p); }
  template <class T, class V = std::nullptr_t>
  static std::shared_ptr<ConfigVar<T>> define(std::string name, T def, std::string description, V validator = nullptr) {
    return Registry::global().define<T>(std::move(name), std::move(def), std::move(description), std::move(validator));
  }
};
}  // namespace lionet::config
