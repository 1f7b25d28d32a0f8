package batch

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// NegMode is how a Link mode adds negative pairs (PyG's NegativeSampling).
type NegMode uint8

const (
	// NegNone adds no negatives.
	NegNone NegMode = iota
	// NegBinary adds ceil(positives × amount) random pairs, both ends
	// drawn uniformly from all nodes, labelled 0.
	NegBinary
	// NegTriplet adds amount random destinations per positive pair.
	NegTriplet
)

// String is the mode's name in PyG ("binary", "triplet"; "" for none).
func (n NegMode) String() string {
	switch n {
	case NegBinary:
		return "binary"
	case NegTriplet:
		return "triplet"
	}
	return ""
}

// LinkOptions configure a Link mode. Node.BatchSize is the most positive
// pairs a batch has; the rest of Node configures the neighbour sampling as
// for a Node mode (DeviceSampling is not supported).
type LinkOptions struct {
	Node NodeOptions
	// Neg and Amount: the negative sampling. Amount is a ratio (> 0) for
	// NegBinary and an integer (>= 1) for NegTriplet.
	Neg    NegMode
	Amount float64
}

// Link is homogeneous link-level neighbour sampling, PyG
// LinkNeighborLoader's batches (its non-disjoint, non-temporal sampling).
// Sample's seeds are positions of pairs in the split (not node ids): a batch
// of B positive pairs gets its negatives, drawn from the batch's key, and the
// neighbourhood of the unique endpoints of all its pairs, which are its seed
// nodes in ascending id order. Regions: those of a Node batch but input_id
// (x, y, n_id, edge_index, e_id, edge_attr, edge_weight), then
//
//	input_id         [B] int64         each positive pair's position in the split
//
// and for NegNone and NegBinary (P pairs: the B positives, then the negatives)
//
//	edge_label_index [2, P] int64      local ids (rows of n_id) of each pair's ends
//	edge_label       [P] float32       1 for positives, 0 for negatives (NegBinary on a
//	                                   split without labels)
//	edge_label       [P] int64         the split's labels, plus 1 under NegBinary when the
//	                                   smallest is 0, and 0 for negatives (a split with labels)
//
// or for NegTriplet (k = Amount)
//
//	src_index        [B] int64         local id of each positive's source
//	dst_pos_index    [B] int64         and of its destination
//	dst_neg_index    [B, k] int64      and of its k negative destinations
//
// with the lists num_sampled_nodes (per hop, seed nodes first) and
// num_sampled_edges.
type Link struct {
	data     *datasets.Data
	split    *datasets.LinkSplit
	smp      *sampler.Sampler
	batch    int // most positives a batch
	neg      NegMode
	amount   float64
	k        int  // NegTriplet: negatives per positive
	addOne   bool // labels get +1 (NegBinary over labels whose minimum is 0)
	layout   Layout
	countOf  []linkCount
	MaxNodes int64 // capacity of a batch in nodes
	MaxEdges int64 // and in edges
	MaxPairs int64 // and in pairs (edge_label_index)
}

var _ Mode = (*Link)(nil)

// linkCount is what a link region's count counts.
type linkCount uint8

const (
	linkNodes linkCount = iota
	linkEdges
	linkPositives
	linkPairs
)

