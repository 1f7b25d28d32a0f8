package datasets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// ogbExpected is datasets/testdata/expected.json, written with the
// fixtures by make_fixtures.py.
type ogbExpected struct {
	NumNodes   int64              `json:"num_nodes"`
	NumClasses int                `json:"num_classes"`
	FeatureDim int                `json:"feature_dim"`
	Src        []int64            `json:"src"`
	Dst        []int64            `json:"dst"`
	Features   []float32          `json:"features"`
	Labels     []int32            `json:"labels"`
	Unlabelled []int              `json:"unlabelled_in_npz"`
	Splits     map[string][]int64 `json:"splits"`
}

func impExpected(t testing.TB) *ogbExpected {
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var e ogbExpected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// impRefCSR is the reference: CSR by source, rows sorted, duplicates kept;
// undirected: symmetric, no duplicates, no self loops.
func impRefCSR(n int64, src, dst []int64, undirected bool) ([]int64, []int32) {
	rows := make([][]int32, n)
	for i := range src {
		rows[src[i]] = append(rows[src[i]], int32(dst[i]))
		if undirected {
			rows[dst[i]] = append(rows[dst[i]], int32(src[i]))
		}
	}
	indptr := []int64{0}
	var idx []int32
	for v, r := range rows {
		slices.Sort(r)
		if undirected {
			r = slices.Compact(r)
			r = slices.DeleteFunc(r, func(u int32) bool { return int(u) == v })
		}
		idx = append(idx, r...)
		indptr = append(indptr, int64(len(idx)))
	}
	return indptr, idx
}

func impCheckAgainstExpected(t *testing.T, d *Data, e *ogbExpected, undirected, npzLayout bool) {
	t.Helper()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	indptr, idx := impRefCSR(e.NumNodes, e.Src, e.Dst, undirected)
	if d.Graph.NumNodes != e.NumNodes || !slices.Equal(d.Graph.Indptr, indptr) || !slices.Equal(d.Graph.Indices32, idx) {
		t.Errorf("graph differs from expected.json")
	}
	if d.Directed == undirected {
		t.Errorf("Directed = %v", d.Directed)
	}
	if d.FeatureDim != e.FeatureDim || d.FeatureDType != Float32 || len(d.Features) != 4*len(e.Features) {
		t.Fatalf("features: dim %d %s, %d bytes", d.FeatureDim, d.FeatureDType, len(d.Features))
	}
	for i, want := range e.Features {
		if got := getFloat32(d.Features[4*i:]); got != want {
			t.Fatalf("feature %d = %g, want %g", i, got, want)
		}
	}
	labels := slices.Clone(e.Labels)
	if npzLayout {
		for _, v := range e.Unlabelled {
			labels[v] = -1
		}
	}
	if !slices.Equal(d.Labels, labels) || d.NumClasses != e.NumClasses {
		t.Errorf("labels %v (%d classes), want %v (%d)", d.Labels, d.NumClasses, labels, e.NumClasses)
	}
	for _, s := range SplitNames {
		if !slices.Equal(d.Splits[s], e.Splits[s]) {
			t.Errorf("split %s = %v, want %v", s, d.Splits[s], e.Splits[s])
		}
	}
}

func TestImportOGBFixtures(t *testing.T) {
	e := impExpected(t)
	for _, tc := range []struct{ dir, layout string }{{"testdata/ogb_csv", "csv"}, {"testdata/ogb_npz", "npz"}} {
		for _, undirected := range []bool{false, true} {
			for _, workers := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/undirected=%v/workers=%d", tc.layout, undirected, workers), func(t *testing.T) {
					d, err := ImportOGB(tc.dir, ImportOptions{Undirected: undirected, Workers: workers})
					if err != nil {
						t.Fatal(err)
					}
					impCheckAgainstExpected(t, d, e, undirected, tc.layout == "npz")
					if d.Name != filepath.Base(tc.dir) || !strings.Contains(d.Source, tc.layout+" layout") {
						t.Errorf("name %q source %q", d.Name, d.Source)
					}
				})
			}
		}
	}
}

