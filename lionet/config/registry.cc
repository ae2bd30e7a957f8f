// lionet/config/registry.cc: loading YAML onto config vars (see registry.h for the rules).
// A load is two phases: (1) parse every source, walk it onto vars, convert and validate every
// value, collecting unknown keys; nothing is changed and the first error is thrown as a
// ConfigError; (2) install the values (listeners run) and log the one unknown-keys warning.
#include "lionet/config/registry.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "lionet/log/log.h"

extern char** environ;

namespace lionet::config {
namespace {
std::string where(const std::string& source, int line, int column) {
  // Appends one piece at a time: `":" + std::to_string(..)` trips GCC 12's false -Wrestrict.
  std::string s = source;
  if (line > 0) {
    s.append(":").append(std::to_string(line)).append(":").append(std::to_string(column));
  }
  return s;
}

std::string format_error(const std::string& source, int line, int column, const std::string& key,
                         const std::string& reason) {
  std::string s = where(source, line, column) + ": ";
  if (!key.empty()) s += "key '" + key + "': ";
  return s + reason;
}

int line_of(const YAML::Mark& m) { return m.is_null() ? 0 : m.line + 1; }
int column_of(const YAML::Mark& m) { return m.is_null() ? 0 : m.column + 1; }

bool valid_name(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  char prev = 0;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  return true;
}
}  // namespace

ConfigError::ConfigError(std::string source, int line, int column, std::string key, std::string reason)
    : std::runtime_error(format_error(source, line, column, key, reason)),
      source_(std::move(source)),
      line_(line),
      column_(column),
      key_(std::move(key)),
      reason_(std::move(reason)) {}

struct Registry::Document {
  std::string source;
  YAML::Node root;
};

Registry::Registry(std::string env_prefix) : env_prefix_(std::move(env_prefix)) {}

Registry& Registry::global() {
  static Registry& registry = []() -> Registry& {
    static Registry r;  // never destroyed before main() returns; vars outlive users
    // Not configuration: CMake's -Werror switch (.ci/run exports it), the tests' peer paths
    // and the listening sockets a binary upgrade hands over.
    for (const char* p : {"LIONET_WERROR", "LIONET_TEST_", "LIONET_LISTEN_"}) r.ignore_environment(p);
    return r;
  }();
  return registry;
}

void Registry::ignore_environment(std::string prefix) {
  std::lock_guard lock(mutex_);
  env_ignored_.push_back(std::move(prefix));
}

std::string Registry::env_name_of(std::string_view var_name) const {
  std::string env = env_prefix_;
  for (char c : var_name) env += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

void Registry::check_new_name(const std::string& name) const {
  if (!valid_name(name)) {
    throw std::logic_error("config var name '" + name + "' is malformed: use [a-z0-9_] segments joined by '.'");
  }
  std::lock_guard lock(mutex_);
  if (vars_.count(name)) throw std::logic_error("config var '" + name + "' is defined twice");
  // "a.b" must not be both a var and a section: look for vars under "a.b." and vars that are
  // sections of it ("a").
  auto under = vars_.lower_bound(name + ".");
  if (under != vars_.end() && under->first.starts_with(name + ".")) {
    throw std::logic_error("config var '" + name + "' would hide '" + under->first + "'");
  }
  for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    if (vars_.count(name.substr(0, dot))) {
      throw std::logic_error("config var '" + name + "' lies under var '" + name.substr(0, dot) + "'");
    }
  }
  std::string env = env_name_of(name);
  for (const auto& [other, e] : vars_) {
    if (e.var->env_name() == env) {
      throw std::logic_error("config vars '" + name + "' and '" + other + "' share the environment variable " + env);
    }
  }
  for (const auto& p : env_ignored_) {
    if (env.starts_with(p))
      throw std::logic_error("config var '" + name + "': its environment variable " + env + " is ignored (" + p + ")");
  }
}

void Registry::add(std::shared_ptr<ConfigVarBase> var, const std::type_info& type) {
  std::lock_guard lock(mutex_);
  std::string name = var->name();
  vars_.emplace(std::move(name), Entry{std::move(var), &type});
}

std::shared_ptr<ConfigVarBase> Registry::find_base(std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.var;
}

std::shared_ptr<ConfigVarBase> Registry::find_base(std::string_view name, const std::type_info& type) const {
  std::lock_guard lock(mutex_);
  auto it = vars_.find(name);
  if (it == vars_.end()) return nullptr;
  if (*it->second.type != type) {
    throw std::logic_error("config var '" + std::string(name) + "' looked up with the wrong type");
  }
  return it->second.var;
}

std::vector<std::shared_ptr<ConfigVarBase>> Registry::vars() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<ConfigVarBase>> out;
  for (const auto& [name, e] : vars_) out.push_back(e.var);
  return out;
}

