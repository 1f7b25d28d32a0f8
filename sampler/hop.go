package sampler

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// scratch is the working memory of one Sample call, pooled by the Sampler.
//
// One hop runs in phases separated by barriers; each phase is cut into
// chunks whose output lands in places fixed by the data, never by the
// goroutine that ran it:
//
//	degrees  (frontier chunks) row start and degree of every frontier node,
//	         edges per chunk; then a prefix sum gives each node its edge range
//	sample   (frontier chunks) each node draws its neighbours with its own
//	         RNG stream (key, hop, position) into its edge range
//	dedup    first-occurrence numbering of the hop's neighbours: either one
//	         sequential pass over the edges (small hops, one worker) or the
//	         sharded form below; both give identical local ids
//
// Sharded dedup: ids are split into shards by hash; shard s processes its
// edges in edge order against its own table, so it knows which edge is the
// first occurrence of each new id. First occurrences are then numbered in
// edge order (a prefix sum over chunks), and every edge and table entry that
// pointed to a first occurrence is resolved to the new local id.
type scratch struct {
	s          *Sampler
	team       *team
	b          *Batch
	tabs       []table
	shardShift uint
	key        uint64

	// current hop: frontier is b.NID[lo : lo+n]
	hop, k, lo, n int
	fc            int     // frontier chunks
	start         []int64 // per frontier node: first index of its row
	deg           []int64 // per frontier node: degree
	chunkEdges    []int   // per frontier chunk: first edge (len fc+1)
	eb, e         int     // first edge of the hop in b.Src, edges in the hop
	nbr           []int64 // per hop edge: global id of the sampled neighbour
	sets          []posSet

	// sharded dedup
	ec         int
	hist       []int32   // [chunk*S + shard] edges
	cursor     []int32   // [chunk*S + shard] end of the segment in perm
	firsts     []int32   // [chunk*S + shard] first occurrences
	chunkFirst []int32   // per chunk: local id of its first new node
	perm       []edgeRef // edges grouped by shard, in edge order
	loc        []int32   // per first-occurrence edge: the new local id

	// address-order sort
	keys, tmp   []uint64
	radHist     []int32 // [chunk*nd + top digit]
	bucketStart []int32 // per top digit: first key in tmp
	pc, nd, bt  int     // sort chunks, top-digit buckets, bucket groups
	topShift    uint
	posBits     uint
}

const (
	phDegrees = iota
	phSample
	phShard
	phDedup
	phAssign
	phResolve
	phKeys
	phPermute
	phBuckets
)

const (
	minFrontierChunk = 256   // frontier nodes per chunk
	minEdgeChunk     = 2048  // edges per chunk
	minSortChunk     = 16384 // nodes per sort chunk
	shardedDedupMin  = 4096  // hops with fewer edges dedup sequentially
)

func newScratch(s *Sampler) *scratch {
	sc := &scratch{s: s, tabs: make([]table, 1<<s.shardBits), shardShift: 64 - s.shardBits}
	sc.team = newTeam(sc)
	return sc
}

func (sc *scratch) sample(seeds []int64, key uint64, b *Batch) error {
	sc.b, sc.key = b, key
	for i := range sc.tabs {
		sc.tabs[i].reset()
	}
	b.NID = append(b.NID, seeds...)
	for i, v := range seeds {
		h := hashID(v)
		sc.tabs[h>>sc.shardShift].upsert(v, h, int32(i)) // a repeated seed keeps its first local id
	}
	b.NumSampledNodes = append(b.NumSampledNodes, len(seeds))
	lo := 0
	for h, k := range sc.s.fanouts {
		hi := len(b.NID)
		if err := sc.runHop(h+1, k, lo, hi); err != nil {
			b.Reset()
			return err
		}
		b.NumSampledNodes = append(b.NumSampledNodes, len(b.NID)-hi)
		lo = hi
	}
	if !sc.s.noOrder {
		sc.order()
	}
	return nil
}

