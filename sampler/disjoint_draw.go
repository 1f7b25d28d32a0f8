package sampler

// Sampling one chunk's subgraphs for Disjoint, and a node's draws among its
// (eligible) neighbours.

import (
	"cmp"
	"math"
	"slices"
)

// sampleSubgraphs samples the subgraphs of chunk c's seeds, one after the
// other, into the chunk's buffers.
func sampleSubgraphs[I int32 | int64](sc *dscratch, idx []I, c int) {
	ch := &sc.chunks[c]
	ch.nodes, ch.src, ch.dst, ch.eid = ch.nodes[:0], ch.src[:0], ch.dst[:0], ch.eid[:0]
	ch.tooLarge = false
	a, z := span(len(sc.seeds), sc.nc, c)
	for s := a; s < z; s++ {
		sampleSubgraph(sc, ch, idx, s)
		if ch.tooLarge {
			return
		}
	}
}

// sampleSubgraph samples subgraph s (rooted at seed s) into ch.
func sampleSubgraph[I int32 | int64](sc *dscratch, ch *dchunk, idx []I, s int) {
	d := sc.d
	H := sc.hops
	cnt := sc.nodeCnt[s*(H+1) : (s+1)*(H+1)]
	ecnt := sc.edgeCnt[s*H : (s+1)*H]
	base := len(ch.nodes)
	ch.tab.reset()
	root := sc.seeds[s]
	ch.nodes = append(ch.nodes, root)
	ch.tab.upsert(root, hashID(root), 0)
	cnt[0] = 1
	var t int64
	if sc.times != nil {
		t = sc.times[s]
	}
	key := subgraphKey(sc.key, s)
	ip := d.g.Indptr
	lo, hi := 0, 1
	// A hop's frontier rows touchAhead at a time: their starts and degrees
	// read together, then their rows (touchBlock), then drawn from.
	var starts, degs [touchAhead]int64
	var touched I
	for h, k := range d.fanouts {
		e0 := len(ch.src)
		for p := lo; p < hi; p++ {
			at := (p - lo) % touchAhead // p's place in its block
			if at == 0 {
				touched += touchBlock(idx, ip, ch.nodes[base+p:base+min(p+touchAhead, hi)], &starts, &degs)
			}
			st, deg := starts[at], degs[at]
			r := rng{nodeSeed(key, h+1, p-lo)}
			pick(d, ch, idx, st, deg, k, t, &r)
			for _, pos := range ch.picked {
				u := int64(idx[pos])
				l, found, _ := ch.tab.upsert(u, hashID(u), int32(len(ch.nodes)-base))
				if !found {
					ch.nodes = append(ch.nodes, u)
				}
				ch.src = append(ch.src, l)
				ch.dst = append(ch.dst, int32(p))
				if d.edgeIDs {
					ch.eid = append(ch.eid, pos)
				}
			}
			if len(ch.nodes)-base >= math.MaxInt32 {
				ch.tooLarge = true
				ch.sink += int64(touched)
				return
			}
		}
		ecnt[h] = len(ch.src) - e0
		lo, hi = hi, len(ch.nodes)-base
		cnt[h+1] = hi - lo
	}
	ch.sink += int64(touched)
}

// pick sets ch.picked to the CSR positions a node whose row is
// idx[st:st+deg] samples with fanout k, seed time t and stream r (see
// Disjoint for the rules).
func pick[I int32 | int64](d *Disjoint, ch *dchunk, idx []I, st, deg int64, k int, t int64, r *rng) {
	ch.picked = ch.picked[:0]
	if d.nodeTime == nil && d.edgeTime == nil {
		at := len(ch.picked)
		ch.picked = floyd(ch.picked, deg, k, r, &ch.set)
		for i := at; i < len(ch.picked); i++ {
			ch.picked[i] += st
		}
		return
	}
	el := ch.elig[:0]
	if d.nodeTime != nil {
		for p := st; p < st+deg; p++ {
			if d.nodeTime[idx[p]] <= t {
				el = append(el, p)
			}
		}
	} else {
		for p, tm := range d.edgeTime[st : st+deg] {
			if tm <= t {
				el = append(el, st+int64(p))
			}
		}
	}
	ch.elig = el
	if d.strategy == Last {
		if k == 0 {
			return
		}
		slices.SortFunc(el, func(x, y int64) int {
			if c := cmp.Compare(timeAt(d, idx, x), timeAt(d, idx, y)); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
		if k > 0 && len(el) > k {
			el = el[len(el)-k:]
		}
		ch.picked = append(ch.picked, el...)
		return
	}
	ch.picked = floyd(ch.picked, int64(len(el)), k, r, &ch.set)
	for i, j := range ch.picked {
		ch.picked[i] = el[j]
	}
}

// timeAt is the time that decides whether the edge at CSR position p is
// eligible: its source's node time, or its edge time.
func timeAt[I int32 | int64](d *Disjoint, idx []I, p int64) int64 {
	if d.edgeTime != nil {
		return d.edgeTime[p]
	}
	return d.nodeTime[idx[p]]
}

// floyd appends min(k, n) distinct indices of [0, n) to out (k < 0: all):
// every index in ascending order when k < 0 or n <= k, otherwise k of them
// drawn by Floyd's algorithm from r, every k-subset equally likely, in the
// order the algorithm inserts them (the Sampler's rule).
func floyd(out []int64, n int64, k int, r *rng, set *posSet) []int64 {
	m := n
	if k >= 0 && int64(k) < n {
		m = int64(k)
	}
	if m == n {
		for i := range n {
			out = append(out, i)
		}
		return out
	}
	at := len(out)
	if m <= smallFanout {
		for j := n - m; j < n; j++ {
			t := int64(r.below(uint64(j + 1)))
			for _, x := range out[at:] {
				if x == t {
					t = j
					break
				}
			}
			out = append(out, t)
		}
		return out
	}
	set.reset(int(m))
	for j := n - m; j < n; j++ {
		t := int64(r.below(uint64(j + 1)))
		if !set.insert(t) {
			set.insert(j)
			t = j
		}
		out = append(out, t)
	}
	return out
}
