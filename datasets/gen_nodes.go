package datasets

// The generator's node-level draws: the planted classes (every node's label)
// laid out on a random ranking of the nodes, and the train, valid and test
// node splits, with the parallel sort they use.

import (
	"slices"
	"sync"
)

// classes lays the classes out on a random ranking of the nodes and
// returns every node's class. Class c gets the share 1/(c+2) of the nodes
// (apportioned exactly in integers) and the rank positions
// [classStart[c], classStart[c+1]). It sets g.rank and g.classStart.
func (g *generator) classes() []int32 {
	n, C := g.sz.nodes, g.preset.Classes
	cum := make([]uint64, C+1)
	for c := range C {
		cum[c+1] = cum[c] + (1<<40)/uint64(c+2)
	}
	g.classStart = make([]int64, C+1)
	for c := range cum {
		g.classStart[c] = int64(mulDiv(uint64(n), cum[c], cum[C]))
	}
	g.rank = newFeistel(uint64(n), streamKey(g.seed, streamRank))
	labels := make([]int32, n)
	genParallel(g.workers, n, genChunk, func(lo, hi int64) {
		c := g.classAt(lo)
		for i := lo; i < hi; i++ {
			for i >= g.classStart[c+1] {
				c++
			}
			labels[g.rank.at(uint64(i))] = int32(c)
		}
		g.prog.Add(hi - lo)
	})
	return labels
}

// classAt is the class holding rank position i.
func (g *generator) classAt(i int64) int {
	k, found := slices.BinarySearch(g.classStart, i)
	if !found {
		k--
	}
	for g.classStart[k+1] <= i { // skip empty classes
		k++
	}
	return k
}

// splits draws the train, valid and test node sets: consecutive runs of a
// random permutation of the nodes, each sorted.
func (g *generator) splits() map[string][]int64 {
	perm := newFeistel(uint64(g.sz.nodes), streamKey(g.seed, streamSplit))
	sizes := []int64{g.sz.train, g.sz.valid, g.sz.test}
	out := make(map[string][]int64, 3)
	var at int64
	for i, name := range SplitNames {
		ids := make([]int64, sizes[i])
		base := at
		genParallel(g.workers, sizes[i], genChunk, func(lo, hi int64) {
			for j := lo; j < hi; j++ {
				ids[j] = int64(perm.at(uint64(base + j)))
			}
		})
		parallelSortInt64(ids, g.workers)
		out[name] = ids
		at += sizes[i]
	}
	return out
}

// parallelSortInt64 sorts s: chunks sorted in parallel, then merged pairwise.
func parallelSortInt64(s []int64, workers int) {
	const minChunk = 1 << 16
	if workers <= 1 || len(s) < 2*minChunk {
		slices.Sort(s)
		return
	}
	parts := min(workers, len(s)/minChunk)
	bounds := make([]int, parts+1)
	for i := range bounds {
		bounds[i] = len(s) * i / parts
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { slices.Sort(s[bounds[i]:bounds[i+1]]) })
	}
	wg.Wait()
	buf := make([]int64, len(s))
	src, dst := s, buf
	for len(bounds) > 2 {
		var nb []int
		for i := 0; i+1 < len(bounds); i += 2 {
			lo := bounds[i]
			if i+2 >= len(bounds) {
				copy(dst[lo:bounds[i+1]], src[lo:bounds[i+1]])
				nb = append(nb, lo)
				continue
			}
			mid, hi := bounds[i+1], bounds[i+2]
			wg.Go(func() { mergeInt64(dst[lo:hi], src[lo:mid], src[mid:hi]) })
			nb = append(nb, lo)
		}
		wg.Wait()
		nb = append(nb, len(s))
		bounds = nb
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

func mergeInt64(dst, a, b []int64) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if b[j] < a[i] {
			dst[k] = b[j]
			j++
		} else {
			dst[k] = a[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
}
