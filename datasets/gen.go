package datasets

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Tuning of the generated data. Changing any of these changes every
// generated dataset: keep them fixed.
const (
	minGenNodes = 10

	// genHomophily is the probability that an edge target is drawn from the
	// source's own class rather than from all nodes.
	genHomophily = 0.75

	// genMuL2 is the distance scale of the class centroids: centroids are
	// ±genMuL2/sqrt(dim) in every dimension, so two centroids lie about
	// genMuL2*sqrt(2) apart whatever the dimension; the noise is N(0, 1)
	// per dimension.
	genMuL2 = 2.3

	// Out-degree weights are Pareto(2) shifted by genDegShift (in units of
	// genDegUnit) and capped at genDegCap units: the smallest weight is
	// 1-genDegShift, the mean about 2-genDegShift.
	genDegUnit  = 1 << 10
	genDegShift = 0.75
	genDegCap   = 32
)

// Random streams: each array is a pure function of (seed, stream, index).
const (
	streamDegree uint64 = iota + 1
	streamRank
	streamRows
	streamSplit
	streamCentroid
	streamFeatures
)

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

// Generate builds a synthetic dataset shaped like a preset, in memory.
//
// The graph is a citation-like CSR: out-degrees are heavy-tailed (Pareto)
// and add up to exactly the scaled edge count; each target is drawn, with
// probability genHomophily, from the source's own class, otherwise from all
// nodes, in both cases with a power-law preference for a fixed random
// ranking of the nodes, so in-degrees are heavy-tailed too. Rows are sorted,
// without duplicates or self loops. Every node is labelled with its planted
// class (class sizes fall off like 1/(c+2)); features are the class centroid
// plus N(0, 1) noise, so features alone predict the class only partly and
// neighbourhoods predict it much better. The splits are disjoint random node
// sets of the scaled preset sizes, each sorted.
//
// Every value is a pure function of the seed and an index, never of
// scheduling: the same options give the same bytes for any Workers and
// GOMAXPROCS, on any platform (integer arithmetic and explicitly rounded
// float32 operations only). All stages run on Workers goroutines.
//
// Memory: the result, plus what MakeUndirected needs when symmetrising (a
// transposed copy of the directed graph and the result), which is handed
// back to the OS before the feature table, allocated last, arrives. No edge
// list of pairs is ever built. papers100M at scale 1 holds 57 GB of features
// and a 6.5 GB directed CSR (13 GB undirected).
func Generate(opts GenOptions) (*Data, error) {
	p, err := LookupPreset(opts.Like)
	if err != nil {
		return nil, err
	}
	dt, err := opts.scaleAndDType()
	if err != nil {
		return nil, err
	}
	undirected := p.Undirected
	if opts.Undirected != nil {
		undirected = *opts.Undirected
	}
	sz := scaledSizes(p, opts.Scale)
	g := &generator{
		preset:  p,
		sz:      sz,
		seed:    opts.Seed,
		workers: opts.Workers,
		prog:    orNop(opts.Progress),
	}
	if g.workers <= 0 {
		g.workers = runtime.GOMAXPROCS(0)
	}

	d := &Data{
		Name:         p.Name + "-synthetic",
		Directed:     !undirected,
		FeatureDim:   p.FeatureDim,
		FeatureDType: dt,
		NumClasses:   p.Classes,
		Source:       genSource(p, opts, undirected, dt),
	}

	g.prog.Begin("labels", sz.nodes)
	d.Labels = g.classes()
	d.Splits = g.splits()

	g.prog.Begin("graph", sz.edges)
	if Wide(sz.nodes) {
		d.Graph, err = buildGraph[int64](g, d.Labels)
	} else {
		d.Graph, err = buildGraph[int32](g, d.Labels)
	}
	if err != nil {
		return nil, err
	}

	if undirected {
		g.prog.Begin("undirected", d.Graph.NumEdges())
		u, err := MakeUndirected(&d.Graph, g.workers)
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		g.prog.Add(d.Graph.NumEdges())
		directedBytes := d.Graph.NumEdges() * int64(max(len(u.Indices32)*4, len(u.Indices64)*8)) / max(u.NumEdges(), 1)
		d.Graph = u
		if directedBytes > 1<<28 && !opts.NoFeatures {
			// Hand the directed graph and MakeUndirected's temporaries
			// back to the OS before the feature table arrives: the
			// runtime would keep them resident otherwise, and at
			// papers100M size they are ~13 GB on top of 57 GB.
			debug.FreeOSMemory()
		}
	}

	if !opts.NoFeatures {
		n := sz.nodes * int64(d.RowBytes())
		g.prog.Begin("features", n)
		var feats []byte
		if opts.AllocFeatures != nil {
			feats, err = opts.AllocFeatures(n)
			if err != nil {
				return nil, fmt.Errorf("gen: allocating %d feature bytes: %w", n, err)
			}
			if int64(len(feats)) != n {
				return nil, fmt.Errorf("gen: AllocFeatures(%d) returned %d bytes", n, len(feats))
			}
		} else {
			feats = make([]byte, n)
		}
		g.features(feats, d.Labels, dt)
		d.Features = feats
	}
	if err := g.genOptional(d, opts); err != nil {
		return nil, err
	}
	g.linkSplits(d, opts.Scale)
	return d, nil
}

