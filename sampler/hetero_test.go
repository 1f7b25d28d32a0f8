package sampler

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// refHetero is the deliberately simple reference of HeteroSampler: one
// goroutine, Go maps, the semantics of hetero.go written out again (the
// frontier of a hop is the nodes that joined at the hop before; edge types
// in order; each dst node's draws from heteroSeed and Floyd's algorithm)
// and a comparison sort for Order.
func refHetero(h *datasets.Hetero, fanouts [][]int, input int, seeds []int64, key uint64) *HeteroBatch {
	T := len(h.NodeTypes)
	typeOf := map[string]int{}
	for i, t := range h.NodeTypes {
		typeOf[t.Name] = i
	}
	b := &HeteroBatch{Nodes: make([]HeteroNodes, T), Edges: make([]HeteroEdges, len(h.Relations))}
	local := make([]map[int64]int32, T)
	for t := range local {
		local[t] = map[int64]int32{}
	}
	for i, v := range seeds {
		b.Nodes[input].NID = append(b.Nodes[input].NID, v)
		if _, ok := local[input][v]; !ok {
			local[input][v] = int32(i)
		}
	}
	lo, hi := make([]int, T), make([]int, T)
	for t := range b.Nodes {
		hi[t] = len(b.Nodes[t].NID)
		b.Nodes[t].NumSampledNodes = []int{hi[t]}
	}
	for hop, fan := range fanouts {
		for e, r := range h.Relations {
			s, d := typeOf[r.Src], typeOf[r.Dst]
			g := &r.Graph
			et := &b.Edges[e]
			edges := 0
			for p := 0; fan[e] != 0 && p < hi[d]-lo[d]; p++ {
				v := b.Nodes[d].NID[lo[d]+p]
				var pos []int64
				for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
					pos = append(pos, i)
				}
				picks := pos
				if k := fan[e]; k >= 0 && len(pos) > k {
					picks = nil
					rg := rng{heteroSeed(key, hop+1, e, p)}
					chosen := map[int]bool{}
					for j := len(pos) - k; j < len(pos); j++ {
						t := int(rg.below(uint64(j + 1)))
						if chosen[t] {
							t = j
						}
						chosen[t] = true
						picks = append(picks, pos[t])
					}
				}
				for _, i := range picks {
					u := g.Neighbor(i)
					l, ok := local[s][u]
					if !ok {
						l = int32(len(b.Nodes[s].NID))
						local[s][u] = l
						b.Nodes[s].NID = append(b.Nodes[s].NID, u)
					}
					et.Src = append(et.Src, l)
					et.Dst = append(et.Dst, int32(lo[d]+p))
					et.EID = append(et.EID, i)
					edges++
				}
			}
			et.NumSampledEdges = append(et.NumSampledEdges, edges)
		}
		for t := range b.Nodes {
			nt := &b.Nodes[t]
			nt.NumSampledNodes = append(nt.NumSampledNodes, len(nt.NID)-hi[t])
			lo[t], hi[t] = hi[t], len(nt.NID)
		}
	}
	for t := range b.Nodes {
		nt := &b.Nodes[t]
		for i := range nt.NID {
			nt.Order = append(nt.Order, int32(i))
		}
		sort.SliceStable(nt.Order, func(i, j int) bool { return nt.NID[nt.Order[i]] < nt.NID[nt.Order[j]] })
	}
	return b
}

// testMag is a small generated ogbn-mag-like graph made two-way (8 edge
// types, two to three per source node type), with one relation's indices
// widened to 64 bits so that both index widths are drawn from.
var testMag = sync.OnceValues(func() (*datasets.Hetero, error) {
	h, err := datasets.GenerateHetero(datasets.GenOptions{Like: "mag", Scale: 0.01, Seed: 5})
	if err != nil {
		return nil, err
	}
	if h, err = h.ToUndirected(1); err != nil {
		return nil, err
	}
	g := &h.Relations[1].Graph // author writes paper
	g.Indices64 = make([]int64, len(g.Indices32))
	for i, u := range g.Indices32 {
		g.Indices64[i] = int64(u)
	}
	g.Indices32 = nil
	return h, h.Validate()
})

