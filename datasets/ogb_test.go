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
	"syscall"
	"testing"
	"time"

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

func TestImportOGBCSVBadInput(t *testing.T) {
	raw := func(dir, f string) string { return filepath.Join(dir, "raw", f) }
	for _, tc := range []struct {
		name string
		mut  func(t *testing.T, dir string) string // returns the file the error must name
		opts ImportOptions
		want string
	}{
		{name: "truncated gzip", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
			return p
		}, want: "corrupt or truncated gzip stream after"},
		{name: "corrupt gzip", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			b, _ := os.ReadFile(p)
			b[len(b)-6] ^= 0xff // inside the CRC32/size trailer
			os.WriteFile(p, b, 0o644)
			return p
		}, want: "corrupt or truncated gzip stream"},
		{name: "not gzip", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-label.csv.gz")
			os.WriteFile(p, []byte("0\n1\n"), 0o644)
			return p
		}, want: "not a gzip file"},
		{name: "missing file", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-label.csv.gz")
			os.Remove(p)
			return p
		}, want: "no such file"},
		{name: "missing split file", mut: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "split", "sales_ranking", "valid.csv.gz")
			os.Remove(p)
			return p
		}, want: "no such file"},
		{name: "non-numeric feature", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			impEditLine(t, p, 7, "0.5,abc,0,0,0,0,0,0")
			return p
		}, want: `line 7 (byte `},
		{name: "non-numeric feature message", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			impEditLine(t, p, 7, "0.5,abc,0,0,0,0,0,0")
			return p
		}, want: `value 2: "abc" is not a number`},
		{name: "ragged features", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			impEditLine(t, p, 12, "0.5,0,0,0,0,0,0")
			return p
		}, want: "line 12 (byte 746 of the uncompressed text)"},
		{name: "ragged features message", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			impEditLine(t, p, 12, "0.5,0,0,0,0,0,0")
			return p
		}, want: "row has 7 values, earlier rows have 8"},
		{name: "empty feature value", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			impEditLine(t, p, 3, "0.5,,0,0,0,0,0,0")
			return p
		}, want: "line 3 "},
		{name: "too many feature rows", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-feat.csv.gz")
			impWriteGz(t, p, impReadGz(t, p)+"0,0,0,0,0,0,0,0\n")
			return p
		}, want: "line 51: more rows than the 50 nodes in num-node-list.csv.gz"},
		{name: "edge id >= N", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			impEditLine(t, p, 20, "3,50")
			return p
		}, want: "line 20 (byte "},
		{name: "edge id >= N message", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			impEditLine(t, p, 20, "3,50")
			return p
		}, want: "field 2: node id 50 out of range [0, 50)"},
		{name: "negative edge id", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			impEditLine(t, p, 5, "-1,3")
			return p
		}, want: "line 5 (byte "},
		{name: "negative edge id message", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			impEditLine(t, p, 5, "-1,3")
			return p
		}, want: "field 1: negative node id -1"},
		{name: "edge with three fields", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			impEditLine(t, p, 9, "1,2,3")
			return p
		}, want: "line 9 (byte "},
		{name: "non-numeric edge id", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "edge.csv.gz")
			impEditLine(t, p, 200, "1,x2")
			return p
		}, want: `line 200 (byte `},
		{name: "edge count mismatch", mut: func(t *testing.T, dir string) string {
			impWriteGz(t, raw(dir, "num-edge-list.csv.gz"), "201\n")
			return raw(dir, "edge.csv.gz")
		}, want: "200 rows, but num-edge-list.csv.gz says 201 edges"},
		{name: "node count mismatch", mut: func(t *testing.T, dir string) string {
			impWriteGz(t, raw(dir, "num-node-list.csv.gz"), "60\n")
			return raw(dir, "node-feat.csv.gz")
		}, want: "50 rows, but num-node-list.csv.gz says 60 nodes"},
		{name: "negative label", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-label.csv.gz")
			impEditLine(t, p, 4, "-2")
			return p
		}, want: "line 4 (byte "},
		{name: "label outside known classes", opts: ImportOptions{Name: "ogbn-arxiv"}, mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-label.csv.gz")
			impEditLine(t, p, 6, "40")
			return p
		}, want: "line 6: label 40 outside [0, 40)"},
		{name: "non-numeric label", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-label.csv.gz")
			impEditLine(t, p, 8, "three")
			return p
		}, want: `line 8 (byte `},
		{name: "too few labels", mut: func(t *testing.T, dir string) string {
			p := raw(dir, "node-label.csv.gz")
			s := impReadGz(t, p)
			impWriteGz(t, p, s[:strings.LastIndex(strings.TrimSuffix(s, "\n"), "\n")+1])
			return p
		}, want: "49 rows, want one per node (50 nodes"},
		{name: "split id out of range", mut: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "split", "sales_ranking", "test.csv.gz")
			impEditLine(t, p, 2, "77")
			return p
		}, want: "line 2 (byte "},
		{name: "no layout", mut: func(t *testing.T, dir string) string {
			os.Remove(raw(dir, "edge.csv.gz"))
			return dir
		}, want: "neither raw/data.npz nor raw/edge.csv.gz"},
		{name: "no split dir", mut: func(t *testing.T, dir string) string {
			os.RemoveAll(filepath.Join(dir, "split"))
			return dir
		}, want: "missing split directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := impCopyDir(t, "testdata/ogb_csv")
			file := tc.mut(t, dir)
			_, err := ImportOGB(dir, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("err = %v\nwant it to name %s and say %q", err, file, tc.want)
			}
		})
	}
}

