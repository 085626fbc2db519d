package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/numaplace/numaplace/internal/quote"
)

// The categories of [Error]; errors.Is matches them.
var (
	// ErrUnknownField is an object key that names no field of the target.
	ErrUnknownField = errors.New("unknown field")
	// ErrDuplicateField is an object key that appears twice in one object.
	ErrDuplicateField = errors.New("duplicate field")
	// ErrInvalidUTF8 is a string (a key or a value) that is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("not valid UTF-8")
	// ErrSyntax is input that is not one JSON value: malformed, empty, too
	// deeply nested, or followed by more data.
	ErrSyntax = errors.New("malformed JSON")
	// ErrTrailingData is a document with more after its value; it comes
	// with [ErrSyntax].
	ErrTrailingData = errors.New("data after the JSON value")
)

// MaxDepth is the deepest nesting of arrays and objects Decode accepts.
const MaxDepth = 1000

// Options tune [Decode].
type Options struct {
	// AllowUnknownFields ignores object keys that name no field of the
	// target (the lenient mode, for input written by a newer version). A
	// key that equals a known field but for case is still an error.
	AllowUnknownFields bool
	// Aliases maps names people write for a field (such as
	// "numaTopologyPolicy", the annotation's name) to the field's JSON
	// name (such as "policy"), so that the error suggests it. An alias is
	// never accepted as the field.
	Aliases map[string]string
	// CountItems, when set, is called before each item of an array that is
	// the value of a field of the top-level object, with the field's name
	// and the item's position (0, 1, ...), so that a caller can refuse a
	// document over its size caps while it is read, before anything is
	// decoded; an error it returns stops Decode and is returned in an
	// *Error naming the item (errors.As and errors.Is find it).
	CountItems func(field string, i int) error
}

// Error is a strict-decoding failure. It unwraps to its category
// ([ErrUnknownField], [ErrDuplicateField], [ErrInvalidUTF8], [ErrSyntax])
// or to the encoding/json error behind it.
type Error struct {
	// Path is where the problem is, such as "numaNodes[2]" or
	// "gpus[0].numaNode"; "" for the top-level value. Keys in it that are
	// not plain names, or longer than quote.MaxBytes, are quoted, escaped
	// and cut; Error cuts the whole path to quote.MaxBytes bytes.
	Path string
	// Field is the object key concerned ("" when none).
	Field string
	// Suggestions are the known fields the unknown Field may have meant.
	Suggestions []string
	// Err is the category or the underlying error.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var sb strings.Builder
	switch {
	case errors.Is(e.Err, ErrUnknownField), errors.Is(e.Err, ErrDuplicateField):
		sb.WriteString(e.Err.Error() + " " + quote.Short(e.Field))
		if e.Path != "" {
			sb.WriteString(" in " + quote.Cut(e.Path))
		}
		if len(e.Suggestions) > 0 {
			q := make([]string, len(e.Suggestions))
			for i, s := range e.Suggestions {
				q[i] = strconv.Quote(s)
			}
			sb.WriteString("; did you mean " + strings.Join(q, " or ") + "?")
		}
	case errors.Is(e.Err, ErrInvalidUTF8):
		what := "a string"
		if e.Field != "" {
			what = "the field name " + quote.Short(e.Field)
		}
		if e.Path != "" {
			what += " at " + quote.Cut(e.Path)
		}
		sb.WriteString(what + " is " + e.Err.Error())
	default:
		if e.Path != "" {
			sb.WriteString(quote.Cut(e.Path) + ": ")
		}
		sb.WriteString(e.Err.Error())
	}
	return sb.String()
}

