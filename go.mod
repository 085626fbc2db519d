module github.com/numaplace/numaplace

go 1.26

require github.com/bits-and-blooms/bitset v1.29.0
