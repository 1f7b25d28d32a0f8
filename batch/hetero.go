package batch

import (
	"fmt"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// HeteroOptions configure a Hetero mode.
type HeteroOptions struct {
	// BatchSize is the most seeds a batch has (the slots' capacity).
	BatchSize int
	// InputType is the node type of the seeds.
	InputType string
	// Fanouts[h][e] is what each dst node of edge type e (the dataset's
	// Relations order) samples at hop h+1; -1 every neighbour, 0 none.
	Fanouts [][]int
	// Workers is the goroutines one batch's sampling may use (0 = all).
	Workers int
	// AddressOrder makes every batch carry each node type's address order
	// (Batch.Rows' order), for a CPU gather.
	AddressOrder bool
	// MaxDegree bounds each edge type's rows (for -1 fanouts), one per
	// edge type; nil means the graph's own, computed by NewHetero
	// (HeteroMaxDegrees).
	MaxDegree []int64
}

// Hetero is heterogeneous node-level neighbour sampling, PyG
// NeighborLoader's HeteroData batches (sampler.HeteroSampler's semantics).
// Region names are "<store>/<attr>": the store is a node type's name, or
// "src__rel__dst" for an edge type. Per node type t, in the dataset's order:
//
//	t/x     [nodes_t, feature_dim_t]  features of t/n_id (table "t/x"; types with features)
//	t/y     [nodes_t] int64           labels of t/n_id, -1 unlabelled (table "t/y"; types with classes)
//	t/n_id  [nodes_t] int64           ids within t, in the order sampled (the input type's seeds first)
//
// per edge type e, in the dataset's order:
//
//	e/edge_index  [2, edges_e] int64  row 0: local ids into src/n_id, row 1: into dst/n_id
//	e/e_id        [edges_e] int64     each edge's position in e's CSR
//
// and <input>/input_id [seeds] int64 (each seed's position in the split).
// Scalar batch_size; lists num_sampled_nodes/<t> (hops 0..H) per node type,
// then num_sampled_edges/<e> (hops 1..H) per edge type.
type Hetero struct {
	data    *datasets.Hetero
	smp     *sampler.HeteroSampler
	input   int
	batch   int
	layout  Layout
	regions []hregion // per region: what it holds
	// MaxNodes and MaxEdges are a batch's capacity per node type and per
	// edge type (the dataset's orders).
	MaxNodes, MaxEdges []int64
}

var _ Mode = (*Hetero)(nil)

// hregion is what one region of a Hetero layout holds: a part of node
// type or edge type i.
type hregion struct {
	part hpart
	i    int
}

type hpart uint8

const (
	hX hpart = iota
	hY
	hNID
	hEdgeIndex
	hEID
	hInputID
)

// NewHetero makes the heterogeneous mode over h.
func NewHetero(h *datasets.Hetero, o HeteroOptions) (*Hetero, error) {
	if o.BatchSize < 1 {
		return nil, fmt.Errorf("batch: batch size %d", o.BatchSize)
	}
	input := -1
	for i, t := range h.NodeTypes {
		if t.Name == o.InputType {
			input = i
		}
	}
	if input < 0 {
		return nil, fmt.Errorf("batch: input type %q is not a node type of %s", o.InputType, h.Name)
	}
	smp, err := sampler.NewHetero(h, sampler.HeteroOptions{Fanouts: o.Fanouts, Workers: o.Workers, NoOrder: !o.AddressOrder})
	if err != nil {
		return nil, err
	}
	deg := o.MaxDegree
	if deg == nil {
		deg = HeteroMaxDegrees(h)
	}
	if len(deg) != len(h.Relations) {
		return nil, fmt.Errorf("batch: %d max degrees for %d edge types", len(deg), len(h.Relations))
	}
	m := &Hetero{data: h, smp: smp, input: input, batch: o.BatchSize}
	m.MaxNodes, m.MaxEdges = HeteroCapacity(h, input, o.BatchSize, o.Fanouts, deg)
	for i, n := range m.MaxNodes {
		if n > 1<<31-1 {
			return nil, fmt.Errorf("%w: up to %d %s nodes a batch; lower the batch size or fanouts", ErrTooLarge, n, h.NodeTypes[i].Name)
		}
	}
	for i, n := range m.MaxEdges {
		if n > 1<<31-1 {
			return nil, fmt.Errorf("%w: up to %d %s edges a batch; lower the batch size or fanouts", ErrTooLarge, n, h.Relations[i].EdgeType)
		}
	}
	add := func(r Region, part hpart, i int) {
		m.layout.Regions = append(m.layout.Regions, r)
		m.regions = append(m.regions, hregion{part, i})
	}
	for i, t := range h.NodeTypes {
		n, nid := m.MaxNodes[i], t.Name+"/n_id"
		if t.FeatureDim > 0 {
			add(Region{Name: t.Name + "/x", DType: string(t.FeatureDType), Shape: []int64{n, int64(t.FeatureDim)}, Table: t.Name + "/x", IDs: nid}, hX, i)
		}
		if t.NumClasses > 0 {
			add(Region{Name: t.Name + "/y", DType: "int64", Shape: []int64{n}, Table: t.Name + "/y", IDs: nid}, hY, i)
		}
		add(Region{Name: nid, DType: "int64", Shape: []int64{n}}, hNID, i)
	}
	for i, r := range h.Relations {
		e, s := m.MaxEdges[i], r.EdgeType.String()
		add(Region{Name: s + "/edge_index", DType: "int64", Shape: []int64{2, e}, CountAxis: 1}, hEdgeIndex, i)
		add(Region{Name: s + "/e_id", DType: "int64", Shape: []int64{e}}, hEID, i)
	}
	add(Region{Name: o.InputType + "/input_id", DType: "int64", Shape: []int64{int64(o.BatchSize)}}, hInputID, input)
	m.layout.Scalars = []string{"batch_size"}
	for _, t := range h.NodeTypes {
		m.layout.Lists = append(m.layout.Lists, "num_sampled_nodes/"+t.Name)
	}
	for _, r := range h.Relations {
		m.layout.Lists = append(m.layout.Lists, "num_sampled_edges/"+r.EdgeType.String())
	}
	if err := m.layout.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// HeteroMaxDegrees is each edge type's largest row (its dst nodes' most
// in-neighbours), in the dataset's order.
func HeteroMaxDegrees(h *datasets.Hetero) []int64 {
	deg := make([]int64, len(h.Relations))
	for i, r := range h.Relations {
		deg[i] = r.Graph.MaxDegree()
	}
	return deg
}

// HeteroCapacity bounds one batch's nodes per node type and edges per
// edge type: batchSize seeds of node type input, fanouts[h][e] per hop and
// edge type (-1 = all, bounded by maxDegree[e]). A hop's new nodes of a
// type are distinct and new, so never more than the type's nodes; every
// node but a repeated seed's copies is in one hop's frontier only, so an
// edge type never has more than its edges plus what its first hop draws.
func HeteroCapacity(h *datasets.Hetero, input, batchSize int, fanouts [][]int, maxDegree []int64) (maxNodes, maxEdges []int64) {
	T, E := len(h.NodeTypes), len(h.Relations)
	index := map[string]int{}
	for i, t := range h.NodeTypes {
		index[t.Name] = i
	}
	maxNodes, maxEdges = make([]int64, T), make([]int64, E)
	frontier, next, firstHop := make([]int64, T), make([]int64, T), make([]int64, E)
	frontier[input] = int64(batchSize)
	maxNodes[input] = int64(batchSize)
	for hop, fan := range fanouts {
		clear(next)
		for e, r := range h.Relations {
			k := int64(fan[e])
			if k < 0 || k > maxDegree[e] {
				k = maxDegree[e]
			}
			n := satMul(frontier[index[r.Dst]], k)
			if hop == 0 {
				firstHop[e] = n
			}
			maxEdges[e] = satAdd(maxEdges[e], n)
			next[index[r.Src]] = satAdd(next[index[r.Src]], n)
		}
		for t, nt := range h.NodeTypes {
			frontier[t] = min(next[t], nt.NumNodes)
			maxNodes[t] = satAdd(maxNodes[t], frontier[t])
		}
	}
	for t, nt := range h.NodeTypes {
		bound := nt.NumNodes
		if t == input {
			bound = satAdd(bound, int64(batchSize))
		}
		maxNodes[t] = min(maxNodes[t], bound)
	}
	for e, r := range h.Relations {
		maxEdges[e] = min(maxEdges[e], satAdd(r.Graph.NumEdges(), firstHop[e]))
	}
	return maxNodes, maxEdges
}

// Layout implements Mode.
func (m *Hetero) Layout() *Layout { return &m.layout }

// NewBatch implements Mode.
func (m *Hetero) NewBatch() Batch { return &HeteroBatch{m: m} }

// InputType is the index of the seeds' node type in the dataset's order.
func (m *Hetero) InputType() int { return m.input }

// BatchBytes implements Mode: per node its id and address-order position,
// per edge its two local ids and its id, and the seeds' positions.
func (m *Hetero) BatchBytes() int64 {
	n := 8 * int64(m.batch)
	for _, k := range m.MaxNodes {
		n = satAdd(n, 12*k)
	}
	for _, k := range m.MaxEdges {
		n = satAdd(n, 16*k)
	}
	return n
}

// Sample implements Mode: seeds are ids of the input type.
func (m *Hetero) Sample(seeds []int64, key uint64, b Batch) error {
	return m.smp.Sample(m.input, seeds, key, &b.(*HeteroBatch).S)
}

// HeteroBatch is a batch of the Hetero mode.
type HeteroBatch struct {
	m *Hetero
	// S is the sampled neighbourhood.
	S sampler.HeteroBatch
	// inputs are the seeds' positions in the split (Inputs).
	inputs []int64
}

var _ Inputs = (*HeteroBatch)(nil)

// SetInputs implements Inputs.
func (b *HeteroBatch) SetInputs(pos []int64) { b.inputs = pos }

// seeds is the batch's seed count.
func (b *HeteroBatch) seeds() int { return b.S.Nodes[b.m.input].NumSampledNodes[0] }

// InputIDs returns the positions of the batch's seeds (input_id): those
// SetInputs gave when there is one per seed, else nil.
func (b *HeteroBatch) InputIDs() []int64 {
	if len(b.inputs) != b.seeds() {
		return nil
	}
	return b.inputs
}

// Meta implements Batch.
func (b *HeteroBatch) Meta(mt *Meta) {
	s := &b.S
	mt.Counts = mt.Counts[:0]
	for _, r := range b.m.regions {
		var n int
		switch r.part {
		case hX, hY, hNID:
			n = len(s.Nodes[r.i].NID)
		case hEdgeIndex, hEID:
			n = len(s.Edges[r.i].Src)
		case hInputID:
			n = b.seeds()
		}
		mt.Counts = append(mt.Counts, uint32(n))
	}
	mt.Scalars = append(mt.Scalars[:0], int64(b.seeds()))
	mt.Lists = reuseLists(mt.Lists, len(s.Nodes)+len(s.Edges))
	for t := range s.Nodes {
		mt.Lists[t] = appendU32(mt.Lists[t], s.Nodes[t].NumSampledNodes)
	}
	for e := range s.Edges {
		mt.Lists[len(s.Nodes)+e] = appendU32(mt.Lists[len(s.Nodes)+e], s.Edges[e].NumSampledEdges)
	}
}

// Rows implements Batch: t/x and t/y are rows of t/n_id, with their
// address order when the mode has it.
func (b *HeteroBatch) Rows(r int) ([]int64, []int32) {
	nt := &b.S.Nodes[b.m.regions[r].i]
	if len(nt.Order) != len(nt.NID) {
		return nt.NID, nil
	}
	return nt.NID, nt.Order
}

// WriteStructure implements Batch: every t/n_id, e/edge_index (widened to
// int64), e/e_id and input_id, in pieces on up to workers goroutines.
func (b *HeteroBatch) WriteStructure(region func(r int) []byte, workers int) {
	var p pieces
	s := &b.S
	for k, r := range b.m.regions {
		switch r.part {
		case hNID:
			nid, dst := s.Nodes[r.i].NID, int64s(region(k))
			p.addRanges(len(nid), 4*piece, func(lo, hi int) { copy(dst[lo:hi], nid[lo:hi]) })
		case hEdgeIndex:
			et, ei := &s.Edges[r.i], int64s(region(k))
			e := len(et.Src)
			p.addRanges(e, 2*piece, func(lo, hi int) {
				for j := lo; j < hi; j++ {
					ei[j], ei[e+j] = int64(et.Src[j]), int64(et.Dst[j])
				}
			})
		case hEID:
			eid, dst := s.Edges[r.i].EID, int64s(region(k))
			p.addRanges(len(eid), 4*piece, func(lo, hi int) { copy(dst[lo:hi], eid[lo:hi]) })
		case hInputID:
			writeInputs(int64s(region(k)), b.InputIDs(), b.seeds())
		}
	}
	p.run(workers)
}
