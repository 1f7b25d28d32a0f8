package sampler

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// temporalGraph is a power-law graph with node times and edge times
// uniform in [0, 100).
type temporalGraph struct {
	g                  *datasets.Graph
	nodeTime, edgeTime []int64
}

var (
	temporalOnce   sync.Once
	temporalGraphs []temporalGraph
)

func testTemporalGraphs() []temporalGraph {
	temporalOnce.Do(func() {
		for i, wide := range []bool{false, true} {
			g := powerLawGraph(20_000, 10, 600, uint64(40+i), wide)
			r := rng{mix64(uint64(77 + i))}
			tg := temporalGraph{g: g, nodeTime: make([]int64, g.NumNodes), edgeTime: make([]int64, g.NumEdges())}
			for v := range tg.nodeTime {
				tg.nodeTime[v] = int64(r.below(100))
			}
			for p := range tg.edgeTime {
				tg.edgeTime[p] = int64(r.below(100))
			}
			temporalGraphs = append(temporalGraphs, tg)
		}
	})
	return temporalGraphs
}

// disjointCase is one configuration of the differential tests.
type disjointCase struct {
	name  string
	opts  func(tg temporalGraph) DisjointOptions
	times bool // give the seeds times (else: none, or their node times)
}

func disjointCases(fanouts []int) []disjointCase {
	return []disjointCase{
		{"plain", func(temporalGraph) DisjointOptions { return DisjointOptions{Fanouts: fanouts} }, false},
		{"node_uniform", func(tg temporalGraph) DisjointOptions {
			return DisjointOptions{Fanouts: fanouts, NodeTime: tg.nodeTime}
		}, false},
		{"node_last_input_time", func(tg temporalGraph) DisjointOptions {
			return DisjointOptions{Fanouts: fanouts, NodeTime: tg.nodeTime, Strategy: Last}
		}, true},
		{"edge_uniform", func(tg temporalGraph) DisjointOptions {
			return DisjointOptions{Fanouts: fanouts, EdgeTime: tg.edgeTime}
		}, true},
		{"edge_last", func(tg temporalGraph) DisjointOptions {
			return DisjointOptions{Fanouts: fanouts, EdgeTime: tg.edgeTime, Strategy: Last}
		}, true},
	}
}

func seedTimes(n int, seed uint64) []int64 {
	r := rng{mix64(seed)}
	t := make([]int64, n)
	for i := range t {
		t[i] = int64(r.below(110)) - 5
	}
	return t
}

func disjointEqual(a, b *DisjointBatch) error {
	if err := batchesEqual(&a.Batch, &b.Batch); err != nil {
		return err
	}
	if !slices.Equal(a.Subgraph, b.Subgraph) {
		return errors.New("Subgraph differs")
	}
	return nil
}

// TestDisjointDifferential compares Disjoint with refDisjoint byte for byte,
// for every worker count, with and without times, on 32- and 64-bit graphs.
func TestDisjointDifferential(t *testing.T) {
	for gi, tg := range testTemporalGraphs() {
		seeds := testSeeds(tg.g, 300, uint64(gi))
		seeds = append(seeds, seeds[:20]...) // repeated seeds root their own subgraphs
		times := seedTimes(len(seeds), uint64(gi))
		for _, fanouts := range [][]int{{15, 10, 5}, {30, -1}, {3, 0, 3}, {-1}} {
			for _, c := range disjointCases(fanouts) {
				t.Run(fmt.Sprintf("g%d/%v/%s", gi, fanouts, c.name), func(t *testing.T) {
					o := c.opts(tg)
					var st []int64
					if c.times {
						st = times
					}
					want := map[uint64]*DisjointBatch{}
					for key := uint64(0); key < 2; key++ {
						want[key] = refDisjoint(tg.g, o, seeds, st, key)
					}
					for _, w := range []int{1, 2, 3, 16} {
						o.Workers, o.EdgeIDs = w, true
						d, err := NewDisjoint(tg.g, o)
						if err != nil {
							t.Fatal(err)
						}
						var b DisjointBatch
						for key := uint64(0); key < 2; key++ {
							if err := d.Sample(seeds, st, key, &b); err != nil {
								t.Fatal(err)
							}
							if err := disjointEqual(&b, want[key]); err != nil {
								t.Fatalf("workers %d key %d: %v", w, key, err)
							}
							checkDisjoint(t, tg, o, seeds, st, &b)
						}
					}
				})
			}
		}
	}
}

