// Test helpers over librdkafka's C++ API (pkg-config rdkafka++, linked by tests/CMakeLists.txt
// into kafka_tests and app_tests): a producer of numbered records and a consumer-group member
// that commits exactly what it processed, so a test can assert that every record is consumed
// exactly once and in order per partition across rebalances and restarts.
//
// Records: record i has key "k<i>", value "<i>", and goes to partition i % partitions, so with
// one producer at a time the record at offset o of partition p is i = o * partitions + p.
//
// GroupMember: enable.auto.commit=false; after every `commit_every` records and in the revoke
// callback (before the partitions go to another member, librdkafka calls it from consume() on
// the member's own thread, after every record it returned was processed) it commits the next
// offset of each partition it processed, synchronously. So a partition's next owner starts
// exactly after the last record processed here.
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace lionet::kafka::testing {

inline std::unique_ptr<RdKafka::Conf> rd_conf(const std::map<std::string, std::string>& kv) {
  std::unique_ptr<RdKafka::Conf> c(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const auto& [k, v] : kv)
    if (c->set(k, v, err) != RdKafka::Conf::CONF_OK) throw std::runtime_error("librdkafka " + k + ": " + err);
  return c;
}

// Produces records [from, to) (see the header) with acks=all and idempotence; returns how many
// were acknowledged without error (to - from when all went well).
inline int64_t produce_numbered(const std::string& bootstrap, const std::string& topic, int32_t partitions,
                                int64_t from, int64_t to) {
  struct Reports : RdKafka::DeliveryReportCb {
    std::atomic<int64_t> ok{0}, failed{0};
    void dr_cb(RdKafka::Message& m) override { (m.err() == RdKafka::ERR_NO_ERROR ? ok : failed).fetch_add(1); }
  } reports;
  auto conf = rd_conf({{"bootstrap.servers", bootstrap},
                       {"acks", "all"},
                       {"enable.idempotence", "true"},
                       {"linger.ms", "5"},
                       {"log_level", "3"}});
  std::string err;
  if (conf->set("dr_cb", &reports, err) != RdKafka::Conf::CONF_OK) throw std::runtime_error(err);
  std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
  if (!p) throw std::runtime_error("librdkafka producer: " + err);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int64_t i = from; i < to && std::chrono::steady_clock::now() < deadline;) {
    const std::string value = std::to_string(i);
    std::string key(1, 'k');  // (not "k" + ...: gcc 12's -Wrestrict false positive at -O3)
    key += value;
    const RdKafka::ErrorCode e =
        p->produce(topic, static_cast<int32_t>(i % partitions), RdKafka::Producer::RK_MSG_COPY,
                   const_cast<char*>(value.data()), value.size(), key.data(), key.size(), 0, nullptr);
    if (e == RdKafka::ERR__QUEUE_FULL) {
      p->poll(10);
      continue;
    }
    if (e != RdKafka::ERR_NO_ERROR) throw std::runtime_error("produce: " + RdKafka::err2str(e));
    ++i;
    p->poll(0);
  }
  p->flush(60000);
  return reports.ok.load();
}

