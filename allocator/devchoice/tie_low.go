//go:build !numaplace_hightie

package devchoice

const lowFirst = true // the tie-break: the lowest device indices first (rank.go)
