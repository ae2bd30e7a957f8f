// lionet/hook/hook.h: syscall hooks that turn plain blocking libc calls made inside LioNet
// fibers into fiber parks, so that user code and third-party blocking clients (hiredis, libcurl,
// database drivers) run concurrently on a few worker threads.
//
// Owns: the per-thread hook switch, the fd table (detail/fd_table.h) and the extern "C"
// definitions of the hooked libc functions. Must not read configuration, call epoll/io_uring
// for readiness of a single fd (IOManager does that), or change behaviour on plain threads.
//
// WHAT IS HOOKED (ARCHITECTURE decision 7). A hook changes behaviour only when it is "active":
// the caller runs inside a fiber of a LioNet Scheduler, the calling worker thread's switch is
// on (set_enabled(), on by default), and, for fd calls, the scheduler has an IOManager.
//   sleep, usleep, nanosleep, clock_nanosleep   -> this_fiber::sleep_for (needs no IOManager)
//   socket, socketpair, accept, accept4, pipe, pipe2
//                      -> the kernel fd is created O_NONBLOCK; the fd table remembers what the
//                         USER asked for (SOCK_NONBLOCK / O_NONBLOCK) and reports that.
//   read, readv, recv, recvfrom, recvmsg, write, writev, send, sendto, sendmsg, sendfile,
//   accept, accept4    -> on EAGAIN the fiber parks in IOManager::wait_readable/writable; on a
//                         socket with a completion-based IOManager (io_uring, io.uring_socket_ops)
//                         all but sendfile instead park in the kernel's own call (IOManager::recv
//                         & co.), which returns the data. SO_RCVTIMEO / SO_SNDTIMEO give EAGAIN
//                         after the timeout, exactly as the kernel does; a user who set
//                         O_NONBLOCK (or passes MSG_DONTWAIT) gets the kernel's immediate EAGAIN;
//                         an fd closed meanwhile by another fiber gives EBADF.
//   connect            -> non-blocking connect, park until writable, then SO_ERROR. SO_SNDTIMEO
//                         expiry gives EINPROGRESS (the kernel's own answer for a blocking
//                         connect that timed out). A full AF_UNIX backlog is retried every 1 ms.
//   poll, select       -> one fd: IOManager wait; several fds: a private epoll set holding them
//                         all, which the fiber waits on as one fd (poll_hooks.cc).
//   close, dup2, dup3  -> IOManager::cancel(fd) first (waiters wake with ECANCELED -> EBADF).
//   open, openat (and *64, creat, __open_2) -> plain libc, then the fd-table entry of the new
//                         number is forgotten (a stale socket/pipe entry left by a close behind
//                         the hooks' back would misroute the file's reads).
//   fcntl(F_GETFL/F_SETFL), ioctl(FIONBIO) -> track and report the user's O_NONBLOCK while the
//                         kernel fd stays non-blocking. fcntl(F_DUPFD*), dup* copy the entry.
//   setsockopt(SO_RCVTIMEO/SO_SNDTIMEO) -> recorded in the fd table (and passed on).
//   getaddrinfo, getnameinfo, gethostbyname, gethostbyname_r -> run on the offload pool
//                         (lionet/sync/offload.h); the fiber parks, its worker runs others.
//   shutdown, getsockopt -> plain libc (the kernel wakes epoll waiters on shutdown itself).
//   read, readv, write, writev, pread, pwrite, preadv, pwritev (and the *64 / _chk names) on a
//   REGULAR FILE   -> do not wait for the disk on the worker: a buffered request of up to
//                     nowait_max (256 KiB) is first tried on the worker with preadv2/pwritev2
//                     (RWF_NOWAIT), which succeeds when the data is in the page cache and says
//                     EAGAIN when the device would be needed; then, and for O_DIRECT fds and
//                     bigger requests, the call runs on the offload pool (lionet/sync/offload.h)
//                     while the fiber parks (pinned, like every hooked wait). A partly cached
//                     read is completed on the pool. Buffered writes on filesystems that cannot
//                     do RWF_NOWAIT writes (ext4 answers EOPNOTSUPP; remembered per fd) of up
//                     to inline_write_max (256 KiB) are written in place: a page-cache copy that
//                     blocks only under dirty-page throttling. Why the fast paths: a 4 KiB
//                     page-cache read costs ~1.7 us as a plain syscall but ~17 us through the
//                     offload pool (figures in lionet/file/README.md); with them hooked cached
//                     reads cost ~1.03-1.14x the plain call. Needs no IOManager. Limits:
//                     configure_regular_files(); counters: regular_file_stats().
//                     (lionet::File is the API with kernel AIO, queue depth and batches.)
//   fsync, fdatasync on a REGULAR FILE -> on the offload pool while the fiber parks (a sync waits
//                     for the device; RegularFileOptions::offload_sync); counted in
//                     regular_file_stats().offloaded.
// Ttys, eventfds and every other fd that is not a socket, a pipe or a regular file pass through.
//
// On plain threads (and in fibers with the switch off) each call is the plain libc call, with
// one necessary exception: an fd that the hooks made non-blocking in the kernel while the user
// thinks it is blocking still behaves as blocking there (the hook waits in libc poll(2),
// honouring SO_RCVTIMEO/SO_SNDTIMEO), so an fd can be handed from a fiber to a plain thread.
//
// CANCELLATION (sched/cancel.h): in a fiber that is cancelled or past its DeadlineScope, a
// hooked call that has to wait fails with -1 and errno ECANCELED / ETIMEDOUT (never EINTR,
// which libpq, hiredis and libcurl retry); one that completes without waiting still does.
// sleep returns the seconds left (errno set), nanosleep fills `rem`, clock_nanosleep returns
// the error number. getaddrinfo/getnameinfo start no lookup then (EAI_SYSTEM, errno set) but
// still answer numeric hosts; a lookup already on the offload pool is waited for (it writes
// into the caller's memory). Inside a CancelShield nothing of this applies.
// ERRNO: every hook sets errno after its last possible fiber switch, through a non-inlined
// accessor (glibc's __errno_location() is `const`; after a migration a cached address would be
// another thread's errno). See fiber/fiber.h, MIGRATION HAZARD.
// What the hooks cannot fix: a CALLER that computed errno's address before the call (an
// `errno = 0;` earlier in the same function, or an errno read hoisted out of a retry loop) may
// read the old worker's errno after a migration. Hooked fd waits and regular-file offloads pin
// the fiber to its worker for the call, so they are safe even then; hooked sleeps and name
// lookups do not pin. Plain "call, then test errno" code is always safe; other code that must
// be safe against the hoisting should run in a fiber pinned to one worker
// (SpawnOptions::pin_worker). tests/hook reads errno through a non-inlined accessor for this.
//
// HOW A PROGRAM GETS THE HOOKS. The hooks are ordinary extern "C" definitions of read, write,
// poll, ... with default visibility in liblionet.a. Linking them into an executable makes the
// linker export them (they are also defined by libc.so), so they interpose on libc for the
// executable and for every shared library it loads (hiredis, libcurl, ...). The originals are
// found with dlsym(RTLD_NEXT, ...) once. Because liblionet is a static library, the linker
// pulls in the hook objects only if something references them, and no library code does. The
// CMake target does it for every program: lionet/CMakeLists.txt gives `lionet` the INTERFACE
// link option LINKER:--undefined=lionet_hook_ensure_linked, so every target that links lionet
// (or the installed lionet::lionet) is linked with -Wl,--undefined=lionet_hook_ensure_linked.
// That undefined symbol pulls in hook.cc's object, whose lionet_hook_ensure_linked() references
// an anchor in each other hook file; hook.cc's use of IOManager also pulls in io/io_manager.cc,
// which defines the scheduler's weak lionet_make_io_driver (sched/driver.h). A program linked
// against liblionet.a without CMake must pass that flag itself, or call ensure_linked() once.
// A shared liblionet.so would need LD_PRELOAD-like ordering and is not supported for hooks.
// Under ASan the chain is executable -> ASan interceptor -> libc, which is what RTLD_NEXT gives.
#pragma once