LoadReport Registry::load_file(const std::filesystem::path& file, LoadOptions opts) {
  std::ifstream in(file);
  if (!in) throw ConfigError(file.string(), 0, 0, "", "cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  return load_string(text.str(), file.string(), opts);
}

LoadReport Registry::load_string(std::string_view yaml, std::string_view source_name, LoadOptions opts) {
  std::vector<Document> docs;
  try {
    docs.push_back(Document{std::string(source_name), YAML::Load(std::string(yaml))});
  } catch (const YAML::Exception& e) {
    throw ConfigError(std::string(source_name), line_of(e.mark), column_of(e.mark), "", "YAML syntax error: " + e.msg);
  }
  return load_documents(std::move(docs), opts);
}

LoadReport Registry::load_dir(const std::filesystem::path& dir, LoadOptions opts) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    auto ext = entry.path().extension();
    if ((ext == ".yml" || ext == ".yaml") && !entry.is_directory()) files.push_back(entry.path());
  }
  if (ec) throw ConfigError(dir.string(), 0, 0, "", "cannot read the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<Document> docs;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) throw ConfigError(f.string(), 0, 0, "", "cannot open the file");
    std::stringstream text;
    text << in.rdbuf();
    try {
      docs.push_back(Document{f.string(), YAML::Load(text.str())});
    } catch (const YAML::Exception& e) {
      throw ConfigError(f.string(), line_of(e.mark), column_of(e.mark), "", "YAML syntax error: " + e.msg);
    }
  }
  return load_documents(std::move(docs), opts);
}

LoadReport Registry::load_path(const std::filesystem::path& path, LoadOptions opts) {
  if (std::filesystem::is_directory(path)) return load_dir(path, opts);
  return load_file(path, opts);
}

LoadReport Registry::apply_environment(LoadOptions opts) {
  opts.apply_environment = true;
  return load_documents({}, opts);
}

void Registry::reset_all() {
  std::lock_guard load(load_mutex_);
  for (auto& v : vars()) v->reset();
}

namespace {
struct Pending {
  std::shared_ptr<ConfigVarBase> var;
  YAML::Node node;
  std::string source;
  std::shared_ptr<const void> value;
};
}  // namespace

