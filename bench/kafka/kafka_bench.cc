// bench/kafka/kafka_bench.cc: a librdkafka client benchmark against one Kafka broker (lionet's
// `kafka` server or Apache Kafka; scripts/bench-kafka.sh runs it against both). Not a LioNet
// program: it links only librdkafka (Debian librdkafka-dev), so both brokers see the same client.
//
//   kafka_bench -b HOST:PORT -m MODE[,MODE...] [-t TOPIC] [-n COUNT] [-s SIZE] [-a 1|all]
//               [-N SAMPLES] [-w WARMUP] [-T SECS]
//
// Modes, run in the order given, on partition 0 of TOPIC (default "bench"; created through the
// producer's Metadata request, so the broker must auto-create topics):
//   produce  COUNT (default 500,000) records of SIZE (default 1024) bytes, no key: linger.ms=5,
//            batch.size=65536, compression none, acks -a (default 1); the clock starts at the
//            first produce() call (after the topic's metadata is known) and stops at the last
//            delivery report. Errors: failed deliveries and refused produce() calls.
//   consume  reads TOPIC from offset 0 with the simple (legacy, groupless) consumer until COUNT
//            records have arrived; every record is checked: offset, value size, and the sequence
//            number in the value's first 8 bytes (little-endian) against the record's position.
//            The clock runs from consume_start to the last record. Errors: consumer errors,
//            records failing a check, a stall of -T seconds (default 30).
//   latency  to TOPIC-lat: WARMUP (default 200) then SAMPLES (default 2,000) single records,
//            each produce() then flush(), linger.ms=0, acks -a; median and p99 of the
//            produce-to-delivery-report time in microseconds. Errors: failed deliveries, timeouts.
// Values carry their sequence number, so `consume` after `produce` of the same COUNT checks
// that every record came back once and in order.
//
// Each mode prints one human line; the last line is
//   RESULT produce_mbps= produce_rps= produce_secs= consume_mbps= consume_rps= consume_secs=
//          lat_p50_us= lat_p99_us= lat_mean_us= errors=N
// with only the figures of the modes that ran (MB/s = 1e6 value bytes per second). Exit status
// 1 if errors > 0, 2 on a usage error.
#include <getopt.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string broker, topic = "bench";
  std::vector<std::string> modes;
  long count = 500000;
  std::size_t size = 1024;
  std::string acks = "1";
  long samples = 2000, warmup = 200;
  int stall_secs = 30;
  std::vector<std::pair<std::string, std::string>> extra;  // -X key=value: librdkafka properties (TLS, SASL)
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s -b HOST:PORT -m produce,consume,latency [-t TOPIC] [-n COUNT] [-s SIZE] [-a 1|all] "
               "[-N SAMPLES] [-w WARMUP] [-T SECS] [-X key=value]...\n",
               argv0);
  std::exit(2);
}

double secs_since(Clock::time_point t0, Clock::time_point t1) { return std::chrono::duration<double>(t1 - t0).count(); }

void put_seq(char* value, uint64_t seq) {
  for (int i = 0; i < 8; ++i) value[i] = static_cast<char>(seq >> (8 * i));
}
uint64_t get_seq(const char* value) {
  uint64_t s = 0;
  for (int i = 0; i < 8; ++i) s |= static_cast<uint64_t>(static_cast<unsigned char>(value[i])) << (8 * i);
  return s;
}

// A value of SIZE bytes: the sequence number, then a fixed pattern.
std::string make_value(std::size_t size) {
  std::string v(std::max<std::size_t>(size, 8), '\0');
  for (std::size_t i = 8; i < v.size(); ++i) v[i] = static_cast<char>('a' + i % 26);
  return v;
}

void set(rd_kafka_conf_t* conf, const char* key, const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf, key, value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "kafka_bench: %s=%s: %s\n", key, value.c_str(), err);
    std::exit(2);
  }
}

// Per producer: delivery reports counted by the callback (served by rd_kafka_poll/flush on this thread).
struct Delivery {
  long ok = 0, failed = 0;
  Clock::time_point last;
  std::string first_error;
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* d = static_cast<Delivery*>(opaque);
  if (m->err) {
    if (d->failed++ == 0) d->first_error = rd_kafka_err2str(m->err);
  } else {
    ++d->ok;
  }
  d->last = Clock::now();
}

