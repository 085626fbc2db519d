package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"

	"github.com/numaplace/numaplace/topology"
)

// ControlNodes are the NVIDIA driver's control device nodes, by name
// under /dev, in the order they are given to containers.
var ControlNodes = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}

// Node is one device node as a container gets it.
type Node struct {
	// Path is the node's path in the container and on the host, such as
	// "/dev/nvidia0".
	Path string
	// Major and Minor are the device numbers.
	Major, Minor int64
	// Mode is the node's permission bits.
	Mode fs.FileMode
	// UID and GID own the node.
	UID, GID uint32
}

// ErrMissing is the category of device nodes that do not exist (or are not
// character devices) where the GPUs say they should.
var ErrMissing = errors.New("GPU device node missing")

// GPUs maps a machine's GPUs to their device nodes. It is immutable and
// safe for concurrent use; the nodes themselves are looked up on every
// call, so a node that appears or goes is seen at once.
type GPUs struct {
	root   string
	minors map[int]int // GPU ID -> device minor
	ids    []int
}

// New returns the device nodes of machine m's GPUs, looked up under
// devRoot (the host's /dev as the agent sees it: "/dev", or "/host/dev"
// when the host's is mounted there). proc, if not nil, is the file system
// under which proc/driver/nvidia/gpus is read (rooted like the --sysfs-root
// of discovery) for each GPU's device minor; a GPU without a bus ID or
// without a driver file takes its index. A driver file that cannot be read
// is an error.
func New(m *topology.Machine, devRoot string, proc fs.FS) (*GPUs, error) {
	g := &GPUs{root: devRoot, minors: map[int]int{}}
	for _, gpu := range m.GPUs() {
		minor := gpu.ID
		if proc != nil {
			info, ok, err := topology.ReadNVIDIAGPUInfo(proc, gpu.BusID)
			if err != nil {
				return nil, fmt.Errorf("GPU %d: %w", gpu.ID, err)
			}
			if ok && info.Minor >= 0 {
				minor = info.Minor
			}
		}
		g.minors[gpu.ID] = minor
		g.ids = append(g.ids, gpu.ID)
	}
	return g, nil
}

// Path returns the device node path of GPU id in a container,
// "/dev/nvidiaN", and false for a GPU the machine does not have.
func (g *GPUs) Path(id int) (string, bool) {
	minor, ok := g.minors[id]
	if !ok {
		return "", false
	}
	return "/dev/nvidia" + strconv.Itoa(minor), true
}

// Minor returns the device minor of GPU id (N of /dev/nvidiaN), and false
// for a GPU the machine does not have.
func (g *GPUs) Minor(id int) (int, bool) {
	m, ok := g.minors[id]
	return m, ok
}

// Paths returns the device node paths of every GPU of the machine, in
// ascending GPU ID.
func (g *GPUs) Paths() []string {
	out := make([]string, 0, len(g.ids))
	for _, id := range g.ids {
		p, _ := g.Path(id)
		out = append(out, p)
	}
	return out
}

// Present reports whether GPU id's device node exists as a character
// device.
func (g *GPUs) Present(id int) bool {
	p, ok := g.Path(id)
	if !ok {
		return false
	}
	_, err := g.stat(p)
	return err == nil
}

// For returns the device nodes a container with GPUs ids needs: each GPU's
// node, in the order given, then the control nodes that exist. No GPUs
// give no nodes. A GPU the machine does not have, or whose node is
// missing, is an error naming it (wrapping [ErrMissing] for the latter).
func (g *GPUs) For(ids []int) ([]Node, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []Node
	for _, id := range ids {
		p, ok := g.Path(id)
		if !ok {
			return nil, fmt.Errorf("GPU %d is not a GPU of this machine", id)
		}
		n, err := g.stat(p)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", id, err)
		}
		out = append(out, n)
	}
	for _, name := range ControlNodes {
		if n, err := g.stat("/dev/" + name); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// gpuNode matches the path of a GPU's device node.
var gpuNode = regexp.MustCompile(`^/dev/nvidia[0-9]+$`)

// IsGPUNode reports whether path is the path of a GPU's device node,
// /dev/nvidiaN (not a control node).
func IsGPUNode(path string) bool { return gpuNode.MatchString(path) }

// stat looks the node at container path p ("/dev/...") up under the root.
func (g *GPUs) stat(p string) (Node, error) { return statAs(g.root, p, ErrMissing) }

// statNode looks the RDMA node at container path p up under root.
func statNode(root, p string) (Node, error) { return statAs(root, p, ErrNICMissing) }

// statAs looks the node at container path p ("/dev/...") up under root; a
// missing node is an error wrapping missing.
func statAs(root, p string, missing error) (Node, error) {
	host := filepath.Join(root, p[len("/dev/"):])
	st, err := os.Stat(host)
	if err != nil {
		return Node{}, fmt.Errorf("%w: %s: %w", missing, host, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || st.Mode()&fs.ModeCharDevice == 0 {
		return Node{}, fmt.Errorf("%w: %s is not a character device", missing, host)
	}
	return Node{Path: p, Major: int64(major(sys.Rdev)), Minor: int64(minor(sys.Rdev)),
		Mode: st.Mode().Perm(), UID: sys.Uid, GID: sys.Gid}, nil
}

// major and minor split a Linux device number (glibc's encoding).
func major(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }
func minor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^0xff }
