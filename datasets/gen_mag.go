package datasets

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// magShape is ogbn-mag at scale 1: node types, relations (src, rel, dst)
// with their edge counts, the paper classes (venues) and split.
var magShape = struct {
	nodes []struct {
		name string
		n    int64
	}
	rels []struct {
		src, rel, dst string
		e             int64
	}
	dim, classes       int
	train, valid, test int64
}{
	nodes: []struct {
		name string
		n    int64
	}{
		{"paper", 736_389}, {"author", 1_134_649}, {"institution", 8_740}, {"field_of_study", 59_965},
	},
	rels: []struct {
		src, rel, dst string
		e             int64
	}{
		{"author", "affiliated_with", "institution", 1_043_998},
		{"author", "writes", "paper", 7_145_660},
		{"paper", "cites", "paper", 5_416_271},
		{"paper", "has_topic", "field_of_study", 7_505_078},
	},
	dim: 128, classes: 349,
	train: 629_571, valid: 64_879, test: 41_939,
}

// genMagHomophily is the probability that an edge's second end is drawn
// from the first end's class: low enough that one relation alone does not
// give a paper's venue away, high enough that all of them together do.
const genMagHomophily = 0.3

// Random streams of the mag generator.
const (
	streamMagClass uint64 = iota + 128
	streamMagEdge
	streamMagFeat
	streamMagSplit
	streamMagTime
)

// IsHeteroPreset reports whether like names a heterogeneous shape
// (GenerateHetero's, not Generate's): "mag".
func IsHeteroPreset(like string) bool { return strings.EqualFold(like, "mag") }

