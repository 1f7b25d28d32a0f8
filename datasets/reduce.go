package datasets

// How an undirected import merges the copies of an edge.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gnnloader/gnnloader/internal/half"
)

// EdgeReduce is how ImportOptions.Undirected merges the per-edge values of
// the copies of an edge (the edge stored both ways, or several times).
type EdgeReduce string

const (
	// ReduceFirst keeps the first copy's values (the default).
	ReduceFirst EdgeReduce = "first"
	// ReduceSum adds the copies' edge_attr and edge_weight, as PyG's
	// ToUndirected (reduce="add"); edge_time keeps the first copy's.
	ReduceSum EdgeReduce = "sum"
)

// ParseEdgeReduce reads an EdgeReduce ("" is ReduceFirst).
func ParseEdgeReduce(s string) (EdgeReduce, error) {
	switch r := EdgeReduce(s); r {
	case "", ReduceFirst:
		return ReduceFirst, nil
	case ReduceSum:
		return r, nil
	}
	return "", fmt.Errorf("%q: want %q or %q", s, ReduceFirst, ReduceSum)
}

// summable reports whether edge_attr of dtype t can be summed: whether
// elemCodec knows it.
func summable(t DType) bool {
	_, _, ok := elemCodec(t)
	return ok
}

// sumRows returns the rows of a symmetrised graph's edges, each the sum of
// the input rows (dim values of dtype t) of the edges it merges (copies).
// Integers wrap as they would in torch; float types are added in float64
// and rounded once.
func sumRows(rows []byte, t DType, dim int, copies *edgeCopies) []byte {
	es := t.Size()
	rb := dim * es
	n := len(copies.offs) - 1
	out := make([]byte, n*rb)
	get, put, _ := elemCodec(t) // makeUndirected checked summable
	acc := make([]uint64, dim)  // integers as they wrap; floats as float64 bits
	for p := range n {
		clear(acc)
		for _, q := range copies.of(p) {
			row := rows[q*int64(rb) : (q+1)*int64(rb)]
			for j := range dim {
				acc[j] = get(row[j*es:], acc[j])
			}
		}
		dst := out[p*rb : (p+1)*rb]
		for j := range dim {
			put(dst[j*es:], acc[j])
		}
	}
	return out
}

// elemCodec returns, for a summable dtype t, add (the element at b added to
// an accumulator) and put (an accumulator stored at b in t); ok is false for
// any other dtype. Accumulators of float types hold float64 bits, of integer
// types the integer.
func elemCodec(t DType) (add func(b []byte, acc uint64) uint64, put func(b []byte, acc uint64), ok bool) {
	le := binary.LittleEndian
	f := func(read func([]byte) float64, write func([]byte, float64)) (func([]byte, uint64) uint64, func([]byte, uint64), bool) {
		return func(b []byte, acc uint64) uint64 { return math.Float64bits(math.Float64frombits(acc) + read(b)) },
			func(b []byte, acc uint64) { write(b, math.Float64frombits(acc)) }, true
	}
	switch t {
	case Float32:
		return f(func(b []byte) float64 { return float64(math.Float32frombits(le.Uint32(b))) },
			func(b []byte, v float64) { le.PutUint32(b, math.Float32bits(float32(v))) })
	case Float64:
		return f(func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) },
			func(b []byte, v float64) { le.PutUint64(b, math.Float64bits(v)) })
	case Float16:
		return f(func(b []byte) float64 { return float64(half.Float16ToFloat32(le.Uint16(b))) },
			func(b []byte, v float64) { le.PutUint16(b, half.Float64ToFloat16(v)) })
	case BFloat16:
		return f(func(b []byte) float64 { return float64(half.BFloat16ToFloat32(le.Uint16(b))) },
			func(b []byte, v float64) { le.PutUint16(b, half.Float64ToBFloat16(v)) })
	case Int64:
		return func(b []byte, acc uint64) uint64 { return acc + le.Uint64(b) }, func(b []byte, acc uint64) { le.PutUint64(b, acc) }, true
	case Int32:
		return func(b []byte, acc uint64) uint64 { return acc + uint64(le.Uint32(b)) }, func(b []byte, acc uint64) { le.PutUint32(b, uint32(acc)) }, true
	case UInt8:
		return func(b []byte, acc uint64) uint64 { return acc + uint64(b[0]) }, func(b []byte, acc uint64) { b[0] = byte(acc) }, true
	}
	return nil, nil, false
}
