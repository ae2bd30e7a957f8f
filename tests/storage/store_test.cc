// tests/storage/store_test.cc: Store: topics with partitions from options, on demand and
// explicitly; find() never creates; per-topic overrides; list/describe; reopen finds topics on
// disk.
#include "lionet/storage/store.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using test::TempDir;

StoreOptions options(const std::string& dir) {
  StoreOptions o;
  o.data_dir = dir + "/data";
  o.log.flush_policy = FlushPolicy::kNone;
  o.log.segment_bytes = 64 * 1024;
  TopicOptions orders;
  orders.name = "orders";
  orders.partitions = 3;
  orders.segment_bytes = 4096;
  orders.retention_bytes = 8192;
  o.topics.push_back(orders);
  return o;
}

TEST(StorageStore, TopicsFromOptionsWithOverrides) {
  TempDir d;
  auto store = Store::open(options(d.path())).value();
  EXPECT_EQ(store->list_topics(), std::vector<std::string>{"orders"});
  for (uint32_t p = 0; p < 3; p++) {
    EXPECT_TRUE(std::filesystem::is_directory(d.path() + "/data/orders-" + std::to_string(p)));
  }
  auto info = store->describe("orders").value();
  EXPECT_EQ(info.partitions.size(), 3u);
  EXPECT_EQ(info.options.segment_bytes, 4096u);  // overridden
  EXPECT_EQ(info.options.flush_policy, FlushPolicy::kNone);  // store-wide
  EXPECT_EQ(store->log("orders", 3).error(), Errc::kInvalidArgument);
  Log* p1 = store->log("orders", 1).value();
  test::append_n(*p1, 100, 1);
  info = store->describe("orders").value();
  EXPECT_EQ(info.partitions[1].end_offset, 100);
  EXPECT_GT(info.partitions[1].start_offset, 0);  // retention.bytes override applied
  EXPECT_EQ(info.partitions[0].end_offset, 0);
  EXPECT_EQ(store->describe("nope").error(), Errc::kNotFound);
}

TEST(StorageStore, OnDemandTopicsAndReopen) {
  TempDir d;
  StoreOptions o = options(d.path());
  o.default_partitions = 2;
  {
    auto store = Store::open(o).value();
    Log* l = store->log("events", 1).value();  // created on demand with 2 partitions
    test::append_n(*l, 10, 2);
    EXPECT_EQ(store->describe("events").value().partitions.size(), 2u);
    EXPECT_EQ(store->log("events", 2).error(), Errc::kInvalidArgument);
    TopicOptions more;
    more.name = "events";
    more.partitions = 4;  // grows, never shrinks
    ASSERT_TRUE(store->create_topic(more).ok());
    EXPECT_TRUE(store->log("events", 3).ok());
    TopicOptions bad;
    bad.name = "../etc";
    EXPECT_EQ(store->create_topic(bad).error(), Errc::kInvalidArgument);
    ASSERT_TRUE(store->flush().ok());
  }
  o.auto_create_topics = false;
  auto store = Store::open(o).value();
  EXPECT_EQ(store->list_topics(), (std::vector<std::string>{"events", "orders"}));
  EXPECT_EQ(store->describe("events").value().partitions.size(), 4u);
  Log* l = store->log("events", 1).value();
  EXPECT_EQ(l->end_offset(), 10);
  EXPECT_EQ(test::verify_range(*l, 0, 10), 10);
  EXPECT_EQ(store->log("unknown", 0).error(), Errc::kNotFound);
  EXPECT_TRUE(store->enforce_retention().ok());
}

// A data directory has one Store at a time: a second open (here, or in another process) is
// EBUSY while the first lives, and works once it is gone (a crash releases the lock too: it is
// a flock on the directory's descriptor). Two writers on one directory would interleave
// appends to the same segment files.
TEST(StorageStore, ASecondStoreOnTheSameDirectoryIsRefusedWhileTheFirstLives) {
  TempDir d;
  StoreOptions o = options(d.path());
  {
    auto first = Store::open(o).value();
    test::append_n(*first->log("orders", 0).value(), 5, 1);
    auto second = Store::open(o);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.error(), std::error_code(EBUSY, std::system_category()));
    EXPECT_EQ(first->log("orders", 0).value()->end_offset(), 5);  // the first is unharmed
    // Another process is refused as well (flock(1) asks for the same lock without waiting).
    const std::string cmd = "flock -n -x " + o.data_dir + " true";
    EXPECT_NE(std::system(cmd.c_str()), 0);
  }
  auto again = Store::open(o);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again.value()->log("orders", 0).value()->end_offset(), 5);
}

// find() is the lookup of readers: it never creates, whatever auto_create_topics says.
TEST(StorageStore, FindNeverCreates) {
  TempDir d;
  StoreOptions o = options(d.path());
  o.default_partitions = 2;
  auto store = Store::open(o).value();
  ASSERT_TRUE(o.auto_create_topics);
  EXPECT_EQ(store->find("ghost", 0).error(), Errc::kNotFound);
  EXPECT_EQ(store->find("ghost", 5).error(), Errc::kNotFound);
  EXPECT_EQ(store->list_topics(), std::vector<std::string>{"orders"});
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/data/ghost-0"));
  EXPECT_EQ(store->describe("ghost").error(), Errc::kNotFound);
  // A topic that exists: the same Log as log(); a partition past its count: kInvalidArgument.
  EXPECT_EQ(store->find("orders", 2).value(), store->log("orders", 2).value());
  EXPECT_EQ(store->find("orders", 3).error(), Errc::kInvalidArgument);
  // Once log() created a topic on demand, find() sees it.
  Log* l = store->log("ghost", 1).value();
  EXPECT_EQ(store->find("ghost", 1).value(), l);
  EXPECT_EQ(store->find("ghost", 2).error(), Errc::kInvalidArgument);
}

TEST(StorageStore, TopicNames) {
  EXPECT_TRUE(valid_topic_name("a.b_c-D9"));
  EXPECT_FALSE(valid_topic_name(""));
  EXPECT_FALSE(valid_topic_name(".."));
  EXPECT_FALSE(valid_topic_name("a/b"));
  EXPECT_FALSE(valid_topic_name(std::string(201, 'a')));
}

}  // namespace
}  // namespace lionet::storage
