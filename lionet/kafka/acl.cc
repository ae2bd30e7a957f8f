// lionet/kafka/acl.cc: Acl and pattern matching (see acl.h).
#include "lionet/kafka/acl.h"

namespace lionet::kafka {

bool name_matches(std::string_view pattern, std::string_view name) noexcept {
  if (!pattern.empty() && pattern.back() == '*')
    return name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
  return pattern == name;
}

bool any_matches(const std::vector<std::string>& patterns, std::string_view name) noexcept {
  for (const std::string& p : patterns)
    if (name_matches(p, name)) return true;
  return false;
}

const Permissions* Acl::for_user(std::string_view user) const noexcept {
  if (users_.empty()) return nullptr;
  if (auto it = users_.find(user); it != users_.end()) return &it->second;
  if (auto it = users_.find(std::string_view("*")); it != users_.end()) return &it->second;
  return &nothing_;
}

}  // namespace lionet::kafka
