package controlplane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// ApplyFiles applies every object of the YAML files, in order, by
// server-side apply as kubectl apply --server-side does (field manager
// "numaplace-test"), finding each object's resource through discovery
// (read again when a kind is not known yet, such as a CRD's just
// applied). It fails the test naming the file and object that could not
// be applied.
func ApplyFiles(t testing.TB, cfg *rest.Config, paths ...string) {
	t.Helper()
	a := NewApplier(t, cfg)
	for _, path := range paths {
		for _, u := range ReadObjects(t, path) {
			require.NoError(t, a.Apply(context.Background(), u, false), "%s: applying %s %s", path, u.GetKind(), u.GetName())
		}
	}
}

// ReadObjects returns the objects of the YAML (or JSON) documents of the
// file at path, in order, leaving out empty documents. It fails the test
// naming the file when it cannot be read or parsed.
func ReadObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "%s: not YAML", path)
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// Applier applies objects by server-side apply, finding their resources
// through discovery.
type Applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewApplier returns an Applier reaching the API server with cfg.
func NewApplier(t testing.TB, cfg *rest.Config) *Applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// Apply applies obj by server-side apply (field manager "numaplace-test",
// conflicts forced), as a server-side dry run when dryRun is set. A kind
// discovery does not know yet is looked up again once (a CRD applied
// just before); the error says when it is still unknown.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return err
		}
	}
	opts := metav1.ApplyOptions{FieldManager: "numaplace-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	_, err = r.Apply(ctx, obj.GetName(), obj, opts)
	return err
}