func mag(t testing.TB) *datasets.Hetero {
	t.Helper()
	h, err := testMag()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// uniformFanouts is fanouts[h] for every edge type, per hop.
func uniformFanouts(h *datasets.Hetero, fanouts ...int) [][]int {
	var out [][]int
	for _, f := range fanouts {
		out = append(out, slices.Repeat([]int{f}, len(h.Relations)))
	}
	return out
}

// TestHeteroDifferential: the sampler gives the reference's batch exactly,
// whatever the workers, for several fanout shapes (-1, 0, mixed per edge
// type) and seed lists (a few, many, repeats).
func TestHeteroDifferential(t *testing.T) {
	h := mag(t)
	paper := 0
	np := h.NodeTypes[paper].NumNodes
	many := make([]int64, 1500)
	for i := range many {
		many[i] = int64(i*7919) % np
	}
	mixed := uniformFanouts(h, 4, 3)
	mixed[0][1], mixed[0][2], mixed[1][4] = -1, 0, 40
	for _, c := range []struct {
		name    string
		fanouts [][]int
		seeds   []int64
	}{
		{"few", uniformFanouts(h, 10, 5), []int64{3, 99, 1000}},
		{"many", uniformFanouts(h, 5, 5, 2), many},
		{"repeats", uniformFanouts(h, 6, 2), []int64{7, 7, 12, 7, 3}},
		{"all and none", uniformFanouts(h, -1, 0, 3), many[:40]},
		{"mixed", mixed, many[:700]},
	} {
		t.Run(c.name, func(t *testing.T) {
			for key := uint64(1); key <= 3; key++ {
				want := refHetero(h, c.fanouts, paper, c.seeds, key*0x9e37)
				for _, w := range []int{1, 3, 16} {
					s, err := NewHetero(h, HeteroOptions{Fanouts: c.fanouts, Workers: w})
					if err != nil {
						t.Fatal(err)
					}
					var got HeteroBatch
					for range 2 { // a reused batch and scratch give the same bytes
						if err := s.Sample(paper, c.seeds, key*0x9e37, &got); err != nil {
							t.Fatal(err)
						}
						if diff := heteroDiff(&got, want); diff != "" {
							t.Fatalf("workers %d, key %d: %s", w, key, diff)
						}
					}
					checkHetero(t, h, c.fanouts, paper, c.seeds, &got)
				}
			}
		})
	}
}

// heteroDiff names the first field where a and b differ, or returns "".
func heteroDiff(a, b *HeteroBatch) string {
	for t := range b.Nodes {
		x, y := a.Nodes[t], b.Nodes[t]
		for _, f := range []struct {
			name string
			a, b any
		}{{"NID", x.NID, y.NID}, {"NumSampledNodes", x.NumSampledNodes, y.NumSampledNodes}, {"Order", x.Order, y.Order}} {
			if !reflect.DeepEqual(f.a, f.b) && reflect.ValueOf(f.a).Len()+reflect.ValueOf(f.b).Len() > 0 {
				return fmt.Sprintf("node type %d: %s differs", t, f.name)
			}
		}
	}
	for e := range b.Edges {
		x, y := a.Edges[e], b.Edges[e]
		if !slices.Equal(x.Src, y.Src) || !slices.Equal(x.Dst, y.Dst) || !slices.Equal(x.EID, y.EID) || !slices.Equal(x.NumSampledEdges, y.NumSampledEdges) {
			return fmt.Sprintf("edge type %d: edges differ (%d and %d)", e, len(x.Src), len(y.Src))
		}
	}
	return ""
}

// checkHetero checks a batch's invariants against the dataset alone.
func checkHetero(t *testing.T, h *datasets.Hetero, fanouts [][]int, input int, seeds []int64, b *HeteroBatch) {
	t.Helper()
	typeOf := map[string]int{}
	for i, nt := range h.NodeTypes {
		typeOf[nt.Name] = i
	}
	H := len(fanouts)
	joined := make([][]int, len(h.NodeTypes)) // per type, per local id: the hop it joined at
	for ti, nt := range b.Nodes {
		if len(nt.NumSampledNodes) != H+1 {
			t.Fatalf("type %d: %d hop counts for %d hops", ti, len(nt.NumSampledNodes), H)
		}
		for hop, k := range nt.NumSampledNodes {
			for range k {
				joined[ti] = append(joined[ti], hop)
			}
		}
		if len(joined[ti]) != len(nt.NID) {
			t.Fatalf("type %d: num_sampled_nodes %v sum to %d, %d nodes", ti, nt.NumSampledNodes, len(joined[ti]), len(nt.NID))
		}
		first := 0
		if ti == input {
			if !slices.Equal(nt.NID[:len(seeds)], seeds) || nt.NumSampledNodes[0] != len(seeds) {
				t.Fatalf("input type's nodes do not start with the seeds")
			}
			first = len(seeds)
		} else if nt.NumSampledNodes[0] != 0 {
			t.Fatalf("type %d has %d hop-0 nodes", ti, nt.NumSampledNodes[0])
		}
		seen := map[int64]bool{}
		for _, v := range seeds {
			seen[v] = ti == input
		}
		for i, v := range nt.NID[first:] {
			if v < 0 || v >= h.NodeTypes[ti].NumNodes || seen[v] {
				t.Fatalf("type %d: node %d (local %d) out of range or repeated", ti, v, first+i)
			}
			seen[v] = true
		}
		if len(nt.Order) != len(nt.NID) || !slices.IsSortedFunc(nt.Order, func(a, b int32) int { return int(nt.NID[a] - nt.NID[b]) }) {
			t.Fatalf("type %d: order not by id", ti)
		}
	}
	for e, r := range h.Relations {
		et := b.Edges[e]
		s, d := typeOf[r.Src], typeOf[r.Dst]
		g := &r.Graph
		if len(et.Src) != len(et.Dst) || len(et.Src) != len(et.EID) || len(et.NumSampledEdges) != H {
			t.Fatalf("edge type %s: ragged", r.EdgeType)
		}
		// Per hop and dst node: how many it drew, and from distinct positions.
		type hd struct{ hop, dst int }
		drawn := map[hd]int{}
		pos := map[[2]int64]bool{}
		at := 0
		for hop, k := range et.NumSampledEdges {
			for j := at; j < at+k; j++ {
				sl, dl := et.Src[j], et.Dst[j]
				if sl < 0 || int(sl) >= len(b.Nodes[s].NID) || dl < 0 || int(dl) >= len(b.Nodes[d].NID) {
					t.Fatalf("edge type %s, edge %d: local ids %d -> %d out of range", r.EdgeType, j, sl, dl)
				}
				u, v, id := b.Nodes[s].NID[sl], b.Nodes[d].NID[dl], et.EID[j]
				if id < g.Indptr[v] || id >= g.Indptr[v+1] || g.Neighbor(id) != u {
					t.Fatalf("edge type %s, edge %d: e_id %d is not the edge %d -> %d", r.EdgeType, j, id, u, v)
				}
				if joined[d][dl] != hop || joined[s][sl] > hop+1 {
					t.Fatalf("edge type %s, edge %d at hop %d: dst joined at hop %d, src at %d", r.EdgeType, j, hop+1, joined[d][dl], joined[s][sl])
				}
				if pos[[2]int64{int64(dl), id}] {
					t.Fatalf("edge type %s: dst %d drew row position %d twice", r.EdgeType, dl, id)
				}
				pos[[2]int64{int64(dl), id}] = true
				drawn[hd{hop, int(dl)}]++
			}
			at += k
		}
		for hop, f := range fanouts {
			// Every frontier node drew min(degree, fanout): no more, no fewer.
			lo := 0
			for _, k := range b.Nodes[d].NumSampledNodes[:hop] {
				lo += k
			}
			for dl := lo; dl < lo+b.Nodes[d].NumSampledNodes[hop]; dl++ {
				deg, k := int(g.Degree(b.Nodes[d].NID[dl])), f[e]
				want := deg
				if k >= 0 && k < deg {
					want = k
				}
				if got := drawn[hd{hop, dl}]; got != want {
					t.Fatalf("edge type %s, hop %d: dst %d (degree %d, fanout %d) drew %d", r.EdgeType, hop+1, dl, deg, k, got)
				}
			}
		}
	}
}

// TestHeteroDeterminism: a key gives one batch, another key another.
func TestHeteroDeterminism(t *testing.T) {
	h := mag(t)
	s, err := NewHetero(h, HeteroOptions{Fanouts: uniformFanouts(h, 5, 5)})
	if err != nil {
		t.Fatal(err)
	}
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	var a, b, c HeteroBatch
	for _, x := range []struct {
		b   *HeteroBatch
		key uint64
	}{{&a, 42}, {&b, 42}, {&c, 43}} {
		if err := s.Sample(0, seeds, x.key, x.b); err != nil {
			t.Fatal(err)
		}
	}
	if d := heteroDiff(&a, &b); d != "" {
		t.Fatalf("same key: %s", d)
	}
	if heteroDiff(&a, &c) == "" {
		t.Fatal("keys 42 and 43 gave the same batch")
	}
}

// TestHeteroRefuses: options and inputs that do not fit the graph.
func TestHeteroRefuses(t *testing.T) {
	h := mag(t)
	for name, f := range map[string][][]int{
		"no hops":          nil,
		"short hop":        {{1, 2}},
		"fanout -2":        append(uniformFanouts(h, 3), append(slices.Repeat([]int{1}, len(h.Relations)-1), -2)),
		"nine hops":        uniformFanouts(h, 1, 1, 1, 1, 1, 1, 1, 1, 1),
		"one hop too long": {slices.Repeat([]int{1}, len(h.Relations)+1)},
	} {
		if _, err := NewHetero(h, HeteroOptions{Fanouts: f}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := NewHetero(h, HeteroOptions{Fanouts: uniformFanouts(h, 2)})
	if err != nil {
		t.Fatal(err)
	}
	var b HeteroBatch
	if err := s.Sample(len(h.NodeTypes), []int64{0}, 1, &b); err == nil || !strings.Contains(err.Error(), "input node type") {
		t.Errorf("unknown input type: %v", err)
	}
	if err := s.Sample(2, []int64{0, h.NodeTypes[2].NumNodes}, 1, &b); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("seed past the type's nodes: %v", err)
	}
}
