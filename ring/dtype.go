package ring

import (
	"fmt"
	"math"

	"github.com/gnnloader/gnnloader/internal/half"
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
		return half.BFloat16ToFloat32(le16(b[2*i:]))
	default:
		return half.Float16ToFloat32(le16(b[2*i:]))
	}
}

func (d DType) store(b []byte, i int, v float32) {
	switch d {
	case Float32:
		put32(b[4*i:], math.Float32bits(v))
	case BFloat16:
		put16(b[2*i:], half.Float32ToBFloat16(v))
	default:
		put16(b[2*i:], half.Float32ToFloat16(v))
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
