package datasets

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// openNoPanic opens dir and turns a panic into a test failure that says
// where, so one bad case does not hide the others.
func openNoPanic(t *testing.T, dir string, opts *OpenOptions) (ds *Dataset, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Open panicked: %v", p)
		}
	}()
	return Open(dir, opts)
}

// replaceFile writes b as dir/name and records its size and checksum in the
// manifest, so that what is wrong with b reaches the Arrow reader instead of
// being caught by the checksum.
func replaceFile(t *testing.T, dir string, m *Manifest, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range m.Files {
		if m.Files[i].Name == name {
			m.Files[i].Bytes = int64(len(b))
			m.Files[i].Checksum = ComputeChecksum(b, DefaultChunkBytes, 1, nil)
		}
	}
	rewriteManifest(t, dir, m)
}

// mutations writes a tiny dataset and, for every file and every change that
// change makes of the file's bytes, writes the changed file (fixing its size
// and checksum up in the manifest unless skip says to open with
// SkipChecksums and a stale checksum instead) and calls check with the
// result of Open. Open must never panic, never allocate more than a few MB
// (the dataset is a few KB), and fail with an error naming the file, or
// return a dataset whose invariants hold.
func mutations(t *testing.T, change func(orig []byte, yield func(b []byte, skip bool, what string))) (opened, refused int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 6, Float32, 2, 5), nil); err != nil {
		t.Fatal(err)
	}
	m0, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	for _, f := range m0.Files {
		path := filepath.Join(dir, f.Name)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		change(orig, func(b []byte, skip bool, what string) {
			if skip {
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				m := *m0
				m.Files = append([]FileEntry(nil), m0.Files...)
				replaceFile(t, dir, &m, f.Name, b)
			}
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			ds, err := openNoPanic(t, dir, &OpenOptions{SkipChecksums: skip, Workers: 1})
			runtime.ReadMemStats(&ms)
			if grew := ms.TotalAlloc - before; grew > 4<<20 {
				t.Errorf("%s %s: Open allocated %d bytes for a dataset of a few KB", f.Name, what, grew)
			}
			if err != nil {
				refused++
				if !strings.Contains(err.Error(), f.Name) {
					t.Errorf("%s %s: the error does not name the file: %v", f.Name, what, err)
				}
				return
			}
			opened++
			if err := ds.Data.Validate(); err != nil {
				t.Errorf("%s %s: opened a dataset that is not valid: %v", f.Name, what, err)
			}
			ds.Close()
		})
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		rewriteManifest(t, dir, m0)
	}
	return opened, refused
}

// TestOpenSurvivesMetadataMutations changes every byte of every Arrow file of
// a tiny dataset in turn, to a random other value. Half the cases fix the
// checksum up, half open with SkipChecksums.
func TestOpenSurvivesMetadataMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	opened, refused := mutations(t, func(orig []byte, yield func([]byte, bool, string)) {
		for pos := range orig {
			b := append([]byte(nil), orig...)
			b[pos] ^= byte(1 + r.IntN(255))
			yield(b, pos%2 == 1, fmt.Sprintf("byte %d", pos))
		}
	})
	t.Logf("%d mutations: %d refused, %d still valid", opened+refused, refused, opened)
}

// editManifest writes a dataset, applies edit to its manifest as a generic
// JSON object (so a value may be anything JSON allows) and opens it.
func editManifest(t *testing.T, edit func(m map[string]any)) error {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 20, Float32, 4, 2), nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	var typed Manifest
	b, _ = json.Marshal(m)
	if err := json.Unmarshal(b, &typed); err != nil {
		// Not representable: write the raw edit.
		writeRawManifest(t, dir, b)
	} else {
		rewriteManifest(t, dir, &typed)
	}
	ds, err := openNoPanic(t, dir, nil)
	if err == nil {
		ds.Close()
	}
	return err
}

func fileOfRole(m map[string]any, role string) map[string]any {
	for _, f := range m["files"].([]any) {
		if f := f.(map[string]any); f["role"] == role {
			return f
		}
	}
	return nil
}

