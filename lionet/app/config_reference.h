// lionet/app/config_reference.h: conf/REFERENCE.md, the configuration reference, generated
// from the config vars themselves (name, default, description, environment variable), so the
// documentation cannot drift from the code. `lionet --print-reference` prints it;
// scripts/gen-config-reference.sh writes conf/REFERENCE.md; tests/app fails when it is stale.
#pragma once

#include <string>

#include "lionet/config/registry.h"

namespace lionet::app {
// Markdown: one table per top-level section, keys in name order.
std::string config_reference(const config::Registry& registry);
}  // namespace lionet::app
