package batch

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

func genMag(t *testing.T, scale float64) *datasets.Hetero {
	t.Helper()
	h, err := datasets.GenerateHetero(datasets.GenOptions{Like: "mag", Scale: scale, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if h, err = h.ToUndirected(2); err != nil {
		t.Fatal(err)
	}
	return h
}

func perType(h *datasets.Hetero, fanouts ...int) [][]int {
	var out [][]int
	for _, f := range fanouts {
		out = append(out, slices.Repeat([]int{f}, len(h.Relations)))
	}
	return out
}

// TestHeteroLayout: the regions, scalars and lists of the spec, in the
// dataset's orders; x only for types with features, y only with classes.
func TestHeteroLayout(t *testing.T) {
	h := genMag(t, 0.001)
	fos := h.NodeType("field_of_study")
	fos.FeatureDim, fos.Features = 0, nil
	m, err := NewHetero(h, HeteroOptions{BatchSize: 16, InputType: "paper", Fanouts: perType(h, 3, 2)})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	var names []string
	for _, r := range l.Regions {
		names = append(names, r.Name)
	}
	want := []string{"paper/x", "paper/y", "paper/n_id", "author/x", "author/n_id", "institution/x", "institution/n_id", "field_of_study/n_id"}
	for _, r := range h.Relations {
		want = append(want, r.EdgeType.String()+"/edge_index", r.EdgeType.String()+"/e_id")
	}
	want = append(want, "paper/input_id")
	if !slices.Equal(names, want) {
		t.Fatalf("regions\n%v\nwant\n%v", names, want)
	}
	for _, r := range l.Regions {
		store, attr, _ := strings.Cut(r.Name, "/")
		switch attr {
		case "x":
			if r.Table != r.Name || r.IDs != store+"/n_id" || r.DType != "float32" || r.Shape[1] != 128 {
				t.Errorf("%s: %+v", r.Name, r)
			}
		case "y":
			if r.Table != r.Name || r.IDs != store+"/n_id" || r.DType != "int64" {
				t.Errorf("%s: %+v", r.Name, r)
			}
		case "edge_index":
			if r.CountAxis != 1 || r.Shape[0] != 2 || r.Table != "" {
				t.Errorf("%s: %+v", r.Name, r)
			}
		}
	}
	if !slices.Equal(l.Scalars, []string{"batch_size"}) || len(l.Lists) != len(h.NodeTypes)+len(h.Relations) ||
		l.Lists[0] != "num_sampled_nodes/paper" || l.Lists[len(h.NodeTypes)] != "num_sampled_edges/"+h.Relations[0].EdgeType.String() {
		t.Fatalf("scalars %v lists %v", l.Scalars, l.Lists)
	}
	for _, o := range []HeteroOptions{
		{BatchSize: 16, InputType: "venue", Fanouts: perType(h, 3)},
		{BatchSize: 0, InputType: "paper", Fanouts: perType(h, 3)},
		{BatchSize: 16, InputType: "paper", Fanouts: [][]int{{3}}},
		{BatchSize: 16, InputType: "paper", Fanouts: perType(h, 3), MaxDegree: []int64{4}},
	} {
		if _, err := NewHetero(h, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestHeteroBatchWritesItsStructure: meta, rows and structure against the
// sampled batch read directly, on one and on several workers, for a batch
// spanning several pieces.
func TestHeteroBatchWritesItsStructure(t *testing.T) {
	h := genMag(t, 0.02)
	fan := perType(h, 20, 10)
	m, err := NewHetero(h, HeteroOptions{BatchSize: 1024, InputType: "paper", Fanouts: fan, Workers: 2, AddressOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	seeds := h.NodeType("paper").Splits[datasets.SplitTrain][:1024]
	b := m.NewBatch().(*HeteroBatch)
	inputs := make([]int64, len(seeds))
	for i := range inputs {
		inputs[i] = int64(7 * i)
	}
	b.SetInputs(inputs)
	if err := m.Sample(seeds, 9, b); err != nil {
		t.Fatal(err)
	}
	s := &b.S
	most := 0
	for e := range s.Edges {
		most = max(most, len(s.Edges[e].Src))
	}
	if most < 3*piece {
		t.Fatalf("at most %d edges of a type: the batch must span several pieces", most)
	}
	var meta Meta
	b.Meta(&meta)
	want := map[string][]int64{}
	for ti, nt := range h.NodeTypes {
		want[nt.Name+"/n_id"] = s.Nodes[ti].NID
		if got := meta.Lists[ti]; len(got) != 3 || int(got[0]+got[1]+got[2]) != len(s.Nodes[ti].NID) {
			t.Fatalf("num_sampled_nodes/%s = %v for %d nodes", nt.Name, got, len(s.Nodes[ti].NID))
		}
	}
	for e, r := range h.Relations {
		et := &s.Edges[e]
		n := len(et.Src)
		ei := make([]int64, 2*n)
		for j := range n {
			ei[j], ei[n+j] = int64(et.Src[j]), int64(et.Dst[j])
		}
		want[r.EdgeType.String()+"/edge_index"], want[r.EdgeType.String()+"/e_id"] = ei, et.EID
		if got := meta.Lists[len(h.NodeTypes)+e]; len(got) != 2 || int(got[0]+got[1]) != n {
			t.Fatalf("num_sampled_edges/%s = %v for %d edges", r.EdgeType, got, n)
		}
	}
	want["paper/input_id"] = inputs
	if meta.Scalars[0] != 1024 {
		t.Fatalf("batch_size %d", meta.Scalars[0])
	}
	for r, reg := range l.Regions {
		store, attr, _ := strings.Cut(reg.Name, "/")
		var count int
		switch attr {
		case "x", "y", "n_id":
			count = len(want[store+"/n_id"])
			if reg.Table != "" {
				ids, order := b.Rows(r)
				ti := slices.IndexFunc(h.NodeTypes, func(nt *datasets.NodeType) bool { return nt.Name == store })
				if !slices.Equal(ids, s.Nodes[ti].NID) || !slices.Equal(order, s.Nodes[ti].Order) || len(order) != len(ids) {
					t.Fatalf("rows of %s are not %s/n_id in address order", reg.Name, store)
				}
			}
		case "edge_index":
			count = len(want[reg.Name]) / 2
		default:
			count = len(want[reg.Name])
		}
		if int(meta.Counts[r]) != count {
			t.Fatalf("count of %s: %d, want %d", reg.Name, meta.Counts[r], count)
		}
		if int64(count) > reg.Shape[reg.CountAxis] {
			t.Fatalf("%s: %d over its capacity %d", reg.Name, count, reg.Shape[reg.CountAxis])
		}
	}
	for _, workers := range []int{1, 4} {
		got := make([][]byte, len(l.Regions))
		b.WriteStructure(func(r int) []byte {
			got[r] = bytes.Repeat([]byte{0xAB}, int(l.Regions[r].DataBytes(int(meta.Counts[r]))))
			return got[r]
		}, workers)
		for r, reg := range l.Regions {
			if reg.Table != "" {
				if got[r] != nil {
					t.Fatalf("WriteStructure asked for gathered region %s", reg.Name)
				}
				continue
			}
			var w bytes.Buffer
			binary.Write(&w, binary.LittleEndian, want[reg.Name])
			if !bytes.Equal(got[r], w.Bytes()) {
				t.Fatalf("%d workers: region %s differs", workers, reg.Name)
			}
		}
	}
	// Without inputs: -1 per seed; without AddressOrder: no order.
	m2, err := NewHetero(h, HeteroOptions{BatchSize: 1024, InputType: "paper", Fanouts: fan, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	b2 := m2.NewBatch()
	if err := m2.Sample(seeds[:10], 9, b2); err != nil {
		t.Fatal(err)
	}
	if ids, order := b2.Rows(0); len(ids) == 0 || order != nil {
		t.Fatalf("without AddressOrder: %d ids, %d order entries", len(ids), len(order))
	}
	in := l.Index("paper/input_id")
	var out []byte
	b2.WriteStructure(func(r int) []byte {
		if r == in {
			out = make([]byte, 8*10)
			return out
		}
		return make([]byte, l.Regions[r].Bytes())
	}, 1)
	if !bytes.Equal(out, bytes.Repeat([]byte{0xFF}, 80)) {
		t.Fatal("input_id of a batch without inputs is not -1")
	}
}

// TestHeteroCapacity: a hand-counted case, and batches that push against
// the bounds (every neighbour, repeated seeds) fit them.
func TestHeteroCapacity(t *testing.T) {
	// a -> b (max degree 4), b -> b (max degree 2); seeds of b.
	h := &datasets.Hetero{
		NodeTypes: []*datasets.NodeType{{Name: "a", NumNodes: 300}, {Name: "b", NumNodes: 50}},
		Relations: []*datasets.Relation{
			{EdgeType: datasets.EdgeType{Src: "a", Rel: "r", Dst: "b"}, Graph: datasets.Graph{NumNodes: 50, NumSrcNodes: 300}},
			{EdgeType: datasets.EdgeType{Src: "b", Rel: "s", Dst: "b"}, Graph: datasets.Graph{NumNodes: 50}},
		},
	}
	h.Relations[0].Graph.Indptr = make([]int64, 51)
	h.Relations[1].Graph.Indptr = make([]int64, 51)
	h.Relations[0].Graph.Indptr[50], h.Relations[1].Graph.Indptr[50] = 1000, 100 // edges (only the count matters)
	n, e := HeteroCapacity(h, 1, 8, [][]int{{3, -1}, {5, 1}}, []int64{4, 2})
	// hop 1: a gets 8*3 = 24, b gets 8*2 = 16; hop 2: a gets 16*4 = 64
	// (fanout 5 > degree 4), b gets 16*1. Edges: r 24+64, s 16+16; b's
	// nodes 8+16+16 = 40 (under 50 + 8).
	if !slices.Equal(n, []int64{88, 40}) || !slices.Equal(e, []int64{88, 32}) {
		t.Fatalf("nodes %v edges %v", n, e)
	}
	// Bounded by the graph: a's 300 nodes (not 160+200+200), b's 50 new
	// ones a hop (40 + 50 + 50 + 50 bounded by 50 + 40 seeds), s's 100
	// edges plus its first hop's 80 (not 80+100+100).
	n, e = HeteroCapacity(h, 1, 40, [][]int{{-1, -1}, {-1, -1}, {-1, -1}}, []int64{4, 2})
	if !slices.Equal(n, []int64{300, 90}) || !slices.Equal(e, []int64{560, 180}) {
		t.Fatalf("capped: nodes %v edges %v", n, e)
	}

	g := genMag(t, 0.002)
	for _, c := range []struct {
		fanouts [][]int
		repeat  bool
	}{{perType(g, -1, -1), false}, {perType(g, -1), true}, {perType(g, 7, 3, 2), true}} {
		m, err := NewHetero(g, HeteroOptions{BatchSize: 300, InputType: "paper", Fanouts: c.fanouts, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		seeds := slices.Clone(g.NodeType("paper").Splits[datasets.SplitTrain][:300])
		if c.repeat {
			for i := range seeds {
				seeds[i] = seeds[i%3]
			}
		}
		b := m.NewBatch().(*HeteroBatch)
		if err := m.Sample(seeds, 3, b); err != nil {
			t.Fatal(err)
		}
		for ti := range g.NodeTypes {
			if int64(len(b.S.Nodes[ti].NID)) > m.MaxNodes[ti] {
				t.Fatalf("fanouts %v: %d %s nodes, capacity %d", c.fanouts, len(b.S.Nodes[ti].NID), g.NodeTypes[ti].Name, m.MaxNodes[ti])
			}
		}
		for ei := range g.Relations {
			if int64(len(b.S.Edges[ei].Src)) > m.MaxEdges[ei] {
				t.Fatalf("fanouts %v: %d %s edges, capacity %d", c.fanouts, len(b.S.Edges[ei].Src), g.Relations[ei].EdgeType, m.MaxEdges[ei])
			}
		}
	}
}