// Unwrap returns the category or the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Decode parses data, which must hold exactly one JSON value, into v (a
// non-nil pointer), with the checks of the package: keys case-sensitive,
// unknown keys refused (unless opts.AllowUnknownFields), duplicate keys and
// invalid UTF-8 refused. Errors are *[Error], or the *json.UnmarshalTypeError
// and similar errors of encoding/json (wrapped in an *Error naming the
// path).
func Decode(data []byte, v any, opts Options) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &Error{Err: fmt.Errorf("strictjson.Decode needs a non-nil pointer, got %T", v)}
	}
	w := walker{data: data, opts: opts}
	if err := w.value(rv.Type().Elem(), 0); err != nil {
		return err
	}
	if w.peek() != 0 || w.pos < len(w.data) {
		return &Error{Err: fmt.Errorf("%w: %w", ErrSyntax, ErrTrailingData)}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &Error{Err: err} // such as a *json.UnmarshalTypeError, which names the field
	}
	return nil
}

// walker checks one document against a type with a scanner of its own
// (encoding/json's Decoder.Token allocates for every value it returns, so
// a document over the caller's caps would cost a multiple of its size to
// refuse). The path to the value being read is a stack of keys and
// indices, written out only for an error, so that reading allocates
// nothing per item but the keys that hold escapes.
type walker struct {
	data  []byte
	pos   int
	opts  Options
	stack []step
}

// step is one level of a path: an object key or an array index.
type step struct {
	key   []byte // the key's text (a slice of the data when unescaped)
	index int    // -1 for a key
}

// path writes out the current path, such as "gpus[3].numaNode".
func (w *walker) path() string {
	var sb strings.Builder
	for _, st := range w.stack {
		if st.index >= 0 {
			sb.WriteString("[" + strconv.Itoa(st.index) + "]")
			continue
		}
		sb.WriteString(join(sb.Len() == 0, string(st.key)))
	}
	return sb.String()
}

func (w *walker) fail(field string, sugg []string, err error) *Error {
	return &Error{Path: w.path(), Field: field, Suggestions: sugg, Err: err}
}

// syntax is a malformed-JSON error at the current position: it wraps
// io.ErrUnexpectedEOF at the end of the data, else the *json.SyntaxError
// encoding/json gives for the data (the same fault: both read the same
// grammar), or the scanner's own words should encoding/json not find it.
func (w *walker) syntax(format string, args ...any) *Error {
	if w.pos >= len(w.data) {
		return &Error{Err: fmt.Errorf("%w: %w", ErrSyntax, io.ErrUnexpectedEOF)}
	}
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(w.data, new(struct{})), &se) {
		return &Error{Err: fmt.Errorf("%w: %w", ErrSyntax, se)}
	}
	return &Error{Err: fmt.Errorf("%w: %s (offset %d)", ErrSyntax, fmt.Sprintf(format, args...), w.pos)}
}

func (w *walker) skipBlank() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after blanks (0 at the end).
func (w *walker) peek() byte {
	w.skipBlank()
	if w.pos >= len(w.data) {
		return 0
	}
	return w.data[w.pos]
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

// value checks one value against type t (nil: any value).
func (w *walker) value(t reflect.Type, depth int) error {
	switch c := w.peek(); {
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return w.fail("", nil, fmt.Errorf("%w: nested deeper than %d levels", ErrSyntax, MaxDepth))
		}
		w.pos++
		if c == '{' {
			return w.object(t, depth+1)
		}
		return w.array(t, depth+1)
	case c == '"':
		_, valid, err := w.str()
		if err != nil {
			return err
		}
		if !valid {
			return w.fail("", nil, ErrInvalidUTF8)
		}
		return nil
	case c == '-' || '0' <= c && c <= '9':
		return w.number()
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	default:
		return w.syntax("invalid character %s looking for beginning of value", quoteChar(c))
	}
}

