// bench/go/many_goroutines.go: the Go peer of bench/many_fibers.cc, measured the same way.
//
// N goroutines each park on one shared channel (closed to release them all), GOMAXPROCS=2 by
// default. Measured once all N have started and parked: RSS above the start, kernel mappings,
// time to spawn; then the channel is closed and a WaitGroup joins them.
// Usage: go run bench/go/many_goroutines.go [N=1000000]
// Last line: RESULT fibers=N completed=N rss_bytes_per_fiber=... maps=... spawn_seconds=...
//            parked_seconds=... release_seconds=... errors=N
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func statusKiB(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), key) {
			v, _ := strconv.ParseInt(strings.Fields(s.Text()[len(key):])[0], 10, 64)
			return v
		}
	}
	return -1
}

func mapCount() int {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		n++
	}
	return n
}

func main() {
	n := 1000000
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v <= 0 {
			fmt.Fprintln(os.Stderr, "many_goroutines: N must be a positive integer")
			fmt.Println("RESULT errors=1")
			os.Exit(2)
		}
		n = v
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
	runtime.GC()
	rss0 := statusKiB("VmRSS:")
	release := make(chan struct{})
	var started, completed atomic.Int64
	var done sync.WaitGroup
	done.Add(n)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			started.Add(1)
			<-release
			completed.Add(1)
			done.Done()
		}()
	}
	spawn := time.Since(t0).Seconds()
	deadline := time.Now().Add(300 * time.Second)
	for started.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Started is counted just before the receive parks: give the last ones a moment to park.
	time.Sleep(5 * time.Millisecond)
	parked := time.Since(t0).Seconds()
	rss1 := statusKiB("VmRSS:")
	maps := mapCount()
	t1 := time.Now()
	close(release)
	done.Wait()
	rel := time.Since(t1).Seconds()
	perFiber := float64(rss1-rss0) * 1024 / float64(n)
	fmt.Printf("goroutines      %d on GOMAXPROCS=%d (%s)\n", n, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("spawn           %.3f s (go statements), %.3f s until all parked\n", spawn, parked)
	fmt.Printf("rss             +%.1f MiB, %.0f bytes per parked goroutine\n", float64(rss1-rss0)/1024, perFiber)
	fmt.Printf("maps            %d\n", maps)
	fmt.Printf("release + join  %.3f s\n", rel)
	errors := int64(n) - completed.Load()
	fmt.Printf("RESULT fibers=%d completed=%d rss_bytes_per_fiber=%.0f maps=%d spawn_seconds=%.3f parked_seconds=%.3f release_seconds=%.3f errors=%d\n",
		n, completed.Load(), perFiber, maps, spawn, parked, rel, errors)
}
