// Package koordinator puts numaplace beside Koordinator's NUMA
// topology-aware scheduling (github.com/koordinator-sh/koordinator v1.6.0,
// its scheduler plugin NodeNUMAResource, the open counterpart of ACK's) on
// the same machines in the same states: its tests check that the two give
// the same verdicts, and its benchmarks time both. It is a module of its
// own because Koordinator pins the Kubernetes modules to v0.28.7 (the
// benchmarks module beside it uses v0.37.2), and the core module never
// imports Kubernetes. It has no code outside its tests.
package koordinator
