package batch

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

func timedData(t *testing.T) *datasets.Data {
	t.Helper()
	d, err := datasets.Generate(datasets.GenOptions{Like: "products", Scale: 0.02, Seed: 3, Time: true})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDisjointBatchWritesItsStructure: the disjoint mode's regions (a Node
// batch's, batch and edge_time), meta and structure against the sampled
// batch, on one and several workers; seed times come by position
// (SetInputs).
func TestDisjointBatchWritesItsStructure(t *testing.T) {
	d := timedData(t)
	seeds := d.Splits[datasets.SplitTrain][:512]
	split := make([]int64, 2000) // times of a split, by position
	for i := range split {
		split[i] = int64(i % 60)
	}
	m, err := NewDisjoint(d, DisjointOptions{Node: NodeOptions{BatchSize: 512, Fanouts: []int{15, 10, 5}, Workers: 2, AddressOrder: true},
		TimeAttr: EdgeTime, Strategy: sampler.Last, SeedTimes: split})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	var names []string
	for _, r := range l.Regions {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"x", "y", "n_id", "edge_index", "e_id", "input_id", "batch", "edge_time"}) {
		t.Fatalf("regions %v", names)
	}
	if l.Regions[6].Shape[0] != m.MaxNodes || m.MaxNodes != 512*min(1+15+150+750, d.Graph.NumNodes) {
		t.Fatalf("batch region of %v for a capacity of %d nodes", l.Regions[6].Shape, m.MaxNodes)
	}
	b := m.NewBatch()
	if err := m.Sample(seeds, 1, b); err == nil || !strings.Contains(err.Error(), "positions") {
		t.Fatalf("seed times without positions: %v", err)
	}
	inputs := make([]int64, 512)
	for i := range inputs {
		inputs[i] = int64(3 * i)
	}
	b.(Inputs).SetInputs(inputs)
	if err := m.Sample(seeds, 1, b); err != nil {
		t.Fatal(err)
	}
	s := &b.(*DisjointBatch).S
	// The sampler got the times at the seeds' positions.
	want := &sampler.DisjointBatch{}
	ref, _ := sampler.NewDisjoint(&d.Graph, sampler.DisjointOptions{Fanouts: []int{15, 10, 5}, EdgeIDs: true, EdgeTime: d.EdgeTime, Strategy: sampler.Last})
	times := make([]int64, 512)
	for i, p := range inputs {
		times[i] = split[p]
	}
	if err := ref.Sample(seeds, times, 1, want); err != nil || !slices.Equal(want.NID, s.NID) || !slices.Equal(want.Subgraph, s.Subgraph) {
		t.Fatalf("the batch is not the sampler's with the seeds' times (%v)", err)
	}
	n, e := len(s.NID), len(s.Src)
	if e < 3*piece || n > int(m.MaxNodes) || e > int(m.MaxEdges) {
		t.Fatalf("%d nodes and %d edges: want several pieces, within %d and %d", n, e, m.MaxNodes, m.MaxEdges)
	}
	var meta Meta
	b.Meta(&meta)
	if !slices.Equal(meta.Counts, []uint32{uint32(n), uint32(n), uint32(n), uint32(e), uint32(e), 512, uint32(n), uint32(e)}) || meta.Scalars[0] != 512 ||
		!slices.Equal(meta.Lists[0], appendU32(nil, s.NumSampledNodes)) {
		t.Fatalf("meta %+v for %d nodes and %d edges", meta, n, e)
	}
	if ids, order := b.Rows(0); !slices.Equal(ids, s.NID) || len(order) != n {
		t.Fatal("x's rows are not n_id in address order")
	}
	wantRegions := map[string][]int64{"n_id": s.NID, "edge_index": make([]int64, 2*e), "e_id": s.EID, "input_id": inputs, "batch": make([]int64, n),
		"edge_time": make([]int64, e)}
	for j := range e {
		wantRegions["edge_index"][j], wantRegions["edge_index"][e+j] = int64(s.Src[j]), int64(s.Dst[j])
		wantRegions["edge_time"][j] = d.EdgeTime[s.EID[j]]
	}
	for i, sub := range s.Subgraph {
		wantRegions["batch"][i] = int64(sub)
	}
	checkWriteStructure(t, b, l, &meta, wantRegions)
}

