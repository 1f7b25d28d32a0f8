package half

import (
	"math"
	"testing"
)

func TestKnownValues(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, // max, then rounds to inf
		{float32(math.Inf(-1)), 0xfc00}, {5.960464477539063e-08, 0x0001}, // smallest subnormal
		{1 + 1.0/2048, 0x3c00}, // tie between 0x3c00 and 0x3c01: to even
		{1 + 3.0/2048, 0x3c02}, // tie between 0x3c01 and 0x3c02: to even
	} {
		if got := Float32ToFloat16(c.f); got != c.want {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if got := Float32ToBFloat16(1); got != 0x3f80 {
		t.Errorf("Float32ToBFloat16(1) = %#04x", got)
	}
	if got := Float32ToFloat16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("NaN -> %#04x", got)
	}
}

func TestFloat16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaNs need not keep their payload
		}
		if got := Float32ToFloat16(Float16ToFloat32(uint16(h))); got != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, Float16ToFloat32(uint16(h)), got)
		}
	}
}

// BFloat16ToFloat32 is exact on every bfloat16 that is not a NaN: a
// float32 with its low 16 bits clear rounds to itself and widens back.
func TestBFloat16Widen(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BFloat16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := Float32ToBFloat16(f); got != uint16(h) {
			t.Fatalf("bfloat16 %#04x widened to %g rounds back to %#04x", h, f, got)
		}
	}
}
