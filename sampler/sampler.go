package sampler

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/gnnloader/gnnloader/datasets"
)

// MaxHops is the largest number of hops (len(Options.Fanouts)).
const MaxHops = 8

// Options configures a Sampler.
type Options struct {
	// Fanouts is the number of neighbours sampled per node at each hop,
	// hop 1 first; -1 takes every neighbour, 0 none (the hop samples no
	// edge, as PyG's 0). 1 to MaxHops entries, each >= -1.
	Fanouts []int
	// Workers is the number of goroutines one Sample call may use
	// (the caller included). 0 means runtime.GOMAXPROCS(0) at New.
	// The result never depends on it.
	Workers int
	// EdgeIDs makes Sample fill Batch.EID, the graph's id of every sampled
	// edge (its position in the CSR indices).
	EdgeIDs bool
	// NoOrder leaves Batch.Order empty (it costs a radix sort of the batch's
	// ids; a gather planned on the GPU sorts there).
	NoOrder bool
}

// Sampler samples neighbourhoods of seed batches on one graph. It is safe
// for concurrent use: many goroutines may call Sample at once, each with its
// own Batch. The graph must not change while the Sampler is in use.
type Sampler struct {
	g         *datasets.Graph
	fanouts   []int
	workers   int
	shardBits uint
	edgeIDs   bool
	noOrder   bool

	mu   sync.Mutex
	free []*scratch
}

// ErrTooLarge is returned when a batch would hold more than 2^31-1 nodes or
// edges (local ids are int32).
var ErrTooLarge = errors.New("sampler: batch too large for int32 local ids")

// New returns a Sampler over g. It checks the options and the shape of g
// (not every index: see datasets.Graph.Validate for that).
func New(g *datasets.Graph, opts Options) (*Sampler, error) {
	if g == nil {
		return nil, errors.New("sampler: nil graph")
	}
	if int64(len(g.Indptr)) != g.NumNodes+1 {
		return nil, fmt.Errorf("sampler: indptr has %d entries, want num_nodes+1 = %d", len(g.Indptr), g.NumNodes+1)
	}
	if g.Indices32 != nil && g.Indices64 != nil {
		return nil, errors.New("sampler: both 32- and 64-bit indices set")
	}
	if n := g.NumEdges(); (g.Indices32 != nil && int64(len(g.Indices32)) != n) ||
		(g.Indices64 != nil && int64(len(g.Indices64)) != n) ||
		(g.Indices32 == nil && g.Indices64 == nil && n != 0) {
		return nil, fmt.Errorf("sampler: indices length does not match indptr (%d edges)", n)
	}
	if len(opts.Fanouts) == 0 || len(opts.Fanouts) > MaxHops {
		return nil, fmt.Errorf("sampler: %d fanouts, want 1 to %d", len(opts.Fanouts), MaxHops)
	}
	for i, k := range opts.Fanouts {
		if k < -1 {
			return nil, fmt.Errorf("sampler: fanout %d of hop %d, want -1 (all) or >= 0", k, i+1)
		}
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("sampler: %d workers", opts.Workers)
	}
	w := opts.Workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	s := &Sampler{g: g, fanouts: append([]int(nil), opts.Fanouts...), workers: w, edgeIDs: opts.EdgeIDs, noOrder: opts.NoOrder}
	// Four shards per worker (a power of two) balance the dedup phase.
	for w > 1 && 1<<s.shardBits < min(4*w, 1<<shardHashBits) {
		s.shardBits++
	}
	if w > 1 {
		ensureHelpers(w - 1)
	}
	return s, nil
}

// Fanouts returns a copy of the fanouts.
func (s *Sampler) Fanouts() []int { return append([]int(nil), s.fanouts...) }

// Workers is the number of goroutines one Sample call may use.
func (s *Sampler) Workers() int { return s.workers }

// Batch is one sampled neighbourhood, laid out like PyG's NeighborLoader
// output. Sample overwrites every field; the slices keep their capacity from
// batch to batch, so a reused Batch allocates nothing in steady state. A
// Batch must not be used by two Sample calls at once.
type Batch struct {
	// NID holds the unique global node ids in hop order: the seeds first,
	// in seed order (repeated seeds are kept, so NID[:len(seeds)] == seeds),
	// then the nodes first reached at hop 1, at hop 2, ..., each hop's new
	// nodes in the order of their first appearance in that hop's edges.
	NID []int64
	// NumSampledNodes[h] is the number of nodes added at hop h; hop 0 is
	// the seeds. len == hops+1.
	NumSampledNodes []int
	// NumSampledEdges[h] is the number of edges sampled at hop h+1.
	// len == hops.
	NumSampledEdges []int
	// Src and Dst are the sampled edges in local ids (indices into NID):
	// the message flows from Src (the sampled neighbour) to Dst (the node
	// that sampled it). Edges are grouped by hop in hop order; within a hop
	// by Dst in frontier order, then in sampling order. PyG's edge_index is
	// stack(Src, Dst).
	Src, Dst []int32
	// Order lists the local ids by ascending global id:
	// NID[Order[0]] < NID[Order[1]] < ... (repeated seeds by local id).
	// Empty with Options.NoOrder.
	Order []int32
	// EID holds, per sampled edge (parallel to Src and Dst), the graph's id
	// of that edge: its position in the CSR indices, which is also its row
	// in the dataset's edge arrays. Filled only with Options.EdgeIDs.
	EID []int64
}

// Reset empties b and keeps its capacity.
func (b *Batch) Reset() {
	b.NID = b.NID[:0]
	b.NumSampledNodes = b.NumSampledNodes[:0]
	b.NumSampledEdges = b.NumSampledEdges[:0]
	b.Src = b.Src[:0]
	b.Dst = b.Dst[:0]
	b.Order = b.Order[:0]
	b.EID = b.EID[:0]
}

// NumEdges is the total number of sampled edges.
func (b *Batch) NumEdges() int { return len(b.Src) }

// checkSeeds reports a seed outside [0, n), or more seeds than a batch's
// int32 positions hold.
func checkSeeds(seeds []int64, n int64) error {
	for i, v := range seeds {
		if v < 0 || v >= n {
			return fmt.Errorf("sampler: seed %d (position %d) out of range [0, %d)", v, i, n)
		}
	}
	if len(seeds) > math.MaxInt32 {
		return ErrTooLarge
	}
	return nil
}

// Sample samples the neighbourhood of seeds into out (which it resets
// first). key seeds the random choices: the same graph, fanouts, seeds and
// key give the same bytes whatever Options.Workers, GOMAXPROCS or the
// scheduling. Seeds must be node ids of the graph.
func (s *Sampler) Sample(seeds []int64, key uint64, out *Batch) error {
	out.Reset()
	n := s.g.NumNodes
	if err := checkSeeds(seeds, n); err != nil {
		return err
	}
	sc := s.getScratch()
	defer s.putScratch(sc)
	return sc.sample(seeds, key, out)
}

func (s *Sampler) getScratch() *scratch {
	s.mu.Lock()
	if k := len(s.free); k > 0 {
		sc := s.free[k-1]
		s.free = s.free[:k-1]
		s.mu.Unlock()
		return sc
	}
	s.mu.Unlock()
	return newScratch(s)
}

func (s *Sampler) putScratch(sc *scratch) {
	sc.b = nil
	s.mu.Lock()
	s.free = append(s.free, sc)
	s.mu.Unlock()
}

// grow returns s with length n, reusing its capacity when it can.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// extend returns s with length n, keeping its contents.
func extend[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	ns := make([]T, n, n+n/4)
	copy(ns, s)
	return ns
}