func (w *walker) literal(lit string) error {
	if !bytes.HasPrefix(w.data[w.pos:], []byte(lit)) {
		for i := 0; i < len(lit) && w.pos < len(w.data) && w.data[w.pos] == lit[i]; i++ {
			w.pos++
		}
		if w.pos >= len(w.data) {
			return w.syntax("")
		}
		return w.syntax("invalid character %s in literal %s", quoteChar(w.data[w.pos]), lit)
	}
	w.pos += len(lit)
	return nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (w *walker) number() error {
	d := w.data
	digits := func() bool {
		start := w.pos
		for w.pos < len(d) && '0' <= d[w.pos] && d[w.pos] <= '9' {
			w.pos++
		}
		return w.pos > start
	}
	bad := func(where string) error {
		if w.pos >= len(d) {
			return w.syntax("")
		}
		return w.syntax("invalid character %s %s", quoteChar(d[w.pos]), where)
	}
	if d[w.pos] == '-' {
		w.pos++
	}
	switch {
	case w.pos < len(d) && d[w.pos] == '0':
		w.pos++
	case !digits():
		return bad("in numeric literal")
	}
	if w.pos < len(d) && d[w.pos] == '.' {
		w.pos++
		if !digits() {
			return bad("after decimal point in numeric literal")
		}
	}
	if w.pos < len(d) && (d[w.pos] == 'e' || d[w.pos] == 'E') {
		w.pos++
		if w.pos < len(d) && (d[w.pos] == '+' || d[w.pos] == '-') {
			w.pos++
		}
		if !digits() {
			return bad("in exponent of numeric literal")
		}
	}
	return nil
}

// str reads the string at w.pos (its opening quote) and returns its raw
// bytes with the quotes, whether it is valid UTF-8 with every \u surrogate
// escape paired, or a syntax error.
func (w *walker) str() (raw []byte, valid bool, err error) {
	d := w.data
	start := w.pos
	w.pos++
	plain := w.pos
	valid = true
	for {
		if w.pos >= len(d) {
			return nil, false, w.syntax("")
		}
		c := d[w.pos]
		switch {
		case c == '"':
			if valid && !utf8.Valid(d[plain:w.pos]) {
				valid = false
			}
			w.pos++
			return d[start:w.pos], valid, nil
		case c < 0x20:
			return nil, false, w.syntax("invalid character %s in string literal", quoteChar(c))
		case c == '\\':
			if valid && !utf8.Valid(d[plain:w.pos]) {
				valid = false
			}
			w.pos++
			if w.pos >= len(d) {
				return nil, false, w.syntax("")
			}
			switch d[w.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				w.pos++
			case 'u':
				r, ok := hex4(d[w.pos+1:])
				if !ok {
					w.pos++
					for i := 0; i < 4 && w.pos < len(d) && isHex(d[w.pos]); i++ {
						w.pos++
					}
					if w.pos >= len(d) {
						return nil, false, w.syntax("")
					}
					return nil, false, w.syntax("invalid character %s in \\u hexadecimal character escape", quoteChar(d[w.pos]))
				}
				w.pos += 5
				switch {
				case 0xDC00 <= r && r <= 0xDFFF:
					valid = false // a low surrogate alone
				case 0xD800 <= r && r <= 0xDBFF:
					lo, ok := rune(0), false
					if w.pos+1 < len(d) && d[w.pos] == '\\' && d[w.pos+1] == 'u' {
						lo, ok = hex4(d[w.pos+2:])
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						valid = false // the escape after it, if any, is read next
					} else {
						w.pos += 6
					}
				}
			default:
				return nil, false, w.syntax("invalid character %s in string escape code", quoteChar(d[w.pos]))
			}
			plain = w.pos
		default:
			w.pos++
		}
	}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// key returns the text of the object key raw (with its quotes): its bytes
// when it holds no escape, decoded otherwise.
func key(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var k string
	_ = json.Unmarshal(raw, &k) // valid: str read it
	return k
}

// smallObject is the number of keys an object may have before its keys are
// tracked in a map rather than a slice.
const smallObject = 16

func (w *walker) object(t reflect.Type, depth int) error {
	t = target(t)
	var fields *structFields
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	if w.peek() == '}' {
		w.pos++
		return nil
	}
	var few [smallObject][]byte
	seenFew := few[:0]
	var seen map[string]bool
	for {
		if c := w.peek(); c != '"' {
			return w.syntax("invalid character %s looking for beginning of object key string", quoteChar(c))
		}
		raw, valid, err := w.str()
		if err != nil {
			return err
		}
		if !valid {
			return w.fail(key(raw), nil, ErrInvalidUTF8)
		}
		kb := raw[1 : len(raw)-1]
		if bytes.IndexByte(raw, '\\') >= 0 {
			kb = []byte(key(raw))
		}
		if seen == nil && len(seenFew) == smallObject {
			seen = make(map[string]bool, 2*smallObject)
			for _, k := range seenFew {
				seen[string(k)] = true
			}
		}
		if seen != nil {
			if seen[string(kb)] {
				return w.fail(string(kb), nil, ErrDuplicateField)
			}
			seen[string(kb)] = true
		} else {
			for _, k := range seenFew {
				if bytes.Equal(k, kb) {
					return w.fail(string(kb), nil, ErrDuplicateField)
				}
			}
			seenFew = append(seenFew, kb)
		}
		child := elem
		if fields != nil {
			ft, ok := fields.byName[string(kb)]
			if !ok {
				k := string(kb)
				sugg := fields.suggest(k, w.opts.Aliases)
				if !w.opts.AllowUnknownFields || fields.foldEqual(k) {
					return w.fail(k, sugg, ErrUnknownField)
				}
			}
			child = ft
		}
		if c := w.peek(); c != ':' {
			return w.syntax("invalid character %s after object key", quoteChar(c))
		}
		w.pos++
		w.stack = append(w.stack, step{key: kb, index: -1})
		if err := w.value(child, depth); err != nil {
			return err
		}
		w.stack = w.stack[:len(w.stack)-1]
		switch c := w.peek(); c {
		case ',':
			w.pos++
		case '}':
			w.pos++
			return nil
		default:
			return w.syntax("invalid character %s after object key:value pair", quoteChar(c))
		}
	}
}

func (w *walker) array(t reflect.Type, depth int) error {
	t = target(t)
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	// The items of an array that is a field of the top-level object are
	// counted by the caller's CountItems.
	field, count := "", false
	if w.opts.CountItems != nil && len(w.stack) == 1 && w.stack[0].index < 0 {
		field, count = string(w.stack[0].key), true
	}
	if w.peek() == ']' {
		w.pos++
		return nil
	}
	for i := 0; ; i++ {
		w.stack = append(w.stack, step{index: i})
		if count {
			if err := w.opts.CountItems(field, i); err != nil {
				return w.fail("", nil, err)
			}
		}
		if err := w.value(elem, depth); err != nil {
			return err
		}
		w.stack = w.stack[:len(w.stack)-1]
		switch c := w.peek(); c {
		case ',':
			w.pos++
		case ']':
			w.pos++
			return nil
		default:
			return w.syntax("invalid character %s after array element", quoteChar(c))
		}
	}
}

// join writes the field key after a path (first: at its start).
func join(first bool, key string) string {
	if !isPlainName(key) || len(key) > quote.MaxBytes {
		return "[" + quote.Short(key) + "]"
	}
	if first {
		return key
	}
	return "." + key
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || c == '/' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// target returns the type whose keys and items are checked for t: t
// without pointers, or nil when t accepts anything (nil, an interface, a
// type with its own UnmarshalJSON or UnmarshalText).
func target(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
			t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// structFields are the JSON names of a struct's fields and their types.
type structFields struct {
	byName map[string]reflect.Type
	names  []string // sorted
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]reflect.Type{}}
	collect(t, f, 0)
	for n := range f.byName {
		f.names = append(f.names, n)
	}
	slices.Sort(f.names)
	fieldCache.Store(t, f)
	return f
}

// collect adds the fields of struct t, as encoding/json names them
// (embedded structs without a tag flattened, "-" skipped).
func collect(t reflect.Type, f *structFields, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collect(et, f, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.byName[name]; !dup {
			f.byName[name] = sf.Type
		}
	}
}

// foldEqual reports whether key equals a known field but for case.
func (f *structFields) foldEqual(key string) bool {
	for _, n := range f.names {
		if strings.EqualFold(n, key) {
			return true
		}
	}
	return false
}

// suggest returns the known fields key may have meant (see [Suggest]).
func (f *structFields) suggest(key string, aliases map[string]string) []string {
	return Suggest(key, f.names, aliases)
}

// Suggest returns the names among known that key may have meant, sorted:
// the one equal to it but for case when there is one; otherwise those one
// edit away (Damerau–Levenshtein distance 1, ignoring case) and the one
// aliases maps it to (ignoring case), when that is among known.
func Suggest(key string, known []string, aliases map[string]string) []string {
	for _, n := range known {
		if strings.EqualFold(n, key) {
			return []string{n}
		}
	}
	var out []string
	lk := strings.ToLower(key)
	for _, n := range known {
		if osaDistance(lk, strings.ToLower(n), 1) <= 1 {
			out = append(out, n)
		}
	}
	for a, n := range aliases {
		if strings.EqualFold(a, key) && slices.Contains(known, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// osaDistance returns the optimal string alignment distance (Damerau–
// Levenshtein with adjacent transpositions) between a and b, or limit+1
// when it is above limit.
func osaDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	if prev[len(rb)] > limit {
		return limit + 1
	}
	return prev[len(rb)]
}

// validString reports whether the raw JSON string token in raw (after any
// separators) is valid UTF-8 with every \u surrogate escape paired.
func validString(raw []byte) bool {
	i := bytes.IndexByte(raw, '"')
	if i < 0 {
		return true
	}
	s := raw[i:]
	if !utf8.Valid(s) {
		return false
	}
	for k := 0; k < len(s); k++ {
		if s[k] != '\\' {
			continue
		}
		k++
		if k >= len(s) || s[k] != 'u' {
			continue
		}
		r, ok := hex4(s[k+1:])
		if !ok {
			continue // a syntax error, reported by encoding/json
		}
		k += 4
		switch {
		case 0xDC00 <= r && r <= 0xDFFF:
			return false // a low surrogate alone
		case 0xD800 <= r && r <= 0xDBFF:
			if k+6 >= len(s) || s[k+1] != '\\' || s[k+2] != 'u' {
				return false
			}
			lo, ok := hex4(s[k+3:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			k += 6
		}
	}
	return true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(v), err == nil
}

// TopString returns the value of the field key of the top-level object of
// data when it can be read there although the document as a whole may be
// refused (a repeated or unknown field, invalid UTF-8 or a type error
// elsewhere, or malformed JSON after it): the field must be a string, valid
// UTF-8, and given once in the part of data that is well-formed. It reports
// false otherwise (no such field, not a string, not valid UTF-8, given
// twice, data not an object). It reads data once, without decoding the
// other values.
func TopString(data []byte, key string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var val string
	found, ok := false, false
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			break
		}
		raw := data[start:dec.InputOffset()]
		if d, isDelim := tok.(json.Delim); isDelim {
			if !skip(dec, d) {
				if k == key {
					found, ok = true, false
				}
				break
			}
		}
		if k != key {
			continue
		}
		if found {
			return "", false // given twice
		}
		s, isString := tok.(string)
		found, ok, val = true, isString && validString(raw), s
	}
	if !ok {
		return "", false
	}
	return val, true
}

// skip consumes the rest of the array or object opened by d; false when the
// data ends or is malformed first.
func skip(dec *json.Decoder, d json.Delim) bool {
	if d != '{' && d != '[' {
		return true
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return true
}
