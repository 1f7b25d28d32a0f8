package datasets

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// The dataset fuzz target. An input is a whole dataset directory in one
// byte string (fuzzFiles, each file as a uvarint length and its bytes; a
// length past the end takes the rest, a zero length or a missing one means
// no such file) and a mode.
// The fuzzer mutates any of it: the Arrow files' metadata and values, the
// manifest's JSON. Unless the mode says otherwise, the manifest's sizes and
// checksums, and the manifest's own checksum file, are then fixed up to
// match the mutated files, so a mutation reaches the parsers instead of
// stopping at a checksum. Open (or Verify) must not panic, not hang, and
// either fail or return a dataset whose invariants hold, checked here
// without the package's own validation.

var fuzzFiles = []string{ManifestName, "indptr.arrow", "indices.arrow", "features.arrow", "labels.arrow",
	"split_train.arrow", "split_valid.arrow", "split_test.arrow",
	"edge_attr.arrow", "edge_weight.arrow", "edge_time.arrow", "node_time.arrow",
	"link_train_src.arrow", "link_train_dst.arrow", "link_train_label.arrow", "link_train_time.arrow",
	"link_test_src.arrow", "link_test_dst.arrow", "link_test_neg_dst.arrow",
	"node_a_features.arrow", "node_a_labels.arrow", "node_a_split_train.arrow", "node_a_time.arrow", "node_b_features.arrow",
	"edge_b__r__a_indptr.arrow", "edge_b__r__a_indices.arrow", "edge_a__s__a_indptr.arrow", "edge_a__s__a_indices.arrow"}

// Mode bits of a fuzz input.
const (
	fuzzSkipChecksums = 1 << iota // open with SkipChecksums
	fuzzRawManifest               // do not fix the manifest's sizes and checksums up
	fuzzNoManifestSum             // no manifest checksum file (an older dataset)
	fuzzNoFeatures                // open with NoFeatures
	fuzzVerify                    // Verify instead of Open
	fuzzAllowHetero               // open with AllowHetero
)

func encodeFuzzDir(t testing.TB, dir string) []byte {
	var out []byte
	for _, name := range fuzzFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out
}

func decodeFuzzDir(in []byte) map[string][]byte {
	files := map[string][]byte{}
	for _, name := range fuzzFiles {
		n, k := binary.Uvarint(in)
		if k <= 0 {
			break
		}
		in = in[k:]
		n = min(n, uint64(len(in)))
		if n > 0 {
			files[name] = in[:n]
		}
		in = in[n:]
	}
	return files
}

// fixUp sets the size and checksum of every file the manifest lists to
// those of the files present, keeping the rest of the (mutated) manifest as
// it is, numbers included; a manifest that is not a JSON object stays as is.
func fixUp(files map[string][]byte) {
	dec := json.NewDecoder(bytes.NewReader(files[ManifestName]))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return
	}
	list, _ := m["files"].([]any)
	for _, e := range list {
		f, _ := e.(map[string]any)
		name, _ := f["name"].(string)
		b, ok := files[name]
		if f == nil || !ok {
			continue
		}
		chunk := int64(DefaultChunkBytes)
		if c, ok := f["checksum"].(map[string]any); ok {
			if n, ok := c["chunk_bytes"].(json.Number); ok {
				if v, err := n.Int64(); err == nil && v >= minChunkBytes && v <= maxChunkBytes {
					chunk = v
				}
			}
		}
		f["bytes"] = len(b)
		f["checksum"] = ComputeChecksum(b, chunk, 1, nil)
	}
	if b, err := json.Marshal(m); err == nil {
		files[ManifestName] = b
	}
}

