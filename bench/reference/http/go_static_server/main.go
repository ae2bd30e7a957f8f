// go_static_server - Go's net/http in LioNet's static-file comparisons.
//
// What it stands for: the standard library's HTTP/1.1 server serving files in the three ways
// LioNet's StaticFiles can, one URL prefix each, so every LioNet mode has a Go counterpart:
//
//	/mem/NAME       MEMORY:   the file is read once, kept in memory, sent with Content-Length
//	/chunk/NAME     CHUNK:    read from the file 64 KiB at a time and written as it comes, no
//	                          Content-Length, so net/http answers with chunked encoding
//	/sendfile/NAME  SENDFILE: http.ServeContent on the *os.File; net/http copies it to the
//	                          socket with sendfile(2)
//
// NAME is a path below ROOT; paths that climb out of ROOT are 404. Nothing is tuned: default
// http.Server, keep-alive on. Run it with GOMAXPROCS=1 and taskset for a one-CPU comparison.
//
// Usage: go_static_server 127.0.0.1:PORT ROOT   (defaults 127.0.0.1:18090 and ./www)
package main

import (
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

type files struct {
	root   string
	memory sync.Map // file name -> []byte, for /mem/
}

// resolve maps the rest of a URL path below a prefix to a file under root.
func (f *files) resolve(r *http.Request, prefix string) (string, bool) {
	rel := strings.TrimPrefix(r.URL.Path, prefix)
	if rel == "" || strings.Contains(rel, "..") {
		return "", false
	}
	return filepath.Join(f.root, filepath.FromSlash(path.Clean("/"+rel))), true
}

func (f *files) fromMemory(w http.ResponseWriter, r *http.Request) {
	name, ok := f.resolve(r, "/mem/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, found := f.memory.Load(name)
	if !found {
		data, err := os.ReadFile(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		body, _ = f.memory.LoadOrStore(name, data)
	}
	data := body.([]byte)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

func (f *files) inChunks(w http.ResponseWriter, r *http.Request) {
	name, ok := f.resolve(r, "/chunk/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	file, err := os.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer file.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	piece := make([]byte, 64*1024)
	for {
		n, err := file.Read(piece)
		if n > 0 {
			if _, werr := w.Write(piece[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *files) bySendfile(w http.ResponseWriter, r *http.Request) {
	name, ok := f.resolve(r, "/sendfile/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	file, err := os.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || info.IsDir() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", info.ModTime(), file)
}

func main() {
	addr, root := "127.0.0.1:18090", "www"
	if len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: go_static_server 127.0.0.1:PORT ROOT")
		os.Exit(2)
	}
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if len(os.Args) > 2 {
		root = os.Args[2]
	}
	f := &files{root: root}
	mux := http.NewServeMux()
	mux.HandleFunc("/mem/", f.fromMemory)
	mux.HandleFunc("/chunk/", f.inChunks)
	mux.HandleFunc("/sendfile/", f.bySendfile)
	fmt.Fprintf(os.Stderr, "go_static_server: %s, root %s\n", addr, root)
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, "go_static_server:", err)
		os.Exit(1)
	}
}
