package sampler

// Temporal draws on hand-made graphs: "uniform" is uniform over the eligible
// neighbours (chi-square), "last" takes the most recent, and the seed's
// time, not a node's own, decides at every hop.

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// starGraph is node 0 with neighbours 1..deg (row 0), the rest without.
func starGraph(deg int) *datasets.Graph {
	n := int64(deg + 1)
	indptr := make([]int64, n+1)
	idx := make([]int32, 0, deg)
	for i := 1; i <= deg; i++ {
		idx = append(idx, int32(i))
	}
	for v := int64(1); v <= n; v++ {
		indptr[v] = int64(deg)
	}
	return &datasets.Graph{NumNodes: n, Indptr: indptr, Indices32: idx}
}

// TestTemporalUniformity: node 0's neighbours have times u%10 (edge times
// the same by position), the seed's time is 4, so half are eligible; every
// eligible neighbour must be drawn with probability fanout/eligible and no
// other ever (chi-square, alpha 0.001, fixed keys).
func TestTemporalUniformity(t *testing.T) {
	const deg, draws = 200, 20000
	g := starGraph(deg)
	nodeTime := make([]int64, g.NumNodes)
	edgeTime := make([]int64, deg)
	for u := range nodeTime {
		nodeTime[u] = int64(u % 10)
	}
	for p := range edgeTime {
		edgeTime[p] = nodeTime[p+1]
	}
	nodeTime[0] = 4
	for _, c := range []struct {
		name   string
		o      DisjointOptions
		times  []int64
		fanout int
	}{
		{"node_time_k10", DisjointOptions{NodeTime: nodeTime}, nil, 10},
		{"node_time_k40", DisjointOptions{NodeTime: nodeTime}, nil, 40}, // Floyd with a position set
		{"edge_time_k10", DisjointOptions{EdgeTime: edgeTime}, []int64{4}, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Fanouts, c.o.Workers = []int{c.fanout}, 1
			d, err := NewDisjoint(g, c.o)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]float64, deg+1)
			var b DisjointBatch
			for key := uint64(0); key < draws; key++ {
				if err := d.Sample([]int64{0}, c.times, key*0x9E37, &b); err != nil {
					t.Fatal(err)
				}
				if len(b.Src) != c.fanout {
					t.Fatalf("%d neighbours, want %d", len(b.Src), c.fanout)
				}
				for _, src := range b.Src {
					u := b.NID[src]
					if u%10 > 4 {
						t.Fatalf("neighbour %d (time %d) is after the seed's time 4", u, u%10)
					}
					counts[u]++
				}
			}
			const m = deg / 2 // eligible
			p := float64(c.fanout) / m
			expect := draws * p
			scale := (1 - p) * m / (m - 1) // see TestUniformity
			chi := 0.0
			for u := 1; u <= deg; u++ {
				if u%10 <= 4 {
					chi += (counts[u] - expect) * (counts[u] - expect) / (expect * scale)
				}
			}
			crit := chiSquareCritical(m-1, 3.0902)
			t.Logf("chi2 = %.1f, df = %d, critical(0.001) = %.1f", chi, m-1, crit)
			if chi > crit {
				t.Fatalf("eligible neighbours not drawn uniformly: chi2 %.1f > %.1f", chi, crit)
			}
		})
	}
}

// TestTemporalSubsetUniformity: 7 of 10 neighbours eligible, fanout 3:
// each of the 35 subsets of the eligible ones equally likely.
func TestTemporalSubsetUniformity(t *testing.T) {
	const draws = 35000
	g := starGraph(10)
	nodeTime := []int64{5, 1, 9, 2, 3, 9, 4, 5, 9, 0, 1} // node 0 (the seed) has time 5; 2, 5, 8 are later
	d, err := NewDisjoint(g, DisjointOptions{Fanouts: []int{3}, Workers: 1, NodeTime: nodeTime})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]float64{}
	var b DisjointBatch
	for key := uint64(0); key < draws; key++ {
		if err := d.Sample([]int64{0}, nil, key, &b); err != nil {
			t.Fatal(err)
		}
		mask := 0
		for _, src := range b.Src {
			mask |= 1 << b.NID[src]
		}
		if mask&(1<<2|1<<5|1<<8) != 0 {
			t.Fatalf("drew a neighbour later than the seed: mask %b", mask)
		}
		counts[mask]++
	}
	checkUniformSubsets(t, counts, draws)
}

