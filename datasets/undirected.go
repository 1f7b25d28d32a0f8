package datasets

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// workerCount turns a Workers option into a goroutine count (0 = GOMAXPROCS).
func workerCount(w int) int {
	if w <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return w
}

// nodeID is the element type of CSR indices.
type nodeID interface{ ~int32 | ~int64 }

// parallelChunks calls fn(lo, hi) over [0, n) in chunks of about chunk
// items on workers goroutines, and returns the first error.
func parallelChunks(n, chunk int64, workers int, fn func(lo, hi int64) error) error {
	if n <= 0 {
		return nil
	}
	chunk = max(chunk, 1)
	nchunks := (n + chunk - 1) / chunk
	workers = int(min(int64(workers), nchunks))
	var next atomic.Int64
	var (
		mu    sync.Mutex
		first error
		errAt = int64(-1)
		wg    sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := next.Add(1) - 1
				if c >= nchunks {
					return
				}
				lo := c * chunk
				if err := fn(lo, min(lo+chunk, n)); err != nil {
					mu.Lock()
					if errAt < 0 || c < errAt { // report the earliest, deterministically
						first, errAt = err, c
					}
					mu.Unlock()
					next.Store(nchunks)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// rowChunks splits rows [0, n) into ranges of about target edges (and at
// most target rows) each, so that parallel work over rows is balanced by
// edges; indptr is the cumulative edge count (len n+1).
func rowChunks(indptr []int64, target int64) [][2]int64 {
	return rowChunksFunc(int64(len(indptr)-1), func(v int64) int64 { return indptr[v] }, target)
}

// rowChunksFunc is rowChunks over any non-decreasing cumulative cost.
func rowChunksFunc(n int64, cum func(v int64) int64, target int64) [][2]int64 {
	var out [][2]int64
	for lo := int64(0); lo < n; {
		// the first row whose end passes cum(lo)+target, searched in
		// (lo, lo+target]
		want := cum(lo) + target
		l, h := lo+1, min(n, lo+target)
		for l < h {
			m := (l + h) / 2
			if cum(m) < want {
				l = m + 1
			} else {
				h = m
			}
		}
		out = append(out, [2]int64{lo, l})
		lo = l
	}
	return out
}

// MakeUndirected returns the symmetric closure of g: row v lists every u
// with an edge v->u or u->v in g, u != v, each once, ascending. g itself is
// not modified (its rows need not be sorted). The result is the same for
// any worker count. It keeps g's index width.
//
// Memory: a transposed copy of g's indices plus the result (at most twice
// g's edges), and a sorted copy of g's indices only when some row of g is
// not sorted; built with a counting-sort transpose, a per-row sort and a
// merge, all on workers goroutines (0 = GOMAXPROCS).
func MakeUndirected(g *Graph, workers int) (Graph, error) {
	if int64(len(g.Indptr)) != g.NumNodes+1 || g.NumNodes < 0 {
		return Graph{}, fmt.Errorf("undirected: indptr has %d entries for %d nodes", len(g.Indptr), g.NumNodes)
	}
	workers = workerCount(workers)
	if g.Indices64 != nil {
		ip, idx, err := makeUndirected(g.Indptr, g.Indices64, g.NumNodes, workers)
		return Graph{NumNodes: g.NumNodes, Indptr: ip, Indices64: idx}, err
	}
	idx32 := g.Indices32
	if idx32 == nil {
		if g.NumEdges() != 0 {
			return Graph{}, fmt.Errorf("undirected: indptr ends at %d but no indices", g.NumEdges())
		}
		idx32 = []int32{}
	}
	ip, idx, err := makeUndirected(g.Indptr, idx32, g.NumNodes, workers)
	return Graph{NumNodes: g.NumNodes, Indptr: ip, Indices32: idx}, err
}

const edgeChunk = 1 << 16 // edges per unit of parallel work

func makeUndirected[T nodeID](indptr []int64, idx []T, n int64, workers int) ([]int64, []T, error) {
	e := indptr[n]
	if int64(len(idx)) != e || indptr[0] != 0 {
		return nil, nil, fmt.Errorf("undirected: indices has %d entries, indptr runs %d..%d", len(idx), indptr[0], e)
	}
	for v := int64(1); v <= n; v++ { // cheap next to the rest, and makes the rest safe
		if indptr[v] < indptr[v-1] {
			return nil, nil, fmt.Errorf("undirected: indptr decreases at row %d", v)
		}
	}
	chunks := rowChunks(indptr, edgeChunk)

	// Transpose: in-degrees, prefix sum, scatter with atomic cursors, then
	// sort each transposed row (which makes the result deterministic).
	tptr := make([]int64, n+1)
	var unsorted atomic.Bool
	err := parallelChunks(int64(len(chunks)), 1, workers, func(lo, hi int64) error {
		sorted := true
		for c := lo; c < hi; c++ {
			for v := chunks[c][0]; v < chunks[c][1]; v++ {
				for k := indptr[v]; k < indptr[v+1]; k++ {
					u := int64(idx[k])
					if u < 0 || u >= n {
						return fmt.Errorf("undirected: edge %d -> %d out of range [0, %d) (indices[%d])", v, u, n, k)
					}
					if k > indptr[v] && idx[k] < idx[k-1] {
						sorted = false
					}
					atomic.AddInt64(&tptr[u+1], 1)
				}
			}
		}
		if !sorted {
			unsorted.Store(true)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for v := int64(0); v < n; v++ {
		tptr[v+1] += tptr[v]
	}
	cursor := slices.Clone(tptr[:n])
	tidx := make([]T, e)
	parallelChunks(int64(len(chunks)), 1, workers, func(lo, hi int64) error {
		for c := lo; c < hi; c++ {
			for v := chunks[c][0]; v < chunks[c][1]; v++ {
				for k := indptr[v]; k < indptr[v+1]; k++ {
					p := atomic.AddInt64(&cursor[idx[k]], 1) - 1
					tidx[p] = T(v)
				}
			}
		}
		return nil
	})
	cursor = nil
	tchunks := rowChunks(tptr, edgeChunk)
	parallelChunks(int64(len(tchunks)), 1, workers, func(lo, hi int64) error {
		for c := lo; c < hi; c++ {
			for v := tchunks[c][0]; v < tchunks[c][1]; v++ {
				slices.Sort(tidx[tptr[v]:tptr[v+1]])
			}
		}
		return nil
	})

	// Rows of g that are not sorted are sorted once, in a copy.
	if unsorted.Load() {
		idx = slices.Clone(idx)
		parallelChunks(int64(len(chunks)), 1, workers, func(lo, hi int64) error {
			for c := lo; c < hi; c++ {
				for v := chunks[c][0]; v < chunks[c][1]; v++ {
					slices.Sort(idx[indptr[v]:indptr[v+1]])
				}
			}
			return nil
		})
	}

	// Merge each row with its transposed row: first the sizes, then the rows.
	merge := func(v int64, out []T) int64 {
		return mergeUnique(idx[indptr[v]:indptr[v+1]], tidx[tptr[v]:tptr[v+1]], T(v), out)
	}
	outPtr := make([]int64, n+1)
	mchunks := rowChunksFunc(n, func(v int64) int64 { return indptr[v] + tptr[v] }, edgeChunk)
	parallelChunks(int64(len(mchunks)), 1, workers, func(lo, hi int64) error {
		for c := lo; c < hi; c++ {
			for v := mchunks[c][0]; v < mchunks[c][1]; v++ {
				outPtr[v+1] = merge(v, nil)
			}
		}
		return nil
	})
	for v := int64(0); v < n; v++ {
		outPtr[v+1] += outPtr[v]
	}
	out := make([]T, outPtr[n])
	parallelChunks(int64(len(mchunks)), 1, workers, func(lo, hi int64) error {
		for c := lo; c < hi; c++ {
			for v := mchunks[c][0]; v < mchunks[c][1]; v++ {
				merge(v, out[outPtr[v]:outPtr[v+1]])
			}
		}
		return nil
	})
	return outPtr, out, nil
}

// mergeUnique merges the sorted lists a and b, dropping duplicates and
// self, into out (when out is non-nil) and returns the merged length.
func mergeUnique[T nodeID](a, b []T, self T, out []T) int64 {
	var n int64
	i, j := 0, 0
	have := false
	var last T
	for i < len(a) || j < len(b) {
		var x T
		if j >= len(b) || i < len(a) && a[i] <= b[j] {
			x = a[i]
			i++
		} else {
			x = b[j]
			j++
		}
		if x == self || have && x == last {
			continue
		}
		if out != nil {
			out[n] = x
		}
		n++
		last, have = x, true
	}
	return n
}
