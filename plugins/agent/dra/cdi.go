package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/numaplace/numaplace/plugins/agent/devices"
)

// CDIClass is the class of the claims' CDI specs: their kind is
// "<driver name>/claim", so with the default driver name a device is
// "gpu.numaplace.io/claim=<claim UID>-<device name>".
const CDIClass = "claim"

// EnvVisibleDevices is the environment variable that names a container's
// GPUs for the NVIDIA container stack.
const EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

// EnvRDMADevices names the InfiniBand devices of a claim's NICs in its
// containers, comma-separated (as NCCL_IB_HCA takes them).
const EnvRDMADevices = "NUMAPLACE_RDMA_DEVICES"

// EnvRDMADevicePrefix starts the variable each NIC of a claim sets to its
// InfiniBand device, NUMAPLACE_RDMA_<ibdev in upper case, other
// characters '_'>, such as NUMAPLACE_RDMA_MLX5_0=mlx5_0 (a CDI device must
// edit something even when the NIC has no device node of its own).
const EnvRDMADevicePrefix = "NUMAPLACE_RDMA_"

// cdiStore writes and removes the claims' CDI spec files, one per claim
// UID, in one directory, through the CDI module's cache (which validates
// a spec before it writes it and replaces the file atomically).
type cdiStore struct {
	root, vendor string
	cache        *cdi.Cache
}

// newCDIStore returns the store of the specs of the driver's claims in
// directory root (created when missing).
func newCDIStore(root, driver string) (*cdiStore, error) {
	if err := parser.ValidateVendorName(driver); err != nil {
		return nil, fmt.Errorf("driver name %q cannot be a CDI vendor: %w", driver, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("CDI directory: %w", err)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(root), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI cache of %s: %w", root, err)
	}
	return &cdiStore{root: root, vendor: driver, cache: cache}, nil
}

// kind returns the specs' kind, "<driver>/claim".
func (s *cdiStore) kind() string { return s.vendor + "/" + CDIClass }

// fileName returns the name (without directory) of the spec of claim uid.
func (s *cdiStore) fileName(uid string) string {
	return cdi.GenerateTransientSpecName(s.vendor, CDIClass, uid) + ".json"
}

// Path returns the path of the spec file of claim uid.
func (s *cdiStore) Path(uid string) string { return filepath.Join(s.root, s.fileName(uid)) }

// DeviceID returns the fully qualified CDI device ID of the claim's device
// with the given published name.
func (s *cdiStore) DeviceID(uid, device string) string {
	return parser.QualifiedName(s.vendor, CDIClass, uid+"-"+device)
}

// claimDevice is one device of a claim's spec: its published name, its
// own device nodes and environment.
type claimDevice struct {
	name  string
	nodes []devices.Node
	env   []string
}

// buildSpec returns the CDI spec of claim uid: one CDI device per
// published device with its own device nodes, and, for the whole spec
// (applied once to a container that gets any of the claim's devices), the
// GPUs' NVIDIA_VISIBLE_DEVICES (visible, when the claim has GPUs), the
// NVIDIA control nodes and the RDMA connection manager's node (shared).
func (s *cdiStore) buildSpec(uid string, devs []claimDevice, env []string, shared []devices.Node) (*specs.Spec, error) {
	spec := &specs.Spec{Kind: s.kind()}
	for _, d := range devs {
		name := uid + "-" + d.name
		if err := parser.ValidateDeviceName(name); err != nil {
			return nil, fmt.Errorf("CDI device name %q: %w", name, err)
		}
		spec.Devices = append(spec.Devices, specs.Device{Name: name,
			ContainerEdits: specs.ContainerEdits{DeviceNodes: cdiNodes(d.nodes), Env: d.env}})
	}
	spec.ContainerEdits.Env = env
	spec.ContainerEdits.DeviceNodes = cdiNodes(shared)
	v, err := specs.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	return spec, nil
}

// cdiNodes returns the CDI device nodes of nodes: path, type, numbers,
// mode and owner given, so the runtime creates them as they are on the
// host without looking the host path up.
func cdiNodes(nodes []devices.Node) []*specs.DeviceNode {
	var out []*specs.DeviceNode
	for _, n := range nodes {
		mode, uid, gid := n.Mode, n.UID, n.GID
		out = append(out, &specs.DeviceNode{Path: n.Path, Type: "c", Major: n.Major, Minor: n.Minor,
			FileMode: &mode, UID: &uid, GID: &gid})
	}
	return out
}

// write validates spec and writes it as claim uid's spec file, atomically
// (a temporary file renamed over it).
func (s *cdiStore) write(uid string, spec *specs.Spec) error {
	if err := s.cache.WriteSpec(spec, s.fileName(uid)); err != nil {
		return fmt.Errorf("write CDI spec %s: %w", s.Path(uid), err)
	}
	return nil
}

// remove removes claim uid's spec file; a missing file is no error.
func (s *cdiStore) remove(uid string) error {
	if err := s.cache.RemoveSpec(s.fileName(uid)); err != nil {
		return fmt.Errorf("remove CDI spec %s: %w", s.Path(uid), err)
	}
	return nil
}

// claimUIDs returns the UIDs of the claims whose spec files are in the
// directory, ascending.
func (s *cdiStore) claimUIDs() ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := cdi.GenerateTransientSpecName(s.vendor, CDIClass, "")
	var out []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if uid, ok := strings.CutSuffix(rest, ".json"); ok && uid != "" {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out, nil
}

// rdmaEnv returns the variable of a NIC (see EnvRDMADevicePrefix).
func rdmaEnv(ibdev string) string {
	b := []byte(ibdev)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			b[i] = '_'
		}
	}
	return EnvRDMADevicePrefix + string(b) + "=" + ibdev
}

// visibleDevices returns NVIDIA_VISIBLE_DEVICES for GPUs given as (index,
// UUID) pairs in ascending index: the UUIDs, each GPU without one by its
// index, comma-separated.
func visibleDevices(ids []int, uuid func(int) string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		if u := uuid(id); u != "" {
			parts[i] = u
		} else {
			parts[i] = strconv.Itoa(id)
		}
	}
	return strings.Join(parts, ",")
}
