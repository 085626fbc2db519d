package scratch

import "testing"

// TestSlotKeepsOneAndPoolsTheRest checks that a slot gives back the value
// put in it, that a second Get while the first value is out comes from the
// pool (another value), and that a Put into a full slot goes to the pool.
func TestSlotKeepsOneAndPoolsTheRest(t *testing.T) {
	var pool Pool[[4]int]
	var s Slot[[4]int]
	a := s.Get(&pool)
	a[0] = 1
	b := s.Get(&pool) // the slot is empty: from the pool
	if a == b {
		t.Fatal("two Gets returned the same value")
	}
	s.Put(&pool, a)
	s.Put(&pool, b) // full: to the pool
	if got := s.Get(&pool); got != a || got[0] != 1 {
		t.Fatalf("Get after Put returned %p %v, want %p", got, got, a)
	}
}
