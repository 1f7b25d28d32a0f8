package main

// Tests of loaderd convert.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/internal/half"
)

// sameButFeatures fails unless every file of the dataset at a, features
// aside, is in b byte for byte (manifests aside: they name the new type).
func sameButFeatures(t *testing.T, a, b string) {
	t.Helper()
	m, err := datasets.ReadManifest(a)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range m.Files {
		if f.Role == "features" || strings.HasSuffix(f.Role, ":features") { // node:TYPE:features in a heterogeneous one
			continue
		}
		x, errA := os.ReadFile(filepath.Join(a, f.Name))
		y, errB := os.ReadFile(filepath.Join(b, f.Name))
		if errA != nil || errB != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: %d bytes in %s, %d in %s (%v, %v)", f.Name, len(x), a, len(y), b, errA, errB)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("%s: no file besides the features compared", a)
	}
	// The manifests say the same but for the features' type and files.
	facts := func(dir string) map[string]any {
		raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "files")
		delete(m, "feature_dtype")
		if types, ok := m["node_types"].([]any); ok {
			for _, nt := range types {
				delete(nt.(map[string]any), "feature_dtype")
			}
		}
		return m
	}
	if x, y := facts(a), facts(b); !reflect.DeepEqual(x, y) {
		t.Errorf("manifests differ beyond the features:\n%s: %v\n%s: %v", a, x, b, y)
	}
}

// checkFloat16Of fails unless the dataset at b holds a's float32 features
// as float16, each element the nearest, over as many edges.
func checkFloat16Of(t *testing.T, a, b string) {
	t.Helper()
	x, err := datasets.Open(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := datasets.Open(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if x.FeatureDType != datasets.Float32 || y.FeatureDType != datasets.Float16 || 2*len(y.Features) != len(x.Features) || y.Graph.NumEdges() != x.Graph.NumEdges() {
		t.Fatalf("%s: %s features, %d bytes, %d edges; %s: %s, %d bytes, %d edges", a, x.FeatureDType, len(x.Features), x.Graph.NumEdges(),
			b, y.FeatureDType, len(y.Features), y.Graph.NumEdges())
	}
	for i := 0; i < len(x.Features)/4; i++ {
		want := half.Float32ToFloat16(math.Float32frombits(binary.LittleEndian.Uint32(x.Features[4*i:])))
		if got := binary.LittleEndian.Uint16(y.Features[2*i:]); got != want {
			t.Fatalf("element %d: %#x, want %#x", i, got, want)
		}
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, errOut := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, errOut)
	}
	return stdout
}

// TestConvert: convert --dtype float16 writes Cora's features as float16
// (each element the nearest) and every other file as it was; the result
// verifies. Converting to the type the features have, or in place without
// --overwrite, is refused and writes nothing; with --overwrite it converts
// in place.
func TestConvert(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "cora"), filepath.Join(dir, "cora16")
	mustRun(t, "import", "npz", "../../testdata/cora.npz", "--out", src)
	orig := filepath.Join(dir, "orig")
	mustRun(t, "import", "npz", "../../testdata/cora.npz", "--out", orig)

	out := mustRun(t, "convert", src, "--dtype", "float16", "--out", dst)
	if !strings.Contains(out, "1433 x float16 features (were float32") {
		t.Errorf("convert printed %q", out)
	}
	mustRun(t, "verify", dst)
	checkFloat16Of(t, src, dst)
	sameButFeatures(t, src, dst)

	// Nothing to do, or no --overwrite: refused, nothing written.
	again := filepath.Join(dir, "again")
	if code, _, errOut := runCmd(t, "convert", dst, "--dtype", "float16", "--out", again); code != 1 || !strings.Contains(errOut, "float16 already") {
		t.Errorf("convert of float16 features to float16: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(again); !os.IsNotExist(err) {
		t.Errorf("a refused convert left %s (%v)", again, err)
	}
	if code, _, errOut := runCmd(t, "convert", src, "--dtype", "float16", "--out", src+"/."); code != 2 || !strings.Contains(errOut, "add --overwrite") {
		t.Errorf("convert in place without --overwrite: exit %d\n%s", code, errOut)
	}
	sameButFeatures(t, orig, src)
	checkFloat16Of(t, orig, dst) // src still float32: compared through orig, its twin

	// In place.
	mustRun(t, "convert", src, "--dtype", "float16", "--out", src, "--overwrite")
	mustRun(t, "verify", src)
	checkFloat16Of(t, orig, src)
	sameButFeatures(t, orig, src)
}

// TestConvertRefusals: features that are not floats, or float32 values past
// float16's range, are refused with the reason, and an in-place conversion
// that fails leaves the dataset as it was.
func TestConvertRefusals(t *testing.T) {
	dir := t.TempDir()
	ints := filepath.Join(dir, "ints")
	mustRun(t, "gen", "--like", "cora", "--scale", "0.2", "--dtype", "int32", "--out", ints)
	if code, _, errOut := runCmd(t, "convert", ints, "--dtype", "float16", "--out", filepath.Join(dir, "x")); code != 1 || !strings.Contains(errOut, "only float types convert") {
		t.Errorf("convert of int32 features: exit %d\n%s", code, errOut)
	}
	for _, args := range [][]string{
		{"convert", ints, "--out", filepath.Join(dir, "x")},                     // no --dtype
		{"convert", ints, "--dtype", "float16"},                                 // no --out
		{"convert", ints, "--dtype", "uint8", "--out", filepath.Join(dir, "x")}, // not a float type
		{"convert", "--dtype", "float16", "--out", filepath.Join(dir, "x")},     // no input
	} {
		if code, _, errOut := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut)
		}
	}

	// --out taken: refused before the input is read (this input does not
	// exist, so an error naming it would mean it was read first).
	if code, _, errOut := runCmd(t, "convert", filepath.Join(dir, "missing"), "--dtype", "float16", "--out", ints); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("convert onto an existing --out: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "import", "npz", filepath.Join(dir, "missing.npz"), "--out", ints); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("import onto an existing --out: exit %d\n%s", code, errOut)
	}
	notDataset := filepath.Join(dir, "home")
	os.Mkdir(notDataset, 0o755)
	os.WriteFile(filepath.Join(notDataset, "thesis.tex"), []byte("years of work"), 0o644)
	if code, _, errOut := runCmd(t, "convert", filepath.Join(dir, "missing"), "--dtype", "float16", "--out", notDataset, "--overwrite"); code != 1 || !strings.Contains(errOut, "refusing to overwrite") {
		t.Errorf("convert --overwrite onto a directory that is not a dataset: exit %d\n%s", code, errOut)
	}

	// A float32 value float16 cannot hold, converted in place: refused,
	// the dataset untouched.
	small := filepath.Join(dir, "small")
	mustRun(t, "gen", "--like", "cora", "--scale", "0.2", "--out", small)
	ds, err := datasets.Open(small, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := ds.Data
	d.Features = append([]byte(nil), ds.Features...)
	binary.LittleEndian.PutUint32(d.Features[4*7:], math.Float32bits(1e6))
	big := filepath.Join(dir, "big")
	err = datasets.Write(big, &d, nil)
	ds.Close() // after the write: d's other arrays are ds's memory
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(big, "manifest.json"))
	if code, _, errOut := runCmd(t, "convert", big, "--dtype", "float16", "--out", big, "--overwrite"); code != 1 || !strings.Contains(errOut, "past float16's range") {
		t.Errorf("convert of 1e6 to float16: exit %d\n%s", code, errOut)
	}
	after, _ := os.ReadFile(filepath.Join(big, "manifest.json"))
	if !bytes.Equal(before, after) {
		t.Error("a failed in-place convert changed the manifest")
	}
	mustRun(t, "verify", big)
	// bfloat16 keeps float32's range.
	mustRun(t, "convert", big, "--dtype", "bfloat16", "--out", big, "--overwrite")
	if m, err := datasets.ReadManifest(big); err != nil || m.FeatureDType != datasets.BFloat16 {
		t.Errorf("after convert to bfloat16: %v, %v", m, err)
	}
}

