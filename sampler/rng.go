package sampler

import "math/bits"

// golden is 2^64 divided by the golden ratio, the SplitMix64 increment.
const golden = 0x9E3779B97F4A7C15

// mix64 is the SplitMix64 output function (a bijection on uint64 with good
// avalanche). Every random choice in this package is derived from it.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// nodeSeed is the RNG state of the node at position pos (0-based) of the
// frontier of hop (1-based) in the batch with the given key. A node's draws
// depend on nothing else, which is what makes sampling inside a batch
// independent of how the frontier is split between goroutines.
func nodeSeed(key uint64, hop, pos int) uint64 {
	return mix64(key ^ mix64(uint64(hop)<<40^uint64(pos)+golden))
}

// rng is a SplitMix64 stream.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += golden
	return mix64(r.s)
}

// below returns a uniform integer in [0, n), n > 0, by Lemire's
// multiply-and-reject method (exactly uniform, usually one draw).
func (r *rng) below(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		t := -n % n
		for lo < t {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}
