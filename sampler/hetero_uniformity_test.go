package sampler

import (
	"fmt"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// TestHeteroUniformity: every in-neighbour of a node is drawn with
// probability fanout/degree, through each edge type (chi-square, alpha
// 0.001, fixed keys). The second edge type checks that draws depend on it.
func TestHeteroUniformity(t *testing.T) {
	const da, dc = 200, 64
	row := func(n int) []int32 {
		var r []int32
		for i := range n {
			r = append(r, int32(i))
		}
		return r
	}
	h := &datasets.Hetero{
		NodeTypes: []*datasets.NodeType{{Name: "a", NumNodes: da}, {Name: "b", NumNodes: 1}, {Name: "c", NumNodes: dc}},
		Relations: []*datasets.Relation{
			{EdgeType: datasets.EdgeType{Src: "a", Rel: "r", Dst: "b"}, Graph: datasets.Graph{NumNodes: 1, NumSrcNodes: da, Indptr: []int64{0, da}, Indices32: row(da)}},
			{EdgeType: datasets.EdgeType{Src: "c", Rel: "r", Dst: "b"}, Graph: datasets.Graph{NumNodes: 1, NumSrcNodes: dc, Indptr: []int64{0, dc}, Indices32: row(dc)}},
		},
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ fa, fc, draws int }{{10, 1, 20000}, {40, 33, 6000}} {
		t.Run(fmt.Sprintf("k%d_k%d", c.fa, c.fc), func(t *testing.T) {
			s, err := NewHetero(h, HeteroOptions{Fanouts: [][]int{{c.fa, c.fc}}, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			ca, cc := make([]float64, da), make([]float64, dc)
			var b HeteroBatch
			for key := range c.draws {
				if err := s.Sample(1, []int64{0}, uint64(key)*0x1234567, &b); err != nil {
					t.Fatal(err)
				}
				for _, l := range b.Edges[0].Src {
					ca[b.Nodes[0].NID[l]]++
				}
				for _, l := range b.Edges[1].Src {
					cc[b.Nodes[2].NID[l]]++
				}
			}
			for _, x := range []struct {
				counts []float64
				k      int
			}{{ca, c.fa}, {cc, c.fc}} {
				d := len(x.counts)
				p := float64(x.k) / float64(d)
				expect := float64(c.draws) * p
				scale := (1 - p) * float64(d) / float64(d-1) // as in TestUniformity
				chi := 0.0
				for _, n := range x.counts {
					chi += (n - expect) * (n - expect) / (expect * scale)
				}
				crit := chiSquareCritical(d-1, 3.0902)
				t.Logf("degree %d fanout %d: chi2 = %.1f, critical(0.001) = %.1f", d, x.k, chi, crit)
				if chi > crit {
					t.Fatalf("degree %d fanout %d: not uniform, chi2 %.1f > %.1f", d, x.k, chi, crit)
				}
			}
		})
	}
}

// TestHeteroEdgeTypesIndependent: one node's draws through two edge types of
// the same degree and fanout are independent: with fanout 1 of degree d the
// two picks agree for about 1/d of the keys (draws that ignored the edge
// type would agree every time).
func TestHeteroEdgeTypesIndependent(t *testing.T) {
	const d, draws = 16, 4000
	row := make([]int32, d)
	for i := range row {
		row[i] = int32(i)
	}
	h := &datasets.Hetero{
		NodeTypes: []*datasets.NodeType{{Name: "a", NumNodes: d}, {Name: "b", NumNodes: 1}, {Name: "c", NumNodes: d}},
		Relations: []*datasets.Relation{
			{EdgeType: datasets.EdgeType{Src: "a", Rel: "r", Dst: "b"}, Graph: datasets.Graph{NumNodes: 1, NumSrcNodes: d, Indptr: []int64{0, d}, Indices32: row}},
			{EdgeType: datasets.EdgeType{Src: "c", Rel: "r", Dst: "b"}, Graph: datasets.Graph{NumNodes: 1, NumSrcNodes: d, Indptr: []int64{0, d}, Indices32: row}},
		},
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := NewHetero(h, HeteroOptions{Fanouts: [][]int{{1, 1}}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b HeteroBatch
	same := 0
	for key := range draws {
		if err := s.Sample(1, []int64{0}, uint64(key)*0x9e3779b97f4a7c15, &b); err != nil {
			t.Fatal(err)
		}
		if b.Nodes[0].NID[b.Edges[0].Src[0]] == b.Nodes[2].NID[b.Edges[1].Src[0]] {
			same++
		}
	}
	// Binomial(4000, 1/16): mean 250, sd 15.3; 6 sd either side.
	t.Logf("the two edge types picked the same position for %d of %d keys (independent: ~%d)", same, draws, draws/d)
	if same < 158 || same > 342 {
		t.Fatalf("%d of %d keys drew the same position through both edge types, want about %d", same, draws, draws/d)
	}
}
