package datasets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestManifestChecksum: Write puts the manifest's xxhash64 beside it, in
// xxhsum's format, and Open and Verify refuse a manifest that no longer
// matches it, even one that is valid JSON with plausible facts.
func TestManifestChecksum(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, smallData(t, 30, Float32, 4, 1), nil); err != nil {
		t.Fatal(err)
	}
	mb, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	sum, err := os.ReadFile(filepath.Join(dir, "manifest.json.xxh64"))
	if want := fmt.Sprintf("%016x  manifest.json\n", xxhash.Sum64(mb)); err != nil || string(sum) != want {
		t.Fatalf("checksum file %q (%v), want %q", sum, err, want)
	}
	for _, edit := range [][2]string{
		{`"name": "small"`, `"name": "smelt"`},
		{`"num_classes": 3`, `"num_classes": 4`},
		{`"directed": true`, `"directed": false`},
	} {
		changed := bytes.Replace(mb, []byte(edit[0]), []byte(edit[1]), 1)
		if bytes.Equal(changed, mb) {
			t.Fatalf("%s not in the manifest", edit[0])
		}
		os.WriteFile(filepath.Join(dir, "manifest.json"), changed, 0o644)
		ds, err := Open(dir, nil)
		if err == nil {
			ds.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "manifest.json: checksum mismatch") {
			t.Errorf("%s: Open got %v", edit[1], err)
		}
		if _, err := Verify(dir, 1, nil); err == nil || !strings.Contains(err.Error(), "manifest.json: checksum mismatch") {
			t.Errorf("%s: Verify got %v", edit[1], err)
		}
	}
}

// TestManifestWithoutChecksumOpens: a dataset written before manifests had
// checksums still opens and verifies, and says so in Manifest.Warnings.
func TestManifestWithoutChecksumOpens(t *testing.T) {
	d := smallData(t, 30, Float32, 4, 1)
	dir := filepath.Join(t.TempDir(), "ds")
	if err := Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ManifestSumName)); err != nil {
		t.Fatal(err)
	}
	ds, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	sameData(t, d, &ds.Data)
	if len(ds.Manifest.Warnings) != 1 || !strings.Contains(ds.Manifest.Warnings[0], "has no checksum") {
		t.Fatalf("warnings %q", ds.Manifest.Warnings)
	}
	m, err := Verify(dir, 1, nil)
	if err != nil || len(m.Warnings) != 1 {
		t.Fatalf("Verify: %v, warnings %q", err, m.Warnings)
	}
	if err := Write(filepath.Join(t.TempDir(), "x"), d, nil); err != nil {
		t.Fatal(err)
	}
}

// TestBadManifestChecksumFile: a checksum file that is not one line of 16
// hex digits and the manifest's name, or files too large to be a manifest
// or its checksum, are errors naming the file.
func TestBadManifestChecksumFile(t *testing.T) {
	for _, c := range []struct {
		name, content, want string
	}{
		{ManifestSumName, "deadbeef  manifest.json\n", ManifestSumName},
		{ManifestSumName, "zzzzzzzzzzzzzzzz  manifest.json\n", "not hex"},
		{ManifestSumName, "0123456789abcdef  other.json\n", ManifestSumName},
		{ManifestSumName, strings.Repeat("0", 5000), "larger than"},
		{ManifestName, strings.Repeat(" ", maxManifestBytes+1), "larger than"},
	} {
		dir := filepath.Join(t.TempDir(), "ds")
		if err := Write(dir, smallData(t, 10, Float32, 2, 1), nil); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, c.name), []byte(c.content), 0o644)
		if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %.40q: got %v", c.name, c.content, err)
		}
	}
}