rd_kafka_t* new_client(rd_kafka_type_t type, rd_kafka_conf_t* conf) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (!rk) {
    std::fprintf(stderr, "kafka_bench: rd_kafka_new: %s\n", err);
    std::exit(1);
  }
  return rk;
}

// Waits until TOPIC's metadata shows partition 0 with a leader (the producer's own Metadata
// requests create the topic where the broker auto-creates). false after `secs`.
bool wait_for_topic(rd_kafka_t* rk, rd_kafka_topic_t* rkt, int secs) {
  const auto until = Clock::now() + std::chrono::seconds(secs);
  while (Clock::now() < until) {
    const struct rd_kafka_metadata* md = nullptr;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      bool ready = md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                   md->topics[0].partition_cnt >= 1 && md->topics[0].partitions[0].leader >= 0;
      rd_kafka_metadata_destroy(md);
      if (ready) return true;
    }
    rd_kafka_poll(rk, 100);
  }
  return false;
}

rd_kafka_conf_t* producer_conf(const Options& o, Delivery& d, const char* linger_ms) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", o.broker);
  for (const auto& [k, v] : o.extra) set(conf, k.c_str(), v);
  set(conf, "linger.ms", linger_ms);
  set(conf, "batch.size", "65536");
  set(conf, "compression.type", "none");
  set(conf, "acks", o.acks);
  set(conf, "message.timeout.ms", std::to_string(o.stall_secs * 1000));
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, &d);
  return conf;
}

struct Figures {
  std::string result;  // " key=value" pairs
  long errors = 0;
};

void produce(const Options& o, Figures& f) {
  Delivery d;
  rd_kafka_t* rk = new_client(RD_KAFKA_PRODUCER, producer_conf(o, d, "5"));
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, o.topic.c_str(), nullptr);
  if (!wait_for_topic(rk, rkt, o.stall_secs)) {
    std::printf("produce: topic %s has no leader after %d s\n", o.topic.c_str(), o.stall_secs);
    f.errors += 1;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return;
  }
  std::string value = make_value(o.size);
  long refused = 0;
  std::string refused_why;
  const auto t0 = Clock::now();
  d.last = t0;
  for (long i = 0; i < o.count; ++i) {
    put_seq(value.data(), static_cast<uint64_t>(i));
    for (;;) {
      if (rd_kafka_produce(rkt, 0, RD_KAFKA_MSG_F_COPY, value.data(), value.size(), nullptr, 0, nullptr) == 0) break;
      const rd_kafka_resp_err_t e = rd_kafka_last_error();
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 1);  // serve delivery reports, freeing room in the queue
        continue;
      }
      if (refused++ == 0) refused_why = rd_kafka_err2str(e);
      break;
    }
    if ((i & 1023) == 0) rd_kafka_poll(rk, 0);
  }
  const auto flush_limit = std::chrono::seconds(o.stall_secs);
  while (d.ok + d.failed + refused < o.count && Clock::now() - t0 < flush_limit + std::chrono::seconds(60)) {
    rd_kafka_flush(rk, 1000);
  }
  const long missing = o.count - (d.ok + d.failed + refused);
  const double secs = secs_since(t0, d.last);
  const double mbps = secs > 0 ? static_cast<double>(d.ok) * static_cast<double>(o.size) / secs / 1e6 : 0;
  const double rps = secs > 0 ? static_cast<double>(d.ok) / secs : 0;
  std::printf(
      "produce: %ld records x %zu B, acks=%s, to %s in %.3f s: %.1f MB/s, %.0f records/s; "
      "%ld failed deliveries%s%s, %ld refused%s%s, %ld without a report\n",
      d.ok, o.size, o.acks.c_str(), o.topic.c_str(), secs, mbps, rps, d.failed, d.failed ? ": " : "",
      d.first_error.c_str(), refused, refused ? ": " : "", refused_why.c_str(), missing);
  char buf[160];
  std::snprintf(buf, sizeof buf, " produce_mbps=%.1f produce_rps=%.0f produce_secs=%.3f", mbps, rps, secs);
  f.result += buf;
  f.errors += d.failed + refused + missing;
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
}

