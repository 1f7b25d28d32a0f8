package sampler

import (
	"math"
	"slices"
)

// The hops of a heterogeneous batch (HeteroSampler.Sample).

// hscratch is one Sample call's working memory. A hop runs in three
// phases, each cut into pieces whose output lands in places fixed by the
// data: count (per piece of a frontier: its edges), draw (each piece's
// nodes draw into their edge ranges), dedup (per src node type, its edge
// types in order, one goroutine each); then the order phase sorts each
// type's ids.
type hscratch struct {
	s     *HeteroSampler
	team  *team
	b     *HeteroBatch
	tabs  []table // per node type: id -> local id
	key   uint64
	hop   int
	lo    []int      // per node type: the frontier is NID[lo:hi]
	hi    []int      //
	eb    []int      // per edge type: its first edge of the hop
	tot   []int      // per edge type: its edges of the hop
	nbr   [][]int64  // per edge type: the drawn src id of each edge of the hop
	work  []hwork    // the hop's draw pieces
	sets  []posSet   // per draw piece
	types []int      // the hop's src node types (dedup pieces)
	errs  []error    // per node type: its dedup's failure
	keys  [][]uint64 // per node type: the order's sort keys
}

// hwork is a piece of a frontier: dst nodes [a, z) of the frontier for
// edge type rel, whose edges start at edge (within the hop).
type hwork struct {
	rel, a, z, edges, edge int
	sink                   int64 // what drawHetero's early reads of rows summed (kept so that they are not dropped)
}

const (
	hphCount = iota
	hphDraw
	hphDedup
	hphOrder
)

func (sc *hscratch) runChunk(phase, c int) {
	switch phase {
	case hphCount:
		sc.count(&sc.work[c])
	case hphDraw:
		w := &sc.work[c]
		if g := sc.s.rels[w.rel].g; g.Indices32 != nil {
			drawHetero(sc, w, &sc.sets[c], g.Indices32)
		} else {
			drawHetero(sc, w, &sc.sets[c], g.Indices64)
		}
	case hphDedup:
		sc.dedup(sc.types[c])
	case hphOrder:
		sc.order(c)
	}
}

func (sc *hscratch) sample(input int, seeds []int64, key uint64, b *HeteroBatch) error {
	s := sc.s
	sc.b, sc.key = b, key
	b.Nodes = extend(b.Nodes, len(s.types))
	b.Edges = extend(b.Edges, len(s.rels))
	for t := range b.Nodes {
		nt := &b.Nodes[t]
		nt.NID, nt.NumSampledNodes, nt.Order = nt.NID[:0], nt.NumSampledNodes[:0], nt.Order[:0]
		sc.tabs[t].reset()
		sc.lo[t], sc.hi[t] = 0, 0
	}
	for e := range b.Edges {
		et := &b.Edges[e]
		et.Src, et.Dst, et.EID, et.NumSampledEdges = et.Src[:0], et.Dst[:0], et.EID[:0], et.NumSampledEdges[:0]
	}
	in := &b.Nodes[input]
	in.NID = append(in.NID, seeds...)
	tab := &sc.tabs[input]
	tab.reserve(len(seeds))
	for i, v := range seeds {
		tab.upsert(v, hashID(v), int32(i))
	}
	for t := range b.Nodes {
		b.Nodes[t].NumSampledNodes = append(b.Nodes[t].NumSampledNodes, len(b.Nodes[t].NID))
		sc.hi[t] = len(b.Nodes[t].NID)
	}
	extra := s.workers - 1
	for h, fan := range s.fanouts {
		sc.hop = h + 1
		// The pieces of every edge type's frontier.
		sc.work = sc.work[:0]
		for e, r := range s.rels {
			sc.eb[e] = len(b.Edges[e].Src)
			n := sc.hi[r.dst] - sc.lo[r.dst]
			if fan[e] == 0 || n == 0 {
				continue
			}
			k := numChunks(n, s.workers, minFrontierChunk)
			for c := 0; c < k; c++ {
				a, z := span(n, k, c)
				sc.work = append(sc.work, hwork{rel: e, a: a, z: z})
			}
		}
		sc.team.run(hphCount, len(sc.work), extra)
		// Edge ranges: pieces in order within each edge type.
		clear(sc.tot)
		for i := range sc.work {
			w := &sc.work[i]
			w.edge = sc.tot[w.rel]
			sc.tot[w.rel] += w.edges
		}
		for e := range s.rels {
			et := &b.Edges[e]
			m := sc.eb[e] + sc.tot[e]
			if m > math.MaxInt32 {
				return ErrTooLarge
			}
			et.Src, et.Dst, et.EID = extend(et.Src, m), extend(et.Dst, m), extend(et.EID, m)
			sc.nbr[e] = grow(sc.nbr[e], sc.tot[e])
		}
		if len(sc.sets) < len(sc.work) {
			sc.sets = append(sc.sets, make([]posSet, len(sc.work)-len(sc.sets))...)
		}
		sc.team.run(hphDraw, len(sc.work), extra)
		// New nodes, per src type (independent of each other).
		sc.types = sc.types[:0]
		for e, r := range s.rels {
			if len(b.Edges[e].Src) > sc.eb[e] && !slices.Contains(sc.types, r.src) {
				sc.types = append(sc.types, r.src)
			}
		}
		sc.team.run(hphDedup, len(sc.types), extra)
		for _, t := range sc.types {
			if err := sc.errs[t]; err != nil {
				sc.errs[t] = nil
				return err
			}
		}
		for t := range b.Nodes {
			nt := &b.Nodes[t]
			nt.NumSampledNodes = append(nt.NumSampledNodes, len(nt.NID)-sc.hi[t])
			sc.lo[t], sc.hi[t] = sc.hi[t], len(nt.NID)
		}
		for e := range b.Edges {
			et := &b.Edges[e]
			et.NumSampledEdges = append(et.NumSampledEdges, len(et.Src)-sc.eb[e])
		}
	}
	if !s.noOrder {
		sc.team.run(hphOrder, len(s.types), extra)
	}
	return nil
}

