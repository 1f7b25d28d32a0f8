package datasets

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// smallData builds a random valid dataset of n nodes (t may be nil).
func smallData(t testing.TB, n int, dt DType, dim int, seed uint64) *Data {
	if t != nil {
		t.Helper()
	}
	r := rand.New(rand.NewPCG(seed, 1))
	g := Graph{NumNodes: int64(n), Indptr: make([]int64, n+1)}
	for v := 0; v < n; v++ {
		deg := r.IntN(6)
		for k := 0; k < deg; k++ {
			g.Indices32 = append(g.Indices32, int32(r.IntN(n)))
		}
		g.Indptr[v+1] = int64(len(g.Indices32))
	}
	if g.Indices32 == nil {
		g.Indices32 = []int32{}
	}
	d := &Data{
		Name: "small", Graph: g, Directed: true, FeatureDim: dim, FeatureDType: dt,
		NumClasses: 3, Labels: make([]int32, n),
		Splits: map[string][]int64{SplitTrain: {0, 1}, SplitValid: {2}, SplitTest: {}},
	}
	d.Features = make([]byte, n*dim*dt.Size())
	for i := range d.Features {
		d.Features[i] = byte(r.Uint32())
		if dt == Bool {
			d.Features[i] &= 1
		}
	}
	for i := range d.Labels {
		d.Labels[i] = int32(r.IntN(4)) - 1
	}
	return d
}

// writeAndOpen writes d into a temporary directory and opens it again; the
// dataset is closed when the test ends.
func writeAndOpen(t *testing.T, d *Data) *Dataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	ds, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

// sameData compares two datasets fact by fact and array by array.
func sameData(t *testing.T, want, got *Data) {
	t.Helper()
	if got.Name != want.Name || got.Directed != want.Directed || got.FeatureDim != want.FeatureDim ||
		got.FeatureDType != want.FeatureDType || got.NumClasses != want.NumClasses {
		t.Fatalf("facts differ: got %+v", got)
	}
	if got.Graph.NumNodes != want.Graph.NumNodes || !slices.Equal(got.Graph.Indptr, want.Graph.Indptr) ||
		!slices.Equal(got.Graph.Indices32, want.Graph.Indices32) || !slices.Equal(got.Graph.Indices64, want.Graph.Indices64) {
		t.Fatal("graphs differ")
	}
	if !bytes.Equal(got.Features, want.Features) {
		t.Fatal("features differ")
	}
	if !slices.Equal(got.Labels, want.Labels) {
		t.Fatal("labels differ")
	}
	if want.ClassNames != nil && !slices.Equal(got.ClassNames, want.ClassNames) {
		t.Fatalf("class names %q, want %q", got.ClassNames, want.ClassNames)
	}
	for _, sp := range SplitNames {
		if !slices.Equal(got.Splits[sp], want.Splits[sp]) {
			t.Fatalf("split %s differs: %v vs %v", sp, got.Splits[sp], want.Splits[sp])
		}
	}
}

