// tests/config/config_test_util.h: helpers shared by the config tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lionet/config/registry.h"

namespace lionet::config_test {

// Loads without the environment so that a developer's LIONET_* variables cannot interfere.
inline constexpr config::LoadOptions kNoEnv{.apply_environment = false, .warn_unknown = false};

// Loads `yaml` and returns the error text (fails the test if it loads).
inline std::string load_error(config::Registry& r, const std::string& yaml) {
  try {
    r.load_string(yaml, "bad.yml", kNoEnv);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "loaded without error:\n" << yaml;
  return "";
}

}  // namespace lionet::config_test
