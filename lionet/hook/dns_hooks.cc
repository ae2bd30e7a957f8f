// lionet/hook/dns_hooks.cc: getaddrinfo, getnameinfo, gethostbyname, gethostbyname_r. In an
// active fiber the call runs on the offload pool (lionet/sync/offload.h) and the fiber parks,
// so a slow resolver (a dead DNS server waits seconds) never stalls the worker. The pool
// threads are plain threads: the original runs there unhooked. errno and h_errno, which the
// original sets on the pool thread, are carried back and set in the fiber after it resumed.
#include <errno.h>
#include <netdb.h>

#include "lionet/hook/detail/common.h"
#include "lionet/hook/detail/real.h"
#include "lionet/sched/cancel.h"
#include "lionet/sync/offload.h"

#define LIONET_HOOK_API extern "C" __attribute__((visibility("default")))

extern "C" const int lionet_hook_anchor_dns = 0;

using namespace lionet::hook::detail;

namespace {
__attribute__((noinline)) void set_h_errno(int e) noexcept {
  asm volatile("" ::: "memory");
  h_errno = e;
}
}  // namespace

LIONET_HOOK_API int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) {
  if (!sleep_active()) return LIONET_REAL(getaddrinfo)(node, service, hints, res);
  // A cancelled fiber (or one past its deadline) does not start a lookup that would wait
  // (sched/cancel.h); a numeric host and service still resolve, as they never wait. One already
  // running on the pool is waited for: it writes into the caller's memory.
  if (lionet::this_fiber::interruption() != 0) {
    addrinfo numeric{};
    if (hints) numeric = *hints;
    numeric.ai_flags |= AI_NUMERICHOST | AI_NUMERICSERV;
    if (LIONET_REAL(getaddrinfo)(node, service, &numeric, res) == 0) return 0;
    fail_if_interrupted();
    return EAI_SYSTEM;
  }
  int err = 0;
  int rc = lionet::offload([&] {
    int r = LIONET_REAL(getaddrinfo)(node, service, hints, res);
    err = errno;
    return r;
  });
  if (rc == EAI_SYSTEM) set_errno(err);
  return rc;
}

LIONET_HOOK_API int getnameinfo(const sockaddr* sa, socklen_t salen, char* host, socklen_t hostlen, char* serv,
                                socklen_t servlen, int flags) {
  if (!sleep_active()) return LIONET_REAL(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags);
  if (lionet::this_fiber::interruption() != 0) {  // as getaddrinfo: numeric answers only
    if (LIONET_REAL(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags | NI_NUMERICHOST | NI_NUMERICSERV) == 0)
      return 0;
    fail_if_interrupted();
    return EAI_SYSTEM;
  }
  int err = 0;
  int rc = lionet::offload([&] {
    int r = LIONET_REAL(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags);
    err = errno;
    return r;
  });
  if (rc == EAI_SYSTEM) set_errno(err);
  return rc;
}

// Same static result buffer as glibc's own (process-wide, overwritten by the next call): the
// pointer stays valid in the fiber exactly as long as it would have without the hook.
LIONET_HOOK_API hostent* gethostbyname(const char* name) {
  if (!sleep_active()) return LIONET_REAL(gethostbyname)(name);
  int herr = 0;
  int err = 0;
  hostent* h = lionet::offload([&] {
    hostent* r = LIONET_REAL(gethostbyname)(name);
    herr = h_errno;
    err = errno;
    return r;
  });
  set_h_errno(herr);
  set_errno(err);
  return h;
}

LIONET_HOOK_API int gethostbyname_r(const char* name, hostent* ret, char* buf, size_t buflen, hostent** result,
                                    int* h_errnop) {
  if (!sleep_active()) return LIONET_REAL(gethostbyname_r)(name, ret, buf, buflen, result, h_errnop);
  return lionet::offload([&] { return LIONET_REAL(gethostbyname_r)(name, ret, buf, buflen, result, h_errnop); });
}
