package batch

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// NodeOptions configure a Node mode.
type NodeOptions struct {
	// BatchSize is the most seeds a batch has (the slots' capacity).
	BatchSize int
	// Fanouts per hop, outermost first; -1 takes every neighbour.
	Fanouts []int
	// Workers is the goroutines one batch's sampling may use (0 = all).
	Workers int
	// NoFeatures leaves out the x region (a trainer that gathers its
	// features itself).
	NoFeatures bool
	// MaxDegree bounds a node's neighbours (for -1 fanouts); 0 means the
	// graph's own, computed by NewNode.
	MaxDegree int64
	// AddressOrder makes every batch carry its nodes' address order
	// (Batch.Rows' order), for a CPU gather or a sweep planned on the CPU;
	// a sweep planned on the GPU needs none.
	AddressOrder bool
	// DeviceSampling makes the batches DeviceBatches: sampled on a GPU
	// (sampler.GPU) when their slots are filled, not by Sample.
	DeviceSampling bool
}

// Node is homogeneous node-level neighbour sampling, PyG NeighborLoader's
// batches: the seeds' sampled neighbourhood with nodes in hop order (seeds
// first).
//
//	x           [nodes, feature_dim]  features of n_id (gathered from table "x")
//	y           [nodes] int64         labels of n_id (-1 = unlabelled; table "y")
//	n_id        [nodes] int64         global node ids
//	edge_index  [2, edges] int64      local ids; messages flow row 0 -> row 1
//	e_id        [edges] int64         the graph's id of each edge (its CSR position)
//	input_id    [seeds] int64         each seed's position in the split (PyG's input_id)
//	edge_attr   [edges, edge_dim]     features of e_id, when the dataset has them (table "edge_attr")
//	edge_weight [edges] float32       weights of e_id, when the dataset has them (table "edge_weight")
//
// with the scalar batch_size (the first batch_size nodes are the seeds) and
// the lists num_sampled_nodes (per hop, seeds first) and num_sampled_edges.
type Node struct {
	data     *datasets.Data
	smp      *sampler.Sampler
	fanouts  []int
	batch    int  // most seeds a batch
	device   bool // batches are sampled on a GPU (DeviceBatch)
	layout   Layout
	countOf  []counted // per region: what its count counts
	MaxNodes int64     // capacity of a batch in nodes
	MaxEdges int64     // and in edges
}

var _ Mode = (*Node)(nil)

// counted is what a region's count counts.
type counted uint8

const (
	inNodes counted = iota
	inEdges
	inSeeds
)

// NewNode makes the node mode over d.
func NewNode(d *datasets.Data, o NodeOptions) (*Node, error) {
	smp, err := sampler.New(&d.Graph, sampler.Options{Fanouts: o.Fanouts, Workers: o.Workers, EdgeIDs: true, NoOrder: !o.AddressOrder})
	if err != nil {
		return nil, err
	}
	if o.BatchSize < 1 {
		return nil, fmt.Errorf("batch: batch size %d", o.BatchSize)
	}
	m := &Node{data: d, smp: smp, fanouts: append([]int(nil), o.Fanouts...), batch: o.BatchSize, device: o.DeviceSampling}
	g := &d.Graph
	m.MaxNodes, m.MaxEdges = Capacity(o.BatchSize, o.Fanouts, maxDegree(g, o.MaxDegree), g.NumNodes, g.NumEdges())
	if err := m.declare(o.NoFeatures); err != nil {
		return nil, err
	}
	return m, nil
}

// declare lays out m's regions, scalars and lists for batches of up to
// m.batch seeds, m.MaxNodes nodes and m.MaxEdges edges (ErrTooLarge when
// they do not fit the protocol's 32-bit counts).
func (m *Node) declare(noFeatures bool) error {
	d := m.data
	if m.MaxNodes > 1<<31-1 || m.MaxEdges > 1<<31-1 {
		return fmt.Errorf("%w: batches of up to %d nodes and %d edges; lower the batch size or fanouts", ErrTooLarge, m.MaxNodes, m.MaxEdges)
	}
	node, edge, seed := m.region(inNodes), m.region(inEdges), m.region(inSeeds)
	if !noFeatures {
		node(Region{Name: "x", DType: string(d.FeatureDType), Shape: []int64{m.MaxNodes, int64(d.FeatureDim)}, Table: "x", IDs: "n_id"})
	}
	node(Region{Name: "y", DType: "int64", Shape: []int64{m.MaxNodes}, Table: "y", IDs: "n_id"})
	node(Region{Name: "n_id", DType: "int64", Shape: []int64{m.MaxNodes}})
	edge(Region{Name: "edge_index", DType: "int64", Shape: []int64{2, m.MaxEdges}, CountAxis: 1})
	edge(Region{Name: "e_id", DType: "int64", Shape: []int64{m.MaxEdges}})
	seed(Region{Name: "input_id", DType: "int64", Shape: []int64{int64(m.batch)}})
	if d.EdgeAttr != nil && d.EdgeDim > 0 {
		edge(Region{Name: "edge_attr", DType: string(d.EdgeDType), Shape: []int64{m.MaxEdges, int64(d.EdgeDim)}, Table: "edge_attr", IDs: "e_id"})
	}
	if d.EdgeWeight != nil {
		edge(Region{Name: "edge_weight", DType: "float32", Shape: []int64{m.MaxEdges}, Table: "edge_weight", IDs: "e_id"})
	}
	m.layout.Scalars = []string{"batch_size"}
	m.layout.Lists = []string{"num_sampled_nodes", "num_sampled_edges"}
	return m.layout.Check()
}