// TestTemporalLast: node 0's neighbours 1..6 have times 5, 3, 9, 1, 7, 3 and
// the seed's time is 7. "last" with fanout 2 takes times 5 and 7; with
// fanout 3 also the later-stored of the two of time 3 (ties by position);
// with -1 or a fanout beyond the eligible, all five, ascending by time.
func TestTemporalLast(t *testing.T) {
	g := starGraph(6)
	nodeTime := []int64{7, 5, 3, 9, 1, 7, 3}
	edgeTime := nodeTime[1:]
	for _, c := range []struct {
		fanout int
		want   []int64
	}{
		{1, []int64{5}},
		{2, []int64{1, 5}},
		{3, []int64{6, 1, 5}},
		{5, []int64{4, 2, 6, 1, 5}},
		{6, []int64{4, 2, 6, 1, 5}},
		{-1, []int64{4, 2, 6, 1, 5}},
		{0, nil},
	} {
		for name, o := range map[string]DisjointOptions{
			"node_time": {NodeTime: nodeTime},
			"edge_time": {EdgeTime: edgeTime},
		} {
			t.Run(fmt.Sprintf("%s_k%d", name, c.fanout), func(t *testing.T) {
				o.Fanouts, o.Strategy = []int{c.fanout}, Last
				d, err := NewDisjoint(g, o)
				if err != nil {
					t.Fatal(err)
				}
				var b DisjointBatch
				if err := d.Sample([]int64{0}, []int64{7}, uint64(c.fanout+10), &b); err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, src := range b.Src {
					got = append(got, b.NID[src])
				}
				if !slices.Equal(got, c.want) {
					t.Fatalf("picked %v, want %v", got, c.want)
				}
			})
		}
	}
}

// TestSeedTimePropagates: seed 0 (time 10) reaches 1 (time 2), whose
// neighbour 2 has time 8: later than node 1 but not than the seed, so hop 2
// samples it (PyG compares with the seed's time). Neighbour 3 (time 11) is
// later than the seed and never sampled. A second seed, 0 at time 1, gets
// nothing: its subgraph is its own.
func TestSeedTimePropagates(t *testing.T) {
	g := &datasets.Graph{NumNodes: 4, Indptr: []int64{0, 1, 3, 3, 3}, Indices32: []int32{1, 2, 3}}
	nodeTime := []int64{10, 2, 8, 11}
	for _, s := range []Strategy{Uniform, Last} {
		d, err := NewDisjoint(g, DisjointOptions{Fanouts: []int{-1, -1}, NodeTime: nodeTime, Strategy: s, EdgeIDs: true})
		if err != nil {
			t.Fatal(err)
		}
		var b DisjointBatch
		if err := d.Sample([]int64{0, 0}, []int64{10, 1}, 1, &b); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.NID, []int64{0, 0, 1, 2}) || !slices.Equal(b.Subgraph, []int32{0, 1, 0, 0}) ||
			!slices.Equal(b.NumSampledNodes, []int{2, 1, 1}) || !slices.Equal(b.NumSampledEdges, []int{1, 1}) ||
			!slices.Equal(b.Src, []int32{2, 3}) || !slices.Equal(b.Dst, []int32{0, 2}) || !slices.Equal(b.EID, []int64{0, 1}) {
			t.Fatalf("%v: NID %v Subgraph %v nodes %v edges %v Src %v Dst %v EID %v", s, b.NID, b.Subgraph,
				b.NumSampledNodes, b.NumSampledEdges, b.Src, b.Dst, b.EID)
		}
	}
}
