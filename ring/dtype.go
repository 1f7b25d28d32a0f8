package ring

import (
	"fmt"
	"math"
)

// DType is the element type of a gradient bucket.
type DType int

// The element types a ring reduces. Arithmetic is float32 inside a step; every
// partial sum is stored (rounded to nearest even) in the dtype.
const (
	Float32 DType = iota
	BFloat16
	Float16
)

// Size is the element size in bytes.
func (d DType) Size() int {
	if d == Float32 {
		return 4
	}
	return 2
}

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Float16:
		return "float16"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// ParseDType reads "float32", "bfloat16" or "float16" (also "f32", "bf16", "f16").
func ParseDType(s string) (DType, error) {
	switch s {
	case "float32", "f32":
		return Float32, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "float16", "f16", "half":
		return Float16, nil
	}
	return 0, fmt.Errorf("ring: unknown dtype %q (want float32, bfloat16 or float16)", s)
}

// Op is the reduction.
type Op int

// Sum adds; Avg adds and divides the sum by the number of ranks (in float32,
// once, at the last reduce-scatter step).
const (
	Sum Op = iota
	Avg
)

func (o Op) String() string {
	if o == Avg {
		return "avg"
	}
	return "sum"
}

// ParseOp reads "sum" or "avg" ("average", "mean").
func ParseOp(s string) (Op, error) {
	switch s {
	case "sum":
		return Sum, nil
	case "avg", "average", "mean":
		return Avg, nil
	}
	return 0, fmt.Errorf("ring: unknown op %q (want sum or avg)", s)
}

// load and store convert between the dtype's bits and float32.
func (d DType) load(b []byte, i int) float32 {
	switch d {
	case Float32:
		return math.Float32frombits(le32(b[4*i:]))
	case BFloat16:
		return math.Float32frombits(uint32(le16(b[2*i:])) << 16)
	default:
		return float16ToFloat32(le16(b[2*i:]))
	}
}

func (d DType) store(b []byte, i int, v float32) {
	switch d {
	case Float32:
		put32(b[4*i:], math.Float32bits(v))
	case BFloat16:
		put16(b[2*i:], float32ToBFloat16(v))
	default:
		put16(b[2*i:], float32ToFloat16(v))
	}
}

// Load is the element i of b as float64 (for references and checks).
func (d DType) Load(b []byte, i int) float64 { return float64(d.load(b, i)) }

// Store rounds v to the dtype (nearest, ties to even) into element i of b.
func (d DType) Store(b []byte, i int, v float64) { d.store(b, i, float32(v)) }

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }
func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func put16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }
func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// float16ToFloat32 is exact (every binary16 is a float32).
func float16ToFloat32(h uint16) float32 {
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

// float32ToFloat16 rounds f to the nearest IEEE binary16, ties to even (what
// CUDA's __float2half_rn does).
func float32ToFloat16(f float32) uint16 {
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

// float32ToBFloat16 rounds f to the nearest bfloat16, ties to even (what
// CUDA's __float2bfloat16_rn does).
func float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
