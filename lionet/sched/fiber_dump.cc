// lionet/sched/fiber_dump.cc: snapshot and text of the live-fiber registry; see fiber_dump.h.
// Also owns the process-wide list of schedulers that dump_fibers() walks.
#include "lionet/sched/fiber_dump.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "lionet/base/tsan.h"
#include "lionet/fiber/fiber_registry.h"
#include "lionet/fiber/stack_trace.h"
#include "lionet/sched/detail/coarse_clock.h"
#include "lionet/sched/detail/worker.h"
#include "lionet/sched/scheduler.h"

namespace lionet {
namespace detail {
namespace {
// Guards g_schedulers. Held by dump_fibers() for the whole dump, so a scheduler cannot be
// destroyed while it is being read (its destructor unregisters under this mutex). Never held
// across a fiber switch (the dump does not switch).
std::mutex& schedulers_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<SchedulerImpl*>& schedulers() {
  static std::vector<SchedulerImpl*> list;
  return list;
}

FiberInfo read_fiber(const Fiber& f) noexcept {
  FiberInfo info;
  info.id = f.id();
  const std::string& name = f.name();  // stable: we hold the shard lock (fiber_registry.h)
  const std::size_t n = std::min(name.size(), FiberInfo::kNameMax);
  std::memcpy(info.name, name.data(), n);
  info.name[n] = '\0';
  // acquire: pairs with the release of the state change, so the stamp written before it is seen.
  info.state = f.state();
  info.since_ns = f.state_since_ns_.load(std::memory_order_relaxed);
  if (auto* w = static_cast<const Worker*>(f.worker_.load(std::memory_order_relaxed))) info.worker = w->index;
  if (info.state == FiberState::kParked) {
    const uint64_t word = f.wait_.word.load(std::memory_order_relaxed);
    info.wait = FiberWaitRecord::kind_of(word);
    if (info.wait >= WaitKind::kCount_) info.wait = WaitKind::kNone;
    info.wait_arg = FiberWaitRecord::arg_of(word);
    info.wait_object = f.wait_.object.load(std::memory_order_relaxed);
    info.deadline_ns = f.wait_.deadline_ns.load(std::memory_order_relaxed);
  }
  return info;
}

// Appends the shard's fibers to out without allocating under its lock: reserve first, and if
// the shard grew past the reservation meanwhile, drop this shard's part and try again.
void snapshot_shard(const FiberRegistryShard& shard, std::vector<FiberInfo>& out, std::size_t max_fibers) {
  const std::size_t base = out.size();
  for (int attempt = 0; attempt < 4 && base < max_fibers; ++attempt) {
    const std::size_t room = std::min(max_fibers - base, shard.size() + 64 + (std::size_t{256} << attempt));
    out.reserve(base + room);
    bool overflow = false;
    shard.for_each([&](const Fiber& f) {
      // Finished, still listed until the worker that listed it takes it back (hand-back).
      if (f.state() == FiberState::kDone) return true;
      if (out.size() == base + room) {
        overflow = room < max_fibers - base;  // at the global cap it is just truncation
        return false;
      }
      out.push_back(read_fiber(f));  // within capacity: no allocation
      return true;
    });
    if (!overflow) return;
    out.resize(base);
  }
}

std::vector<FiberInfo> snapshot(const SchedulerImpl& impl, std::size_t max_fibers) {
  std::vector<FiberInfo> out;
  for (const auto& w : impl.workers) snapshot_shard(w->registry, out, max_fibers);
  snapshot_shard(impl.outside_registry, out, max_fibers);
  return out;
}

// The saved context of a switched-out fiber, and the walk of its stack. Outside TSan's view:
// the order that makes these reads safe is protocol 11's, whose membarrier TSan cannot see
// (it reported the fiber's later switches, which write ctx_, as racing with this read).
std::size_t walk_saved_stack(const Fiber& f, uintptr_t* pcs, std::size_t max) noexcept {
  tsan_ignore_reads_begin();
  const void* ctx = f.ctx_.fctx;
  const std::size_t n = ctx ? unwind_saved_context(ctx, pcs, max, switch_away_entry()) : 0;
  tsan_ignore_reads_end();
  return n;
}

struct StackHash {
  std::size_t operator()(const std::vector<uintptr_t>& v) const noexcept {
    std::size_t h = v.size();
    for (uintptr_t pc : v) h = (h ^ pc) * 0x100000001b3ULL;
    return h;
  }
};

// Protocol 11, reader's side: walks each listed parked or runnable fiber's stack, one at a
// time under stack_read_mu, inside the shard's reader lock (the Fiber stays valid). Unlike the
// plain snapshot this allocates under the shard lock (a new distinct stack; the vector when it
// grows): spawns and exits on that worker wait for the shard's walks.
FiberSnapshot snapshot_with_stacks(SchedulerImpl& impl, const FiberDumpOptions& options) {
  FiberSnapshot snap;
  snap.stacks.emplace_back();
  if (!options.stacks || options.max_frames == 0) {
    snap.fibers = snapshot(impl, options.max_fibers);
    return snap;
  }
  snap.stacks_error = stack_unwinding_error();
  const bool unwind = snap.stacks_error.empty();
  std::unordered_map<std::vector<uintptr_t>, uint32_t, StackHash> ids;
  std::vector<uintptr_t> pcs(std::min<std::size_t>(options.max_frames, 256));
  std::vector<uintptr_t> key;
  auto walk_shard = [&](const FiberRegistryShard& shard) {
    shard.for_each([&](const Fiber& f) {
      if (snap.fibers.size() >= options.max_fibers) return false;
      if (f.state() == FiberState::kDone) return true;
      std::size_t n = 0;
      FiberInfo info;
      {
        std::lock_guard<std::mutex> lk(impl.stack_read_mu);
        info = read_fiber(f);  // the state the walk goes by
        if (unwind && (info.state == FiberState::kParked || info.state == FiberState::kRunnable))
          n = walk_saved_stack(f, pcs.data(), pcs.size());
      }
      // The switch's own frames are left out (unwind_saved_context): their return addresses
      // differ by where the worker jumped next, and fibers parked in the same place should
      // group together whatever ran after them.
      if (n > 0) {
        key.assign(pcs.begin(), pcs.begin() + static_cast<std::ptrdiff_t>(n));
        auto [it, fresh] = ids.try_emplace(key, static_cast<uint32_t>(snap.stacks.size()));
        if (fresh) snap.stacks.push_back(key);
        info.stack = it->second;
      }
      snap.fibers.push_back(info);
      return true;
    });
  };
  impl.begin_stack_reads();
  for (const auto& w : impl.workers) walk_shard(w->registry);
  walk_shard(impl.outside_registry);
  impl.end_stack_reads();
  return snap;
}

void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) out.append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

// "850ms", "1.2s", "3m05s", "2h07m".
std::string format_duration(int64_t ns) {
  if (ns < 0) ns = 0;
  char buf[32];
  const int64_t ms = ns / 1'000'000;
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%" PRId64 "ms", ms);
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%" PRId64 "m%02" PRId64 "s", ms / 60'000, (ms / 1000) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRId64 "h%02" PRId64 "m", ms / 3'600'000, (ms / 60'000) % 60);
  }
  return buf;
}

// What the fiber waits for, e.g. "fd 12 read", "channel 0x55d0c0a1b2c0 recv", "join fiber 7".
std::string wait_target(const FiberInfo& f) {
  char buf[96];
  const auto obj = static_cast<unsigned long long>(f.wait_object);
  switch (f.wait) {
    case WaitKind::kFdRead: std::snprintf(buf, sizeof buf, "fd %u read", f.wait_arg); break;
    case WaitKind::kFdWrite: std::snprintf(buf, sizeof buf, "fd %u write", f.wait_arg); break;
    case WaitKind::kChannelRecv: std::snprintf(buf, sizeof buf, "channel 0x%llx recv", obj); break;
    case WaitKind::kChannelSend: std::snprintf(buf, sizeof buf, "channel 0x%llx send", obj); break;
    case WaitKind::kSelect: std::snprintf(buf, sizeof buf, "select over %u channel cases", f.wait_arg); break;
    case WaitKind::kJoin: std::snprintf(buf, sizeof buf, "join fiber %llu", obj); break;
    case WaitKind::kNone: return "unknown";
    case WaitKind::kSleep:
    case WaitKind::kOffload:
    case WaitKind::kFileIo: return to_string(f.wait);
    default:
      if (obj) {
        std::snprintf(buf, sizeof buf, "%s 0x%llx", to_string(f.wait), obj);
      } else {
        return to_string(f.wait);
      }
  }
  return buf;
}

std::string deadline_text(const FiberInfo& f, int64_t now_ns) {
  if (f.deadline_ns == 0) return {};
  if (f.deadline_ns >= now_ns) return ", deadline in " + format_duration(f.deadline_ns - now_ns);
  return ", deadline passed " + format_duration(now_ns - f.deadline_ns) + " ago";
}

bool same_target(const FiberInfo& a, const FiberInfo& b) {
  return a.wait_arg == b.wait_arg && a.wait_object == b.wait_object;
}

void format_scheduler(std::string& out, SchedulerImpl& impl, const FiberDumpOptions& options) {
  const SchedulerStats st = impl.owner->stats();
  const int64_t t0 = monotonic_ns();
  FiberSnapshot snap = snapshot_with_stacks(impl, options);
  const int64_t now_coarse = coarse_monotonic_ns();
  const int64_t now_fine = monotonic_ns();
  const std::vector<FiberInfo>& fibers = snap.fibers;
  appendf(out, "scheduler \"%s\": %d workers, %zu live fibers listed", impl.opts.name.c_str(), st.threads,
          fibers.size());
  if (fibers.size() >= options.max_fibers) appendf(out, " (capped at %zu)", options.max_fibers);
  if (!impl.opts.fiber_registry) out += " (SchedulerOptions::fiber_registry is off: none are listed)";
  appendf(out,
          "\n  alive=%" PRIu64 " created=%" PRIu64 " finished=%" PRIu64 " switches=%" PRIu64 " steals=%" PRIu64
          " parks=%" PRIu64 " unparks=%" PRIu64 " worker_sleeps=%" PRIu64 "\n",
          st.fibers_alive, st.fibers_created, st.fibers_finished, st.switches, st.steals, st.fiber_parks,
          st.fiber_unparks, st.worker_sleeps);
  const StackPoolStats ss = impl.owner->stack_stats();
  appendf(out,
          "  stacks: mapped=%zu cached=%zu reserved_bytes=%zu stack_size=%zu slabs=%zu guard_pages=%zu"
          " canaries=%zu\n\n",
          ss.mapped, ss.cached, ss.reserved_bytes, impl.stack_pool.stack_size(), ss.slabs, ss.guard_pages, ss.canaries);
  if (options.stacks) {
    if (!snap.stacks_error.empty()) {
      appendf(out, "  (no stacks: %s)\n\n", snap.stacks_error.c_str());
    } else {
      appendf(out, "  stacks: %zu distinct, walked in %.1f ms\n\n", snap.stacks.size() - 1,
              static_cast<double>(now_fine - t0) / 1e6);
    }
  }
  out += format_fiber_groups(std::move(snap), options, now_coarse, now_fine);
}
}  // namespace