// NewLink makes the link mode over the pairs of split, a link split of d
// (or pairs given by a trainer, checked against the graph).
func NewLink(d *datasets.Data, split *datasets.LinkSplit, o LinkOptions) (*Link, error) {
	if o.Node.DeviceSampling {
		return nil, fmt.Errorf("batch: link batches are sampled on the CPU only")
	}
	if o.Node.BatchSize < 1 {
		return nil, fmt.Errorf("batch: batch size %d", o.Node.BatchSize)
	}
	n := d.Graph.NumNodes
	if int64(len(split.Dst)) != split.Len() || split.Label != nil && int64(len(split.Label)) != split.Len() {
		return nil, fmt.Errorf("batch: a link split of %d sources, %d destinations and %d labels", len(split.Src), len(split.Dst), len(split.Label))
	}
	m := &Link{data: d, split: split, batch: o.Node.BatchSize, neg: o.Neg, amount: o.Amount}
	B := int64(o.Node.BatchSize)
	seedNodes := 2 * B
	m.MaxPairs = B
	switch o.Neg {
	case NegNone:
	case NegBinary:
		if !(o.Amount > 0) || math.IsInf(o.Amount, 0) || o.Amount > 1<<20 {
			return nil, fmt.Errorf("batch: binary negative sampling amount %v, want > 0", o.Amount)
		}
		m.MaxPairs += numNeg(o.Node.BatchSize, o.Amount)
		seedNodes = 2 * m.MaxPairs
	case NegTriplet:
		if o.Amount < 1 || o.Amount != math.Trunc(o.Amount) || o.Amount > 1<<20 {
			return nil, fmt.Errorf("batch: triplet negative sampling amount %v, want an integer >= 1", o.Amount)
		}
		m.k = int(o.Amount)
		seedNodes = (2 + int64(m.k)) * B
	default:
		return nil, fmt.Errorf("batch: negative sampling mode %d", o.Neg)
	}
	if seedNodes > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d seed nodes a batch", ErrTooLarge, seedNodes)
	}
	seedNodes = min(seedNodes, n)
	if seedNodes < 1 {
		return nil, fmt.Errorf("batch: a graph without nodes")
	}
	if split.Label != nil && o.Neg == NegBinary && len(split.Label) > 0 && slices.Min(split.Label) == 0 {
		m.addOne = true
	}
	if split.Label != nil && o.Neg == NegTriplet {
		return nil, fmt.Errorf("batch: triplet negative sampling takes no edge labels (PyG's rule)")
	}
	// The neighbourhood is a Node mode's of the seed nodes; its regions
	// are the node mode's, less input_id (counted in seed nodes there).
	no := o.Node
	no.BatchSize = int(seedNodes)
	node, err := NewNode(d, no)
	if err != nil {
		return nil, err
	}
	m.smp, m.MaxNodes, m.MaxEdges = node.smp, node.MaxNodes, node.MaxEdges
	for i, r := range node.layout.Regions {
		if r.Name == "input_id" {
			continue
		}
		c := linkNodes
		if node.countOf[i] == inEdges {
			c = linkEdges
		}
		m.add(r, c)
	}
	m.add(Region{Name: "input_id", DType: "int64", Shape: []int64{B}}, linkPositives)
	if o.Neg == NegTriplet {
		m.add(Region{Name: "src_index", DType: "int64", Shape: []int64{B}}, linkPositives)
		m.add(Region{Name: "dst_pos_index", DType: "int64", Shape: []int64{B}}, linkPositives)
		m.add(Region{Name: "dst_neg_index", DType: "int64", Shape: []int64{B, int64(m.k)}}, linkPositives)
	} else {
		m.add(Region{Name: "edge_label_index", DType: "int64", Shape: []int64{2, m.MaxPairs}, CountAxis: 1}, linkPairs)
		switch {
		case split.Label != nil:
			m.add(Region{Name: "edge_label", DType: "int64", Shape: []int64{m.MaxPairs}}, linkPairs)
		case o.Neg == NegBinary:
			m.add(Region{Name: "edge_label", DType: "float32", Shape: []int64{m.MaxPairs}}, linkPairs)
		}
	}
	m.layout.Lists = []string{"num_sampled_nodes", "num_sampled_edges"}
	if err := m.layout.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Link) add(r Region, c linkCount) {
	m.layout.Regions, m.countOf = append(m.layout.Regions, r), append(m.countOf, c)
}

// numNeg is PyG's number of binary negatives for b positives.
func numNeg(b int, amount float64) int64 { return int64(math.Ceil(float64(b) * amount)) }

// Layout implements Mode.
func (m *Link) Layout() *Layout { return &m.layout }

// NewBatch implements Mode.
func (m *Link) NewBatch() Batch { return &LinkBatch{m: m} }

// BatchBytes implements Mode: a node batch's, and per end of a pair its
// global id, its local id and its place among the seed nodes, and per
// positive its position in the split.
func (m *Link) BatchBytes() int64 {
	ends := 2 * m.MaxPairs
	if m.neg == NegTriplet {
		ends = int64(2+m.k) * int64(m.batch)
	}
	return 12*m.MaxNodes + 16*m.MaxEdges + 24*ends + 8*int64(m.batch)
}

// Split is the mode's pairs.
func (m *Link) Split() *datasets.LinkSplit { return m.split }

// LinkBatch is a batch of the Link mode.
type LinkBatch struct {
	m *Link
	// S is the sampled neighbourhood of the batch's seed nodes.
	S sampler.Batch
	// Pos are the positions in the split of the batch's positive pairs.
	Pos []int64
	// Ends are the global ids of the pairs' ends: NegBinary and NegNone
	// the P sources then the P destinations (positives first); NegTriplet
	// the B sources, the B destinations, then the B×k negatives (row-major).
	Ends []int64
	// Local are Ends as local ids (rows of S.NID).
	Local []int64
	seeds []int64
}

