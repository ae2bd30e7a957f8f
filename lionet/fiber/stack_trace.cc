// lionet/fiber/stack_trace.cc: see stack_trace.h.
#include "lionet/fiber/stack_trace.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "lionet/fiber/detail/context.h"

#if defined(__x86_64__) && defined(__linux__)
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#define LIONET_HAVE_UNWINDER 1
#endif

namespace lionet {
namespace {

#ifdef LIONET_HAVE_UNWINDER
// libunwind's local unwinder, loaded privately (stack_trace.h says why).
struct Unwinder {
  int (*init_local)(unw_cursor_t*, unw_context_t*) = nullptr;
  int (*step)(unw_cursor_t*) = nullptr;
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*) = nullptr;
  int (*get_proc_info)(unw_cursor_t*, unw_proc_info_t*) = nullptr;
  std::string error;

  Unwinder() {
    void* h = ::dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = ::dlerror();
      error = std::string("libunwind.so.8 could not be loaded (Debian package libunwind8): ") + (why ? why : "?");
      return;
    }
    init_local = reinterpret_cast<decltype(init_local)>(::dlsym(h, "_ULx86_64_init_local"));
    step = reinterpret_cast<decltype(step)>(::dlsym(h, "_ULx86_64_step"));
    get_reg = reinterpret_cast<decltype(get_reg)>(::dlsym(h, "_ULx86_64_get_reg"));
    get_proc_info = reinterpret_cast<decltype(get_proc_info)>(::dlsym(h, "_ULx86_64_get_proc_info"));
    if (!init_local || !step || !get_reg) error = "libunwind.so.8 lacks _ULx86_64_init_local/step/get_reg";
  }
  bool ok() const noexcept { return error.empty(); }
};

const Unwinder& unwinder() {
  static const Unwinder u;
  return u;
}
#endif
}  // namespace

const std::string& stack_unwinding_error() noexcept {
#ifdef LIONET_HAVE_UNWINDER
  return unwinder().error;
#else
  static const std::string why = "fiber stacks are not supported on this platform (x86-64 Linux only)";
  return why;
#endif
}