void consume(const Options& o, Figures& f) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", o.broker);
  for (const auto& [k, v] : o.extra) set(conf, k.c_str(), v);
  rd_kafka_topic_conf_t* tconf = rd_kafka_topic_conf_new();
  char err[512];
  // No group: nothing is committed (lionet has no OffsetCommit yet; the legacy consumer would
  // otherwise try to commit to the broker).
  if (rd_kafka_topic_conf_set(tconf, "enable.auto.commit", "false", err, sizeof err) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "kafka_bench: enable.auto.commit: %s\n", err);
    std::exit(2);
  }
  rd_kafka_t* rk = new_client(RD_KAFKA_CONSUMER, conf);
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, o.topic.c_str(), tconf);
  if (!wait_for_topic(rk, rkt, o.stall_secs)) {
    std::printf("consume: topic %s has no leader after %d s\n", o.topic.c_str(), o.stall_secs);
    f.errors += 1;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return;
  }
  long got = 0, bad = 0, consumer_errors = 0;
  std::string first_bad;
  auto note_bad = [&](const std::string& why) {
    if (bad++ == 0) first_bad = why;
  };
  const auto t0 = Clock::now();
  auto t_last = t0, progress = t0;
  bool stalled = false;
  if (rd_kafka_consume_start(rkt, 0, 0) != 0) {
    std::printf("consume: consume_start: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
    f.errors += 1;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return;
  }
  // consume_batch waits until its array is full (or the timeout): asking for no more than the
  // records still missing keeps the last call from waiting out its timeout on the clock.
  std::vector<rd_kafka_message_t*> msgs(4096);
  while (got < o.count) {
    const std::size_t want = std::min<std::size_t>(msgs.size(), static_cast<std::size_t>(o.count - got));
    const ssize_t n = rd_kafka_consume_batch(rkt, 0, 1000, msgs.data(), want);
    const auto now = Clock::now();
    if (n < 0) {
      ++consumer_errors;
      break;
    }
    if (n == 0 && now - progress > std::chrono::seconds(o.stall_secs)) {
      stalled = true;
      break;
    }
    for (ssize_t k = 0; k < n; ++k) {
      rd_kafka_message_t* m = msgs[static_cast<std::size_t>(k)];
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      } else if (m->err) {
        if (consumer_errors++ == 0) first_bad = rd_kafka_message_errstr(m);
      } else if (got < o.count) {
        if (m->offset != got) {
          note_bad("offset " + std::to_string(m->offset) + " where " + std::to_string(got) + " was expected");
        } else if (m->len != o.size || !m->payload) {
          note_bad("a value of " + std::to_string(m->len) + " bytes at offset " + std::to_string(m->offset));
        } else if (get_seq(static_cast<const char*>(m->payload)) != static_cast<uint64_t>(got)) {
          note_bad("sequence " + std::to_string(get_seq(static_cast<const char*>(m->payload))) + " at offset " +
                   std::to_string(m->offset));
        }
        ++got;
        t_last = now;
        progress = now;
      }
      rd_kafka_message_destroy(m);
    }
  }
  rd_kafka_consume_stop(rkt, 0);
  const double secs = secs_since(t0, t_last);
  const double mbps = secs > 0 ? static_cast<double>(got) * static_cast<double>(o.size) / secs / 1e6 : 0;
  const double rps = secs > 0 ? static_cast<double>(got) / secs : 0;
  std::printf(
      "consume: %ld of %ld records x %zu B from %s offset 0 in %.3f s: %.1f MB/s, %.0f records/s; "
      "%ld failed checks, %ld consumer errors%s%s%s\n",
      got, o.count, o.size, o.topic.c_str(), secs, mbps, rps, bad, consumer_errors,
      first_bad.empty() ? "" : " (first: ", first_bad.c_str(), first_bad.empty() ? "" : ")");
  if (stalled) std::printf("consume: no record for %d s: stopped\n", o.stall_secs);
  char buf[160];
  std::snprintf(buf, sizeof buf, " consume_mbps=%.1f consume_rps=%.0f consume_secs=%.3f", mbps, rps, secs);
  f.result += buf;
  f.errors += bad + consumer_errors + (o.count - got);
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
}

