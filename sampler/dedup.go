package sampler

// Numbering a hop's new nodes in first-occurrence order: one sequential
// pass, or the sharded form (see scratch).

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
