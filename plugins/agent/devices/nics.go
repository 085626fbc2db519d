package devices

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/topology"
)

// RDMACM is the RDMA connection manager's device node, shared by every
// RDMA NIC; it is given with a NIC's own nodes where it exists.
const RDMACM = "/dev/infiniband/rdma_cm"

// ErrNICMissing is the category of RDMA device nodes that do not exist
// (or are not character devices) where the NICs say they should.
var ErrNICMissing = errors.New("RDMA device node missing")

// NICs maps a machine's RDMA NICs (topology devices of class "rdma") to
// their device nodes: each NIC's /dev/infiniband/uverbsN. It is immutable
// and safe for concurrent use; the nodes themselves are looked up on every
// call.
type NICs struct {
	root  string
	nodes map[string][]string // NIC ID -> container paths of its own nodes
	ids   []string
}

// uverbsName matches the name of a verbs device, as the kernel names them
// under infiniband_verbs/ and /dev/infiniband/.
var uverbsName = regexp.MustCompile(`^uverbs[0-9]{1,6}$`)

// maxSysfsValue is the most NICs reads of one sysfs file (an ibdev name
// is at most 64 bytes).
const maxSysfsValue = 4096

// NewNICs returns the device nodes of machine m's RDMA NICs, looked up
// under devRoot (the host's /dev as the agent sees it). sys is the file
// system holding sys/ (rooted like the --sysfs-root of discovery); for a
// NIC with a bus ID, the entries uverbsN of
// sys/bus/pci/devices/<bus>/infiniband_verbs/ are its verbs devices,
// /dev/infiniband/uverbsN (an entry whose ibdev file names another of the
// PCI device's NICs is that one's). A NIC without a bus ID, or whose PCI
// device has no infiniband_verbs directory, has no node of its own. An
// entry whose name is not uverbsN, or a file that cannot be read, is an
// error naming it. sys may be nil: then no NIC has a node of its own.
func NewNICs(m *topology.Machine, devRoot string, sys fs.FS) (*NICs, error) {
	n := &NICs{root: devRoot, nodes: map[string][]string{}}
	byBus := map[string][]string{}
	for _, d := range m.Devices() {
		if d.Class != "rdma" {
			continue
		}
		n.ids = append(n.ids, d.ID)
		if d.BusID != "" {
			byBus[d.BusID] = append(byBus[d.BusID], d.ID)
		}
	}
	if sys == nil {
		return n, nil
	}
	for _, bus := range slices.Sorted(maps.Keys(byBus)) {
		dir := path.Join("sys/bus/pci/devices", bus, "infiniband_verbs")
		entries, err := fs.ReadDir(sys, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("RDMA device %s: %w", byBus[bus][0], err)
		}
		for _, e := range entries {
			p := dir + "/" + e.Name()
			if !uverbsName.MatchString(e.Name()) {
				return nil, fmt.Errorf("RDMA device %s: %s: not a verbs device name (uverbsN)", byBus[bus][0], p)
			}
			owners := byBus[bus]
			ibdev, err := readValue(sys, p+"/ibdev")
			if err != nil {
				return nil, fmt.Errorf("RDMA device %s: %w", byBus[bus][0], err)
			}
			if ibdev != "" && slices.Contains(owners, ibdev) {
				owners = []string{ibdev}
			}
			for _, id := range owners {
				n.nodes[id] = append(n.nodes[id], "/dev/infiniband/"+e.Name())
			}
		}
	}
	return n, nil
}

// readValue returns the trimmed content of the regular file p of sys ("" when
// it does not exist).
func readValue(sys fs.FS, p string) (string, error) {
	f, err := sys.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return "", err
	} else if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSysfsValue))
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return strings.TrimSpace(strings.TrimRight(string(b), "\x00")), nil
}

// IDs returns the NICs' IDs, ascending.
func (n *NICs) IDs() []string { return slices.Clone(n.ids) }

// Paths returns the container paths of NIC id's own device nodes
// (/dev/infiniband/uverbsN, ascending), and false for a NIC the machine
// does not have.
func (n *NICs) Paths(id string) ([]string, bool) {
	if !slices.Contains(n.ids, id) {
		return nil, false
	}
	return slices.Clone(n.nodes[id]), true
}

// Present reports whether every device node of NIC id exists as a
// character device (true for a NIC without nodes of its own, false for a
// NIC the machine does not have).
func (n *NICs) Present(id string) bool {
	paths, ok := n.Paths(id)
	if !ok {
		return false
	}
	for _, p := range paths {
		if _, err := statNode(n.root, p); err != nil {
			return false
		}
	}
	return true
}

// For returns the device nodes a container with NICs ids needs: each NIC's
// own nodes, in the order given, then /dev/infiniband/rdma_cm where it
// exists (once; none for no NICs). A NIC the machine does not have, or
// one of whose nodes is missing, is an error naming it (wrapping
// [ErrNICMissing] for the latter).
func (n *NICs) For(ids []string) ([]Node, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []Node
	for _, id := range ids {
		paths, ok := n.Paths(id)
		if !ok {
			return nil, fmt.Errorf("RDMA device %s is not an RDMA device of this machine", id)
		}
		for _, p := range paths {
			node, err := statNode(n.root, p)
			if err != nil {
				return nil, fmt.Errorf("RDMA device %s: %w", id, err)
			}
			out = append(out, node)
		}
	}
	if node, err := statNode(n.root, RDMACM); err == nil {
		out = append(out, node)
	}
	return out, nil
}