// `fiber 7 "name"`, or `fiber 7` when it has no name.
std::string describe_fiber(const Fiber& f) {
  std::string s = "fiber " + std::to_string(f.id());
  if (!f.name().empty()) s += " \"" + f.name() + "\"";
  return s;
}

// An exception a joiner will receive is that joiner's to handle: debug. One nobody can receive
// (a detached fiber, or a handle dropped without join()) is a warning: it would go unseen.
void log_fiber_exception(const Fiber& f, const std::exception_ptr& ex, bool joinable) {
  const auto level = joinable ? spdlog::level::debug : spdlog::level::warn;
  const char* what = joinable ? "ended with an exception its join() rethrows" : "ended with an uncaught exception";
  try {
    std::rethrow_exception(ex);
  } catch (const std::exception& e) {
    spdlog::log(level, "{} {}: {}", describe_fiber(f), what, e.what());
  } catch (...) {
    spdlog::log(level, "{} {} (not a std::exception)", describe_fiber(f), what);
  }
}

void register_scheduler(SchedulerImpl* s) {
  std::lock_guard<std::mutex> lk(schedulers_mu());
  schedulers().push_back(s);
}

void unregister_scheduler(SchedulerImpl* s) noexcept {
  std::lock_guard<std::mutex> lk(schedulers_mu());
  auto& list = schedulers();
  list.erase(std::remove(list.begin(), list.end(), s), list.end());
}
}  // namespace detail

