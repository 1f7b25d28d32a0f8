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

// TestConvertFloat64RoundsOnce: float64 features become the nearest
// float16 / bfloat16, rounded once, in new memory and in place: a value a
// hair past a tie between two neighbours, which float32 would round onto
// the tie (and a second rounding then to the even neighbour), goes to the
// nearer one; an exact tie still goes to the even one.
func TestConvertFloat64RoundsOnce(t *testing.T) {
	le := binary.LittleEndian
	for _, c := range []struct {
		to        DType
		tie, ulp  float64 // a tie between 1 and the next value up, and that value's distance from 1
		odd, even uint16  // the bits of the value above 1 (odd) and of 1 (even)
	}{
		{Float16, 1 + 0x1p-11, 0x1p-10, 0x3c01, 0x3c00},
		{BFloat16, 1 + 0x1p-8, 0x1p-7, 0x3f81, 0x3f80},
	} {
		values := []float64{c.tie + 0x1p-40, c.tie, -(c.tie + 0x1p-40), c.tie - 0x1p-40, 1 + c.ulp}
		want := []uint16{c.odd, c.even, 0x8000 | c.odd, c.even, c.odd}
		src := make([]byte, 8*len(values))
		for i, v := range values {
			le.PutUint64(src[8*i:], math.Float64bits(v))
		}
		for _, inPlace := range []bool{false, true} {
			d := Data{FeatureDim: len(values), FeatureDType: Float64, Features: append([]byte(nil), src...)}
			convert := d.ConvertFeatures
			if inPlace {
				convert = d.ConvertFeaturesInPlace
			}
			if err := convert(c.to, 2); err != nil {
				t.Fatalf("float64 to %s (in place %v): %v", c.to, inPlace, err)
			}
			for i, w := range want {
				if got := le.Uint16(d.Features[2*i:]); got != w {
					t.Errorf("float64 %v to %s (in place %v): %#04x, want %#04x", values[i], c.to, inPlace, got, w)
				}
			}
		}
	}
}

