// Package scratch keeps working memory between calls: a [Slot] holds one
// value for its owner (a state keeps its searcher there) in front of a
// [Pool] shared by every owner, so that the common call, made by one
// goroutine at a time, takes its memory back in one atomic swap and a
// concurrent one still gets memory of its own.
package scratch

import (
	"sync"
	"sync/atomic"
)

// Pool is a sync.Pool of *T, making a zero T when it is empty. Its zero
// value is ready to use.
type Pool[T any] struct {
	p sync.Pool
}

// Get returns a *T from the pool, or a new zero one.
func (p *Pool[T]) Get() *T {
	if x, _ := p.p.Get().(*T); x != nil {
		return x
	}
	return new(T)
}

// Put gives x back to the pool.
func (p *Pool[T]) Put(x *T) { p.p.Put(x) }

// Slot holds at most one *T of its owner. Its zero value is empty.
type Slot[T any] struct {
	v atomic.Pointer[T]
}

// Get returns the slot's value and empties the slot, or, when the slot is
// empty (a concurrent caller holds its value), one from pool.
func (s *Slot[T]) Get(pool *Pool[T]) *T {
	if x := s.v.Swap(nil); x != nil {
		return x
	}
	return pool.Get()
}

// Peek returns the slot's value without taking it (nil when empty), for
// tests.
func (s *Slot[T]) Peek() *T { return s.v.Load() }

// Put puts x in the slot, or in pool when the slot holds another value.
func (s *Slot[T]) Put(pool *Pool[T], x *T) {
	if !s.v.CompareAndSwap(nil, x) {
		pool.Put(x)
	}
}
