package datasets

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

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
