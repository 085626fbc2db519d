package kube

import (
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"slices"
)

// Pod fingerprint names, as the NodeResourceTopology exporters
// (resource-topology-exporter, NFD's topology-updater) and the
// scheduler-plugins' NodeResourceTopologyMatch reader use them.
const (
	// NRTAttributePodFingerprint is the report-level attribute holding the
	// fingerprint of the set of pods a report accounts for.
	NRTAttributePodFingerprint = "nodeTopologyPodsFingerprint"
	// NRTAttributePodFingerprintMethod is the report-level attribute that
	// says which pods the fingerprint covers.
	NRTAttributePodFingerprintMethod = "nodeTopologyPodsFingerprintMethod"
	// AnnotationPodFingerprint is the annotation under which the same
	// fingerprint is also written on the report.
	AnnotationPodFingerprint = "topology.node.k8s.io/fingerprint"

	// PodFingerprintMethodAll: every pod on the node.
	PodFingerprintMethodAll = "all"
	// PodFingerprintMethodExclusiveResources: only the pods holding
	// exclusive resources.
	PodFingerprintMethodExclusiveResources = "with-exclusive-resources"
	// PodFingerprintMethodExcludeTerminal: the pods that are not terminal
	// (whose sandbox still runs).
	PodFingerprintMethodExcludeTerminal = "exclude-terminal"

	// podFingerprintPrefix starts every fingerprint: "pfp0" and the format
	// version "v001".
	podFingerprintPrefix = "pfp0v001"
)

// PodFingerprint computes the fingerprint of a set of pods, each named by
// namespace and name, in the format of the podfingerprint library that
// NodeResourceTopology exporters and readers share ("pfp0v001" followed by
// 16 hex digits): each pod hashes to XXH64(name, seed XXH64(namespace)),
// the hashes are sorted, and the fingerprint is the XXH64 (seed 0) of
// their little-endian bytes, written big-endian in hex. The same set gives
// the same fingerprint whatever the order it was added in; adding a pod
// twice counts it twice, as the library does. The zero value is an empty
// set, ready to use.
type PodFingerprint struct {
	hashes []uint64
}

// Add adds the pod namespace/name to the set.
func (f *PodFingerprint) Add(namespace, name string) {
	f.hashes = append(f.hashes, xxh64([]byte(name), xxh64([]byte(namespace), 0)))
}

// Sign returns the fingerprint of the set as it is now, such as
// "pfp0v001ef46db3751d8e999" for the empty set. Pods may be added after.
func (f *PodFingerprint) Sign() string {
	hs := slices.Clone(f.hashes)
	slices.Sort(hs)
	buf := make([]byte, 8*len(hs))
	for i, h := range hs {
		binary.LittleEndian.PutUint64(buf[8*i:], h)
	}
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], xxh64(buf, 0))
	return podFingerprintPrefix + hex.EncodeToString(sum[:])
}

// XXH64's primes.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

func xxRound(acc, input uint64) uint64 {
	return bits.RotateLeft64(acc+input*xxPrime2, 31) * xxPrime1
}

func xxMerge(acc, v uint64) uint64 {
	return (acc^xxRound(0, v))*xxPrime1 + xxPrime4
}

// xxh64 is the 64-bit xxHash of b with the given seed.
func xxh64(b []byte, seed uint64) uint64 {
	n := uint64(len(b))
	var h uint64
	if len(b) >= 32 {
		v1, v2, v3, v4 := seed+xxPrime1+xxPrime2, seed+xxPrime2, seed, seed-xxPrime1
		for ; len(b) >= 32; b = b[32:] {
			v1 = xxRound(v1, binary.LittleEndian.Uint64(b[0:]))
			v2 = xxRound(v2, binary.LittleEndian.Uint64(b[8:]))
			v3 = xxRound(v3, binary.LittleEndian.Uint64(b[16:]))
			v4 = xxRound(v4, binary.LittleEndian.Uint64(b[24:]))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(h, v1)
		h = xxMerge(h, v2)
		h = xxMerge(h, v3)
		h = xxMerge(h, v4)
	} else {
		h = seed + xxPrime5
	}
	h += n
	for ; len(b) >= 8; b = b[8:] {
		h ^= xxRound(0, binary.LittleEndian.Uint64(b))
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}
