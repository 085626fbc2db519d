package numaplace

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"

	"github.com/numaplace/numaplace/allocator"
)

// explainRefusal says why the pod's claims do not admit the decision a on
// the node, naming the claim and, where one is at fault, its constraint or
// the request and selector: each claim is tried alone over the cut-down
// slices, then without its constraints, then without each request's
// selectors. It returns "" when no single claim explains it.
func (pl *Plugin) explainRefusal(ctx context.Context, s *podState, node *v1.Node, a allocator.Allocation, freed structured.AllocatedState) string {
	d := s.dra
	claims := make([]*resourceapi.ResourceClaim, 0, len(d.toAllocate)+1)
	for _, k := range d.toAllocate {
		claims = append(claims, d.claims[k])
	}
	if extendedOn(d, node) {
		claims = append(claims, d.extended.claim)
	}
	slicesCut := d.nodeSlices(node.Name, a)
	try := func(c *resourceapi.ResourceClaim) bool {
		al, err := structured.NewAllocator(ctx, pl.draFeatures, freed, pl.dra.DeviceClasses(), slicesCut, pl.celCache)
		if err != nil {
			return false
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err := al.Allocate(actx, node, []*resourceapi.ResourceClaim{c})
		return err == nil && len(res) == 1
	}
	what := decisionText(s, a)
	for _, c := range claims {
		if try(c) {
			continue
		}
		name := klog.KObj(c).String()
		if c == d.extended.claimOrNil() {
			name = "the extended resource claim for aliyun.com/gpu"
		} else {
			name = "ResourceClaim " + name
		}
		if len(c.Spec.Devices.Constraints) > 0 {
			for i, con := range c.Spec.Devices.Constraints {
				others := slices.Clone(c.Spec.Devices.Constraints)
				others = slices.Delete(others, i, i+1)
				x := c.DeepCopy()
				x.Spec.Devices.Constraints = others
				if try(x) {
					return fmt.Sprintf("%s: %s cannot hold for %s", name, constraintText(con), what)
				}
			}
			x := c.DeepCopy()
			x.Spec.Devices.Constraints = nil
			if try(x) {
				return fmt.Sprintf("%s: its constraints together cannot hold for %s", name, what)
			}
		}
		for i, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil || len(r.Exactly.Selectors) == 0 {
				continue
			}
			x := c.DeepCopy()
			x.Spec.Devices.Constraints = nil
			x.Spec.Devices.Requests[i].Exactly.Selectors = nil
			if try(x) {
				var exprs []string
				for _, sel := range r.Exactly.Selectors {
					if sel.CEL != nil {
						exprs = append(exprs, strconv.Quote(sel.CEL.Expression))
					}
				}
				return fmt.Sprintf("%s, request %q: selector %s does not admit %s", name, r.Name, strings.Join(exprs, " && "), what)
			}
		}
		return fmt.Sprintf("%s: the node's published devices (untainted, unallocated) do not include %s", name, what)
	}
	return ""
}

// claimOrNil is the extended resource claim, or nil.
func (e *extendedClaim) claimOrNil() *resourceapi.ResourceClaim {
	if e == nil {
		return nil
	}
	return e.claim
}

// constraintText names a claim's constraint as written.
func constraintText(c resourceapi.DeviceConstraint) string {
	var parts []string
	if c.MatchAttribute != nil {
		parts = append(parts, "matchAttribute "+string(*c.MatchAttribute))
	}
	if c.DistinctAttribute != nil {
		parts = append(parts, "distinctAttribute "+string(*c.DistinctAttribute))
	}
	if len(c.Requests) > 0 {
		parts = append(parts, "(requests "+strings.Join(c.Requests, ", ")+")")
	}
	if len(parts) == 0 {
		return "a constraint"
	}
	return strings.Join(parts, " ")
}

// decisionText describes what numaplace decided for the pod's claims: its
// GPUs and NICs, their NUMA nodes, and the pod's policy.
func decisionText(s *podState, a allocator.Allocation) string {
	var parts []string
	count := func(n int, noun string) string {
		if n == 1 {
			return "1 " + noun
		}
		return strconv.Itoa(n) + " " + noun + "s"
	}
	if n := len(a.GPUs); n > 0 {
		parts = append(parts, count(n, "GPU"))
	}
	if n := len(a.Devices[rdmaClass]); n > 0 {
		parts = append(parts, count(n, "NIC"))
	}
	what := "numaplace's devices"
	if len(parts) > 0 {
		what = "the " + strings.Join(parts, " and ") + " numaplace decides"
	}
	var nodes []string
	for _, id := range a.NUMANodes() {
		nodes = append(nodes, strconv.Itoa(int(id)))
	}
	if len(nodes) > 0 {
		what += " (NUMA nodes " + strings.Join(nodes, ",") + ")"
	}
	return what + " under " + s.req.Spec.Policy.String()
}
