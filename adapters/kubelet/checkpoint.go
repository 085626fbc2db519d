package kubelet

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/readfile"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// CheckpointVersion is the checkpoint format this package writes and reads.
//
// The file is JSON:
//
//	{
//	  "version": 2,
//	  "checksum": "sha256:<hex of the bytes of data, exactly as written>",
//	  "data": {
//	    "machine": "dgx-a100",
//	    "fingerprint": "<hex: the machine's NUMA nodes, CPUs, GPUs and devices>",
//	    "pods": [
//	      {"pod": "default/a", "uid": "...", "source": "decision",
//	       "allocation": {"policy": "SingleNUMANode", "exclusive": "Required",
//	         "cpus": "48-55,176-183", "gpus": [0, 1], "devices": {"rdma": ["mlx5_0"]},
//	         "memoryMiB": {"3": 1024}, "numaNodes": [3]}},
//	      {"pod": "default/web", "source": "shared"},
//	      {"pod": "default/plain", "source": "shared", "kubeletGPUs": {"main": [3]}},
//	      {"pod": "default/ack", "source": "local", "allocation": {...},
//	       "claimGPUs": [2, 3], "claims": ["default/train-gpus"]}
//	    ],
//	    "claims": [
//	      {"uid": "9f3c...", "namespace": "default", "name": "train-gpus",
//	       "pods": [{"name": "train", "uid": "..."}], "gpus": [2, 3],
//	       "devices": {"rdma": ["mlx5_2"]}}
//	    ],
//	    "unhealthy": {"gpu": ["5"]}
//	  }
//	}
//
// Claims (optional, ordered by namespace/name then UID) are the
// ResourceClaims whose devices the DRA driver holds ([Node.HoldClaim]), with
// the pods they are reserved for; version 2 added them, and a version-1
// file (the same without claims) is read as well and rewritten as version
// 2 at the next change.
// Pods are ordered by key; kubeletGPUs (optional, shared-pool pods only)
// are the GPUs the kubelet gave a pod's containers outside numaplace's
// decisions ([Node.SetKubeletGPUs]); claimGPUs and claims (optional,
// together, pods with exclusive resources only: placed by the node or by a
// decision) are the GPUs of a pod's ResourceClaims that serve its GPU
// request and the claims holding them (see [Node.Admit]);
// memory is keyed by NUMA node ID; numaNodes is the
// span, checked against the one the restored allocation has. The file is
// read strictly (internal/strictjson: unknown, miscased and repeated keys
// and invalid UTF-8 refused; memoryMiB keys written canonically, "3" and
// not "03" or "+3"), and only when it is a regular file of at most
// [MaxCheckpointBytes].
const CheckpointVersion = 2

// oldestCheckpointVersion is the oldest format version this package reads.
const oldestCheckpointVersion = 1

// MaxCheckpointBytes is the largest checkpoint file [Open] reads (64 MiB,
// far above what a machine at the topology package's caps writes); a longer
// file, or one that is not a regular file (a FIFO, a link to /dev/zero), is
// refused with a *[CheckpointError], never read without end.
const MaxCheckpointBytes = 64 << 20

// ErrCheckpoint is the category of checkpoint files that cannot be used
// (and of failures to write one).
var ErrCheckpoint = errors.New("unusable checkpoint")

// CheckpointError names the checkpoint file and what is wrong with it. It
// unwraps to [ErrCheckpoint] and to the cause (such as an
// *allocator.RestoreError). A node never starts from, drops or overwrites
// a file it refused; with NodeOptions.SetAsideUnusableCheckpoint it renames
// one whose content is unusable aside ([Node.SetAside]) and starts empty.
type CheckpointError struct {
	// Path is the checkpoint file.
	Path string
	// Problem says what is wrong, such as "checksum mismatch".
	Problem string
	// Err is the underlying error, or nil.
	Err error
	// unusable says that the file was read and is not a usable checkpoint
	// (its content, or its size), rather than a file that cannot be read:
	// such a file can be set aside (NodeOptions.SetAsideUnusableCheckpoint).
	unusable bool
}