func FuzzOpenDataset(f *testing.F) {
	for i, d := range fuzzSeedData() {
		dir := filepath.Join(f.TempDir(), fmt.Sprint(i))
		if err := Write(dir, d, nil); err != nil {
			f.Fatal(err)
		}
		f.Add(encodeFuzzDir(f, dir), uint8(0))
		f.Add(encodeFuzzDir(f, dir), uint8(fuzzSkipChecksums|fuzzNoManifestSum))
	}
	hdir := filepath.Join(f.TempDir(), "hetero")
	if err := WriteHetero(context.Background(), hdir, fuzzSeedHetero(), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(encodeFuzzDir(f, hdir), uint8(fuzzAllowHetero))
	f.Add(encodeFuzzDir(f, hdir), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, mode uint8) {
		files := decodeFuzzDir(in)
		if mode&fuzzRawManifest == 0 {
			fixUp(files)
		}
		dir := t.TempDir()
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if mb, ok := files[ManifestName]; ok && mode&fuzzNoManifestSum == 0 {
			if err := os.WriteFile(filepath.Join(dir, ManifestSumName), manifestSum(mb), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// A hang is a failure too: the inputs are a few KB.
		hung := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("opening a %d-byte dataset took 30 s", len(in))) })
		defer hung.Stop()
		if mode&fuzzVerify != 0 {
			if _, err := Verify(dir, 2, nil); err != nil && err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		ds, err := Open(dir, &OpenOptions{SkipChecksums: mode&fuzzSkipChecksums != 0, NoFeatures: mode&fuzzNoFeatures != 0, Workers: 2,
			AllowHetero: mode&fuzzAllowHetero != 0})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		defer ds.Close()
		if ds.Hetero != nil {
			if err := checkHeteroInvariants(ds.Hetero, ds.Manifest); err != nil {
				t.Fatalf("Open returned a heterogeneous dataset that is not valid: %v", err)
			}
			return
		}
		if err := checkInvariants(&ds.Data, ds.Manifest, mode&fuzzNoFeatures != 0); err != nil {
			t.Fatalf("Open returned a dataset that is not valid: %v", err)
		}
	})
}

