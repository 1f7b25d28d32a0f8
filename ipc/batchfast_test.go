package ipc

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

// genericFrame encodes m with the table's generic codec, never a fast one.
func genericFrame(m Msg) ([]byte, *ProtocolError) {
	t := lookup(m.Type())
	e := encoder{b: make([]byte, HeaderSize)}
	encodeFields(&e, t.fields, reflect.ValueOf(m).Elem())
	binary.LittleEndian.PutUint32(e.b, uint32(len(e.b)-4))
	binary.LittleEndian.PutUint16(e.b[4:], uint16(t.typ))
	return e.b, e.err
}

// genericDecode decodes a payload with the generic codec.
func genericDecode(typ Type, payload []byte, lim Limits) (Msg, *ProtocolError) {
	t := lookup(typ)
	d := decoder{b: payload, lim: &lim}
	v := reflect.New(t.goType)
	decodeFields(&d, t.fields, v.Elem())
	if d.err == nil && d.off != len(d.b) {
		d.fail(CodeBadMessage, "trailing bytes")
	}
	return v.Interface().(Msg), d.err
}

func randBatchReady(rng *rand.Rand) *BatchReady {
	u32s := func() []uint32 {
		n := rng.IntN(6)
		if n == 0 {
			return nil
		}
		l := make([]uint32, n)
		for i := range l {
			l[i] = rng.Uint32() >> rng.IntN(32)
		}
		return l
	}
	m := &BatchReady{Slot: rng.Uint32(), Epoch: rng.Uint32(), Index: rng.Uint32(), Counts: u32s()}
	for i := rng.IntN(3); i > 0; i-- {
		m.Scalars = append(m.Scalars, int64(rng.Uint64()))
	}
	for i := rng.IntN(4); i > 0; i-- {
		m.Lists = append(m.Lists, u32s())
	}
	m.ReadyValue = rng.Uint32() >> rng.IntN(33)
	return m
}

// TestFastCodecs checks every hand-written codec (batchfast.go) against the
// generic one: random messages encode to the same bytes, and those frames
// and random mutations of them decode to the same values or fail with the
// same code, under the default and under tight limits.
func TestFastCodecs(t *testing.T) {
	if len(fastCodecs) != 1 {
		t.Fatalf("%d fast codecs; test each one here", len(fastCodecs))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		m := randBatchReady(rng)
		fast := mustMarshal(t, m)
		slow, err := genericFrame(m)
		if err != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("%+v: fast %x, generic %x (%v)", m, fast, slow, err)
		}
		if back, err := Unmarshal(fast, DefaultLimits); err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, m)
		}
		b := append([]byte(nil), fast...)
		for k := rng.IntN(3); k > 0; k-- {
			switch op := rng.IntN(3); {
			case op == 0 && len(b) > HeaderSize:
				b[HeaderSize+rng.IntN(len(b)-HeaderSize)] = byte(rng.IntN(8))
			case op == 1 && len(b) > HeaderSize:
				b = b[:HeaderSize+rng.IntN(len(b)-HeaderSize)]
			default:
				b = append(b, byte(rng.IntN(256)))
			}
		}
		b = setLen(b)
		lim := DefaultLimits
		if i%4 == 0 {
			lim.MaxList = 3
		}
		got, gerr := Unmarshal(b, lim)
		want, werr := genericDecode(TypeBatchReady, b[HeaderSize:], lim)
		switch {
		case (gerr == nil) != (werr == nil):
			t.Fatalf("frame %x: fast %v, generic %v", b, gerr, werr)
		case gerr != nil && CodeOf(gerr) != werr.Code:
			t.Fatalf("frame %x: fast %v, generic %v", b, gerr, werr)
		case gerr == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("frame %x: fast %+v, generic %+v", b, got, want)
		}
	}
}
