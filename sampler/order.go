package sampler

// The address order of a batch's nodes: a parallel MSD radix pass into
// buckets, each sorted by LSD radix passes.

import (
	"cmp"
	"math/bits"
	"slices"
)

// order fills b.Order by sorting (global id, local id) pairs packed in one
// uint64 (the local id in the low posBits bits, so every key is distinct and
// the sorted order is unique): one parallel MSD radix pass on the top bits of
// the id into buckets of about a thousand keys, then each bucket sorted on
// its own by LSD radix passes over the remaining id bits.
func (sc *scratch) order() {
	b, w := sc.b, sc.s.workers
	N := len(b.NID)
	b.Order = grow(b.Order, N)
	if N == 0 {
		return
	}
	idBits := uint(bits.Len64(uint64(max(sc.s.g.NumNodes-1, 0))))
	sc.posBits = uint(bits.Len64(uint64(N - 1)))
	if idBits+sc.posBits > 64 {
		for i := range b.Order {
			b.Order[i] = int32(i)
		}
		nid := b.NID
		slices.SortStableFunc(b.Order, func(x, y int32) int { return cmp.Compare(nid[x], nid[y]) })
		return
	}
	sc.keys = grow(sc.keys, N)
	sc.tmp = grow(sc.tmp, N)
	sc.pc = numChunks(N, w, minSortChunk)
	top := uint(0)
	for top < maxDigitBits && N>>(top+10) > 0 {
		top++
	}
	top = min(top, idBits)
	sc.topShift = sc.posBits + idBits - top
	nd := 1 << top
	sc.nd = nd
	sc.radHist = grow(sc.radHist, sc.pc*nd)
	sc.bucketStart = grow(sc.bucketStart, nd+1)
	sc.team.run(phKeys, sc.pc, w-1)
	off := int32(0)
	for d := 0; d < nd; d++ {
		sc.bucketStart[d] = off
		for c := 0; c < sc.pc; c++ {
			h := sc.radHist[c*nd+d]
			sc.radHist[c*nd+d] = off
			off += h
		}
	}
	sc.bucketStart[nd] = off
	sc.team.run(phPermute, sc.pc, w-1)
	sc.bt = 1
	if w > 1 {
		sc.bt = min(nd, 4*w)
	}
	sc.team.run(phBuckets, sc.bt, w-1)
}

// maxDigitBits bounds a radix digit (counters fit in 8 KiB).
const maxDigitBits = 11

func (sc *scratch) topDigit(k uint64) uint64 {
	return (k >> sc.topShift) & uint64(sc.nd-1)
}

func (sc *scratch) keysChunk(c int) {
	a, z := span(len(sc.keys), sc.pc, c)
	h := sc.radHist[c*sc.nd : (c+1)*sc.nd]
	clear(h)
	for i := a; i < z; i++ {
		k := uint64(sc.b.NID[i])<<sc.posBits | uint64(i)
		sc.keys[i] = k
		h[sc.topDigit(k)]++
	}
}

func (sc *scratch) permuteChunk(c int) {
	a, z := span(len(sc.keys), sc.pc, c)
	h := sc.radHist[c*sc.nd : (c+1)*sc.nd]
	for _, k := range sc.keys[a:z] {
		d := sc.topDigit(k)
		sc.tmp[h[d]] = k
		h[d]++
	}
}

// bucketsChunk sorts the buckets of group c and writes their part of Order.
func (sc *scratch) bucketsChunk(c int) {
	d0, d1 := span(sc.nd, sc.bt, c)
	mask := uint64(1)<<sc.posBits - 1
	for d := d0; d < d1; d++ {
		lo, hi := sc.bucketStart[d], sc.bucketStart[d+1]
		sorted := sortBucket(sc.tmp[lo:hi], sc.keys[lo:hi], sc.posBits, sc.topShift-sc.posBits)
		ord := sc.b.Order[lo:hi]
		for i, k := range sorted {
			ord[i] = int32(k & mask)
		}
	}
}

// sortBucket sorts a, whose keys agree above bit shift+nbits and are
// already ascending in the bits below shift (the local id: the MSD pass is
// stable), using buf (same length) as scratch. It returns whichever of a and buf holds the result.
func sortBucket(a, buf []uint64, shift, nbits uint) []uint64 {
	if len(a) <= 48 {
		for i := 1; i < len(a); i++ {
			for j := i; j > 0 && a[j] < a[j-1]; j-- {
				a[j], a[j-1] = a[j-1], a[j]
			}
		}
		return a
	}
	if nbits == 0 {
		return a // keys differ only in the position bits, already ascending
	}
	passes := (nbits + maxDigitBits - 1) / maxDigitBits
	digit := (nbits + passes - 1) / passes
	var cnt [1 << maxDigitBits]int32
	nd := 1 << digit
	mask := uint64(nd - 1)
	for p := uint(0); p < passes; p++ {
		sh := shift + p*digit
		h := cnt[:nd]
		clear(h)
		for _, k := range a {
			h[(k>>sh)&mask]++
		}
		off := int32(0)
		for i, x := range h {
			h[i] = off
			off += x
		}
		for _, k := range a {
			d := (k >> sh) & mask
			buf[h[d]] = k
			h[d]++
		}
		a, buf = buf, a
	}
	return a
}
