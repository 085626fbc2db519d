package allocator

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/policy"
)

// refusal is the error of a Fit that [State.quickRefusal] names: the
// request (its fields, Devices and Amounts being empty there), the state
// and its generation at the refusal, and the refusal's category. The
// state keeps its last one (State.refused), which Fit returns again for
// the same request on the same generation instead of allocating another
// (a scheduler asks the same state again and again about a pending pod). Its explanation, the *[PlacementError] that decide
// returns for the request, is built on the first Error, errors.Is or
// errors.As, under the state's read lock, and kept. When the state has
// changed since the refusal (its generation moved on) the explanation can
// no longer be decide's: it is a PlacementError of the same category whose
// Reason says that only the category is known.
type refusal struct {
	r   plainRequest
	s   *State
	gen uint64
	cat error
	pe  atomic.Pointer[PlacementError]
}

// explain returns the refusal's explanation, building it on first use.
func (e *refusal) explain() *PlacementError {
	if pe := e.pe.Load(); pe != nil {
		return pe
	}
	pe := e.build()
	if !e.pe.CompareAndSwap(nil, pe) {
		pe = e.pe.Load()
	}
	return pe
}

// build runs decide for the request on the state when the state has not
// changed since the refusal.
func (e *refusal) build() *PlacementError {
	s, r := e.s, e.r.request()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.gen == e.gen {
		sr := s.searcher(r, nil)
		err := sr.decide(false)
		sr.done()
		var pe *PlacementError
		if errors.As(err, &pe) {
			return pe
		}
	}
	width := 0
	if e.cat != ErrInsufficient {
		width = 1 // SingleNUMANode's
	}
	return &PlacementError{ID: r.ID, Policy: r.Policy, Exclusive: r.Exclusive, Width: width, err: e.cat,
		Reason: fmt.Sprintf("%v (the state changed before the explanation was asked for, so only the category is known)", e.cat)}
}

// plainRequest is a Request without Devices and Amounts, comparable.
type plainRequest struct {
	ID        string
	CPUs      int
	GPUs      int
	MemoryMiB int64
	Policy    policy.Policy
	Exclusive policy.Exclusivity
	FullPCPUs bool
}

// plainOf returns r's fields but Devices and Amounts.
func plainOf(r *Request) plainRequest {
	return plainRequest{ID: r.ID, CPUs: r.CPUs, GPUs: r.GPUs, MemoryMiB: r.MemoryMiB,
		Policy: r.Policy, Exclusive: r.Exclusive, FullPCPUs: r.FullPCPUs}
}

// request returns the Request of p.
func (p *plainRequest) request() *Request {
	return &Request{ID: p.ID, CPUs: p.CPUs, GPUs: p.GPUs, MemoryMiB: p.MemoryMiB,
		Policy: p.Policy, Exclusive: p.Exclusive, FullPCPUs: p.FullPCPUs}
}

// refuseQuick returns the refusal of r for category cat on generation gen
// of s: the state's last one when it is the same, else a new one, kept.
// The caller holds the read lock.
func (s *State) refuseQuick(r *Request, gen uint64, cat error) *refusal {
	p := plainOf(r)
	if e := s.refused.Load(); e != nil && e.gen == gen && e.cat == cat && e.r == p {
		return e
	}
	e := &refusal{r: p, s: s, gen: gen, cat: cat}
	s.refused.Store(e)
	return e
}

// Error is the explanation's Error.
func (e *refusal) Error() string { return e.explain().Error() }

// Unwrap returns the category, known without the explanation.
func (e *refusal) Unwrap() error { return e.cat }

// Is reports whether target is [ErrNeverFits] and the explanation says the
// request can never fit (building it).
func (e *refusal) Is(target error) bool { return target == ErrNeverFits && e.explain().Never }

// As sets a **PlacementError target to the explanation.
func (e *refusal) As(target any) bool {
	if p, ok := target.(**PlacementError); ok {
		*p = e.explain()
		return true
	}
	return false
}

// String names the request and the category without building the
// explanation (for debugging).
func (e *refusal) String() string {
	return fmt.Sprintf("request %s refused (%v)", quote.Short(e.r.ID), e.cat)
}
