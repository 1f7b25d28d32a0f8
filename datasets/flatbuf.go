package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A bounds-checked reader of the flatbuffers that hold Arrow IPC metadata,
// for checkArrowFile: it follows the same offsets as the flatbuffers runtime
// arrow-go uses, and checks each against its buffer first.

// fbTable is a flatbuffers table in b whose vtable has been bounds-checked.
// Its accessors read what the flatbuffers runtime reads (a field the vtable
// lists is read at table start + its offset, whatever the table's declared
// size) but check every offset they follow against b. A scalar whose bytes
// would lie outside b reads as -1 (0xff for a byte), a value every check
// here refuses.
type fbTable struct {
	b         []byte
	pos       int64
	vt, vtLen int64
}

// maxFBOffset keeps offset sums far from overflow: flatbuffers are < 2 GiB.
const maxFBOffset = math.MaxInt32

func fbRoot(b []byte) (fbTable, error) {
	if len(b) < 4 || len(b) > maxFBOffset {
		return fbTable{}, fmt.Errorf("flatbuffer of %d bytes", len(b))
	}
	return fbTableAt(b, int64(binary.LittleEndian.Uint32(b)))
}

func fbTableAt(b []byte, pos int64) (fbTable, error) {
	n := int64(len(b))
	if pos < 0 || pos > n-4 {
		return fbTable{}, fmt.Errorf("table at %d is outside the %d-byte flatbuffer", pos, n)
	}
	vt := pos - int64(int32(binary.LittleEndian.Uint32(b[pos:])))
	if vt < 0 || vt > n-4 {
		return fbTable{}, fmt.Errorf("vtable of the table at %d is outside the flatbuffer", pos)
	}
	vtLen := int64(binary.LittleEndian.Uint16(b[vt:]))
	if vtLen < 4 || vtLen%2 != 0 || vtLen > n-vt {
		return fbTable{}, fmt.Errorf("table at %d: bad vtable of %d bytes", pos, vtLen)
	}
	return fbTable{b: b, pos: pos, vt: vt, vtLen: vtLen}, nil
}

// field returns where the value of field i (width bytes) lies in b: 0 when
// the vtable says the field is absent, -1 when it would lie outside b.
func (t fbTable) field(i int, width int64) int64 {
	slot := 4 + 2*int64(i)
	if slot+2 > t.vtLen {
		return 0
	}
	o := int64(binary.LittleEndian.Uint16(t.b[t.vt+slot:]))
	if o == 0 {
		return 0
	}
	if p := t.pos + o; p <= int64(len(t.b))-width {
		return p
	}
	return -1
}

func (t fbTable) u8(i int) byte {
	switch p := t.field(i, 1); {
	case p > 0:
		return t.b[p]
	case p < 0:
		return 0xff
	}
	return 0
}

func (t fbTable) i16(i int, def int16) int16 {
	switch p := t.field(i, 2); {
	case p > 0:
		return int16(binary.LittleEndian.Uint16(t.b[p:]))
	case p < 0:
		return -1
	}
	return def
}

func (t fbTable) i32(i int, def int32) int32 {
	switch p := t.field(i, 4); {
	case p > 0:
		return int32(binary.LittleEndian.Uint32(t.b[p:]))
	case p < 0:
		return -1
	}
	return def
}

func (t fbTable) i64(i int, def int64) int64 {
	switch p := t.field(i, 8); {
	case p > 0:
		return int64(binary.LittleEndian.Uint64(t.b[p:]))
	case p < 0:
		return -1
	}
	return def
}

// ref follows the offset in field i; ok is false when the field is absent.
func (t fbTable) ref(i int) (int64, bool, error) {
	p := t.field(i, 4)
	if p == 0 {
		return 0, false, nil
	}
	if p < 0 {
		return 0, false, fmt.Errorf("field %d of the table at %d lies outside the flatbuffer", i, t.pos)
	}
	target := p + int64(binary.LittleEndian.Uint32(t.b[p:]))
	if target > int64(len(t.b))-4 {
		return 0, false, fmt.Errorf("field %d of the table at %d points outside the flatbuffer", i, t.pos)
	}
	return target, true, nil
}

func (t fbTable) table(i int) (fbTable, bool, error) {
	p, ok, err := t.ref(i)
	if !ok || err != nil {
		return fbTable{}, ok, err
	}
	s, err := fbTableAt(t.b, p)
	return s, true, err
}

// vector returns the start and length of the vector in field i, elements of
// elem bytes each; an absent vector is empty.
func (t fbTable) vector(i int, elem int64) (start int64, n int, ok bool, err error) {
	p, ok, err := t.ref(i)
	if !ok || err != nil {
		return 0, 0, ok, err
	}
	l := int64(binary.LittleEndian.Uint32(t.b[p:]))
	if l > (int64(len(t.b))-p-4)/elem {
		return 0, 0, true, fmt.Errorf("vector of %d elements at %d does not fit the %d-byte flatbuffer", l, p, len(t.b))
	}
	return p + 4, int(l), true, nil
}

// vectorTable returns element j of a vector of tables starting at start.
func (t fbTable) vectorTable(start int64, j int) (fbTable, error) {
	q := start + 4*int64(j)
	if q > int64(len(t.b))-4 {
		return fbTable{}, errors.New("vector element outside the flatbuffer")
	}
	return fbTableAt(t.b, q+int64(binary.LittleEndian.Uint32(t.b[q:])))
}

func (t fbTable) str(i int) (string, error) {
	at, n, _, err := t.vector(i, 1)
	if err != nil {
		return "", err
	}
	return string(t.b[at : at+int64(n)]), nil
}
