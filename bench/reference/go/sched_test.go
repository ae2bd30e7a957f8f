// Go runtime figures beside LioNet's fibers and sync primitives (scripts/bench-sync.sh runs
// BenchmarkUnbufferedChanPingPong; the others are for orientation).
//
// What it stands for: the cost of Go's own scheduler operations on one P, measured by the
// standard testing package; compare with LioNet on one worker.
//
// Usage: cd bench/reference/go && go test -run '^$' -bench . -cpu 1
//
// One op is: CreateComplete - start a goroutine that does nothing (all waited for at the end);
// CreateJoin - start one and wait for it before the next; GoschedPingPong - one Gosched by each
// of two goroutines (two switches on one P); GoschedAlone - a Gosched with nothing else to run;
// UnbufferedChanPingPong - a round trip over two unbuffered channels; MutexUncontended - one
// Lock and Unlock of a sync.Mutex nobody else wants.
package gobench

import (
	"runtime"
	"sync"
	"testing"
)

func BenchmarkGoroutineCreateComplete(b *testing.B) {
	var pending sync.WaitGroup
	pending.Add(b.N)
	finish := func() { pending.Done() }
	for n := 0; n < b.N; n++ {
		go finish()
	}
	pending.Wait()
}

func BenchmarkGoroutineCreateJoin(b *testing.B) {
	exited := make(chan struct{})
	child := func() { exited <- struct{}{} }
	for n := 0; n < b.N; n++ {
		go child()
		<-exited
	}
}

func BenchmarkGoschedPingPong(b *testing.B) {
	var both sync.WaitGroup
	both.Add(2)
	yielder := func(rounds int) {
		defer both.Done()
		for i := 0; i < rounds; i++ {
			runtime.Gosched()
		}
	}
	b.ResetTimer()
	go yielder(b.N)
	go yielder(b.N)
	both.Wait()
}

func BenchmarkGoschedAlone(b *testing.B) {
	for n := 0; n < b.N; n++ {
		runtime.Gosched()
	}
}

func BenchmarkUnbufferedChanPingPong(b *testing.B) {
	request, reply := make(chan int), make(chan int)
	go func() {
		for v := range request {
			reply <- v + 1
		}
		close(reply)
	}()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		request <- n
		if <-reply != n+1 {
			b.Fatal("ping-pong: wrong reply")
		}
	}
	b.StopTimer()
	close(request)
	<-reply // wait until the echoing goroutine is gone
}

func BenchmarkMutexUncontended(b *testing.B) {
	var mu sync.Mutex
	shared := 0
	for n := 0; n < b.N; n++ {
		mu.Lock()
		shared++
		mu.Unlock()
	}
	if shared != b.N {
		b.Fatal("lost updates")
	}
}
