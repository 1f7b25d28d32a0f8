package datasets

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const coraPath = "../testdata/cora.npz"

func TestImportNPZCora(t *testing.T) {
	d, err := ImportNPZ(coraPath, ImportOptions{SplitSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "cora" || !d.Directed || d.Graph.NumNodes != 2708 || d.Graph.NumEdges() != 5429 ||
		d.FeatureDim != 1433 || d.FeatureDType != Float32 || d.NumClasses != 7 {
		t.Fatalf("cora: name %q directed %v nodes %d edges %d dim %d %s classes %d",
			d.Name, d.Directed, d.Graph.NumNodes, d.Graph.NumEdges(), d.FeatureDim, d.FeatureDType, d.NumClasses)
	}
	if d.Graph.Indices32 == nil {
		t.Fatal("want 32-bit indices")
	}
	for v := int64(0); v < d.Graph.NumNodes; v++ {
		if !slices.IsSorted(d.Graph.Indices32[d.Graph.Indptr[v]:d.Graph.Indptr[v+1]]) {
			t.Fatalf("row %d not sorted", v)
		}
	}
	counts := make([]int, 7)
	for _, y := range d.Labels {
		counts[y]++
	}
	if fmt.Sprint(counts) != "[298 418 818 426 217 180 351]" {
		t.Errorf("label counts %v", counts)
	}
	if d.ClassNames[0] != "Case_Based" || d.ClassNames[6] != "Theory" || len(d.ClassNames) != 7 {
		t.Errorf("class names %q", d.ClassNames)
	}
	// binary bag of words: 49216 ones, every other value 0
	ones := 0
	for i := 0; i < len(d.Features); i += 4 {
		switch getFloat32(d.Features[i:]) {
		case 1:
			ones++
		case 0:
		default:
			t.Fatalf("feature value %g at byte %d", getFloat32(d.Features[i:]), i)
		}
	}
	if ones != 49216 {
		t.Errorf("%d nonzero features, want 49216", ones)
	}
	// 60/20/20 per class, all nodes labelled
	tr, va, te := len(d.Splits[SplitTrain]), len(d.Splits[SplitValid]), len(d.Splits[SplitTest])
	if tr+va+te != 2708 || math.Abs(float64(tr)/2708-0.6) > 0.01 || math.Abs(float64(va)/2708-0.2) > 0.01 {
		t.Errorf("split sizes %d/%d/%d", tr, va, te)
	}
	d2, err := ImportNPZ(coraPath, ImportOptions{SplitSeed: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range SplitNames {
		if !slices.Equal(d.Splits[s], d2.Splits[s]) {
			t.Errorf("split %s differs between two imports with the same seed", s)
		}
	}

	u, err := ImportNPZ(coraPath, ImportOptions{Undirected: true, Name: "cora-u", SplitRatios: [3]float64{0.1, 0.1, 0.8}})
	if err != nil {
		t.Fatal(err)
	}
	// 5278 distinct undirected links, no self loops or duplicates in cora
	if u.Directed || u.Graph.NumEdges() != 10556 || u.Name != "cora-u" {
		t.Errorf("undirected cora: directed %v, %d edges, name %q", u.Directed, u.Graph.NumEdges(), u.Name)
	}
	if n := len(u.Splits[SplitTrain]); n < 260 || n > 282 {
		t.Errorf("10%% train split has %d nodes", n)
	}
}

// TestImportNPZRoundTrip writes imported cora with Write and reads it back
// with Open.
func TestImportNPZRoundTrip(t *testing.T) {
	d, err := ImportNPZ(coraPath, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameData(t, d, &writeAndOpen(t, d).Data)
}

// impU22 encodes strings as numpy <U22.
func impU22(ss ...string) []byte {
	b := make([]byte, 0, 88*len(ss))
	for _, s := range ss {
		rec := make([]byte, 88)
		i := 0
		for _, r := range s {
			rec[i], rec[i+1], rec[i+2], rec[i+3] = byte(r), byte(r>>8), byte(r>>16), byte(r>>24)
			i += 4
		}
		b = append(b, rec...)
	}
	return b
}

// impBenchmarkNPZ returns the members of a small gnn-benchmark file: 4 nodes
// in a directed 4-cycle plus a self loop, 3 features, 2 classes.
func impBenchmarkNPZ() map[string][]byte {
	return map[string][]byte{
		"adj_data":     impNPY("<f4", []int64{5}, impF32(1, 1, 1, 1, 1)),
		"adj_indices":  impNPY("<i4", []int64{5}, impI32(1, 3, 2, 3, 0)),
		"adj_indptr":   impNPY("<i4", []int64{5}, impI32(0, 1, 3, 4, 5)),
		"adj_shape":    impNPY("<i8", []int64{2}, impI64(4, 4)),
		"attr_data":    impNPY("<f4", []int64{3}, impF32(1, 2, 3)),
		"attr_indices": impNPY("<i4", []int64{3}, impI32(0, 2, 1)),
		"attr_indptr":  impNPY("<i4", []int64{5}, impI32(0, 1, 1, 2, 3)),
		"attr_shape":   impNPY("<i8", []int64{2}, impI64(4, 3)),
		"labels":       impNPY("|i1", []int64{4}, []byte{0, 1, 1, 0}),
		"class_names":  impNPY("<U22", []int64{2}, impU22("zero", "one")),
	}
}

func impWriteMembers(t testing.TB, path string, m map[string][]byte) {
	var ms []impMember
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ms = append(ms, impMember{k, m[k]})
	}
	impWriteNPZ(t, path, false, ms...)
}

func TestImportNPZSmall(t *testing.T) {
	for _, deflate := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "small.npz")
		var ms []impMember
		for k, v := range impBenchmarkNPZ() {
			ms = append(ms, impMember{k, v})
		}
		impWriteNPZ(t, path, deflate, ms...)
		d, err := ImportNPZ(path, ImportOptions{SplitRatios: [3]float64{0.5, 0.5, 0}})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(d.Graph.Indptr, d.Graph.Indices32) != "[0 1 3 4 5] [1 2 3 3 0]" {
			t.Errorf("graph %v %v", d.Graph.Indptr, d.Graph.Indices32)
		}
		var feats []float32
		for i := 0; i < len(d.Features); i += 4 {
			feats = append(feats, getFloat32(d.Features[i:]))
		}
		if fmt.Sprint(feats) != "[1 0 0 0 0 0 0 0 2 0 3 0]" {
			t.Errorf("features %v", feats)
		}
		if fmt.Sprint(d.Labels, d.ClassNames, d.NumClasses) != "[0 1 1 0] [zero one] 2" {
			t.Errorf("labels %v %q %d", d.Labels, d.ClassNames, d.NumClasses)
		}
		if len(d.Splits[SplitTrain]) != 2 || len(d.Splits[SplitValid]) != 2 || len(d.Splits[SplitTest]) != 0 {
			t.Errorf("splits %v", d.Splits)
		}
		u, err := ImportNPZ(path, ImportOptions{Undirected: true})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(u.Graph.Indptr, u.Graph.Indices32) != "[0 2 5 7 10] [1 3 0 2 3 1 3 0 1 2]" {
			t.Errorf("undirected graph %v %v", u.Graph.Indptr, u.Graph.Indices32)
		}
	}
}

// TestImportNPZDenseAttr reads features from a dense attr_matrix member
// (some gnn-benchmark files ship them dense), here float64.
func TestImportNPZDenseAttr(t *testing.T) {
	m := impBenchmarkNPZ()
	for _, k := range []string{"attr_data", "attr_indices", "attr_indptr", "attr_shape", "class_names"} {
		delete(m, k)
	}
	m["attr_matrix"] = impNPY("<f8", []int64{4, 2}, impF64(1, 2, 3, 4, 5, 6, 7, 8.5))
	path := filepath.Join(t.TempDir(), "dense.npz")
	impWriteMembers(t, path, m)
	d, err := ImportNPZ(path, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.FeatureDim != 2 || getFloat32(d.Row(3)[4:]) != 8.5 || d.NumClasses != 2 || d.ClassNames != nil {
		t.Errorf("dim %d, last %g, classes %d %q", d.FeatureDim, getFloat32(d.Row(3)[4:]), d.NumClasses, d.ClassNames)
	}
	m["attr_matrix"] = impNPY("<f8", []int64{3, 2}, impF64(1, 2, 3, 4, 5, 6))
	impWriteMembers(t, path, m)
	if _, err := ImportNPZ(path, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "member attr_matrix.npy: wrong shape (3, 2), want (4, *)") {
		t.Errorf("short attr_matrix: %v", err)
	}
}

func TestImportNPZBadInput(t *testing.T) {
	cora, err := os.ReadFile(coraPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mut  func(m map[string][]byte)
		raw  []byte // whole file instead of members
		want string
	}{
		{name: "truncated zip", raw: cora[:len(cora)/2], want: "corrupt or truncated .npz (zip) archive"},
		{name: "not a zip", raw: []byte("hello, world\n"), want: "corrupt or truncated .npz (zip) archive"},
		{name: "missing member", mut: func(m map[string][]byte) { delete(m, "labels") }, want: "missing member labels.npy"},
		{name: "missing features", mut: func(m map[string][]byte) { delete(m, "attr_data") }, want: "missing member attr_data.npy"},
		{name: "truncated npy", mut: func(m map[string][]byte) { m["adj_indices"] = m["adj_indices"][:len(m["adj_indices"])-3] },
			want: "member adj_indices.npy: truncated: shape (5,) of <i4 needs 20 data bytes, only 17 present"},
		{name: "truncated npy header", mut: func(m map[string][]byte) { m["labels"] = m["labels"][:20] },
			want: "member labels.npy: truncated .npy header"},
		{name: "wrong dtype", mut: func(m map[string][]byte) { m["adj_indices"] = impNPY("<f4", []int64{5}, impF32(1, 3, 2, 3, 0)) },
			want: "member adj_indices.npy: wrong dtype <f4, want an integer type"},
		{name: "wrong shape", mut: func(m map[string][]byte) { m["adj_indptr"] = impNPY("<i4", []int64{4}, impI32(0, 1, 3, 4)) },
			want: "member adj_indptr.npy: wrong shape (4,), want (5,)"},
		{name: "not square", mut: func(m map[string][]byte) { m["adj_shape"] = impNPY("<i8", []int64{2}, impI64(4, 5)) },
			want: "want a square (N, N) shape"},
		{name: "edge id out of range", mut: func(m map[string][]byte) { m["adj_indices"] = impNPY("<i4", []int64{5}, impI32(1, 3, 2, 4, 0)) },
			want: "member adj_indices.npy: indices[3] = 4 out of range [0, 4)"},
		{name: "negative edge id", mut: func(m map[string][]byte) { m["adj_indices"] = impNPY("<i4", []int64{5}, impI32(1, -1, 2, 3, 0)) },
			want: "member adj_indices.npy: indices[1] = -1 out of range [0, 4)"},
		{name: "indptr decreasing", mut: func(m map[string][]byte) { m["adj_indptr"] = impNPY("<i4", []int64{5}, impI32(0, 3, 1, 4, 5)) },
			want: "indptr decreases at row 2"},
		{name: "feature column out of range", mut: func(m map[string][]byte) { m["attr_indices"] = impNPY("<i4", []int64{3}, impI32(0, 3, 1)) },
			want: "member attr_indices.npy: indices[1] = 3 out of range [0, 3)"},
		{name: "label out of range", mut: func(m map[string][]byte) { m["labels"] = impNPY("|i1", []int64{4}, []byte{0, 1, 2, 0}) },
			want: "member labels.npy: labels[2] = 2 outside [0, 2) (or -1 for unlabelled)"},
		{name: "negative label", mut: func(m map[string][]byte) { m["labels"] = impNPY("|i1", []int64{4}, []byte{0, 0xfe, 1, 0}) },
			want: "member labels.npy: labels[1] = -2 outside [0, 2) (or -1 for unlabelled)"},
		{name: "labels wrong length", mut: func(m map[string][]byte) { m["labels"] = impNPY("|i1", []int64{3}, []byte{0, 1, 1}) },
			want: "member labels.npy: wrong shape (3,), want (4,)"},
		{name: "class names not strings", mut: func(m map[string][]byte) { m["class_names"] = impNPY("<i8", []int64{2}, impI64(0, 1)) },
			want: "member class_names.npy: wrong dtype <i8, want a unicode string type"},
		{name: "big-endian", mut: func(m map[string][]byte) { m["adj_shape"] = impNPY(">i8", []int64{2}, impI64(4, 4)) },
			want: "member adj_shape.npy: bad .npy header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.npz")
			if tc.raw != nil {
				if err := os.WriteFile(path, tc.raw, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				m := impBenchmarkNPZ()
				tc.mut(m)
				impWriteMembers(t, path, m)
			}
			_, err := ImportNPZ(path, ImportOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v\nwant it to name %s and say %q", err, path, tc.want)
			}
		})
	}
	if _, err := ImportNPZ(filepath.Join(t.TempDir(), "nope.npz"), ImportOptions{}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ImportNPZ(coraPath, ImportOptions{SplitRatios: [3]float64{0.8, 0.3, 0}}); err == nil || !strings.Contains(err.Error(), "at most 1") {
		t.Errorf("bad ratios: %v", err)
	}
}