// TestDisjointFullFanoutIsPerSeedSampler: with every fanout -1 there is no
// randomness, and each subgraph must be exactly what the (non-disjoint)
// Sampler gives for its seed alone.
func TestDisjointFullFanoutIsPerSeedSampler(t *testing.T) {
	g := powerLawGraph(3000, 3, 40, 9, false)
	fanouts := []int{-1, -1}
	seeds := testSeeds(g, 50, 3)
	seeds = append(seeds, seeds[0])
	d, err := NewDisjoint(g, DisjointOptions{Fanouts: fanouts, Workers: 4, EdgeIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	var b DisjointBatch
	if err := d.Sample(seeds, nil, 99, &b); err != nil {
		t.Fatal(err)
	}
	s, err := New(g, Options{Fanouts: fanouts, Workers: 1, EdgeIDs: true, NoOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range seeds {
		var one Batch
		if err := s.Sample([]int64{v}, 5, &one); err != nil {
			t.Fatal(err)
		}
		got := subgraphOf(&b, i)
		if !slices.Equal(got.NID, one.NID) || !slices.Equal(got.Src, one.Src) || !slices.Equal(got.Dst, one.Dst) ||
			!slices.Equal(got.EID, one.EID) || !slices.Equal(got.NumSampledNodes, one.NumSampledNodes) ||
			!slices.Equal(got.NumSampledEdges, one.NumSampledEdges) {
			t.Fatalf("subgraph %d (seed %d) differs from the Sampler's batch of that seed:\n%v\n%v", i, v, got, one)
		}
	}
}

// subgraphOf extracts subgraph i of b as a Batch of its own (its nodes
// renumbered in batch order).
func subgraphOf(b *DisjointBatch, i int) *Batch {
	out := &Batch{}
	loc := map[int32]int32{}
	hop := 0
	end := b.NumSampledNodes[0]
	out.NumSampledNodes = make([]int, len(b.NumSampledNodes))
	for l, s := range b.Subgraph {
		for l >= end {
			hop++
			end += b.NumSampledNodes[hop]
		}
		if int(s) == i {
			loc[int32(l)] = int32(len(out.NID))
			out.NID = append(out.NID, b.NID[l])
			out.NumSampledNodes[hop]++
		}
	}
	out.NumSampledEdges = make([]int, len(b.NumSampledEdges))
	hop, end = 0, b.NumSampledEdges[0]
	for e := range b.Src {
		for e >= end {
			hop++
			end += b.NumSampledEdges[hop]
		}
		if int(b.Subgraph[b.Dst[e]]) == i {
			out.Src = append(out.Src, loc[b.Src[e]])
			out.Dst = append(out.Dst, loc[b.Dst[e]])
			out.EID = append(out.EID, b.EID[e])
			out.NumSampledEdges[hop]++
		}
	}
	return out
}

// checkDisjoint checks every property of a disjoint batch against the
// graph: seeds first, one subgraph per seed, no node twice in a subgraph,
// edges inside a subgraph and real, at most fanout per sampling node, every
// neighbour eligible by its seed's time, and "last" taking the most recent.
func checkDisjoint(t *testing.T, tg temporalGraph, o DisjointOptions, seeds, times []int64, b *DisjointBatch) {
	t.Helper()
	g := tg.g
	B := len(seeds)
	if !slices.Equal(b.NID[:B], seeds) || len(b.Subgraph) != len(b.NID) || b.NumSampledNodes[0] != B {
		t.Fatalf("seeds are not the first nodes")
	}
	temporal := o.NodeTime != nil || o.EdgeTime != nil
	if temporal && times == nil {
		for _, v := range seeds {
			times = append(times, o.NodeTime[v])
		}
	}
	seen := map[[2]int64]bool{}
	for l, v := range b.NID {
		s := b.Subgraph[l]
		if l < B && int(s) != l {
			t.Fatalf("seed %d is in subgraph %d", l, s)
		}
		if seen[[2]int64{int64(s), v}] {
			t.Fatalf("node %d twice in subgraph %d", v, s)
		}
		seen[[2]int64{int64(s), v}] = true
	}
	timeOf := func(p int64) int64 {
		if o.EdgeTime != nil {
			return o.EdgeTime[p]
		}
		return o.NodeTime[g.Neighbor(p)]
	}
	// per sampling node (dst): its picked positions
	picked := map[int32][]int64{}
	for e := range b.Src {
		src, dst, p := b.Src[e], b.Dst[e], b.EID[e]
		s := b.Subgraph[dst]
		if b.Subgraph[src] != s {
			t.Fatalf("edge %d joins subgraphs %d and %d", e, b.Subgraph[src], s)
		}
		v := b.NID[dst]
		if p < g.Indptr[v] || p >= g.Indptr[v+1] || g.Neighbor(p) != b.NID[src] {
			t.Fatalf("edge %d (%d -> %d, e_id %d) is no edge of the graph", e, b.NID[src], v, p)
		}
		if temporal && timeOf(p) > times[s] {
			t.Fatalf("edge %d of subgraph %d has time %d, after its seed's %d", e, s, timeOf(p), times[s])
		}
		picked[dst] = append(picked[dst], p)
	}
	// hop of every node, to know each sampling node's fanout
	hopOf := make([]int, len(b.NID))
	l := 0
	for h, n := range b.NumSampledNodes {
		for range n {
			hopOf[l] = h
			l++
		}
	}
	for dst := range b.NID {
		if hopOf[dst] == len(o.Fanouts) {
			break // the last hop's nodes sample nothing
		}
		ps := picked[int32(dst)]
		k := o.Fanouts[hopOf[dst]]
		if k >= 0 && len(ps) > k {
			t.Fatalf("node %d sampled %d neighbours, fanout %d", dst, len(ps), k)
		}
		if !temporal || o.Strategy != Last {
			continue
		}
		v, s := b.NID[dst], b.Subgraph[dst]
		oldest := int64(1 << 62)
		for _, p := range ps {
			oldest = min(oldest, timeOf(p))
		}
		eligible := 0
		for p := g.Indptr[v]; p < g.Indptr[v+1]; p++ {
			if tm := timeOf(p); tm <= times[s] {
				eligible++
				if tm > oldest && !slices.Contains(ps, p) {
					t.Fatalf("last: node %d left out neighbour at %d (time %d) but took one of time %d", v, p, tm, oldest)
				}
			}
		}
		if want := min(eligible, k); k >= 0 && len(ps) != want || k < 0 && len(ps) != eligible {
			t.Fatalf("last: node %d took %d of %d eligible, fanout %d", v, len(ps), eligible, k)
		}
	}
}

// TestDisjointDeterminism samples under several GOMAXPROCS and concurrent
// calls and wants the same bytes.
func TestDisjointDeterminism(t *testing.T) {
	tg := testTemporalGraphs()[0]
	seeds := testSeeds(tg.g, 512, 5)
	o := DisjointOptions{Fanouts: []int{10, 5}, NodeTime: tg.nodeTime}
	want := refDisjoint(tg.g, o, seeds, nil, 7)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 3, 16} {
		runtime.GOMAXPROCS(procs)
		o.Workers = 0
		d, err := NewDisjoint(tg.g, o)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				var b DisjointBatch
				if err := d.Sample(seeds, nil, 7, &b); err != nil {
					t.Error(err)
					return
				}
				if err := disjointEqual(&b, want); err != nil {
					t.Errorf("GOMAXPROCS %d: %v", procs, err)
				}
			})
		}
		wg.Wait()
	}
}

