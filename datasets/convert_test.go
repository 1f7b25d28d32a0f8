package datasets

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/internal/half"
)

// TestConvertFeatures: float32 features become float16 / bfloat16 / float64
// element by element (each the nearest value of the new type), a conversion
// back to float32 from float64 is exact, and what cannot convert is refused
// with the dataset unchanged.
func TestConvertFeatures(t *testing.T) {
	d, err := Generate(GenOptions{Like: "cora", Scale: 0.2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	f32 := func(b []byte, i int) float32 { return math.Float32frombits(le.Uint32(b[4*i:])) }
	orig := append([]byte(nil), d.Features...)
	n := len(orig) / 4
	for _, tc := range []struct {
		to   DType
		want func(i int) uint64 // the element's bits in the new type
		size int
	}{
		{Float16, func(i int) uint64 { return uint64(half.Float32ToFloat16(f32(orig, i))) }, 2},
		{BFloat16, func(i int) uint64 { return uint64(half.Float32ToBFloat16(f32(orig, i))) }, 2},
		{Float64, func(i int) uint64 { return math.Float64bits(float64(f32(orig, i))) }, 8},
	} {
		c := *d
		if err := c.ConvertFeatures(tc.to, 3); err != nil {
			t.Fatal(err)
		}
		if c.FeatureDType != tc.to || len(c.Features) != n*tc.size || c.RowBytes() != c.FeatureDim*tc.size {
			t.Fatalf("%s: dtype %s, %d bytes for %d elements, rows of %d bytes", tc.to, c.FeatureDType, len(c.Features), n, c.RowBytes())
		}
		for i := 0; i < n; i++ {
			var got uint64
			switch tc.size {
			case 2:
				got = uint64(le.Uint16(c.Features[2*i:]))
			case 8:
				got = le.Uint64(c.Features[8*i:])
			}
			if got != tc.want(i) {
				t.Fatalf("%s: element %d is %#x, want %#x", tc.to, i, got, tc.want(i))
			}
		}
		if tc.to == Float64 {
			back := c
			if err := back.ConvertFeatures(Float32, 0); err != nil || string(back.Features) != string(orig) {
				t.Fatalf("float64 back to float32: %v, equal %v", err, string(back.Features) == string(orig))
			}
		}
	}
	if string(d.Features) != string(orig) || d.FeatureDType != Float32 {
		t.Fatal("converting a copy of the Data changed the original's features")
	}
	if err := d.ConvertFeatures(Float32, 0); err != nil || string(d.Features) != string(orig) {
		t.Fatalf("to its own type: %v", err)
	}
	for _, to := range []DType{Int64, UInt8, Bool} {
		if err := d.ConvertFeatures(to, 0); err == nil || !strings.Contains(err.Error(), "only float types convert") {
			t.Errorf("to %s: %v", to, err)
		}
	}
	big := *d
	big.Features = append([]byte(nil), orig...)
	binary.LittleEndian.PutUint32(big.Features[4*(2*d.FeatureDim+3):], math.Float32bits(70000)) // row 2, element 3
	if err := big.ConvertFeatures(Float16, 0); err == nil || big.FeatureDType != Float32 ||
		!strings.Contains(err.Error(), "1 values are past float16's range (the first at row 2, element 3: 70000)") {
		t.Errorf("a value past float16's range: %v (dtype now %s)", err, big.FeatureDType)
	}
	if err := big.ConvertFeatures(BFloat16, 0); err != nil {
		t.Errorf("70000 to bfloat16: %v", err)
	}
	inf := *d
	inf.Features = append([]byte(nil), orig...)
	binary.LittleEndian.PutUint32(inf.Features, math.Float32bits(float32(math.Inf(-1))))
	if err := inf.ConvertFeatures(Float16, 0); err != nil {
		t.Errorf("an infinite value stays infinite, no error: %v", err)
	}
	signed := *d
	signed.Features = append([]byte(nil), orig...)
	binary.LittleEndian.PutUint32(signed.Features, math.Float32bits(float32(math.Copysign(0, -1))))
	if err := signed.ConvertFeatures(Float16, 0); err != nil || binary.LittleEndian.Uint16(signed.Features) != 0x8000 {
		t.Errorf("-0.0 to float16: %v, bits %#x, want 0x8000", err, binary.LittleEndian.Uint16(signed.Features))
	}
	torn := *d
	torn.Features = orig[:len(orig)-3] // not whole elements, nor whole rows
	if err := torn.ConvertFeatures(Float16, 0); err == nil || !strings.Contains(err.Error(), "not whole rows") || torn.FeatureDType != Float32 {
		t.Errorf("torn feature bytes: %v", err)
	}
	torn.Features = orig[:len(orig)-4] // whole elements, not whole rows
	if err := torn.ConvertFeatures(Float16, 0); err == nil || !strings.Contains(err.Error(), "not whole rows") {
		t.Errorf("a partial last row: %v", err)
	}
	ints := *d
	ints.FeatureDType, ints.Features = Int32, make([]byte, len(orig))
	if err := ints.ConvertFeatures(Float16, 0); err == nil || ints.FeatureDType != Int32 {
		t.Errorf("int32 features to float16: %v, dtype now %s", err, ints.FeatureDType)
	}
}

// TestConvertFeaturesHetero: every node type with float features converts;
// types without features stay as they are.
func TestConvertFeaturesHetero(t *testing.T) {
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.002, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, nt := range h.NodeTypes {
		before[nt.Name] = len(nt.Features)
	}
	if err := h.ConvertFeatures(BFloat16, 0); err != nil {
		t.Fatal(err)
	}
	converted := 0
	for _, nt := range h.NodeTypes {
		switch {
		case before[nt.Name] == 0:
			if len(nt.Features) != 0 {
				t.Errorf("%s had no features and now has %d bytes", nt.Name, len(nt.Features))
			}
		case nt.FeatureDType != BFloat16 || 2*len(nt.Features) != before[nt.Name]:
			t.Errorf("%s: %s, %d bytes (from %d)", nt.Name, nt.FeatureDType, len(nt.Features), before[nt.Name])
		default:
			converted++
		}
	}
	if converted == 0 {
		t.Fatal("no node type had features to convert")
	}
}

// TestConvertHeteroEmptyType: a node type with features but no nodes has
// its type converted with the others, so no dataset mixes them; a type
// without features keeps none.
func TestConvertHeteroEmptyType(t *testing.T) {
	h := &Hetero{NodeTypes: []*NodeType{
		{Name: "a", NumNodes: 2, FeatureDim: 2, FeatureDType: Float32, Features: make([]byte, 16)},
		{Name: "empty", NumNodes: 0, FeatureDim: 2, FeatureDType: Float32},
		{Name: "none", NumNodes: 3},
	}}
	if err := h.ConvertFeatures(Float16, 0); err != nil {
		t.Fatal(err)
	}
	for _, nt := range h.NodeTypes {
		want := Float16
		if nt.FeatureDim == 0 {
			want = ""
		}
		bytes := int(nt.NumNodes) * nt.FeatureDim * want.Size()
		if nt.FeatureDType != want || len(nt.Features) != bytes {
			t.Errorf("node type %s: %q, %d bytes; want %q, %d", nt.Name, nt.FeatureDType, len(nt.Features), want, bytes)
		}
	}
}
