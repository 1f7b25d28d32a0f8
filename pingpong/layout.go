package pingpong

import "fmt"

// Alignment of every region inside a slot, and of slots inside a ring: 128
// bytes, so a GPU writes whole cache lines and a view of any region is
// aligned for every element type.
const Alignment = 128

// Region is one array inside a slot.
type Region struct {
	Name   string // "x", "y", "n_id", "edge_index"
	Offset int64  // from the start of the slot
	Bytes  int64  // capacity
	DType  string // element type: "float32", "float16", "bfloat16", "int64"
}

// Layout is the arrangement of one slot; every slot of a ring has the same.
//
//	x           MaxNodes x RowBytes    features of n_id, hop order
//	y           MaxNodes x int64       labels of n_id (-1 = unlabelled)
//	n_id        MaxNodes x int64       global ids, hop order (seeds first)
//	edge_index  2 x MaxEdges x int64   for a batch of E edges: sources at
//	                                   [0, E), targets at [E, 2E): a
//	                                   contiguous [2, E] array
type Layout struct {
	MaxNodes, MaxEdges int64
	Hops               int
	FeatureDim         int
	FeatureDType       string
	RowBytes           int
	SlotBytes          int64
	Regions            []Region
}

// NewLayout lays out a slot for batches of at most maxNodes nodes and
// maxEdges edges.
func NewLayout(maxNodes, maxEdges int64, hops, featureDim int, featureDType string, rowBytes int) (Layout, error) {
	if maxNodes <= 0 || maxEdges < 0 || featureDim <= 0 || rowBytes <= 0 {
		return Layout{}, fmt.Errorf("pingpong: bad slot capacity (%d nodes, %d edges, %d-byte rows)", maxNodes, maxEdges, rowBytes)
	}
	l := Layout{MaxNodes: maxNodes, MaxEdges: maxEdges, Hops: hops, FeatureDim: featureDim, FeatureDType: featureDType, RowBytes: rowBytes}
	var off int64
	add := func(name string, bytes int64, dtype string) {
		l.Regions = append(l.Regions, Region{Name: name, Offset: off, Bytes: bytes, DType: dtype})
		off += alignUp(max(bytes, 1), Alignment)
	}
	add("x", maxNodes*int64(rowBytes), featureDType)
	add("y", maxNodes*8, "int64")
	add("n_id", maxNodes*8, "int64")
	add("edge_index", 2*maxEdges*8, "int64")
	l.SlotBytes = off
	return l, nil
}

// Region returns the named region; it panics for a name the layout lacks.
func (l *Layout) Region(name string) Region {
	for _, r := range l.Regions {
		if r.Name == name {
			return r
		}
	}
	panic("pingpong: no region " + name)
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// Capacity bounds the nodes and edges of one sampled batch: batchSize seeds
// and fanouts per hop (-1 = all neighbours, bounded by maxDegree), never more
// than the graph's nodes and edges. Each node samples at most once, so the
// edges of a batch never exceed the graph's.
func Capacity(batchSize int, fanouts []int, maxDegree, numNodes, numEdges int64) (maxNodes, maxEdges int64) {
	frontier := int64(batchSize)
	maxNodes = frontier
	for _, f := range fanouts {
		k := int64(f)
		if f < 0 || k > maxDegree {
			k = maxDegree
		}
		e := satMul(frontier, k)
		maxEdges = satAdd(maxEdges, e)
		frontier = e
		maxNodes = satAdd(maxNodes, e)
	}
	return min(maxNodes, numNodes), min(maxEdges, numEdges)
}

const satLimit = int64(1) << 62

func satMul(a, b int64) int64 {
	if a != 0 && b > satLimit/a {
		return satLimit
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > satLimit-b {
		return satLimit
	}
	return a + b
}
