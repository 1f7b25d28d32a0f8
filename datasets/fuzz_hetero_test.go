package datasets

// The heterogeneous seed of FuzzOpenDataset and the invariants a
// heterogeneous dataset that opens must hold.

import (
	"fmt"
)

// fuzzSeedHetero is a tiny heterogeneous dataset: node types a (features,
// labels, a split, times) and b (features), relations (b, r, a), (a, s, a).
func fuzzSeedHetero() *Hetero {
	return &Hetero{Name: "h", NodeTypes: []*NodeType{
		{Name: "a", NumNodes: 3, FeatureDim: 2, FeatureDType: Int32, Features: make([]byte, 24), NumClasses: 2,
			Labels: []int32{0, 1, -1}, Splits: map[string][]int64{SplitTrain: {0, 2}}, Time: []int64{5, 6, 7}},
		{Name: "b", NumNodes: 2, FeatureDim: 1, FeatureDType: Float16, Features: make([]byte, 4)},
	}, Relations: []*Relation{
		{EdgeType: EdgeType{"b", "r", "a"}, Graph: Graph{NumNodes: 3, NumSrcNodes: 2, Indptr: []int64{0, 1, 1, 3}, Indices32: []int32{1, 0, 1}}},
		{EdgeType: EdgeType{"a", "s", "a"}, Graph: Graph{NumNodes: 3, NumSrcNodes: 3, Indptr: []int64{0, 2, 2, 2}, Indices32: []int32{1, 2}}},
	}}
}

// checkHeteroInvariants checks an opened heterogeneous dataset without the
// package's validation, reading every byte.
func checkHeteroInvariants(h *Hetero, m *Manifest) error {
	if len(h.NodeTypes) != len(m.NodeTypes) || len(h.Relations) != len(m.EdgeTypes) {
		return fmt.Errorf("types differ from the manifest")
	}
	for _, t := range h.NodeTypes {
		if int64(len(t.Features)) != t.NumNodes*int64(t.FeatureDim*t.FeatureDType.Size()) {
			return fmt.Errorf("%s: %d feature bytes", t.Name, len(t.Features))
		}
		for _, y := range t.Labels {
			if y < -1 || int(y) >= t.NumClasses {
				return fmt.Errorf("%s: label %d", t.Name, y)
			}
		}
		for _, ids := range t.Splits {
			for _, v := range ids {
				if v < 0 || v >= t.NumNodes {
					return fmt.Errorf("%s: split id %d", t.Name, v)
				}
			}
		}
	}
	for _, r := range h.Relations {
		g := &r.Graph
		src, dst := h.NodeType(r.Src), h.NodeType(r.Dst)
		if src == nil || dst == nil || g.NumNodes != dst.NumNodes || int64(len(g.Indptr)) != g.NumNodes+1 || g.Indptr[0] != 0 {
			return fmt.Errorf("%s: bad shape", r.EdgeType)
		}
		for v := int64(0); v < g.NumNodes; v++ {
			if g.Indptr[v+1] < g.Indptr[v] {
				return fmt.Errorf("%s: indptr decreases", r.EdgeType)
			}
		}
		if e := int64(len(g.Indices32)) + int64(len(g.Indices64)); e != g.Indptr[g.NumNodes] {
			return fmt.Errorf("%s: %d indices", r.EdgeType, e)
		}
		for i := int64(0); i < g.NumEdges(); i++ {
			if u := g.Neighbor(i); u < 0 || u >= src.NumNodes {
				return fmt.Errorf("%s: index %d", r.EdgeType, u)
			}
		}
	}
	return nil
}
