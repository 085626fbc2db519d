//go:build numaplace_hightie

package devchoice

// For tests only: the tie-break flipped, to show it is one definition.
const lowFirst = false // the tie-break: the highest device indices first (rank.go)