void latency(const Options& o, Figures& f) {
  Delivery d;
  rd_kafka_t* rk = new_client(RD_KAFKA_PRODUCER, producer_conf(o, d, "0"));
  const std::string topic = o.topic + "-lat";
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  if (!wait_for_topic(rk, rkt, o.stall_secs)) {
    std::printf("latency: topic %s has no leader after %d s\n", topic.c_str(), o.stall_secs);
    f.errors += 1;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return;
  }
  std::string value = make_value(o.size);
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(o.samples));
  long timeouts = 0, refused = 0;
  for (long i = 0; i < o.warmup + o.samples; ++i) {
    put_seq(value.data(), static_cast<uint64_t>(i));
    const long before = d.ok + d.failed;
    const auto t0 = Clock::now();
    if (rd_kafka_produce(rkt, 0, RD_KAFKA_MSG_F_COPY, value.data(), value.size(), nullptr, 0, nullptr) != 0) {
      ++refused;
      continue;
    }
    if (rd_kafka_flush(rk, o.stall_secs * 1000) != RD_KAFKA_RESP_ERR_NO_ERROR || d.ok + d.failed == before) {
      ++timeouts;
      continue;
    }
    const auto t1 = Clock::now();
    if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    if (us.empty()) return 0.0;
    const std::size_t k = std::min(us.size() - 1, static_cast<std::size_t>(p * static_cast<double>(us.size())));
    return us[k];
  };
  double mean = 0;
  for (double v : us) mean += v;
  if (!us.empty()) mean /= static_cast<double>(us.size());
  const double p50 = pct(0.50), p99 = pct(0.99);
  std::printf(
      "latency: %zu single records x %zu B (after %ld warm-up), acks=%s, linger.ms=0, produce+flush each, "
      "to %s: median %.0f us, p99 %.0f us, mean %.0f us, max %.0f us; %ld failed deliveries%s%s, "
      "%ld timeouts, %ld refused\n",
      us.size(), o.size, o.warmup, o.acks.c_str(), topic.c_str(), p50, p99, mean, us.empty() ? 0.0 : us.back(),
      d.failed, d.failed ? ": " : "", d.first_error.c_str(), timeouts, refused);
  char buf[160];
  std::snprintf(buf, sizeof buf, " lat_p50_us=%.0f lat_p99_us=%.0f lat_mean_us=%.0f", p50, p99, mean);
  f.result += buf;
  f.errors += d.failed + timeouts + refused;
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int c;
  while ((c = getopt(argc, argv, "b:m:t:n:s:a:N:w:T:X:")) != -1) {
    switch (c) {
      case 'b': o.broker = optarg; break;
      case 'm': {
        std::string s = optarg;
        for (std::size_t at = 0; at <= s.size();) {
          const std::size_t comma = std::min(s.find(',', at), s.size());
          o.modes.push_back(s.substr(at, comma - at));
          at = comma + 1;
        }
        break;
      }
      case 't': o.topic = optarg; break;
      case 'n': o.count = std::atol(optarg); break;
      case 's': o.size = static_cast<std::size_t>(std::atol(optarg)); break;
      case 'a': o.acks = optarg; break;
      case 'N': o.samples = std::atol(optarg); break;
      case 'w': o.warmup = std::atol(optarg); break;
      case 'T': o.stall_secs = std::atoi(optarg); break;
      case 'X': {
        const std::string kv = optarg;
        const std::size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) usage(argv[0]);
        o.extra.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        break;
      }
      default: usage(argv[0]);
    }
  }
  if (o.broker.empty() || o.modes.empty() || optind != argc || o.count <= 0 || o.size < 8 || o.samples <= 0 ||
      o.warmup < 0 || o.stall_secs <= 0 || (o.acks != "1" && o.acks != "all" && o.acks != "-1"))
    usage(argv[0]);
  for (const std::string& m : o.modes)
    if (m != "produce" && m != "consume" && m != "latency") usage(argv[0]);
  Figures f;
  for (const std::string& m : o.modes) {
    if (m == "produce") produce(o, f);
    if (m == "consume") consume(o, f);
    if (m == "latency") latency(o, f);
    std::fflush(stdout);
  }
  std::printf("RESULT%s errors=%ld\n", f.result.c_str(), f.errors);
  return f.errors ? 1 : 0;
}
