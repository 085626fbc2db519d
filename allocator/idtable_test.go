package allocator

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestIDTableAgainstMap checks the ID table against a Go map under random
// inserts (through probe and insertAt, as Allocate does, and through set),
// removals (through probe and deleteAt, as Release does) and lookups, on
// IDs from a small set so that probes collide and removals move IDs back.
func TestIDTableAgainstMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tab := newIDTable()
		model := map[string]int32{}
		id := rapid.Custom(func(t *rapid.T) string { return fmt.Sprint("id-", rapid.IntRange(0, 40).Draw(t, "n")) })
		for step := range rapid.IntRange(1, 300).Draw(rt, "steps") {
			x := id.Draw(rt, "id")
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0: // Allocate: probe, then insert at the position found
				pos, hash, found := tab.probe(x)
				_, want := model[x]
				require.Equal(rt, want, found, "step %d: probe %s", step, x)
				if !found {
					tab.insertAt(pos, hash, x, int32(step))
					model[x] = int32(step)
				}
			case 1: // Claim, Restore
				tab.set(x, int32(step))
				model[x] = int32(step)
			case 2: // Release
				pos, _, found := tab.probe(x)
				_, want := model[x]
				require.Equal(rt, want, found, "step %d: probe %s", step, x)
				if found {
					tab.deleteAt(pos)
					delete(model, x)
				}
			case 3:
				_, want := model[x]
				require.Equal(rt, want, tab.delete(x))
				delete(model, x)
			}
			require.Equal(rt, len(model), tab.len())
			for k, v := range model {
				got, ok := tab.get(k)
				require.True(rt, ok, "step %d: %s is live", step, k)
				require.Equal(rt, v, got)
			}
			require.Equal(rt, model, maps.Collect(tab.all()))
			require.LessOrEqual(rt, 4*tab.len(), len(tab.slots), "at most a quarter full")
		}
		c := tab.clone()
		c.set("other", 1)
		_, ok := tab.get("other")
		require.False(rt, ok, "a clone is independent")
	})
}

// TestHashIDReadsEveryByte: hashID of an ID of each length from 0 to 100
// changes when any one byte of it changes (every byte is read, whatever
// path its length takes), and differs across the lengths of IDs of one
// repeated byte; two tables' seeds differ.
func TestHashIDReadsEveryByte(t *testing.T) {
	tab := newIDTable()
	require.NotEqual(t, tab.seed, newIDTable().seed)
	seen := map[uint64]int{}
	for n := 0; n <= 100; n++ {
		id := []byte(strings.Repeat("a", n))
		h := hashID(tab.seed, string(id))
		prev, dup := seen[h]
		require.False(t, dup, "length %d hashes as length %d", n, prev)
		seen[h] = n
		for i := range id {
			id[i] = 'b'
			require.NotEqual(t, h, hashID(tab.seed, string(id)), "length %d: byte %d not read", n, i)
			id[i] = 'a'
		}
	}
}
