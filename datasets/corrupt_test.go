package datasets

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
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
