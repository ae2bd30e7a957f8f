// bench/reference/go/contention: the Go twin of bench/contention.cc, the same three patterns
// with goroutines (GOMAXPROCS = -threads, default 2), timed the same way: from the first
// spawn to the last join, one operation being one value through the channel or one
// Lock+Unlock.
//
//	fanin   1,000 goroutines x 1,000 sends into one buffered channel (capacity 1,024), one receiver
//	m2m     100 senders and 100 receivers on one unbuffered channel, 10,000 each
//	mutex   1,000 goroutines x 1,000 Lock/Unlock of one sync.Mutex around a counter
//
// Usage: go run ./contention [-threads T] [-patterns fanin,m2m,mutex] [-scale K]
// Last line: RESULT workers=T fanin_ns=... m2m_ns=... mutex_ns=... errors=N
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var scale = 1
var errors = 0

func nsPerOp(t0 time.Time, ops int) float64 {
	return float64(time.Since(t0).Nanoseconds()) / float64(ops)
}

func fanin() float64 {
	senders, each := 1000, 1000/scale
	total := senders * each
	ch := make(chan int, 1024)
	var wg sync.WaitGroup
	got, sum := 0, 0
	t0 := time.Now()
	wg.Add(senders + 1)
	for s := 0; s < senders; s++ {
		go func() {
			for i := 0; i < each; i++ {
				ch <- 1
			}
			wg.Done()
		}()
	}
	go func() {
		for i := 0; i < total; i++ {
			sum += <-ch
			got++
		}
		wg.Done()
	}()
	wg.Wait()
	ns := nsPerOp(t0, total)
	if got != total || sum != total {
		fmt.Fprintf(os.Stderr, "contention: fanin received %d values (sum %d) of %d\n", got, sum, total)
		errors++
	}
	return ns
}

func m2m() float64 {
	pairs, each := 100, 10000/scale
	total := pairs * each
	ch := make(chan int)
	var wg sync.WaitGroup
	var got atomic.Int64
	t0 := time.Now()
	wg.Add(2 * pairs)
	for p := 0; p < pairs; p++ {
		go func() {
			for i := 0; i < each; i++ {
				ch <- 1
			}
			wg.Done()
		}()
		go func() {
			mine := int64(0)
			for i := 0; i < each; i++ {
				<-ch
				mine++
			}
			got.Add(mine)
			wg.Done()
		}()
	}
	wg.Wait()
	ns := nsPerOp(t0, total)
	if got.Load() != int64(total) {
		fmt.Fprintf(os.Stderr, "contention: m2m received %d values of %d\n", got.Load(), total)
		errors++
	}
	return ns
}

func mutex() float64 {
	fibers, each := 1000, 1000/scale
	total := fibers * each
	var mu sync.Mutex
	var wg sync.WaitGroup
	counter := 0
	t0 := time.Now()
	wg.Add(fibers)
	for f := 0; f < fibers; f++ {
		go func() {
			for i := 0; i < each; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	ns := nsPerOp(t0, total)
	if counter != total {
		fmt.Fprintf(os.Stderr, "contention: mutex counted %d of %d\n", counter, total)
		errors++
	}
	return ns
}

func main() {
	threads := flag.Int("threads", 2, "GOMAXPROCS")
	patterns := flag.String("patterns", "fanin,m2m,mutex", "patterns to run")
	flag.IntVar(&scale, "scale", 1, "divide every count by this")
	flag.Parse()
	if *threads <= 0 || scale <= 0 || scale > 1000 {
		fmt.Fprintln(os.Stderr, "contention: -threads must be positive, -scale 1..1000")
		fmt.Println("RESULT errors=1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*threads)
	want := "," + *patterns + ","
	type pattern struct {
		name string
		run  func() float64
	}
	result := fmt.Sprintf("RESULT workers=%d", *threads)
	for _, p := range []pattern{{"fanin", fanin}, {"m2m", m2m}, {"mutex", mutex}} {
		if !strings.Contains(want, ","+p.name+",") {
			continue
		}
		ns := p.run()
		fmt.Printf("%-6s %8.1f ns/op  (GOMAXPROCS %d)\n", p.name, ns, *threads)
		result += fmt.Sprintf(" %s_ns=%.1f", p.name, ns)
	}
	fmt.Printf("%s errors=%d\n", result, errors)
	if errors != 0 {
		os.Exit(1)
	}
}