// TestStreamLinesOffsets checks line numbers and byte offsets across block
// boundaries, lines longer than a block, and a last line without newline.
func TestStreamLinesOffsets(t *testing.T) {
	var sb strings.Builder
	var offs []int64
	for i := 0; i < 1_500_000; i++ {
		offs = append(offs, int64(sb.Len()))
		sb.WriteString(strconv.Itoa(i % 1000))
		if i == 700_000 {
			sb.WriteString(strings.Repeat(" ", 9<<20)) // a 9 MiB line
		}
		sb.WriteString("\n")
	}
	text := strings.TrimSuffix(sb.String(), "\n")
	path := filepath.Join(t.TempDir(), "x.csv.gz")
	impWriteGz(t, path, text)
	var got []int64
	err := streamLines(path, 4, nopProgress{}, func(b []byte) ([]int64, int64, *parseError) {
		return parseIDs(b, 1000)
	}, func(v []int64, line int64) error {
		if line != int64(len(got)) {
			return fmt.Errorf("block starts at line %d, want %d", line, len(got))
		}
		got = append(got, v...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1_500_000 || got[1_499_999] != 999 || got[700_001] != 1 {
		t.Fatalf("%d values", len(got))
	}
	bad := []byte(text)
	const badLine = 1_234_567
	bad[offs[badLine]] = 'x'
	impWriteGz(t, path, string(bad))
	err = streamLines(path, 3, nopProgress{}, func(b []byte) ([]int64, int64, *parseError) {
		return parseIDs(b, 1000)
	}, func([]int64, int64) error { return nil })
	want := fmt.Sprintf("line %d (byte %d of the uncompressed text)", badLine+1, offs[badLine])
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want %q", err, want)
	}
}

func TestImportOGBNPZBadInput(t *testing.T) {
	e := impExpected(t)
	n, ne := e.NumNodes, int64(len(e.Src))
	edges := func(src, dst []int64) []byte { return impI64(append(slices.Clone(src), dst...)...) }
	for _, tc := range []struct {
		name  string
		mut   func(data, label map[string][]byte)
		file  string // under raw/
		after func(t *testing.T, dir string)
		want  string
	}{
		{name: "edge_index float", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["edge_index"] = impNPY("<f8", []int64{2, ne}, impF64(make([]float64, 2*ne)...))
		}, want: "member edge_index.npy: wrong dtype <f8, want int64 or int32"},
		{name: "edge_index [3,E]", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["edge_index"] = impNPY("<i8", []int64{3, ne}, impI64(make([]int64, 3*ne)...))
		}, want: "member edge_index.npy: wrong shape (3, 200), want (2, *)"},
		{name: "edge_index truncated", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["edge_index"] = d["edge_index"][:len(d["edge_index"])-8]
		}, want: "member edge_index.npy: truncated: shape (2, 200) of <i8 needs 3200 data bytes, only 3192 present"},
		{name: "edge id >= N", file: "data.npz", mut: func(d, _ map[string][]byte) {
			dst := slices.Clone(e.Dst)
			dst[17] = n
			d["edge_index"] = impNPY("<i8", []int64{2, ne}, edges(e.Src, dst))
		}, want: fmt.Sprintf("member edge_index.npy: edge 17 (%d -> 50) has a node id out of range [0, 50)", e.Src[17])},
		{name: "negative edge id", file: "data.npz", mut: func(d, _ map[string][]byte) {
			src := slices.Clone(e.Src)
			src[3] = -5
			d["edge_index"] = impNPY("<i8", []int64{2, ne}, edges(src, e.Dst))
		}, want: "edge 3 (-5 -> "},
		{name: "missing node_feat", file: "data.npz", mut: func(d, _ map[string][]byte) { delete(d, "node_feat") },
			want: "missing member node_feat.npy (members: edge_index, num_edges_list, num_nodes_list)"},
		{name: "missing edge_index", file: "data.npz", mut: func(d, _ map[string][]byte) { delete(d, "edge_index") },
			want: "missing member edge_index.npy"},
		{name: "node_feat int", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["node_feat"] = impNPY("<i4", []int64{n, 8}, impI32(make([]int64, n*8)...))
		}, want: "member node_feat.npy: wrong dtype <i4, want float32"},
		{name: "node_feat 1-D", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["node_feat"] = impNPY("<f4", []int64{n * 8}, impF32(make([]float64, n*8)...))
		}, want: "member node_feat.npy: wrong shape (400,), want (*, *)"},
		{name: "node_feat truncated", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["node_feat"] = d["node_feat"][:len(d["node_feat"])-100]
		}, want: "member node_feat.npy: truncated"},
		{name: "num_nodes_list mismatch", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["num_nodes_list"] = impNPY("<i8", []int64{1}, impI64(51))
		}, want: "num_nodes_list is [51] but node_feat has 50 rows"},
		{name: "label not a class id", file: "node-label.npz", mut: func(_, l map[string][]byte) {
			v := make([]float64, n)
			v[9] = 2.5
			l["node_label"] = impNPY("<f8", []int64{n, 1}, impF64(v...))
		}, want: "member node_label.npy: node_label[9] = 2.5 is not a class id"},
		{name: "negative label", file: "node-label.npz", mut: func(_, l map[string][]byte) {
			v := make([]float64, n)
			v[4] = -1
			l["node_label"] = impNPY("<f8", []int64{n, 1}, impF64(v...))
		}, want: "node_label[4] = -1 is not a class id"},
		{name: "labels wrong shape", file: "node-label.npz", mut: func(_, l map[string][]byte) {
			l["node_label"] = impNPY("<f8", []int64{n, 2}, impF64(make([]float64, 2*n)...))
		}, want: "member node_label.npy: wrong shape (50, 2), want (50, 1)"},
		{name: "missing node_label", file: "node-label.npz", mut: func(_, l map[string][]byte) {
			l["labels"] = l["node_label"]
			delete(l, "node_label")
		}, want: "missing member node_label.npy"},
		{name: "corrupt zip", file: "data.npz", after: func(t *testing.T, dir string) {
			p := filepath.Join(dir, "raw", "data.npz")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-30], 0o644)
		}, want: "corrupt or truncated .npz (zip) archive"},
		{name: "missing label file", file: "node-label.npz", after: func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "raw", "node-label.npz"))
		}, want: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := impCopyDir(t, "testdata/ogb_npz")
			impNPZLayout(t, dir, e, false, tc.mut)
			if tc.after != nil {
				tc.after(t, dir)
			}
			_, err := ImportOGB(dir, ImportOptions{})
			file := filepath.Join(dir, "raw", tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("err = %v\nwant it to name %s and say %q", err, file, tc.want)
			}
		})
	}
}

