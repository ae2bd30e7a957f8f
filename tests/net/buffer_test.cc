// Tests of lionet/net/buffer.h and the Stream helpers.
#include "lionet/net/buffer.h"

#include <gtest/gtest.h>

#include <string>

#include "lionet/net/socket_stream.h"
#include "net_test_util.h"

namespace lionet {
namespace {

TEST(Buffer, AppendConsumeAndCursors) {
  Buffer b(16);
  EXPECT_TRUE(b.empty());
  b.append("hello ");
  b.append("world");
  EXPECT_EQ(b.view(), "hello world");
  b.consume(6);
  EXPECT_EQ(b.view(), "world");
  b.consume(5);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.writable(), b.capacity());  // cursors reset once empty
}

TEST(Buffer, CompactsBeforeGrowingAndKeepsBytes) {
  Buffer b(32);
  b.append(std::string(30, 'a'));
  b.consume(28);  // 2 live bytes at offset 28
  b.ensure_writable(20);
  EXPECT_EQ(b.capacity(), 32u);  // compacted, not grown
  EXPECT_EQ(b.view(), "aa");
  b.ensure_writable(100);
  EXPECT_GE(b.writable(), 100u);
  EXPECT_EQ(b.view(), "aa");
  std::string big = test::pattern(10000);
  b.append(big);
  EXPECT_EQ(b.view(), "aa" + big);
}

TEST(Buffer, ReadsFromAndWritesToAStream) {
  test::Runtime rt(1, "epoll");
  rt.run([] {
    auto p = test::make_pair_sockets();
    SocketStream a(std::move(p.client)), b(std::move(p.server));
    Buffer out;
    out.append("request line\r\n");
    ASSERT_TRUE(out.write_to(a).ok());
    EXPECT_TRUE(out.empty());
    Buffer in(8);
    while (in.view().find("\r\n") == std::string_view::npos) {
      auto r = in.read_from(b, 4);
      ASSERT_TRUE(r.ok());
      ASSERT_GT(*r, 0u);
    }
    EXPECT_EQ(in.view(), "request line\r\n");
  });
}
}  // namespace
}  // namespace lionet
