package kube_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/policy"
)

// TestParsePodSpecStrict: the spec annotations are read strictly, on either
// key; the error names the annotation, the field and what is wrong.
func TestParsePodSpecStrict(t *testing.T) {
	for _, c := range []struct {
		name, spec string
		want       []string
	}{
		{"unknown field", `{"numaTopologyPolicy":"SingleNUMANode","numaNode":0}`, []string{`unknown field "numaNode"`}},
		{"miscased key", `{"numaTopologyPolicy":"SingleNUMANode","SingleNUMANodeExclusive":"Preferred"}`,
			[]string{`unknown field "SingleNUMANodeExclusive"; did you mean "singleNUMANodeExclusive"?`}},
		{"repeated key", `{"singleNUMANodeExclusive":"Preferred","singleNUMANodeExclusive":"Required"}`,
			[]string{`duplicate field "singleNUMANodeExclusive"`}},
		{"invalid UTF-8", "{\"numaTopologyPolicy\":\"SingleNUMANode\xc0\"}",
			[]string{`a string at numaTopologyPolicy is not valid UTF-8`}},
		{"not a string", `{"numaTopologyPolicy":["SingleNUMANode"]}`, []string{`numaTopologyPolicy "[\"SingleNUMANode\"]": want a string`}},
		{"text after the object", specSNN + `,{}`, []string{"malformed JSON"}},
	} {
		for _, key := range []string{kube.AnnotationSpecAlibaba, kube.AnnotationSpecKoordinator} {
			t.Run(c.name+"/"+key, func(t *testing.T) {
				p := numaPod(specSNN, guaranteed("c", "cpu", "4"))
				delete(p.Annotations, kube.AnnotationSpecAlibaba)
				p.Annotations[key] = c.spec
				err := parseErr(p)
				requirePodError(t, err, key, append([]string{"invalid NUMA topology spec"}, c.want...)...)
				require.Equal(t, 1, strings.Count(err.Error(), "NUMA topology spec"), "said once: %v", err)
				require.ErrorIs(t, err, policy.ErrInvalidSpec)
			})
		}
	}
	// A null field is as if absent, as before.
	p := numaPod(`{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":null}`, guaranteed("c", "cpu", "4"))
	r, err := kube.ParsePod(p, kube.Config{})
	require.NoError(t, err)
	require.Equal(t, policy.Spec{Policy: policy.Restricted}, r.Spec)
}