// region returns a function that adds a region whose count counts c.
func (m *Node) region(c counted) func(Region) {
	return func(r Region) { m.layout.Regions, m.countOf = append(m.layout.Regions, r), append(m.countOf, c) }
}

// ErrTooLarge is a request whose batches could not be addressed with the
// protocol's 32-bit counts.
var ErrTooLarge = fmt.Errorf("batch: batches too large for 32-bit counts")

// Layout implements Mode.
func (m *Node) Layout() *Layout { return &m.layout }

// NewBatch implements Mode.
func (m *Node) NewBatch() Batch { return &NodeBatch{m: m} }

// BatchBytes implements Mode: per node its id and address-order position,
// per edge its two local ids and its id (only the seeds for batches sampled
// on a GPU), and the seeds' positions (input_id).
func (m *Node) BatchBytes() int64 {
	if m.device {
		return 8*int64(m.batch) + 8*int64(2*len(m.fanouts)+4)
	}
	return 12*m.MaxNodes + 16*m.MaxEdges
}

// Inputs is a Batch that carries its seeds' positions in the split (PyG's
// input_id): SetInputs, before Sample, hands it the positions of the seeds
// Sample will get (sampler.Plan.Inputs). The batch keeps the slice until its
// next SetInputs; a batch never given any writes -1 for each seed.
type Inputs interface {
	SetInputs(pos []int64)
}

var _ Inputs = (*NodeBatch)(nil)

// SetInputs implements Inputs.
func (b *NodeBatch) SetInputs(pos []int64) { b.inputs = pos }

// InputIDs returns the positions of the batch's seeds (input_id): those
// SetInputs gave when there is one per seed, else nil.
func (b *NodeBatch) InputIDs() []int64 {
	n := len(b.seeds)
	if !b.m.device {
		n = len(b.S.NID)
		if len(b.S.NumSampledNodes) > 0 {
			n = b.S.NumSampledNodes[0]
		}
	}
	if len(b.inputs) != n {
		return nil
	}
	return b.inputs
}

// Sample implements Mode. With DeviceSampling it only records the seeds and
// the key (see DeviceBatch).
func (m *Node) Sample(seeds []int64, key uint64, b Batch) error {
	nb := b.(*NodeBatch)
	if m.device {
		n := m.data.Graph.NumNodes
		for i, v := range seeds {
			if v < 0 || v >= n {
				return fmt.Errorf("sampler: seed %d (position %d) out of range [0, %d)", v, i, n)
			}
		}
		nb.seeds, nb.key, nb.wait = append(nb.seeds[:0], seeds...), key, nil
		return nil
	}
	return m.smp.Sample(seeds, key, &nb.S)
}

// Device reports whether the mode's batches are sampled on a GPU.
func (m *Node) Device() bool { return m.device }

// NodeBatch is a batch of the Node mode.
type NodeBatch struct {
	m *Node
	// S is the sampled neighbourhood (empty for a batch sampled on a GPU).
	S sampler.Batch
	// inputs are the seeds' positions in the split (Inputs).
	inputs []int64

	// A batch sampled on a GPU (DeviceBatch): what to sample, and what
	// the GPU reported.
	seeds  []int64
	key    uint64
	counts []int64
	wait   func() error
	err    error
}

