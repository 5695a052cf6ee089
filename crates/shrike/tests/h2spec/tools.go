//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance suite the server's conformance test runs
// (crates/shrike/tests/integration/h2spec.rs builds it from this module).
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