func TestWriteOpenRoundTrip(t *testing.T) {
	for _, dt := range DTypes {
		t.Run(string(dt), func(t *testing.T) {
			d := smallData(t, 50, dt, 7, 3)
			ds := writeAndOpen(t, d)
			dir := ds.Dir
			sameData(t, d, &ds.Data)
			if ds.Manifest.NumNodes != 50 || ds.Manifest.FeatureDim != 7 || ds.Manifest.Splits[SplitTrain] != 2 {
				t.Fatalf("manifest facts: %+v", ds.Manifest)
			}
			// No temporary directories are left beside the dataset.
			entries, _ := os.ReadDir(filepath.Dir(dir))
			if len(entries) != 1 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
}

func TestOpenReadsEachFileOnce(t *testing.T) {
	ds := writeAndOpen(t, smallData(t, 64, Float32, 16, 1))
	// The features must lie inside the memory features.arrow was read
	// into (not a copy of it), with the rows on a FeatureAlign boundary.
	inside := false
	for _, im := range ds.images {
		lo := &im.data[0]
		hi := &im.data[len(im.data)-1]
		p := &ds.Features[0]
		if uintptrOf(p) >= uintptrOf(lo) && uintptrOf(p) <= uintptrOf(hi) {
			inside = true
		}
	}
	if !inside {
		t.Fatal("features were copied after reading")
	}
	if uintptrOf(&ds.Features[0])%FeatureAlign != 0 {
		t.Fatalf("feature rows at %#x, not on a %d-byte boundary", uintptrOf(&ds.Features[0]), FeatureAlign)
	}
}

func TestWriteRefusesExistingAndInvalid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	d := smallData(t, 10, Float32, 2, 1)
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, d, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second write: %v", err)
	}
	if err := Write(dir, d, &WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	bad := smallData(t, 10, Float32, 2, 1)
	bad.Labels[3] = 9
	out := filepath.Join(t.TempDir(), "bad")
	if err := Write(out, bad, nil); err == nil || !strings.Contains(err.Error(), "label 9") {
		t.Fatalf("invalid data: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("invalid data left a directory")
	}
}

func TestWriteCancelledLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := WriteContext(ctx, filepath.Join(parent, "ds"), smallData(t, 10, Float32, 2, 1), nil)
	if err == nil {
		t.Fatal("cancelled write succeeded")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestWriteRemovesStaleTemp(t *testing.T) {
	parent := t.TempDir()
	// A temp dir of a killed writer (pid 2^22+1 is above Linux's pid_max default).
	stale := filepath.Join(parent, ".ds.tmp-4194305")
	os.Mkdir(stale, 0o755)
	if err := Write(filepath.Join(parent, "ds"), smallData(t, 5, Float32, 2, 1), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("stale temporary directory kept")
	}
}

// corrupt writes a dataset and applies f to its directory.
func corrupt(t *testing.T, f func(dir string, m *Manifest)) error {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 40, Float32, 4, 2), nil); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	f(dir, m)
	ds, err := Open(dir, nil)
	if err == nil {
		ds.Close()
	}
	return err
}

// rewriteManifest writes m as dir's manifest with a matching checksum file,
// so that what is wrong with m reaches the check meant to catch it.
func rewriteManifest(t *testing.T, dir string, m *Manifest) {
	b, _ := json.Marshal(m)
	writeRawManifest(t, dir, b)
}

func writeRawManifest(t *testing.T, dir string, b []byte) {
	if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestSumName), manifestSum(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenBadInput(t *testing.T) {
	cases := []struct {
		name string
		f    func(t *testing.T, dir string, m *Manifest)
		want string
	}{
		{"flipped byte", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, "features.arrow")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}, "features.arrow: checksum mismatch"},
		{"truncated", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, "indices.arrow")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-10)
		}, "indices.arrow: truncated"},
		{"missing file", func(t *testing.T, dir string, m *Manifest) {
			os.Remove(filepath.Join(dir, "labels.arrow"))
		}, "labels.arrow: no such file"},
		{"missing manifest", func(t *testing.T, dir string, m *Manifest) {
			os.Remove(filepath.Join(dir, ManifestName))
		}, "manifest.json: no such file"},
		{"garbage manifest", func(t *testing.T, dir string, m *Manifest) {
			writeRawManifest(t, dir, []byte("{"))
		}, "not a valid manifest"},
		{"future version", func(t *testing.T, dir string, m *Manifest) {
			m.FormatVersion = 99
			rewriteManifest(t, dir, m)
		}, "format_version 99 is not supported"},
		{"wrong dtype in manifest", func(t *testing.T, dir string, m *Manifest) {
			m.FeatureDType = Float16
			rewriteManifest(t, dir, m)
		}, "features.arrow: column \"x\" has type"},
		{"wrong node count", func(t *testing.T, dir string, m *Manifest) {
			m.NumNodes = 41
			rewriteManifest(t, dir, m)
		}, "indptr.arrow: 41 rows, want 42"},
		{"path escape", func(t *testing.T, dir string, m *Manifest) {
			m.Files[0].Name = "../x"
			rewriteManifest(t, dir, m)
		}, "bad file name"},
		{"not arrow", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, "labels.arrow")
			b := bytes.Repeat([]byte{7}, int(m.File("labels").Bytes))
			os.WriteFile(p, b, 0o644)
			m.File("labels").Checksum = ComputeChecksum(b, DefaultChunkBytes, 1, nil)
			rewriteManifest(t, dir, m)
		}, "labels.arrow: not a readable Arrow IPC file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := corrupt(t, func(dir string, m *Manifest) { c.f(t, dir, m) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestOpenRejectsOutOfRangeIds(t *testing.T) {
	// A dataset whose files are consistent with its manifest but whose
	// contents are wrong (an edge to a node that does not exist) must not
	// open: write it by hand, bypassing Write's validation.
	d := smallData(t, 8, Float32, 2, 1)
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	m, _ := ReadManifest(dir)
	bad := append([]int32(nil), d.Graph.Indices32...)
	bad[0] = 8
	var buf bytes.Buffer
	if err := writeColumn(&buf, column{field: "indices", elem: int32Type, rows: int64(len(bad)), data: int32Bytes(bad)}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "indices.arrow"), buf.Bytes(), 0o644)
	e := m.File("indices")
	e.Bytes = int64(buf.Len())
	e.Checksum = ComputeChecksum(buf.Bytes(), DefaultChunkBytes, 1, nil)
	rewriteManifest(t, dir, m)
	_, err := Open(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "indices[0] = 8 out of range") {
		t.Fatalf("got %v", err)
	}
}

func TestChecksumDefinition(t *testing.T) {
	// Pins the tree definition documented on ChecksumAlgorithm: two chunks.
	b := []byte("abcdefgh")
	var inner [16]byte
	binary.LittleEndian.PutUint64(inner[0:], xxhash.Sum64(b[:4]))
	binary.LittleEndian.PutUint64(inner[8:], xxhash.Sum64(b[4:]))
	want := fmt.Sprintf("%016x", xxhash.Sum64(inner[:]))
	for _, w := range []int{1, 2, 8} {
		if got := ComputeChecksum(b, 4, w, nil); got.Value != want {
			t.Fatalf("workers %d: %s, want %s", w, got.Value, want)
		}
	}
	one := fmt.Sprintf("%016x", xxhash.Sum64(binary.LittleEndian.AppendUint64(nil, xxhash.Sum64(nil))))
	if got := ComputeChecksum(nil, 4, 1, nil); got.Value != one {
		t.Fatalf("empty file: %s, want %s", got.Value, one)
	}
}

func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }

// TestTreeHasherMatchesComputeChecksum: the checksum Write computes while
// writing, in pieces of any size, is the one Open computes in parallel.
func TestTreeHasherMatchesComputeChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const chunk = 64 << 10
	for _, n := range []int{0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk, 5*chunk + 12345} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		h := newTreeHasher(chunk)
		for rest := b; len(rest) > 0; {
			k := min(len(rest), 1+r.IntN(2*chunk))
			h.Write(rest[:k])
			rest = rest[k:]
		}
		if got, want := h.Checksum(), ComputeChecksum(b, chunk, 3, nil); got != want {
			t.Fatalf("%d bytes: %+v, want %+v", n, got, want)
		}
	}
}
