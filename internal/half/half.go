// Package half converts between float32 (or float64, rounded once) and the
// 16-bit float formats of the feature tables and gradient buckets (IEEE
// binary16 and bfloat16), rounding to nearest even as CUDA's
// __float2half_rn and __float2bfloat16_rn do.
package half

import "math"

// Float16ToFloat32 is exact (every binary16 is a float32).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: man * 2^-24
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Float32ToFloat16 rounds f to the nearest IEEE binary16, ties to even (what
// CUDA's __float2half_rn does).
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 // NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	switch {
	case e >= 0x1f:
		return sign | 0x7c00 // overflow to infinity
	case e <= 0: // subnormal or zero
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		m >>= shift
		if rem > half || rem == half && m&1 == 1 {
			m++
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

// BFloat16ToFloat32 widens a bfloat16 (the top half of a float32) exactly.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBFloat16 rounds f to the nearest bfloat16, ties to even (what
// CUDA's __float2bfloat16_rn does).
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Float64ToFloat16 rounds v to the nearest IEEE binary16, ties to even,
// in one rounding: Float32ToFloat16(float32(v)) would round twice, and a
// value just past a binary16 tie that float32 rounds onto the tie would
// then go to the even neighbour, not the nearer one.
func Float64ToFloat16(v float64) uint16 { return Float32ToFloat16(roundToOdd32(v)) }

// Float64ToBFloat16 rounds v to the nearest bfloat16, ties to even, in one
// rounding (as Float64ToFloat16).
func Float64ToBFloat16(v float64) uint16 { return Float32ToBFloat16(roundToOdd32(v)) }

// roundToOdd32 is v rounded to float32 by "round to odd": toward zero,
// then the lowest significand bit set when that was inexact. A float32
// has 13 significand bits more than a binary16 and 16 more than a
// bfloat16, so rounding the result to nearest even gives what rounding v
// directly would (round to odd keeps any inexactness as a sticky bit below
// the narrower type's halfway bit). Values past float32's range become its
// largest finite value (odd), which both 16-bit types round to infinity;
// NaNs and infinities pass through.
func roundToOdd32(v float64) float32 {
	f := float32(v)
	if v != v || float64(f) == v {
		return f
	}
	b := math.Float32bits(f)
	if math.Abs(float64(f)) > math.Abs(v) {
		b-- // one step toward zero (the sign is a bit of its own)
	}
	return math.Float32frombits(b | 1)
}