func (sc *scratch) runHop(hop, k, lo, hi int) error {
	b, w := sc.b, sc.s.workers
	n := hi - lo
	sc.hop, sc.k, sc.lo, sc.n = hop, k, lo, n
	sc.start = grow(sc.start, n)
	sc.deg = grow(sc.deg, n)
	sc.fc = numChunks(n, w, minFrontierChunk)
	sc.chunkEdges = grow(sc.chunkEdges, sc.fc+1)
	sc.team.run(phDegrees, sc.fc, w-1)
	total := 0
	for c := 0; c < sc.fc; c++ {
		t := sc.chunkEdges[c]
		sc.chunkEdges[c] = total
		total += t
	}
	sc.chunkEdges[sc.fc] = total
	if len(b.NID)+total > math.MaxInt32 || len(b.Src)+total > math.MaxInt32 {
		return ErrTooLarge
	}
	sc.eb, sc.e = len(b.Src), total
	b.Src = extend(b.Src, sc.eb+total)
	b.Dst = extend(b.Dst, sc.eb+total)
	if sc.s.edgeIDs {
		b.EID = extend(b.EID, sc.eb+total)
	}
	sc.nbr = grow(sc.nbr, total)
	if len(sc.sets) < sc.fc {
		sc.sets = append(sc.sets, make([]posSet, sc.fc-len(sc.sets))...)
	}
	sc.team.run(phSample, sc.fc, w-1)
	b.NumSampledEdges = append(b.NumSampledEdges, total)
	if w == 1 || total < shardedDedupMin || len(sc.tabs) == 1 {
		sc.dedupSequential()
	} else {
		sc.dedupSharded()
	}
	return nil
}

func (sc *scratch) runChunk(phase, c int) {
	switch phase {
	case phDegrees:
		sc.degrees(c)
	case phSample:
		g := sc.s.g
		if g.Indices32 != nil {
			sampleChunk(sc, g.Indices32, c)
		} else {
			sampleChunk(sc, g.Indices64, c)
		}
	case phShard:
		sc.shardChunk(c)
	case phDedup:
		sc.dedupShard(c)
	case phAssign:
		sc.assignChunk(c)
	case phResolve:
		sc.resolve(c)
	case phKeys:
		sc.keysChunk(c)
	case phPermute:
		sc.permuteChunk(c)
	case phBuckets:
		sc.bucketsChunk(c)
	}
}

func (sc *scratch) degrees(c int) {
	a, z := span(sc.n, sc.fc, c)
	ip := sc.s.g.Indptr
	fr := sc.b.NID[sc.lo : sc.lo+sc.n]
	k := int64(sc.k)
	tot := int64(0)
	for p := a; p < z; p++ {
		v := fr[p]
		st := ip[v]
		d := ip[v+1] - st
		sc.start[p] = st
		sc.deg[p] = d
		if k >= 0 && d > k {
			d = k
		}
		tot += d
	}
	sc.chunkEdges[c] = int(min(tot, math.MaxInt32+1)) // runHop rejects > MaxInt32
}

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
	for p := a; p < z; p++ {
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
}

// dedupSequential numbers the hop's new nodes in one pass over its edges.
func (sc *scratch) dedupSequential() {
	b := sc.b
	src := b.Src[sc.eb : sc.eb+sc.e]
	sh := sc.shardShift
	for e, id := range sc.nbr[:sc.e] {
		h := hashID(id)
		v, found, _ := sc.tabs[h>>sh].upsert(id, h, int32(len(b.NID)))
		if !found {
			b.NID = append(b.NID, id)
		}
		src[e] = v
	}
}

func (sc *scratch) dedupSharded() {
	b, w := sc.b, sc.s.workers
	S := len(sc.tabs)
	E := sc.e
	ec := numChunks(E, w, minEdgeChunk)
	sc.ec = ec
	sc.hist = grow(sc.hist, ec*S)
	sc.cursor = grow(sc.cursor, ec*S)
	sc.firsts = grow(sc.firsts, ec*S)
	sc.chunkFirst = grow(sc.chunkFirst, ec)
	sc.perm = grow(sc.perm, E)
	sc.loc = grow(sc.loc, E)
	sc.team.run(phShard, ec, w-1)
	sc.team.run(phDedup, S, w-1)
	r := int32(len(b.NID))
	for c := 0; c < ec; c++ {
		sc.chunkFirst[c] = r
		for s := 0; s < S; s++ {
			r += sc.firsts[c*S+s]
		}
	}
	b.NID = extend(b.NID, int(r))
	sc.team.run(phAssign, ec, w-1)
	sc.team.run(phResolve, ec+S, w-1)
}

