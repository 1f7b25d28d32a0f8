package sampler

// Drawing a hop's neighbours: every neighbour, or Floyd's algorithm for k
// distinct row positions.

import "math/bits"

// smallFanout is the largest fanout whose chosen positions are kept in an
// array on the stack (membership by linear scan).
const smallFanout = 32

// sampleChunk draws the neighbours of the frontier nodes of chunk c:
// every neighbour when the degree is at most the fanout, otherwise
// Floyd's algorithm picks k distinct row positions, each k-subset equally
// likely, in the order Floyd inserts them.
func sampleChunk[I int32 | int64](sc *scratch, idx []I, c int) {
	a, z := span(sc.n, sc.fc, c)
	e := sc.chunkEdges[c]
	nbr := sc.nbr
	dst := sc.b.Dst[sc.eb : sc.eb+sc.e]
	var eid []int64 // the chosen row positions, as edge ids
	if sc.s.edgeIDs {
		eid = sc.b.EID[sc.eb : sc.eb+sc.e]
	}
	k := int64(sc.k)
	var touched I
	for p := a; p < z; p++ {
		if (p-a)%touchAhead == 0 {
			touched += touchRows(idx, sc.start[p:min(p+touchAhead, z)], sc.deg[p:min(p+touchAhead, z)])
		}
		st, d := sc.start[p], sc.deg[p]
		row := idx[st : st+d]
		m := d
		if k >= 0 && d > k {
			m = k
		}
		out := nbr[e : e+int(m)]
		if m == d {
			for i, u := range row {
				out[i] = int64(u)
			}
			if eid != nil {
				for i := range row {
					eid[e+i] = st + int64(i)
				}
			}
		} else {
			r := rng{nodeSeed(sc.key, sc.hop, p)}
			if m <= smallFanout {
				var chosen [smallFanout]int64
				for i, j := 0, d-m; j < d; i, j = i+1, j+1 {
					t := int64(r.below(uint64(j + 1)))
					for _, x := range chosen[:i] {
						if x == t {
							t = j
							break
						}
					}
					chosen[i] = t
					out[i] = int64(row[t])
					if eid != nil {
						eid[e+i] = st + t
					}
				}
			} else {
				set := &sc.sets[c]
				set.reset(int(m))
				for i, j := 0, d-m; j < d; i, j = i+1, j+1 {
					t := int64(r.below(uint64(j + 1)))
					if !set.insert(t) {
						set.insert(j)
						t = j
					}
					out[i] = int64(row[t])
					if eid != nil {
						eid[e+i] = st + t
					}
				}
			}
		}
		dl := int32(sc.lo + p)
		for i := e; i < e+int(m); i++ {
			dst[i] = dl
		}
		e += int(m)
	}
	sc.rowSink[c] += int64(touched)
}

// touchAhead is how many frontier nodes' rows sampleChunk reads together
// before drawing from them: their first (and last) cache lines loaded by
// independent loads, so that the memory system fetches them in parallel
// rather than one miss per node as each draw reaches its row (the rows
// lie at random in a CSR far larger than the caches).
const touchAhead = 16

// touchBlock reads the row starts and degrees of nodes (at most
// touchAhead) from indptr ip into starts and degs, then touches their rows
// (touchRows), whose sum it returns: for samplers that read a node's row
// start where they draw.
func touchBlock[I int32 | int64](idx []I, ip, nodes []int64, starts, degs *[touchAhead]int64) I {
	for q, v := range nodes {
		starts[q], degs[q] = ip[v], ip[v+1]-ip[v]
	}
	return touchRows(idx, starts[:len(nodes)], degs[:len(nodes)])
}

// touchRows reads the first and last index of each non-empty row (start,
// degree) and returns their sum, which the caller keeps (so that the loads
// are not dropped as dead code).
func touchRows[I int32 | int64](idx []I, start, deg []int64) I {
	var s I
	for i, st := range start {
		if d := deg[i]; d > 0 {
			s += idx[st] + idx[st+d-1]
		}
	}
	return s
}

// posSet is a set of row positions for Floyd's algorithm with a large
// fanout: open addressing, cleared by bumping gen.
type posSet struct {
	keys  []int64
	gens  []uint32
	gen   uint32
	shift uint
}

func (s *posSet) reset(k int) {
	if len(s.keys) < 2*k {
		size := 64
		for size < 2*k {
			size *= 2
		}
		s.keys = make([]int64, size)
		s.gens = make([]uint32, size)
		s.gen = 0
		s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	}
	s.gen++
	if s.gen == 0 {
		clear(s.gens)
		s.gen = 1
	}
}

// insert adds x and reports whether it was absent.
func (s *posSet) insert(x int64) bool {
	mask := len(s.keys) - 1
	i := int(hashID(x) >> s.shift)
	for s.gens[i] == s.gen {
		if s.keys[i] == x {
			return false
		}
		i = (i + 1) & mask
	}
	s.keys[i] = x
	s.gens[i] = s.gen
	return true
}
