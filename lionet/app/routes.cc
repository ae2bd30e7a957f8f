// lionet/app/routes.cc: the routes of the lionet binary's http(s) servers (static, storage,
// metrics, health, debug, debug_fibers, pprof, hello, websocket, proxy). The per-server
// instrumentation and the /metrics page are metrics.cc; the status page (debug) debug_page.cc.
//
// Owns: the mapping RouteConfig -> Router entries (a named route's handler kept for the
// try_files "@name" fallbacks of its server's static routes). Must not: block a handler on anything but the fiber-aware calls it makes (files, storage).

#include <map>

#include "lionet/app/counting_stream.h"
#include "lionet/app/debug_page.h"
#include "lionet/app/detail/running.h"
#include "lionet/app/pprof.h"
#include "lionet/hook/hook.h"
#include "lionet/http/auth.h"
#include "lionet/http/handler_limits.h"
#include "lionet/http/static_files.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/websocket/server.h"

namespace lionet::app {
namespace {

// One route's handler, the methods it serves ("*", "GET,HEAD" or "GET") and whether its path
// is a prefix.
struct RouteHandler {
  std::string methods = "GET";
  bool prefix = false;
  http::Handler handler;
};

// A server's named routes, each filled when that route is built, so that a fallback may name a
// route listed after it (the router is built whole before it serves).
using NamedRoutes = std::map<std::string, std::shared_ptr<RouteHandler>>;

// The handler of the route `name`, as a fallback: the request unchanged, whatever its method
// (the methods a route lists are its URL's; the handler itself answers what it does not serve).
http::Handler named_fallback(const NamedRoutes& named, const std::string& name) {
  return [slot = named.at(name)](http::Request& q, http::Response& s) { slot->handler(q, s); };
}

http::StaticOptions static_options(const RouteConfig& r) {
  http::StaticOptions o;
  o.root = r.root;
  o.mode = http::parse_file_mode(r.mode).value_or(http::FileMode::kAuto);  // validated at load
  o.memory_max = r.memory_max;
  o.sendfile_min = r.sendfile_min;
  o.chunk_size = r.chunk_size;
  o.cache_bytes = r.cache_bytes;
  o.open_file_cache = r.open_file_cache;
  o.open_file_cache_valid = r.open_file_cache_valid;
  o.precompressed = r.precompressed;
  o.index = r.index;
  o.follow_symlinks_outside_root = r.follow_symlinks_outside_root;
  TryFiles t = split_try_files(r.try_files);
  o.try_files = std::move(t.candidates);
  o.fallback_status = t.status;
  return o;
}

// Every route type but storage (several routes: add_storage_routes), which cannot be named.
RouteHandler route_handler(Runtime::Impl& im, Running& srv, const RouteConfig& r, const NamedRoutes& named) {
  if (r.type == "static") {
    auto files_opt = static_options(r);
    const std::string fallback = split_try_files(r.try_files).route;
    if (!fallback.empty()) files_opt.fallback = named_fallback(named, fallback);
    auto files = std::make_shared<http::StaticFiles>(std::move(files_opt));  // throws: caught by add_route
    im.static_routes.push_back({r.root, files});
    // With a route to fall back to, every method comes here: others than GET/HEAD go to it.
    return {fallback.empty() ? "GET,HEAD" : "*", true, files->handler()};  // the handler shares the state
  } else if (r.type == "metrics") {
    return {"GET", false, http::nonblocking([&im](http::Request&, http::Response& res) {
              res.reply(200, render_metrics(im), "text/plain; version=0.0.4; charset=utf-8");
            })};
  } else if (r.type == "health") {
    return {"GET", false, http::nonblocking([](http::Request&, http::Response& res) { res.reply(200, "ok\n"); })};
  } else if (r.type == "websocket") {  // handler: echo (checked at load)
    websocket::Options wo;
    wo.max_message_size = r.max_message_size;
    wo.max_frame_size = r.max_message_size;
    wo.send_queue_bytes = r.send_queue_bytes;
    wo.deflate.enabled = r.deflate;
    if (r.ping_interval.count() > 0) wo.ping_interval = r.ping_interval;
    else wo.ping_interval.reset();
    return {"GET", false,
            websocket::accept(
                [](websocket::Socket& ws) {
                  websocket::Message m;
                  while (ws.receive(m))
                    if (!ws.send(m)) break;
                },
                wo)};
  } else if (r.type == "proxy") {
    auto proxy = std::make_shared<http::Proxy>(proxy_options(r.proxy, r.path));  // throws: caught by add_route
    srv.proxies.emplace_back(r.path.empty() ? "@" + r.name : r.path, proxy);
    return {"*", true, [proxy](http::Request& q, http::Response& s) { proxy->handle(q, s); }};
  } else if (r.type == "hello") {
    return {"GET", false,
            http::nonblocking([](http::Request&, http::Response& res) { res.reply(200, "hello world"); })};
  } else if (r.type == "debug_fibers") {
    const bool remote = r.allow_remote;
    const FiberDumpOptions dump = fiber_dump_options(im.config);
    return {"GET", false, [remote, dump](http::Request& req, http::Response& res) {
              if (!remote) {
                auto peer = req.peer_address();
                if (!peer.ok() || !peer.value().is_loopback()) {
                  res.reply(403, "the fiber dump is served to loopback clients only (allow_remote: true to change)\n");
                  return;
                }
              }
              res.reply(200, dump_fibers(dump));
            }};
  } else if (r.type == "debug") {
    return {"GET", true, debug_handler(im, r.allow_remote)};  // <path>/ and <path>/status.json
  } else if (r.type == "pprof") {
    return {"GET,POST", true,  // <path>/profile and <path>/symbol
            pprof_handler({.allow_remote = r.allow_remote,
                           .max_seconds = std::chrono::seconds(static_cast<long>(r.max_seconds))})};
  }
  throw std::runtime_error("unknown route type '" + r.type + "'");  // rejected at load already
}

// What a route puts around its handler(s), outermost first: its address rules (403), its rate
// limit (429 / a delay), its authentication (401/403/429, http/auth.h; outside the route's
// timeout: a bcrypt check is not the handler's time). One limiter and one authenticator per
// route, shared by a storage route's several handlers. The route's label in /metrics is its
// path, or "@name" for a named route without one.
using Guard = std::function<http::Handler(http::Handler)>;
Guard route_guard(Running& srv, const RouteConfig& r, std::shared_ptr<http::Authenticator> auth) {
  const bool rules = !r.allow.empty() || !r.deny.empty();
  if (!rules && !r.rate_limit && !auth) return [](http::Handler h) { return h; };
  if (!rules && !r.rate_limit) return [auth](http::Handler h) { return auth->wrap(std::move(h)); };
  Running::Access& a = srv.access_of(r.path.empty() ? "@" + r.name : r.path);
  a.has_rules = a.has_rules || rules;
  std::shared_ptr<http::RateLimiter> limiter;
  if (r.rate_limit) {
    a.has_rate_limit = true;
    const RateLimitConfig& c = *r.rate_limit;
    http::RateLimitOptions o;
    o.rate = c.rate;
    o.burst = c.burst;
    o.nodelay = c.nodelay;
    if (c.key != "address") o.key_header = c.key.substr(std::string_view("header:").size());
    o.max_keys = c.max_keys;
    o.status = c.status;
    limiter = std::make_shared<http::RateLimiter>(std::move(o));
  }
  return [&a, limiter, auth, ar = AddressRules::parse(r.allow, r.deny)](http::Handler h) {  // checked at load
    if (auth) h = auth->wrap(std::move(h));
    if (limiter) h = http::with_rate_limit(std::move(h), limiter, &a.rate);
    return http::with_address_rules(std::move(h), ar, &a.denied);
  };
}

void add_route(Runtime::Impl& im, Running& srv, http::Router& router, const RouteConfig& r, NamedRoutes& named) {
  const std::string where = "server '" + srv.cfg.name + "': route " + (r.path.empty() ? "@" + r.name : r.path) + ": ";
  std::shared_ptr<http::Authenticator> auth;
  if (r.auth) {
    try {
      auth = make_authenticator(*r.auth);
    } catch (const std::exception& e) {
      throw StartupError(where + e.what());
    }
    srv.auths.push_back({r.path.empty() ? "@" + r.name : r.path, *r.auth, auth});
  }
  const Guard guard = route_guard(srv, r, auth);
  if (r.type == "storage") {  // never named (checked at load)
    add_storage_routes(router, r.path, *im.store, im.storage_stats, storage_api_options(im.config.storage), guard);
    return;
  }
  RouteHandler h;
  try {
    h = route_handler(im, srv, r, named);
  } catch (const std::exception& e) {
    throw StartupError(where + e.what());
  }
  if (r.timeout.count() > 0) h.handler = http::with_timeout(std::move(h.handler), r.timeout);
  h.handler = guard(std::move(h.handler));
  if (!r.name.empty()) *named.at(r.name) = h;
  if (r.path.empty()) return;  // a named route: reached only as a fallback
  if (h.prefix) router.prefix(h.methods, r.path, std::move(h.handler));
  else router.route(h.methods, r.path, std::move(h.handler));
}

}  // namespace

std::unique_ptr<http::Router> build_router(Runtime::Impl& im, Running& srv) {
  auto router = std::make_unique<http::Router>();
  NamedRoutes named;
  for (const auto& r : srv.cfg.routes)
    if (!r.name.empty()) named.emplace(r.name, std::make_shared<RouteHandler>());
  for (const auto& r : srv.cfg.routes) add_route(im, srv, *router, r, named);
  return router;
}

}  // namespace lionet::app
