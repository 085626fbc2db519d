// Package allocatortest supports property tests of numaplace allocators:
// rapid generators of small random machines, requests and operation
// streams, and a brute-force reference [Model] of the semantics of
// docs/design.md ("Semantics (the contract)": span, NUMA sets, width_cap,
// width_free, the four policies, the singleNUMANodeExclusive rule, memory,
// fullPCPUs, devices of unknown NUMA node).
//
// The model is written from docs/design.md, not from the engine, and answers
// by enumerating every NUMA mask (O(2^n) per question, meant for n <= 8
// nodes, which is what [Machine] generates). [Model.Check] says precisely
// what is wrong with an engine's answer: a refusal of an admissible request
// (completeness), an admission of one that is not (soundness), a span the
// policy does not allow, wrong amounts, anything handed out twice, reserved,
// unhealthy or not free, and on machines of at most [MaxPreferNodes] nodes
// a span that is not the top-ranked admissible one under the preference
// order ([Rank], computed by the model from the order's statement in the
// allocator's doc comments, never by the engine's comparison; [SmallMachine]
// generates machines where every criterion can decide).
// [Model.CheckResize] and [Model.CheckClaim] do the same for
// [allocator.State.Resize] (the width of a fresh request with its own
// resources free, in place, the rule on what changes, refusals exact and
// of their category) and [allocator.State.Claim] (exactly what it names, or
// refused for what conflicts).
//
// How many checks: rapid runs 100 by default (-rapid.checks N for more).
// The default generators reach the edge cases within those 100: a
// CPU-only pod admitted and then released in about 40% of the checks, a
// refused request asked for again in about 30% (a test of this package
// counts them). A bug that one stream in p finds is missed by n checks
// with a chance of about e^(-n/p): 100 checks find a 1-in-30 bug with a
// chance of 96%, but a 1-in-1,000 bug (two rare events in one stream: a
// fragmented machine and a device health change between two refusals, say)
// with 10%; such a bug needs about 3p checks for 95%, so run
// -rapid.checks 10000 before a release and after changing the engine, and
// keep the seed rapid prints on a failure (-rapid.seed) as a regression
// test.
//
// A property test plays a stream against the engine and the model:
//
//	rapid.Check(t, func(t *rapid.T) {
//		m := allocatortest.Machine().Draw(t, "machine")
//		s := allocator.MustNew(m, allocator.Options{})
//		md, _ := allocatortest.NewModel(m, nil)
//		for _, op := range allocatortest.Stream(m).Draw(t, "ops") {
//			if op.Kind != allocatortest.OpAllocate {
//				continue // releases: s.Release(op.ID); md, _ = md.Without(op.ID)
//			}
//			a, err := s.Allocate(&op.Request)
//			if err := md.Check(&op.Request, a, err); err != nil {
//				t.Fatal(err)
//			}
//			if err == nil {
//				md, _ = md.With(a.Clone())
//			}
//		}
//	})
package allocatortest
