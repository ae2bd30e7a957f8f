// lionet/io/reactor.cc: make_reactor(), the one place that knows which backends are compiled in.
#include "lionet/io/reactor.h"

#include <cerrno>
#include <stdexcept>
#include <system_error>

#if defined(__linux__)
#include "lionet/io/epoll_reactor.h"
#endif
#if defined(LIONET_HAVE_URING)
#include "lionet/io/uring_reactor.h"
#endif
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__) || defined(__DragonFly__)
#define LIONET_HAVE_KQUEUE 1
#include "lionet/io/kqueue_reactor.h"
#endif

namespace lionet {
namespace {
constexpr const char* kCompiled[] = {
#if defined(__linux__)
    "epoll",
#endif
#if defined(LIONET_HAVE_URING)
    "io_uring",
#endif
#if defined(LIONET_HAVE_KQUEUE)
    "kqueue",
#endif
    nullptr};
}  // namespace

const char* const* compiled_reactors() noexcept { return kCompiled; }

std::unique_ptr<Reactor> make_reactor(const std::string& name, const ReactorOptions& options) {
  if (name == "epoll") {
#if defined(__linux__)
    return std::make_unique<EpollReactor>();
#endif
  } else if (name == "io_uring") {
#if defined(LIONET_HAVE_URING)
    return std::make_unique<UringReactor>(options.uring_entries, options.uring_single_issuer);
#endif
  } else if (name == "kqueue") {
#if defined(LIONET_HAVE_KQUEUE)
    return std::make_unique<KqueueReactor>();
#endif
  } else {
    throw std::invalid_argument("lionet: unknown IO backend '" + name + "' (epoll | io_uring | kqueue)");
  }
  (void)options;
  throw std::system_error(ENOTSUP, std::generic_category(),
                          "IO backend '" + name + "' is not compiled into this build");
}
}  // namespace lionet
