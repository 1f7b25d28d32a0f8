package datasets

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
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
	// EdgeDim and EdgeDType describe edge_attr.arrow (0 and "": none).
	// The other optional arrays (edge_weight, edge_time, node_time) are
	// there when Files lists their role.
	EdgeDim   int   `json:"edge_dim,omitempty"`
	EdgeDType DType `json:"edge_dtype,omitempty"`
	// LinkSplits are the edge splits for link prediction (link.go).
	LinkSplits map[string]LinkSplitInfo `json:"link_splits,omitempty"`
	// NodeTypes and EdgeTypes describe a heterogeneous dataset
	// (format_version 2, hetero_io.go); the homogeneous fields then hold
	// totals only.
	NodeTypes []NodeTypeInfo `json:"node_types,omitempty"`
	EdgeTypes []EdgeTypeInfo `json:"edge_types,omitempty"`
	Files     []FileEntry    `json:"files"`

	// Warnings are what ReadManifest found worth telling a user that does
	// not stop the dataset from opening: a manifest without a checksum
	// (written by an older gnnloader). Not stored.
	Warnings []string `json:"-"`
}

// FileEntry is one data file of a dataset.
type FileEntry struct {
	Name     string   `json:"name"`
	Role     string   `json:"role"` // indptr, indices, features, labels, split:<name>, edge_attr, edge_weight, edge_time, node_time
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

	roleEdgeAttr   = "edge_attr"
	roleEdgeWeight = "edge_weight"
	roleEdgeTime   = "edge_time"
	roleNodeTime   = "node_time"
)

// optionalRoles are the roles of the optional single-array files.
var optionalRoles = []string{roleEdgeAttr, roleEdgeWeight, roleEdgeTime, roleNodeTime}

func fileNameFor(role string) string {
	if len(role) > len(rolePrefixSp) && role[:len(rolePrefixSp)] == rolePrefixSp {
		return "split_" + role[len(rolePrefixSp):] + ".arrow"
	}
	if split, part, ok := parseLinkRole(role); ok {
		return "link_" + split + "_" + part + ".arrow"
	}
	if strings.HasPrefix(role, "node:") || strings.HasPrefix(role, "edge:") {
		return strings.ReplaceAll(role, ":", "_") + ".arrow"
	}
	return role + ".arrow"
}

// ReadManifest reads and checks dir/manifest.json: its checksum first
// (ManifestSumName; a manifest without one is read with a warning in
// Warnings), then its facts.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	b, err := readBounded(path, maxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	warning, err := checkManifestSum(dir, b)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a valid manifest: %w", path, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if warning != "" {
		m.Warnings = append(m.Warnings, warning)
	}
	return &m, nil
}

func (m *Manifest) check() error {
	if m.Format != FormatName {
		return fmt.Errorf("format is %q, want %q", m.Format, FormatName)
	}
	if m.FormatVersion == FormatVersionHetero {
		return m.checkHetero()
	}
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("format_version %d is not supported (this build reads %d and %d)", m.FormatVersion, FormatVersion, FormatVersionHetero)
	}
	if len(m.NodeTypes) > 0 || len(m.EdgeTypes) > 0 {
		return fmt.Errorf("node_types or edge_types in a format_version %d manifest", m.FormatVersion)
	}
	if m.NumNodes < 0 || m.NumEdges < 0 {
		return fmt.Errorf("negative num_nodes %d or num_edges %d", m.NumNodes, m.NumEdges)
	}
	if !m.FeatureDType.Valid() {
		return fmt.Errorf("unknown feature_dtype %q", m.FeatureDType)
	}
	// Arrow list sizes and the protocol's fields are 32-bit.
	if m.FeatureDim <= 0 || m.FeatureDim > math.MaxInt32 {
		return fmt.Errorf("feature_dim %d is outside [1, %d]", m.FeatureDim, math.MaxInt32)
	}
	if m.NumClasses <= 0 || m.NumClasses > math.MaxInt32 {
		return fmt.Errorf("num_classes %d is outside [1, %d]", m.NumClasses, math.MaxInt32)
	}
	if m.ClassNames != nil && len(m.ClassNames) != m.NumClasses {
		return fmt.Errorf("class_names has %d names for num_classes %d", len(m.ClassNames), m.NumClasses)
	}
	for name, n := range m.Splits {
		if !knownSplit(name) || n < 0 {
			return fmt.Errorf("bad split %q of size %d", name, n)
		}
	}
	roles, names := map[string]bool{}, map[string]bool{}
	for _, f := range m.Files {
		if f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." || f.Name == ManifestName || f.Name == ManifestSumName {
			return fmt.Errorf("bad file name %q", f.Name)
		}
		if names[f.Name] {
			return fmt.Errorf("file %q is listed twice", f.Name)
		}
		names[f.Name] = true
		switch split, isSplit := strings.CutPrefix(f.Role, rolePrefixSp); {
		case roles[f.Role]:
			return fmt.Errorf("two files with role %q", f.Role)
		case isSplit:
			if _, ok := m.Splits[split]; !ok {
				return fmt.Errorf("%s: role %q names a split that splits does not list", f.Name, f.Role)
			}
		case strings.HasPrefix(f.Role, rolePrefixLink):
			if split, _, ok := parseLinkRole(f.Role); !ok {
				return fmt.Errorf("%s: unknown role %q", f.Name, f.Role)
			} else if _, ok := m.LinkSplits[split]; !ok {
				return fmt.Errorf("%s: role %q names a link split that link_splits does not list", f.Name, f.Role)
			}
		case f.Role != roleIndptr && f.Role != roleIndices && f.Role != roleFeatures && f.Role != roleLabels &&
			!slices.Contains(optionalRoles, f.Role):
			return fmt.Errorf("%s: unknown role %q", f.Name, f.Role)
		}
		roles[f.Role] = true
		if f.Bytes < 0 {
			return fmt.Errorf("%s: negative size", f.Name)
		}
		if err := f.Checksum.check(); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	for _, role := range []string{roleIndptr, roleIndices, roleFeatures, roleLabels} {
		if m.File(role) == nil {
			return fmt.Errorf("no file with role %q", role)
		}
	}
	switch hasAttr := m.File(roleEdgeAttr) != nil; {
	case m.EdgeDim < 0 || m.EdgeDim > math.MaxInt32:
		return fmt.Errorf("edge_dim %d is outside [0, %d]", m.EdgeDim, math.MaxInt32)
	case hasAttr != (m.EdgeDim > 0):
		return fmt.Errorf("edge_dim %d, and edge_attr file present: %v", m.EdgeDim, hasAttr)
	case hasAttr && !m.EdgeDType.Valid():
		return fmt.Errorf("unknown edge_dtype %q", m.EdgeDType)
	case !hasAttr && m.EdgeDType != "":
		return fmt.Errorf("edge_dtype %q without edge_attr", m.EdgeDType)
	}
	return m.checkSizes()
}

