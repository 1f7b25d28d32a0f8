package datasets

import "math/bits"

// The generator's randomness: splitmix64 hashes of (seed, stream, index)
// seed per-item wyrand streams and Feistel permutations. Integer arithmetic
// only, so the bytes are the same on every platform.

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// streamKey derives the key of one random stream from the seed.
func streamKey(seed, stream uint64) uint64 {
	return mix64(mix64(seed^0x6a09e667f3bcc908) ^ stream*0xd1b54a32d192ed03)
}

// hashAt is the i-th value of the stream with the given key.
func hashAt(key, i uint64) uint64 { return mix64(key + (i+1)*0x9e3779b97f4a7c15) }

// wyrand is a small, fast generator for per-item streams.
type wyrand uint64

func (r *wyrand) next() uint64 {
	*r += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(uint64(*r), uint64(*r)^0xe7037ed1a0b428db)
	return hi ^ lo
}

// below maps x uniformly (up to 2^-64) onto [0, n).
func below(x uint64, n int64) int64 {
	hi, _ := bits.Mul64(x, uint64(n))
	return int64(hi)
}

// feistel is a keyed permutation of [0, n): a 4-round Feistel network over
// the b-bit words, b = bits.Len(n-1), cycle-walked into range (fewer than 2
// steps on average). The halves are floor(b/2) and ceil(b/2) bits; each
// round swaps them, so after 4 rounds the layout is back where it started.
type feistel struct {
	n            uint64
	lbits, rbits uint
	keys         [4]uint64
}

func newFeistel(n, key uint64) *feistel {
	b := max(uint(bits.Len64(n-1)), 2)
	f := &feistel{n: n, lbits: b / 2, rbits: b - b/2}
	for i := range f.keys {
		f.keys[i] = hashAt(key, uint64(i))
	}
	return f
}

// at is the image of i (i < n).
func (f *feistel) at(i uint64) uint64 {
	for {
		lw, rw := f.lbits, f.rbits
		l, r := i>>rw, i&(1<<rw-1)
		for _, k := range f.keys {
			l, r = r, l^(mix64(r^k)&(1<<lw-1))
			lw, rw = rw, lw
		}
		i = l<<rw | r
		if i < f.n {
			return i
		}
	}
}
