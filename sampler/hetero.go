package sampler

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/gnnloader/gnnloader/datasets"
)

// Heterogeneous sampling: PyG's heterogeneous NeighborSampler (directed,
// not disjoint, without replacement) over a datasets.Hetero.
//
// Each node type has its own node set, numbered from 0 in the order nodes
// join it; the input type's starts with the seeds as given (a repeated seed
// keeps its place, its later copies map to the first, as in Sample). Hop h
// (1-based) runs over the edge types in the dataset's order: for edge type
// e = (src, rel, dst) with fanout f = Fanouts[h-1][e] (0: none), every dst
// node that joined its set at hop h-1 (the frontier; hop 0 is the seeds),
// in set order, draws up to f of its in-neighbours in e's CSR (its row)
// exactly as Sample draws a row: every neighbour when the row has at most f
// (or f is -1), else Floyd's algorithm for f distinct row positions. The
// draws of the node at frontier position p come from their own SplitMix64
// stream, heteroSeed(key, h, e, p). A drawn src node that is not yet in
// src's set joins it (and src's frontier for hop h+1), in edge-type order,
// then edge order. So the result depends on the dataset, fanouts, input
// type, seeds and key alone, never on Workers or scheduling.

// HeteroOptions configure a HeteroSampler.
type HeteroOptions struct {
	// Fanouts[h][e] is what each dst node of edge type e (the dataset's
	// Relations order) samples at hop h+1: -1 every in-neighbour, 0 none.
	// 1 to MaxHops hops, each with one entry per edge type.
	Fanouts [][]int
	// Workers is the goroutines one Sample call may use (the caller
	// included); 0 means runtime.GOMAXPROCS(0) at NewHetero.
	Workers int
	// NoOrder leaves every HeteroNodes.Order empty.
	NoOrder bool
}

// HeteroSampler samples heterogeneous neighbourhoods. Like Sampler it is
// safe for concurrent use, each Sample call with its own HeteroBatch; the
// dataset must not change while it is in use.
type HeteroSampler struct {
	types   []int64 // per node type: its node count
	rels    []hrel  // per edge type
	fanouts [][]int
	workers int
	noOrder bool

	mu   sync.Mutex
	free []*hscratch
}

type hrel struct {
	src, dst int // node types
	g        *datasets.Graph
}

// HeteroBatch is one sampled heterogeneous neighbourhood: per node type
// (the dataset's order) its nodes, per edge type its edges.
type HeteroBatch struct {
	Nodes []HeteroNodes
	Edges []HeteroEdges
}

// HeteroNodes are a batch's nodes of one type.
type HeteroNodes struct {
	// NID are the ids (within the type) in the order they joined: the
	// seeds first for the input type, then hop by hop.
	NID []int64
	// NumSampledNodes[h] is the nodes that joined at hop h (hop 0: the
	// seeds for the input type, 0 for the others); hops+1 entries.
	NumSampledNodes []int
	// Order lists the local ids by ascending id (repeated seeds by local
	// id); empty with HeteroOptions.NoOrder.
	Order []int32
}

// HeteroEdges are a batch's edges of one type (src, rel, dst), grouped by
// hop, then by dst in frontier order, then in drawing order.
type HeteroEdges struct {
	// Src are local ids into the src type's NID, Dst into the dst type's:
	// messages flow from Src to Dst.
	Src, Dst []int32
	// EID is each edge's position in the edge type's CSR.
	EID []int64
	// NumSampledEdges[h] is the edges sampled at hop h+1; hops entries.
	NumSampledEdges []int
}

