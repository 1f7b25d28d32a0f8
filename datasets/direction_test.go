package datasets

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// randomGraph has n nodes and about n*deg edges, duplicates and self loops
// included, rows unsorted.
func randomGraph(n, deg int, seed uint64) Graph {
	r := rand.New(rand.NewPCG(seed, 1))
	g := Graph{NumNodes: int64(n), Indptr: make([]int64, n+1), Indices32: []int32{}}
	for v := 0; v < n; v++ {
		k := r.IntN(2*deg + 1)
		for range k {
			g.Indices32 = append(g.Indices32, int32(r.IntN(n)))
		}
		g.Indptr[v+1] = int64(len(g.Indices32))
	}
	return g
}

func TestTranspose(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		g := randomGraph(1+int(seed)*3, 3, seed)
		tg, perm, err := Transpose(&g, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.Validate(); err != nil {
			t.Fatal(err)
		}
		// every result edge (u <- v) is g's edge perm[p] (v lists u)
		seen := make([]bool, g.NumEdges())
		for u := int64(0); u < tg.NumNodes; u++ {
			row := tg.Indices32[tg.Indptr[u]:tg.Indptr[u+1]]
			if !slices.IsSorted(row) {
				t.Fatalf("seed %d: row %d not sorted", seed, u)
			}
			for p := tg.Indptr[u]; p < tg.Indptr[u+1]; p++ {
				q := perm[p]
				v := int64(tg.Indices32[p])
				if seen[q] || g.Neighbor(q) != u || q < g.Indptr[v] || q >= g.Indptr[v+1] {
					t.Fatalf("seed %d: edge %d maps to %d wrongly", seed, p, q)
				}
				seen[q] = true
			}
		}
		// twice is g with sorted rows
		back, _, err := Transpose(&tg, 1)
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(0); v < g.NumNodes; v++ {
			want := slices.Clone(g.Indices32[g.Indptr[v]:g.Indptr[v+1]])
			slices.Sort(want)
			if got := back.Indices32[back.Indptr[v]:back.Indptr[v+1]]; !slices.Equal(got, want) {
				t.Fatalf("seed %d row %d: %v, want %v", seed, v, got, want)
			}
		}
	}
}

func TestParseEdgeDirection(t *testing.T) {
	for s, want := range map[string]EdgeDirection{"": EdgeIn, "in": EdgeIn, "out": EdgeOut} {
		if got, err := ParseEdgeDirection(s); err != nil || got != want {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	if _, err := ParseEdgeDirection("both"); err == nil {
		t.Error("both accepted")
	}
}

func TestImportNPZEdgeDirection(t *testing.T) {
	in, err := ImportNPZ(coraPath, ImportOptions{SplitSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ImportNPZ(coraPath, ImportOptions{SplitSeed: 1, EdgeDirection: EdgeOut})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := Transpose(&in.Graph, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Graph.Indptr, want.Indptr) || !slices.Equal(out.Graph.Indices32, want.Indices32) {
		t.Fatal("EdgeOut import is not the transpose of the EdgeIn import")
	}
	if slices.Equal(out.Graph.Indptr, in.Graph.Indptr) {
		t.Fatal("cora is directed: the two readings should differ")
	}
}

func TestImportNPZUnlabelled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.npz")
	impWriteNPZ(t, path, false,
		impMember{"adj_indptr", impNPY("<i8", []int64{4}, impI64(0, 1, 2, 3))},
		impMember{"adj_indices", impNPY("<i8", []int64{3}, impI64(1, 2, 0))},
		impMember{"adj_shape", impNPY("<i8", []int64{2}, impI64(3, 3))},
		impMember{"attr_matrix", impNPY("<f4", []int64{3, 2}, impF32(1, 2, 3, 4, 5, 6))},
		impMember{"labels", impNPY("<i8", []int64{3}, impI64(0, -1, 1))},
	)
	d, err := ImportNPZ(path, ImportOptions{SplitRatios: [3]float64{0.5, 0.5, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(d.Labels) != "[0 -1 1]" || d.NumClasses != 2 {
		t.Fatalf("labels %v, %d classes", d.Labels, d.NumClasses)
	}
	impWriteNPZ(t, path+"2", false,
		impMember{"adj_indptr", impNPY("<i8", []int64{4}, impI64(0, 1, 2, 3))},
		impMember{"adj_indices", impNPY("<i8", []int64{3}, impI64(1, 2, 0))},
		impMember{"adj_shape", impNPY("<i8", []int64{2}, impI64(3, 3))},
		impMember{"attr_matrix", impNPY("<f4", []int64{3, 2}, impF32(1, 2, 3, 4, 5, 6))},
		impMember{"labels", impNPY("<i8", []int64{3}, impI64(0, -2, 1))},
	)
	if _, err := ImportNPZ(path+"2", ImportOptions{}); err == nil {
		t.Fatal("label -2 accepted")
	}
}
