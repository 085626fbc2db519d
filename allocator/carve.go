package allocator

// carver hands out slices cut from chunks of chunk elements it allocates:
// one allocation serves several allocations' CPU words or GPU IDs. A slice
// cut is never cut again (the chunk's rest moves on), and its capacity is
// its length, so an append to it allocates afresh: the slices are as
// independent as if each had been made alone, and a chunk is garbage once
// every slice cut from it is. A live slice keeps its chunk alive: memory
// is at most chunk elements per live slice, linear in the live
// allocations. A clone of a resource starts a carver of its own (never
// cutting the chunk its original cuts).
type carver[T any] struct {
	rest []T
}

// cut returns a zeroed slice of n elements, from the current chunk when it
// has n left, from a new chunk of max(chunk, n) elements otherwise.
func (c *carver[T]) cut(n, chunk int) []T {
	if n > len(c.rest) {
		if n*2 > chunk { // a large slice is made alone
			return make([]T, n)
		}
		c.rest = make([]T, chunk)
	}
	s := c.rest[:n:n]
	c.rest = c.rest[n:]
	return s
}