// checkInvariants checks an opened dataset independently of validate, and
// reads every byte of it.
func checkInvariants(d *Data, m *Manifest, noFeatures bool) error {
	g := &d.Graph
	n := g.NumNodes
	if n != m.NumNodes || d.FeatureDim != m.FeatureDim || d.FeatureDType != m.FeatureDType || d.NumClasses != m.NumClasses {
		return fmt.Errorf("facts differ from the manifest")
	}
	if int64(len(g.Indptr)) != n+1 || g.Indptr[0] != 0 {
		return fmt.Errorf("indptr of %d entries for %d nodes", len(g.Indptr), n)
	}
	for i := int64(1); i <= n; i++ {
		if g.Indptr[i] < g.Indptr[i-1] {
			return fmt.Errorf("indptr decreases at %d", i)
		}
	}
	e := int64(len(g.Indices32)) + int64(len(g.Indices64))
	if g.Indptr[n] != e || e != m.NumEdges || (Wide(n) && g.Indices32 != nil) {
		return fmt.Errorf("indptr ends at %d, %d indices, manifest %d", g.Indptr[n], e, m.NumEdges)
	}
	for i := int64(0); i < e; i++ {
		if v := g.Neighbor(i); v < 0 || v >= n {
			return fmt.Errorf("index %d = %d", i, v)
		}
	}
	if int64(len(d.Labels)) != n {
		return fmt.Errorf("%d labels", len(d.Labels))
	}
	for _, y := range d.Labels {
		if y < -1 || int64(y) >= int64(d.NumClasses) {
			return fmt.Errorf("label %d", y)
		}
	}
	for s, ids := range d.Splits {
		if int64(len(ids)) != m.Splits[s] {
			return fmt.Errorf("split %s of %d, manifest %d", s, len(ids), m.Splits[s])
		}
		for _, v := range ids {
			if v < 0 || v >= n {
				return fmt.Errorf("split %s id %d", s, v)
			}
		}
	}
	e = g.NumEdges()
	if d.EdgeDim != m.EdgeDim || d.EdgeDType != m.EdgeDType {
		return fmt.Errorf("edge facts differ from the manifest")
	}
	if want, ok := mulNonNeg(e, int64(d.EdgeRowBytes())); !ok || int64(len(d.EdgeAttr)) != want {
		return fmt.Errorf("%d edge_attr bytes for %d edges of %d", len(d.EdgeAttr), e, d.EdgeRowBytes())
	}
	for _, c := range []struct {
		name      string
		got, want int
		present   bool
	}{
		{"edge_weight", len(d.EdgeWeight), int(e), m.File(roleEdgeWeight) != nil},
		{"edge_time", len(d.EdgeTime), int(e), m.File(roleEdgeTime) != nil},
		{"node_time", len(d.NodeTime), int(n), m.File(roleNodeTime) != nil},
	} {
		if c.present && c.got != c.want || !c.present && c.got != 0 {
			return fmt.Errorf("%s has %d entries, want %d (present %v)", c.name, c.got, c.want, c.present)
		}
	}
	for name, l := range d.LinkSplits {
		info, ok := m.LinkSplits[name]
		if !ok || int64(len(l.Src)) != info.NumEdges || len(l.Dst) != len(l.Src) || l.NumNeg != info.NumNeg ||
			len(l.NegDst) != len(l.Src)*l.NumNeg || l.Label != nil && len(l.Label) != len(l.Src) || l.Time != nil && len(l.Time) != len(l.Src) {
			return fmt.Errorf("link split %s does not match the manifest", name)
		}
		for _, ids := range [][]int64{l.Src, l.Dst, l.NegDst} {
			for _, v := range ids {
				if v < 0 || v >= n {
					return fmt.Errorf("link split %s: node %d out of range", name, v)
				}
			}
		}
	}
	if len(d.LinkSplits) != len(m.LinkSplits) {
		return fmt.Errorf("%d link splits, manifest %d", len(d.LinkSplits), len(m.LinkSplits))
	}
	if noFeatures {
		if d.Features != nil {
			return fmt.Errorf("features with NoFeatures")
		}
		return nil
	}
	if want, ok := mulNonNeg(n, int64(d.RowBytes())); !ok || int64(len(d.Features)) != want {
		return fmt.Errorf("%d feature bytes for %d rows of %d", len(d.Features), n, d.RowBytes())
	}
	if len(d.Features) > 0 && uintptr(unsafe.Pointer(&d.Features[0]))%FeatureAlign != 0 {
		return fmt.Errorf("feature rows not aligned")
	}
	var x byte
	for _, b := range d.Features {
		x ^= b
	}
	_ = x
	return nil
}

// fuzzSeedData are the valid datasets the fuzzer starts from.
func fuzzSeedData() []*Data {
	a := smallData(nil, 6, Float32, 2, 5)
	b := smallData(nil, 5, Float16, 3, 6)
	b.Splits = map[string][]int64{SplitTrain: {4}}
	c := smallData(nil, 4, BFloat16, 1, 7)
	c.ClassNames = []string{"x", "y", "z"}
	i64 := smallData(nil, 5, Int64, 2, 8)
	bl := smallData(nil, 4, Bool, 3, 9)
	e := withEdgeArrays(smallData(nil, 6, Float32, 2, 10), UInt8, 2)
	l := withLinkSplits(smallData(nil, 7, Float32, 1, 11))
	delete(l.LinkSplits, SplitValid)
	return []*Data{a, b, c, i64, bl, e, l}
}

var updateFuzzSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpus in testdata/fuzz/FuzzOpenDataset")