// Meta implements Batch.
func (b *NodeBatch) Meta(mt *Meta) {
	if b.m.device {
		b.deviceMeta(mt)
		return
	}
	mt.Counts = b.m.counts(mt.Counts[:0], uint32(len(b.S.NID)), uint32(len(b.S.Src)), uint32(b.S.NumSampledNodes[0]))
	mt.Scalars = append(mt.Scalars[:0], int64(b.S.NumSampledNodes[0]))
	mt.Lists = reuseLists(mt.Lists, 2)
	mt.Lists[0] = appendU32(mt.Lists[0], b.S.NumSampledNodes)
	mt.Lists[1] = appendU32(mt.Lists[1], b.S.NumSampledEdges)
}

// counts appends each region's count, given the batch's nodes, edges and seeds.
func (m *Node) counts(dst []uint32, nodes, edges, seeds uint32) []uint32 {
	for _, c := range m.countOf {
		switch c {
		case inNodes:
			dst = append(dst, nodes)
		case inEdges:
			dst = append(dst, edges)
		default:
			dst = append(dst, seeds)
		}
	}
	return dst
}

// Rows implements Batch: x and y are rows of n_id (with their address order),
// edge_attr and edge_weight rows of e_id.
func (b *NodeBatch) Rows(r int) ([]int64, []int32) {
	if b.m.countOf[r] == inEdges {
		return b.S.EID, nil // edge rows (edge_attr, edge_weight) in edge order
	}
	if len(b.S.Order) != len(b.S.NID) {
		return b.S.NID, nil
	}
	return b.S.NID, b.S.Order
}

// WriteStructure implements Batch: n_id, edge_index widened to int64, e_id
// and input_id, in pieces on up to workers goroutines.
func (b *NodeBatch) WriteStructure(region func(r int) []byte, workers int) {
	if b.m.device {
		return // written on the GPU
	}
	l := &b.m.layout
	if in := int64Region(l, region, "input_id"); in != nil {
		writeInputs(in, b.InputIDs(), b.S.NumSampledNodes[0])
	}
	var p pieces
	p.addSampled(&b.S, l, region)
	p.run(workers)
}

// int64Region is region name of layout l as int64s, nil when l has none.
func int64Region(l *Layout, region func(r int) []byte, name string) []int64 {
	if r := l.Index(name); r >= 0 {
		return int64s(region(r))
	}
	return nil
}

// addSampled adds the pieces that write a sampled neighbourhood's n_id,
// edge_index (widened to int64) and e_id into the regions of layout l.
func (p *pieces) addSampled(s *sampler.Batch, l *Layout, region func(r int) []byte) {
	nid, ei, eid := int64Region(l, region, "n_id"), int64Region(l, region, "edge_index"), int64Region(l, region, "e_id")
	n, e := len(s.NID), len(s.Src)
	p.addRanges(n, 4*piece, func(lo, hi int) { copy(nid[lo:hi], s.NID[lo:hi]) })
	p.addRanges(e, 2*piece, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			ei[k] = int64(s.Src[k])
			ei[e+k] = int64(s.Dst[k])
		}
		copy(eid[lo:hi], s.EID[lo:hi])
	})
}

// writeInputs writes a batch's input_id: pos, or -1 per seed without them.
func writeInputs(dst, pos []int64, seeds int) {
	if pos == nil {
		for i := range dst[:seeds] {
			dst[i] = -1
		}
		return
	}
	copy(dst, pos)
}

// piece is the elements one goroutine of WriteStructure writes at a time:
// writing labels, n_id and edge_index of a papers100M batch takes about
// 8 ms on one core.
const piece = 1 << 15

// pieces runs independent pieces of work on a few goroutines.
type pieces []func()

func (p *pieces) add(f func()) { *p = append(*p, f) }

// addRanges adds a piece f(lo, hi) for each range [lo, hi) of size
// elements of [0, n).
func (p *pieces) addRanges(n, size int, f func(lo, hi int)) {
	for lo := 0; lo < n; lo += size {
		hi := min(lo+size, n)
		p.add(func() { f(lo, hi) })
	}
}

func (p pieces) run(workers int) {
	if workers <= 1 || len(p) <= 1 {
		for _, f := range p {
			f()
		}
		return
	}
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range min(workers, len(p)) {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= len(p) {
					return
				}
				p[k]()
			}
		})
	}
	wg.Wait()
}

func reuseLists(l [][]uint32, n int) [][]uint32 {
	if cap(l) < n {
		l = append(l[:cap(l)], make([][]uint32, n-cap(l))...)
	}
	return l[:n]
}

func appendU32(dst []uint32, v []int) []uint32 {
	dst = dst[:0]
	for _, x := range v {
		dst = append(dst, uint32(x))
	}
	return dst
}

// int64s views 8-byte aligned bytes as int64s.
func int64s(b []byte) []int64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
}
