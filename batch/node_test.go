package batch

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

func TestCapacity(t *testing.T) {
	n, e := Capacity(4, []int{3, 2}, 10, 1000, 5000)
	if n != 4+12+24 || e != 12+24 {
		t.Fatalf("got %d nodes %d edges", n, e)
	}
	n, e = Capacity(4, []int{-1, -1}, 10, 1000, 5000)
	if n != 4+40+400 || e != 440 {
		t.Fatalf("all neighbours: %d nodes %d edges", n, e)
	}
	// Capped by the graph, plus what repeated seeds could add: every copy
	// of a seed is a node and samples its own first hop.
	n, e = Capacity(1024, []int{15, 10, 5}, 1<<20, 2708, 10556)
	if n != 2708+1024 || e != 10556+1024*15 {
		t.Fatalf("capped: %d nodes %d edges", n, e)
	}
	n, _ = Capacity(1<<30, []int{-1, -1, -1, -1, -1, -1, -1, -1}, 1<<40, 1<<62, 1<<62)
	if n <= 0 {
		t.Fatalf("overflow: %d", n)
	}
}

func TestLayoutCheck(t *testing.T) {
	good := Region{Name: "y", DType: "int64", Shape: []int64{10}}
	for _, c := range []struct {
		name string
		l    Layout
		ok   bool
	}{
		{"fine", Layout{Regions: []Region{good, {Name: "edge_index", DType: "int64", Shape: []int64{2, 0}, CountAxis: 1}}}, true},
		{"repeated name", Layout{Regions: []Region{good, good}}, false},
		{"unknown dtype", Layout{Regions: []Region{{Name: "a", DType: "complex64", Shape: []int64{1}}}}, false},
		{"count axis outside", Layout{Regions: []Region{{Name: "a", DType: "int8", Shape: []int64{1}, CountAxis: 1}}}, false},
		{"zero fixed dim", Layout{Regions: []Region{{Name: "a", DType: "int8", Shape: []int64{0, 4}, CountAxis: 1}}}, false},
		{"gathered 1-d", Layout{Regions: []Region{{Name: "x", DType: "float32", Shape: []int64{4}, Table: "x"}}}, false},
	} {
		if err := c.l.Check(); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	r := Region{Name: "edge_index", DType: "int64", Shape: []int64{2, 100}, CountAxis: 1}
	if r.Bytes() != 1600 || r.DataBytes(7) != 112 {
		t.Fatalf("bytes %d, data bytes of 7 %d", r.Bytes(), r.DataBytes(7))
	}
}

// TestNodeBatchWritesItsStructure: the node mode's regions, meta and
// structure, against the sampled batch read directly, on one and on several
// workers (pieces of 2^15 elements: a batch large enough to have many).
func TestNodeBatchWritesItsStructure(t *testing.T) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "products", Scale: 0.02, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewNode(d, NodeOptions{BatchSize: 512, Fanouts: []int{15, 10, 5}, Workers: 2, AddressOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	var names []string
	for _, r := range l.Regions {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"x", "y", "n_id", "edge_index", "e_id", "input_id"}) || l.Regions[0].Table != "x" || l.Regions[1].Table != "y" {
		t.Fatalf("regions %v", l.Regions)
	}
	seeds := d.Splits[datasets.SplitTrain][:512]
	b := m.NewBatch()
	inputs := make([]int64, 512)
	for i := range inputs {
		inputs[i] = int64(1000 + 3*i)
	}
	b.(Inputs).SetInputs(inputs)
	if err := m.Sample(seeds, 1, b); err != nil {
		t.Fatal(err)
	}
	s := &b.(*NodeBatch).S
	n, e := len(s.NID), len(s.Src)
	if e < 3*piece {
		t.Fatalf("only %d edges: the batch must span several pieces", e)
	}
	var meta Meta
	b.Meta(&meta)
	if !slices.Equal(meta.Counts, []uint32{uint32(n), uint32(n), uint32(n), uint32(e), uint32(e), 512}) || meta.Scalars[0] != 512 {
		t.Fatalf("meta %+v for %d nodes and %d edges", meta, n, e)
	}
	for _, r := range []int{0, 1} {
		if ids, order := b.Rows(r); !slices.Equal(ids, s.NID) || !slices.Equal(order, s.Order) || len(order) != n {
			t.Fatalf("rows of %s are not n_id in address order", l.Regions[r].Name)
		}
	}
	want := map[string][]int64{"n_id": s.NID, "edge_index": make([]int64, 2*e), "e_id": s.EID, "input_id": inputs}
	if len(s.EID) != e {
		t.Fatalf("%d edge ids for %d edges", len(s.EID), e)
	}
	for j := range e {
		want["edge_index"][j], want["edge_index"][e+j] = int64(s.Src[j]), int64(s.Dst[j])
	}
	checkWriteStructure(t, b, l, &meta, want)
	// Without the address order a batch has none to give.
	m2, err := NewNode(d, NodeOptions{BatchSize: 512, Fanouts: []int{15, 10, 5}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	b2 := m2.NewBatch()
	if err := m2.Sample(seeds, 1, b2); err != nil {
		t.Fatal(err)
	}
	if ids, order := b2.Rows(0); !slices.Equal(ids, s.NID) || order != nil {
		t.Fatalf("without AddressOrder: %d ids (want %d), %d order entries", len(ids), n, len(order))
	}
	// A batch never given its inputs writes -1 per seed.
	in := m2.Layout().Index("input_id")
	got := make([][]byte, len(l.Regions))
	b2.WriteStructure(func(r int) []byte {
		got[r] = make([]byte, l.Regions[r].DataBytes(int(meta.Counts[r])))
		return got[r]
	}, 1)
	if !bytes.Equal(got[in], bytes.Repeat([]byte{0xFF}, 8*512)) {
		t.Fatal("input_id of a batch without inputs is not -1")
	}
}

// TestRepeatedSeedsFitTheCapacity: custom seeds may repeat a node (PyG
// keeps every copy); a batch of n copies of one node on an n-node graph,
// all neighbours, still fits the slots' capacity.
func TestRepeatedSeedsFitTheCapacity(t *testing.T) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "products", Scale: 0.001, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	g := &d.Graph
	var v int64
	for v = 0; v < g.NumNodes && g.Degree(v) < 2; v++ {
	}
	for _, fanouts := range [][]int{{-1}, {-1, -1}} {
		m, err := NewNode(d, NodeOptions{BatchSize: int(g.NumNodes), Fanouts: fanouts, Workers: 1, AddressOrder: true})
		if err != nil {
			t.Fatal(err)
		}
		seeds := make([]int64, g.NumNodes)
		for i := range seeds {
			seeds[i] = v
		}
		b := m.NewBatch().(*NodeBatch)
		if err := m.Sample(seeds, 1, b); err != nil {
			t.Fatal(err)
		}
		if n, e := int64(len(b.S.NID)), int64(len(b.S.Src)); n > m.MaxNodes || e > m.MaxEdges || n <= g.NumNodes {
			t.Fatalf("fanouts %v: a batch of %d nodes, %d edges against a capacity of %d and %d (graph: %d nodes)",
				fanouts, n, e, m.MaxNodes, m.MaxEdges, g.NumNodes)
		}
	}
}

// checkWriteStructure: b writes, on 1 and 4 workers, exactly want's int64s
// into each structure region of l (regions 2 on; regions 0 and 1, x and y,
// are gathered and never asked for), sized by meta's counts.
func checkWriteStructure(t *testing.T, b Batch, l *Layout, meta *Meta, want map[string][]int64) {
	t.Helper()
	for _, workers := range []int{1, 4} {
		got := make([][]byte, len(l.Regions))
		b.WriteStructure(func(r int) []byte {
			got[r] = bytes.Repeat([]byte{0xAB}, int(l.Regions[r].DataBytes(int(meta.Counts[r]))))
			return got[r]
		}, workers)
		if got[0] != nil || got[1] != nil {
			t.Fatal("WriteStructure asked for a gathered region")
		}
		for r, reg := range l.Regions[2:] {
			var w bytes.Buffer
			binary.Write(&w, binary.LittleEndian, want[reg.Name])
			if !bytes.Equal(got[r+2], w.Bytes()) {
				t.Fatalf("%d workers: region %s differs", workers, reg.Name)
			}
		}
	}
}
