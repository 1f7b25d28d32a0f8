package gather

// Random inputs for the tests: feature types, tables and batches.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// dtype is a feature type: its size and a generator of random values' bits.
type dtype struct {
	name string
	size int
	put  func(b []byte, r *rand.Rand)
}

var dtypes = []dtype{
	{"float32", 4, func(b []byte, r *rand.Rand) {
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(r.NormFloat64())))
	}},
	{"float16", 2, func(b []byte, r *rand.Rand) { binary.LittleEndian.PutUint16(b, uint16(r.Uint32())) }},
	{"bfloat16", 2, func(b []byte, r *rand.Rand) {
		binary.LittleEndian.PutUint16(b, uint16(math.Float32bits(float32(r.NormFloat64()))>>16))
	}},
}

func randomTable(t testing.TB, dt dtype, dim int, rows int64, r *rand.Rand) []byte {
	rb := dt.size * dim
	b := make([]byte, int64(rb)*rows)
	for i := 0; i < len(b); i += dt.size {
		dt.put(b[i:], r)
	}
	return b
}

// randomBatch draws n row ids (unique when unique is set) in sampled order.
func randomBatch(r *rand.Rand, n int, rows int64, unique bool) []int64 {
	nid := make([]int64, 0, n)
	seen := map[int64]bool{}
	for len(nid) < n {
		v := r.Int64N(rows)
		if unique {
			if seen[v] {
				continue
			}
			seen[v] = true
		}
		nid = append(nid, v)
	}
	return nid
}

const poison = 0xA5
