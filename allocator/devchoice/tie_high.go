//go:build numaplace_hightie

package devchoice

const lowFirst = false // the tie-break: the highest device indices first (rank.go)
