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

// summable reports whether edge_attr of dtype t can be summed.
func summable(t DType) bool {
	switch t {
	case Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8:
		return true
	}
	return false
}

// sumRows returns the rows of a symmetrised graph's edges, each the sum of
// the input rows (dim values of dtype t) of the edges it merges (copies).
// Integers wrap as they would in torch; half types are added in float32 and
// rounded once.
func sumRows(rows []byte, t DType, dim int, copies *edgeCopies) []byte {
	es := t.Size()
	rb := dim * es
	n := len(copies.offs) - 1
	out := make([]byte, n*rb)
	le := binary.LittleEndian
	acc := make([]float64, dim)
	iacc := make([]uint64, dim)
	for p := range n {
		clear(acc)
		clear(iacc)
		for _, q := range copies.of(p) {
			row := rows[q*int64(rb) : (q+1)*int64(rb)]
			for j := range dim {
				v := row[j*es : (j+1)*es]
				switch t {
				case Float32:
					acc[j] += float64(math.Float32frombits(le.Uint32(v)))
				case Float64:
					acc[j] += math.Float64frombits(le.Uint64(v))
				case Float16:
					acc[j] += float64(half.Float16ToFloat32(le.Uint16(v)))
				case BFloat16:
					acc[j] += float64(math.Float32frombits(uint32(le.Uint16(v)) << 16))
				case Int64:
					iacc[j] += le.Uint64(v)
				case Int32:
					iacc[j] += uint64(le.Uint32(v))
				case UInt8:
					iacc[j] += uint64(v[0])
				}
			}
		}
		dst := out[p*rb : (p+1)*rb]
		for j := range dim {
			v := dst[j*es : (j+1)*es]
			switch t {
			case Float32:
				le.PutUint32(v, math.Float32bits(float32(acc[j])))
			case Float64:
				le.PutUint64(v, math.Float64bits(acc[j]))
			case Float16:
				le.PutUint16(v, half.Float32ToFloat16(float32(acc[j])))
			case BFloat16:
				le.PutUint16(v, half.Float32ToBFloat16(float32(acc[j])))
			case Int64:
				le.PutUint64(v, iacc[j])
			case Int32:
				le.PutUint32(v, uint32(iacc[j]))
			case UInt8:
				v[0] = byte(iacc[j])
			}
		}
	}
	return out
}
