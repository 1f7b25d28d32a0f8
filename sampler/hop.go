package sampler

import "math"

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

	rowSink []int64 // per frontier chunk: what sampleChunk's early reads of rows summed (kept so that they are not dropped)
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
	sc.rowSink = grow(sc.rowSink, sc.fc)
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
