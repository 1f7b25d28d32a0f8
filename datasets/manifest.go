package datasets

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ManifestName is the name of the manifest file inside a dataset directory.
const ManifestName = "manifest.json"

// FormatName identifies a gnnloader dataset manifest.
const FormatName = "gnnloader-dataset"

// Manifest describes a dataset directory: its facts and every data file with
// its size and checksum. It is stored as manifest.json.
type Manifest struct {
	Format        string           `json:"format"`
	FormatVersion int              `json:"format_version"`
	Name          string           `json:"name"`
	NumNodes      int64            `json:"num_nodes"`
	NumEdges      int64            `json:"num_edges"`
	FeatureDim    int              `json:"feature_dim"`
	FeatureDType  DType            `json:"feature_dtype"`
	NumClasses    int              `json:"num_classes"`
	ClassNames    []string         `json:"class_names,omitempty"`
	Directed      bool             `json:"directed"`
	Splits        map[string]int64 `json:"splits"`
	Source        string           `json:"source,omitempty"`
	Files         []FileEntry      `json:"files"`
}

// FileEntry is one data file of a dataset.
type FileEntry struct {
	Name     string   `json:"name"`
	Role     string   `json:"role"` // indptr, indices, features, labels, split:<name>
	Bytes    int64    `json:"bytes"`
	Checksum Checksum `json:"checksum"`
}

// File returns the entry with the given role, or nil.
func (m *Manifest) File(role string) *FileEntry {
	for i := range m.Files {
		if m.Files[i].Role == role {
			return &m.Files[i]
		}
	}
	return nil
}

// Data file roles and names.
const (
	roleIndptr   = "indptr"
	roleIndices  = "indices"
	roleFeatures = "features"
	roleLabels   = "labels"
	rolePrefixSp = "split:"
)

func fileNameFor(role string) string {
	if len(role) > len(rolePrefixSp) && role[:len(rolePrefixSp)] == rolePrefixSp {
		return "split_" + role[len(rolePrefixSp):] + ".arrow"
	}
	return role + ".arrow"
}

// ReadManifest reads and checks dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a valid manifest: %w", path, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

func (m *Manifest) check() error {
	if m.Format != FormatName {
		return fmt.Errorf("format is %q, want %q", m.Format, FormatName)
	}
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("format_version %d is not supported (this build reads %d)", m.FormatVersion, FormatVersion)
	}
	if m.NumNodes < 0 || m.NumEdges < 0 {
		return fmt.Errorf("negative num_nodes %d or num_edges %d", m.NumNodes, m.NumEdges)
	}
	if !m.FeatureDType.Valid() {
		return fmt.Errorf("unknown feature_dtype %q", m.FeatureDType)
	}
	if m.FeatureDim <= 0 || m.NumClasses <= 0 {
		return fmt.Errorf("feature_dim %d and num_classes %d must be positive", m.FeatureDim, m.NumClasses)
	}
	for name, n := range m.Splits {
		if !knownSplit(name) || n < 0 {
			return fmt.Errorf("bad split %q of size %d", name, n)
		}
	}
	for _, role := range []string{roleIndptr, roleIndices, roleFeatures, roleLabels} {
		if m.File(role) == nil {
			return fmt.Errorf("no file with role %q", role)
		}
	}
	for _, f := range m.Files {
		if f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." || f.Name == ManifestName {
			return fmt.Errorf("bad file name %q", f.Name)
		}
		if f.Bytes < 0 {
			return fmt.Errorf("%s: negative size", f.Name)
		}
		if err := f.Checksum.check(); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}
