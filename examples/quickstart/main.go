// Command quickstart is the README's first program: one machine's state,
// a pod placed on one NUMA node, a refusal that says why, a release.
package main

import (
	"errors"
	"fmt"
	"log"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

func main() {
	m, err := topology.Preset("dgx-h100") // or topology.Discover("/"), topology.ReadJSONFile(path)
	if err != nil {
		log.Fatal(err)
	}
	s, err := allocator.New(m, allocator.Options{}) // one machine's state; safe for concurrent use
	if err != nil {
		log.Fatal(err)
	}
	pod := func(id string) *allocator.Request {
		return &allocator.Request{ID: id, CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode}
	}
	for _, id := range []string{"train-1", "train-2"} {
		a, err := s.Allocate(pod(id))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, "CPUs", a.CPUs, "GPUs", a.GPUs, "NUMA nodes", a.NUMANodes())
	}
	// Fit answers what Allocate would, changing nothing.
	err = s.Fit(pod("train-3"))
	var pe *allocator.PlacementError
	if errors.As(err, &pe) {
		fmt.Printf("train-3 refused: %s (never fits this machine: %t)\n", pe.Reason, pe.Never)
	}
	fmt.Println("release train-1:", s.Release("train-1"), "| again:", s.Release("train-1"))
	fmt.Println("train-3 now:", s.Fit(pod("train-3")))
}
