package kube

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestXXH64KnownValues(t *testing.T) {
	// Published XXH64 values (seed 0 unless said), covering the short
	// path, the 4- and 8-byte tails and the 32-byte stripes.
	for _, tc := range []struct {
		in   string
		seed uint64
		want uint64
	}{
		{"", 0, 0xef46db3751d8e999},
		{"a", 0, 0xd24ec4f1a98c6e5b},
		{"abc", 0, 0x44bc2cf5ad770999},
		{"Nobody inspects the spammish repetition", 0, 0xfbcea83c8a378bf1},
		{strings.Repeat("0123456789abcdef", 5) + "xyz", 0, 0x2cf0ab3f2d7c78c7},
		{strings.Repeat("k8s", 13), 12345, 0x1fa85e226aa03af9},
	} {
		require.Equal(t, tc.want, xxh64([]byte(tc.in), tc.seed), "%q seed %d", tc.in, tc.seed)
	}
}

func TestPodFingerprintMatchesTheLibrary(t *testing.T) {
	// The empty set, and a set whose signature the podfingerprint
	// library's compatibility data gives.
	var f PodFingerprint
	require.Equal(t, "pfp0v001ef46db3751d8e999", f.Sign())
	f.Add("production", "jaeger-dpgjk")
	f.Add("production", "nginx-rt684")
	f.Add("production", "envoy-g9m22")
	require.Equal(t, "pfp0v001607b76a0e9d3aeb4", f.Sign())
	// Signing does not change the set.
	require.Equal(t, "pfp0v001607b76a0e9d3aeb4", f.Sign())
}

func TestPodFingerprintIgnoresOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pods := rapid.SliceOfN(rapid.StringMatching(`[a-z]{1,3}/[a-z0-9-]{1,12}`), 0, 20).Draw(t, "pods")
		perm := rapid.Permutation(pods).Draw(t, "perm")
		var a, b PodFingerprint
		for i := range pods {
			ns, name, _ := strings.Cut(pods[i], "/")
			a.Add(ns, name)
			ns, name, _ = strings.Cut(perm[i], "/")
			b.Add(ns, name)
		}
		if a.Sign() != b.Sign() {
			t.Fatalf("order changed the fingerprint: %v vs %v", pods, perm)
		}
	})
	// The namespace is part of the identity.
	var x, y PodFingerprint
	x.Add("a", "bc")
	y.Add("ab", "c")
	require.NotEqual(t, x.Sign(), y.Sign())
}
