package sampler

// Disjoint and temporal neighbour sampling (PyG's disjoint=True, and its
// temporal sampling, which is always disjoint): every seed grows its own
// subgraph. See Disjoint.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/gnnloader/gnnloader/datasets"
)

// Strategy is how a temporal Disjoint sampler picks among a node's eligible
// neighbours (PyG's temporal_strategy).
type Strategy uint8

const (
	// Uniform draws fanout of the eligible neighbours without replacement,
	// every subset equally likely (PyG's "uniform").
	Uniform Strategy = iota
	// Last takes the fanout most recent eligible neighbours (PyG's "last").
	Last
)

// String is the strategy's name in PyG.
func (s Strategy) String() string {
	if s == Last {
		return "last"
	}
	return "uniform"
}

// DisjointOptions configure a Disjoint sampler. Fanouts, Workers, EdgeIDs
// and NoOrder mean what they mean in Options.
type DisjointOptions struct {
	Fanouts []int
	Workers int
	EdgeIDs bool
	NoOrder bool
	// NodeTime (one entry per node) makes sampling temporal on node times:
	// a neighbour u of any node of seed i's subgraph is eligible only when
	// NodeTime[u] <= the time of seed i.
	NodeTime []int64
	// EdgeTime (one entry per stored edge, in CSR order) makes sampling
	// temporal on edge times: the edge at CSR position p is eligible only
	// when EdgeTime[p] <= the time of the subgraph's seed. At most one of
	// NodeTime and EdgeTime.
	EdgeTime []int64
	// Strategy picks among the eligible neighbours (temporal sampling only;
	// without times every neighbour is eligible and draws are Uniform).
	Strategy Strategy
}

// Disjoint samples disjoint subgraphs, one per seed, as PyG's
// NeighborSampler with disjoint=True (and its temporal sampling):
//
//   - Seed i is node i of the batch and the root of subgraph i; a seed
//     repeated in the batch roots one subgraph per copy.
//   - Each subgraph is sampled as the Sampler samples a batch of one seed:
//     hop h samples from the subgraph's nodes added at hop h-1, and a node
//     is added to a subgraph once (deduplicated within the subgraph, never
//     across subgraphs: NID may hold a node many times).
//   - The batch lays the subgraphs out as PyG does: nodes in hop order
//     (the seeds first), each hop's nodes grouped by subgraph in seed order,
//     within a subgraph in the order of their first appearance in its edges;
//     edges grouped by hop, then by subgraph, then by Dst in frontier order,
//     then in sampling order. DisjointBatch.Subgraph is PyG's batch vector.
//   - Temporal (NodeTime or EdgeTime set): every node of subgraph i is
//     compared with the time of seed i (the seed's time propagates down its
//     subgraph), never with its own time. Uniform draws among the eligible
//     neighbours as the Sampler draws among all (every neighbour when at
//     most fanout are eligible, in row order; else Floyd's algorithm over
//     the eligible row positions in row order). Last takes the fanout
//     eligible neighbours of largest (time, row position), or every
//     eligible one, emitted in ascending (time, row position) order.
//
// Determinism: node p of hop h's frontier within subgraph i draws from
// the stream nodeSeed(subgraphKey(key, i), h, p) and from nothing else, so
// the bytes never depend on Workers, GOMAXPROCS or the scheduling. A
// Disjoint is safe for concurrent use, like a Sampler.
type Disjoint struct {
	g        *datasets.Graph
	fanouts  []int
	workers  int
	edgeIDs  bool
	noOrder  bool
	nodeTime []int64
	edgeTime []int64
	strategy Strategy

	mu   sync.Mutex
	free []*dscratch
}

// DisjointBatch is a batch of disjoint subgraphs: Batch's fields as the
// Disjoint's documentation lays them out, and the subgraph of every node.
type DisjointBatch struct {
	Batch
	// Subgraph[i] is the position in the seeds of the seed whose subgraph
	// node i belongs to (PyG's batch vector); parallel to NID.
	Subgraph []int32
}

// Reset empties b and keeps its capacity.
func (b *DisjointBatch) Reset() {
	b.Batch.Reset()
	b.Subgraph = b.Subgraph[:0]
}

// ErrNoSeedTimes is a temporal batch on edge times without seed times:
// only node times give a seed a default time (its own), as in PyG.
var ErrNoSeedTimes = errors.New("sampler: temporal sampling on edge times needs the seeds' times")

