package datasets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// writtenDigest hashes every file of the dataset written from d, in name
// order, manifest included.
func writtenDigest(t *testing.T, d *Data) uint64 {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := xxhash.New()
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		h.WriteString(e.Name())
		h.Write(b)
	}
	return h.Sum64()
}

// TestWriteBytesUnchanged pins the bytes Write produces for datasets that use
// none of the optional parts (edge features, link splits, times, node
// types): the digests were taken with the writer of before they existed.
func TestWriteBytesUnchanged(t *testing.T) {
	for _, c := range []struct {
		dt   DType
		want uint64
	}{{Float32, 0x7034b025995c1e20}, {Float16, 0x371cfca252af58ea}, {BFloat16, 0x19ea8d6f60a0be15}} {
		d := smallData(t, 50, c.dt, 7, 3)
		d.Source = "golden"
		if got := writtenDigest(t, d); got != c.want {
			t.Errorf("%s: digest %#x, want %#x", c.dt, got, c.want)
		}
	}
}
