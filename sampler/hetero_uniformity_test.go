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
