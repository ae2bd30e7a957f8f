// lionet/sched/fiber_dump.h: a list of every live fiber, grouped and counted like a Go
// goroutine dump: id, name, state, worker, time in that state, what a parked fiber waits for
// (fd and direction, deadline, channel, mutex, join, ...), and the call stack of every fiber
// that is not running (fiber/stack_trace.h; walked under protocol 11 of scheduler.cc, which
// keeps a fiber from being resumed while its stack is read).
//
// Owns: FiberInfo, FiberDumpOptions, snapshot_fibers(), dump_fibers(). Must not: stop or
// slow down the scheduler beyond the registry locks below, or be called from a signal
// handler (it allocates and takes locks): for SIGQUIT, wait for the signal on a thread
// (sigwait / signalfd) and call dump_fibers() there.
//
// Where the data comes from: every scheduler lists its live fibers in per-worker registry
// shards (fiber/fiber_registry.h) as they are spawned and until they finish; each fiber
// carries its state word, the worker it last ran on, a coarse timestamp of its last state
// change (sched/detail/coarse_clock.h) and a wait record (fiber/wait_reason.h) that sync/,
// io/ and sched/ fill just before parking.
//
// Consistency: callable from any thread (a plain thread, or a fiber of any scheduler) at any
// time, concurrently with fibers spawning and exiting: each shard is held (its reader lock;
// for a worker's shard also a membarrier(2) that makes the owner wait, fiber_registry.h) while
// its fibers' records are copied, and a fiber leaves its shard that way before its memory can
// be freed. Fibers that finished on another worker stay listed, as done, until their own
// worker takes them back; dumps skip them. The picture may be slightly stale and not one
// instant across shards.
// Cost while dumping: one membarrier per worker (microseconds: an interrupt on every CPU
// running a thread of the process) and a copy of ~100 bytes per fiber (tens of ns each), which
// delays spawns and exits on that worker meanwhile; switches never wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lionet/fiber/fiber.h"
#include "lionet/fiber/wait_reason.h"

namespace lionet {
class Scheduler;

// One fiber as copied from the registry.
struct FiberInfo {
  static constexpr std::size_t kNameMax = 47;  // longer names are cut
  uint64_t id = 0;
  char name[kNameMax + 1] = {};
  FiberState state = FiberState::kCreated;
  int worker = -1;  // index of the worker it last ran on; -1: never ran yet
  int64_t since_ns = 0;  // CLOCK_MONOTONIC_COARSE ns when it entered `state`
  // What it waits for: meaningful when state == kParked (kNone otherwise, or when the
  // parking code recorded nothing).
  WaitKind wait = WaitKind::kNone;
  uint32_t wait_arg = 0;  // fd (kFdRead/kFdWrite), case count (kSelect)
  uint64_t wait_object = 0;  // the primitive's address; the joined fiber's id (kJoin)
  int64_t deadline_ns = 0;  // steady-clock ns of a timed wait's deadline, 0: none
  // Its call stack: an index into FiberSnapshot::stacks (0: none: running, never run, stacks
  // off, or unwinding unavailable).
  uint32_t stack = 0;
};

struct FiberDumpOptions {
  // Fibers listed per group; the rest are counted ("... and N more"). YAML: debug.fibers.max_per_group
  std::size_t max_per_group = 10;
  // Fibers copied per scheduler at most (bounds the dump's memory and time). YAML: debug.fibers.max_fibers
  std::size_t max_fibers = 1'000'000;
  // Each parked or runnable fiber's call stack, and fibers grouped by it too. YAML: debug.fibers.stacks
  bool stacks = true;
  // Frames per stack at most (the innermost are kept). YAML: debug.fibers.max_frames
  std::size_t max_frames = 48;
};

// Fibers with their stacks, as return addresses (fiber/stack_trace.h symbolizes them).
struct FiberSnapshot {
  std::vector<FiberInfo> fibers;
  std::vector<std::vector<uintptr_t>> stacks;  // FiberInfo::stack indexes it; [0] is empty
  std::string stacks_error;  // why fibers have no stacks (unwinding unavailable), else empty
};

// Copies the records of `sched`'s live fibers (at most max_fibers). Any thread.
std::vector<FiberInfo> snapshot_fibers(const Scheduler& sched, std::size_t max_fibers = 1'000'000);

// The same with stacks (options.stacks): every parked or runnable fiber's stack is walked while
// it cannot be resumed (scheduler.cc protocol 11). Equal stacks share one entry.
FiberSnapshot snapshot_fibers(const Scheduler& sched, const FiberDumpOptions& options);

// Text for one scheduler: a header with its name, threads, live fibers and SchedulerStats,
// then one block per (state, wait kind) group, largest group first:
//   37 fibers: parked, waiting fd 12 read (up to 1.2s)
//     fiber 812 "conn" worker 1, 1.2s: fd 12 read
//     ...
//     ... and 27 more
// Within a group the longest-waiting fibers come first. Durations are in the current state.
std::string dump_fibers(const Scheduler& sched, const FiberDumpOptions& options = {});

// The same for every Scheduler alive in the process (in creation order). What SIGQUIT and
// GET /debug/fibers print.
std::string dump_fibers(const FiberDumpOptions& options = {});

// The text of one group of fibers as dump_fibers() would print it (for tests and for callers
// that filter a snapshot first). `now_coarse_ns`/`now_ns`: CLOCK_MONOTONIC_COARSE and steady
// clock ns at the time of the snapshot.
std::string format_fiber_groups(std::vector<FiberInfo> fibers, const FiberDumpOptions& options, int64_t now_coarse_ns,
                                int64_t now_ns);
// The same with stacks: groups are (state, wait kind, stack), each followed by its frames.
std::string format_fiber_groups(FiberSnapshot snap, const FiberDumpOptions& options, int64_t now_coarse_ns,
                                int64_t now_ns);
}  // namespace lionet