// TestConvertHetero: a heterogeneous dataset's node types' features are
// converted, each, and its edges are written as they were.
func TestConvertHetero(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "mag"), filepath.Join(dir, "mag16")
	mustRun(t, "gen", "--like", "mag", "--scale", "0.002", "--out", src)
	out := mustRun(t, "convert", src, "--dtype", "bfloat16", "--out", dst)
	if !strings.Contains(out, "node types as bfloat16") {
		t.Errorf("convert printed %q", out)
	}
	mustRun(t, "verify", dst)
	sameButFeatures(t, src, dst)
	a, err := datasets.Open(src, &datasets.OpenOptions{AllowHetero: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := datasets.Open(dst, &datasets.OpenOptions{AllowHetero: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	converted := 0
	for i, x := range a.Hetero.NodeTypes {
		y := b.Hetero.NodeTypes[i]
		if x.FeatureDim == 0 {
			continue
		}
		if y.FeatureDType != datasets.BFloat16 || 2*len(y.Features) != len(x.Features) {
			t.Errorf("node type %s: %s, %d bytes (was %s, %d)", x.Name, y.FeatureDType, len(y.Features), x.FeatureDType, len(x.Features))
			continue
		}
		for k := 0; k < len(x.Features)/4; k++ {
			want := half.Float32ToBFloat16(math.Float32frombits(binary.LittleEndian.Uint32(x.Features[4*k:])))
			if got := binary.LittleEndian.Uint16(y.Features[2*k:]); got != want {
				t.Fatalf("node type %s element %d: %#x, want %#x", x.Name, k, got, want)
			}
		}
		converted++
	}
	if converted == 0 {
		t.Fatal("no node type with features in the generated mag")
	}
	if code, _, errOut := runCmd(t, "convert", dst, "--dtype", "bfloat16", "--out", filepath.Join(dir, "x")); code != 1 || !strings.Contains(errOut, "bfloat16 already") {
		t.Errorf("convert of bfloat16 mag to bfloat16: exit %d\n%s", code, errOut)
	}
}

// TestConvertKeepsEverythingElse: a dataset with edge attributes and
// weights, node and edge times and link splits (gen --like citation2)
// keeps all of them, its manifest's facts and every file but the features.
func TestConvertKeepsEverythingElse(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "c2"), filepath.Join(dir, "c2-16")
	mustRun(t, "gen", "--like", "citation2", "--scale", "0.0005", "--edge-dim", "3", "--edge-weights", "--time", "--out", src)
	m, err := datasets.ReadManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"edge_attr", "edge_weight", "edge_time", "node_time"} {
		if m.File(role) == nil {
			t.Fatalf("gen --like citation2 wrote no %s", role)
		}
	}
	if len(m.LinkSplits) == 0 {
		t.Fatal("gen --like citation2 wrote no link splits")
	}
	mustRun(t, "convert", src, "--dtype", "float16", "--out", dst)
	mustRun(t, "verify", dst)
	sameButFeatures(t, src, dst)
	checkFloat16Of(t, src, dst)
}

// TestConvertHostileInput: a dataset whose files were tampered with (a
// truncated feature file, a manifest claiming more nodes than the files
// hold, a feature_dim past what the bytes make, garbage in place of the
// Arrow file, a feature file of terabytes) is refused with the reason,
// exit 1, no panic, and nothing written at --out, even with --overwrite
// onto the input itself.
func TestConvertHostileInput(t *testing.T) {
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean")
	mustRun(t, "gen", "--like", "cora", "--scale", "0.2", "--seed", "5", "--out", clean)
	copyDir := func(name string) string {
		d := filepath.Join(dir, name)
		os.Mkdir(d, 0o755)
		entries, _ := os.ReadDir(clean)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(clean, e.Name()))
			os.WriteFile(filepath.Join(d, e.Name()), b, 0o644)
		}
		return d
	}
	editManifest := func(d, from, to string) {
		mf := filepath.Join(d, "manifest.json")
		b, _ := os.ReadFile(mf)
		if !bytes.Contains(b, []byte(from)) {
			t.Fatalf("manifest has no %q", from)
		}
		os.WriteFile(mf, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644)
		os.Remove(filepath.Join(d, "manifest.json.xxh64")) // an edited manifest with no checksum: the files' checks still hold
	}
	m, err := datasets.ReadManifest(clean)
	if err != nil {
		t.Fatal(err)
	}
	feat := m.File("features").Name
	cases := map[string]func(d string){
		"truncated features": func(d string) {
			p := filepath.Join(d, feat)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		},
		"garbage features": func(d string) {
			p := filepath.Join(d, feat)
			b, _ := os.ReadFile(p)
			for i := range b {
				b[i] = 0xff
			}
			os.WriteFile(p, b, 0o644)
		},
		"more nodes than the files hold": func(d string) {
			editManifest(d, `"num_nodes": `+strconv.FormatInt(m.NumNodes, 10), `"num_nodes": 1000000000000`)
		},
		"feature_dim past the bytes": func(d string) {
			editManifest(d, `"feature_dim": `+strconv.Itoa(m.FeatureDim), `"feature_dim": 2147483647`)
		},
		// More than any test machine's memory and swap: refused before it
		// is allocated or read (reading it would end in the OOM killer).
		"a feature file grown sparse to 4 TiB, the manifest to match": func(d string) {
			if err := os.Truncate(filepath.Join(d, feat), 1<<42); err != nil {
				t.Fatalf("growing %s sparse: %v", feat, err)
			}
			editManifest(d, fmt.Sprintf(`"role": "features",
      "bytes": %d`, m.File("features").Bytes), `"role": "features",
      "bytes": 4398046511104`)
		},
	}
	for name, spoil := range cases {
		d := copyDir(strings.ReplaceAll(name, " ", "-"))
		spoil(d)
		before, _ := os.ReadFile(filepath.Join(d, "manifest.json"))
		out := filepath.Join(dir, "out-"+filepath.Base(d))
		for _, args := range [][]string{
			{"convert", d, "--dtype", "float16", "--out", out},
			{"convert", d, "--dtype", "float16", "--out", d, "--overwrite"},
		} {
			code, stdout, errOut := runCmd(t, args...)
			if code != 1 || strings.Contains(errOut, "panic") || stdout != "" {
				t.Errorf("%s: %v: exit %d, want 1 with an error\n%s%s", name, args, code, stdout, errOut)
			}
			if strings.Contains(name, "sparse") && !strings.Contains(errOut, "more than this machine's memory and swap") {
				t.Errorf("%s: refused for another reason than its size:\n%s", name, errOut)
			}
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a refused convert left %s (%v)", name, out, err)
		}
		if after, _ := os.ReadFile(filepath.Join(d, "manifest.json")); !bytes.Equal(before, after) {
			t.Errorf("%s: a refused in-place convert changed the input's manifest", name)
		}
	}
}
