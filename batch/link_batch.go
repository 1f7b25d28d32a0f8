package batch

// A Link mode's batch: sampling it (the positive pairs, their negatives and
// the seed nodes of the neighbourhood), its counts and lists, its gathered
// rows and its structure regions.

import (
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/gnnloader/gnnloader/sampler"
)

// LinkBatch is a batch of the Link mode.
type LinkBatch struct {
	m *Link
	// S is the sampled neighbourhood of the batch's seed nodes.
	S sampler.Batch
	// Pos are the positions in the split of the batch's positive pairs.
	Pos []int64
	// Ends are the global ids of the pairs' ends: NegBinary and NegNone
	// the P sources then the P destinations (positives first); NegTriplet
	// the B sources, the B destinations, then the B×k negatives (row-major).
	Ends []int64
	// Local are Ends as local ids (rows of S.NID).
	Local []int64
	seeds []int64
}

// Sample implements Mode: pairs are positions in the split.
func (m *Link) Sample(pairs []int64, key uint64, b Batch) error {
	lb := b.(*LinkBatch)
	sp, n := m.split, m.data.Graph.NumNodes
	B := len(pairs)
	if B > m.batch {
		return fmt.Errorf("batch: %d pairs for a batch of at most %d", B, m.batch)
	}
	lb.Pos = append(lb.Pos[:0], pairs...)
	src := lb.Ends[:0] // the ends, sources first
	P := B
	if m.neg == NegBinary {
		P += int(numNeg(B, m.amount))
	}
	for i, p := range pairs {
		if p < 0 || p >= sp.Len() {
			return fmt.Errorf("batch: pair %d (position %d) outside the split's %d", p, i, sp.Len())
		}
		src = append(src, sp.Src[p])
	}
	r := negRNG{mix64(key ^ 0x6E656761746976)} // "negativ"
	switch m.neg {
	case NegBinary:
		for range P - B {
			src = append(src, int64(r.below(uint64(n))))
		}
		for _, p := range pairs {
			src = append(src, sp.Dst[p])
		}
		for range P - B {
			src = append(src, int64(r.below(uint64(n))))
		}
	case NegTriplet:
		for _, p := range pairs {
			src = append(src, sp.Dst[p])
		}
		for range B * m.k {
			src = append(src, int64(r.below(uint64(n))))
		}
	default:
		for _, p := range pairs {
			src = append(src, sp.Dst[p])
		}
	}
	lb.Ends = src
	// The seed nodes: the unique ends, ascending (PyG's unique).
	lb.seeds = append(lb.seeds[:0], lb.Ends...)
	slices.Sort(lb.seeds)
	lb.seeds = slices.Compact(lb.seeds)
	lb.Local = lb.Local[:0]
	for _, v := range lb.Ends {
		i, _ := slices.BinarySearch(lb.seeds, v)
		lb.Local = append(lb.Local, int64(i))
	}
	return m.smp.Sample(lb.seeds, key, &lb.S)
}

// Meta implements Batch.
func (b *LinkBatch) Meta(mt *Meta) {
	s := &b.S
	mt.Counts = mt.Counts[:0]
	for _, c := range b.m.countOf {
		switch c {
		case linkNodes:
			mt.Counts = append(mt.Counts, uint32(len(s.NID)))
		case linkEdges:
			mt.Counts = append(mt.Counts, uint32(len(s.Src)))
		case linkPositives:
			mt.Counts = append(mt.Counts, uint32(len(b.Pos)))
		default:
			mt.Counts = append(mt.Counts, uint32(len(b.Ends)/2))
		}
	}
	mt.Scalars = mt.Scalars[:0]
	mt.Lists = reuseLists(mt.Lists, 2)
	mt.Lists[0] = appendU32(mt.Lists[0], s.NumSampledNodes)
	mt.Lists[1] = appendU32(mt.Lists[1], s.NumSampledEdges)
}

// Rows implements Batch: node regions are rows of n_id (with their address
// order), edge regions rows of e_id.
func (b *LinkBatch) Rows(r int) ([]int64, []int32) {
	if b.m.countOf[r] == linkEdges {
		return b.S.EID, nil
	}
	if len(b.S.Order) != len(b.S.NID) {
		return b.S.NID, nil
	}
	return b.S.NID, b.S.Order
}

// WriteStructure implements Batch.
func (b *LinkBatch) WriteStructure(region func(r int) []byte, workers int) {
	B, L := len(b.Pos), b.Local
	for r, reg := range b.m.layout.Regions {
		if reg.Table != "" {
			continue
		}
		switch reg.Name {
		case "input_id":
			copy(int64s(region(r)), b.Pos)
		case "edge_label_index":
			copy(int64s(region(r)), L)
		case "edge_label":
			b.writeLabels(region(r), reg.DType)
		case "src_index":
			copy(int64s(region(r)), L[:B])
		case "dst_pos_index":
			copy(int64s(region(r)), L[B:2*B])
		case "dst_neg_index":
			copy(int64s(region(r)), L[2*B:])
		}
	}
	var p pieces
	p.addSampled(&b.S, &b.m.layout, region)
	p.run(workers)
}

// writeLabels writes edge_label: the positives' then 0 per negative.
func (b *LinkBatch) writeLabels(dst []byte, dtype string) {
	P, sp := len(b.Ends)/2, b.m.split
	if dtype == "float32" {
		f := float32s(dst)[:P]
		clear(f)
		for i := range b.Pos {
			f[i] = 1
		}
		return
	}
	l := int64s(dst)[:P]
	clear(l)
	for i, p := range b.Pos {
		l[i] = int64(sp.Label[p])
		if b.m.addOne {
			l[i]++
		}
	}
}

// float32s views 4-byte aligned bytes as float32s.
func float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// negRNG is a SplitMix64 stream for the negatives.
type negRNG struct{ s uint64 }

func (r *negRNG) below(n uint64) uint64 {
	for {
		r.s += 0x9E3779B97F4A7C15
		hi, lo := bits.Mul64(mix64(r.s), n)
		if lo >= n || lo >= -n%n {
			return hi
		}
	}
}

// mix64 is SplitMix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
