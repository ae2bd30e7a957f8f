// Tests of lionet/http/router.h: exact / param / glob / prefix routes and their precedence,
// 405 with Allow, HEAD served by GET, the not-found handler, middleware order.
#include "lionet/http/router.h"

#include "lionet/http/field_block.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace lionet::http {
namespace {

// Parses a request line + Host into a head the Request can view (kept alive by the fixture).
class RouterTest : public ::testing::Test {
 protected:
  Response call(const std::string& method, const std::string& target) {
    raw_ = method + " " + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
    parser_.reset();
    EXPECT_EQ(parser_.parse(raw_.data(), raw_.size()), RequestParser::State::kDone) << raw_;
    req_.reset(&parser_.head(), nullptr);
    Response res;
    router_.dispatch(req_, res);
    return res;
  }
  // A handler that answers with its name and the params it saw.
  Handler named(std::string name) {
    return [name](Request& q, Response& s) {
      std::string body = name;
      for (size_t i = 0; i < q.param_count(); ++i)
        body += " " + std::string(q.param_at(i).name) + "=" + std::string(q.param_at(i).value);
      s.reply(200, body);
    };
  }
  std::string body_of(const std::string& method, const std::string& target) {
    Response r = call(method, target);
    return std::to_string(r.status()) + ":" + std::string(r.body_view());
  }

