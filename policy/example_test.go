package policy_test

import (
	"errors"
	"fmt"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

func ExampleParseSpec() {
	spec, err := policy.ParseSpec([]byte(`{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}`))
	fmt.Println(spec.Policy, spec.Exclusive, err)

	// Koordinator writes an empty policy for None; exclusivity defaults to Required.
	spec, _ = policy.ParseSpec([]byte(`{"numaTopologyPolicy":""}`))
	fmt.Println(spec)

	// Errors name the field and the value.
	_, err = policy.ParseSpec([]byte(`{"numaTopologyPolicy":"singleNUMANode"}`))
	var se *policy.SpecError
	fmt.Println(errors.As(err, &se), se.Field, se.Value)
	fmt.Println(err)
	// Output:
	// Restricted Preferred <nil>
	// {"numaTopologyPolicy":"None","singleNUMANodeExclusive":"Required"}
	// true numaTopologyPolicy singleNUMANode
	// invalid NUMA topology spec: numaTopologyPolicy "singleNUMANode": unknown policy; want SingleNUMANode, Restricted, BestEffort or None
}

// docs/design.md's worked example on a two-node dgx-h100: a 2-CPU SingleNUMANode
// pod on node 0 makes node 0 single, so an 8-GPU Restricted pod, whose span
// must be both nodes, is not allowed under Required exclusivity.
func ExampleAllowed() {
	live := []numa.Mask{numa.MaskOf(0)} // the spans of the live allocations
	single, shared := policy.NodeTypes(live)
	fmt.Printf("single: [%s] shared: [%s]\n", single, shared)

	span := numa.MaskOf(0, 1)
	fmt.Println("span 0-1 allowed:", policy.Allowed(span, single, shared))
	fmt.Println("span 1 allowed:", policy.Allowed(numa.MaskOf(1), single, shared))
	fmt.Println("rule binds Restricted/Preferred:", policy.Binds(policy.Restricted, policy.Preferred))
	// Output:
	// single: [0] shared: []
	// span 0-1 allowed: false
	// span 1 allowed: true
	// rule binds Restricted/Preferred: false
}
