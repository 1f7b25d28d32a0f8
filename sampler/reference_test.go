package sampler

import (
	"sort"

	"github.com/gnnloader/gnnloader/datasets"
)

// refSample is the deliberately simple reference: one goroutine, Go maps,
// the RNG contract of the package (nodeSeed, rng.below, Floyd's algorithm)
// written out again, and a comparison sort for Order.
func refSample(g *datasets.Graph, fanouts []int, seeds []int64, key uint64) *Batch {
	b := &Batch{}
	local := map[int64]int32{}
	for i, v := range seeds {
		b.NID = append(b.NID, v)
		if _, ok := local[v]; !ok {
			local[v] = int32(i)
		}
	}
	b.NumSampledNodes = append(b.NumSampledNodes, len(seeds))
	lo := 0
	for h, k := range fanouts {
		hi := len(b.NID)
		edges := 0
		for p := 0; p < hi-lo; p++ {
			v := b.NID[lo+p]
			var row, pos []int64
			for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
				row = append(row, g.Neighbor(i))
				pos = append(pos, i)
			}
			picks, eids := row, pos
			if k >= 0 && len(row) > k {
				picks, eids = nil, nil
				r := rng{nodeSeed(key, h+1, p)}
				chosen := map[int]bool{}
				for j := len(row) - k; j < len(row); j++ {
					t := int(r.below(uint64(j + 1)))
					if chosen[t] {
						t = j
					}
					chosen[t] = true
					picks = append(picks, row[t])
					eids = append(eids, pos[t])
				}
			}
			b.EID = append(b.EID, eids...)
			for _, u := range picks {
				l, ok := local[u]
				if !ok {
					l = int32(len(b.NID))
					local[u] = l
					b.NID = append(b.NID, u)
				}
				b.Src = append(b.Src, l)
				b.Dst = append(b.Dst, int32(lo+p))
				edges++
			}
		}
		b.NumSampledEdges = append(b.NumSampledEdges, edges)
		b.NumSampledNodes = append(b.NumSampledNodes, len(b.NID)-hi)
		lo = hi
	}
	addressOrder(b)
	return b
}

// addressOrder sets b.Order: b's positions by node id, ties in position
// order (what the sampler's address order must be).
func addressOrder(b *Batch) {
	for i := range b.NID {
		b.Order = append(b.Order, int32(i))
	}
	sort.SliceStable(b.Order, func(i, j int) bool { return b.NID[b.Order[i]] < b.NID[b.Order[j]] })
}
