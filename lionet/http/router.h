// lionet/http/router.h: lionet::http::Router, the "servlet" table: which handler serves which
// method and path, path parameters, 404 / 405 answers and before/after middleware.
//
//   Router r;
//   r.get("/hello", hello);                                        // exact path
//   r.get("/topics/{topic}/partitions/{p}/records", read_records);  // parameters
//   r.route("GET,POST", "/files/*.txt", text_files);                // glob in a segment
//   r.prefix("GET", "/static", static_files);                       // "/static" and below; rest in param("**")
//   r.before([](Request& q, Response& s) { return authorised(q) || (s.reply(401, "no\n"), false); });
//   r.after([](Request& q, Response& s) { s.set_header("X-Frame-Options", "DENY"); });
//   Server server(io, r.handler());
//
// Patterns are '/'-separated segments matched against the raw path (no percent-decoding, no
// normalisation: "/a//b" does not match "/a/b"; decode parameters with percent_decode() from
// url.h). A segment is a literal, `{name}` (one non-empty segment, captured), a glob with `*`
// (any run of characters within the segment) and `?` (one character), or, as the last segment
// only, `**` (the rest of the path, possibly empty, captured as param("**")).
// Precedence: exact paths first (a hash lookup), then the other patterns ordered segment by
// segment literal > glob > {param} > `**` (registration order breaks ties).
// Methods: a route lists methods ("GET", "GET,POST", "*" for any). HEAD is served by a GET
// route when no route lists HEAD (the server then sends headers only). A path that matches
// routes for other methods only is answered 405 with an Allow header listing them; a path that
// matches nothing goes to the not-found handler (default: 404 text).
// Middleware: before hooks run in registration order once the route is known (params are
// set); one returning false stops the chain (it has filled the response) and the handler is
// skipped. after hooks always run, in registration order, before anything is sent.
// Refusals: a route may also give a RefusalHandler (server.h) for requests the server refuses
// after reading their head (a Content-Length over max_body_bytes), so that its clients get its
// error format; refusal_handler() is the ServerOptions::refusal that routes them (params set,
// no middleware: the request is refused, not served). Routes without one, and requests that
// match no route, get the server's own answer.
// Owns: the route table. Must not: allocate per request, or change after the server starts
// (configuration calls are not thread-safe; dispatch() is, being const).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lionet/base/strings.h"
#include "lionet/http/request.h"
#include "lionet/http/response.h"
#include "lionet/http/server.h"

namespace lionet::http {

class Router {
 public:
  using Before = std::function<bool(Request&, Response&)>;
  using After = std::function<void(Request&, Response&)>;

  Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // methods: comma-separated method names or "*". Throws std::invalid_argument for a malformed
  // pattern (empty, not starting with '/', `**` not last, bad `{name}`).
  // `refused`: the route's answer to refused requests (see the top of the file), if any.
  Router& route(std::string_view methods, std::string_view pattern, Handler h, RefusalHandler refused = {});
  Router& get(std::string_view pattern, Handler h, RefusalHandler refused = {}) {
    return route("GET", pattern, std::move(h), std::move(refused));
  }
  Router& post(std::string_view pattern, Handler h, RefusalHandler refused = {}) {
    return route("POST", pattern, std::move(h), std::move(refused));
  }
  Router& put(std::string_view pattern, Handler h, RefusalHandler refused = {}) {
    return route("PUT", pattern, std::move(h), std::move(refused));
  }
  Router& del(std::string_view pattern, Handler h, RefusalHandler refused = {}) {
    return route("DELETE", pattern, std::move(h), std::move(refused));
  }
  Router& any(std::string_view pattern, Handler h, RefusalHandler refused = {}) {
    return route("*", pattern, std::move(h), std::move(refused));
  }
  // `path` and everything below it ("/static" serves "/static", "/static/", "/static/a/b");
  // the part after "path/" is param("**").
  Router& prefix(std::string_view methods, std::string_view path, Handler h, RefusalHandler refused = {});

  Router& not_found(Handler h);
  Router& before(Before hook);
  Router& after(After hook);

  // Routes req (sets its params and route_pattern), runs middleware and the handler.
  void dispatch(Request& req, Response& res) const;
  // A Server handler calling dispatch() on this router (which must outlive the server).
  Handler handler() const {
    return [this](Request& q, Response& s) { dispatch(q, s); };
  }
  // Whether dispatch(req) would run only code that never waits: req matches a route whose
  // handler was marked nonblocking() (server.h), and no before/after hook is installed (hooks
  // are not marked). Runs nothing; the route found is kept in req, and dispatch() uses it.
  bool runs_inline(Request& req) const;
  // A ServerOptions::runs_inline calling runs_inline() on this router (which must outlive the
  // server).
  std::function<bool(Request&)> inline_predicate() const {
    return [this](Request& q) { return runs_inline(q); };
  }
  // Routes a refused request (sets its params and route_pattern) to its route's RefusalHandler;
  // leaves res alone when there is none.
  void refuse(Request& req, Response& res, int status, std::string_view reason) const;
  // A ServerOptions::refusal calling refuse() on this router (which must outlive the server).
  RefusalHandler refusal_handler() const {
    return [this](Request& q, Response& s, int status, std::string_view reason) { refuse(q, s, status, reason); };
  }

 private:
  enum class SegKind : uint8_t { kLiteral, kGlob, kParam, kRest };
  struct Segment {
    SegKind kind;
    std::string text;  // literal/glob text, or the parameter name
  };
  struct Route {
    std::string pattern;
    std::vector<Segment> segments;
    uint32_t methods = 0;  // bit per known method
    bool any_method = false;
    std::vector<std::string> extra;  // unknown method names listed
    Handler handler;
    RefusalHandler refused;  // may be empty
    bool nonblocking = false;  // the handler was marked nonblocking()
    size_t order = 0;
    bool exact = false;  // literal segments only: found by the hash lookup
  };

  static bool match(const Route& r, std::string_view path, Request* req);
  static bool glob_match(std::string_view pattern, std::string_view text) noexcept;
  // 0: no, 1: yes (as listed), 2: yes as GET for a HEAD request.
  static int method_allows(const Route& r, std::string_view method, uint32_t bit) noexcept;
  const Route* find(Request& req, uint32_t* allow_mask, bool* path_matched) const;
  void run(const Handler& h, Request& req, Response& res) const;

  std::vector<std::unique_ptr<Route>> routes_;  // unique_ptr: params point into pattern strings
  std::unordered_map<std::string, std::vector<const Route*>, StringHash, std::equal_to<>> exact_;
  std::vector<const Route*> patterns_;  // sorted by precedence
  Handler not_found_;
  std::vector<Before> before_;
  std::vector<After> after_;
};
}  // namespace lionet::http