extern "C" void lionet_hook_ensure_linked() noexcept;

namespace lionet::hook {

// Forces the hook objects of the static library into the program (see above). Cheap; no-op.
inline void ensure_linked() noexcept { lionet_hook_ensure_linked(); }

// The per-thread switch. On by default on every thread; it matters only on worker threads
// (plain threads never change behaviour). Setting it on a worker affects every fiber that runs
// on that worker while it is set (fibers migrate: prefer a pinned fiber if you toggle it).
bool is_enabled() noexcept;
void set_enabled(bool on) noexcept;

// True if a hooked sleep would park the calling fiber (in a fiber, switch on).
bool is_active() noexcept;
// True if hooked fd calls would park the calling fiber (is_active() and the scheduler running the
// caller has an IO driver: its own, unless made with io.backend "none", or an IOManager).
bool is_io_active() noexcept;

// Regular-file hooks (see REGULAR FILE above): calls served on the worker by the RWF_NOWAIT
// try, and calls that went to the offload pool. Process-wide, relaxed counters.
struct RegularFileStats {
  unsigned long long fast_path = 0;  // served on the worker by the RWF_NOWAIT try
  unsigned long long offloaded = 0;  // ran on the offload pool
  unsigned long long inline_writes = 0;  // small buffered writes done in place (no NOWAIT writes)
};
RegularFileStats regular_file_stats() noexcept;

// Size limits of the regular-file path. Process-wide; set at start-up (app/ maps YAML).
struct RegularFileOptions {
  // Largest buffered request tried with RWF_NOWAIT on the worker (bigger: offload pool, so a
  // hooked call never copies more than this on a worker). YAML: hook.file_nowait_max.
  unsigned long nowait_max = 256 * 1024;
  // Largest buffered write done in place when the filesystem cannot do RWF_NOWAIT writes;
  // 0 sends every such write to the offload pool. YAML: hook.file_inline_write_max. As
  // nowait_max, so that no hooked call copies more than 256 KiB on a worker either way; at
  // 64 KiB (the earlier default) a Kafka producer's 64 KiB batch, stored as 65,812 bytes, went
  // to the pool and back on every append (bench-kafka: ~20% more CPU per record).
  unsigned long inline_write_max = 256 * 1024;
  // fsync/fdatasync of a regular file from a fiber run on the offload pool (the worker serves
  // its other fibers during the sync); false runs them on the worker, sparing the pool hand-off
  // (~20-40 us) on a lone writer's latency. YAML: hook.file_sync_offload.
  bool offload_sync = true;
};
void configure_regular_files(const RegularFileOptions& options) noexcept;
RegularFileOptions regular_file_options() noexcept;

// Turns the calling thread's switch off for a scope (e.g. to make a deliberately blocking call
// from a fiber). Restores the previous value.
class ScopedDisable {
 public:
  ScopedDisable() noexcept : prev_(is_enabled()) { set_enabled(false); }
  ~ScopedDisable() { set_enabled(prev_); }
  ScopedDisable(const ScopedDisable&) = delete;
  ScopedDisable& operator=(const ScopedDisable&) = delete;

 private:
  bool prev_;
};

}  // namespace lionet::hook
