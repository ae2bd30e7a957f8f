// lionet/http/router.cc: Router (rules in router.h).
#include "lionet/http/router.h"

#include <algorithm>
#include <stdexcept>

#include "lionet/http/detail/chars.h"

namespace lionet::http {
namespace {
constexpr std::string_view kMethodNames[] = {"GET",   "HEAD",    "POST",  "PUT",    "DELETE",
                                             "PATCH", "OPTIONS", "TRACE", "CONNECT"};
constexpr uint32_t kGetBit = 1u << 0, kHeadBit = 1u << 1;

uint32_t method_bit(std::string_view m) noexcept {
  for (size_t i = 0; i < std::size(kMethodNames); ++i)
    if (kMethodNames[i] == m) return 1u << i;
  return 0;
}

// Next segment of a path (after a '/'); advances pos past it.
std::string_view next_segment(std::string_view path, size_t& pos) noexcept {
  size_t end = path.find('/', pos);
  if (end == std::string_view::npos) end = path.size();
  std::string_view seg = path.substr(pos, end - pos);
  pos = end;
  return seg;
}
}  // namespace

Router::Router() {
  not_found_ = [](Request&, Response& res) { res.reply(404, "Not Found\n"); };
}

Router& Router::route(std::string_view methods, std::string_view pattern, Handler h, RefusalHandler refused) {
  if (pattern.empty() || (pattern[0] != '/' && pattern != "*"))
    throw std::invalid_argument("lionet::http::Router: pattern must start with '/': " + std::string(pattern));
  auto r = std::make_unique<Route>();
  r->pattern = std::string(pattern);
  r->nonblocking = is_nonblocking(h);
  r->handler = std::move(h);
  r->refused = std::move(refused);
  r->order = routes_.size();
  // Methods.
  for_each_element(methods, [&](std::string_view m) {
    if (m == "*") {
      r->any_method = true;
    } else if (uint32_t bit = method_bit(m)) {
      r->methods |= bit;
    } else {
      for (char c : m)
        if (!detail::is_tchar(c)) throw std::invalid_argument("lionet::http::Router: bad method " + std::string(m));
      r->extra.emplace_back(m);
    }
    return true;
  });
  if (!r->any_method && !r->methods && r->extra.empty())
    throw std::invalid_argument("lionet::http::Router: no method for " + std::string(pattern));
  // Segments.
  bool exact = true;
  if (pattern != "*") {
    std::string_view p = r->pattern;
    size_t pos = 1;
    for (;;) {
      std::string_view seg = next_segment(p, pos);
      Segment s{SegKind::kLiteral, std::string(seg)};
      if (seg == "**") {
        if (pos != p.size()) throw std::invalid_argument("lionet::http::Router: '**' must be last in " + r->pattern);
        s.kind = SegKind::kRest;
        s.text = "**";
      } else if (seg.size() >= 2 && seg.front() == '{' && seg.back() == '}') {
        s.kind = SegKind::kParam;
        s.text = std::string(seg.substr(1, seg.size() - 2));
        if (s.text.empty() || s.text.find_first_of("{}/") != std::string::npos)
          throw std::invalid_argument("lionet::http::Router: bad parameter in " + r->pattern);
      } else if (seg.find_first_of("*?") != std::string_view::npos) {
        s.kind = SegKind::kGlob;
      } else if (seg.find_first_of("{}") != std::string_view::npos) {
        throw std::invalid_argument("lionet::http::Router: bad parameter in " + r->pattern);
      }
      if (s.kind != SegKind::kLiteral) exact = false;
      r->segments.push_back(std::move(s));
      if (pos >= p.size()) break;
      ++pos;  // skip '/'
    }
  }
  r->exact = exact;
  const Route* raw = r.get();
  routes_.push_back(std::move(r));
  if (exact) {
    exact_[raw->pattern].push_back(raw);
  } else {
    patterns_.push_back(raw);
    std::stable_sort(patterns_.begin(), patterns_.end(), [](const Route* a, const Route* b) {
      size_t n = std::min(a->segments.size(), b->segments.size());
      for (size_t i = 0; i < n; ++i) {
        if (a->segments[i].kind != b->segments[i].kind) return a->segments[i].kind < b->segments[i].kind;
      }
      // Same kinds so far: the longer pattern is more specific unless it continues with `**`.
      if (a->segments.size() != b->segments.size()) {
        const Route* longer = a->segments.size() > b->segments.size() ? a : b;
        bool longer_first = longer->segments[n].kind != SegKind::kRest;
        return (a == longer) == longer_first;
      }
      return false;
    });
  }
  return *this;
}

Router& Router::prefix(std::string_view methods, std::string_view path, Handler h, RefusalHandler refused) {
  std::string p(path);
  while (!p.empty() && p.back() == '/') p.pop_back();
  return route(methods, p + "/**", std::move(h), std::move(refused));
}

Router& Router::not_found(Handler h) {
  not_found_ = std::move(h);
  return *this;
}
Router& Router::before(Before hook) {
  before_.push_back(std::move(hook));
  return *this;
}
Router& Router::after(After hook) {
  after_.push_back(std::move(hook));
  return *this;
}

bool Router::glob_match(std::string_view pat, std::string_view text) noexcept {
  // Iterative wildcard match with one backtrack point (linear for a single '*', and at most
  // O(pattern * text) in general; segments are short).
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pat.size() && (pat[p] == '?' || pat[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

bool Router::match(const Route& r, std::string_view path, Request* req) {
  if (path.empty() || path[0] != '/') return false;
  size_t pos = 1;
  size_t nsegs = r.segments.size();
  for (size_t i = 0; i < nsegs; ++i) {
    const Segment& s = r.segments[i];
    if (s.kind == SegKind::kRest) {
      if (req) req->add_param("**", pos <= path.size() ? path.substr(std::min(pos, path.size())) : std::string_view());
      return true;
    }
    if (pos > path.size()) return false;  // path ran out
    std::string_view seg = next_segment(path, pos);
    switch (s.kind) {
      case SegKind::kLiteral:
        if (seg != s.text) return false;
        break;
      case SegKind::kGlob:
        if (!glob_match(s.text, seg)) return false;
        break;
      case SegKind::kParam:
        if (seg.empty()) return false;
        if (req) req->add_param(s.text, seg);
        break;
      case SegKind::kRest: break;
    }
    // pos is at the '/' after seg or at the end; step over the '/'.
    if (pos < path.size()) {
      ++pos;
    } else if (i + 1 < nsegs) {
      // Path ended. Only a following `**` (the prefix itself, "/static") may still match.
      if (r.segments[i + 1].kind == SegKind::kRest && i + 2 == nsegs) {
        if (req) req->add_param("**", std::string_view());
        return true;
      }
      return false;
    } else {
      return true;
    }
  }
  return false;  // segments exhausted but the path continues
}

int Router::method_allows(const Route& r, std::string_view method, uint32_t bit) noexcept {
  if (r.any_method || (r.methods & bit)) return 1;
  if (bit == 0) {
    for (const auto& m : r.extra)
      if (m == method) return 1;
    return 0;
  }
  if (bit == kHeadBit && (r.methods & kGetBit)) return 2;
  return 0;
}

const Router::Route* Router::find(Request& req, uint32_t* allow_mask, bool* path_matched) const {
  std::string_view path = req.path();
  std::string_view method = req.method();
  uint32_t bit = method_bit(method);
  const Route* head_via_get = nullptr;
  auto consider = [&](const Route* r) -> const Route* {
    *path_matched = true;
    int a = method_allows(*r, method, bit);
    if (a == 1) return r;
    if (a == 2 && !head_via_get) head_via_get = r;
    *allow_mask |= r->any_method ? ~0u : r->methods;
    return nullptr;
  };
  if (auto it = exact_.empty() ? exact_.end() : exact_.find(path); it != exact_.end()) {  // no hash when none
    for (const Route* r : it->second)
      if (consider(r)) return r;
  }
  for (const Route* r : patterns_) {
    if (!match(*r, path, nullptr)) continue;
    if (consider(r)) return r;
  }
  return head_via_get;
}

void Router::run(const Handler& h, Request& req, Response& res) const {
  bool go = true;
  for (const auto& b : before_) {
    if (!b(req, res)) {
      go = false;
      break;
    }
  }
  if (go) h(req, res);
  for (const auto& a : after_) a(req, res);
}

void Router::refuse(Request& req, Response& res, int status, std::string_view reason) const {
  uint32_t allow = 0;
  bool path_matched = false;
  req.clear_params();
  const Route* r = find(req, &allow, &path_matched);
  if (!r || !r->refused) return;
  req.clear_params();
  if (!r->exact) match(*r, req.path(), &req);
  req.set_route_pattern(r->pattern);
  r->refused(req, res, status, reason);
}

namespace {
// nonblocking()'s mark: a callable type of its own, found again by std::function::target.
struct NonBlocking {
  Handler h;
  void operator()(Request& q, Response& s) const { h(q, s); }
};
}  // namespace

Handler nonblocking(Handler h) {
  if (is_nonblocking(h)) return h;
  return NonBlocking{std::move(h)};
}

bool is_nonblocking(const Handler& h) noexcept { return h.target<NonBlocking>() != nullptr; }

bool Router::runs_inline(Request& req) const {
  if (!before_.empty() || !after_.empty()) return false;
  uint32_t allow = 0;
  bool path_matched = false;
  req.clear_params();
  const Route* r = find(req, &allow, &path_matched);
  if (r) req.set_route_hint(this, r);  // dispatch() uses it: one lookup per request
  return r && r->nonblocking;
}

void Router::dispatch(Request& req, Response& res) const {
  uint32_t allow = 0;
  bool path_matched = false;
  req.clear_params();
  const Route* r = static_cast<const Route*>(req.route_hint(this));
  if (!r) r = find(req, &allow, &path_matched);
  if (r) {
    req.clear_params();
    if (!r->exact) match(*r, req.path(), &req);
    req.set_route_pattern(r->pattern);
    run(r->handler, req, res);
    return;
  }
  if (path_matched) {
    run(
        [allow](Request&, Response& s) {
          std::string list;
          for (size_t i = 0; i < std::size(kMethodNames); ++i) {
            if (!(allow & (1u << i))) continue;
            if (!list.empty()) list += ", ";
            list += kMethodNames[i];
          }
          if ((allow & kGetBit) && !(allow & kHeadBit)) list += ", HEAD";
          s.reply(405, "Method Not Allowed\n");
          s.set_header("Allow", list);
        },
        req, res);
    return;
  }
  run(not_found_, req, res);
}
}  // namespace lionet::http