LoadReport Registry::load_documents(std::vector<Document> docs, LoadOptions opts) {
  std::lock_guard load(load_mutex_);
  LoadReport report;
  std::map<std::string, Pending> pending;  // by var name; later sources overwrite earlier ones

  // Is `name` a section, i.e. a proper prefix (at a dot) of some var?
  auto is_section = [&](const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = vars_.lower_bound(name + ".");
    return it != vars_.end() && it->first.starts_with(name + ".");
  };

  auto walk = [&](auto& self, const YAML::Node& map, const std::string& prefix, const std::string& source) -> void {
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) {
        throw ConfigError(source, line_of(kv.first.Mark()), column_of(kv.first.Mark()), prefix,
                          "a key must be a plain string");
      }
      std::string name = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
      if (auto var = find_base(name)) {
        pending[name] = Pending{var, kv.second, source, nullptr};
      } else if (is_section(name)) {
        if (kv.second.IsMap()) {
          self(self, kv.second, name, source);
        } else if (!kv.second.IsNull()) {
          throw ConfigError(source, line_of(kv.second.Mark()), column_of(kv.second.Mark()), name,
                            "expected a mapping (this section holds config keys)");
        }
      } else {
        report.unknown_keys.push_back(UnknownKey{name, source, line_of(kv.first.Mark()), column_of(kv.first.Mark())});
      }
    }
  };

  for (const auto& doc : docs) {
    report.sources.push_back(doc.source);
    if (doc.root.IsNull()) continue;  // an empty file
    if (!doc.root.IsMap()) {
      throw ConfigError(doc.source, line_of(doc.root.Mark()), column_of(doc.root.Mark()), "",
                        "the top level of a config file must be a mapping");
    }
    walk(walk, doc.root, "", doc.source);
  }

  if (opts.apply_environment) {
    std::map<std::string, std::shared_ptr<ConfigVarBase>> by_env;
    for (auto& v : vars()) by_env.emplace(v->env_name(), v);
    std::vector<std::string> ignored;
    {
      std::lock_guard lock(mutex_);
      ignored = env_ignored_;
    }
    std::vector<std::pair<std::string, std::string>> env;
    for (char** e = environ; e && *e; ++e) {
      std::string_view kv = *e;
      if (!kv.starts_with(env_prefix_)) continue;
      if (std::any_of(ignored.begin(), ignored.end(), [&](const std::string& p) { return kv.starts_with(p); }))
        continue;
      auto eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      env.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
    std::sort(env.begin(), env.end());
    for (const auto& [key, value] : env) {
      auto it = by_env.find(key);
      if (it == by_env.end()) {
        report.unknown_keys.push_back(UnknownKey{key, "environment", 0, 0});
        continue;
      }
      std::string source = "environment variable " + key;
      YAML::Node node;
      try {
        node = YAML::Load(value);
      } catch (const YAML::Exception& e) {
        throw ConfigError(source, line_of(e.mark), column_of(e.mark), it->second->name(),
                          "YAML syntax error: " + e.msg);
      }
      pending[it->second->name()] = Pending{it->second, node, source, nullptr};
    }
  }

  // Phase 1 (continued): convert and validate everything before changing anything.
  for (auto& [name, p] : pending) {
    try {
      p.value = p.var->parse(p.node);
    } catch (const ConversionError& e) {
      throw ConfigError(p.source, line_of(e.mark()), column_of(e.mark()), name + e.path(), e.reason());
    }
  }

  // Phase 2: commit.
  for (auto& [name, p] : pending) {
    if (p.var->install(std::move(p.value))) report.changed.push_back(name);
  }
  if (opts.warn_unknown && !report.unknown_keys.empty()) {
    std::string list;
    for (const auto& u : report.unknown_keys) {
      if (!list.empty()) list += ", ";
      list += u.key + " (" + where(u.source, u.line, u.column) + ")";
    }
    LIONET_LOG_WARN(log::get("config"), "{} unknown config key{} ignored: {}", report.unknown_keys.size(),
                    report.unknown_keys.size() == 1 ? "" : "s", list);
  }
  return report;
}

// ---- dump ----
namespace {
std::vector<std::string> split(const std::string& name) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1) {
    out.push_back(name.substr(start, dot - start));
  }
  out.push_back(name.substr(start));
  return out;
}

void append_indented(std::string& out, const std::string& text, std::size_t indent) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) out += std::string(indent, ' ') + line + "\n";
}
}  // namespace

std::string Registry::dump() const {
  std::string out;
  std::vector<std::string> open;  // sections currently open
  for (const auto& var : vars()) {
    auto segs = split(var->name());
    std::size_t common = 0;
    while (common < open.size() && common + 1 < segs.size() && open[common] == segs[common]) ++common;
    open.resize(common);
    for (std::size_t i = common; i + 1 < segs.size(); ++i) {
      out += std::string(2 * i, ' ') + segs[i] + ":\n";
      open.push_back(segs[i]);
    }
    std::size_t indent = 2 * (segs.size() - 1);
    std::string comment = "# " + var->description();
    for (std::size_t p = 0; (p = comment.find('\n', p)) != std::string::npos; p += 3) comment.replace(p, 1, "\n# ");
    append_indented(out, comment, indent);
    YAML::Emitter em;
    em << YAML::BeginMap << YAML::Key << segs.back() << YAML::Value << var->to_yaml() << YAML::EndMap;
    append_indented(out, em.c_str(), indent);
  }
  return out;
}
}  // namespace lionet::config