// TestOpenRejectsImpossibleManifests: manifest values that no file could
// back are refused by the manifest check, naming manifest.json and the
// field, before any Arrow reading (feature_dim 2^31 used to panic inside
// arrow-go with "invalid size").
func TestOpenRejectsImpossibleManifests(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"feature_dim 2^31", func(m map[string]any) { m["feature_dim"] = int64(1) << 31 }, "feature_dim"},
		{"feature_dim 2^40", func(m map[string]any) { m["feature_dim"] = int64(1) << 40 }, "feature_dim"},
		{"feature_dim beyond the file", func(m map[string]any) { m["feature_dim"] = 5000 }, "feature_dim"},
		{"num_nodes 2^62", func(m map[string]any) { m["num_nodes"] = int64(1) << 62 }, "num_nodes"},
		{"num_nodes max", func(m map[string]any) { m["num_nodes"] = int64(math.MaxInt64) }, "num_nodes"},
		{"num_nodes beyond the file", func(m map[string]any) { m["num_nodes"] = 100000 }, "num_nodes"},
		{"num_edges max", func(m map[string]any) { m["num_edges"] = int64(math.MaxInt64) }, "num_edges"},
		{"num_edges beyond the file", func(m map[string]any) { m["num_edges"] = 1000000 }, "num_edges"},
		{"num_classes 2^31", func(m map[string]any) { m["num_classes"] = int64(1) << 31 }, "num_classes"},
		{"class names do not match", func(m map[string]any) { m["class_names"] = []string{"a"} }, "class_names"},
		{"split beyond the file", func(m map[string]any) { m["splits"].(map[string]any)["train"] = int64(1) << 40 }, "split"},
		{"duplicate role", func(m map[string]any) { fileOfRole(m, "labels")["role"] = "indptr" }, "role"},
		{"unknown role", func(m map[string]any) { fileOfRole(m, "labels")["role"] = "weights" }, "role"},
		{"split file with no split", func(m map[string]any) { delete(m["splits"].(map[string]any), "valid") }, "split"},
		{"chunk_bytes max", func(m map[string]any) {
			fileOfRole(m, "labels")["checksum"].(map[string]any)["chunk_bytes"] = int64(math.MaxInt64)
		}, "chunk_bytes"},
		{"negative file size", func(m map[string]any) { fileOfRole(m, "labels")["bytes"] = -1 }, "negative size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := editManifest(t, c.edit)
			if err == nil || !strings.Contains(err.Error(), ManifestName) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %s and %q", err, ManifestName, c.want)
			}
		})
	}
}

// TestOpenForgedArrowLengths sets every aligned word of every Arrow file to
// a huge value in turn, with checksums that match: the byte patterns that
// made arrow-go slice out of range or ask for hundreds of GB.
func TestOpenForgedArrowLengths(t *testing.T) {
	mutations(t, func(orig []byte, yield func([]byte, bool, string)) {
		for pos := 0; pos+8 <= len(orig); pos += 4 {
			for _, v := range []uint64{0x7fffffff, 1 << 40, math.MaxInt64} {
				b := append([]byte(nil), orig...)
				binary.LittleEndian.PutUint64(b[pos:], v)
				yield(b, false, fmt.Sprintf("word %d = %#x", pos, v))
			}
		}
	})
}

// TestArrowPanicBecomesError: a panic inside arrow-go, on a file that passed
// checkArrowFile, is an error naming the file, not a crash.
func TestArrowPanicBecomesError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 10, Float32, 2, 1), nil); err != nil {
		t.Fatal(err)
	}
	defer func(f func([]byte, ...ipc.Option) (*ipc.FileReader, error)) { newArrowReader = f }(newArrowReader)
	newArrowReader = func([]byte, ...ipc.Option) (*ipc.FileReader, error) { panic("flatbuffer out of range") }
	_, err := openNoPanic(t, dir, nil)
	if err == nil || !strings.Contains(err.Error(), ".arrow: the Arrow reader failed") || !strings.Contains(err.Error(), "flatbuffer out of range") {
		t.Fatalf("got %v", err)
	}
}

// TestOpenRefusesWhatMemoryCannotHold: a dataset whose files to be read
// into memory outgrow the machine's memory and swap (here made smaller
// than the dataset) is refused before any of it is allocated, homogeneous
// or heterogeneous; without its features (as verify streams them) it
// opens, and at the real machine's memory it opens whole.
func TestOpenRefusesWhatMemoryCannotHold(t *testing.T) {
	dir := t.TempDir()
	homo, hetero := filepath.Join(dir, "cora"), filepath.Join(dir, "mag")
	d, err := Generate(GenOptions{Like: "cora", Scale: 0.2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(homo, d, nil); err != nil {
		t.Fatal(err)
	}
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.002, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHetero(context.Background(), hetero, h, nil); err != nil {
		t.Fatal(err)
	}
	sizes := func(path string) (all, features int64) {
		m, err := ReadManifest(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			all += f.Bytes
			if f.Role == roleFeatures {
				features = f.Bytes
			}
		}
		return all, features
	}
	real := machineMemory
	t.Cleanup(func() { machineMemory = real })
	allocs := 0
	alloc := func(n int64) ([]byte, error) { allocs++; return make([]byte, n), nil }
	for _, path := range []string{homo, hetero} {
		all, _ := sizes(path)
		machineMemory = func() int64 { return all - 1 }
		ds, err := Open(path, &OpenOptions{AllowHetero: true, AllocFeatures: alloc, FreeFeatures: func([]byte) error { return nil }})
		if err == nil || !strings.Contains(err.Error(), "more than this machine's memory and swap") {
			ds.Close()
			t.Errorf("%s: opened past the machine's memory: %v", path, err)
		}
	}
	if allocs != 0 {
		t.Errorf("a refused Open allocated features %d times", allocs)
	}
	all, features := sizes(homo)
	machineMemory = func() int64 { return all - features } // everything but the features fits
	if ds, err := Open(homo, &OpenOptions{NoFeatures: true}); err != nil {
		t.Errorf("without its features the dataset fits: %v", err)
	} else {
		ds.Close()
	}
	machineMemory = real
	if real() <= 0 {
		t.Fatal("the machine's memory is unknown here: the check never refuses")
	}
	for _, path := range []string{homo, hetero} {
		ds, err := Open(path, &OpenOptions{AllowHetero: true})
		if err != nil {
			t.Errorf("%s at the machine's own memory: %v", path, err)
		}
		ds.Close()
	}
}
