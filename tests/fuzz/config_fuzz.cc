// tests/fuzz/config_fuzz.cc: arbitrary bytes as a YAML configuration file, loaded onto every
// config var of the lionet binary (scheduler, log, io, workers, servers with routes and tls,
// ...). Invariant: a load either applies or throws config::ConfigError; nothing else may
// escape (no other exception, crash, leak or sanitizer report), and a rejected load changes
// no var (compared through the effective-config dump).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lionet/app/auth_route.cc"  // NOLINT
#include "lionet/app/config_binding.cc"  // NOLINT: app/ is not part of the library
#include "lionet/app/proxy_route.cc"  // NOLINT
#include "lionet/app/server_config.cc"  // NOLINT
#include "lionet/app/static_route.cc"  // NOLINT
#include "lionet/app/storage_binding.cc"  // NOLINT
#include "lionet/app/websocket_route.cc"  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lionet;
  static config::Registry* registry = [] {
    auto* r = new config::Registry("LIONET_FUZZ_UNUSED_");
    static app::AppConfig cfg = app::define_config(*r);
    return r;
  }();
  registry->reset_all();
  const std::string before = registry->dump();
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  try {
    registry->load_string(yaml, "fuzz.yml", config::LoadOptions{.apply_environment = false, .warn_unknown = false});
  } catch (const config::ConfigError&) {
    if (registry->dump() != before) __builtin_trap();  // a rejected load changed a var
  }
  return 0;
}