// ---- benchmarks on generated data (not committed) ----

// impCPU is the process's user+system CPU time.
func impCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// impBenchLoop runs fn b.N times and reports, besides b.SetBytes's MB/s,
// MB per CPU-second (steadier than wall time on a shared machine) and
// the CPU cores kept busy.
func impBenchLoop(b *testing.B, bytes int64, fn func() error) {
	b.SetBytes(bytes)
	b.ResetTimer()
	cpu0 := impCPU()
	for b.Loop() {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (impCPU() - cpu0).Seconds()
	b.ReportMetric(float64(bytes)*float64(b.N)/cpu/1e6, "MB/cpu-s")
	b.ReportMetric(cpu/b.Elapsed().Seconds(), "cores")
}

// impGenOGB writes an OGB-shaped dataset of n nodes, deg out-edges each and
// dim features in the chosen layout and returns the bytes of the raw files.
func impGenOGB(b *testing.B, dir string, layout string, n, deg, dim int) int64 {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
	os.MkdirAll(filepath.Join(dir, "split", "s"), 0o755)
	var src, dst, feat = make([]int64, 0, n*deg), make([]int64, 0, n*deg), make([]float64, 0, n*dim)
	for v := 0; v < n; v++ {
		for k := 0; k < deg; k++ {
			src = append(src, int64(v))
			dst = append(dst, rng.Int64N(int64(n)))
		}
		for k := 0; k < dim; k++ {
			feat = append(feat, float64(float32(rng.NormFloat64())))
		}
	}
	labels := make([]int64, n)
	for v := range labels {
		labels[v] = rng.Int64N(40)
	}
	for i, s := range SplitNames {
		var sb strings.Builder
		for v := i; v < n; v += 3 {
			fmt.Fprintf(&sb, "%d\n", v)
		}
		impWriteGz(b, filepath.Join(dir, "split", "s", s+".csv.gz"), sb.String())
	}
	if layout == "npz" {
		var lab []float64
		for _, y := range labels {
			lab = append(lab, float64(y))
		}
		impWriteNPZ(b, filepath.Join(dir, "raw", "data.npz"), false,
			impMember{"edge_index", impNPY("<i8", []int64{2, int64(len(src))}, impI64(append(src, dst...)...))},
			impMember{"node_feat", impNPY("<f4", []int64{int64(n), int64(dim)}, impF32(feat...))})
		impWriteNPZ(b, filepath.Join(dir, "raw", "node-label.npz"), false,
			impMember{"node_label", impNPY("<f8", []int64{int64(n), 1}, impF64(lab...))})
	} else {
		var sb strings.Builder
		for i := range src {
			fmt.Fprintf(&sb, "%d,%d\n", src[i], dst[i])
		}
		impWriteGz(b, filepath.Join(dir, "raw", "edge.csv.gz"), sb.String())
		sb.Reset()
		for v := 0; v < n; v++ {
			for k := 0; k < dim; k++ {
				if k > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(strconv.FormatFloat(feat[v*dim+k], 'f', 6, 32))
			}
			sb.WriteByte('\n')
		}
		impWriteGz(b, filepath.Join(dir, "raw", "node-feat.csv.gz"), sb.String())
		sb.Reset()
		for _, y := range labels {
			fmt.Fprintf(&sb, "%d\n", y)
		}
		impWriteGz(b, filepath.Join(dir, "raw", "node-label.csv.gz"), sb.String())
		impWriteGz(b, filepath.Join(dir, "raw", "num-node-list.csv.gz"), fmt.Sprintf("%d\n", n))
		impWriteGz(b, filepath.Join(dir, "raw", "num-edge-list.csv.gz"), fmt.Sprintf("%d\n", len(src)))
	}
	var total int64
	filepath.WalkDir(filepath.Join(dir, "raw"), func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if fi, err := de.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}

// BenchmarkImportOGBCSV imports a generated csv.gz OGB dataset (100 K nodes,
// 10 edges each, 100 features: about 60 MB of text, 25 MB gzipped). MB/s
// counts the compressed input; text-MB/s the inflated text.
func BenchmarkImportOGBCSV(b *testing.B) {
	dir := b.TempDir()
	size := impGenOGB(b, dir, "csv", 100_000, 10, 100)
	var text int64
	for _, f := range []string{"edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz"} {
		text += int64(len(impReadGz(b, filepath.Join(dir, "raw", f))))
	}
	impBenchLoop(b, size, func() error { _, err := ImportOGB(dir, ImportOptions{}); return err })
	b.ReportMetric(float64(text)*float64(b.N)/b.Elapsed().Seconds()/1e6, "text-MB/s")
}

// BenchmarkImportOGBNPZ imports a generated npz-layout dataset (200 K
// nodes, 10 edges each, 64 float32 features: about 83 MB).
func BenchmarkImportOGBNPZ(b *testing.B) {
	dir := b.TempDir()
	size := impGenOGB(b, dir, "npz", 200_000, 10, 64)
	impBenchLoop(b, size, func() error { _, err := ImportOGB(dir, ImportOptions{}); return err })
}

// BenchmarkImportNPZ imports a generated gnn-benchmark .npz (200 K nodes, 10
// edges each, 200 sparse features with 20 nonzeros per node): about 40 MB.
func BenchmarkImportNPZ(b *testing.B) {
	const n, deg, dim, nnz = 200_000, 10, 200, 20
	rng := rand.New(rand.NewPCG(3, 4))
	var indptr, idx, aptr, aidx []int64
	var adata []float64
	indptr, aptr = append(indptr, 0), append(aptr, 0)
	labels := make([]byte, n)
	for v := 0; v < n; v++ {
		for k := 0; k < deg; k++ {
			idx = append(idx, rng.Int64N(n))
		}
		for k := 0; k < nnz; k++ {
			aidx = append(aidx, int64(k*dim/nnz)+rng.Int64N(dim/nnz))
			adata = append(adata, 1)
		}
		indptr, aptr = append(indptr, int64(len(idx))), append(aptr, int64(len(aidx)))
		labels[v] = byte(rng.IntN(7))
	}
	path := filepath.Join(b.TempDir(), "gen.npz")
	impWriteNPZ(b, path, false,
		impMember{"adj_data", impNPY("<f4", []int64{int64(len(idx))}, impF32(make([]float64, len(idx))...))},
		impMember{"adj_indices", impNPY("<i4", []int64{int64(len(idx))}, impI32(idx...))},
		impMember{"adj_indptr", impNPY("<i4", []int64{n + 1}, impI32(indptr...))},
		impMember{"adj_shape", impNPY("<i8", []int64{2}, impI64(n, n))},
		impMember{"attr_data", impNPY("<f4", []int64{int64(len(aidx))}, impF32(adata...))},
		impMember{"attr_indices", impNPY("<i4", []int64{int64(len(aidx))}, impI32(aidx...))},
		impMember{"attr_indptr", impNPY("<i4", []int64{n + 1}, impI32(aptr...))},
		impMember{"attr_shape", impNPY("<i8", []int64{2}, impI64(n, dim))},
		impMember{"labels", impNPY("|i1", []int64{n}, labels)})
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	impBenchLoop(b, fi.Size(), func() error { _, err := ImportNPZ(path, ImportOptions{}); return err })
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
		if fb, lines, pe := parseFeatures(b); pe == nil && int64(len(fb.b)) != 4*lines*int64(fb.dim) {
			t.Fatalf("features: %d bytes for %d lines of %d", len(fb.b), lines, fb.dim)
		}
	})
}