// NewDisjoint returns a Disjoint sampler over g.
func NewDisjoint(g *datasets.Graph, o DisjointOptions) (*Disjoint, error) {
	// New checks the graph, the fanouts and the workers.
	if _, err := New(g, Options{Fanouts: o.Fanouts, Workers: max(o.Workers, 1)}); err != nil {
		return nil, err
	}
	if o.Workers < 0 {
		return nil, fmt.Errorf("sampler: %d workers", o.Workers)
	}
	switch {
	case o.NodeTime != nil && o.EdgeTime != nil:
		return nil, errors.New("sampler: both node and edge times: temporal sampling uses one")
	case o.NodeTime != nil && int64(len(o.NodeTime)) != g.NumNodes:
		return nil, fmt.Errorf("sampler: %d node times for %d nodes", len(o.NodeTime), g.NumNodes)
	case o.EdgeTime != nil && int64(len(o.EdgeTime)) != g.NumEdges():
		return nil, fmt.Errorf("sampler: %d edge times for %d edges", len(o.EdgeTime), g.NumEdges())
	case o.Strategy != Uniform && o.Strategy != Last:
		return nil, fmt.Errorf("sampler: unknown temporal strategy %d", o.Strategy)
	}
	w := o.Workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	if w > 1 {
		ensureHelpers(w - 1)
	}
	return &Disjoint{g: g, fanouts: slices.Clone(o.Fanouts), workers: w, edgeIDs: o.EdgeIDs, noOrder: o.NoOrder,
		nodeTime: o.NodeTime, edgeTime: o.EdgeTime, strategy: o.Strategy}, nil
}

// Temporal reports whether the sampler filters neighbours by time.
func (d *Disjoint) Temporal() bool { return d.nodeTime != nil || d.edgeTime != nil }

// Fanouts returns a copy of the fanouts.
func (d *Disjoint) Fanouts() []int { return slices.Clone(d.fanouts) }

// Sample samples one subgraph per seed into out (which it resets first).
// times are the seeds' times (PyG's input_time, one per seed) for a
// temporal sampler; nil takes each seed's own node time (ErrNoSeedTimes on
// edge times). A sampler without times refuses them. The same graph,
// options, seeds, times and key give the same bytes.
func (d *Disjoint) Sample(seeds, times []int64, key uint64, out *DisjointBatch) error {
	out.Reset()
	n := d.g.NumNodes
	if err := checkSeeds(seeds, n); err != nil {
		return err
	}
	switch {
	case !d.Temporal() && times != nil:
		return errors.New("sampler: seed times for a sampler without a time filter")
	case times != nil && len(times) != len(seeds):
		return fmt.Errorf("sampler: %d seed times for %d seeds", len(times), len(seeds))
	case d.edgeTime != nil && times == nil:
		return ErrNoSeedTimes
	}
	sc := d.getScratch()
	defer d.putScratch(sc)
	sc.times = times
	if d.nodeTime != nil && times == nil {
		sc.own = grow(sc.own, len(seeds))
		for i, v := range seeds {
			sc.own[i] = d.nodeTime[v]
		}
		sc.times = sc.own
	}
	err := sc.sample(seeds, key, out)
	if err != nil {
		out.Reset()
	}
	return err
}

func (d *Disjoint) getScratch() *dscratch {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k := len(d.free); k > 0 {
		sc := d.free[k-1]
		d.free = d.free[:k-1]
		return sc
	}
	sc := &dscratch{d: d}
	sc.team = newTeam(sc)
	return sc
}

func (d *Disjoint) putScratch(sc *dscratch) {
	sc.b, sc.seeds, sc.times = nil, nil, nil
	d.mu.Lock()
	d.free = append(d.free, sc)
	d.mu.Unlock()
}

// dscratch is the working memory of one Disjoint.Sample call. The seeds are
// cut into chunks; phase dSample samples each chunk's subgraphs one after
// the other into the chunk's own buffers (subgraph-local ids), a sequential
// prefix sum places every (hop, subgraph) in the batch, and phase dPlace
// copies each chunk's subgraphs there with batch-local ids.
type dscratch struct {
	d     *Disjoint
	team  *team
	b     *DisjointBatch
	seeds []int64
	times []int64 // per seed, nil when not temporal
	own   []int64 // the seeds' own node times, when times were not given
	key   uint64
	hops  int

	chunks  []dchunk
	nc      int
	nodeCnt []int // [s*(hops+1)+h]: subgraph s's nodes added at hop h
	edgeCnt []int // [s*hops+h]: subgraph s's edges of hop h+1
	nodeOff []int // [h*B+s]: batch-local id of subgraph s's first hop-h node
	edgeOff []int // [h*B+s]: first edge of subgraph s in hop h+1

	keys, tmp []uint64 // address order
}

// dchunk is one chunk's output and working memory.
type dchunk struct {
	tab      table
	nodes    []int64 // its subgraphs' nodes, subgraph after subgraph, hop-major
	src, dst []int32 // its subgraphs' edges in subgraph-local ids
	eid      []int64
	picked   []int64 // one node's chosen row positions
	elig     []int64 // one node's eligible row positions (temporal)
	set      posSet
	local    []int32 // subgraph-local id -> batch-local id (dPlace)
	tooLarge bool
	sink     int64 // what sampleSubgraph's early reads of rows summed (kept so that they are not dropped)
}

const (
	dSample = iota
	dPlace
)

// minSeedChunk is the fewest seeds per chunk.
const minSeedChunk = 4