// What every member of a test's group consumed, in the order they consumed it.
class Ledger {
 public:
  explicit Ledger(int32_t partitions) : offsets_(static_cast<std::size_t>(partitions)) {}
  void add(int32_t partition, int64_t offset, int64_t value) {
    std::lock_guard<std::mutex> lk(mu_);
    offsets_.at(static_cast<std::size_t>(partition)).push_back(offset);
    if (value != offset * static_cast<int64_t>(offsets_.size()) + partition) ++misplaced_;
    ++total_;
  }
  int64_t total() const {
    std::lock_guard<std::mutex> lk(mu_);
    return total_;
  }
  std::vector<std::vector<int64_t>> offsets() const {
    std::lock_guard<std::mutex> lk(mu_);
    return offsets_;
  }
  int64_t misplaced() const {  // records whose value is not the one its offset should hold
    std::lock_guard<std::mutex> lk(mu_);
    return misplaced_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::vector<int64_t>> offsets_;  // per partition
  int64_t total_ = 0, misplaced_ = 0;
};

class GroupMember : public RdKafka::RebalanceCb {
 public:
  GroupMember(const std::string& bootstrap, const std::string& group, std::string topic, const std::string& name,
              Ledger& ledger, int commit_every = 500)
      : topic_(std::move(topic)), ledger_(ledger), commit_every_(commit_every) {
    auto conf = rd_conf({{"bootstrap.servers", bootstrap},
                         {"group.id", group},
                         {"client.id", name},
                         {"enable.auto.commit", "false"},
                         {"auto.offset.reset", "earliest"},
                         {"session.timeout.ms", "6000"},
                         {"heartbeat.interval.ms", "100"},
                         {"max.poll.interval.ms", "20000"},  // the rebalance timeout
                         {"fetch.wait.max.ms", "100"},
                         {"partition.assignment.strategy", "range"},
                         {"log_level", "3"}});
    std::string err;
    if (conf->set("rebalance_cb", static_cast<RdKafka::RebalanceCb*>(this), err) != RdKafka::Conf::CONF_OK)
      throw std::runtime_error(err);
    consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), err));
    if (!consumer_) throw std::runtime_error("librdkafka consumer: " + err);
    if (consumer_->subscribe({topic_}) != RdKafka::ERR_NO_ERROR) throw std::runtime_error("subscribe");
  }
  ~GroupMember() override { close(); }

  // Consumes until `stop` (checked at least every 100 ms), then close()s (the revoke callback
  // commits). Runs on the member's own thread.
  void run(const std::atomic<bool>& stop) {
    while (!stop.load()) poll_once(100);
    close();
  }
  // One consume() call: at most one record processed (and maybe a commit or a rebalance).
  void poll_once(int timeout_ms) {
    std::unique_ptr<RdKafka::Message> m(consumer_->consume(timeout_ms));
    if (m->err() == RdKafka::ERR__TIMED_OUT) return;
    if (m->err() != RdKafka::ERR_NO_ERROR) {
      errors_.fetch_add(1);
      return;
    }
    const std::string value(static_cast<const char*>(m->payload()), m->len());
    ledger_.add(m->partition(), m->offset(), std::stoll(value));
    dirty_[m->partition()] = m->offset() + 1;
    consumed_.fetch_add(1);
    if (++since_commit_ >= commit_every_) commit();
  }
  // Commits what was processed and not yet committed; false if the coordinator refused.
  bool commit() {
    if (dirty_.empty()) return true;
    std::vector<RdKafka::TopicPartition*> tps;
    for (auto [p, next] : dirty_) tps.push_back(RdKafka::TopicPartition::create(topic_, p, next));
    const RdKafka::ErrorCode e = consumer_->commitSync(tps);
    bool ok = e == RdKafka::ERR_NO_ERROR;
    for (auto* tp : tps) ok = ok && tp->err() == RdKafka::ERR_NO_ERROR;
    RdKafka::TopicPartition::destroy(tps);
    if (ok) {
      dirty_.clear();
      since_commit_ = 0;
    }
    return ok;
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    consumer_->close();
  }

  int64_t consumed() const { return consumed_.load(); }
  int assignments() const { return assignments_.load(); }  // non-empty assignments received
  int assigned_now() const { return assigned_now_.load(); }  // partitions held now
  int revoke_commit_failures() const { return revoke_commit_failures_.load(); }
  int64_t errors() const { return errors_.load(); }
  RdKafka::KafkaConsumer& consumer() { return *consumer_; }

 private:
  void rebalance_cb(RdKafka::KafkaConsumer* c, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      c->assign(partitions);
      assigned_now_.store(static_cast<int>(partitions.size()));
      if (!partitions.empty()) assignments_.fetch_add(1);
      return;
    }
    // Revoked (or an error): what was processed is committed before the partitions move.
    if (!commit()) revoke_commit_failures_.fetch_add(1);
    dirty_.clear();
    c->unassign();
    assigned_now_.store(0);
  }

  const std::string topic_;
  Ledger& ledger_;
  const int commit_every_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  std::map<int32_t, int64_t> dirty_;  // partition -> next offset to commit (this thread only)
  int since_commit_ = 0;
  bool closed_ = false;
  std::atomic<int64_t> consumed_{0}, errors_{0};
  std::atomic<int> assignments_{0}, assigned_now_{0}, revoke_commit_failures_{0};
};

// The group's committed offset of each partition (-1001: none), asked by a consumer that
// does not join the group.
inline std::vector<int64_t> committed_offsets(const std::string& bootstrap, const std::string& group,
                                              const std::string& topic, int32_t partitions) {
  auto conf = rd_conf({{"bootstrap.servers", bootstrap}, {"group.id", group}, {"log_level", "3"}});
  std::string err;
  std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!c) throw std::runtime_error(err);
  std::vector<RdKafka::TopicPartition*> tps;
  for (int32_t p = 0; p < partitions; ++p) tps.push_back(RdKafka::TopicPartition::create(topic, p));
  std::vector<int64_t> out(static_cast<std::size_t>(partitions), -2);
  if (c->committed(tps, 10000) == RdKafka::ERR_NO_ERROR)
    for (auto* tp : tps) out[static_cast<std::size_t>(tp->partition())] = tp->offset();
  RdKafka::TopicPartition::destroy(tps);
  c->close();
  return out;
}

}  // namespace lionet::kafka::testing
