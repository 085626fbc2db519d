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
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ctx := context.Background()
	for _, path := range paths {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "%s: not YAML", path)
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				mapper.Reset()
				m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			}
			require.NoError(t, err, "%s: %s %s: no such resource", path, gvk, u.GetName())
			var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				r = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
			}
			_, err = r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "numaplace-test", Force: true})
			require.NoError(t, err, "%s: applying %s %s", path, gvk.Kind, u.GetName())
		}
	}
}