// The saved context lies on the fiber's own stack, which ASan may have poisoned around frames
// that have since returned; TSan sees a plain read of memory the fiber wrote on another thread
// (ordered by the dump protocol, scheduler.cc 11, which TSan cannot see through membarrier).
__attribute__((no_sanitize("address", "thread"))) std::size_t unwind_saved_context(const void* fctx, uintptr_t* pcs,
                                                                                   std::size_t max,
                                                                                   uintptr_t switch_fn) noexcept {
#ifdef LIONET_HAVE_UNWINDER
  const Unwinder& u = unwinder();
  detail::SavedRegisters r;
  if (!u.ok() || max == 0 || !detail::saved_registers(fctx, r)) return 0;
  unw_context_t uc;
  std::memset(&uc, 0, sizeof uc);
  greg_t* g = uc.uc_mcontext.gregs;
  g[REG_RIP] = static_cast<greg_t>(r.rip);
  g[REG_RSP] = static_cast<greg_t>(r.rsp);
  g[REG_RBP] = static_cast<greg_t>(r.rbp);
  g[REG_RBX] = static_cast<greg_t>(r.rbx);
  g[REG_R12] = static_cast<greg_t>(r.r12);
  g[REG_R13] = static_cast<greg_t>(r.r13);
  g[REG_R14] = static_cast<greg_t>(r.r14);
  g[REG_R15] = static_cast<greg_t>(r.r15);
  unw_cursor_t cur;
  if (u.init_local(&cur, &uc) != 0) return 0;
  // Frames of the switch itself: through switch_fn if it is among the first kSwitchFrames,
  // else the innermost one.
  constexpr int kSwitchFrames = 4;
  int skip = -1;
  for (int i = 0; i < kSwitchFrames && skip < 0; ++i) {
    unw_proc_info_t pi;
    if (switch_fn != 0 && u.get_proc_info && u.get_proc_info(&cur, &pi) == 0 && pi.start_ip == switch_fn) skip = i;
    if (skip < 0 && u.step(&cur) <= 0) return 0;
  }
  if (skip < 0) {  // not found: start over, leaving out the innermost frame only
    if (u.init_local(&cur, &uc) != 0 || u.step(&cur) <= 0) return 0;
  } else if (u.step(&cur) <= 0) {
    return 0;
  }
  std::size_t n = 0;
  do {
    unw_word_t ip = 0;
    if (u.get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    pcs[n++] = static_cast<uintptr_t>(ip);
  } while (n < max && u.step(&cur) > 0);
  return n;
#else
  (void)fctx;
  (void)pcs;
  (void)max;
  (void)switch_fn;
  return 0;
#endif
}

__attribute__((noinline)) std::size_t unwind_current(uintptr_t* pcs, std::size_t max) noexcept {
  // glibc's backtrace(): libgcc's DWARF unwinder over the live stack. One more frame than asked
  // for, as the first is this function.
  void* buf[129];
  const int want = static_cast<int>(std::min<std::size_t>(max + 1, 129));
  const int got = ::backtrace(buf, want);
  std::size_t n = 0;
  for (int i = 1; i < got; ++i) pcs[n++] = reinterpret_cast<uintptr_t>(buf[i]);
  return n;
}

namespace {
// A symbol's demangled name, or the name itself if it is not a C++ mangled one.
std::string demangle(const char* name) {
  int status = -1;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : name;
  std::free(demangled);
  return out;
}

// f(symbolizer, address) for each address, on a plain thread of its own that the caller waits
// for (describe_on_plain_thread says why); empty if no thread could be started.
template <class F>
std::vector<std::string> on_plain_thread(const std::vector<uintptr_t>& addrs, F f) {
  std::vector<std::string> out;
  try {
    std::thread([&] {
      Symbolizer sym;
      out.reserve(addrs.size());
      for (uintptr_t a : addrs) out.push_back(f(sym, a));
    }).join();
  } catch (...) {
    out.clear();
  }
  return out;
}
}  // namespace

struct Symbolizer::Impl {
  Dwfl* dwfl = nullptr;
  Dwfl_Callbacks callbacks{};
  char* debuginfo_path = nullptr;
  std::unordered_map<uintptr_t, std::string> cache;

  Impl() {
    callbacks.find_elf = dwfl_linux_proc_find_elf;
    callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks.debuginfo_path = &debuginfo_path;
    dwfl = dwfl_begin(&callbacks);
    if (!dwfl) return;
    dwfl_report_begin(dwfl);
    if (dwfl_linux_proc_report(dwfl, ::getpid()) != 0 || dwfl_report_end(dwfl, nullptr, nullptr) != 0) {
      dwfl_end(dwfl);
      dwfl = nullptr;
    }
  }
  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }

  std::string lookup(uintptr_t pc) {
    const Dwarf_Addr addr = pc - 1;  // a return address: the call is the instruction before it
    char buf[64];
    Dwfl_Module* mod = dwfl ? dwfl_addrmodule(dwfl, addr) : nullptr;
    if (!mod) {
      std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, pc);
      return buf;
    }
    const char* path = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    const char* base = path ? std::strrchr(path, '/') : nullptr;
    base = base ? base + 1 : (path ? path : "?");
    GElf_Off offset = 0;
    GElf_Sym sym;
    const char* name = dwfl_module_addrinfo(mod, addr, &offset, &sym, nullptr, nullptr, nullptr);
    std::string out;
    if (name) {
      out = demangle(name);
    } else {
      std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, pc);
      out = buf;
    }
    if (Dwfl_Line* line = dwfl_module_getsrc(mod, addr)) {
      int lineno = 0;
      if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
        out += " at ";
        out += file;
        out += ':' + std::to_string(lineno);
        return out;
      }
    }
    if (name) {
      std::snprintf(buf, sizeof buf, "+0x%" PRIx64, static_cast<uint64_t>(offset + 1));
      out += buf;
    }
    out += " in ";
    out += base;
    return out;
  }
};

std::string Symbolizer::function_name(uintptr_t addr) {
  Dwfl_Module* mod = impl_->dwfl ? dwfl_addrmodule(impl_->dwfl, addr) : nullptr;
  if (!mod) return {};
  GElf_Off offset = 0;
  GElf_Sym sym;
  const char* name = dwfl_module_addrinfo(mod, addr, &offset, &sym, nullptr, nullptr, nullptr);
  return name ? demangle(name) : std::string();
}

std::vector<std::string> function_names_on_plain_thread(const std::vector<uintptr_t>& addrs) {
  std::vector<std::string> out =
      on_plain_thread(addrs, [](Symbolizer& sym, uintptr_t a) { return sym.function_name(a); });
  if (out.size() != addrs.size()) out.assign(addrs.size(), std::string());
  return out;
}

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

const std::string& Symbolizer::describe(uintptr_t pc) {
  auto it = impl_->cache.find(pc);
  if (it == impl_->cache.end()) it = impl_->cache.emplace(pc, impl_->lookup(pc)).first;
  return it->second;
}

std::vector<std::string> describe_on_plain_thread(const std::vector<uintptr_t>& pcs) {
  std::vector<std::string> out = on_plain_thread(pcs, [](Symbolizer& sym, uintptr_t pc) { return sym.describe(pc); });
  if (out.size() != pcs.size()) {
    out.clear();
    char buf[32];
    for (uintptr_t pc : pcs) {
      std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, pc);
      out.emplace_back(buf);
    }
  }
  return out;
}

std::string format_stack(Symbolizer& sym, const uintptr_t* pcs, std::size_t n, const char* indent) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += indent;
    out += sym.describe(pcs[i]);
    out += '\n';
  }
  return out;
}

}  // namespace lionet
