package datasets

// The OGB importers on malformed input: every bad file is a clear error
// naming the file and line, nothing written.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

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
		// A node count no file could hold must not size an allocation (it
		// overflowed into a negative capacity: a panic).
		{name: "absurd node count", mut: func(t *testing.T, dir string) string {
			impWriteGz(t, raw(dir, "num-node-list.csv.gz"), "9223372036854775806\n")
			return raw(dir, "node-feat.csv.gz")
		}, want: "50 rows, but num-node-list.csv.gz says 9223372036854775806 nodes"},
		{name: "huge node count", mut: func(t *testing.T, dir string) string {
			impWriteGz(t, raw(dir, "num-node-list.csv.gz"), "1000000000000\n")
			return raw(dir, "node-feat.csv.gz")
		}, want: "50 rows, but num-node-list.csv.gz says 1000000000000 nodes"},
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
		{name: "node_feat int truncated", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["node_feat"] = impNPY("<i4", []int64{n, 8}, impI32(make([]int64, n*4)...))
		}, want: "member node_feat.npy: truncated"},
		{name: "node_feat complex", file: "data.npz", mut: func(d, _ map[string][]byte) {
			d["node_feat"] = impNPY("<c8", []int64{n, 8}, make([]byte, n*8*8))
		}, want: `member node_feat.npy: bad .npy header "{'descr': '<c8', 'fortran_order': False, 'shape': (50, 8), }": unsupported dtype "<c8"`},
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