func (sc *dscratch) runChunk(phase, c int) {
	if phase == dSample {
		if g := sc.d.g; g.Indices32 != nil {
			sampleSubgraphs(sc, g.Indices32, c)
		} else {
			sampleSubgraphs(sc, g.Indices64, c)
		}
		return
	}
	sc.place(c)
}

func (sc *dscratch) sample(seeds []int64, key uint64, b *DisjointBatch) error {
	d := sc.d
	sc.b, sc.seeds, sc.key, sc.hops = b, seeds, key, len(d.fanouts)
	B, H := len(seeds), sc.hops
	sc.nc = numChunks(B, d.workers, minSeedChunk)
	if len(sc.chunks) < sc.nc {
		sc.chunks = append(sc.chunks, make([]dchunk, sc.nc-len(sc.chunks))...)
	}
	sc.nodeCnt = grow(sc.nodeCnt, B*(H+1))
	sc.edgeCnt = grow(sc.edgeCnt, B*H)
	sc.nodeOff = grow(sc.nodeOff, B*(H+1))
	sc.edgeOff = grow(sc.edgeOff, B*H)
	sc.team.run(dSample, sc.nc, d.workers-1)
	for c := range sc.nc {
		if sc.chunks[c].tooLarge {
			return ErrTooLarge
		}
	}
	nodes, edges := 0, 0
	for h := 0; h <= H; h++ {
		first := nodes
		for s := range B {
			sc.nodeOff[h*B+s] = nodes
			nodes += sc.nodeCnt[s*(H+1)+h]
		}
		b.NumSampledNodes = append(b.NumSampledNodes, nodes-first)
		if h == H {
			break
		}
		first = edges
		for s := range B {
			sc.edgeOff[h*B+s] = edges
			edges += sc.edgeCnt[s*H+h]
		}
		b.NumSampledEdges = append(b.NumSampledEdges, edges-first)
	}
	if nodes > math.MaxInt32 || edges > math.MaxInt32 {
		return ErrTooLarge
	}
	b.NID = grow(b.NID, nodes)
	b.Subgraph = grow(b.Subgraph, nodes)
	b.Src = grow(b.Src, edges)
	b.Dst = grow(b.Dst, edges)
	if d.edgeIDs {
		b.EID = grow(b.EID, edges)
	}
	sc.team.run(dPlace, sc.nc, d.workers-1)
	if !d.noOrder {
		sc.order()
	}
	return nil
}

// place copies chunk c's subgraphs to their places in the batch.
func (sc *dscratch) place(c int) {
	ch, b := &sc.chunks[c], sc.b
	B, H := len(sc.seeds), sc.hops
	a, z := span(B, sc.nc, c)
	nAt, eAt := 0, 0
	for s := a; s < z; s++ {
		cnt := sc.nodeCnt[s*(H+1) : (s+1)*(H+1)]
		total := 0
		for _, k := range cnt {
			total += k
		}
		ch.local = grow(ch.local, total)
		j := 0
		for h, k := range cnt {
			off := sc.nodeOff[h*B+s]
			copy(b.NID[off:off+k], ch.nodes[nAt+j:nAt+j+k])
			for r := range k {
				ch.local[j] = int32(off + r)
				b.Subgraph[off+r] = int32(s)
				j++
			}
		}
		nAt += total
		for h, k := range sc.edgeCnt[s*H : (s+1)*H] {
			off := sc.edgeOff[h*B+s]
			for r := range k {
				b.Src[off+r] = ch.local[ch.src[eAt+r]]
				b.Dst[off+r] = ch.local[ch.dst[eAt+r]]
			}
			if sc.d.edgeIDs {
				copy(b.EID[off:off+k], ch.eid[eAt:eAt+k])
			}
			eAt += k
		}
	}
}

// order fills b.Order: local ids by ascending (global id, local id), by an
// LSD radix sort of packed keys when they fit in 64 bits.
func (sc *dscratch) order() {
	b := sc.b
	N := len(b.NID)
	b.Order = grow(b.Order, N)
	if N == 0 {
		return
	}
	idBits := uint(bits.Len64(uint64(max(sc.d.g.NumNodes-1, 0))))
	posBits := uint(bits.Len64(uint64(N - 1)))
	if idBits+posBits > 64 {
		for i := range b.Order {
			b.Order[i] = int32(i)
		}
		slices.SortStableFunc(b.Order, func(x, y int32) int { return cmp.Compare(b.NID[x], b.NID[y]) })
		return
	}
	sc.keys, sc.tmp = grow(sc.keys, N), grow(sc.tmp, N)
	for i, v := range b.NID {
		sc.keys[i] = uint64(v)<<posBits | uint64(i)
	}
	mask := uint64(1)<<posBits - 1
	for i, k := range sortBucket(sc.keys, sc.tmp, posBits, idBits) {
		b.Order[i] = int32(k & mask)
	}
}

// subgraphKey is the key of subgraph i's random streams in the batch with
// the given key.
func subgraphKey(key uint64, i int) uint64 {
	return mix64(key ^ mix64(uint64(i)*golden^0x6A09E667F3BCC909))
}