// count sets w.edges: what its dst nodes draw.
func (sc *hscratch) count(w *hwork) {
	r := sc.s.rels[w.rel]
	k := int64(sc.s.fanouts[sc.hop-1][w.rel])
	nid := sc.b.Nodes[r.dst].NID[sc.lo[r.dst]:]
	ip := r.g.Indptr
	m := int64(0)
	for _, v := range nid[w.a:w.z] {
		d := ip[v+1] - ip[v]
		if k >= 0 && d > k {
			d = k
		}
		m += d
	}
	w.edges = int(m)
}

// drawHetero draws the neighbours of w's dst nodes into the hop's edge
// range of w: the src ids into nbr, positions into EID, local dst ids
// into Dst (as sampleChunk does for a homogeneous hop).
func drawHetero[I int32 | int64](sc *hscratch, w *hwork, set *posSet, idx []I) {
	r := sc.s.rels[w.rel]
	k := int64(sc.s.fanouts[sc.hop-1][w.rel])
	lo := sc.lo[r.dst]
	nid := sc.b.Nodes[r.dst].NID[lo:]
	et := &sc.b.Edges[w.rel]
	eb := sc.eb[w.rel]
	out, eid, dst := sc.nbr[w.rel], et.EID[eb:], et.Dst[eb:]
	ip := r.g.Indptr
	e := w.edge
	// The rows of touchAhead dst nodes at a time: their starts and degrees
	// read together, then their rows (touchBlock), then drawn from.
	var starts, degs [touchAhead]int64
	var touched I
	for p := w.a; p < w.z; p++ {
		at := (p - w.a) % touchAhead // p's place in its block
		if at == 0 {
			touched += touchBlock(idx, ip, nid[p:min(p+touchAhead, w.z)], &starts, &degs)
		}
		st, d := starts[at], degs[at]
		m := d
		if k >= 0 && d > k {
			m = k
		}
		if m == d {
			for i := int64(0); i < d; i++ {
				out[e+int(i)], eid[e+int(i)] = int64(idx[st+i]), st+i
			}
		} else {
			rg := rng{heteroSeed(sc.key, sc.hop, w.rel, p)}
			var chosen [smallFanout]int64
			if m > smallFanout {
				set.reset(int(m))
			}
			for i, j := 0, d-m; j < d; i, j = i+1, j+1 {
				t := int64(rg.below(uint64(j + 1)))
				if m <= smallFanout {
					if slices.Contains(chosen[:i], t) {
						t = j
					}
					chosen[i] = t
				} else if !set.insert(t) {
					set.insert(j)
					t = j
				}
				out[e+i], eid[e+i] = int64(idx[st+t]), st+t
			}
		}
		dl := int32(lo + p)
		for i := e; i < e+int(m); i++ {
			dst[i] = dl
		}
		e += int(m)
	}
	w.sink += int64(touched)
}

// dedup numbers the hop's new nodes of node type t: over its edge types
// in order, each edge's src id is looked up, and joins the type's nodes
// when new.
func (sc *hscratch) dedup(t int) {
	nt := &sc.b.Nodes[t]
	tab := &sc.tabs[t]
	for e, r := range sc.s.rels {
		if r.src != t {
			continue
		}
		et := &sc.b.Edges[e]
		src := et.Src[sc.eb[e]:]
		for i, id := range sc.nbr[e][:len(src)] {
			v, found, _ := tab.upsert(id, hashID(id), int32(len(nt.NID)))
			if !found {
				if len(nt.NID) == math.MaxInt32 {
					sc.errs[t] = ErrTooLarge
					return
				}
				nt.NID = append(nt.NID, id)
			}
			src[i] = v
		}
	}
}

// order sorts node type t's local ids by id.
func (sc *hscratch) order(t int) {
	nt := &sc.b.Nodes[t]
	n := len(nt.NID)
	nt.Order = grow(nt.Order, n)
	for i := range nt.Order {
		nt.Order[i] = int32(i)
	}
	if sc.s.types[t] <= math.MaxUint32 {
		// Pack (id, local id) into one word: a plain integer sort.
		sc.keys[t] = grow(sc.keys[t], n)
		keys := sc.keys[t]
		for i, v := range nt.NID {
			keys[i] = uint64(v)<<32 | uint64(i)
		}
		slices.Sort(keys)
		for i, k := range keys {
			nt.Order[i] = int32(uint32(k))
		}
		return
	}
	slices.SortStableFunc(nt.Order, func(a, b int32) int {
		x, y := nt.NID[a], nt.NID[b]
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
}