func genSource(p Preset, o GenOptions, undirected bool, dt DType) string {
	s := fmt.Sprintf("gen --like %s --scale %g --seed %d", p.Name, o.Scale, o.Seed)
	if undirected != p.Undirected {
		s += fmt.Sprintf(" --undirected=%t", undirected)
	}
	if dt != Float32 {
		s += " --dtype " + string(dt)
	}
	if o.NoFeatures {
		s += " --no-features"
	}
	return s + optionalSource(o)
}

type generator struct {
	preset  Preset
	sz      genSizes
	seed    uint64
	workers int
	prog    Progress

	// The nodes in rank order are rank.at(0), rank.at(1), ...; class c
	// holds the nodes at rank positions [classStart[c], classStart[c+1]),
	// so a class's members, most popular first, are computed, not stored.
	rank       *feistel
	classStart []int64
}

// genChunk is the unit of parallel work over nodes. Results never depend on
// it, only the load balance does.
const genChunk = 1 << 14

// genParallel calls fn(lo, hi) for consecutive ranges of [0, n) of size
// chunk on up to workers goroutines.
func genParallel(workers int, n, chunk int64, fn func(lo, hi int64)) {
	if n <= 0 {
		return
	}
	nch := (n + chunk - 1) / chunk
	w := int(min(int64(workers), nch))
	if w <= 1 {
		for lo := int64(0); lo < n; lo += chunk {
			fn(lo, min(lo+chunk, n))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Go(func() {
			for {
				c := next.Add(1) - 1
				if c >= nch {
					return
				}
				lo := c * chunk
				fn(lo, min(lo+chunk, n))
			}
		})
	}
	wg.Wait()
}

// classes lays the classes out on a random ranking of the nodes and
// returns every node's class. Class c gets the share 1/(c+2) of the nodes
// (apportioned exactly in integers) and the rank positions
// [classStart[c], classStart[c+1]). It sets g.rank and g.classStart.
func (g *generator) classes() []int32 {
	n, C := g.sz.nodes, g.preset.Classes
	cum := make([]uint64, C+1)
	for c := range C {
		cum[c+1] = cum[c] + (1<<40)/uint64(c+2)
	}
	g.classStart = make([]int64, C+1)
	for c := range cum {
		g.classStart[c] = int64(mulDiv(uint64(n), cum[c], cum[C]))
	}
	g.rank = newFeistel(uint64(n), streamKey(g.seed, streamRank))
	labels := make([]int32, n)
	genParallel(g.workers, n, genChunk, func(lo, hi int64) {
		c := g.classAt(lo)
		for i := lo; i < hi; i++ {
			for i >= g.classStart[c+1] {
				c++
			}
			labels[g.rank.at(uint64(i))] = int32(c)
		}
		g.prog.Add(hi - lo)
	})
	return labels
}

// classAt is the class holding rank position i.
func (g *generator) classAt(i int64) int {
	k, found := slices.BinarySearch(g.classStart, i)
	if !found {
		k--
	}
	for g.classStart[k+1] <= i { // skip empty classes
		k++
	}
	return k
}

// splits draws the train, valid and test node sets: consecutive runs of a
// random permutation of the nodes, each sorted.
func (g *generator) splits() map[string][]int64 {
	perm := newFeistel(uint64(g.sz.nodes), streamKey(g.seed, streamSplit))
	sizes := []int64{g.sz.train, g.sz.valid, g.sz.test}
	out := make(map[string][]int64, 3)
	var at int64
	for i, name := range SplitNames {
		ids := make([]int64, sizes[i])
		base := at
		genParallel(g.workers, sizes[i], genChunk, func(lo, hi int64) {
			for j := lo; j < hi; j++ {
				ids[j] = int64(perm.at(uint64(base + j)))
			}
		})
		parallelSortInt64(ids, g.workers)
		out[name] = ids
		at += sizes[i]
	}
	return out
}

// parallelSortInt64 sorts s: chunks sorted in parallel, then merged pairwise.
func parallelSortInt64(s []int64, workers int) {
	const minChunk = 1 << 16
	if workers <= 1 || len(s) < 2*minChunk {
		slices.Sort(s)
		return
	}
	parts := min(workers, len(s)/minChunk)
	bounds := make([]int, parts+1)
	for i := range bounds {
		bounds[i] = len(s) * i / parts
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { slices.Sort(s[bounds[i]:bounds[i+1]]) })
	}
	wg.Wait()
	buf := make([]int64, len(s))
	src, dst := s, buf
	for len(bounds) > 2 {
		var nb []int
		for i := 0; i+1 < len(bounds); i += 2 {
			lo := bounds[i]
			if i+2 >= len(bounds) {
				copy(dst[lo:bounds[i+1]], src[lo:bounds[i+1]])
				nb = append(nb, lo)
				continue
			}
			mid, hi := bounds[i+1], bounds[i+2]
			wg.Go(func() { mergeInt64(dst[lo:hi], src[lo:mid], src[mid:hi]) })
			nb = append(nb, lo)
		}
		wg.Wait()
		nb = append(nb, len(s))
		bounds = nb
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

func mergeInt64(dst, a, b []int64) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if b[j] < a[i] {
			dst[k] = b[j]
			j++
		} else {
			dst[k] = a[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
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
