//go:build !cgo

package benchmarks

import "testing"

// TestPeerGPUAllocator stands for the go-gpuallocator side-by-side tests
// and benchmark (gpuallocator_test.go, gpuallocator_peer_test.go) when the
// module is built without cgo: go-gpuallocator imports go-nvml, whose nvml
// package needs cgo, so those files build only with a C compiler
// (.ci-prepare installs gcc).
func TestPeerGPUAllocator(t *testing.T) {
	t.Skip("the go-gpuallocator comparison needs cgo (go-nvml): install a C compiler (gcc) and build with CGO_ENABLED=1")
}
