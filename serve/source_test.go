package serve

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/pinned"
)

// writeDataset writes a small generated dataset directory for a test.
func writeDataset(t *testing.T) (string, *datasets.Data) {
	t.Helper()
	d, err := datasets.Generate(datasets.GenOptions{Like: "cora", Scale: 0.5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cora")
	if err := datasets.Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// TestPinnedSourceFromDirectory: on the GPU path a dataset directory's
// features.arrow is read straight into the pinned, registered table (no
// second copy: the source's features are the store's rows, LoadTime 0),
// shared through the table socket's memfd at the rows' offset, and served
// batch for batch like the CPU path.
func TestPinnedSourceFromDirectory(t *testing.T) {
	cudatest.Devices(t)
	dir, d := writeDataset(t)
	pinned.SetShared(true)
	src, err := OpenSourcePinned(dir, false, nil, nil)
	pinned.SetShared(false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st := src.store
	if &src.Data.Features[0] != &st.Rows[0] || st.LoadTime != 0 {
		t.Fatalf("the table was copied into the store (load time %s)", st.LoadTime)
	}
	if uintptr(unsafe.Pointer(&st.Rows[0]))%pinned.HugePage != 0 || st.DevicePtr%pinned.HugePage != 0 {
		t.Fatalf("rows at %p, device address %#x: not 2 MiB-aligned", &st.Rows[0], st.DevicePtr)
	}
	if !bytes.Equal(st.Rows, d.Features) {
		t.Fatal("the pinned table differs from the dataset's features")
	}
	fd, off, err := src.TableFD()
	if err != nil || off == 0 || off%pinned.HugePage != 0 {
		t.Fatalf("table fd %d at offset %d: %v", fd, off, err)
	}
	view, err := unix.Mmap(fd, off, len(d.Features), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(view)
	if !bytes.Equal(view, d.Features) {
		t.Fatal("the memfd at the reported offset is not the table")
	}

	_, n := compareWithCPU(t, dir, 3, GPUConfig{}, false)
	t.Logf("%d batches identical on both paths, served from a dataset directory", n)
}

// TestSyntheticSpec: a synthetic spec may name the feature type; the
// dataset is generated with it (half the bytes a row in float16), and a bad
// spec says what is wrong with it.
func TestSyntheticSpec(t *testing.T) {
	opts, err := ParseSynthetic("papers100M:0.5:7:float16")
	if err != nil || opts.Like != "papers100M" || opts.Scale != 0.5 || opts.Seed != 7 || opts.FeatureDType != datasets.Float16 {
		t.Fatalf("%+v %v", opts, err)
	}
	if opts, err = ParseSynthetic("cora"); err != nil || opts.Scale != 1 || opts.FeatureDType != "" {
		t.Fatalf("%+v %v", opts, err)
	}
	for spec, want := range map[string]string{
		"cora:1:2:float17":  "float17",
		"cora:1:2:float16:": "malformed",
		"cora:0":            "bad scale",
		"cora:1:x":          "bad seed",
		":1":                "malformed",
	} {
		if _, err := ParseSynthetic(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", spec, err, want)
		}
	}
	half, err := OpenSource("synthetic:cora:0.1:1:float16", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	full, err := OpenSource("synthetic:cora:0.1:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if half.Data.FeatureDType != datasets.Float16 || 2*half.Table.RowBytes != full.Table.RowBytes || half.Table.NumRows != full.Table.NumRows {
		t.Fatalf("float16: %s, %d-byte rows of %d; float32: %d-byte rows of %d", half.Data.FeatureDType,
			half.Table.RowBytes, half.Table.NumRows, full.Table.RowBytes, full.Table.NumRows)
	}
}
