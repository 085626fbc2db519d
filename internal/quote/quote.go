// Package quote writes outside values into error messages safely: escaped,
// as strconv.Quote does, and cut to a short prefix, so that a megabyte of
// garbage or a control character in a file, a line or an annotation gives a
// readable one-line error.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// MaxBytes is the longest prefix of a value, in bytes, that [Short] quotes.
const MaxBytes = 64

// Short returns s quoted as strconv.Quote does (invalid UTF-8 and control
// characters escaped) when it is at most MaxBytes long; a longer s is cut
// at a character boundary at or below MaxBytes bytes and its quoted prefix
// is followed by "... (N bytes)", such as `"0-3,x,x,x"... (1048576 bytes)`.
func Short(s string) string {
	if len(s) <= MaxBytes {
		return strconv.Quote(s)
	}
	cut := MaxBytes
	for cut > MaxBytes-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// Bare is [Short] without the surrounding quotation marks of the prefix,
// for values that are part of a longer phrase, such as a device name
// "rdma/mlx5_0".
func Bare(s string) string {
	q := Short(s)
	end := len(q) - 1
	if len(s) > MaxBytes {
		for end > 0 && q[end] != '"' {
			end--
		}
		return q[1:end] + q[end+1:]
	}
	return q[1:end]
}

// Cut returns s whole when it is at most MaxBytes long, else its prefix cut
// at a character boundary at or below MaxBytes bytes followed by
// "... (N bytes)", without escaping: for text that is already escaped, such
// as a JSON path built of plain names and [Short] keys.
func Cut(s string) string {
	if len(s) <= MaxBytes {
		return s
	}
	cut := MaxBytes
	for cut > MaxBytes-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
