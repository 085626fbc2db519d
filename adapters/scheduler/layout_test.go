package scheduler

import (
	"testing"
	"unsafe"
)

// TestNodeInfoLayout: the fields of a node that a verdict reads lie in its
// first 128 bytes, and the node takes 256 bytes (a size class whose objects
// start on a cache line): change nodeInfoPad when a field is added.
func TestNodeInfoLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is laid out for 64-bit machines")
	}
	var n nodeInfo
	if size := unsafe.Sizeof(n); size != 256 {
		t.Fatalf("nodeInfo takes %d bytes, not 256: change nodeInfoPad by %d", size, 256-int(size))
	}
	end := unsafe.Offsetof(n.totals) + unsafe.Sizeof(n.totals)
	for name, off := range map[string]uintptr{"group": unsafe.Offsetof(n.group), "gone": unsafe.Offsetof(n.gone), "mu": unsafe.Offsetof(n.mu), "removed": unsafe.Offsetof(n.removed),
		"kpol": unsafe.Offsetof(n.kpol), "class": unsafe.Offsetof(n.class), "state": unsafe.Offsetof(n.state), "totals": end - 1} {
		if off >= 128 {
			t.Errorf("nodeInfo.%s is at byte %d, beyond the first 128", name, off)
		}
	}
}