func TestDisjointRefusals(t *testing.T) {
	tg := testTemporalGraphs()[0]
	g := tg.g
	bad := map[string]DisjointOptions{
		"both times":      {Fanouts: []int{2}, NodeTime: tg.nodeTime, EdgeTime: tg.edgeTime},
		"short node time": {Fanouts: []int{2}, NodeTime: tg.nodeTime[1:]},
		"short edge time": {Fanouts: []int{2}, EdgeTime: tg.edgeTime[1:]},
		"strategy":        {Fanouts: []int{2}, NodeTime: tg.nodeTime, Strategy: 7},
		"no fanouts":      {},
		"fanout -2":       {Fanouts: []int{-2}},
		"workers":         {Fanouts: []int{2}, Workers: -1},
	}
	for name, o := range bad {
		if _, err := NewDisjoint(g, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var b DisjointBatch
	plain, _ := NewDisjoint(g, DisjointOptions{Fanouts: []int{2}})
	if err := plain.Sample([]int64{1}, []int64{3}, 0, &b); err == nil {
		t.Error("seed times without a time filter: accepted")
	}
	if err := plain.Sample([]int64{g.NumNodes}, nil, 0, &b); err == nil {
		t.Error("seed out of range: accepted")
	}
	edge, _ := NewDisjoint(g, DisjointOptions{Fanouts: []int{2}, EdgeTime: tg.edgeTime})
	if err := edge.Sample([]int64{1}, nil, 0, &b); !errors.Is(err, ErrNoSeedTimes) {
		t.Errorf("edge times without seed times: %v", err)
	}
	if err := edge.Sample([]int64{1, 2}, []int64{3}, 0, &b); err == nil {
		t.Error("one time for two seeds: accepted")
	}
	if err := plain.Sample(nil, nil, 0, &b); err != nil || len(b.NID) != 0 || len(b.NumSampledNodes) != 2 {
		t.Errorf("no seeds: %v, %d nodes, %v", err, len(b.NID), b.NumSampledNodes)
	}
}
