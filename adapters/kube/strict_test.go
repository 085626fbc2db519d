package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/internal/strictjson"
)

// The readers of outside JSON refuse strings that are not valid UTF-8 (raw
// bytes or unpaired surrogate escapes, which encoding/json would turn into
// U+FFFD): the decision annotation strictly, NodeResourceTopology objects
// and Koordinator's CPU topology leniently (their unknown fields, such as
// Kubernetes metadata, are ignored; repeated and miscased keys are not).
func TestOutsideJSONStrictness(t *testing.T) {
	for _, in := range []string{
		"{\"policy\":\"None\",\"cpuset\":\"0\",\"numaNodes\":[0],\"gpus\":[{\"id\":0,\"uuid\":\"GPU-\xff\"}]}",
		`{"policy":"None","cpuset":"0","numaNodes":[0],"devices":{"rdma":["mlx5_\udc00"]}}`,
	} {
		_, err := kube.ParseDecision(in)
		require.ErrorIs(t, err, kube.ErrInvalidDecision, in)
		require.ErrorIs(t, err, strictjson.ErrInvalidUTF8, in)
	}

	const nrt = `{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology",
		"metadata":{"name":"n1","uid":"abc","resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z"},
		"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"4","allocatable":"4","available":"4"}]}]}`
	r, err := kube.ParseNRT([]byte(nrt))
	require.NoError(t, err, "Kubernetes metadata fields are ignored")
	require.Equal(t, "n1", r.Metadata.Name)
	for in, want := range map[string]error{
		`{"zones":[],"zones":[]}`: strictjson.ErrDuplicateField,
		`{"Zones":[]}`:            strictjson.ErrUnknownField,
		"{\"metadata\":{\"name\":\"n\xff\"},\"zones\":[]}": strictjson.ErrInvalidUTF8,
	} {
		_, err := kube.ParseNRT([]byte(in))
		require.ErrorIs(t, err, kube.ErrInvalidNRT, in)
		require.ErrorIs(t, err, want, in)
	}

	m, err := kube.MachineFromKoordinatorCPUTopology(`{"detail":[{"id":0,"core":0,"socket":0,"node":0,"l2":0}]}`, nil)
	require.NoError(t, err, "fields Koordinator may add are ignored")
	require.Equal(t, 1, m.NumCPUs())
	for in, want := range map[string]error{
		`{"detail":[{"id":0,"id":1,"core":0,"socket":0,"node":0}]}`: strictjson.ErrDuplicateField,
		`{"detail":[{"ID":0,"core":0,"socket":0,"node":0}]}`:        strictjson.ErrUnknownField,
	} {
		_, err := kube.MachineFromKoordinatorCPUTopology(in, nil)
		require.ErrorIs(t, err, kube.ErrInvalidNRT, in)
		require.ErrorIs(t, err, want, in)
	}
}
