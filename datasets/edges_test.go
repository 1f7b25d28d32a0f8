package datasets

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// withEdgeArrays gives d every per-edge array, each entry naming its edge
// (row v, position p) so that a reordering can be checked.
func withEdgeArrays(d *Data, dt DType, dim int) *Data {
	e := d.Graph.NumEdges()
	d.EdgeDim, d.EdgeDType = dim, dt
	d.EdgeAttr = make([]byte, e*int64(dim*dt.Size()))
	for i := range d.EdgeAttr {
		d.EdgeAttr[i] = byte(i*7 + 1)
		if dt == Bool {
			d.EdgeAttr[i] &= 1
		}
	}
	d.EdgeWeight = make([]float32, e)
	d.EdgeTime = make([]int64, e)
	for p := range e {
		d.EdgeWeight[p] = float32(p) + 0.5
		d.EdgeTime[p] = 1000 + p
	}
	d.NodeTime = make([]int64, d.Graph.NumNodes)
	for v := range d.NodeTime {
		d.NodeTime[v] = int64(v * 3)
	}
	return d
}

func TestEdgeArraysRoundTrip(t *testing.T) {
	for _, dt := range []DType{Float32, BFloat16, Int64, Bool} {
		d := withEdgeArrays(smallData(t, 40, Float32, 3, 4), dt, 5)
		ds := writeAndOpen(t, d)
		sameData(t, d, &ds.Data)
		if ds.EdgeDim != 5 || ds.EdgeDType != dt || !slices.Equal(ds.EdgeAttr, d.EdgeAttr) ||
			!slices.Equal(ds.EdgeWeight, d.EdgeWeight) || !slices.Equal(ds.EdgeTime, d.EdgeTime) || !slices.Equal(ds.NodeTime, d.NodeTime) {
			t.Fatalf("%s: per-edge arrays differ after a round trip", dt)
		}
		// NoEdgeFeatures leaves edge_attr and edge_weight out, not the times.
		ds2, err := Open(ds.Dir, &OpenOptions{NoEdgeFeatures: true})
		if err != nil {
			t.Fatal(err)
		}
		if ds2.EdgeAttr != nil || ds2.EdgeWeight != nil || ds2.EdgeDim != 5 || !slices.Equal(ds2.EdgeTime, d.EdgeTime) {
			t.Fatalf("NoEdgeFeatures: attr %d bytes, weight %d", len(ds2.EdgeAttr), len(ds2.EdgeWeight))
		}
		ds2.Close()
		if _, err := Verify(ds.Dir, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAllocEdgeFeatures(t *testing.T) {
	d := withEdgeArrays(smallData(t, 40, Float32, 3, 4), Float16, 3)
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	var allocs [][]byte
	freed := 0
	ds, err := Open(dir, &OpenOptions{
		AllocEdgeFeatures: func(n int64) ([]byte, error) { b := make([]byte, n); allocs = append(allocs, b); return b, nil },
		FreeEdgeFeatures:  func([]byte) error { freed++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 2 {
		t.Fatalf("%d allocations, want 2 (edge_attr and edge_weight)", len(allocs))
	}
	inside := func(p unsafe.Pointer) bool {
		for _, b := range allocs {
			if uintptr(p) >= uintptr(unsafe.Pointer(&b[0])) && uintptr(p) < uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b)) {
				return true
			}
		}
		return false
	}
	if !inside(unsafe.Pointer(&ds.EdgeAttr[0])) || !inside(unsafe.Pointer(&ds.EdgeWeight[0])) {
		t.Fatal("edge arrays are not in the caller's memory")
	}
	if uintptr(unsafe.Pointer(&ds.EdgeAttr[0]))%FeatureAlign != 0 {
		t.Fatal("edge_attr rows not aligned")
	}
	sameData(t, d, &ds.Data)
	ds.Close()
	if freed != 0 {
		t.Fatal("Close freed the caller's memory")
	}
	if _, err := Open(dir, &OpenOptions{AllocEdgeFeatures: func(int64) ([]byte, error) { return nil, nil }}); err == nil {
		t.Fatal("AllocEdgeFeatures without FreeEdgeFeatures accepted")
	}
}

func TestManifestEdgeChecks(t *testing.T) {
	d := withEdgeArrays(smallData(t, 20, Float32, 2, 4), Float32, 2)
	for _, c := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { m["edge_dim"] = 0 }, "edge_dim 0"},
		{func(m map[string]any) { m["edge_dtype"] = "complex" }, "unknown edge_dtype"},
		{func(m map[string]any) { m["edge_dim"] = 1 << 40 }, "edge_dim"},
		{func(m map[string]any) { m["num_edges"] = m["num_edges"].(float64) + 1 }, ""},
	} {
		dir := filepath.Join(t.TempDir(), "ds")
		if err := Write(dir, d, nil); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
		var m map[string]any
		jsonUnmarshal(t, b, &m)
		c.edit(m)
		writeRawManifest(t, dir, jsonMarshal(t, m))
		_, err := Open(dir, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error saying %q, got %v", c.want, err)
		}
	}
}

func TestMakeUndirectedEdges(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		g := randomGraph(2+int(seed)*3, 3, seed)
		want, err := MakeUndirected(&g, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, origin, err := MakeUndirectedEdges(&g, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Indptr, want.Indptr) || !slices.Equal(got.Indices32, want.Indices32) {
			t.Fatalf("seed %d: graph differs from MakeUndirected", seed)
		}
		for v := int64(0); v < got.NumNodes; v++ {
			for p := got.Indptr[v]; p < got.Indptr[v+1]; p++ {
				u, q := got.Neighbor(p), origin[p]
				// q is v -> u in g (first such) or else u -> v (first such)
				fwd := slices.Index(g.Indices32[g.Indptr[v]:g.Indptr[v+1]], int32(u))
				if fwd >= 0 {
					if q != g.Indptr[v]+int64(fwd) {
						t.Fatalf("seed %d: edge %d->%d carries %d, want forward %d", seed, v, u, q, g.Indptr[v]+int64(fwd))
					}
					continue
				}
				rev := slices.Index(g.Indices32[g.Indptr[u]:g.Indptr[u+1]], int32(v))
				if rev < 0 || q != g.Indptr[u]+int64(rev) {
					t.Fatalf("seed %d: edge %d->%d carries %d", seed, v, u, q)
				}
			}
		}
	}
}

// TestImportNPZEdgeWeights: adj_data becomes edge_weight in CSR order, for
// both edge directions and through MakeUndirected.
func TestImportNPZEdgeWeights(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.npz")
	// A[0,2]=2, A[0,1]=1 (unsorted row), A[1,2]=3, A[2,0]=4
	impWriteNPZ(t, path, false,
		impMember{"adj_indptr", impNPY("<i8", []int64{4}, impI64(0, 2, 3, 4))},
		impMember{"adj_indices", impNPY("<i8", []int64{4}, impI64(2, 1, 2, 0))},
		impMember{"adj_data", impNPY("<f4", []int64{4}, impF32(2, 1, 3, 4))},
		impMember{"adj_shape", impNPY("<i8", []int64{2}, impI64(3, 3))},
		impMember{"attr_matrix", impNPY("<f4", []int64{3, 1}, impF32(1, 2, 3))},
		impMember{"labels", impNPY("<i8", []int64{3}, impI64(0, 1, 1))},
	)
	weights := func(d *Data) string {
		var s []string
		for v := int64(0); v < d.Graph.NumNodes; v++ {
			for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
				s = append(s, fmt.Sprintf("%d<-%d:%g", v, d.Graph.Neighbor(p), d.EdgeWeight[p]))
			}
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		o    ImportOptions
		want string
	}{
		{ImportOptions{EdgeWeights: true}, "0<-1:1 0<-2:2 1<-2:3 2<-0:4"},
		{ImportOptions{EdgeWeights: true, EdgeDirection: EdgeOut}, "0<-2:4 1<-0:1 2<-0:2 2<-1:3"},
		{ImportOptions{EdgeWeights: true, Undirected: true}, "0<-1:1 0<-2:2 1<-0:1 1<-2:3 2<-0:4 2<-1:3"},
		// 0-2 is stored both ways (2 and 4): summed, as PyG's ToUndirected
		{ImportOptions{EdgeWeights: true, Undirected: true, UndirectedReduce: ReduceSum}, "0<-1:1 0<-2:6 1<-0:1 1<-2:3 2<-0:6 2<-1:3"},
	} {
		c.o.SplitRatios = [3]float64{0.4, 0.3, 0.3}
		d, err := ImportNPZ(path, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := weights(d); got != c.want {
			t.Errorf("%+v: %s, want %s", c.o, got, c.want)
		}
	}
}

// TestImportOGBEdgeFiles: edge-feat, edge_weight, edge_year and node_year
// of the csv layout, and edge_feat of the npz layout, in CSR order.
func TestImportOGBEdgeFiles(t *testing.T) {
	for _, layout := range []string{"csv", "npz"} {
		dir := filepath.Join(t.TempDir(), "ogbl-x")
		src, dst := make([]int64, 90), make([]int64, 90)
		for i := range src {
			src[i], dst[i] = int64((i*7)%30), int64((i*13+5)%30)
		}
		e := len(src)
		var feat, w, yr strings.Builder
		var featVals []float64
		for i := range e {
			fmt.Fprintf(&feat, "%d,%d\n", i, -i)
			featVals = append(featVals, float64(i), float64(-i))
			fmt.Fprintf(&w, "%g\n", float64(i)/4)
			fmt.Fprintf(&yr, "%d\n", 2000+i)
		}
		if layout == "csv" {
			os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
			impWriteGz(t, filepath.Join(dir, "raw", "edge-feat.csv.gz"), feat.String())
			impWriteGz(t, filepath.Join(dir, "raw", "edge_weight.csv.gz"), w.String())
			impWriteGz(t, filepath.Join(dir, "raw", "edge_year.csv.gz"), yr.String())
			var ny strings.Builder
			for v := range 30 {
				fmt.Fprintf(&ny, "%d\n", 1990+v)
			}
			impWriteGz(t, filepath.Join(dir, "raw", "node_year.csv.gz"), ny.String())
			writeTinyOGB(t, dir, src, dst, nil)
		} else {
			writeTinyOGB(t, dir, src, dst, &impMember{"edge_feat", impNPY("<f8", []int64{int64(e), 2}, impF64(featVals...))})
		}
		d, err := ImportOGB(dir, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// OGB's reader keeps a csv of integers integer (int64); the npz
		// member is float64, stored as float32.
		want := map[string]DType{"csv": Int64, "npz": Float32}[layout]
		if d.EdgeDim != 2 || d.EdgeDType != want {
			t.Fatalf("%s: edge attr %d x %s, want 2 x %s", layout, d.EdgeDim, d.EdgeDType, want)
		}
		for v := int64(0); v < d.Graph.NumNodes; v++ {
			for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
				var i int
				if want == Int64 {
					i = int(int64(binary.LittleEndian.Uint64(d.EdgeAttr[16*p:])))
					if neg := int64(binary.LittleEndian.Uint64(d.EdgeAttr[16*p+8:])); neg != -int64(i) {
						t.Fatalf("edge %d: attributes %d, %d, want %d, %d", p, i, neg, i, -i)
					}
				} else {
					i = int(math.Float32frombits(binary.LittleEndian.Uint32(d.EdgeAttr[8*p:])))
				}
				if src[i] != v || dst[i] != d.Graph.Neighbor(p) {
					t.Fatalf("%s: CSR edge %d (%d->%d) carries the attributes of input edge %d (%d->%d)", layout, p, v, d.Graph.Neighbor(p), i, src[i], dst[i])
				}
				if layout == "csv" && (d.EdgeWeight[p] != float32(i)/4 || d.EdgeTime[p] != int64(2000+i)) {
					t.Fatalf("edge %d: weight %g time %d, want input edge %d's", p, d.EdgeWeight[p], d.EdgeTime[p], i)
				}
			}
		}
		if layout == "csv" && (len(d.NodeTime) != 30 || d.NodeTime[29] != 2019) {
			t.Fatalf("node_time %v", d.NodeTime)
		}
		ds := writeAndOpen(t, d)
		sameData(t, d, &ds.Data)
	}
}

// writeTinyOGB writes a 30-node OGB dataset with the given edges: the csv
// layout, or the npz layout with edgeFeat in data.npz when it is set.
func writeTinyOGB(t *testing.T, dir string, src, dst []int64, edgeFeat *impMember) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
	os.MkdirAll(filepath.Join(dir, "split", "s"), 0o755)
	const n = 30
	for i, s := range SplitNames {
		var sb strings.Builder
		for v := i; v < n; v += 3 {
			fmt.Fprintf(&sb, "%d\n", v)
		}
		impWriteGz(t, filepath.Join(dir, "split", "s", s+".csv.gz"), sb.String())
	}
	if edgeFeat != nil {
		var feat, lab []float64
		for v := range n {
			feat = append(feat, float64(v))
			lab = append(lab, float64(v%4))
		}
		impWriteNPZ(t, filepath.Join(dir, "raw", "data.npz"), false,
			impMember{"edge_index", impNPY("<i8", []int64{2, int64(len(src))}, impI64(append(slices.Clone(src), dst...)...))},
			impMember{"node_feat", impNPY("<f4", []int64{n, 1}, impF32(feat...))}, *edgeFeat)
		impWriteNPZ(t, filepath.Join(dir, "raw", "node-label.npz"), false,
			impMember{"node_label", impNPY("<f8", []int64{n, 1}, impF64(lab...))})
		return
	}
	var eb, fb, lb strings.Builder
	for i := range src {
		fmt.Fprintf(&eb, "%d,%d\n", src[i], dst[i])
	}
	for v := range n {
		fmt.Fprintf(&fb, "%d\n", v)
		fmt.Fprintf(&lb, "%d\n", v%4)
	}
	impWriteGz(t, filepath.Join(dir, "raw", "edge.csv.gz"), eb.String())
	impWriteGz(t, filepath.Join(dir, "raw", "node-feat.csv.gz"), fb.String())
	impWriteGz(t, filepath.Join(dir, "raw", "node-label.csv.gz"), lb.String())
}

func jsonUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func jsonMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGenEdgeArrays: the generated edge arrays are in CSR order, carry the
// planted signal (same-class edges weigh more and have their own
// centroid), and survive symmetrising.
func TestGenEdgeArrays(t *testing.T) {
	for _, undirected := range []bool{false, true} {
		o := GenOptions{Like: "arxiv", Scale: 0.01, Seed: 3, EdgeDim: 4, EdgeDType: Float32, EdgeWeights: true, Time: true, Undirected: &undirected}
		d := mustGenerate(t, o)
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		var wSame, wDiff, aSame, aDiff, nSame, nDiff float64
		for v := int64(0); v < d.Graph.NumNodes; v++ {
			for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
				u := d.Graph.Neighbor(p)
				a := float64(math.Float32frombits(binary.LittleEndian.Uint32(d.EdgeAttr[16*p:])))
				if d.Labels[u] == d.Labels[v] {
					wSame, aSame, nSame = wSame+float64(d.EdgeWeight[p]), aSame+a, nSame+1
				} else {
					wDiff, aDiff, nDiff = wDiff+float64(d.EdgeWeight[p]), aDiff+a, nDiff+1
				}
				if d.EdgeTime[p] != max(d.NodeTime[u], d.NodeTime[v]) {
					t.Fatalf("edge_time of %d is not the later end's", p)
				}
			}
		}
		wSame, wDiff, aSame, aDiff = wSame/nSame, wDiff/nDiff, aSame/nSame, aDiff/nDiff
		t.Logf("undirected %v: mean weight same-class %.3f, other %.3f; edge_attr[0] %.3f vs %.3f", undirected, wSame, wDiff, aSame, aDiff)
		if wSame < 0.7 || wDiff > 0.3 || math.Abs(aSame-aDiff) < 0.5 {
			t.Errorf("no planted signal in the edge arrays")
		}
		if !strings.Contains(d.Source, "--edge-dim 4 --edge-weights --time") {
			t.Errorf("source %q", d.Source)
		}
		// the same bytes for another worker count
		o.Workers = 1
		d1 := mustGenerate(t, o)
		if !slices.Equal(d1.EdgeAttr, d.EdgeAttr) || !slices.Equal(d1.EdgeWeight, d.EdgeWeight) {
			t.Fatal("edge arrays depend on the worker count")
		}
	}
}
