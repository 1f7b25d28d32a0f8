package datasets

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// FormatVersionHetero is the on-disk version of heterogeneous datasets;
// homogeneous ones stay FormatVersion.
const FormatVersionHetero = 2

// ErrHetero is the error Open returns for a heterogeneous dataset unless
// OpenOptions.AllowHetero is set.
var ErrHetero = errors.New("the dataset is heterogeneous (node and edge types)")

// Hetero is a heterogeneous dataset in memory: typed nodes, each type with
// its own features, labels, splits and times, and one CSR per edge type
// (src, rel, dst) with a row per dst node listing src ids.
type Hetero struct {
	Name      string
	Source    string
	NodeTypes []*NodeType
	Relations []*Relation
}

// NodeType is one node type. FeatureDim 0 means no features; Labels nil
// (and NumClasses 0) no labels.
type NodeType struct {
	Name         string
	NumNodes     int64
	FeatureDim   int
	FeatureDType DType
	Features     []byte
	NumClasses   int
	Labels       []int32 // -1 = unlabelled
	Splits       map[string][]int64
	Time         []int64 // optional, one per node
}

// EdgeType names a relation: edges from Src nodes to Dst nodes.
type EdgeType struct {
	Src, Rel, Dst string
}

func (t EdgeType) String() string { return t.Src + "__" + t.Rel + "__" + t.Dst }

// Relation is one edge type's graph: Graph.NumNodes rows (the Dst type's
// nodes), indices into the Src type's nodes (Graph.NumSrcNodes).
type Relation struct {
	EdgeType
	Graph Graph
}

// NodeType returns the node type called name, or nil.
func (h *Hetero) NodeType(name string) *NodeType {
	for _, t := range h.NodeTypes {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Relation returns the relation of type t, or nil.
func (h *Hetero) Relation(t EdgeType) *Relation {
	for _, r := range h.Relations {
		if r.EdgeType == t {
			return r
		}
	}
	return nil
}

// typeName is what node type and relation names may be: they become file
// names.
var typeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func checkTypeName(kind, s string) error {
	if !typeName.MatchString(s) || strings.Contains(s, "__") || len(s) > 64 {
		return fmt.Errorf("%s name %q: want letters, digits, '_' and '-' (no \"__\"), at most 64", kind, s)
	}
	return nil
}

// Validate checks every node type and relation.
func (h *Hetero) Validate() error { return h.validate(1) }

func (h *Hetero) validate(workers int) error {
	if len(h.NodeTypes) == 0 {
		return errors.New("hetero: no node types")
	}
	seen := map[string]bool{}
	for _, t := range h.NodeTypes {
		if err := checkTypeName("node type", t.Name); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("hetero: node type %q twice", t.Name)
		}
		seen[t.Name] = true
		if err := t.validate(); err != nil {
			return fmt.Errorf("node type %s: %w", t.Name, err)
		}
	}
	rels := map[EdgeType]bool{}
	for _, r := range h.Relations {
		if err := checkTypeName("relation", r.Rel); err != nil {
			return err
		}
		src, dst := h.NodeType(r.Src), h.NodeType(r.Dst)
		if src == nil || dst == nil || rels[r.EdgeType] {
			return fmt.Errorf("edge type %s: unknown node type or listed twice", r.EdgeType)
		}
		rels[r.EdgeType] = true
		if r.Graph.NumNodes != dst.NumNodes || r.Graph.SrcNodes() != src.NumNodes {
			return fmt.Errorf("edge type %s: %d rows and %d source nodes, want %d %s and %d %s", r.EdgeType,
				r.Graph.NumNodes, r.Graph.SrcNodes(), dst.NumNodes, dst.Name, src.NumNodes, src.Name)
		}
		if err := r.Graph.validate(workers); err != nil {
			return fmt.Errorf("edge type %s: %w", r.EdgeType, err)
		}
	}
	return nil
}

func (t *NodeType) validate() error {
	n := t.NumNodes
	if n < 0 {
		return fmt.Errorf("negative node count %d", n)
	}
	if t.FeatureDim < 0 || t.FeatureDim > 0 && !t.FeatureDType.Valid() {
		return fmt.Errorf("features: dim %d of type %q", t.FeatureDim, t.FeatureDType)
	}
	if want := n * int64(t.FeatureDim*t.FeatureDType.Size()); t.FeatureDim > 0 && int64(len(t.Features)) != want {
		return fmt.Errorf("features: %d bytes, want %d", len(t.Features), want)
	}
	if t.Labels != nil {
		if int64(len(t.Labels)) != n || t.NumClasses <= 0 {
			return fmt.Errorf("labels: %d for %d nodes, %d classes", len(t.Labels), n, t.NumClasses)
		}
		for i, y := range t.Labels {
			if y < -1 || int(y) >= t.NumClasses {
				return fmt.Errorf("labels: node %d has label %d outside [0, %d)", i, y, t.NumClasses)
			}
		}
	} else if t.NumClasses != 0 {
		return fmt.Errorf("num_classes %d without labels", t.NumClasses)
	}
	for name, ids := range t.Splits {
		if !knownSplit(name) {
			return fmt.Errorf("unknown split %q", name)
		}
		for i, v := range ids {
			if v < 0 || v >= n {
				return fmt.Errorf("split %s[%d] = %d out of range [0, %d)", name, i, v, n)
			}
		}
	}
	if t.Time != nil && int64(len(t.Time)) != n {
		return fmt.Errorf("time: %d entries for %d nodes", len(t.Time), n)
	}
	return nil
}

// ToUndirected returns h with every relation made two-way, as PyG's
// ToUndirected does: a relation between two node types gets its reverse,
// (dst, "rev_"+rel, src), the transpose; a relation within one node type is
// symmetrised in place (MakeUndirected). h is not modified; node types are
// shared with the result. A reverse relation that already exists is left
// as it is.
func (h *Hetero) ToUndirected(workers int) (*Hetero, error) {
	out := &Hetero{Name: h.Name, Source: h.Source + " --undirected", NodeTypes: h.NodeTypes}
	for _, r := range h.Relations {
		if r.Src == r.Dst {
			g := r.Graph
			g.NumSrcNodes = 0
			u, err := MakeUndirected(&g, workers)
			if err != nil {
				return nil, fmt.Errorf("edge type %s: %w", r.EdgeType, err)
			}
			u.NumSrcNodes = r.Graph.NumSrcNodes
			out.Relations = append(out.Relations, &Relation{EdgeType: r.EdgeType, Graph: u})
			continue
		}
		out.Relations = append(out.Relations, r)
	}
	for _, r := range h.Relations {
		rev := EdgeType{Src: r.Dst, Rel: "rev_" + r.Rel, Dst: r.Src}
		if r.Src == r.Dst || h.Relation(rev) != nil {
			continue
		}
		g := r.Graph
		if g.NumSrcNodes == 0 {
			g.NumSrcNodes = g.NumNodes
		}
		t, _, err := Transpose(&g, workers)
		if err != nil {
			return nil, fmt.Errorf("edge type %s: %w", r.EdgeType, err)
		}
		out.Relations = append(out.Relations, &Relation{EdgeType: rev, Graph: t})
	}
	return out, out.validate(workers)
}