// TestImportOGBSmallBlocks runs the fixtures through tiny text blocks
// (lines longer than a block, many blocks in flight) and tiny edge chunks.
func TestImportOGBSmallBlocks(t *testing.T) {
	e := impExpected(t)
	defer func(b int, c, s int64) { csvBlockSize, npzEdgeChunk, npzEdgeSub = b, c, s }(csvBlockSize, npzEdgeChunk, npzEdgeSub)
	csvBlockSize, npzEdgeChunk, npzEdgeSub = 16, 37, 5
	for _, tc := range []struct{ dir, layout string }{{"testdata/ogb_csv", "csv"}, {"testdata/ogb_npz", "npz"}} {
		for _, workers := range []int{1, 4} {
			d, err := ImportOGB(tc.dir, ImportOptions{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			impCheckAgainstExpected(t, d, e, false, tc.layout == "npz")
		}
	}
	dir := impCopyDir(t, "testdata/ogb_csv")
	impEditLine(t, filepath.Join(dir, "raw", "edge.csv.gz"), 150, "1,2,3")
	if _, err := ImportOGB(dir, ImportOptions{Workers: 3}); err == nil || !strings.Contains(err.Error(), "line 150 (byte ") {
		t.Errorf("bad line 150 with small blocks: %v", err)
	}
}

func TestImportOGBNaNLabel(t *testing.T) {
	dir := impCopyDir(t, "testdata/ogb_csv")
	impEditLine(t, filepath.Join(dir, "raw", "node-label.csv.gz"), 11, "nan")
	d, err := ImportOGB(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels[10] != -1 || d.Labels[9] == -1 {
		t.Errorf("labels %v", d.Labels[:12])
	}
}

func TestImportOGBRoundTrip(t *testing.T) {
	d, err := ImportOGB("testdata/ogb_npz", ImportOptions{Undirected: true})
	if err != nil {
		t.Fatal(err)
	}
	sameData(t, d, &writeAndOpen(t, d).Data)
}

// impCopyDir copies a fixture directory into a temporary one.
func impCopyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if de.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func impWriteGz(t testing.TB, path, text string) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(text))
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func impReadGz(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// impEditLine replaces line n (1-based) of a gzip text file.
func impEditLine(t testing.TB, path string, n int, line string) {
	t.Helper()
	lines := strings.Split(impReadGz(t, path), "\n")
	lines[n-1] = line
	impWriteGz(t, path, strings.Join(lines, "\n"))
}

// impNPZLayout rewrites raw/data.npz and raw/node-label.npz of an npz-layout
// copy from expected.json, with mut applied to the members.
func impNPZLayout(t testing.TB, dir string, e *ogbExpected, deflate bool, mut func(data, label map[string][]byte)) {
	t.Helper()
	n, ne := e.NumNodes, int64(len(e.Src))
	var feat []float64
	for _, v := range e.Features {
		feat = append(feat, float64(v))
	}
	lab := make([]float64, n)
	for i, y := range e.Labels {
		lab[i] = float64(y)
	}
	for _, v := range e.Unlabelled {
		lab[v] = math.NaN()
	}
	data := map[string][]byte{
		"edge_index":     impNPY("<i8", []int64{2, ne}, impI64(append(slices.Clone(e.Src), e.Dst...)...)),
		"node_feat":      impNPY("<f4", []int64{n, int64(e.FeatureDim)}, impF32(feat...)),
		"num_nodes_list": impNPY("<i8", []int64{1}, impI64(n)),
		"num_edges_list": impNPY("<i8", []int64{1}, impI64(ne)),
	}
	label := map[string][]byte{"node_label": impNPY("<f8", []int64{n, 1}, impF64(lab...))}
	if mut != nil {
		mut(data, label)
	}
	for name, m := range map[string]map[string][]byte{"data.npz": data, "node-label.npz": label} {
		var ms []impMember
		for k, v := range m {
			ms = append(ms, impMember{k, v})
		}
		slices.SortFunc(ms, func(a, b impMember) int { return strings.Compare(a.name, b.name) })
		impWriteNPZ(t, filepath.Join(dir, "raw", name), deflate, ms...)
	}
}

func TestImportOGBNPZDeflated(t *testing.T) {
	e := impExpected(t)
	dir := impCopyDir(t, "testdata/ogb_npz")
	impNPZLayout(t, dir, e, true, nil) // np.savez_compressed
	d, err := ImportOGB(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	impCheckAgainstExpected(t, d, e, false, true)
	// float64 features and int32 edge ids are converted
	impNPZLayout(t, dir, e, false, func(data, _ map[string][]byte) {
		var f []float64
		for _, v := range e.Features {
			f = append(f, float64(v))
		}
		data["node_feat"] = impNPY("<f8", []int64{e.NumNodes, int64(e.FeatureDim)}, impF64(f...))
		data["edge_index"] = impNPY("<i4", []int64{2, int64(len(e.Src))}, impI32(append(slices.Clone(e.Src), e.Dst...)...))
	})
	d, err = ImportOGB(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	impCheckAgainstExpected(t, d, e, false, true)
}

func TestImportOGBSplitScheme(t *testing.T) {
	dir := impCopyDir(t, "testdata/ogb_csv")
	if err := os.CopyFS(filepath.Join(dir, "split", "other"), os.DirFS(filepath.Join(dir, "split", "sales_ranking"))); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportOGB(dir, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "several split schemes (other, sales_ranking)") {
		t.Errorf("two schemes, none chosen: %v", err)
	}
	if _, err := ImportOGB(dir, ImportOptions{OGBSplit: "nope"}); err == nil || !strings.Contains(err.Error(), `no split scheme "nope" (present: other, sales_ranking)`) {
		t.Errorf("unknown scheme: %v", err)
	}
	d, err := ImportOGB(dir, ImportOptions{OGBSplit: "other", Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "x" || !strings.HasSuffix(d.Source, "--split other") {
		t.Errorf("name %q source %q", d.Name, d.Source)
	}
}

// FuzzParseFloat32 checks the fast float parser against strconv, bit for bit.
func FuzzParseFloat32(f *testing.F) {
	for _, s := range []string{"0", "-0", "-0.0", "0.057943", "-0.057943", "1234567", "12345678", "1.5e3", ".5", "5.", "-",
		".", "", "+1", "1.2.3", "nan", "inf", "0.0000000001", "0.00000000001", "9999999.5", "3.4e39", "1_000", "0x1p-2", " 1"} {
		f.Add(s)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		f.Add(strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(12)-6)), 'f', rng.IntN(12), 64))
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseFloat32([]byte(s))
		v, err := strconv.ParseFloat(s, 32)
		wantOK := err == nil || isRangeErr(err)
		if ok != wantOK {
			t.Fatalf("%q: ok %v, strconv err %v", s, ok, err)
		}
		if ok && math.Float32bits(got) != math.Float32bits(float32(v)) && !(got != got && v != v) {
			t.Fatalf("%q: got %g (%#x), strconv %g (%#x)", s, got, math.Float32bits(got), float32(v), math.Float32bits(float32(v)))
		}
	})
}

func TestKnownOGBClasses(t *testing.T) {
	for name, want := range map[string]int{"ogbn_arxiv": 40, "ogbn-products": 47, "OGBN_PAPERS100M": 172, "arxiv-subset": 0, "ogb_csv": 0} {
		if got := knownOGBClasses(name); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
	// the directory name counts too: a label past papers100M's 172 classes
	e := impExpected(t)
	dir := filepath.Join(t.TempDir(), "ogbn_papers100M")
	if err := os.CopyFS(dir, os.DirFS("testdata/ogb_npz")); err != nil {
		t.Fatal(err)
	}
	impNPZLayout(t, dir, e, false, func(_, l map[string][]byte) {
		v := make([]float64, e.NumNodes)
		v[33] = 172
		l["node_label"] = impNPY("<f8", []int64{e.NumNodes, 1}, impF64(v...))
	})
	if _, err := ImportOGB(dir, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "node_label[33] = 172 is not a class id in [0, 172)") {
		t.Errorf("label 172 in papers100M: %v", err)
	}
}

// FuzzCSVParsers feeds arbitrary text blocks to the line parsers: they may
// reject a block but must not panic, and what they accept must be whole.
func FuzzCSVParsers(f *testing.F) {
	for _, s := range []string{"1,2\n3,4\n", "0.5,-1.25\n1,2\n", "nan\n3\n", "\n", "1,\n", ",1\n", "1.5e3,2\r\n", "9223372036854775808\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if pairs, lines, pe := parseEdges[int32](b, 100); pe == nil && int64(len(pairs)) != 2*lines {
			t.Fatalf("edges: %d values for %d lines", len(pairs), lines)
		}
		if ids, lines, pe := parseIDs(b, 100); pe == nil && int64(len(ids)) != lines {
			t.Fatalf("ids: %d values for %d lines", len(ids), lines)
		}
		if ls, lines, pe := parseLabels(b); pe == nil && int64(len(ls)) != lines {
			t.Fatalf("labels: %d values for %d lines", len(ls), lines)
		}
		if fb, lines, pe := parseFeatures(b); pe == nil && int64(len(fb.ints)+len(fb.floats)/4) != lines*int64(fb.dim) {
			t.Fatalf("features: %d ints and %d float bytes for %d lines of %d", len(fb.ints), len(fb.floats), lines, fb.dim)
		}
	})
}
