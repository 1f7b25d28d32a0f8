package datasets

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func withLinkSplits(d *Data) *Data {
	n := d.Graph.NumNodes
	d.LinkSplits = map[string]*LinkSplit{
		SplitTrain: {Src: []int64{0, 1, 2}, Dst: []int64{3, 4, 5}, Label: []int32{1, 0, 1}, Time: []int64{7, 8, 9}},
		SplitTest:  {Src: []int64{n - 1, 0}, Dst: []int64{1, n - 1}, NegDst: []int64{1, 2, 3, 4, 5, 6}, NumNeg: 3},
		SplitValid: {Src: []int64{}, Dst: []int64{}},
	}
	return d
}

func TestLinkSplitsRoundTrip(t *testing.T) {
	d := withLinkSplits(withEdgeArrays(smallData(t, 30, Float32, 2, 4), Float32, 1))
	ds := writeAndOpen(t, d)
	if len(ds.LinkSplits) != 3 {
		t.Fatalf("%d link splits", len(ds.LinkSplits))
	}
	for name, want := range d.LinkSplits {
		got := ds.LinkSplits[name]
		if !slices.Equal(got.Src, want.Src) || !slices.Equal(got.Dst, want.Dst) || !slices.Equal(got.Label, want.Label) ||
			!slices.Equal(got.Time, want.Time) || !slices.Equal(got.NegDst, want.NegDst) || got.NumNeg != want.NumNeg {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if ds.Manifest.LinkSplits[SplitTest] != (LinkSplitInfo{NumEdges: 2, NumNeg: 3}) {
		t.Errorf("manifest %+v", ds.Manifest.LinkSplits)
	}
	if _, err := os.Stat(filepath.Join(ds.Dir, "link_test_neg_dst.arrow")); err != nil {
		t.Error(err)
	}
	// out-of-range ids are refused, naming the file
	bad := withLinkSplits(smallData(t, 30, Float32, 2, 4))
	bad.LinkSplits[SplitTest].NegDst[4] = 30
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "neg_dst[4] = 30") {
		t.Errorf("got %v", err)
	}
}

func TestManifestLinkChecks(t *testing.T) {
	d := withLinkSplits(smallData(t, 20, Float32, 2, 4))
	for _, c := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { delete(m, "link_splits") }, "does not list"},
		{func(m map[string]any) { m["link_splits"].(map[string]any)["test"].(map[string]any)["num_neg"] = 0 }, "num_neg 0"},
		{func(m map[string]any) { m["link_splits"].(map[string]any)["test"].(map[string]any)["num_edges"] = 1e6 }, "does not fit"},
		{func(m map[string]any) { m["link_splits"].(map[string]any)["extra"] = map[string]any{"num_edges": 0} }, "bad link split"},
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
		if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error saying %q, got %v", c.want, err)
		}
	}
}

// linkMRR scores the pairs of l by the dot product of the two ends' 1-hop
// mean features and returns the mean reciprocal rank of each true
// destination among its negatives.
func linkMRR(d *Data, l *LinkSplit) float64 {
	x := neighbourMean(float32Features(d), d.FeatureDim, &d.Graph)
	dim := int64(d.FeatureDim)
	dot := func(a, b int64) float64 {
		var s float64
		for j := range dim {
			s += float64(x[a*dim+j]) * float64(x[b*dim+j])
		}
		return s
	}
	var mrr float64
	for i := range l.Len() {
		pos := dot(l.Src[i], l.Dst[i])
		rank := 1
		for _, nd := range l.NegDst[i*int64(l.NumNeg) : (i+1)*int64(l.NumNeg)] {
			if dot(l.Src[i], nd) >= pos {
				rank++
			}
		}
		mrr += 1 / float64(rank)
	}
	return mrr / float64(l.Len())
}

func TestGenCitation2(t *testing.T) {
	d := mustGenerate(t, GenOptions{Like: "citation2", Scale: 0.002, Seed: 1, Time: true})
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	tr, va, te := d.LinkSplits[SplitTrain], d.LinkSplits[SplitValid], d.LinkSplits[SplitTest]
	if va.Len() != 174 || te.Len() != 174 || va.NumNeg != 1000 || tr.Len() != d.Graph.NumEdges() {
		t.Fatalf("valid %d test %d neg %d train %d edges %d", va.Len(), te.Len(), va.NumNeg, tr.Len(), d.Graph.NumEdges())
	}
	// held-out edges are not in the graph; train is the graph
	for _, l := range []*LinkSplit{va, te} {
		for i := range l.Len() {
			if _, ok := findEntry(&d.Graph, l.Dst[i], l.Src[i]); ok {
				t.Fatalf("held-out edge %d -> %d is still stored", l.Src[i], l.Dst[i])
			}
			if l.Time[i] < 0 {
				t.Fatal("no time")
			}
		}
	}
	for v := int64(0); v < d.Graph.NumNodes; v++ {
		for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
			if tr.Dst[p] != v || tr.Src[p] != d.Graph.Neighbor(p) || tr.Time[p] != d.EdgeTime[p] {
				t.Fatalf("train pair %d is not the stored edge", p)
			}
		}
	}
	mrr := linkMRR(d, te)
	random := 0.0
	for r := 1; r <= 1001; r++ {
		random += 1 / float64(r)
	}
	random /= 1001
	t.Logf("citation2 scale 0.002: %d nodes, %d edges; test MRR of 1-hop mean dot products %.3f (random %.4f)", d.Graph.NumNodes, d.Graph.NumEdges(), mrr, random)
	if mrr < 10*random || math.IsNaN(mrr) {
		t.Errorf("MRR %.3f: not learnable", mrr)
	}
	ds := writeAndOpen(t, d)
	if ds.LinkSplits[SplitTest].NegDst[999] != te.NegDst[999] {
		t.Fatal("round trip")
	}
	if !strings.Contains(ds.Source, "citation2") {
		t.Fatal(ds.Source)
	}
}