// Error implements error.
func (e *CheckpointError) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%s %s: %s", ErrCheckpoint, e.Path, e.Problem)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns [ErrCheckpoint] and the cause.
func (e *CheckpointError) Unwrap() []error {
	if e == nil {
		return nil
	}
	if e.Err != nil {
		return []error{ErrCheckpoint, e.Err}
	}
	return []error{ErrCheckpoint}
}

type checkpointFile struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Data     json.RawMessage `json:"data"`
}

type checkpointData struct {
	Machine     string              `json:"machine"`
	Fingerprint string              `json:"fingerprint"`
	Pods        []checkpointPod     `json:"pods"`
	Claims      []checkpointClaim   `json:"claims,omitempty"`
	Unhealthy   map[string][]string `json:"unhealthy,omitempty"`
}

// checkpointClaim is one ClaimHold in the checkpoint.
type checkpointClaim struct {
	UID       string              `json:"uid"`
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Pods      []checkpointPodRef  `json:"pods,omitempty"`
	GPUs      []int               `json:"gpus,omitempty"`
	Devices   map[string][]string `json:"devices,omitempty"`
}

// checkpointPodRef is one ClaimConsumer in the checkpoint.
type checkpointPodRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

type checkpointPod struct {
	Pod        string           `json:"pod"`
	UID        string           `json:"uid,omitempty"`
	Source     Source           `json:"source"`
	Allocation *checkpointAlloc `json:"allocation,omitempty"`
	// KubeletGPUs are a shared-pool pod's GPUs that the kubelet gave its
	// containers, by container name.
	KubeletGPUs map[string][]int `json:"kubeletGPUs,omitempty"`
	// ClaimGPUs are, for a pod the node placed with the GPUs of its
	// ResourceClaims, those GPUs, and Claims the claims' namespace/names.
	ClaimGPUs []int    `json:"claimGPUs,omitempty"`
	Claims    []string `json:"claims,omitempty"`
}

type checkpointAlloc struct {
	Policy    policy.Policy       `json:"policy"`
	Exclusive policy.Exclusivity  `json:"exclusive"`
	FullPCPUs bool                `json:"fullPCPUs,omitempty"`
	CPUs      numa.CPUSet         `json:"cpus"`
	GPUs      []int               `json:"gpus"`
	Devices   map[string][]string `json:"devices,omitempty"`
	MemoryMiB map[string]int64    `json:"memoryMiB,omitempty"`
	NUMANodes []numa.NodeID       `json:"numaNodes"`
}

// fingerprint summarises what allocations refer to on machine m: its NUMA
// node IDs with their CPUs, its GPUs with their nodes and its devices with
// their classes and nodes (not names, memory, distances, UUIDs or reserved
// CPUs, which a restore checks or does not depend on).
func fingerprint(m *topology.Machine) string {
	return fingerprintOf(m, func(topology.Device) bool { return true })
}