// GenerateHetero builds a synthetic heterogeneous dataset shaped like
// ogbn-mag (opts.Like "mag"): papers, authors, institutions and fields of
// study at opts.Scale of ogbn-mag's counts, the relations writes, cites,
// has_topic and affiliated_with with its edge counts, and 349 venue classes
// on papers with a random train/valid/test split of its sizes.
//
// Every node of every type has a planted class (papers' is their label)
// and features of the class centroid plus N(0, 1) noise, as Generate's
// nodes do (opts.FeatureDType, 128 elements). Each edge has one end drawn
// uniformly (so degrees are about even) and the other, with probability
// genMagHomophily, among the nodes of the first end's class: a paper's
// authors, citations and topics tell its venue much better than its own
// features. opts.Time adds a publication time per paper. The same options
// give the same bytes; the work is serial.
func GenerateHetero(opts GenOptions) (*Hetero, error) {
	if !IsHeteroPreset(opts.Like) {
		return nil, fmt.Errorf("gen: %q is not a heterogeneous preset (want mag)", opts.Like)
	}
	dt, err := opts.scaleAndDType()
	if err != nil {
		return nil, err
	}
	round := func(x int64) int64 { return max(int64(math.Round(float64(x)*opts.Scale)), 1) }
	s, C, dim := magShape, magShape.classes, magShape.dim
	h := &Hetero{Name: "mag-synthetic", Source: fmt.Sprintf("gen --like mag --scale %g --seed %d", opts.Scale, opts.Seed)}
	if dt != Float32 {
		h.Source += " --dtype " + string(dt)
	}
	if opts.Time {
		h.Source += " --time"
	}
	classes := map[string][]int32{}
	members := map[string][][]int64{} // by class
	cent := make([]float32, C*dim)
	mu := float32(genMuL2 / math.Sqrt(float64(dim)))
	ck := streamKey(opts.Seed, streamCentroid)
	for i := range cent {
		cent[i] = mu
		if hashAt(ck, uint64(i))&1 == 0 {
			cent[i] = -mu
		}
	}
	for ti, nt := range s.nodes {
		n := max(round(nt.n), minGenNodes)
		t := &NodeType{Name: nt.name, NumNodes: n, FeatureDim: dim, FeatureDType: dt}
		cls := make([]int32, n)
		byClass := make([][]int64, C)
		key := streamKey(opts.Seed, streamMagClass+uint64(ti)<<32)
		for v := range cls {
			cls[v] = int32(below(hashAt(key, uint64(v)), int64(C)))
			byClass[cls[v]] = append(byClass[cls[v]], int64(v))
		}
		classes[nt.name], members[nt.name] = cls, byClass
		rb := int64(dim * dt.Size())
		t.Features = make([]byte, n*rb)
		fk := streamKey(opts.Seed, streamMagFeat+uint64(ti)<<32)
		scale := float32(math.Sqrt(3) / 65536)
		for v := int64(0); v < n; v++ {
			rng := wyrand(hashAt(fk, uint64(v)))
			c := cent[int(cls[v])*dim:][:dim]
			row := t.Features[v*rb : (v+1)*rb]
			for j := range c {
				putValue(row, j, dt, c[j]+noise(&rng, scale))
			}
		}
		if nt.name == "paper" {
			t.NumClasses, t.Labels = C, cls
			t.Splits = magSplits(n, round(s.train), round(s.valid), round(s.test), opts.Seed)
			if opts.Time {
				t.Time = make([]int64, n)
				tk := streamKey(opts.Seed, streamMagTime)
				for v := range t.Time {
					t.Time[v] = below(hashAt(tk, uint64(v)), genTimeSpan)
				}
			}
		}
		h.NodeTypes = append(h.NodeTypes, t)
	}
	for ri, r := range s.rels {
		ns, nd := h.NodeType(r.src).NumNodes, h.NodeType(r.dst).NumNodes
		e := round(r.e)
		key := streamKey(opts.Seed, streamMagEdge+uint64(ri)<<32)
		pairs := make([]int64, 0, 2*e)
		for i := int64(0); i < e; i++ {
			// The uniform end walks the papers (or authors) in turn.
			a := i % ns
			other, otherCls := r.dst, classes[r.src][a]
			if r.src != "paper" && r.dst == "paper" { // writes: anchor the paper
				a = i % nd
				other, otherCls = r.src, classes[r.dst][a]
			}
			x := hashAt(key, uint64(i))
			var b int64
			if pool := members[other][otherCls]; float64(x>>11)*0x1p-53 < genMagHomophily && len(pool) > 0 {
				b = pool[below(mix64(x), int64(len(pool)))]
			} else {
				b = below(mix64(x^0x5bd1e995), h.NodeType(other).NumNodes)
			}
			if other == r.src {
				pairs = append(pairs, b, a)
			} else {
				pairs = append(pairs, a, b)
			}
		}
		g, err := bipartiteCSR(ns, nd, pairs, r.src == r.dst)
		if err != nil {
			return nil, err
		}
		h.Relations = append(h.Relations, &Relation{EdgeType: EdgeType{r.src, r.rel, r.dst}, Graph: g})
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	if opts.Undirected != nil && *opts.Undirected {
		// --undirected true: PyG's ToUndirected (reverse relations "rev_*",
		// cites symmetrised), as ogbn-mag is usually trained.
		return h.ToUndirected(opts.Workers)
	}
	return h, nil
}

// bipartiteCSR builds a relation's graph from (src, dst) pairs: a row per
// dst node listing its src ids ascending, without duplicates (and without
// self loops when both ends are one node type).
func bipartiteCSR(ns, nd int64, pairs []int64, sameType bool) (Graph, error) {
	flipped := make([]int64, len(pairs)) // (dst, src): stableCSR rows by its first
	for i := 0; i < len(pairs); i += 2 {
		flipped[i], flipped[i+1] = pairs[i+1], pairs[i]
	}
	n := max(ns, nd)
	g, _, err := stableCSR(n, flipped)
	if err != nil {
		return Graph{}, err
	}
	ip := make([]int64, nd+1)
	var idx64 []int64
	for v := int64(0); v < nd; v++ {
		row := make([]int64, 0, g.Degree(v))
		for p := g.Indptr[v]; p < g.Indptr[v+1]; p++ {
			row = append(row, g.Neighbor(p))
		}
		row = slices.Compact(row)
		for _, u := range row {
			if !sameType || u != v {
				idx64 = append(idx64, u)
			}
		}
		ip[v+1] = int64(len(idx64))
	}
	out := Graph{NumNodes: nd, NumSrcNodes: ns, Indptr: ip}
	if Wide(ns) {
		out.Indices64 = idx64
	} else {
		out.Indices32 = make([]int32, len(idx64))
		for i, u := range idx64 {
			out.Indices32[i] = int32(u)
		}
	}
	return out, nil
}

// magSplits draws disjoint sorted node sets of the given sizes.
func magSplits(n, train, valid, test int64, seed uint64) map[string][]int64 {
	for train+valid+test > n {
		switch {
		case test > 1:
			test--
		case valid > 1:
			valid--
		default:
			train--
		}
	}
	f := newFeistel(uint64(n), streamKey(seed, streamMagSplit))
	out := map[string][]int64{}
	at := uint64(0)
	for _, sz := range []struct {
		name string
		n    int64
	}{{SplitTrain, train}, {SplitValid, valid}, {SplitTest, test}} {
		ids := make([]int64, sz.n)
		for i := range ids {
			ids[i] = int64(f.at(at))
			at++
		}
		slices.Sort(ids)
		out[sz.name] = ids
	}
	return out
}