// TestConvertFloat64Hostile: float64 features a file may hold that no
// 16-bit float can: a finite value past the range (1e300, the largest
// float64) is refused naming it, with nothing written, in place or not;
// NaNs and infinities convert to NaNs and infinities of the new type.
func TestConvertFloat64Hostile(t *testing.T) {
	le := binary.LittleEndian
	for _, to := range []DType{Float16, BFloat16} {
		for _, v := range []float64{1e300, -math.MaxFloat64} {
			src := make([]byte, 8*4)
			le.PutUint64(src[8*3:], math.Float64bits(v))
			for _, inPlace := range []bool{false, true} {
				mem := append([]byte(nil), src...)
				d := Data{FeatureDim: 2, FeatureDType: Float64, Features: mem}
				convert := d.ConvertFeatures
				if inPlace {
					convert = d.ConvertFeaturesInPlace
				}
				if err := convert(to, 2); err == nil || !strings.Contains(err.Error(), "1 values are past "+string(to)+"'s range (the first at row 1, element 1") ||
					d.FeatureDType != Float64 || string(mem) != string(src) {
					t.Errorf("float64 %g to %s (in place %v): %v; dtype %s, memory unchanged %v", v, to, inPlace, err, d.FeatureDType, string(mem) == string(src))
				}
			}
		}
		src := make([]byte, 8*3)
		for i, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			le.PutUint64(src[8*i:], math.Float64bits(v))
		}
		d := Data{FeatureDim: 3, FeatureDType: Float64, Features: src}
		if err := d.ConvertFeaturesInPlace(to, 1); err != nil {
			t.Fatalf("NaN and infinities to %s: %v", to, err)
		}
		var got [3]float32
		for i := range got {
			h := le.Uint16(d.Features[2*i:])
			if to == Float16 {
				got[i] = half.Float16ToFloat32(h)
			} else {
				got[i] = half.BFloat16ToFloat32(h)
			}
		}
		if got[0] == got[0] || !math.IsInf(float64(got[1]), 1) || !math.IsInf(float64(got[2]), -1) {
			t.Errorf("NaN, +Inf, -Inf to %s: %v", to, got)
		}
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

// inPlaceSource is n float64 values of one kind each (small and large,
// negative, -0, subnormal for float16, near its largest, infinite, NaN), as features of type
// from (converted from float64, every value within float16's range).
func inPlaceSource(t *testing.T, n int, from DType) []byte {
	t.Helper()
	specials := []float64{math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 6e-8, 6e4, -6e4, 1.0 / 3} // 6e4: within float16 from bfloat16 too
	r := uint64(12345)
	vals := make([]byte, 8*n)
	for i := range n {
		r = r*6364136223846793005 + 1442695040888963407
		v := (float64(r>>11)/(1<<53) - 0.5) * 200
		if i%97 == 0 {
			v = specials[(i/97)%len(specials)]
		}
		binary.LittleEndian.PutUint64(vals[8*i:], math.Float64bits(v))
	}
	d := Data{FeatureDim: 1, FeatureDType: Float64, Features: vals}
	if err := d.ConvertFeatures(from, 0); err != nil {
		t.Fatal(err)
	}
	return d.Features
}

// TestConvertFeaturesInPlace: every conversion to a type no wider, in the
// features' own memory, gives the bytes the conversion into new memory
// gives (on 1, 3 and 8 workers, over enough elements for the parallel
// waves after the first 65536), its result the first bytes of the old
// slice; a conversion to a wider type leaves the old memory alone; a value
// past the new type's range is refused before anything is written, and a
// heterogeneous dataset is checked whole before any node type is.
func TestConvertFeaturesInPlace(t *testing.T) {
	const n = 9*(1<<16) + 4321
	for _, from := range []DType{Float64, Float32, BFloat16, Float16} {
		src := inPlaceSource(t, n, from)
		for _, to := range []DType{Float64, Float32, BFloat16, Float16} {
			if to == from {
				continue
			}
			want := Data{FeatureDim: 1, FeatureDType: from, Features: src}
			if err := want.ConvertFeatures(to, 0); err != nil {
				t.Fatalf("%s to %s into new memory: %v", from, to, err)
			}
			for _, workers := range []int{1, 3, 8} {
				mem := append([]byte(nil), src...)
				d := Data{FeatureDim: 1, FeatureDType: from, Features: mem}
				if err := d.ConvertFeaturesInPlace(to, workers); err != nil {
					t.Fatalf("%s to %s in place, %d workers: %v", from, to, workers, err)
				}
				if d.FeatureDType != to || string(d.Features) != string(want.Features) {
					t.Fatalf("%s to %s in place, %d workers: %s, %d bytes, equal to the copy's %v", from, to, workers,
						d.FeatureDType, len(d.Features), string(d.Features) == string(want.Features))
				}
				narrow := to.Size() <= from.Size()
				if shared := &d.Features[0] == &mem[0]; shared != narrow || (narrow && cap(d.Features) != len(d.Features)) {
					t.Fatalf("%s to %s in place: in the old memory %v (want %v), cap %d of %d bytes", from, to, shared, narrow, cap(d.Features), len(d.Features))
				}
				if !narrow && string(mem) != string(src) {
					t.Fatalf("%s to %s (wider) changed the old memory", from, to)
				}
			}
		}
	}

	// Past the range: refused whole, nothing written, in place or not.
	src := inPlaceSource(t, n, Float32)
	binary.LittleEndian.PutUint32(src[4*(n-5):], math.Float32bits(70000)) // the last wave
	for _, inPlace := range []bool{false, true} {
		mem := append([]byte(nil), src...)
		d := Data{FeatureDim: 1, FeatureDType: Float32, Features: mem}
		convert := d.ConvertFeatures
		if inPlace {
			convert = d.ConvertFeaturesInPlace
		}
		if err := convert(Float16, 3); err == nil || !strings.Contains(err.Error(), "1 values are past float16's range") ||
			d.FeatureDType != Float32 || string(mem) != string(src) || string(d.Features) != string(src) {
			t.Errorf("70000 to float16 (in place %v): %v; dtype %s, memory unchanged %v", inPlace, err, d.FeatureDType, string(mem) == string(src))
		}
	}
	near := append([]byte(nil), inPlaceSource(t, n, Float32)...) // float32's largest rounds past bfloat16's
	binary.LittleEndian.PutUint32(near[4*(n/2):], math.Float32bits(math.MaxFloat32))
	for _, inPlace := range []bool{false, true} {
		d := Data{FeatureDim: 1, FeatureDType: Float32, Features: append([]byte(nil), near...)}
		convert := d.ConvertFeatures
		if inPlace {
			convert = d.ConvertFeaturesInPlace
		}
		if err := convert(BFloat16, 3); err == nil || !strings.Contains(err.Error(), "1 values are past bfloat16's range") ||
			string(d.Features) != string(near) {
			t.Errorf("float32's largest to bfloat16 (in place %v): %v", inPlace, err)
		}
	}
	good := inPlaceSource(t, 1000, Float32)
	h := &Hetero{NodeTypes: []*NodeType{
		{Name: "good", NumNodes: 1000, FeatureDim: 1, FeatureDType: Float32, Features: append([]byte(nil), good...)},
		{Name: "bad", NumNodes: n, FeatureDim: 1, FeatureDType: Float32, Features: append([]byte(nil), src...)},
	}}
	if err := h.ConvertFeaturesInPlace(Float16, 0); err == nil || !strings.Contains(err.Error(), `node type "bad"`) ||
		string(h.NodeTypes[0].Features) != string(good) || h.NodeTypes[0].FeatureDType != Float32 {
		t.Errorf("a heterogeneous dataset with one type past float16's range: %v; the good type unchanged %v (%s)",
			err, string(h.NodeTypes[0].Features) == string(good), h.NodeTypes[0].FeatureDType)
	}
}
