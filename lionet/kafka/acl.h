// lionet/kafka/acl.h: per-user permissions of a SASL listener: which topics a user may
// produce to or consume from, which consumer groups it may use.
//
// Owns: Permissions (one user's lists), Acl (user -> Permissions), name_matches(). Must not:
// know requests or error codes (broker.cc maps a refusal onto TOPIC_AUTHORIZATION_FAILED /
// GROUP_AUTHORIZATION_FAILED).
//
// A pattern is a name ("orders"), "*" (every name) or a prefix ending in '*' ("orders*":
// "orders", "orders-eu", ...). Semantics, as written in lionet/kafka/README.md:
//  - no Acl (an empty one): every authenticated user may do everything;
//  - with an Acl, a user is looked up by name, then under "*" (the default entry); a user with
//    neither may do nothing but authenticate (Kafka's allow.everyone.if.no.acl.found=false);
//  - produce: Produce; consume: Fetch and the topics of OffsetCommit / OffsetFetch; either one
//    lets a user see a topic (Metadata, ListOffsets, auto-creation); groups: FindCoordinator,
//    JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch. InitProducerId
//    (idempotent producers) needs a non-empty produce list.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lionet::kafka {

// "*" matches everything, "abc*" every name starting with "abc", anything else itself only.
bool name_matches(std::string_view pattern, std::string_view name) noexcept;
bool any_matches(const std::vector<std::string>& patterns, std::string_view name) noexcept;

struct Permissions {
  std::vector<std::string> produce;  // topic patterns
  std::vector<std::string> consume;  // topic patterns
  std::vector<std::string> groups;  // group patterns

  bool may_produce(std::string_view topic) const noexcept { return any_matches(produce, topic); }
  bool may_consume(std::string_view topic) const noexcept { return any_matches(consume, topic); }
  bool may_describe(std::string_view topic) const noexcept { return may_produce(topic) || may_consume(topic); }
  bool may_use_group(std::string_view group) const noexcept { return any_matches(groups, group); }
  bool operator==(const Permissions&) const = default;
};

class Acl {
 public:
  Acl() = default;
  explicit Acl(const std::map<std::string, Permissions>& users) : users_(users.begin(), users.end()) {}
  bool empty() const noexcept { return users_.empty(); }
  // nullptr: everything allowed (an empty Acl). Else the user's entry, the "*" entry, or an
  // entry that allows nothing.
  const Permissions* for_user(std::string_view user) const noexcept;

 private:
  std::map<std::string, Permissions, std::less<>> users_;
  Permissions nothing_;
};

}  // namespace lionet::kafka