// edgeRef is a sampled neighbour and its edge position in the hop.
type edgeRef struct {
	id int64
	e  int32
}

// shardChunk groups the edges of chunk c by shard, in edge order within a
// shard, inside the chunk's own range of perm: shard s's edges of chunk c
// end up in perm[cursor[c*S+s]-hist[c*S+s] : cursor[c*S+s]].
func (sc *scratch) shardChunk(c int) {
	S := len(sc.tabs)
	a, z := span(sc.e, sc.ec, c)
	hist := sc.hist[c*S : (c+1)*S]
	cur := sc.cursor[c*S : (c+1)*S]
	clear(hist)
	sh := sc.shardShift
	nbr := sc.nbr[a:z]
	for _, id := range nbr {
		hist[hashID(id)>>sh]++
	}
	off := int32(a)
	for s, h := range hist {
		cur[s] = off
		off += h
	}
	for i, id := range nbr {
		s := hashID(id) >> sh
		sc.perm[cur[s]] = edgeRef{id: id, e: int32(a + i)}
		cur[s]++
	}
}

// dedupShard looks up shard s's edges, chunk by chunk in edge order, in the
// shard's table. A new id is stored with the pending value -(e+1), e being
// its first edge; the edge's Src gets the stored value (final or pending).
func (sc *scratch) dedupShard(s int) {
	S := len(sc.tabs)
	t := &sc.tabs[s]
	total := 0
	for c := 0; c < sc.ec; c++ {
		total += int(sc.hist[c*S+s])
	}
	t.reserve(total) // no rehash below: the slot indices in added stay valid
	t.added = t.added[:0]
	src := sc.b.Src[sc.eb : sc.eb+sc.e]
	for c := 0; c < sc.ec; c++ {
		end := sc.cursor[c*S+s]
		f := int32(0)
		for _, r := range sc.perm[end-sc.hist[c*S+s] : end] {
			id, e := r.id, r.e
			v, found, idx := t.upsert(id, hashID(id), -(e + 1))
			if !found {
				f++
				t.added = append(t.added, int32(idx))
			}
			src[e] = v
		}
		sc.firsts[c*S+s] = f
	}
}

func (sc *scratch) assignChunk(c int) {
	a, z := span(sc.e, sc.ec, c)
	src := sc.b.Src[sc.eb : sc.eb+sc.e]
	nid := sc.b.NID
	r := sc.chunkFirst[c]
	for e := a; e < z; e++ {
		if src[e] == int32(-(e + 1)) {
			sc.loc[e] = r
			nid[r] = sc.nbr[e]
			r++
		}
	}
}

func (sc *scratch) resolve(task int) {
	if task < sc.ec {
		a, z := span(sc.e, sc.ec, task)
		src := sc.b.Src[sc.eb : sc.eb+sc.e]
		for e := a; e < z; e++ {
			if v := src[e]; v < 0 {
				src[e] = sc.loc[-(v + 1)]
			}
		}
		return
	}
	t := &sc.tabs[task-sc.ec]
	for _, i := range t.added {
		sl := &t.slots[i]
		sl.val = sc.loc[-(sl.val + 1)]
	}
}

