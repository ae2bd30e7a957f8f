// go_echo_server - Go's standard net package in LioNet's echo comparisons.
//
// What it stands for: the usual Go way to write a TCP server (one goroutine per connection,
// blocking Read/Write on net.Conn, the runtime's netpoller underneath), as the "goroutines"
// column beside LioNet's fibers. Nothing is tuned: a 64 KiB buffer per connection, Go's default
// TCP_NODELAY. GOMAXPROCS follows the CPU affinity, so `taskset -c 0` gives it one CPU.
//
// Usage: go_echo_server 127.0.0.1:PORT   (default 127.0.0.1:9001; runs until killed)
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// serve echoes everything it reads until the peer goes away.
func serve(conn net.Conn) {
	defer conn.Close()
	buf := make([]byte, 64*1024)
	for {
		n, rerr := conn.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

func main() {
	addr := "127.0.0.1:9001"
	switch len(os.Args) {
	case 1:
	case 2:
		addr = os.Args[1]
	default:
		fmt.Fprintln(os.Stderr, "usage: go_echo_server 127.0.0.1:PORT")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_echo_server:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "go_echo_server: listening on", addr)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // e.g. out of descriptors: back off briefly
			continue
		}
		go serve(conn)
	}
}
