// Package strictjson decodes JSON from outside the process strictly:
// exactly one value; object keys matched case-sensitively against the
// target's fields (encoding/json matches them case-insensitively); an
// unknown key is an error naming it and suggesting the known field one edit
// away (Damerau–Levenshtein distance 1, or equal but for case) or named by
// an alias; a duplicate key and a string that is not valid UTF-8 (raw bytes
// or an unpaired \u surrogate escape, both of which encoding/json silently
// turns into U+FFFD) are errors. A lenient mode ignores unknown keys, for
// input written by a newer version, but still refuses keys that differ
// from a known field only in case.
//
// The common call:
//
//	var s Spec
//	if err := strictjson.Decode(data, &s, strictjson.Options{}); err != nil {
//		return err // such as `unknown field "gpu" in numaNodes[0]; did you mean "gpus"?`
//	}
//
// The checks run on a scanner of the package's own, which allocates nothing
// per value (a caller's Options.CountItems can so refuse a document over
// its size caps while it is read, at the cost of a few kilobytes); syntax
// errors keep encoding/json's words and types. [TopString] reads one
// top-level string field of a document that may be refused otherwise (the
// id of a bad line, for its error answer).
//
// The value is then decoded by encoding/json, so its struct tags, its
// Unmarshaler and TextUnmarshaler implementations and its type errors apply
// unchanged; a value whose type has its own UnmarshalJSON or UnmarshalText
// is not looked into, except for the duplicate-key and UTF-8 checks, which
// apply everywhere.
package strictjson
