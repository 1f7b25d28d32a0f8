package datasets

import (
	"math"
	"math/bits"
)

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

// float32ToFloat16 rounds f to the nearest IEEE binary16, ties to even.
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
			m++ // may carry into the smallest normal: still the right bits
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to infinity: still right
	}
	return sign | uint16(h)
}

// float32ToBFloat16 rounds f to the nearest bfloat16, ties to even.
func float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