// checkSizes checks that every count fits the file that holds it: a file
// holds at least its values, so no count can ask for more memory than the
// files on disk justify (and no product of counts overflows).
func (m *Manifest) checkSizes() error {
	idxWidth := int64(4)
	if Wide(m.NumNodes) {
		idxWidth = 8
	}
	fit := func(field string, count int64, role string, width ...int64) error {
		f := m.File(role)
		need, ok := count, true
		for _, w := range width {
			need, ok = mulNonNeg(need, w)
			if !ok {
				break
			}
		}
		if !ok || need > f.Bytes {
			return fmt.Errorf("%s does not fit %s (%d bytes): it would need %s bytes", field, f.Name, f.Bytes, needString(need, ok))
		}
		return nil
	}
	if m.NumNodes == math.MaxInt64 {
		return fmt.Errorf("num_nodes %d is out of range", m.NumNodes)
	}
	checks := []error{
		fit(fmt.Sprintf("num_nodes %d", m.NumNodes), m.NumNodes+1, roleIndptr, 8),
		fit(fmt.Sprintf("num_edges %d", m.NumEdges), m.NumEdges, roleIndices, idxWidth),
		fit(fmt.Sprintf("num_nodes %d x feature_dim %d", m.NumNodes, m.FeatureDim), m.NumNodes, roleFeatures, int64(m.FeatureDim), int64(m.FeatureDType.Size())),
		fit(fmt.Sprintf("num_nodes %d", m.NumNodes), m.NumNodes, roleLabels, 4),
	}
	if m.File(roleEdgeAttr) != nil {
		checks = append(checks, fit(fmt.Sprintf("num_edges %d x edge_dim %d", m.NumEdges, m.EdgeDim), m.NumEdges, roleEdgeAttr, int64(m.EdgeDim), int64(m.EdgeDType.Size())))
	}
	if m.File(roleEdgeWeight) != nil {
		checks = append(checks, fit(fmt.Sprintf("num_edges %d", m.NumEdges), m.NumEdges, roleEdgeWeight, 4))
	}
	if m.File(roleEdgeTime) != nil {
		checks = append(checks, fit(fmt.Sprintf("num_edges %d", m.NumEdges), m.NumEdges, roleEdgeTime, 8))
	}
	if m.File(roleNodeTime) != nil {
		checks = append(checks, fit(fmt.Sprintf("num_nodes %d", m.NumNodes), m.NumNodes, roleNodeTime, 8))
	}
	if err := m.checkLinks(fit); err != nil {
		return err
	}
	for _, s := range SplitNames {
		n, ok := m.Splits[s]
		if !ok {
			continue
		}
		if m.File(rolePrefixSp+s) == nil {
			return fmt.Errorf("split %q has no file", s)
		}
		checks = append(checks, fit(fmt.Sprintf("split %s of %d nodes", s, n), n, rolePrefixSp+s, 8))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// mulNonNeg multiplies non-negative a and b, reporting overflow.
func mulNonNeg(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || (a != 0 && b > math.MaxInt64/a) {
		return 0, false
	}
	return a * b, true
}

func needString(n int64, ok bool) string {
	if !ok {
		return "more than 2^63"
	}
	return fmt.Sprint(n)
}