// NewHetero returns a sampler over h. It checks the options against h's
// node and edge types (not every index: see datasets.Hetero.Validate).
func NewHetero(h *datasets.Hetero, opts HeteroOptions) (*HeteroSampler, error) {
	if h == nil || len(h.NodeTypes) == 0 {
		return nil, errors.New("sampler: no heterogeneous graph")
	}
	s := &HeteroSampler{noOrder: opts.NoOrder}
	index := map[string]int{}
	for i, t := range h.NodeTypes {
		index[t.Name] = i
		s.types = append(s.types, t.NumNodes)
	}
	for _, r := range h.Relations {
		src, ok1 := index[r.Src]
		dst, ok2 := index[r.Dst]
		g := &r.Graph
		switch {
		case !ok1 || !ok2:
			return nil, fmt.Errorf("sampler: edge type %s: unknown node type", r.EdgeType)
		case g.NumNodes != s.types[dst] || int64(len(g.Indptr)) != g.NumNodes+1:
			return nil, fmt.Errorf("sampler: edge type %s: %d rows (indptr %d), want %d %s nodes", r.EdgeType, g.NumNodes, len(g.Indptr), s.types[dst], r.Dst)
		case g.SrcNodes() != s.types[src]:
			return nil, fmt.Errorf("sampler: edge type %s: %d source nodes, want %d %s nodes", r.EdgeType, g.SrcNodes(), s.types[src], r.Src)
		case (g.Indices32 == nil) == (g.Indices64 == nil) && g.NumEdges() != 0,
			g.Indices32 != nil && int64(len(g.Indices32)) != g.NumEdges(),
			g.Indices64 != nil && int64(len(g.Indices64)) != g.NumEdges():
			return nil, fmt.Errorf("sampler: edge type %s: indices do not match indptr (%d edges)", r.EdgeType, g.NumEdges())
		}
		s.rels = append(s.rels, hrel{src: src, dst: dst, g: g})
	}
	if len(opts.Fanouts) == 0 || len(opts.Fanouts) > MaxHops {
		return nil, fmt.Errorf("sampler: %d hops, want 1 to %d", len(opts.Fanouts), MaxHops)
	}
	for hop, f := range opts.Fanouts {
		if len(f) != len(s.rels) {
			return nil, fmt.Errorf("sampler: hop %d has %d fanouts for %d edge types", hop+1, len(f), len(s.rels))
		}
		for e, k := range f {
			if k < -1 {
				return nil, fmt.Errorf("sampler: fanout %d of hop %d, edge type %s: want -1 (all) or >= 0", k, hop+1, h.Relations[e].EdgeType)
			}
		}
		s.fanouts = append(s.fanouts, slices.Clone(f))
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("sampler: %d workers", opts.Workers)
	}
	s.workers = opts.Workers
	if s.workers == 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	if s.workers > 1 {
		ensureHelpers(s.workers - 1)
	}
	return s, nil
}

// heteroSeed is the RNG state of the dst node at position pos of the
// frontier of hop (1-based) for edge type rel. With rel 0 it is nodeSeed.
func heteroSeed(key uint64, hop, rel, pos int) uint64 {
	return mix64(key ^ mix64(uint64(rel)<<48^uint64(hop)<<40^uint64(pos)+golden))
}

// Sample samples the neighbourhood of seeds, ids of node type input (its
// index in the dataset's NodeTypes), into out, which it resets first (its
// slices keep their capacity).
func (s *HeteroSampler) Sample(input int, seeds []int64, key uint64, out *HeteroBatch) error {
	if input < 0 || input >= len(s.types) {
		return fmt.Errorf("sampler: input node type %d of %d", input, len(s.types))
	}
	n := s.types[input]
	if err := checkSeeds(seeds, n); err != nil {
		return err
	}
	s.mu.Lock()
	var sc *hscratch
	if k := len(s.free); k > 0 {
		sc, s.free = s.free[k-1], s.free[:k-1]
	}
	s.mu.Unlock()
	if sc == nil {
		T, E := len(s.types), len(s.rels)
		sc = &hscratch{s: s, tabs: make([]table, T), lo: make([]int, T), hi: make([]int, T), keys: make([][]uint64, T),
			errs: make([]error, T), nbr: make([][]int64, E), eb: make([]int, E), tot: make([]int, E)}
		sc.team = newTeam(sc)
	}
	err := sc.sample(input, seeds, key, out)
	sc.b = nil
	s.mu.Lock()
	s.free = append(s.free, sc)
	s.mu.Unlock()
	return err
}
