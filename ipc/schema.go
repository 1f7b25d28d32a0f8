package ipc

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// A message's fields, in wire order, are the exported fields of its struct,
// each with an ipc tag:
//
//	Fanouts []int32 `ipc:"fanouts,max=MaxFanouts,atleast=-1"`
//
// The tag's first item is the field's wire name, in snake_case: the name
// docs/protocol.md and the Python client use. The Go type gives the
// encoding (little-endian throughout):
//
//	uint8, uint16, uint32, uint64   u8, u16, u32, u64 (Code is a uint16)
//	int32, int64                    i32, i64
//	bool                            u8, 0 or 1
//	string                          u16 byte count, UTF-8 bytes
//	[]byte                          u16 byte count, the bytes
//	[N]byte                         N bytes
//	struct                          its own tagged fields, inline
//	[]T                             u16 count, then each T
//
// Options, after the name, comma-separated:
//
//	max=L      a list, []byte or string: the most entries the decoder
//	           accepts (more is CodeLimit). L is a Limits field (MaxList,
//	           MaxFanouts, MaxString) or a constant (MaxDims, HandleSize);
//	           the encoder also refuses more than a constant. The default is
//	           MaxString for a string and MaxList for anything else.
//	atleast=N  a signed integer, or a list of them: a value below N is
//	           malformed (CodeBadMessage) on both sides.
//	limit=L    an unsigned integer: a value above the Limits field L is
//	           refused by the decoder with CodeLimit.
//	len=A|B    a []byte: the only lengths allowed (CodeBadMessage), on both
//	           sides; A and B are numbers or HandleSize.
//
// Any other tag, a field without one, or an option on a type it does not
// fit panics when the package initialises (TestSchemaTags shows each case),
// so a bad tag fails every test of the package. Rules that tie fields
// together (Opened's slot layout) stay Go methods: a message with a
// check() *ProtocolError method has it run after encoding and decoding.
//
// Decoding checks a list's count against its max and against the bytes
// left in the payload (count times the smallest encoding of an entry)
// before allocating it; an empty list decodes as nil.

// wire is the encoding of one field.
type wire uint8

const (
	wU8 wire = iota + 1
	wU16
	wU32
	wU64
	wI32
	wI64
	wBool
	wStr
	wBytes  // u16 count + bytes
	wFixed  // [N]byte
	wStruct // inline struct
	wList   // u16 count + entries
)

var wireNames = [...]string{wU8: "u8", wU16: "u16", wU32: "u32", wU64: "u64", wI32: "i32", wI64: "i64",
	wBool: "bool", wStr: "str", wBytes: "bytes", wFixed: "fixed", wStruct: "struct", wList: "list"}

// bound is a count or value bound: a Limits field or a constant.
type bound struct {
	limit string // "MaxList", "MaxFanouts", "MaxString", "MaxBatchSize"; "" for a constant
	n     int
}

// boundNames are the names a max=, limit= or len= option may use.
var boundNames = map[string]bound{
	"MaxList": {limit: "MaxList"}, "MaxFanouts": {limit: "MaxFanouts"},
	"MaxString": {limit: "MaxString"}, "MaxBatchSize": {limit: "MaxBatchSize"},
	"MaxDims": {n: MaxDims}, "HandleSize": {n: HandleSize},
}

func (b bound) value(l *Limits) int {
	switch b.limit {
	case "MaxList":
		return l.MaxList
	case "MaxFanouts":
		return l.MaxFanouts
	case "MaxString":
		return l.MaxString
	case "MaxBatchSize":
		return l.MaxBatchSize
	}
	return b.n
}

// field is one compiled field: where it is in the struct and how it travels.
type field struct {
	name    string // wire name
	what    string // path for error messages, e.g. "dataset.splits.name"
	index   int    // struct field index (-1 for a list entry)
	wire    wire
	max     bound   // wList, wBytes, wStr: most entries
	hasMin  bool    // atleast= given
	min     int64   // atleast=
	limit   *bound  // limit=
	lens    []int   // len=
	n       int     // wFixed: bytes
	elem    *field  // wList: the entry
	sub     []field // wStruct, and wList of structs through elem
	goType  reflect.Type
	minWire int // fewest bytes the field takes on the wire
}

// compileStruct returns t's fields in wire order, or an error naming the
// first bad tag.
func compileStruct(t reflect.Type, prefix string) ([]field, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s is not a struct", t)
	}
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			return nil, fmt.Errorf("%s.%s: unexported fields cannot travel", t.Name(), sf.Name)
		}
		tag, ok := sf.Tag.Lookup("ipc")
		if !ok {
			return nil, fmt.Errorf("%s.%s: no ipc tag", t.Name(), sf.Name)
		}
		f, err := compileField(sf.Type, tag, prefix)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), sf.Name, err)
		}
		f.index = i
		fs = append(fs, f)
	}
	return fs, nil
}

