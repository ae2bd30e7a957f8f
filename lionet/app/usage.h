// lionet/app/usage.h: the command line's one description, from which `lionet --help`, the man
// page lionet(8) (`lionet --print-man`, installed by the package) and `lionet --version`'s build
// options are all printed, so none can drift from another. The man page's configuration
// section comes from the config vars themselves, as conf/REFERENCE.md does
// (app/config_reference.h).
//
// Owns: the option table, the signals and files described to users, and their renderings.
// Must not: parse arguments (main.cc does) or read configuration.
#pragma once

#include <string>

#include "lionet/config/registry.h"

namespace lionet::app {
// `lionet --help`.
std::string usage_text();
// `lionet --version`: "lionet X.Y.Z" and one line per build option (IO backends, file engines,
// TLS library, systemd support, sanitizer).
std::string version_text();
// lionet(8) in roff (man(7) macros), every configuration key of `registry` included.
std::string man_page(const config::Registry& registry);
}  // namespace lionet::app