  Router router_;
  RequestParser parser_;
  std::string raw_;
  Request req_;
};

TEST_F(RouterTest, ExactPathsAndParameters) {
  router_.get("/hello", named("hello"));
  router_.get("/topics/{topic}/partitions/{p}/records", named("records"));
  router_.get("/", named("root"));
  EXPECT_EQ(body_of("GET", "/hello"), "200:hello");
  EXPECT_EQ(body_of("GET", "/hello?x=1"), "200:hello");
  EXPECT_EQ(body_of("GET", "/"), "200:root");
  EXPECT_EQ(body_of("GET", "/topics/orders/partitions/3/records"), "200:records topic=orders p=3");
  EXPECT_EQ(body_of("GET", "/topics//partitions/3/records"), "404:Not Found\n");  // params are non-empty
  EXPECT_EQ(body_of("GET", "/topics/a/partitions/3/records/x"), "404:Not Found\n");
  EXPECT_EQ(body_of("GET", "/hello/"), "404:Not Found\n");  // no normalisation
  EXPECT_EQ(req_.route_pattern(), "");
}

TEST_F(RouterTest, GlobsAndPrefixes) {
  router_.get("/files/*.txt", named("txt"));
  router_.get("/files/report-??.csv", named("csv"));
  router_.prefix("GET", "/static", named("static"));
  router_.get("/static/special", named("special"));
  EXPECT_EQ(body_of("GET", "/files/a.txt"), "200:txt");
  EXPECT_EQ(body_of("GET", "/files/.txt"), "200:txt");
  EXPECT_EQ(body_of("GET", "/files/a.txt.bak"), "404:Not Found\n");
  EXPECT_EQ(body_of("GET", "/files/sub/a.txt"), "404:Not Found\n");  // '*' stays in its segment
  EXPECT_EQ(body_of("GET", "/files/report-07.csv"), "200:csv");
  EXPECT_EQ(body_of("GET", "/files/report-7.csv"), "404:Not Found\n");
  EXPECT_EQ(body_of("GET", "/static"), "200:static **=");
  EXPECT_EQ(body_of("GET", "/static/"), "200:static **=");
  EXPECT_EQ(body_of("GET", "/static/css/site.css"), "200:static **=css/site.css");
  EXPECT_EQ(body_of("GET", "/static/special"), "200:special");  // exact beats prefix
  EXPECT_EQ(body_of("GET", "/staticx"), "404:Not Found\n");
}

TEST_F(RouterTest, PrecedenceLiteralThenGlobThenParamThenRest) {
  router_.get("/a/**", named("rest"));
  router_.get("/a/{x}", named("param"));
  router_.get("/a/b*", named("glob"));
  router_.get("/a/{x}/c", named("param-c"));
  EXPECT_EQ(body_of("GET", "/a/bee"), "200:glob");
  EXPECT_EQ(body_of("GET", "/a/zed"), "200:param x=zed");
  EXPECT_EQ(body_of("GET", "/a/zed/c"), "200:param-c x=zed");
  EXPECT_EQ(body_of("GET", "/a/zed/d"), "200:rest **=zed/d");
}

TEST_F(RouterTest, MethodMismatchIs405WithAllow) {
  router_.route("GET,POST", "/thing", named("thing"));
  router_.put("/thing", named("put"));
  router_.del("/items/{id}", named("del"));
  Response r = call("PATCH", "/thing");
  EXPECT_EQ(r.status(), 405);
  EXPECT_EQ(r.header("Allow"), "GET, POST, PUT, HEAD");
  EXPECT_EQ(body_of("PUT", "/thing"), "200:put");
  r = call("GET", "/items/7");
  EXPECT_EQ(r.status(), 405);
  EXPECT_EQ(r.header("Allow"), "DELETE");
  EXPECT_EQ(body_of("DELETE", "/items/7"), "200:del id=7");
  // Unknown methods: only "*" or a route listing them.
  router_.route("PURGE", "/cache", named("purge"));
  EXPECT_EQ(body_of("PURGE", "/cache"), "200:purge");
  EXPECT_EQ(call("BREW", "/cache").status(), 405);
}

TEST_F(RouterTest, HeadIsServedByGetUnlessListed) {
  router_.get("/g", named("get"));
  router_.route("HEAD", "/h", named("head-only"));
  router_.get("/h", named("get-h"));
  EXPECT_EQ(body_of("HEAD", "/g"), "200:get");
  EXPECT_EQ(body_of("HEAD", "/h"), "200:head-only");
}

TEST_F(RouterTest, NotFoundHandlerIsReplaceable) {
  router_.not_found([](Request& q, Response& s) { s.reply(404, "nothing at " + std::string(q.path())); });
  EXPECT_EQ(body_of("GET", "/missing"), "404:nothing at /missing");
}

TEST_F(RouterTest, MiddlewareRunsInOrderAndCanStopTheChain) {
  std::vector<std::string> trace;
  router_.before([&](Request& q, Response&) {
    trace.push_back("b1 " + std::string(q.param("id")));
    return true;
  });
  router_.before([&](Request& q, Response& s) {
    trace.push_back("b2");
    if (q.query() == "deny") {
      s.reply(403, "denied");
      return false;
    }
    return true;
  });
  router_.after([&](Request&, Response& s) {
    trace.push_back("a1");
    s.set_header("X-After", "1");
  });
  router_.after([&](Request&, Response&) { trace.push_back("a2"); });
  router_.get("/x/{id}", [&](Request&, Response& s) {
    trace.push_back("handler");
    s.reply(200, "ok");
  });
  Response r = call("GET", "/x/5");
  EXPECT_EQ(r.status(), 200);
  EXPECT_EQ(r.header("X-After"), "1");
  EXPECT_EQ(trace, (std::vector<std::string>{"b1 5", "b2", "handler", "a1", "a2"}));
  trace.clear();
  r = call("GET", "/x/6?deny");
  EXPECT_EQ(r.status(), 403);
  EXPECT_EQ(trace, (std::vector<std::string>{"b1 6", "b2", "a1", "a2"}));
  trace.clear();
  r = call("GET", "/nowhere");  // middleware also wraps the not-found handler
  EXPECT_EQ(r.status(), 404);
  EXPECT_EQ(trace, (std::vector<std::string>{"b1 ", "b2", "a1", "a2"}));
}

TEST_F(RouterTest, BadPatternsThrowAtSetup) {
  EXPECT_THROW(router_.get("nope", named("x")), std::invalid_argument);
  EXPECT_THROW(router_.get("/a/**/b", named("x")), std::invalid_argument);
  EXPECT_THROW(router_.get("/a/{}", named("x")), std::invalid_argument);
  EXPECT_THROW(router_.get("/a/{x", named("x")), std::invalid_argument);
  EXPECT_THROW(router_.route("", "/a", named("x")), std::invalid_argument);
  EXPECT_THROW(router_.route("G E T", "/a", named("x")), std::invalid_argument);
}

// HTTP/2 answers a request on the connection's fiber only when its route's handler was marked
// nonblocking() and no middleware could wait (ServerOptions::runs_inline).
TEST_F(RouterTest, RunsInlineOnlyForRoutesMarkedNonblockingAndWithoutMiddleware) {
  Handler marked = nonblocking(named("fast"));
  EXPECT_TRUE(is_nonblocking(marked));
  EXPECT_FALSE(is_nonblocking(named("slow")));
  EXPECT_TRUE(is_nonblocking(nonblocking(marked)));  // marking twice keeps one wrapper
  router_.get("/fast/{id}", marked);
  router_.get("/slow", named("slow"));
  router_.prefix("GET", "/files", nonblocking(named("files")));
  auto inline_for = [&](const std::string& method, const std::string& target) {
    raw_ = method + " " + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
    parser_.reset();
    EXPECT_EQ(parser_.parse(raw_.data(), raw_.size()), RequestParser::State::kDone);
    req_.reset(&parser_.head(), nullptr);
    return router_.inline_predicate()(req_);
  };
  EXPECT_TRUE(inline_for("GET", "/fast/7"));
  EXPECT_TRUE(inline_for("HEAD", "/fast/7"));  // HEAD served by the GET route
  EXPECT_TRUE(inline_for("GET", "/files/a/b.css"));
  EXPECT_FALSE(inline_for("GET", "/slow"));
  EXPECT_FALSE(inline_for("POST", "/fast/7"));  // 405: not the marked handler
  EXPECT_FALSE(inline_for("GET", "/nowhere"));  // the not-found handler is not marked
  EXPECT_EQ(body_of("GET", "/fast/7"), "200:fast id=7");  // the mark changes nothing else
  // dispatch() runs the route runs_inline() found for that very request, with its parameters;
  // another request object is routed afresh.
  auto dispatched = [&] {
    Response res;
    router_.dispatch(req_, res);
    return std::to_string(res.status()) + ":" + std::string(res.body_view());
  };
  EXPECT_TRUE(inline_for("GET", "/fast/42"));
  EXPECT_EQ(dispatched(), "200:fast id=42");
  EXPECT_TRUE(inline_for("HEAD", "/files/x"));
  EXPECT_EQ(dispatched(), "200:files **=x");
  EXPECT_FALSE(inline_for("GET", "/slow"));
  EXPECT_EQ(dispatched(), "200:slow");
  EXPECT_FALSE(inline_for("POST", "/fast/7"));
  EXPECT_EQ(dispatched().substr(0, 4), "405:");
  router_.before([](Request&, Response&) { return true; });
  EXPECT_FALSE(inline_for("GET", "/fast/7"));  // a hook may wait
}

TEST(ResponseHeaders, SetReplaceRemoveAndRefuseInjection) {
  Response r;
  EXPECT_TRUE(r.set_header("X-A", "1"));
  EXPECT_TRUE(r.add_header("Set-Cookie", "a=1"));
  EXPECT_TRUE(r.add_header("Set-Cookie", "b=2"));
  EXPECT_TRUE(r.set_header("x-a", "2"));
  EXPECT_EQ(r.header("X-A"), "2");
  EXPECT_EQ(r.header_block(), "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nx-a: 2\r\n");
  EXPECT_EQ(r.remove_header("set-cookie"), 2u);
  EXPECT_FALSE(r.set_header("X-B", "a\r\nInjected: 1"));
  EXPECT_FALSE(r.set_header("X B", "1"));
  EXPECT_FALSE(r.has_header("X-B"));
  EXPECT_EQ(r.header_block(), "x-a: 2\r\n");
  // Removal keeps the order of the other fields, wherever the removed ones were.
  EXPECT_TRUE(r.add_header("Vary", "a"));
  EXPECT_TRUE(r.add_header("X-A", "3"));
  EXPECT_TRUE(r.add_header("Link", "<x>"));
  EXPECT_EQ(r.remove_header("X-A"), 2u);
  EXPECT_EQ(r.header_block(), "Vary: a\r\nLink: <x>\r\n");
  EXPECT_EQ(r.remove_header("nothing"), 0u);
  EXPECT_TRUE(r.set_header("Link", "<y>"));
  EXPECT_EQ(r.header_block(), "Vary: a\r\nLink: <y>\r\n");
}

// Values are checked eight bytes at a time where they are plain: a refused byte is found at
// every position of a long value, and HTAB and obs-text (allowed, though not "plain") pass.
TEST(ResponseHeaders, AValueIsRefusedForAControlByteAtAnyPosition) {
  for (size_t len : {1u, 7u, 8u, 9u, 16u, 23u, 40u}) {
    for (size_t at = 0; at < len; ++at) {
      for (char bad : {'\r', '\n', '\0', '\x01', '\x1f', '\x7f'}) {
        std::string v(len, 'v');
        v[at] = bad;
        Response r;
        EXPECT_FALSE(r.add_header("X-V", v)) << "len " << len << " at " << at << " byte " << int(bad);
        EXPECT_TRUE(r.header_block().empty());
      }
      for (char ok : {'\t', ' ', '~', '\x80', '\xff'}) {
        std::string v(len, 'v');
        v[at] = ok;
        Response r;
        EXPECT_TRUE(r.add_header("X-V", v)) << "len " << len << " at " << at << " byte " << int(ok);
      }
    }
  }
}

// A field copied from the response's own fields (a view into its block) arrives intact even when
// appending it makes the block grow (a reallocation under the view).
TEST(ResponseHeaders, AFieldCopiedFromTheResponseItselfSurvivesTheBlockGrowing) {
  Response r;
  const std::string value(100, 'v');
  ASSERT_TRUE(r.add_header("X-Long", value));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(r.add_header("X-Copy", r.header("X-Long")));
  size_t copies = 0;
  for_each_line(r.header_block(), [&](size_t, size_t, std::string_view n, std::string_view v) {
    if (n == "X-Copy") {
      ++copies;
      EXPECT_EQ(v, value);
    }
    return true;
  });
  EXPECT_EQ(copies, 20u);
}
}  // namespace
}  // namespace lionet::http