// Sample implements Mode: pairs are positions in the split.
func (m *Link) Sample(pairs []int64, key uint64, b Batch) error {
	lb := b.(*LinkBatch)
	sp, n := m.split, m.data.Graph.NumNodes
	B := len(pairs)
	if B > m.batch {
		return fmt.Errorf("batch: %d pairs for a batch of at most %d", B, m.batch)
	}
	lb.Pos = append(lb.Pos[:0], pairs...)
	src := lb.Ends[:0] // the ends, sources first
	P := B
	if m.neg == NegBinary {
		P += int(numNeg(B, m.amount))
	}
	for i, p := range pairs {
		if p < 0 || p >= sp.Len() {
			return fmt.Errorf("batch: pair %d (position %d) outside the split's %d", p, i, sp.Len())
		}
		src = append(src, sp.Src[p])
	}
	r := negRNG{mix64(key ^ 0x6E656761746976)} // "negativ"
	switch m.neg {
	case NegBinary:
		for range P - B {
			src = append(src, int64(r.below(uint64(n))))
		}
		for _, p := range pairs {
			src = append(src, sp.Dst[p])
		}
		for range P - B {
			src = append(src, int64(r.below(uint64(n))))
		}
	case NegTriplet:
		for _, p := range pairs {
			src = append(src, sp.Dst[p])
		}
		for range B * m.k {
			src = append(src, int64(r.below(uint64(n))))
		}
	default:
		for _, p := range pairs {
			src = append(src, sp.Dst[p])
		}
	}
	lb.Ends = src
	// The seed nodes: the unique ends, ascending (PyG's unique).
	lb.seeds = append(lb.seeds[:0], lb.Ends...)
	slices.Sort(lb.seeds)
	lb.seeds = slices.Compact(lb.seeds)
	lb.Local = lb.Local[:0]
	for _, v := range lb.Ends {
		i, _ := slices.BinarySearch(lb.seeds, v)
		lb.Local = append(lb.Local, int64(i))
	}
	return m.smp.Sample(lb.seeds, key, &lb.S)
}

// Meta implements Batch.
func (b *LinkBatch) Meta(mt *Meta) {
	s := &b.S
	mt.Counts = mt.Counts[:0]
	for _, c := range b.m.countOf {
		switch c {
		case linkNodes:
			mt.Counts = append(mt.Counts, uint32(len(s.NID)))
		case linkEdges:
			mt.Counts = append(mt.Counts, uint32(len(s.Src)))
		case linkPositives:
			mt.Counts = append(mt.Counts, uint32(len(b.Pos)))
		default:
			mt.Counts = append(mt.Counts, uint32(len(b.Ends)/2))
		}
	}
	mt.Scalars = mt.Scalars[:0]
	mt.Lists = reuseLists(mt.Lists, 2)
	mt.Lists[0] = appendU32(mt.Lists[0], s.NumSampledNodes)
	mt.Lists[1] = appendU32(mt.Lists[1], s.NumSampledEdges)
}

// Rows implements Batch: node regions are rows of n_id (with their address
// order), edge regions rows of e_id.
func (b *LinkBatch) Rows(r int) ([]int64, []int32) {
	if b.m.countOf[r] == linkEdges {
		return b.S.EID, nil
	}
	if len(b.S.Order) != len(b.S.NID) {
		return b.S.NID, nil
	}
	return b.S.NID, b.S.Order
}

// WriteStructure implements Batch.
func (b *LinkBatch) WriteStructure(region func(r int) []byte, workers int) {
	var nid, ei, eid []int64
	B, L := len(b.Pos), b.Local
	for r, reg := range b.m.layout.Regions {
		if reg.Table != "" {
			continue
		}
		switch reg.Name {
		case "n_id":
			nid = int64s(region(r))
		case "edge_index":
			ei = int64s(region(r))
		case "e_id":
			eid = int64s(region(r))
		case "input_id":
			copy(int64s(region(r)), b.Pos)
		case "edge_label_index":
			copy(int64s(region(r)), L)
		case "edge_label":
			b.writeLabels(region(r), reg.DType)
		case "src_index":
			copy(int64s(region(r)), L[:B])
		case "dst_pos_index":
			copy(int64s(region(r)), L[B:2*B])
		case "dst_neg_index":
			copy(int64s(region(r)), L[2*B:])
		}
	}
	var p pieces
	p.addSampled(&b.S, nid, ei, eid)
	p.run(workers)
}

// writeLabels writes edge_label: the positives' then 0 per negative.
func (b *LinkBatch) writeLabels(dst []byte, dtype string) {
	P, sp := len(b.Ends)/2, b.m.split
	if dtype == "float32" {
		f := float32s(dst)[:P]
		clear(f)
		for i := range b.Pos {
			f[i] = 1
		}
		return
	}
	l := int64s(dst)[:P]
	clear(l)
	for i, p := range b.Pos {
		l[i] = int64(sp.Label[p])
		if b.m.addOne {
			l[i]++
		}
	}
}

// float32s views 4-byte aligned bytes as float32s.
func float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// negRNG is a SplitMix64 stream for the negatives.
type negRNG struct{ s uint64 }

func (r *negRNG) below(n uint64) uint64 {
	for {
		r.s += 0x9E3779B97F4A7C15
		hi, lo := bits.Mul64(mix64(r.s), n)
		if lo >= n || lo >= -n%n {
			return hi
		}
	}
}

// mix64 is SplitMix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
