package datasets

import (
	"fmt"
	"math"
	"sync"
)

// FormatVersion is the version of the on-disk layout written by this package.
const FormatVersion = 1

// DType is the element type of a fixed-width array: node features, edge
// features.
type DType string

// Element types. Float16 is IEEE binary16; BFloat16 is stored as uint16
// and Bool as uint8 (one byte per value, 0 or 1), both with field metadata
// naming the type (arrowio.go).
const (
	Float32  DType = "float32"
	Float16  DType = "float16"
	BFloat16 DType = "bfloat16"
	Float64  DType = "float64"
	Int64    DType = "int64"
	Int32    DType = "int32"
	UInt8    DType = "uint8"
	Bool     DType = "bool"
)

// DTypes lists every element type.
var DTypes = []DType{Float32, Float16, BFloat16, Float64, Int64, Int32, UInt8, Bool}

// Size is the size of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Float64, Int64:
		return 8
	case Float32, Int32:
		return 4
	case Float16, BFloat16:
		return 2
	case UInt8, Bool:
		return 1
	}
	return 0
}

// Valid reports whether d is one of the supported element types.
func (d DType) Valid() bool { return d.Size() != 0 }

// IsFloat reports whether d is a floating-point type (what a model takes
// as input as it is; the others are ids, counts or flags).
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float16 || d == BFloat16 || d == Float64
}

// ParseDType parses an element type name.
func ParseDType(s string) (DType, error) {
	d := DType(s)
	if !d.Valid() {
		return "", fmt.Errorf("unknown dtype %q (want float32, float16, bfloat16, float64, int64, int32, uint8 or bool)", s)
	}
	return d, nil
}

// Split names.
const (
	SplitTrain = "train"
	SplitValid = "valid"
	SplitTest  = "test"
)

// SplitNames lists the splits in their canonical order.
var SplitNames = []string{SplitTrain, SplitValid, SplitTest}

// Graph is a graph in CSR form: the neighbours of node v are
// Indices[Indptr[v]:Indptr[v+1]]. Exactly one of Indices32 and Indices64 is
// set: Indices32 while NumNodes < 2^31, Indices64 otherwise. Row v lists
// the nodes v aggregates from, its incoming neighbours: a sampled edge runs
// from the neighbour to v (see EdgeDirection for how importers fill rows).
//
// In a heterogeneous dataset a relation's Graph is bipartite: NumNodes rows,
// one per destination node, listing source ids in [0, NumSrcNodes). For a
// homogeneous graph NumSrcNodes is 0, meaning NumNodes; the index width
// follows the source count.
type Graph struct {
	NumNodes    int64
	NumSrcNodes int64
	Indptr      []int64
	Indices32   []int32
	Indices64   []int64
}

// SrcNodes is the number of nodes the indices point into: NumSrcNodes, or
// NumNodes when it is 0.
func (g *Graph) SrcNodes() int64 {
	if g.NumSrcNodes > 0 {
		return g.NumSrcNodes
	}
	return g.NumNodes
}

// NumEdges is the number of stored (directed) edges.
func (g *Graph) NumEdges() int64 {
	if len(g.Indptr) == 0 {
		return 0
	}
	return g.Indptr[len(g.Indptr)-1]
}

// Degree is the number of stored neighbours of v.
func (g *Graph) Degree(v int64) int64 { return g.Indptr[v+1] - g.Indptr[v] }

// MaxDegree is the largest row of the CSR (0 for a graph without nodes).
func (g *Graph) MaxDegree() int64 {
	var m int64
	for v := int64(0); v < g.NumNodes; v++ {
		m = max(m, g.Degree(v))
	}
	return m
}

// Neighbor returns the i-th entry of the indices array as an int64.
func (g *Graph) Neighbor(i int64) int64 {
	if g.Indices32 != nil {
		return int64(g.Indices32[i])
	}
	return g.Indices64[i]
}

// Wide reports whether node ids need 64 bits (NumNodes >= 2^31).
func Wide(numNodes int64) bool { return numNodes > math.MaxInt32 }

