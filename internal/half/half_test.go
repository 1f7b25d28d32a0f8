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

// nearest16 is an independent reference for rounding a float64 to a
// 16-bit float: the finite non-negative values of the format (widen,
// ordered by their bits), the bits of its infinity and the power of two
// past its largest finite value (where infinity stands in the order). It
// picks the nearer neighbour by exact float64 arithmetic (every 16-bit
// value and their midpoints are exact in float64), ties to the even bits.
func nearest16(widen func(uint16) float32, inf uint16, past float64) func(float64) uint16 {
	var vals []float64
	for h := uint16(0); h < inf; h++ {
		vals = append(vals, float64(widen(h)))
	}
	return func(v float64) uint16 {
		var sign uint16
		if math.Signbit(v) {
			sign, v = 0x8000, -v
		}
		if math.IsInf(v, 0) {
			return sign | inf
		}
		// the largest lo with vals[lo] <= v (vals ascend: bits order non-negative floats)
		i, j := 0, len(vals)
		for i+1 < j {
			if m := (i + j) / 2; vals[m] <= v {
				i = m
			} else {
				j = m
			}
		}
		lo, hi, loV, hiV := uint16(i), uint16(i+1), vals[i], past
		if i+1 < len(vals) {
			hiV = vals[i+1]
		}
		switch mid := (loV + hiV) / 2; {
		case v == loV || v < mid:
			return sign | lo
		case v > mid || hi&1 == 0:
			return sign | hi
		}
		return sign | lo
	}
}

// TestFloat64Rounding: Float64ToFloat16 and Float64ToBFloat16 round in one
// step, as the reference does, on random float64s across each format's
// range (subnormals and overflow included) and on values a hair either
// side of every tie between neighbours, where rounding through float32
// first goes wrong; it checks that such values were among those tried.
func TestFloat64Rounding(t *testing.T) {
	for _, c := range []struct {
		name       string
		got, twice func(float64) uint16
		widen      func(uint16) float32
		inf        uint16
		past       float64
		lo, hi     int // the exponents tried at random
	}{
		{"float16", Float64ToFloat16, func(v float64) uint16 { return Float32ToFloat16(float32(v)) },
			Float16ToFloat32, 0x7c00, 65536, -27, 17},
		{"bfloat16", Float64ToBFloat16, func(v float64) uint16 { return Float32ToBFloat16(float32(v)) },
			BFloat16ToFloat32, 0x7f80, math.Ldexp(1, 128), -135, 129},
	} {
		want := nearest16(c.widen, c.inf, c.past)
		check := func(v float64) {
			if g, w := c.got(v), want(v); g != w {
				t.Fatalf("%s: %v (%#016x) rounds to %#04x, want %#04x", c.name, v, math.Float64bits(v), g, w)
			}
		}
		rng := uint64(0x9e3779b97f4a7c15)
		next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
		for range 200000 {
			r := next()
			v := math.Ldexp(1+float64(r>>12)/(1<<52), c.lo+int(r%uint64(c.hi-c.lo)))
			if r&(1<<11) != 0 {
				v = -v
			}
			check(v)
		}
		differs := 0
		for h := uint16(0); h+1 < c.inf; h++ {
			a, b := float64(c.widen(h)), float64(c.widen(h+1))
			mid := (a + b) / 2
			for _, v := range []float64{mid, mid * (1 + 0x1p-40), mid * (1 - 0x1p-40), math.Nextafter(mid, 0), math.Nextafter(mid, math.Inf(1))} {
				check(v)
				check(-v)
				if c.twice(v) != want(v) {
					differs++
				}
			}
		}
		if differs == 0 {
			t.Fatalf("%s: rounding through float32 first agreed with the reference everywhere: the ties were not tried", c.name)
		}
		for _, v := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 1e300, -1e300, 1e-300, -1e-300,
			math.SmallestNonzeroFloat64, math.MaxFloat32, c.past, math.Nextafter(c.past, 0),
			(float64(c.widen(c.inf-1)) + c.past) / 2, math.Nextafter((float64(c.widen(c.inf-1))+c.past)/2, 0)} {
			check(v)
		}
		if g := c.got(math.NaN()); g&c.inf != c.inf || g&^(c.inf|0x8000) == 0 {
			t.Errorf("%s: NaN rounds to %#04x", c.name, g)
		}
	}
}