func compileField(t reflect.Type, tag, prefix string) (field, error) {
	items := strings.Split(tag, ",")
	name := items[0]
	if !validName(name) {
		return field{}, fmt.Errorf("wire name %q is not snake_case", name)
	}
	f := field{name: name, what: prefix + name}
	if err := f.setType(t); err != nil {
		return field{}, err
	}
	for _, opt := range items[1:] {
		key, val, _ := strings.Cut(opt, "=")
		if err := f.setOption(key, val); err != nil {
			return field{}, fmt.Errorf("option %q: %w", opt, err)
		}
	}
	return f, nil
}

func validName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

var kindWire = map[reflect.Kind]wire{
	reflect.Uint8: wU8, reflect.Uint16: wU16, reflect.Uint32: wU32, reflect.Uint64: wU64,
	reflect.Int32: wI32, reflect.Int64: wI64, reflect.Bool: wBool, reflect.String: wStr,
}

var wireSize = [...]int{wU8: 1, wU16: 2, wU32: 4, wU64: 8, wI32: 4, wI64: 8, wBool: 1, wStr: 2, wBytes: 2, wList: 2}

func (f *field) setType(t reflect.Type) error {
	f.goType = t
	if w, ok := kindWire[t.Kind()]; ok {
		f.wire, f.minWire = w, wireSize[w]
		if w == wStr {
			f.max = bound{limit: "MaxString"}
		}
		return nil
	}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		f.wire, f.minWire, f.max = wBytes, 2, bound{limit: "MaxList"}
	case t.Kind() == reflect.Array && t.Elem().Kind() == reflect.Uint8:
		f.wire, f.n, f.minWire = wFixed, t.Len(), t.Len()
	case t.Kind() == reflect.Struct:
		sub, err := compileStruct(t, f.what+".")
		if err != nil {
			return err
		}
		f.wire, f.sub = wStruct, sub
		for _, s := range sub {
			f.minWire += s.minWire
		}
	case t.Kind() == reflect.Slice:
		elem := field{name: f.name, what: f.what, index: -1}
		if err := elem.setType(t.Elem()); err != nil {
			return err
		}
		f.wire, f.elem, f.minWire, f.max = wList, &elem, 2, bound{limit: "MaxList"}
	default:
		return fmt.Errorf("type %s has no wire encoding", t)
	}
	return nil
}

func (f *field) setOption(key, val string) error {
	switch key {
	case "max":
		b, ok := boundNames[val]
		if !ok || b.limit == "MaxBatchSize" {
			return fmt.Errorf("unknown bound %q", val)
		}
		if f.wire != wList && f.wire != wBytes && f.wire != wStr {
			return fmt.Errorf("max= on a %s", wireNames[f.wire])
		}
		if f.wire == wStr && val != "MaxString" {
			return fmt.Errorf("a string's max is MaxString")
		}
		f.max = b
	case "atleast":
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return err
		}
		t := f
		if f.wire == wList {
			t = f.elem
		}
		if t.wire != wI32 && t.wire != wI64 {
			return fmt.Errorf("atleast= on a %s", wireNames[t.wire])
		}
		t.hasMin, t.min = true, n
	case "limit":
		b, ok := boundNames[val]
		if !ok || b.limit == "" {
			return fmt.Errorf("limit= takes a Limits field, not %q", val)
		}
		if f.wire != wU8 && f.wire != wU16 && f.wire != wU32 && f.wire != wU64 {
			return fmt.Errorf("limit= on a %s", wireNames[f.wire])
		}
		f.limit = &b
	case "len":
		if f.wire != wBytes {
			return fmt.Errorf("len= on a %s", wireNames[f.wire])
		}
		for _, s := range strings.Split(val, "|") {
			n, err := strconv.Atoi(s)
			if b, ok := boundNames[s]; ok && b.limit == "" {
				n, err = b.n, nil
			}
			if err != nil || n < 0 || n > 0xffff {
				return fmt.Errorf("length %q", s)
			}
			f.lens = append(f.lens, n)
		}
	default:
		return fmt.Errorf("unknown option")
	}
	return nil
}

// lenOK reports whether n is one of f's allowed lengths (any without len=).
func (f *field) lenOK(n int) bool {
	if f.lens == nil {
		return true
	}
	for _, l := range f.lens {
		if n == l {
			return true
		}
	}
	return false
}