// Validate checks the CSR invariants: len(Indptr) == NumNodes+1, Indptr starts
// at 0 and never decreases, it ends at the number of indices, and every index
// lies in [0, NumNodes). It names the first offending position.
func (g *Graph) Validate() error { return g.validate(1) }

// validate is Validate with the O(edges) range check split over workers.
func (g *Graph) validate(workers int) error {
	if g.NumNodes < 0 || g.NumSrcNodes < 0 {
		return fmt.Errorf("graph: negative node count %d or source node count %d", g.NumNodes, g.NumSrcNodes)
	}
	if int64(len(g.Indptr)) != g.NumNodes+1 {
		return inArray(roleIndptr, fmt.Errorf("graph: indptr has %d entries, want num_nodes+1 = %d", len(g.Indptr), g.NumNodes+1))
	}
	if g.Indptr[0] != 0 {
		return inArray(roleIndptr, fmt.Errorf("graph: indptr[0] = %d, want 0", g.Indptr[0]))
	}
	for i := 1; i < len(g.Indptr); i++ {
		if g.Indptr[i] < g.Indptr[i-1] {
			return inArray(roleIndptr, fmt.Errorf("graph: indptr decreases at row %d (%d < %d)", i, g.Indptr[i], g.Indptr[i-1]))
		}
	}
	e := g.NumEdges()
	switch {
	case g.Indices32 != nil && g.Indices64 != nil:
		return fmt.Errorf("graph: both 32- and 64-bit indices set")
	case g.Indices32 != nil:
		if Wide(g.SrcNodes()) {
			return fmt.Errorf("graph: %d nodes need 64-bit indices", g.SrcNodes())
		}
		if int64(len(g.Indices32)) != e {
			return inArray(roleIndptr, fmt.Errorf("graph: indices has %d entries, indptr ends at %d", len(g.Indices32), e))
		}
	case g.Indices64 != nil:
		if int64(len(g.Indices64)) != e {
			return inArray(roleIndptr, fmt.Errorf("graph: indices has %d entries, indptr ends at %d", len(g.Indices64), e))
		}
	default:
		if e != 0 {
			return inArray(roleIndptr, fmt.Errorf("graph: indptr ends at %d but no indices", e))
		}
		return nil
	}
	// The range check, in parallel over chunks for graphs with billions of
	// edges; the first bad index of the lowest chunk is reported.
	src := g.SrcNodes()
	chunks := min(int64(workers), max(e>>22, 1))
	errs := make([]error, chunks)
	var wg sync.WaitGroup
	for c := int64(0); c < chunks; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c * e / chunks; i < (c+1)*e/chunks; i++ {
				if v := g.Neighbor(i); v < 0 || v >= src {
					errs[c] = inArray(roleIndices, fmt.Errorf("graph: indices[%d] = %d out of range [0, %d)", i, v, src))
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Data is a whole dataset in memory: what the generators and importers
// produce and what Write stores. Features holds NumNodes rows of
// FeatureDim elements of FeatureDType, row-major, little-endian.
type Data struct {
	Name         string
	Graph        Graph
	Directed     bool
	FeatureDim   int
	FeatureDType DType
	Features     []byte
	NumClasses   int
	ClassNames   []string // optional; len == NumClasses when set
	Labels       []int32  // one per node; -1 = unlabelled
	Splits       map[string][]int64
	Source       string // provenance, e.g. "gen --like products --scale 0.01 --seed 1"

	// Optional per-edge arrays, in CSR order: entry p belongs to the edge
	// at position p of the indices (the sampler's edge id, PyG's e_id).
	// EdgeAttr holds NumEdges rows of EdgeDim elements of EdgeDType
	// (EdgeDim 0: none); EdgeWeight and EdgeTime one value per edge, or
	// nil.
	EdgeDim    int
	EdgeDType  DType
	EdgeAttr   []byte
	EdgeWeight []float32
	EdgeTime   []int64
	// NodeTime is one timestamp per node, or nil.
	NodeTime []int64

	// LinkSplits are the edge splits for link prediction (by split name:
	// train, valid, test), or nil.
	LinkSplits map[string]*LinkSplit
}

// RowBytes is the size of one feature row in bytes.
func (d *Data) RowBytes() int { return d.FeatureDim * d.FeatureDType.Size() }

// Row returns the feature bytes of node v.
func (d *Data) Row(v int64) []byte {
	rb := int64(d.RowBytes())
	return d.Features[v*rb : (v+1)*rb]
}

// Validate checks that every array agrees with the others: CSR invariants,
// feature size, labels in [0, NumClasses) or -1, split ids in range.
func (d *Data) Validate() error { return d.validate(1) }

func (d *Data) validate(workers int) error { return d.validateArrays(workers, true, true) }

// validateArrays is validate; features false leaves the feature table out
// (a dataset opened with NoFeatures has none), edges false edge_attr and
// edge_weight (NoEdgeFeatures).
func (d *Data) validateArrays(workers int, features, edges bool) error {
	if err := d.Graph.validate(workers); err != nil {
		return err
	}
	if err := d.validateEdges(edges); err != nil {
		return err
	}
	if err := d.validateLinks(); err != nil {
		return err
	}
	n := d.Graph.NumNodes
	if !d.FeatureDType.Valid() {
		return fmt.Errorf("features: unknown dtype %q", d.FeatureDType)
	}
	if d.FeatureDim <= 0 {
		return fmt.Errorf("features: feature_dim %d must be positive", d.FeatureDim)
	}
	if want := n * int64(d.RowBytes()); features && int64(len(d.Features)) != want {
		return inArray(roleFeatures, fmt.Errorf("features: %d bytes, want %d nodes x %d bytes = %d", len(d.Features), n, d.RowBytes(), want))
	}
	if d.NumClasses <= 0 {
		return fmt.Errorf("labels: num_classes %d must be positive", d.NumClasses)
	}
	if d.ClassNames != nil && len(d.ClassNames) != d.NumClasses {
		return fmt.Errorf("labels: %d class names for %d classes", len(d.ClassNames), d.NumClasses)
	}
	if int64(len(d.Labels)) != n {
		return inArray(roleLabels, fmt.Errorf("labels: %d entries for %d nodes", len(d.Labels), n))
	}
	for i, y := range d.Labels {
		if y < -1 || int(y) >= d.NumClasses {
			return inArray(roleLabels, fmt.Errorf("labels: node %d has label %d outside [0, %d) (or -1 for unlabelled)", i, y, d.NumClasses))
		}
	}
	for name, ids := range d.Splits {
		if !knownSplit(name) {
			return fmt.Errorf("splits: unknown split %q", name)
		}
		for i, v := range ids {
			if v < 0 || v >= n {
				return inArray(rolePrefixSp+name, fmt.Errorf("splits: %s[%d] = %d out of range [0, %d)", name, i, v, n))
			}
		}
	}
	return nil
}

// arrayError is a validation error about one array, named by its role in a
// dataset directory, so that Open can name the file it came from.
type arrayError struct {
	role string
	err  error
}

func (e *arrayError) Error() string { return e.err.Error() }
func (e *arrayError) Unwrap() error { return e.err }

func inArray(role string, err error) error { return &arrayError{role: role, err: err} }

func knownSplit(name string) bool {
	for _, s := range SplitNames {
		if s == name {
			return true
		}
	}
	return false
}

// Progress receives the progress of long work (generate, import, verify).
// A nil Progress means none. Implementations must be safe for concurrent use:
// Add is called from many goroutines.
type Progress interface {
	// Begin starts a stage counting total units (bytes, rows or edges;
	// total < 0 when unknown). Stages follow each other, never overlap.
	Begin(stage string, total int64)
	// Add counts n more units of the current stage as done.
	Add(n int64)
}

type nopProgress struct{}

func (nopProgress) Begin(string, int64) {}
func (nopProgress) Add(int64)           {}

// orNop returns p, or a Progress that does nothing when p is nil.
func orNop(p Progress) Progress {
	if p == nil {
		return nopProgress{}
	}
	return p
}
