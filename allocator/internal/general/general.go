// Package general holds the one test-only switch that routes every fast
// path of package allocator, of its covering search (allocator/internal/cover)
// and of package allocator/devchoice to the general path it shortcuts.
//
// Every shortcut in those packages (a one-node test, a direct load, a
// packed key, a word-sized path, a direct decision) must give exactly what
// its general path gives. With [On] set, each of them is skipped, so a
// test can run the same request stream twice, switch off and switch on,
// and require identical results and errors (the differential in
// allocator's general_test.go). Nothing outside tests sets On.
package general

// On, when true, makes every fast path of allocator, its covering search
// and devchoice take its general path. It is false in production. Tests set it with [Set]; it
// must not change while any decision runs (a test that sets it does not
// run in parallel with other tests of the package).
var On bool

// Set sets [On] to on and returns a function that restores the value it
// had before, for t.Cleanup or defer.
func Set(on bool) (restore func()) {
	old := On
	On = on
	return func() { On = old }
}