// fingerprintOf is fingerprint counting only the devices keep accepts.
func fingerprintOf(m *topology.Machine, keep func(topology.Device) bool) string {
	h := sha256.New()
	for i := range m.NumNodes() {
		fmt.Fprintf(h, "node %d cpus %s\n", m.NodeID(i), m.NodeCPUs(i))
	}
	for _, g := range m.GPUs() {
		fmt.Fprintf(h, "gpu %d node %d\n", g.ID, g.NUMANode)
	}
	for _, d := range m.Devices() {
		if keep(d) {
			fmt.Fprintf(h, "device %s/%s node %d\n", d.Class, d.ID, d.NUMANode)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// fingerprintBeforeRDMA is the fingerprint machine m had before discovery
// found RDMA NICs (checkpoint version 1 was written by builds whose sysfs
// discovery found no devices but GPUs): m without its "rdma" devices.
// A version-1 file with this fingerprint was written for this machine;
// it cannot hold an RDMA NIC, since that build knew none.
func fingerprintBeforeRDMA(m *topology.Machine) string {
	return fingerprintOf(m, func(d topology.Device) bool { return d.Class != "rdma" })
}

// encodeCheckpoint returns the checkpoint file of the given pods, claims
// (by UID) and state.
func encodeCheckpoint(m *topology.Machine, pods map[string]podRecord, claims map[string]ClaimHold, snap allocator.Snapshot) ([]byte, error) {
	allocs := make(map[string]*allocator.Allocation, len(snap.Allocations))
	for i := range snap.Allocations {
		allocs[snap.Allocations[i].ID] = &snap.Allocations[i]
	}
	var cs []checkpointClaim
	for _, c := range claims {
		if _, ok := allocs[claimID(c.UID)]; !ok {
			return nil, fmt.Errorf("claim %s (UID %s) has no allocation in the state", c.Key(), c.UID)
		}
		delete(allocs, claimID(c.UID))
		cc := checkpointClaim{UID: c.UID, Namespace: c.Namespace, Name: c.Name, GPUs: c.GPUs, Devices: c.Devices}
		for _, p := range c.Pods {
			cc.Pods = append(cc.Pods, checkpointPodRef(p))
		}
		cs = append(cs, cc)
	}
	slices.SortFunc(cs, func(a, b checkpointClaim) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	d := checkpointData{Machine: m.Name(), Fingerprint: fingerprint(m), Pods: []checkpointPod{}, Claims: cs, Unhealthy: snap.Unhealthy}
	for _, key := range slices.Sorted(maps.Keys(pods)) {
		rec := pods[key]
		p := checkpointPod{Pod: key, UID: rec.uid, Source: rec.source, KubeletGPUs: rec.kubeletGPUs,
			ClaimGPUs: rec.claimGPUs, Claims: rec.claims}
		if rec.source != SharedPool {
			a, ok := allocs[key]
			if !ok {
				return nil, fmt.Errorf("pod %s has no allocation in the state", key)
			}
			ca := &checkpointAlloc{Policy: a.Policy, Exclusive: a.Exclusive, FullPCPUs: a.FullPCPUs,
				CPUs: a.CPUs, GPUs: a.GPUs, Devices: a.Devices, NUMANodes: a.NUMANodes()}
			if ca.GPUs == nil {
				ca.GPUs = []int{}
			}
			for _, x := range a.Memory {
				if ca.MemoryMiB == nil {
					ca.MemoryMiB = map[string]int64{}
				}
				ca.MemoryMiB[strconv.Itoa(int(x.Node))] = x.MiB
			}
			p.Allocation = ca
			delete(allocs, key)
		}
		d.Pods = append(d.Pods, p)
	}
	if len(allocs) > 0 {
		return nil, fmt.Errorf("allocations %v belong to no admitted pod", slices.Sorted(maps.Keys(allocs)))
	}
	data, err := json.MarshalIndent(d, "  ", "  ")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"version\": %d,\n  \"checksum\": \"sha256:%s\",\n  \"data\": ", CheckpointVersion, hex.EncodeToString(sum[:]))
	b.Write(data)
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// decoded is a checkpoint read back: the pods, the claims and the
// allocator snapshot.
type decoded struct {
	pods   map[string]podRecord
	claims map[string]ClaimHold
	snap   allocator.Snapshot
	spans  map[string][]numa.NodeID
}

// decodeCheckpoint reads a checkpoint file for machine m. Errors name the
// problem (the caller adds the path). It never panics, whatever the input.
func decodeCheckpoint(raw []byte, m *topology.Machine) (*decoded, string, error) {
	var f checkpointFile
	if err := strictjson.Decode(raw, &f, strictjson.Options{}); err != nil {
		switch {
		case errors.Is(err, strictjson.ErrTrailingData):
			return nil, "not a valid checkpoint (data after the JSON object)", nil
		case errors.Is(err, strictjson.ErrSyntax):
			return nil, "not a valid checkpoint (truncated or corrupted JSON)", err
		}
		return nil, "not a valid checkpoint", err
	}
	if f.Version < oldestCheckpointVersion || f.Version > CheckpointVersion {
		return nil, fmt.Sprintf("unknown format version %d (this build reads versions %d to %d)", f.Version, oldestCheckpointVersion, CheckpointVersion), nil
	}
	sum := sha256.Sum256(f.Data)
	if want := "sha256:" + hex.EncodeToString(sum[:]); f.Checksum != want {
		return nil, fmt.Sprintf("checksum mismatch: the file says %s, its data hashes to %s (truncated, corrupted or edited by hand)",
			quote.Short(f.Checksum), quote.Short(want)), nil
	}
	var d checkpointData
	if err := strictjson.Decode(f.Data, &d, strictjson.Options{}); err != nil {
		return nil, "malformed data", err
	}
	// A version-1 file written on this node before discovery found its RDMA
	// NICs is this machine's too (the NICs are new to the model, not to the
	// node, and the file holds none of them).
	if fp := fingerprint(m); d.Fingerprint != fp && (f.Version >= 2 || d.Fingerprint != fingerprintBeforeRDMA(m)) {
		return nil, fmt.Sprintf("written for another machine (%s, fingerprint %s; this machine is %s, fingerprint %s): "+
			"its NUMA nodes, CPUs, GPUs or devices differ, so the allocations may not mean what they meant; "+
			"drain the node and move the file away to start empty", quote.Short(d.Machine), d.Fingerprint, quote.Short(m.Name()), fp), nil
	}
	if f.Version < 2 && d.Claims != nil {
		return nil, fmt.Sprintf("claims in a version-%d checkpoint (version 2 added them)", f.Version), nil
	}
	out := &decoded{pods: map[string]podRecord{}, claims: map[string]ClaimHold{}, spans: map[string][]numa.NodeID{}}
	for i, p := range d.Pods {
		item := fmt.Sprintf("pods[%d] (%s)", i, quote.Bare(p.Pod))
		if p.Pod == "" || !strings.Contains(p.Pod, "/") {
			return nil, item + ": not a namespace/name pod key", nil
		}
		if _, dup := out.pods[p.Pod]; dup {
			return nil, item + ": the pod is listed twice", nil
		}
		switch p.Source {
		case SharedPool:
			if p.Allocation != nil {
				return nil, item + ": a shared-pool pod with an allocation", nil
			}
		case FromDecision, Local:
			if p.Allocation == nil {
				return nil, item + ": an exclusive pod without an allocation", nil
			}
		default:
			return nil, item + ": no source", nil
		}
		if len(p.KubeletGPUs) > 0 && p.Source != SharedPool {
			return nil, item + ": kubelet GPUs recorded for a pod with exclusive resources", nil
		}
		for _, c := range slices.Sorted(maps.Keys(p.KubeletGPUs)) {
			ids := p.KubeletGPUs[c]
			if c == "" || len(ids) == 0 {
				return nil, item + ": kubeletGPUs: an empty container name or GPU list", nil
			}
			for _, g := range ids {
				if _, ok := m.GPU(g); !ok {
					return nil, fmt.Sprintf("%s: kubeletGPUs of container %s: GPU %d is not a GPU of this machine", item, quote.Short(c), g), nil
				}
			}
			p.KubeletGPUs[c] = slices.Compact(sortedInts(ids))
		}
		if len(p.KubeletGPUs) == 0 {
			p.KubeletGPUs = nil
		}
		if (len(p.ClaimGPUs) > 0 || len(p.Claims) > 0) && (p.Source == SharedPool || len(p.ClaimGPUs) == 0 || len(p.Claims) == 0) {
			return nil, item + ": claimGPUs and claims are recorded together, for a pod the node placed or that has a decision (source local or decision) only", nil
		}
		for _, g := range p.ClaimGPUs {
			if _, ok := m.GPU(g); !ok {
				return nil, fmt.Sprintf("%s: claimGPUs: GPU %d is not a GPU of this machine", item, g), nil
			}
			if p.Allocation != nil && slices.Contains(p.Allocation.GPUs, g) {
				return nil, fmt.Sprintf("%s: GPU %d is both in its allocation and its claims' GPUs", item, g), nil
			}
		}
		for _, c := range p.Claims {
			if ns, name, ok := strings.Cut(c, "/"); !ok || ns == "" || name == "" {
				return nil, fmt.Sprintf("%s: claims: %s is not a namespace/name", item, quote.Short(c)), nil
			}
		}
		rec := podRecord{uid: p.UID, source: p.Source, kubeletGPUs: p.KubeletGPUs}
		if len(p.ClaimGPUs) > 0 {
			rec.claimGPUs = slices.Compact(sortedInts(p.ClaimGPUs))
			rec.claims = slices.Compact(sortedStrings(p.Claims))
		}
		out.pods[p.Pod] = rec
		if p.Allocation == nil {
			continue
		}
		ca := p.Allocation
		a := allocator.Allocation{ID: p.Pod, Policy: ca.Policy, Exclusive: ca.Exclusive, FullPCPUs: ca.FullPCPUs,
			CPUs: ca.CPUs, GPUs: ca.GPUs, Devices: ca.Devices}
		for _, k := range slices.Sorted(maps.Keys(ca.MemoryMiB)) {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || strconv.Itoa(id) != k {
				return nil, fmt.Sprintf("%s: memoryMiB key %s is not a NUMA node ID (a non-negative integer written without sign or leading zeros)", item, quote.Short(k)), nil
			}
			if _, ok := m.NodeIndex(numa.NodeID(id)); !ok {
				return nil, fmt.Sprintf("%s: memory on NUMA node %s, which this machine does not have", item, quote.Short(k)), nil
			}
			a.Memory = append(a.Memory, allocator.NodeMemory{Node: numa.NodeID(id), MiB: ca.MemoryMiB[k]})
		}
		slices.SortFunc(a.Memory, func(x, y allocator.NodeMemory) int { return cmp.Compare(x.Node, y.Node) })
		out.snap.Allocations = append(out.snap.Allocations, a)
		out.spans[p.Pod] = ca.NUMANodes
	}
	if problem := decodeClaims(d.Claims, m, out); problem != "" {
		return nil, problem, nil
	}
	out.snap.Unhealthy = d.Unhealthy
	return out, "", nil
}

// decodeClaims adds the checkpoint's claims to out (as holds and as
// allocations of the snapshot), or returns the problem with them. Whether
// their devices overlap anything is the state's to check when it restores
// the snapshot.
func decodeClaims(claims []checkpointClaim, m *topology.Machine, out *decoded) string {
	devs := map[string]bool{}
	for _, d := range m.Devices() {
		devs[d.Class+"/"+d.ID] = true
	}
	for i, cc := range claims {
		item := fmt.Sprintf("claims[%d] (%s/%s)", i, quote.Bare(cc.Namespace), quote.Bare(cc.Name))
		switch {
		case cc.UID == "" || strings.ContainsAny(cc.UID, "/ \t\n"):
			return item + ": no usable UID (non-empty, without slashes or blanks)"
		case cc.Namespace == "" || cc.Name == "":
			return item + ": no namespace or name"
		}
		if _, dup := out.claims[cc.UID]; dup {
			return fmt.Sprintf("%s: UID %s is listed twice", item, quote.Short(cc.UID))
		}
		c := ClaimHold{UID: cc.UID, Namespace: cc.Namespace, Name: cc.Name}
		for _, p := range cc.Pods {
			if p.Name == "" {
				return item + ": a pod without a name"
			}
			c.Pods = append(c.Pods, ClaimConsumer(p))
		}
		for _, g := range cc.GPUs {
			if _, ok := m.GPU(g); !ok {
				return fmt.Sprintf("%s: GPU %d is not a GPU of this machine", item, g)
			}
		}
		c.GPUs = slices.Compact(sortedInts(cc.GPUs))
		for _, class := range slices.Sorted(maps.Keys(cc.Devices)) {
			ids := cc.Devices[class]
			if len(ids) == 0 {
				return fmt.Sprintf("%s: an empty %s device list", item, quote.Short(class))
			}
			for _, id := range ids {
				if !devs[class+"/"+id] {
					return fmt.Sprintf("%s: %s device %s is not a device of this machine", item, quote.Short(class), quote.Short(id))
				}
			}
			if c.Devices == nil {
				c.Devices = map[string][]string{}
			}
			c.Devices[class] = slices.Compact(sortedStrings(ids))
		}
		if len(c.GPUs) == 0 {
			c.GPUs = nil
		}
		out.claims[c.UID] = c
		a := allocator.Allocation{ID: claimID(c.UID), GPUs: slices.Clone(c.GPUs)}
		for class, ids := range c.Devices {
			if a.Devices == nil {
				a.Devices = map[string][]string{}
			}
			a.Devices[class] = slices.Clone(ids)
		}
		out.snap.Allocations = append(out.snap.Allocations, a)
	}
	return ""
}

// restore reads the node's checkpoint into its (fresh) state. It reports
// whether the file existed.
func (n *Node) restore() (bool, error) {
	raw, err := readfile.Regular(n.path, MaxCheckpointBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		// A file longer than any checkpoint is read no further, but it is a
		// regular file of the wrong content all the same.
		return true, &CheckpointError{Path: n.path, Problem: "cannot be read", Err: err, unusable: errors.Is(err, readfile.ErrTooLarge)}
	}
	d, problem, err := decodeCheckpoint(raw, n.m)
	if problem != "" {
		return true, &CheckpointError{Path: n.path, Problem: problem, Err: err, unusable: true}
	}
	// The file was written for this machine (its fingerprint matches), so
	// every device whose health it records exists here: one that does not
	// is an edited file, not a changed machine.
	probe := n.s.Clone()
	for _, class := range slices.Sorted(maps.Keys(d.snap.Unhealthy)) {
		for _, id := range d.snap.Unhealthy[class] {
			if _, err := probe.SetDeviceHealth(class, id, false); err != nil {
				return true, &CheckpointError{Path: n.path, Problem: "inconsistent with this machine", Err: err, unusable: true}
			}
		}
	}
	if err := n.s.Restore(d.snap); err != nil {
		return true, &CheckpointError{Path: n.path, Problem: "inconsistent with this machine", Err: err, unusable: true}
	}
	for _, a := range n.s.Live() {
		if isClaimID(a.ID) {
			continue // a claim records no span
		}
		if got, want := a.NUMANodes(), d.spans[a.ID]; !slices.Equal(got, want) {
			return true, &CheckpointError{Path: n.path, Problem: fmt.Sprintf(
				"inconsistent with this machine: pod %s is recorded on NUMA nodes %v but what it holds lies on %v", a.ID, want, got), unusable: true}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(d.pods)) {
		for _, ids := range d.pods[key].kubeletGPUs {
			for _, g := range ids {
				for _, a := range n.s.Live() {
					if slices.Contains(a.GPUs, g) {
						holder := "pod " + a.ID + "'s allocation"
						if isClaimID(a.ID) {
							holder = "ResourceClaim " + d.claims[strings.TrimPrefix(a.ID, claimPrefix)].Key()
						}
						return true, &CheckpointError{Path: n.path, Problem: fmt.Sprintf(
							"inconsistent: GPU %d is recorded as given by the kubelet to pod %s and held by %s", g, key, holder)}
					}
				}
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(d.pods)) {
		for _, g := range d.pods[key].claimGPUs {
			for _, a := range n.s.Live() {
				if !isClaimID(a.ID) && slices.Contains(a.GPUs, g) {
					return true, &CheckpointError{Path: n.path, Problem: fmt.Sprintf(
						"inconsistent: GPU %d is recorded as pod %s's from its claims and held by pod %s's allocation", g, key, a.ID), unusable: true}
				}
			}
		}
	}
	n.pods = d.pods
	n.claims = d.claims
	// Read the health back from the state, which has normalised the IDs.
	for class, ids := range n.s.Snapshot().Unhealthy {
		for _, id := range ids {
			n.markHealth(class, id, false)
		}
	}
	return true, nil
}

// checkpointLocked writes the node's state to its checkpoint file (nothing
// without a path). The caller holds the write lock.
func (n *Node) checkpointLocked() error {
	if n.path == "" {
		return nil
	}
	data, err := encodeCheckpoint(n.m, n.pods, n.claims, n.s.Snapshot())
	if err != nil {
		return &CheckpointError{Path: n.path, Problem: "cannot be encoded", Err: err}
	}
	if err := n.write(n.path, data); err != nil {
		return &CheckpointError{Path: n.path, Problem: "cannot be written", Err: err}
	}
	return nil
}

// recheckpointLocked writes the state again after a change was undone
// because its checkpoint failed: if the failure came after the new file
// was renamed into place (the directory's fsync), this puts the file back
// in step with the state. Its own failure leaves the file as the first
// attempt left it, which it reports.
func (n *Node) recheckpointLocked(first error) error {
	if err := n.checkpointLocked(); err != nil {
		return fmt.Errorf("%w (and writing the undone state again failed too: %w)", first, err)
	}
	return first
}

// tempPrefix returns the prefix of the names of the temporary files that
// writeFileAtomic creates for the file at path, in the same directory:
// "." + the file's name + ".tmp-", followed by os.CreateTemp's random
// decimal digits.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// isTempOf reports whether name is the name of one of writeFileAtomic's
// temporary files for a file whose name has the given prefix (tempPrefix):
// the prefix followed by decimal digits only, so that the temporary files of
// another file in the same directory (".cp.json.bak.tmp-1" beside
// "cp.json") never match.
func isTempOf(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// removeFile removes a leftover temporary file; tests replace it to make a
// removal fail.
var removeFile = os.Remove

// removeLeftovers removes the temporary files that interrupted writes of the
// checkpoint at path left in its directory (a crash between creating the
// temporary file and renaming it over path): the regular files whose names
// match isTempOf, nothing else. It returns the paths it removed, ascending.
// A directory that does not exist has nothing to remove; one that cannot be
// read, or a leftover that cannot be removed, is an error naming it (every
// leftover is tried; the error lists each failure).
func removeLeftovers(path string) ([]string, error) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read directory %s to remove the temporary files of interrupted writes: %w", dir, err)
	}
	prefix := tempPrefix(path)
	var removed []string
	var errs []error
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() || !isTempOf(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := removeFile(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove the temporary file of an interrupted write: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// writeFileAtomic replaces the file at path with data so that a crash
// leaves either the old or the new content: it writes a temporary file in
// the same directory (named tempPrefix(path) and random digits, which Open
// removes when a crash left one behind), fsyncs it, renames it over path
// and fsyncs the directory. On error the temporary file is removed and path
// is untouched.
func writeFileAtomic(path string, data []byte) error { return writeAtomic(path, data, nil) }

// writeAtomic is writeFileAtomic; when midWrite is not nil it writes the
// first half of data, calls midWrite with the temporary file's path, and
// then writes the rest (the crash tests stop a process there).
func writeAtomic(path string, data []byte, midWrite func(tmp string)) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	rest := data
	if midWrite != nil {
		half := len(data) / 2
		if _, err = f.Write(data[:half]); err != nil {
			_ = f.Close()
			return fmt.Errorf("write %s: %w", tmp, err)
		}
		midWrite(tmp)
		rest = data[half:]
	}
	if _, err = f.Write(rest); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory to fsync it: %w", err)
	}
	if err = d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return d.Close()
}
