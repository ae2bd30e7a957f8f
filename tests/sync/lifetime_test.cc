// Destroying a primitive right after the wait that it released returns: the releasing call
// (unlock, done, set, release, notify) may still be returning on another worker, and must not
// touch the object any more. Each test runs 3,000 rounds (TSan: 300) on two workers with a
// heap-allocated primitive, so TSan/ASan see a use-after-free if it happens.
#include <gtest/gtest.h>

#include <memory>

#include "lionet/sync/cond_var.h"
#include "lionet/sync/event.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/semaphore.h"
#include "lionet/sync/wait_group.h"
#include "sync_test_util.h"

namespace {
using namespace std::chrono_literals;
using lionet::test::kScale;
constexpr int kRounds = 3000 / kScale;

TEST(Lifetime, MutexDestroyedByTheNextHolderAfterAContendedUnlock) {
  lionet::Scheduler s({.threads = 2});
  s.spawn([] {
     for (int r = 0; r < kRounds; ++r) {
       auto* mu = new lionet::Mutex;
       auto* done = new bool(false);
       lionet::Event started;
       mu->lock();
       lionet::go([mu, done, &started] {
         started.set();
         mu->lock();  // parks: contended
         const bool ok = *done;
         mu->unlock();
         delete done;
         delete mu;  // POSIX-style: safe once we acquired it after the final unlock
         EXPECT_TRUE(ok);
       });
       started.wait();
       lionet::this_fiber::yield();
       *done = true;
       mu->unlock();  // the other fiber may run, and delete mu, before this returns
     }
   }).join();
}

TEST(Lifetime, WaitGroupEventSemaphoreDestroyedRightAfterWait) {
  lionet::Scheduler s({.threads = 2});
  s.spawn([] {
     for (int r = 0; r < kRounds; ++r) {
       auto wg = std::make_unique<lionet::WaitGroup>(1);
       auto ev = std::make_unique<lionet::Event>();
       auto sem = std::make_unique<lionet::Semaphore>(0);
       lionet::WaitGroup* w = wg.get();
       lionet::Event* e = ev.get();
       lionet::Semaphore* m = sem.get();
       lionet::go([w, e, m] {
         w->done();
         e->set();
         m->release();
       });
       if (r % 2) {
         wg->wait();
         ev->wait();
         sem->acquire();
       } else {
         EXPECT_TRUE(wg->wait_for(30s));
         EXPECT_TRUE(ev->wait_for(30s));
         EXPECT_TRUE(sem->try_acquire_for(30s));
       }
       wg.reset();
       ev.reset();
       sem.reset();
     }
   }).join();
}

TEST(Lifetime, CondVarDestroyedAfterTimedWaitIsNotified) {
  lionet::Scheduler s({.threads = 2});
  s.spawn([] {
     for (int r = 0; r < kRounds; ++r) {
       auto mu = std::make_unique<lionet::Mutex>();
       auto cv = std::make_unique<lionet::CondVar>();
       bool ready = false;
       lionet::Mutex* m = mu.get();
       lionet::CondVar* c = cv.get();
       lionet::go([m, c, &ready] {
         {
           std::lock_guard<lionet::Mutex> g(*m);
           ready = true;
         }
         c->notify_one();  // may still be returning when the waiter destroys *c
       });
       {
         std::unique_lock<lionet::Mutex> lk(*mu);
         EXPECT_TRUE(cv->wait_for(lk, 30s, [&] { return ready; }));
       }
       cv.reset();
       // The notifier fiber holds no reference to *m after its lock_guard; but it may still
       // be inside notify_one() on *c (destroyed above): TSan/ASan would flag that.
       mu.reset();
     }
   }).join();
}
}  // namespace
