package sampler

// Checkers of sampled batches: equality, a digest of every output field, and
// every structural property against the graph.

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// batchesEqual reports the first difference between two batches.
func batchesEqual(a, b *Batch) error {
	switch {
	case !slices.Equal(a.NID, b.NID):
		return fmt.Errorf("NID differs (len %d vs %d)", len(a.NID), len(b.NID))
	case !slices.Equal(a.NumSampledNodes, b.NumSampledNodes):
		return fmt.Errorf("NumSampledNodes %v vs %v", a.NumSampledNodes, b.NumSampledNodes)
	case !slices.Equal(a.NumSampledEdges, b.NumSampledEdges):
		return fmt.Errorf("NumSampledEdges %v vs %v", a.NumSampledEdges, b.NumSampledEdges)
	case !slices.Equal(a.Src, b.Src):
		return fmt.Errorf("Src differs")
	case !slices.Equal(a.Dst, b.Dst):
		return fmt.Errorf("Dst differs")
	case !slices.Equal(a.Order, b.Order):
		return fmt.Errorf("Order differs")
	case a.EID != nil && b.EID != nil && !slices.Equal(a.EID, b.EID):
		return fmt.Errorf("EID differs")
	}
	return nil
}

// digest hashes every output field of b.
func digest(b *Batch) [32]byte {
	h := sha256.New()
	for _, s := range [][]int64{b.NID} {
		binary.Write(h, binary.LittleEndian, s)
	}
	for _, s := range [][]int{b.NumSampledNodes, b.NumSampledEdges} {
		for _, x := range s {
			binary.Write(h, binary.LittleEndian, int64(x))
		}
	}
	for _, s := range [][]int32{b.Src, b.Dst, b.Order} {
		binary.Write(h, binary.LittleEndian, int64(len(s)))
		binary.Write(h, binary.LittleEndian, s)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// checkBatch checks every structural property of a batch against the graph.
func checkBatch(t *testing.T, g *datasets.Graph, fanouts []int, seeds []int64, b *Batch) {
	t.Helper()
	if len(b.NumSampledNodes) != len(fanouts)+1 || len(b.NumSampledEdges) != len(fanouts) {
		t.Fatalf("per-hop counts: %d nodes, %d edges entries for %d hops", len(b.NumSampledNodes), len(b.NumSampledEdges), len(fanouts))
	}
	if !slices.Equal(b.NID[:len(seeds)], seeds) || b.NumSampledNodes[0] != len(seeds) {
		t.Fatal("seeds are not first in seed order")
	}
	total := 0
	for _, x := range b.NumSampledNodes {
		total += x
	}
	if total != len(b.NID) {
		t.Fatalf("NumSampledNodes sums to %d, len(NID) = %d", total, len(b.NID))
	}
	etotal := 0
	for _, x := range b.NumSampledEdges {
		etotal += x
	}
	if etotal != len(b.Src) || len(b.Src) != len(b.Dst) {
		t.Fatalf("NumSampledEdges sums to %d, %d src, %d dst", etotal, len(b.Src), len(b.Dst))
	}
	// Unique nodes (repeated seeds aside) and first local id per seed.
	first := map[int64]int32{}
	for i, v := range b.NID {
		if _, ok := first[v]; ok {
			if i >= len(seeds) {
				t.Fatalf("node %d appears twice in NID (local %d)", v, i)
			}
			continue
		}
		first[v] = int32(i)
	}
	// Per hop: edges point from hop-h nodes (or earlier) to the frontier of
	// hop h; new nodes appear in order of first use as a source.
	nodeLo, nodeHi := 0, b.NumSampledNodes[0]
	e := 0
	for h, k := range fanouts {
		nextNew := nodeHi
		perDst := map[int32][]int64{}
		var dstOrder []int32
		for j := 0; j < b.NumSampledEdges[h]; j, e = j+1, e+1 {
			s, d := b.Src[e], b.Dst[e]
			if d < int32(nodeLo) || d >= int32(nodeHi) {
				t.Fatalf("hop %d edge %d: dst %d outside frontier [%d, %d)", h+1, e, d, nodeLo, nodeHi)
			}
			if s < 0 || int(s) >= nodeHi+b.NumSampledNodes[h+1] {
				t.Fatalf("hop %d edge %d: src %d out of range", h+1, e, s)
			}
			if int(s) >= nodeHi {
				if int(s) > nextNew {
					t.Fatalf("hop %d edge %d: new node %d before %d", h+1, e, s, nextNew)
				}
				if int(s) == nextNew {
					nextNew++
				}
			}
			if first[b.NID[s]] != s {
				t.Fatalf("edge %d: src %d is not the local id of node %d", e, s, b.NID[s])
			}
			if len(dstOrder) == 0 || dstOrder[len(dstOrder)-1] != d {
				if _, seen := perDst[d]; seen {
					t.Fatalf("hop %d: edges of dst %d not contiguous", h+1, d)
				}
				dstOrder = append(dstOrder, d)
			}
			perDst[d] = append(perDst[d], b.NID[s])
		}
		if nextNew != nodeHi+b.NumSampledNodes[h+1] {
			t.Fatalf("hop %d: %d new nodes used as sources, %d counted", h+1, nextNew-nodeHi, b.NumSampledNodes[h+1])
		}
		if !slices.IsSorted(dstOrder) {
			t.Fatalf("hop %d: dsts not in frontier order", h+1)
		}
		for p := nodeLo; p < nodeHi; p++ {
			v := b.NID[p]
			var row []int64
			for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
				row = append(row, g.Neighbor(i))
			}
			got := slices.Clone(perDst[int32(p)])
			want := len(row)
			if k >= 0 && want > k {
				want = k
			}
			if len(got) != want {
				t.Fatalf("hop %d node %d: %d neighbours sampled, want %d (degree %d, fanout %d)", h+1, v, len(got), want, len(row), k)
			}
			slices.Sort(got)
			if len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("hop %d node %d: repeated neighbour", h+1, v)
			}
			slices.Sort(row)
			for _, u := range got {
				if _, ok := slices.BinarySearch(row, u); !ok {
					t.Fatalf("hop %d: edge %d -> %d is not in the graph", h+1, u, v)
				}
			}
			if len(got) == len(row) && !slices.Equal(got, row) {
				t.Fatalf("hop %d node %d: fanout >= degree but not every neighbour", h+1, v)
			}
		}
		nodeLo, nodeHi = nodeHi, nodeHi+b.NumSampledNodes[h+1]
	}
	// Order: a permutation listing NID ascending.
	if len(b.Order) != len(b.NID) {
		t.Fatalf("Order has %d entries, NID %d", len(b.Order), len(b.NID))
	}
	seen := make([]bool, len(b.NID))
	for i, o := range b.Order {
		if o < 0 || int(o) >= len(b.NID) || seen[o] {
			t.Fatalf("Order is not a permutation at %d", i)
		}
		seen[o] = true
		if i > 0 {
			a, c := b.NID[b.Order[i-1]], b.NID[o]
			if a > c || (a == c && b.Order[i-1] > o) {
				t.Fatalf("Order not ascending at %d", i)
			}
		}
	}
}
