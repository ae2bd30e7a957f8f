// logbench - the raw append-only log reference of LioNet's storage benchmarks.
//
// What it stands for: the least a segmented log can do on this machine with plain system calls,
// beside lionet::storage::Log (scripts/bench-storage.sh divides LioNet's figures by these).
// Each record is framed as
//     u64 payload length (little-endian) | u32 CRC-32C of (the 8 length bytes, then the payload) | payload
// Appends build a batch of frames in one buffer and hand it to one write(); segments are files
// of at most 1 GiB. Reads check every frame's CRC, either streaming a segment with 1 MiB read()s
// or fetching one record per pread() through an in-memory offset index. No fsync unless a row
// says so. MB = 1e6 bytes of payload (headers not counted).
//
// Usage: logbench DIR [REPS [cold]]
//   DIR    a directory on the disk to measure (created; the files are removed afterwards)
//   REPS   repetitions of every row, the median is printed (default 3)
//   cold   do not warm memory before the write runs (see warm.h)
// Environment: ONLY=RECSIZE,BATCH runs just that write configuration (with its reads), prints
//   "  rep write MB/s X" for each repetition, then its rows, and exits.
// Rows (columns MB/s, thousand records/s, microseconds per record):
//   write SB x batch B                  append records of S bytes, B per write(), 1 GiB or 4 s
//     read-stream(1MiB,hot) SB          read those segments back with 1 MiB read()s
//     read-per-record-pread(hot) SB     one pread() per record (printed with batch 100)
//   read-stream(1MiB,COLD after fadvise) 1024B, write+fdatasync/batch S B x B (fdatasync after
//   every write, 3 s), O_DIRECT append 1KB recs (aligned chunks, pwrite), and the two "mixed
//   50/50" rows (us per operation: append one 1 KiB record, or pread an earlier one).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "warm.h"

namespace {

// ---------------------------------------------------------------------------------------------
// CRC-32C (Castagnoli): the SSE4.2 instruction, one 8-byte stream, when the CPU has it.

std::array<uint32_t, 256> make_crc_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t v = i;
        for (int k = 0; k < 8; k++) v = (v >> 1) ^ (0x82F63B78u & (0u - (v & 1)));
        t[i] = v;
    }
    return t;
}

uint32_t crc_bytewise(uint32_t state, const uint8_t* p, size_t n) {
    static const std::array<uint32_t, 256> table = make_crc_table();
    while (n--) state = table[(state ^ *p++) & 0xff] ^ (state >> 8);
    return state;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_sse42(uint32_t state, const uint8_t* p, size_t n) {
    uint64_t s = state;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t word;
        std::memcpy(&word, p, 8);
        s = __builtin_ia32_crc32di(s, word);
    }
    uint32_t s32 = static_cast<uint32_t>(s);
    for (; n > 0; n--) s32 = __builtin_ia32_crc32qi(s32, *p++);
    return s32;
}
#endif
bool have_sse42 = false;  // set in main()

// Continues a CRC-32C over more bytes; start with crc = 0.
uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
    if (have_sse42) return ~crc_sse42(~crc, p, n);
#endif
    return ~crc_bytewise(~crc, p, n);
}

// ---------------------------------------------------------------------------------------------
// Frames.

constexpr size_t kHeader = 12;

size_t frame_size(size_t payload) { return kHeader + payload; }

// Writes one frame at dst; returns its size.
size_t put_frame(uint8_t* dst, const uint8_t* payload, uint64_t len) {
    std::memcpy(dst, &len, 8);
    uint32_t crc = crc32c(crc32c(0, dst, 8), payload, len);
    std::memcpy(dst + 8, &crc, 4);
    std::memcpy(dst + kHeader, payload, len);
    return frame_size(len);
}

// The payload length if the frame at p (with `avail` bytes readable) is whole and its CRC holds;
// sets *complete = false when more bytes are needed, *intact = false on a CRC mismatch.
uint64_t check_frame(const uint8_t* p, size_t avail, bool* complete, bool* intact) {
    uint64_t len;
    uint32_t stored;
    *complete = avail >= kHeader;
    if (!*complete) return 0;
    std::memcpy(&len, p, 8);
    std::memcpy(&stored, p + 8, 4);
    *complete = avail - kHeader >= len;
    if (!*complete) return 0;
    *intact = crc32c(crc32c(0, p, 8), p + kHeader, len) == stored;
    return len;
}

