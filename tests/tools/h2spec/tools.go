//go:build tools

// Package tools pins h2spec (the HTTP/2 conformance tester the http2 tests run) and versions
// of its dependencies that build with Debian 12's Go 1.19: `go install ...h2spec@latest`
// resolves dependencies that need a newer Go. scripts/install-deps.sh builds it from here:
//
//	go build -o /usr/local/bin/h2spec github.com/summerwind/h2spec/cmd/h2spec
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
