package datasets

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestOpenedDatasetSurvivesFileChanges: once open, a dataset does not
// depend on its files. Truncating every file, then rewriting each in place
// as cp does (O_TRUNC, new bytes of the old size), then reading every array
// must neither crash (a shared mapping of a truncated file raises SIGBUS)
// nor show different data.
func TestOpenedDatasetSurvivesFileChanges(t *testing.T) {
	for _, skip := range []bool{false, true} {
		d := smallData(t, 3000, Float32, 64, 9) // features.arrow spans several pages
		dir := filepath.Join(t.TempDir(), "ds")
		if err := Write(dir, d, nil); err != nil {
			t.Fatal(err)
		}
		ds, err := Open(dir, &OpenOptions{SkipChecksums: skip})
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		sizes := map[string]int64{}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			st, _ := os.Stat(p)
			sizes[p] = st.Size()
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}
		sameData(t, d, &ds.Data)
		for p, size := range sizes {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(bytes.Repeat([]byte{0x5a}, int(size))); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		sameData(t, d, &ds.Data)
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenNoFeatures: the graph, labels and splits without the features.
func TestOpenNoFeatures(t *testing.T) {
	d := smallData(t, 50, Float32, 8, 3)
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	// A features file that would not open must not matter.
	os.WriteFile(filepath.Join(dir, "features.arrow"), []byte("not arrow"), 0o644)
	ds, err := Open(dir, &OpenOptions{NoFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Features != nil || ds.Graph.NumEdges() != d.Graph.NumEdges() || len(ds.Labels) != 50 {
		t.Fatalf("got %d feature bytes, %d edges, %d labels", len(ds.Features), ds.Graph.NumEdges(), len(ds.Labels))
	}
}

// recordingAlloc is an AllocFeatures / FreeFeatures pair over anonymous
// memory that records every call. Open may call it from several goroutines
// at once (files are read in parallel), as it may pinned.Alloc.
type recordingAlloc struct {
	mu               sync.Mutex
	allocated, freed [][]byte
}

func (r *recordingAlloc) alloc(n int64) ([]byte, error) {
	b, err := allocAnon(n)
	r.mu.Lock()
	r.allocated = append(r.allocated, b)
	r.mu.Unlock()
	return b, err
}

func (r *recordingAlloc) free(b []byte) error {
	r.mu.Lock()
	r.freed = append(r.freed, b)
	r.mu.Unlock()
	return freeAnon(b)
}

// TestOpenAllocFeatures: features go into the caller's memory, rows on a
// FeatureAlign boundary; a failed Open gives the memory back, a successful
// one leaves it to the caller even after Close.
func TestOpenAllocFeatures(t *testing.T) {
	d := smallData(t, 200, Float16, 6, 4)
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	rec := &recordingAlloc{}
	opts := &OpenOptions{AllocFeatures: rec.alloc, FreeFeatures: rec.free}
	ds, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	sameData(t, d, &ds.Data)
	if len(rec.allocated) != 1 {
		t.Fatalf("%d allocations", len(rec.allocated))
	}
	mem, p := rec.allocated[0], uintptrOf(&ds.Features[0])
	if p < uintptrOf(&mem[0]) || p+uintptr(len(ds.Features)) > uintptrOf(&mem[0])+uintptr(len(mem)) || p%FeatureAlign != 0 {
		t.Fatalf("features at %#x, allocation at %#x+%d", p, uintptrOf(&mem[0]), len(mem))
	}
	feats := ds.Features
	ds.Close()
	if len(rec.freed) != 0 {
		t.Fatal("Close freed the caller's memory")
	}
	if !bytes.Equal(feats, d.Features) {
		t.Fatal("the caller's features changed after Close")
	}
	freeAnon(mem)

	// Labels are read after features: corrupt them and the features'
	// memory must be given back.
	m, _ := ReadManifest(dir)
	p2 := filepath.Join(dir, m.File(roleLabels).Name)
	b, _ := os.ReadFile(p2)
	b[len(b)/2] ^= 1
	os.WriteFile(p2, b, 0o644)
	rec.allocated = nil
	if _, err = Open(dir, opts); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("got %v", err)
	}
	if len(rec.allocated) != 1 || len(rec.freed) != 1 || &rec.freed[0][0] != &rec.allocated[0][0] {
		t.Fatalf("%d allocated, %d freed", len(rec.allocated), len(rec.freed))
	}
	if _, err := Open(dir, &OpenOptions{AllocFeatures: opts.AllocFeatures}); err == nil {
		t.Fatal("AllocFeatures without FreeFeatures accepted")
	}
}

// TestReadNoticesAFileThatShrinks: a file shorter than the bytes asked for
// (it shrank after its size was checked) is an error, not zeros.
func TestReadNoticesAFileThatShrinks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, make([]byte, 100), 0o644)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = readChunks(f, p, make([]byte, 150), readOptions{size: 150, workers: 2})
	if err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("got %v", err)
	}
}

// TestVerifyAgreesWithOpen: Verify checks features.arrow without reading it
// into memory (hashed in pieces, structure checked on a sparse image), and
// must reach the verdict Open reaches for every single-byte change of it,
// with checksums fixed up so the change reaches the structure check.
func TestVerifyAgreesWithOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 6, BFloat16, 3, 8), nil); err != nil {
		t.Fatal(err)
	}
	m0, _ := ReadManifest(dir)
	if _, err := Verify(dir, 2, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, m0.File(roleFeatures).Name)
	orig, _ := os.ReadFile(path)
	disagree := 0
	for pos := range orig {
		b := append([]byte(nil), orig...)
		b[pos] ^= 0xa5
		m := *m0
		m.Files = append([]FileEntry(nil), m0.Files...)
		replaceFile(t, dir, &m, m.File(roleFeatures).Name, b)
		ds, errOpen := openNoPanic(t, dir, nil)
		if errOpen == nil {
			ds.Close()
		}
		_, errVerify := Verify(dir, 2, nil)
		if (errOpen == nil) != (errVerify == nil) {
			disagree++
			t.Errorf("byte %d: Open says %v, Verify says %v", pos, errOpen, errVerify)
		} else if errVerify != nil && !strings.Contains(errVerify.Error(), "features.arrow") {
			t.Errorf("byte %d: Verify's error does not name the file: %v", pos, errVerify)
		}
	}
	replaceFile(t, dir, m0, m0.File(roleFeatures).Name, orig)
	// And a stale checksum is caught.
	b := append([]byte(nil), orig...)
	b[len(b)/2] ^= 1
	os.WriteFile(path, b, 0o644)
	if _, err := Verify(dir, 2, nil); err == nil || !strings.Contains(err.Error(), "features.arrow: checksum mismatch") {
		t.Fatalf("got %v", err)
	}
}
