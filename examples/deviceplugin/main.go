// Command deviceplugin shows numaplace's answer to the kubelet device
// plugin API's GetPreferredAllocation (adapters/kubelet) on a DGX A100:
// which GPUs a pod asking for 1, 2, 4 or 8 should get, with every GPU free
// and with some taken by other pods, and why.
//
//	go run ./examples/deviceplugin
//
// The DGX A100 has 8 GPUs in pairs under 4 PCIe switches, one pair per NUMA
// node (nodes 3 and 1 on socket 0, 7 and 5 on socket 1), and NVLink between
// every pair of GPUs (12 links each, through the NVSwitches). The choice
// prefers one NUMA node, then the nearest nodes (one socket), then one PCIe
// switch, then NVLink links, then the fit that keeps free pairs whole.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/topology"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// scenario is one question the kubelet asks.
type scenario struct {
	title string
	taken []int    // GPUs other pods hold
	must  []string // GPUs the kubelet has already chosen
	sizes []int
}

func run(w io.Writer) error {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		return err
	}
	p := kubelet.NewPreferredAllocator(m)
	fmt.Fprintf(w, "%s: %d GPUs\n", m.Name(), m.NumGPUs())
	for _, g := range m.GPUs() {
		fmt.Fprintf(w, "  GPU %d: NUMA node %d, PCIe switch %s\n", g.ID, g.NUMANode, g.PCIeSwitch)
	}
	scenarios := []scenario{
		{title: "every GPU free", sizes: []int{1, 2, 4, 8}},
		{title: "GPUs 0 and 5 taken by other pods", taken: []int{0, 5}, sizes: []int{1, 2, 4, 8}},
		{title: "GPUs 0 and 5 taken, the kubelet must include GPU 6", taken: []int{0, 5}, must: []string{"6"}, sizes: []int{2, 4}},
	}
	for _, sc := range scenarios {
		var available []string
		for _, g := range m.GPUs() {
			if !slices.Contains(sc.taken, g.ID) {
				available = append(available, strconv.Itoa(g.ID))
			}
		}
		fmt.Fprintf(w, "\n== %s: available %v\n", sc.title, available)
		for _, size := range sc.sizes {
			pref, err := p.Prefer(available, sc.must, size)
			if err != nil {
				fmt.Fprintf(w, "size %d: refused: %v\n", size, err)
				continue
			}
			fmt.Fprintf(w, "size %d: %v\n", size, pref.Devices)
			fmt.Fprintf(w, "  why: %s\n", why(m, pref))
			fmt.Fprintf(w, "  left free: %s\n", leftFree(m, available, pref.GPUs))
		}
	}
	return nil
}

// why explains a preference in words.
func why(m *topology.Machine, pref kubelet.Preference) string {
	var parts []string
	mask, _ := m.MaskOf(pref.NUMANodes...)
	switch n := len(pref.NUMANodes); {
	case n == 1:
		parts = append(parts, fmt.Sprintf("one NUMA node (%d)", pref.NUMANodes[0]))
	case m.SetsCrossed(mask) == 1:
		parts = append(parts, fmt.Sprintf("%d NUMA nodes %v, the fewest that hold them, on one socket", n, pref.NUMANodes))
	default:
		parts = append(parts, fmt.Sprintf("%d NUMA nodes %v, the fewest that hold them, on %d sockets", n, pref.NUMANodes, m.SetsCrossed(mask)))
	}
	if pref.Switches == 1 {
		parts = append(parts, "one PCIe switch")
	} else {
		parts = append(parts, fmt.Sprintf("%d PCIe switches", pref.Switches))
	}
	if pref.NVLinks > 0 {
		parts = append(parts, fmt.Sprintf("%d NVLink links among them", pref.NVLinks))
	}
	return strings.Join(parts, ", ")
}

// leftFree lists the GPUs still free after the choice, by PCIe switch, so
// that the best fit shows: whole pairs stay whole when they can.
func leftFree(m *topology.Machine, available []string, chosen []int) string {
	bySwitch := map[string][]int{}
	var order []string
	for _, s := range available {
		id, _ := strconv.Atoi(s)
		if slices.Contains(chosen, id) {
			continue
		}
		g, _ := m.GPU(id)
		if _, ok := bySwitch[g.PCIeSwitch]; !ok {
			order = append(order, g.PCIeSwitch)
		}
		bySwitch[g.PCIeSwitch] = append(bySwitch[g.PCIeSwitch], id)
	}
	if len(order) == 0 {
		return "none"
	}
	parts := make([]string, len(order))
	for i, sw := range order {
		parts[i] = fmt.Sprintf("%s %v", sw, bySwitch[sw])
	}
	return strings.Join(parts, ", ")
}
