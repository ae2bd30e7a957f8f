// tests/common/tsan_c11_threads.cc: C11 <threads.h> over the pthread calls ThreadSanitizer
// intercepts, linked into the test binaries that run librdkafka in-process (kafka_tests,
// app_tests) in the TSan build only (tests/CMakeLists.txt).
//
// Why: librdkafka creates its threads with thrd_create and locks with mtx_*/cnd_*; glibc
// implements those by calling its internal pthread functions, which gcc 12's libtsan does not
// intercept. So TSan never registers librdkafka's threads, and the first instrumented code
// such a thread runs (lionet's libc hooks: getaddrinfo, socket calls) crashes in TSan's
// runtime; and it would not see librdkafka's locks (the hand-over of a message to the
// application thread). Defined in the executable, these interpose glibc's for librdkafka.so
// (a shared library's references bind to the executable's definitions first) and forward to
// the public pthread functions, which TSan intercepts: the threads are registered and the
// locks are seen. Each does what glibc's own version does (glibc nptl/thrd_*.c, mtx_*.c,
// cnd_*.c). The memory accesses of librdkafka's threads are not checked (see Start::run):
// TSan checks the server and the test's own threads, which is what these tests are for.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <threads.h>

extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

namespace {
int map(int e) {
  switch (e) {
    case 0: return thrd_success;
    case ENOMEM: return thrd_nomem;
    case ETIMEDOUT: return thrd_timedout;
    case EBUSY: return thrd_busy;
    default: return thrd_error;
  }
}
}  // namespace

extern "C" {

int thrd_create(thrd_t* thr, thrd_start_t func, void* arg) {
  // The int-returning start routine runs under a pthread one that hands its value back as a
  // pointer-sized integer (thrd_join reads it so, as glibc's does).
  struct Start {
    thrd_start_t func;
    void* arg;
    static void* run(void* p) {
      // librdkafka's code is not instrumented, but its atomics order what its threads share
      // (reference counts before a destroy), which TSan cannot see: the accesses TSan would
      // check on these threads (its interceptors', the libc hooks') are not checked. Their
      // locks still order them with the application's threads.
      __tsan_ignore_thread_begin();
      const Start s = *static_cast<Start*>(p);
      delete static_cast<Start*>(p);
      const int r = s.func(s.arg);  // (librdkafka never calls thrd_exit)
      __tsan_ignore_thread_end();
      return reinterpret_cast<void*>(static_cast<intptr_t>(r));
    }
  };
  auto* start = new Start{func, arg};
  const int e = pthread_create(reinterpret_cast<pthread_t*>(thr), nullptr, &Start::run, start);
  if (e != 0) delete start;
  return map(e);
}

int thrd_join(thrd_t thr, int* res) {
  void* r = nullptr;
  const int e = pthread_join(static_cast<pthread_t>(thr), &r);
  if (e == 0 && res) *res = static_cast<int>(reinterpret_cast<intptr_t>(r));
  return map(e);
}

int thrd_detach(thrd_t thr) { return map(pthread_detach(static_cast<pthread_t>(thr))); }

int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  if (type & mtx_recursive) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  const int e = pthread_mutex_init(reinterpret_cast<pthread_mutex_t*>(m), &a);
  pthread_mutexattr_destroy(&a);
  return map(e);
}
int mtx_lock(mtx_t* m) { return map(pthread_mutex_lock(reinterpret_cast<pthread_mutex_t*>(m))); }
int mtx_trylock(mtx_t* m) { return map(pthread_mutex_trylock(reinterpret_cast<pthread_mutex_t*>(m))); }
int mtx_timedlock(mtx_t* __restrict m, const struct timespec* __restrict t) {
  return map(pthread_mutex_timedlock(reinterpret_cast<pthread_mutex_t*>(m), t));
}
int mtx_unlock(mtx_t* m) { return map(pthread_mutex_unlock(reinterpret_cast<pthread_mutex_t*>(m))); }
void mtx_destroy(mtx_t* m) { pthread_mutex_destroy(reinterpret_cast<pthread_mutex_t*>(m)); }

int cnd_init(cnd_t* c) { return map(pthread_cond_init(reinterpret_cast<pthread_cond_t*>(c), nullptr)); }
int cnd_signal(cnd_t* c) { return map(pthread_cond_signal(reinterpret_cast<pthread_cond_t*>(c))); }
int cnd_broadcast(cnd_t* c) { return map(pthread_cond_broadcast(reinterpret_cast<pthread_cond_t*>(c))); }
int cnd_wait(cnd_t* c, mtx_t* m) {
  return map(pthread_cond_wait(reinterpret_cast<pthread_cond_t*>(c), reinterpret_cast<pthread_mutex_t*>(m)));
}
int cnd_timedwait(cnd_t* __restrict c, mtx_t* __restrict m, const struct timespec* __restrict t) {
  return map(pthread_cond_timedwait(reinterpret_cast<pthread_cond_t*>(c), reinterpret_cast<pthread_mutex_t*>(m), t));
}
void cnd_destroy(cnd_t* c) { pthread_cond_destroy(reinterpret_cast<pthread_cond_t*>(c)); }

void call_once(once_flag* flag, void (*func)(void)) { pthread_once(reinterpret_cast<pthread_once_t*>(flag), func); }

}  // extern "C"
