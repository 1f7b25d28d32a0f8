package datasets

// What Generate can imitate and how it is asked: the presets, GenOptions
// and the preset counts scaled by GenOptions.Scale.

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Preset describes one of the real datasets a synthetic one can be shaped
// like: its counts at scale 1.
type Preset struct {
	Name string
	// Nodes is the node count.
	Nodes int64
	// Edges is the number of directed edges generated. For an undirected
	// dataset this is the count before symmetrising: the stored graph has
	// about twice as many entries (each edge both ways, minus duplicates),
	// and that stored count is what a manifest reports.
	Edges      int64
	FeatureDim int
	Classes    int
	// Train, Valid and Test are the split sizes. When they add up to Nodes
	// the splits partition the nodes at every scale.
	Train, Valid, Test int64
	// Undirected is the default shape: products ships symmetrised, the
	// others as directed citation graphs, like OGB ships them.
	Undirected bool
	// LinkValid and LinkTest > 0 make link splits (gen_link.go): that
	// many held-out edges, each with LinkNeg negative destinations.
	LinkValid, LinkTest int64
	LinkNeg             int
}

var presets = []Preset{
	{Name: "papers100M", Nodes: 111_059_956, Edges: 1_615_685_872, FeatureDim: 128, Classes: 172,
		Train: 1_207_179, Valid: 125_265, Test: 214_338},
	{Name: "products", Nodes: 2_449_029, Edges: 61_859_140, FeatureDim: 100, Classes: 47,
		Train: 196_615, Valid: 39_323, Test: 2_213_091, Undirected: true},
	{Name: "arxiv", Nodes: 169_343, Edges: 1_166_243, FeatureDim: 128, Classes: 40,
		Train: 90_941, Valid: 29_799, Test: 48_603},
	// citation2: ogbl-citation2's graph, with its held-out edges and 1000
	// negatives each; the node labels (planted classes) and the 60/20/20
	// node split are the generator's, not OGB's.
	{Name: "citation2", Nodes: 2_927_963, Edges: 30_561_187, FeatureDim: 128, Classes: 40,
		Train: 1_756_778, Valid: 585_593, Test: 585_592, LinkValid: 86_956, LinkTest: 86_956, LinkNeg: 1000},
	// cora: a 60/20/20 split of all nodes.
	{Name: "cora", Nodes: 2708, Edges: 5429, FeatureDim: 1433, Classes: 7,
		Train: 1625, Valid: 542, Test: 541},
}

// Presets lists the datasets Generate can imitate, at scale 1.
func Presets() []Preset { return slices.Clone(presets) }

// LookupPreset finds a preset by name, ignoring case.
func LookupPreset(name string) (Preset, error) {
	for _, p := range presets {
		if strings.EqualFold(p.Name, name) {
			return p, nil
		}
	}
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Name
	}
	return Preset{}, fmt.Errorf("gen: unknown preset %q (want one of %s)", name, strings.Join(names, ", "))
}

// GenOptions configures Generate.
type GenOptions struct {
	// Like names the preset (see Presets), case-insensitive.
	Like string
	// Scale multiplies the node count, the edge count and the split sizes
	// (rounded; at least 10 nodes and 1 node per split; at most n(n-1)/2
	// edges, which only tiny scales reach). Must be > 0.
	Scale float64
	// Seed selects the dataset: the same options give the same bytes,
	// whatever Workers and GOMAXPROCS are.
	Seed uint64
	// Undirected symmetrises the graph (and drops duplicates); nil means
	// the preset's default.
	Undirected *bool
	// FeatureDType is the feature element type; "" means float32. float16
	// and bfloat16 are rounded to nearest even from the float32 values;
	// float64 holds them exactly. The integer types hold them quantized
	// (gen_features.go): int64 and int32 round(16x), uint8 round(32x)+128
	// clamped to [0, 255], bool x > 0; all stay learnable.
	FeatureDType DType
	// NoFeatures skips the feature table (graph, labels and splits only).
	// The result then has FeatureDim set but Features nil, which
	// Data.Validate rejects: check it with Graph.Validate.
	NoFeatures bool
	// AllocFeatures allocates the n bytes of the feature table (for example
	// huge-page memory to be pinned later); nil means make. The memory need
	// not be zeroed: every byte is written.
	AllocFeatures func(n int64) ([]byte, error)
	// EdgeDim > 0 adds edge_attr: EdgeDim elements of EdgeDType ("" =
	// float32) per stored edge. EdgeWeights adds edge_weight; Time adds
	// node_time and edge_time. gen_edges.go says what they hold.
	EdgeDim     int
	EdgeDType   DType
	EdgeWeights bool
	Time        bool
	// Workers is the number of goroutines; 0 means GOMAXPROCS.
	Workers int
	// Progress receives the stages "labels" (nodes), "graph" (edges),
	// "undirected" (edges, one step) and "features" (bytes); nil means none.
	Progress Progress
}

// scaleAndDType checks the options every generator shares and returns the
// feature dtype (float32 when unset).
func (opts *GenOptions) scaleAndDType() (DType, error) {
	if !(opts.Scale > 0) || math.IsInf(opts.Scale, 0) {
		return "", fmt.Errorf("gen: scale %v must be a positive number", opts.Scale)
	}
	dt := opts.FeatureDType
	if dt == "" {
		dt = Float32
	}
	if !dt.Valid() {
		return "", fmt.Errorf("gen: unknown feature dtype %q", dt)
	}
	return dt, nil
}

// genSizes are the scaled counts.
type genSizes struct {
	nodes, edges       int64
	train, valid, test int64
}

func scaledSizes(p Preset, scale float64) genSizes {
	round := func(x int64) int64 { return int64(math.Round(float64(x) * scale)) }
	s := genSizes{nodes: max(round(p.Nodes), minGenNodes), edges: max(round(p.Edges), 1)}
	// A simple directed graph has at most n(n-1) edges; keep well inside
	// so that drawing distinct targets stays cheap.
	s.edges = min(s.edges, s.nodes*(s.nodes-1)/2)
	s.train, s.valid, s.test = max(round(p.Train), 1), max(round(p.Valid), 1), max(round(p.Test), 1)
	if p.Train+p.Valid+p.Test == p.Nodes {
		s.test = max(s.nodes-s.train-s.valid, 1)
	}
	// Never more split nodes than nodes: shrink test, then valid, then train.
	for over := s.train + s.valid + s.test - s.nodes; over > 0; over = s.train + s.valid + s.test - s.nodes {
		switch {
		case s.test > 1:
			s.test -= min(over, s.test-1)
		case s.valid > 1:
			s.valid -= min(over, s.valid-1)
		default:
			s.train -= min(over, s.train-1)
		}
	}
	return s
}
