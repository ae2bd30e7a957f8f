// go_websocket_server - gorilla/websocket in LioNet's WebSocket comparisons
// (scripts/bench-websocket.sh, beside bench/websocket_echo_server.cc).
//
// What it stands for: the usual Go way to write a WebSocket server: net/http with
// github.com/gorilla/websocket v1.5.3 (pinned in go.mod and go.sum), one goroutine per
// connection reading with ReadMessage and answering with WriteMessage, as gorilla's own echo
// example does. Nothing is tuned: the Upgrader's default buffers, compression off (gorilla's
// default), no read limit, no keepalive pings. GOMAXPROCS follows the CPU affinity (the script
// also sets GOMAXPROCS=1).
//
// Endpoints (the same as bench/websocket_echo_server):
//
//	GET /echo       every message is sent back, same type, same bytes.
//	GET /broadcast  the connection joins one room; every message received on any connection of
//	                the room is sent to every connection of the room (the sender's included),
//	                one WriteMessage per connection in a loop, under the room's lock (which also
//	                keeps gorilla's one-writer-per-connection rule).
//
// Usage: go_websocket_server 127.0.0.1:PORT   (runs until SIGINT/SIGTERM; then prints
// `RESULT conns=N messages=N broadcasts=N errors=N` as its last line, errors = failed writes
// and upgrades).
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gorilla/websocket"
)

var (
	upgrader = websocket.Upgrader{
		CheckOrigin: func(*http.Request) bool { return true }, // the bench client sends no Origin
	}
	conns, messages, broadcasts, errors atomic.Int64

	roomMu sync.Mutex
	room   = map[*websocket.Conn]struct{}{}
)

func upgrade(w http.ResponseWriter, r *http.Request) *websocket.Conn {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		errors.Add(1) // Upgrade has answered the client already
		return nil
	}
	conns.Add(1)
	return c
}

func echo(w http.ResponseWriter, r *http.Request) {
	c := upgrade(w, r)
	if c == nil {
		return
	}
	defer c.Close()
	for {
		mt, msg, err := c.ReadMessage()
		if err != nil {
			return // the peer closed (gorilla answers its close frame) or went away
		}
		messages.Add(1)
		if err := c.WriteMessage(mt, msg); err != nil {
			errors.Add(1)
			return
		}
	}
}

func broadcast(w http.ResponseWriter, r *http.Request) {
	c := upgrade(w, r)
	if c == nil {
		return
	}
	roomMu.Lock()
	room[c] = struct{}{}
	roomMu.Unlock()
	defer func() {
		roomMu.Lock()
		delete(room, c)
		roomMu.Unlock()
		c.Close()
	}()
	for {
		mt, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		messages.Add(1)
		broadcasts.Add(1)
		roomMu.Lock()
		for peer := range room {
			if err := peer.WriteMessage(mt, msg); err != nil {
				errors.Add(1)
			}
		}
		roomMu.Unlock()
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go_websocket_server 127.0.0.1:PORT")
		os.Exit(2)
	}
	// Go 1.19 and later raise the soft RLIMIT_NOFILE to the hard limit themselves; said here so
	// that 10,000 connections do not depend on the toolchain version.
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	http.HandleFunc("/echo", echo)
	http.HandleFunc("/broadcast", broadcast)
	srv := &http.Server{Addr: os.Args[1]}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	fmt.Fprintf(os.Stderr, "go_websocket_server: listening on %s\n", os.Args[1])
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	srv.Close() // hijacked connections are not the server's any more: they end with the process
	fmt.Printf("RESULT conns=%d messages=%d broadcasts=%d errors=%d\n",
		conns.Load(), messages.Load(), broadcasts.Load(), errors.Load())
}