// writeTinyOGBLink writes a 30-node OGB link dataset (csv layout, no node
// labels) with its splits as exported .npz files of the given members.
func writeTinyOGBLink(t *testing.T, dir string, splits map[string][]impMember) {
	t.Helper()
	src, dst := make([]int64, 60), make([]int64, 60)
	for i := range src {
		src[i], dst[i] = int64(i%30), int64((i*11+3)%30)
	}
	writeTinyOGB(t, dir, src, dst, nil)
	os.Remove(filepath.Join(dir, "raw", "node-label.csv.gz"))
	os.RemoveAll(filepath.Join(dir, "split"))
	os.MkdirAll(filepath.Join(dir, "split", "time"), 0o755)
	for s, members := range splits {
		impWriteNPZ(t, filepath.Join(dir, "split", "time", s+".npz"), false, members...)
	}
}

func TestImportOGBLink(t *testing.T) {
	// ogbl-citation2's keys
	dir := filepath.Join(t.TempDir(), "ogbl-citation2")
	writeTinyOGBLink(t, dir, map[string][]impMember{
		"train": {{"source_node", impNPY("<i8", []int64{2}, impI64(0, 1))}, {"target_node", impNPY("<i8", []int64{2}, impI64(3, 4))}},
		"valid": {{"source_node", impNPY("<i8", []int64{1}, impI64(5))}, {"target_node", impNPY("<i8", []int64{1}, impI64(6))},
			{"target_node_neg", impNPY("<i8", []int64{1, 3}, impI64(7, 8, 9))}},
	})
	d, err := ImportOGB(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.NumClasses != 1 || d.Labels[0] != -1 || len(d.Splits) != 0 || len(d.LinkSplits) != 2 {
		t.Fatalf("classes %d labels %v splits %v links %d", d.NumClasses, d.Labels[:2], d.Splits, len(d.LinkSplits))
	}
	if v := d.LinkSplits[SplitValid]; v.NumNeg != 3 || v.NegDst[2] != 9 || v.Src[0] != 5 || v.Dst[0] != 6 {
		t.Fatalf("valid %+v", v)
	}
	if !strings.Contains(d.Source, "--edge-direction out") {
		t.Fatalf("source %q: link datasets are read as PyG reads them", d.Source)
	}
	// row 3 (edge 0 -> 3 of edge.csv.gz, i=0: 0 -> 3) lists 0
	if _, ok := findEntry(&d.Graph, 3, 0); !ok {
		t.Fatal("edge 0 -> 3 is not stored in row 3")
	}
	ds := writeAndOpen(t, d)
	if ds.LinkSplits[SplitValid].NegDst[1] != 8 {
		t.Fatal("round trip")
	}
	if _, err := ImportOGB(dir, ImportOptions{EdgeDirection: EdgeIn}); err == nil {
		t.Fatal("EdgeIn accepted for a link dataset")
	}

	// ogbl-collab's keys: negatives appended with label 0
	dir = filepath.Join(t.TempDir(), "ogbl-collab")
	writeTinyOGBLink(t, dir, map[string][]impMember{
		"train": {{"edge", impNPY("<i8", []int64{2, 2}, impI64(0, 1, 2, 3))}, {"year", impNPY("<i8", []int64{2}, impI64(2001, 2002))}},
		"test":  {{"edge", impNPY("<i8", []int64{1, 2}, impI64(4, 5))}, {"edge_neg", impNPY("<i8", []int64{2, 2}, impI64(6, 7, 8, 9))}},
	})
	d, err = ImportOGB(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, te := d.LinkSplits[SplitTrain], d.LinkSplits[SplitTest]
	if !slices.Equal(tr.Src, []int64{0, 2}) || !slices.Equal(tr.Dst, []int64{1, 3}) || !slices.Equal(tr.Time, []int64{2001, 2002}) {
		t.Fatalf("train %+v", tr)
	}
	if !slices.Equal(te.Src, []int64{4, 6, 8}) || !slices.Equal(te.Label, []int32{1, 0, 0}) {
		t.Fatalf("test %+v", te)
	}

	// a split only as a .pt file: the error says how to export it
	os.Remove(filepath.Join(dir, "split", "time", "test.npz"))
	os.WriteFile(filepath.Join(dir, "split", "time", "test.pt"), []byte("torch"), 0o644)
	_, err = ImportOGB(dir, ImportOptions{})
	if err == nil || !strings.Contains(err.Error(), "np.savez(") || !strings.Contains(err.Error(), "torch.load(") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}