// order fills b.Order by sorting (global id, local id) pairs packed in one
// uint64 (the local id in the low posBits bits, so every key is distinct and
// the sorted order is unique): one parallel MSD radix pass on the top bits of
// the id into buckets of about a thousand keys, then each bucket sorted on
// its own by LSD radix passes over the remaining id bits.
func (sc *scratch) order() {
	b, w := sc.b, sc.s.workers
	N := len(b.NID)
	b.Order = grow(b.Order, N)
	if N == 0 {
		return
	}
	idBits := uint(bits.Len64(uint64(max(sc.s.g.NumNodes-1, 0))))
	sc.posBits = uint(bits.Len64(uint64(N - 1)))
	if idBits+sc.posBits > 64 {
		for i := range b.Order {
			b.Order[i] = int32(i)
		}
		nid := b.NID
		slices.SortStableFunc(b.Order, func(x, y int32) int { return cmp.Compare(nid[x], nid[y]) })
		return
	}
	sc.keys = grow(sc.keys, N)
	sc.tmp = grow(sc.tmp, N)
	sc.pc = numChunks(N, w, minSortChunk)
	top := uint(0)
	for top < maxDigitBits && N>>(top+10) > 0 {
		top++
	}
	top = min(top, idBits)
	sc.topShift = sc.posBits + idBits - top
	nd := 1 << top
	sc.nd = nd
	sc.radHist = grow(sc.radHist, sc.pc*nd)
	sc.bucketStart = grow(sc.bucketStart, nd+1)
	sc.team.run(phKeys, sc.pc, w-1)
	off := int32(0)
	for d := 0; d < nd; d++ {
		sc.bucketStart[d] = off
		for c := 0; c < sc.pc; c++ {
			h := sc.radHist[c*nd+d]
			sc.radHist[c*nd+d] = off
			off += h
		}
	}
	sc.bucketStart[nd] = off
	sc.team.run(phPermute, sc.pc, w-1)
	sc.bt = 1
	if w > 1 {
		sc.bt = min(nd, 4*w)
	}
	sc.team.run(phBuckets, sc.bt, w-1)
}

// maxDigitBits bounds a radix digit (counters fit in 8 KiB).
const maxDigitBits = 11

func (sc *scratch) topDigit(k uint64) uint64 {
	return (k >> sc.topShift) & uint64(sc.nd-1)
}

func (sc *scratch) keysChunk(c int) {
	a, z := span(len(sc.keys), sc.pc, c)
	h := sc.radHist[c*sc.nd : (c+1)*sc.nd]
	clear(h)
	for i := a; i < z; i++ {
		k := uint64(sc.b.NID[i])<<sc.posBits | uint64(i)
		sc.keys[i] = k
		h[sc.topDigit(k)]++
	}
}

func (sc *scratch) permuteChunk(c int) {
	a, z := span(len(sc.keys), sc.pc, c)
	h := sc.radHist[c*sc.nd : (c+1)*sc.nd]
	for _, k := range sc.keys[a:z] {
		d := sc.topDigit(k)
		sc.tmp[h[d]] = k
		h[d]++
	}
}

// bucketsChunk sorts the buckets of group c and writes their part of Order.
func (sc *scratch) bucketsChunk(c int) {
	d0, d1 := span(sc.nd, sc.bt, c)
	mask := uint64(1)<<sc.posBits - 1
	for d := d0; d < d1; d++ {
		lo, hi := sc.bucketStart[d], sc.bucketStart[d+1]
		sorted := sortBucket(sc.tmp[lo:hi], sc.keys[lo:hi], sc.posBits, sc.topShift-sc.posBits)
		ord := sc.b.Order[lo:hi]
		for i, k := range sorted {
			ord[i] = int32(k & mask)
		}
	}
}

// sortBucket sorts a, whose keys agree above bit shift+nbits and are
// already ascending in the bits below shift (the local id: the MSD pass is
// stable), using buf (same length) as scratch. It returns whichever of a and buf holds the result.
func sortBucket(a, buf []uint64, shift, nbits uint) []uint64 {
	if len(a) <= 48 {
		for i := 1; i < len(a); i++ {
			for j := i; j > 0 && a[j] < a[j-1]; j-- {
				a[j], a[j-1] = a[j-1], a[j]
			}
		}
		return a
	}
	if nbits == 0 {
		return a // keys differ only in the position bits, already ascending
	}
	passes := (nbits + maxDigitBits - 1) / maxDigitBits
	digit := (nbits + passes - 1) / passes
	var cnt [1 << maxDigitBits]int32
	nd := 1 << digit
	mask := uint64(nd - 1)
	for p := uint(0); p < passes; p++ {
		sh := shift + p*digit
		h := cnt[:nd]
		clear(h)
		for _, k := range a {
			h[(k>>sh)&mask]++
		}
		off := int32(0)
		for i, x := range h {
			h[i] = off
			off += x
		}
		for _, k := range a {
			d := (k >> sh) & mask
			buf[h[d]] = k
			h[d]++
		}
		a, buf = buf, a
	}
	return a
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