// fuzzRegressions are inputs that made Open panic or run out of memory
// before the Arrow structure check and the manifest bounds: a valid seed
// with one change, made by locating the field in the file.
var fuzzRegressions = []struct {
	name   string
	file   string
	mutate func(t testing.TB, b []byte) []byte
}{
	// A huge schema field count: arrow-go allocated it (fatal OOM).
	{"schema-fields-count", "labels.arrow", func(t testing.TB, b []byte) []byte {
		footer, start := fuzzFooter(t, b)
		schema, _, _ := footer.table(1)
		p, _, _ := schema.ref(1)
		binary.LittleEndian.PutUint32(b[start+p:], 0x7fffffff)
		return b
	}},
	// A huge length of the column's name: the flatbuffers runtime sliced
	// out of range.
	{"field-name-length", "indices.arrow", func(t testing.TB, b []byte) []byte {
		footer, start := fuzzFooter(t, b)
		schema, _, _ := footer.table(1)
		fields, _, _, _ := schema.vector(1, 4)
		field, _ := schema.vectorTable(fields, 0)
		p, _, _ := field.ref(0)
		binary.LittleEndian.PutUint32(b[start+p:], 0x7fffffff)
		return b
	}},
	// The record batch message's root table offset past its metadata:
	// arrow-go read the body length out of range.
	{"message-root", "features.arrow", func(t testing.TB, b []byte) []byte {
		footer, _ := fuzzFooter(t, b)
		at, _, _, _ := footer.vector(3, 24)
		off := int64(binary.LittleEndian.Uint64(footer.b[at:]))
		binary.LittleEndian.PutUint32(b[off+8:], 0x7ffffff0)
		return b
	}},
	// feature_dim 2^31: arrow-go panicked making the list type.
	{"feature-dim-2-31", ManifestName, func(t testing.TB, b []byte) []byte {
		return bytes.Replace(b, []byte(`"feature_dim": 2,`), []byte(`"feature_dim": 2147483648,`), 1)
	}},
}

func fuzzFooter(t testing.TB, b []byte) (fbTable, int64) {
	flen := int64(binary.LittleEndian.Uint32(b[len(b)-10:]))
	start := int64(len(b)) - 10 - flen
	footer, err := fbRoot(b[start : int64(len(b))-10])
	if err != nil {
		t.Fatal(err)
	}
	return footer, start
}

// TestFuzzSeedCorpus keeps testdata/fuzz/FuzzOpenDataset meaningful: the
// valid seeds open, the regressions are refused. With -update-fuzz-seeds it
// writes them anew (after a change of the file format or of arrow-go).
func TestFuzzSeedCorpus(t *testing.T) {
	corpus := filepath.Join("testdata", "fuzz", "FuzzOpenDataset")
	seeds := map[string][]byte{}
	var valid []byte
	for i, d := range fuzzSeedData() {
		dir := filepath.Join(t.TempDir(), "ds")
		if err := Write(dir, d, nil); err != nil {
			t.Fatal(err)
		}
		seeds[fmt.Sprintf("valid-%d", i)] = encodeFuzzDir(t, dir)
		if i == 0 {
			valid = seeds["valid-0"]
		}
	}
	for _, r := range fuzzRegressions {
		files := decodeFuzzDir(valid)
		b := append([]byte(nil), files[r.file]...)
		files[r.file] = r.mutate(t, b)
		var enc []byte
		for _, name := range fuzzFiles {
			enc = binary.AppendUvarint(enc, uint64(len(files[name])))
			enc = append(enc, files[name]...)
		}
		seeds["regression-"+r.name] = enc
	}
	for name, enc := range seeds {
		path := filepath.Join(corpus, name)
		if *updateFuzzSeeds {
			os.MkdirAll(corpus, 0o755)
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint8(0)\n", enc)
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestFuzzSeedCorpus -update-fuzz-seeds ./datasets writes it)", err)
		}
		lines := strings.Split(string(content), "\n")
		stored, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		files := decodeFuzzDir([]byte(stored))
		fixUp(files)
		dir := t.TempDir()
		for n, b := range files {
			os.WriteFile(filepath.Join(dir, n), b, 0o644)
		}
		os.WriteFile(filepath.Join(dir, ManifestSumName), manifestSum(files[ManifestName]), 0o644)
		ds, err := openNoPanic(t, dir, nil)
		if err == nil {
			ds.Close()
		}
		if strings.HasPrefix(name, "valid") != (err == nil) {
			t.Errorf("seed %s: Open says %v", name, err)
		}
	}
}
