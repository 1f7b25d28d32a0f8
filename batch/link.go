package batch

import (
	"fmt"
	"math"
	"slices"

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
