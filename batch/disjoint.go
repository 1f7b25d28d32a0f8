package batch

import (
	"errors"
	"fmt"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// Time attributes a Disjoint mode filters neighbours by (DisjointOptions.TimeAttr).
const (
	NodeTime = "node_time"
	EdgeTime = "edge_time"
)

// DisjointOptions configure a Disjoint mode.
type DisjointOptions struct {
	// Node: the batch size, fanouts, workers, NoFeatures, MaxDegree and
	// AddressOrder, as for a Node mode. DeviceSampling is refused: the GPU
	// sampler does not sample disjoint subgraphs.
	Node NodeOptions
	// TimeAttr is "" (disjoint subgraphs without a time filter), NodeTime
	// or EdgeTime: the dataset's array whose times filter neighbours.
	TimeAttr string
	// Strategy picks among eligible neighbours (with a TimeAttr).
	Strategy sampler.Strategy
	// SeedTimes, when set, holds the time of every seed of the split the
	// batches' seeds come from, by position (PyG's input_time): a batch
	// finds its seeds' times at the positions SetInputs hands it. Nil: each
	// seed's own node time (TimeAttr NodeTime only, as in PyG).
	SeedTimes []int64
}

// Disjoint is PyG NeighborLoader's disjoint=True and temporal sampling on a
// homogeneous graph: one subgraph per seed (sampler.Disjoint has the rules
// and the order). Its batches have a Node batch's regions, but n_id may hold
// a node many times (once per subgraph that reaches it), and more:
//
//	batch      [nodes] int64   the subgraph of each node: the position (0..batch_size-1) of its seed
//	node_time  [nodes] int64   with TimeAttr NodeTime: the time of each node (PyG's data.time of the batch)
//	edge_time  [edges] int64   with TimeAttr EdgeTime: the time of each edge
//
// with the scalar batch_size and the lists num_sampled_nodes and
// num_sampled_edges.
type Disjoint struct {
	node      Node // the layout, capacities and dataset
	smp       *sampler.Disjoint
	seedTimes []int64
	nodeTime  []int64 // the dataset's, served per node (TimeAttr NodeTime)
	edgeTime  []int64 // or per edge (TimeAttr EdgeTime)
	MaxNodes  int64   // capacity of a batch in nodes
	MaxEdges  int64   // and in edges
}

var _ Mode = (*Disjoint)(nil)

// NewDisjoint makes the disjoint mode over d.
func NewDisjoint(d *datasets.Data, o DisjointOptions) (*Disjoint, error) {
	no := o.Node
	if no.DeviceSampling {
		return nil, errors.New("batch: disjoint and temporal batches are sampled on the CPU, not by the GPU sampler")
	}
	if no.BatchSize < 1 {
		return nil, fmt.Errorf("batch: batch size %d", no.BatchSize)
	}
	so := sampler.DisjointOptions{Fanouts: no.Fanouts, Workers: no.Workers, EdgeIDs: true, NoOrder: !no.AddressOrder, Strategy: o.Strategy}
	switch o.TimeAttr {
	case "":
		if o.SeedTimes != nil {
			return nil, errors.New("batch: seed times without a time attribute to compare them with")
		}
		if o.Strategy != sampler.Uniform {
			return nil, fmt.Errorf("batch: temporal strategy %q without a time attribute", o.Strategy)
		}
	case NodeTime:
		if d.NodeTime == nil {
			return nil, fmt.Errorf("batch: dataset %s has no node_time for temporal sampling", d.Name)
		}
		so.NodeTime = d.NodeTime
	case EdgeTime:
		if d.EdgeTime == nil {
			return nil, fmt.Errorf("batch: dataset %s has no edge_time for temporal sampling", d.Name)
		}
		if o.SeedTimes == nil {
			return nil, errors.New("batch: temporal sampling on edge_time needs the seeds' times (input_time): a seed has no edge time of its own")
		}
		so.EdgeTime = d.EdgeTime
	default:
		return nil, fmt.Errorf("batch: time attribute %q (want %q or %q)", o.TimeAttr, NodeTime, EdgeTime)
	}
	smp, err := sampler.NewDisjoint(&d.Graph, so)
	if err != nil {
		return nil, err
	}
	g := &d.Graph
	m := &Disjoint{smp: smp, seedTimes: o.SeedTimes}
	m.MaxNodes, m.MaxEdges = DisjointCapacity(no.BatchSize, no.Fanouts, maxDegree(g, no.MaxDegree), g.NumNodes, g.NumEdges())
	m.node = Node{data: d, fanouts: append([]int(nil), no.Fanouts...), batch: no.BatchSize, MaxNodes: m.MaxNodes, MaxEdges: m.MaxEdges}
	if err := m.node.declare(no.NoFeatures); err != nil {
		return nil, err
	}
	m.node.region(inNodes)(Region{Name: "batch", DType: "int64", Shape: []int64{m.MaxNodes}})
	switch o.TimeAttr { // the times the batch was sampled by, as PyG's batches carry them
	case NodeTime:
		m.nodeTime = d.NodeTime
		m.node.region(inNodes)(Region{Name: NodeTime, DType: "int64", Shape: []int64{m.MaxNodes}})
	case EdgeTime:
		m.edgeTime = d.EdgeTime
		m.node.region(inEdges)(Region{Name: EdgeTime, DType: "int64", Shape: []int64{m.MaxEdges}})
	}
	if err := m.node.layout.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// Layout implements Mode.
func (m *Disjoint) Layout() *Layout { return &m.node.layout }

// NewBatch implements Mode.
func (m *Disjoint) NewBatch() Batch { return &DisjointBatch{m: m} }

// BatchBytes implements Mode: per node its id, subgraph and address-order
// position, per edge its two local ids and its id.
func (m *Disjoint) BatchBytes() int64 { return 16*m.MaxNodes + 16*m.MaxEdges }

// Temporal reports whether the mode filters neighbours by time.
func (m *Disjoint) Temporal() bool { return m.smp.Temporal() }

// Sample implements Mode. With SeedTimes the batch must have been handed
// its seeds' positions (SetInputs) first.
func (m *Disjoint) Sample(seeds []int64, key uint64, b Batch) error {
	db := b.(*DisjointBatch)
	var times []int64
	if m.seedTimes != nil {
		if len(db.inputs) != len(seeds) {
			return fmt.Errorf("batch: %d seed positions for %d seeds: the seeds' times are found by their positions", len(db.inputs), len(seeds))
		}
		db.times = db.times[:0]
		for i, p := range db.inputs {
			if p < 0 || p >= int64(len(m.seedTimes)) {
				return fmt.Errorf("batch: seed %d is at position %d, outside the %d seed times", i, p, len(m.seedTimes))
			}
			db.times = append(db.times, m.seedTimes[p])
		}
		times = db.times
	}
	return m.smp.Sample(seeds, times, key, &db.S)
}

// DisjointBatch is a batch of the Disjoint mode.
type DisjointBatch struct {
	m *Disjoint
	// S is the sampled batch.
	S      sampler.DisjointBatch
	inputs []int64 // the seeds' positions in the split (Inputs)
	times  []int64 // the seeds' times, when the mode has SeedTimes
}

var _ Inputs = (*DisjointBatch)(nil)

// SetInputs implements Inputs.
func (b *DisjointBatch) SetInputs(pos []int64) { b.inputs = pos }

// Meta implements Batch.
func (b *DisjointBatch) Meta(mt *Meta) {
	seeds := b.S.NumSampledNodes[0]
	mt.Counts = b.m.node.counts(mt.Counts[:0], uint32(len(b.S.NID)), uint32(len(b.S.Src)), uint32(seeds))
	mt.Scalars = append(mt.Scalars[:0], int64(seeds))
	mt.Lists = reuseLists(mt.Lists, 2)
	mt.Lists[0] = appendU32(mt.Lists[0], b.S.NumSampledNodes)
	mt.Lists[1] = appendU32(mt.Lists[1], b.S.NumSampledEdges)
}

// Rows implements Batch: x and y are rows of n_id (with their address order),
// edge_attr and edge_weight rows of e_id.
func (b *DisjointBatch) Rows(r int) ([]int64, []int32) {
	if b.m.node.countOf[r] == inEdges {
		return b.S.EID, nil
	}
	if len(b.S.Order) != len(b.S.NID) {
		return b.S.NID, nil
	}
	return b.S.NID, b.S.Order
}

// WriteStructure implements Batch: n_id, edge_index widened to int64, e_id,
// input_id, batch and the node or edge times, in pieces on up to workers
// goroutines.
func (b *DisjointBatch) WriteStructure(region func(r int) []byte, workers int) {
	l := &b.m.node.layout
	sub := int64Region(l, region, "batch")
	seeds := b.S.NumSampledNodes[0]
	if in := int64Region(l, region, "input_id"); in != nil {
		pos := b.inputs
		if len(pos) != seeds {
			pos = nil
		}
		writeInputs(in, pos, seeds)
	}
	var p pieces
	p.addSampled(&b.S.Batch, l, region)
	p.addRanges(len(b.S.Subgraph), 4*piece, func(lo, hi int) {
		for i, s := range b.S.Subgraph[lo:hi] {
			sub[lo+i] = int64(s)
		}
	})
	addTimes(&p, int64Region(l, region, NodeTime), b.S.NID, b.m.nodeTime)
	addTimes(&p, int64Region(l, region, EdgeTime), b.S.EID, b.m.edgeTime)
	p.run(workers)
}

// addTimes adds pieces writing dst[i] = times[ids[i]] (nothing when dst is
// nil: the layout has no such region).
func addTimes(p *pieces, dst, ids, times []int64) {
	if dst == nil {
		return
	}
	p.addRanges(len(ids), 4*piece, func(lo, hi int) {
		for i, id := range ids[lo:hi] {
			dst[lo+i] = times[id]
		}
	})
}