// ---------------------------------------------------------------------------------------------
// Payload bytes: 64 MiB of pseudo-random data. Successive records start only a little further
// on, so the source stays in the CPU cache: the figures are the log's cost, not the generator's.

class Payloads {
public:
    Payloads() : data_(64u << 20) {
        std::mt19937_64 gen(42);
        for (size_t i = 0; i + 8 <= data_.size(); i += 8) {
            uint64_t v = gen();
            std::memcpy(&data_[i], &v, 8);
        }
    }
    const uint8_t* next(size_t len) {
        if (at_ + len > data_.size()) at_ = 0;
        const uint8_t* p = &data_[at_];
        at_ += 64 + len % 64;
        return p;
    }

private:
    std::vector<uint8_t> data_;
    size_t at_ = 0;
};

Payloads* payloads;
bool warm_before_writes = true;

[[noreturn]] void fail(const char* what) {
    std::perror(what);
    std::exit(1);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// A log: numbered segment files in one directory, at most kSegmentBytes each.

constexpr uint64_t kSegmentBytes = 1ull << 30;
constexpr uint64_t kRunPayload = 1ull << 30;

struct Where {
    uint32_t segment;
    uint64_t offset;
};

class Log {
public:
    explicit Log(std::string dir) : dir_(std::move(dir)) {}
    ~Log() { discard(); }
    Log(const Log&) = delete;
    Log& operator=(const Log&) = delete;

    // Makes room for `bytes` more: starts a new segment if the current one would pass the limit.
    void reserve(uint64_t bytes) {
        if (fd_ < 0 || size_ + bytes > kSegmentBytes) start_segment();
    }
    void append(const uint8_t* p, size_t n, bool durable) {
        if (::write(fd_, p, n) != static_cast<ssize_t>(n)) fail("logbench: write");
        if (durable && ::fdatasync(fd_) != 0) fail("logbench: fdatasync");
        size_ += n;
    }
    Where tail() const { return {static_cast<uint32_t>(paths_.size() - 1), size_}; }
    int fd() const { return fd_; }
    void close_writer() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    const std::vector<std::string>& segments() const { return paths_; }
    void discard() {
        close_writer();
        for (const auto& p : paths_) ::unlink(p.c_str());
        paths_.clear();
    }

private:
    void start_segment() {
        close_writer();
        char name[64];
        std::snprintf(name, sizeof name, "/%020zu.log", paths_.size());
        paths_.push_back(dir_ + name);
        fd_ = ::open(paths_.back().c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        if (fd_ < 0) fail("logbench: open segment");
        size_ = 0;
    }

    std::string dir_;
    std::vector<std::string> paths_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

struct Outcome {
    double secs = 0;
    uint64_t payload = 0;
    uint64_t records = 0;
    uint64_t writes = 0;
    uint64_t bad = 0;
    double mbs() const { return secs > 0 ? payload / secs / 1e6 : 0; }
};

// Appends records of `rec` bytes, `batch` frames per write(), until `goal` payload bytes or
// `cap` seconds (0: no cap). Records each frame's place in *index when given.
Outcome append_records(Log& log, size_t rec, size_t batch, uint64_t goal, bool durable, double cap,
                       std::vector<Where>* index) {
    std::vector<uint8_t> buf(frame_size(rec) * batch);
    Outcome o;
    if (warm_before_writes) warm_memory(WARM_BYTES);
    log.reserve(0);
    const auto t0 = Clock::now();
    while (o.payload < goal) {
        log.reserve(buf.size());
        Where at = log.tail();
        size_t used = 0;
        for (size_t i = 0; i < batch; i++) {
            if (index) index->push_back({at.segment, at.offset + used});
            used += put_frame(buf.data() + used, payloads->next(rec), rec);
        }
        log.append(buf.data(), used, durable);
        o.payload += rec * batch;
        o.records += batch;
        o.writes++;
        if (cap > 0 && seconds_since(t0) > cap) break;
    }
    o.secs = seconds_since(t0);
    return o;
}

// Reads every segment front to back in 1 MiB read()s and checks each frame.
Outcome stream_read(const std::vector<std::string>& segments) {
    constexpr size_t kChunk = 1u << 20;
    std::vector<uint8_t> buf;
    Outcome o;
    const auto t0 = Clock::now();
    for (const auto& path : segments) {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail("logbench: open for reading");
        size_t start = 0, end = 0;  // unparsed bytes are buf[start, end)
        for (;;) {
            if (start > 0) {  // keep the partial frame at the front
                std::memmove(buf.data(), buf.data() + start, end - start);
                end -= start;
                start = 0;
            }
            if (buf.size() < end + kChunk) buf.resize(end + kChunk);
            ssize_t got = ::read(fd, buf.data() + end, kChunk);
            if (got < 0) fail("logbench: read");
            if (got == 0) break;  // a torn tail would stay unparsed; none is written here
            end += static_cast<size_t>(got);
            for (;;) {
                bool complete = false, intact = true;
                uint64_t len = check_frame(buf.data() + start, end - start, &complete, &intact);
                if (!complete) break;  // the next read() completes it (buf grows as needed)
                o.bad += intact ? 0 : 1;
                o.payload += len;
                o.records++;
                start += frame_size(len);
            }
        }
        ::close(fd);
    }
    o.secs = seconds_since(t0);
    return o;
}

// One pread() per record, at the places the index gives.
Outcome pread_each(const std::vector<std::string>& segments, const std::vector<Where>& index, size_t rec) {
    std::vector<int> fds;
    for (const auto& path : segments) {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail("logbench: open for pread");
        fds.push_back(fd);
    }
    std::vector<uint8_t> buf(frame_size(rec));
    Outcome o;
    const auto t0 = Clock::now();
    for (const Where& w : index) {
        if (::pread(fds[w.segment], buf.data(), buf.size(), static_cast<off_t>(w.offset)) !=
            static_cast<ssize_t>(buf.size()))
            fail("logbench: pread");
        bool complete = false, intact = true;
        uint64_t len = check_frame(buf.data(), buf.size(), &complete, &intact);
        o.bad += (complete && intact) ? 0 : 1;
        o.payload += len;
        o.records++;
    }
    o.secs = seconds_since(t0);
    for (int fd : fds) ::close(fd);
    return o;
}

// Appends with O_DIRECT: frames are packed into an aligned chunk that is written with pwrite()
// when the next frame does not fit (the rest of the chunk is zero: length 0 means "skip to the
// next chunk"). `prealloc` reserves the file's blocks with fallocate() first.
Outcome direct_append(const std::string& dir, size_t rec, size_t chunk, uint64_t goal, bool durable,
                      bool prealloc) {
    std::string path = dir + "/direct.log";
    int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT | O_CLOEXEC, 0644);
    if (fd < 0) fail("logbench: open O_DIRECT");
    if (prealloc && ::fallocate(fd, 0, 0, static_cast<off_t>(goal + goal / 8 + chunk)) != 0)
        fail("logbench: fallocate");
    void* mem = nullptr;
    if (::posix_memalign(&mem, 4096, chunk) != 0) fail("logbench: posix_memalign");
    auto* buf = static_cast<uint8_t*>(mem);
    Outcome o;
    uint64_t file_at = 0;
    size_t fill = 0;
    const auto t0 = Clock::now();
    while (o.payload < goal) {
        if (fill + frame_size(rec) > chunk) {
            std::memset(buf + fill, 0, chunk - fill);
            if (::pwrite(fd, buf, chunk, static_cast<off_t>(file_at)) != static_cast<ssize_t>(chunk))
                fail("logbench: pwrite O_DIRECT");
            if (durable) ::fdatasync(fd);
            file_at += chunk;
            fill = 0;
            o.writes++;
        }
        fill += put_frame(buf + fill, payloads->next(rec), rec);
        o.payload += rec;
        o.records++;
    }
    o.secs = seconds_since(t0);
    ::close(fd);
    ::unlink(path.c_str());
    std::free(mem);
    return o;
}

void drop_from_cache(const std::vector<std::string>& segments) {
    for (const auto& path : segments) {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

// ---------------------------------------------------------------------------------------------
// Output: a fixed-width table that scripts/bench-storage.sh reads with regular expressions.

void row(const std::string& name, double mbs, size_t rec) {
    double recs_per_s = mbs * 1e6 / rec;
    std::printf("%-44s %10.0f %10.1f %10.3f\n", name.c_str(), mbs, recs_per_s / 1e3, 1e6 / recs_per_s);
}

std::string fmt(const char* f, size_t a, size_t b = 0) {
    char s[128];
    std::snprintf(s, sizeof s, f, a, b);
    return s;
}

void report_bad(uint64_t bad, const char* where) {
    if (bad) std::printf("  !! %llu CRC mismatches (%s)\n", static_cast<unsigned long long>(bad), where);
}

// Write runs of one configuration, each followed by its reads; prints the rows.
void write_and_read(const std::string& dir, size_t rec, size_t batch, int reps, bool print_reps) {
    std::vector<double> writes, streams, preads;
    uint64_t bad = 0;
    const bool per_record = batch == 100;  // pread per record does not depend on the batch: once per size
    for (int r = 0; r < reps; r++) {
        Log log(dir);
        std::vector<Where> index;
        index.reserve(kRunPayload / rec + 1024);
        Outcome w = append_records(log, rec, batch, kRunPayload, false, 4.0, &index);
        log.close_writer();
        writes.push_back(w.mbs());
        Outcome s = stream_read(log.segments());
        streams.push_back(s.mbs());
        bad += s.bad;
        if (per_record) {
            Outcome p = pread_each(log.segments(), index, rec);
            preads.push_back(p.mbs());
            bad += p.bad;
        }
    }
    if (print_reps)
        for (double x : writes) std::printf("  rep write MB/s %.0f\n", x);
    row(fmt("write %5zuB x batch %4zu", rec, batch), median(writes), rec);
    row(fmt("  read-stream(1MiB,hot) %5zuB", rec), median(streams), rec);
    if (per_record) row(fmt("  read-per-record-pread(hot) %5zuB", rec), median(preads), rec);
    report_bad(bad, "write/read");
    std::fflush(stdout);
}

void cold_stream_read(const std::string& dir, int reps) {
    std::vector<double> v;
    for (int r = 0; r < reps; r++) {
        Log log(dir);
        append_records(log, 1024, 1000, kRunPayload, false, 0, nullptr);
        log.close_writer();
        drop_from_cache(log.segments());
        v.push_back(stream_read(log.segments()).mbs());
    }
    std::printf("%-44s %10.0f\n", "read-stream(1MiB,COLD after fadvise) 1024B", median(v));
    std::fflush(stdout);
}

void durable_appends(const std::string& dir, int reps) {
    const size_t configs[][2] = {{1024, 1}, {1024, 100}, {1024, 1000}, {10240, 100}, {10240, 1000}};
    for (const auto& c : configs) {
        const size_t rec = c[0], batch = c[1];
        std::vector<double> mbs, us_per_write;
        for (int r = 0; r < reps; r++) {
            Log log(dir);
            Outcome o = append_records(log, rec, batch, kRunPayload, true, 3.0, nullptr);
            mbs.push_back(o.mbs());
            us_per_write.push_back(o.secs / o.writes * 1e6);
        }
        double m = median(mbs), recs_per_s = m * 1e6 / rec;
        std::printf("%-44s %10.1f %10.2f %10.2f  (us per batch+sync: %.0f)\n",
                    fmt("write+fdatasync/batch %5zuB x %4zu", rec, batch).c_str(), m, recs_per_s / 1e3,
                    1e6 / recs_per_s, median(us_per_write));
        std::fflush(stdout);
    }
}

void direct_appends(const std::string& dir, int reps) {
    struct Config {
        size_t chunk;
        bool durable, prealloc;
    };
    const Config configs[] = {{128u << 10, false, true}, {1u << 20, false, true}, {128u << 10, true, true},
                              {1u << 20, true, true},    {1u << 20, false, false}};
    for (const Config& c : configs) {
        std::vector<double> v;
        const uint64_t goal = c.durable ? (256ull << 20) : (1ull << 30);
        for (int r = 0; r < reps; r++) v.push_back(direct_append(dir, 1024, c.chunk, goal, c.durable, c.prealloc).mbs());
        std::string name = fmt("O_DIRECT append 1KB recs, chunk %4zuKiB", c.chunk >> 10);
        if (c.durable) name += " +fdatasync";
        if (c.prealloc) name += " falloc";
        std::printf("%-44s %10.0f\n", name.c_str(), median(v));
        std::fflush(stdout);
    }
}

// Alternates appending one 1 KiB record and pread()ing one earlier record (at random, or in
// order), for 3 s after a 100 MB prefill; prints microseconds per operation.
void mixed(const std::string& dir, int reps, bool random_reads) {
    constexpr size_t kRec = 1024;
    std::vector<double> v;
    uint64_t bad = 0;
    for (int r = 0; r < reps; r++) {
        Log log(dir);
        std::vector<Where> index;
        index.reserve(4u << 20);
        append_records(log, kRec, 1000, 100ull << 20, false, 0, &index);
        int rfd = ::open(log.segments().back().c_str(), O_RDONLY | O_CLOEXEC);
        if (rfd < 0) fail("logbench: open for mixed reads");
        const uint32_t seg = static_cast<uint32_t>(log.segments().size() - 1);
        std::vector<uint8_t> out(frame_size(kRec)), in(frame_size(kRec));
        std::mt19937_64 pick(7);
        uint64_t ops = 0, next_in_order = 0;
        const auto t0 = Clock::now();
        for (;;) {
            if (ops % 2 == 0) {
                Where at = log.tail();
                log.append(out.data(), put_frame(out.data(), payloads->next(kRec), kRec), false);
                index.push_back(at);
            } else {
                uint64_t k = random_reads ? pick() % index.size() : next_in_order++ % index.size();
                if (index[k].segment != seg) continue;
                if (::pread(rfd, in.data(), in.size(), static_cast<off_t>(index[k].offset)) !=
                    static_cast<ssize_t>(in.size()))
                    fail("logbench: mixed pread");
                bool complete = false, intact = true;
                check_frame(in.data(), in.size(), &complete, &intact);
                bad += (complete && intact) ? 0 : 1;
            }
            ops++;
            if (ops % 1024 == 0 && seconds_since(t0) > 3.0) break;
        }
        v.push_back(seconds_since(t0) / ops * 1e6);
        ::close(rfd);
    }
    report_bad(bad, "mixed");
    std::printf("%-44s %10s %10s %10.3f  (us/op, 1KB)\n",
                random_reads ? "mixed 50/50 append + random pread" : "mixed 50/50 append + sequential pread", "",
                "", median(v));
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        std::fprintf(stderr, "usage: %s DIR [REPS [cold]]   (env ONLY=RECSIZE,BATCH)\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
    if (argc > 3 && std::string(argv[3]) == "cold") warm_before_writes = false;
    ::mkdir(dir.c_str(), 0755);
    size_t only_rec = 0, only_batch = 0;
    const char* only = std::getenv("ONLY");
    if (only && std::sscanf(only, "%zu,%zu", &only_rec, &only_batch) != 2) {
        std::fprintf(stderr, "logbench: ONLY must be RECSIZE,BATCH (e.g. 1024,1000)\n");
        return 2;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
    Payloads source;
    payloads = &source;

    std::printf("# logbench: MB = 1e6 payload bytes; median of %d run(s); page cache, no fsync unless a row says "
                "so; memory %s before writes\n",
                reps, warm_before_writes ? "warmed" : "not warmed");
    std::printf("%-44s %10s %10s %10s\n", "test", "MB/s", "krec/s", "us/rec");
    for (size_t rec : {100, 1024, 10240}) {
        for (size_t batch : {1, 100, 1000}) {
            if (only && (rec != only_rec || batch != only_batch)) continue;
            write_and_read(dir, rec, batch, reps, only != nullptr);
        }
    }
    if (only) return 0;
    cold_stream_read(dir, reps);
    durable_appends(dir, reps);
    direct_appends(dir, reps);
    mixed(dir, reps, true);
    mixed(dir, reps, false);
    return 0;
}