// TestDisjointServesNodeTimes: with node times the batch carries each
// node's time (PyG's data.time of the batch), and none of the edges'; with
// no time attribute, neither.
func TestDisjointServesNodeTimes(t *testing.T) {
	d := timedData(t)
	seeds := d.Splits[datasets.SplitTrain][:300]
	node := NodeOptions{BatchSize: 300, Fanouts: []int{10, 5}, Workers: 3}
	m, err := NewDisjoint(d, DisjointOptions{Node: node, TimeAttr: NodeTime, Strategy: sampler.Uniform})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	if l.Index(NodeTime) < 0 || l.Index(EdgeTime) >= 0 {
		t.Fatalf("node-time batches have regions %v", l.Regions)
	}
	b := m.NewBatch()
	if err := m.Sample(seeds, 7, b); err != nil {
		t.Fatal(err)
	}
	s := &b.(*DisjointBatch).S
	var meta Meta
	b.Meta(&meta)
	if got := meta.Counts[l.Index(NodeTime)]; got != uint32(len(s.NID)) {
		t.Fatalf("node_time counts %d, the batch has %d nodes", got, len(s.NID))
	}
	want := make([]int64, len(s.NID))
	for i, v := range s.NID {
		want[i] = d.NodeTime[v]
	}
	e := len(s.Src)
	full := map[string][]int64{NodeTime: want, "n_id": s.NID, "e_id": s.EID, "edge_index": make([]int64, 2*e),
		"input_id": make([]int64, 300), "batch": make([]int64, len(s.NID))}
	for j := range e {
		full["edge_index"][j], full["edge_index"][e+j] = int64(s.Src[j]), int64(s.Dst[j])
	}
	for i := range full["input_id"] {
		full["input_id"][i] = -1 // no positions given
	}
	for i, sub := range s.Subgraph {
		full["batch"][i] = int64(sub)
	}
	checkWriteStructure(t, b, l, &meta, full)
	plain, err := NewDisjoint(d, DisjointOptions{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if pl := plain.Layout(); pl.Index(NodeTime) >= 0 || pl.Index(EdgeTime) >= 0 {
		t.Fatalf("disjoint batches without a time attribute have regions %v", pl.Regions)
	}
}

// TestDisjointCapacity: n copies of one seed, every neighbour for two hops:
// n subgraphs, each within the per-seed bound, all within the capacity,
// which exceeds the graph's node count.
func TestDisjointCapacity(t *testing.T) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "products", Scale: 0.001, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	g := &d.Graph
	n, e := DisjointCapacity(4, []int{3, 2}, 10, 1000, 5000)
	if n != 4*(1+3+6) || e != 4*(3+6) {
		t.Fatalf("capacity %d nodes, %d edges", n, e)
	}
	if n, e = DisjointCapacity(4, []int{-1, -1}, 100, 50, 70); n != 4*50 || e != 4*70 {
		t.Fatalf("capacity bounded by the graph: %d nodes, %d edges", n, e)
	}
	m, err := NewDisjoint(d, DisjointOptions{Node: NodeOptions{BatchSize: 64, Fanouts: []int{-1, -1}, Workers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	seeds := slices.Repeat([]int64{int64(slices.IndexFunc(g.Indptr[1:], func(x int64) bool { return x > 1 }))}, 64)
	b := m.NewBatch().(*DisjointBatch)
	if err := m.Sample(seeds, 1, b); err != nil {
		t.Fatal(err)
	}
	if n, e := int64(len(b.S.NID)), int64(len(b.S.Src)); n > m.MaxNodes || e > m.MaxEdges || n < 128 {
		t.Fatalf("a batch of %d nodes, %d edges against a capacity of %d and %d", n, e, m.MaxNodes, m.MaxEdges)
	}
	if _, err := NewDisjoint(d, DisjointOptions{Node: NodeOptions{BatchSize: 1 << 20, Fanouts: []int{-1, -1, -1}}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge batches: %v", err)
	}
}

func TestDisjointRefusals(t *testing.T) {
	timed := timedData(t)
	plain, err := datasets.Generate(datasets.GenOptions{Like: "products", Scale: 0.001, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	node := NodeOptions{BatchSize: 8, Fanouts: []int{2}}
	for _, c := range []struct {
		name string
		d    *datasets.Data
		o    DisjointOptions
		want string
	}{
		{"no node_time", plain, DisjointOptions{Node: node, TimeAttr: NodeTime}, "no node_time"},
		{"no edge_time", plain, DisjointOptions{Node: node, TimeAttr: EdgeTime, SeedTimes: []int64{1}}, "no edge_time"},
		{"edge_time without seed times", timed, DisjointOptions{Node: node, TimeAttr: EdgeTime}, "seeds' times"},
		{"unknown attribute", timed, DisjointOptions{Node: node, TimeAttr: "time"}, "time attribute"},
		{"times without attribute", timed, DisjointOptions{Node: node, SeedTimes: []int64{1}}, "without a time attribute"},
		{"last without attribute", timed, DisjointOptions{Node: node, Strategy: sampler.Last}, "without a time attribute"},
		{"device", timed, DisjointOptions{Node: NodeOptions{BatchSize: 8, Fanouts: []int{2}, DeviceSampling: true}}, "GPU"},
		{"batch size", timed, DisjointOptions{Node: NodeOptions{Fanouts: []int{2}}}, "batch size"},
	} {
		if _, err := NewDisjoint(c.d, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
	m, err := NewDisjoint(timed, DisjointOptions{Node: node, TimeAttr: NodeTime, SeedTimes: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	b := m.NewBatch()
	b.(Inputs).SetInputs([]int64{0, 2})
	if err := m.Sample([]int64{0, 1}, 1, b); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("a position past the seed times: %v", err)
	}
}