std::vector<FiberInfo> snapshot_fibers(const Scheduler& sched, std::size_t max_fibers) {
  return detail::snapshot(*sched.impl(), max_fibers);
}

std::string format_fiber_groups(std::vector<FiberInfo> fibers, const FiberDumpOptions& options, int64_t now_coarse_ns,
                                int64_t now_ns) {
  FiberSnapshot snap;
  snap.fibers = std::move(fibers);
  snap.stacks.emplace_back();
  for (FiberInfo& f : snap.fibers) f.stack = 0;
  return format_fiber_groups(std::move(snap), options, now_coarse_ns, now_ns);
}

std::string format_fiber_groups(FiberSnapshot snap, const FiberDumpOptions& options, int64_t now_coarse_ns,
                                int64_t now_ns) {
  using detail::appendf;
  std::vector<FiberInfo>& fibers = snap.fibers;
  // Group by (state, wait kind, stack); largest group first, then by state; inside a group the
  // longest in its state first (oldest stamp), then by id.
  auto group_key = [](const FiberInfo& f) { return std::make_tuple(f.state, f.wait, f.stack); };
  std::sort(fibers.begin(), fibers.end(), [&](const FiberInfo& a, const FiberInfo& b) {
    if (group_key(a) != group_key(b)) return group_key(a) < group_key(b);
    if (a.since_ns != b.since_ns) return a.since_ns < b.since_ns;
    return a.id < b.id;
  });
  struct Group {
    std::size_t begin, end;
  };
  std::vector<Group> groups;
  for (std::size_t i = 0; i < fibers.size();) {
    std::size_t j = i + 1;
    while (j < fibers.size() && group_key(fibers[j]) == group_key(fibers[i])) ++j;
    groups.push_back({i, j});
    i = j;
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.end - a.begin > b.end - b.begin; });

  // Every distinct frame of the groups' stacks, symbolized at once on a plain thread (this may
  // be a fiber: libdw's file reads must not park it, and its stack is small).
  std::unordered_map<uintptr_t, std::string> names;
  {
    std::vector<uintptr_t> pcs;
    for (const Group& g : groups) {
      const uint32_t id = fibers[g.begin].stack;
      if (id == 0 || id >= snap.stacks.size()) continue;
      for (uintptr_t pc : snap.stacks[id])
        if (names.try_emplace(pc).second) pcs.push_back(pc);
    }
    if (!pcs.empty()) {
      std::vector<std::string> text = describe_on_plain_thread(pcs);
      for (std::size_t i = 0; i < pcs.size(); ++i) names[pcs[i]] = std::move(text[i]);
    }
  }
  std::string out;
  for (const Group& g : groups) {
    const FiberInfo& first = fibers[g.begin];
    const std::size_t count = g.end - g.begin;
    bool one_target = true;
    for (std::size_t i = g.begin + 1; i < g.end && one_target; ++i) one_target = detail::same_target(fibers[i], first);
    appendf(out, "%zu %s: %s", count, count == 1 ? "fiber" : "fibers", to_string(first.state));
    if (first.state == FiberState::kParked) {
      // One shared target (37 acceptors on fd 12) is named; otherwise only the kind.
      const std::string what = one_target ? detail::wait_target(first) : std::string(to_string(first.wait));
      appendf(out, ", waiting %s", what.c_str());
    }
    const std::string longest = detail::format_duration(now_coarse_ns - first.since_ns);
    appendf(out, " (%s%s)\n", count == 1 ? "" : "up to ", longest.c_str());
    if (first.stack != 0 && first.stack < snap.stacks.size()) {
      for (uintptr_t pc : snap.stacks[first.stack]) {
        out += "    ";
        out += names[pc];
        out += '\n';
      }
    }
    const std::size_t shown = std::min(count, options.max_per_group);
    for (std::size_t i = g.begin; i < g.begin + shown; ++i) {
      const FiberInfo& f = fibers[i];
      appendf(out, "  fiber %" PRIu64, f.id);
      if (f.name[0]) appendf(out, " \"%s\"", f.name);
      if (f.worker >= 0) {
        appendf(out, " worker %d", f.worker);
      } else {
        out += " not started";
      }
      appendf(out, ", %s", detail::format_duration(now_coarse_ns - f.since_ns).c_str());
      if (f.state == FiberState::kParked) {
        appendf(out, ": %s%s", detail::wait_target(f).c_str(), detail::deadline_text(f, now_ns).c_str());
      }
      out += '\n';
    }
    if (shown < count) appendf(out, "  ... and %zu more\n", count - shown);
    out += '\n';
  }
  return out;
}

FiberSnapshot snapshot_fibers(const Scheduler& sched, const FiberDumpOptions& options) {
  return detail::snapshot_with_stacks(*sched.impl(), options);
}

std::string dump_fibers(const Scheduler& sched, const FiberDumpOptions& options) {
  std::string out;
  detail::format_scheduler(out, *sched.impl(), options);
  return out;
}

std::string dump_fibers(const FiberDumpOptions& options) {
  std::lock_guard<std::mutex> lk(detail::schedulers_mu());
  std::string out;
  const auto& list = detail::schedulers();
  detail::appendf(out, "LioNet fiber dump: %zu scheduler%s\n\n", list.size(), list.size() == 1 ? "" : "s");
  for (detail::SchedulerImpl* impl : list) detail::format_scheduler(out, *impl, options);
  return out;
}
}  // namespace lionet
