// lionet/fiber/stack_trace.h: call stacks of switched-out fibers and of the running code, as
// return addresses, and the text of those addresses (function, file:line where debug info
// exists).
//
// Owns: unwinding a saved context (fiber/detail/context.h's layout) and the caller's own stack,
// and symbolizing. Must not: decide when a stack may be read (sched/fiber_dump.cc makes sure
// the fiber is not resumed meanwhile: scheduler.cc protocol 11), allocate while unwinding, or
// be called from a signal handler.
//
// How: DWARF call-frame information (.eh_frame), read by libunwind (Debian libunwind8), which
// is loaded with dlopen(RTLD_LOCAL) on first use. Linked normally, libunwind.so would interpose
// its own _Unwind_* functions on every C++ exception of the process (it exports them); loaded
// locally it serves only these calls. Frame pointers would need every library on the stack
// (libpq, libc) built with them, and Debian's are not: a walk would stop at the first such
// frame, where a parked fiber's interesting frames begin. Names and lines come from libdw
// (elfutils: the ELF symbol tables, and DWARF line tables where debug info exists).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lionet {

// Return addresses of the frames from a switched-out context `fctx` (Fiber::ctx_.fctx of a
// fiber that is parked or runnable and not resumed while this runs), innermost first, at most
// `max`. Returns how many; 0 if the platform has no unwinder here (see stack_unwinding_error()).
// `switch_fn`, if given, is the entry address of the function that switched the fiber out
// (sched/'s Worker::switch_away): the frames up to and including it are left out, so that the
// stack starts at the code that parked (which frames lie above it differs by build: a
// sanitizer build has the out-of-line jump() as well). Without it, or if it is not among the
// first frames, only the innermost frame (the switch's own call site) is left out.
std::size_t unwind_saved_context(const void* fctx, uintptr_t* pcs, std::size_t max, uintptr_t switch_fn = 0) noexcept;

// The caller's own stack (this function's caller is the first frame), innermost first.
std::size_t unwind_current(uintptr_t* pcs, std::size_t max) noexcept;

// Empty if unwinding works in this process, else why not ("libunwind.so.8 could not be loaded:
// ...", "not supported on this platform").
const std::string& stack_unwinding_error() noexcept;

// Text of return addresses. One per dump (it reads the process's mappings when made); caches
// what it looked up. Not thread-safe.
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // "lionet::Channel<int>::recv() at lionet/sync/channel.h:212", or "func+0x1f in libpq.so.5"
  // without line information, or "0x7f12... in libfoo.so" without a symbol. `pc` is a return
  // address (the call before it is looked up).
  const std::string& describe(uintptr_t pc);
  // The demangled name of the function holding `addr` (an instruction address, not a return
  // address), or "" if no symbol covers it.
  std::string function_name(uintptr_t addr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Frames as text, one line each with `indent` before it.
std::string format_stack(Symbolizer& sym, const uintptr_t* pcs, std::size_t n, const char* indent = "    ");

// The text of each address, made by a Symbolizer on a plain thread of its own, which the
// caller waits for (blocking its thread). Use this from a fiber: libdw reads files, and in a
// fiber the hooked reads would park it (never allowed inside a switch, where the lock check
// reports) and its stack is small. If no thread can be started, the addresses in hex.
std::vector<std::string> describe_on_plain_thread(const std::vector<uintptr_t>& pcs);
// function_name() of each address, the same way.
std::vector<std::string> function_names_on_plain_thread(const std::vector<uintptr_t>& addrs);

}  // namespace lionet
