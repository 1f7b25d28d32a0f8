package gather

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"
)

// SweepPart is one batch of a sweep: its rows nid go to dst in hop order, as
// with Gather. Order is nid's sorting permutation, or nil to have it computed.
type SweepPart struct {
	Dst   Dest
	Nid   []int64
	Order []int32
}

// SweepPlan is one sorted pass over the union of several batches' rows, in
// the compact form the CUDA kernels take (8 bytes a distinct row, as it
// crosses PCIe too), built in chunks of ascending row ids. In a chunk,
// rows[u] is a row id; first[u] is its only delivery, part<<26 | position,
// or sharedRow | i for a row shared by several parts, whose extras[i]
// deliveries follow at extras[i+1:]. Deliveries lists it out.
type SweepPlan struct {
	chunks              []planChunk
	unique, delivered   int64
	uniqueOff, extraOff []int64 // where each chunk starts in the concatenation
}

type planChunk struct {
	rows, first, extras []uint32
}

// MaxSweepParts is the most batches one sweep may cover; a part may hold up
// to 1<<26 rows. (A delivery is part << 26 | position in 31 bits: the top
// bit marks a row shared by several parts.)
const (
	MaxSweepParts = 32
	MaxPartRows   = 1<<partShift - 1 // the most rows one part (batch) of a sweep may hold
	partShift     = 26
	sharedRow     = 1 << 31
)

// Unique is the number of distinct rows (each read once).
func (p *SweepPlan) Unique() int64 { return p.unique }

// Delivered is the number of rows written (a row shared by k parts counts k times).
func (p *SweepPlan) Delivered() int64 { return p.delivered }

// Deliveries lists the plan: row rows[u] (ascending, unique) goes to the
// parts and positions part[offs[u]:offs[u+1]], pos[offs[u]:offs[u+1]].
func (p *SweepPlan) Deliveries() (rows, offs []int64, part, pos []int32) {
	offs = []int64{0}
	add := func(e uint32) {
		part, pos = append(part, int32(e>>partShift)), append(pos, int32(e&(1<<partShift-1)))
	}
	for _, c := range p.chunks {
		for u, v := range c.rows {
			rows = append(rows, int64(v))
			if f := c.first[u]; f&sharedRow == 0 {
				add(f)
			} else {
				i := f &^ sharedRow
				for _, e := range c.extras[i+1 : i+1+c.extras[i]] {
					add(e)
				}
			}
			offs = append(offs, int64(len(pos)))
		}
	}
	return rows, offs, part, pos
}

// compact writes the plan's concatenated form into rows, first and extras
// (Unique, Unique and extraOff's total entries long).
func (p *SweepPlan) compact(rows, first, extras []uint32) {
	var g errgroup.Group
	for c, ch := range p.chunks {
		g.Go(func() error {
			u0, e0 := p.uniqueOff[c], p.extraOff[c]
			copy(rows[u0:], ch.rows)
			copy(extras[e0:], ch.extras)
			dst := first[u0 : u0+int64(len(ch.first))]
			for i, f := range ch.first {
				if f&sharedRow != 0 {
					f += uint32(e0)
				}
				dst[i] = f
			}
			return nil
		})
	}
	g.Wait()
}

// extras is the number of entries of the plan's extras.
func (p *SweepPlan) extras() int64 {
	if len(p.extraOff) == 0 {
		return 0
	}
	last := len(p.chunks) - 1
	return p.extraOff[last] + int64(len(p.chunks[last].extras))
}

// SortOrder returns the permutation that lists nid's positions in ascending id
// order (ties by position), the order a Gather reads rows in.
func SortOrder(nid []int64) []int32 {
	ord := make([]int32, len(nid))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortFunc(ord, func(a, b int32) int {
		if nid[a] != nid[b] {
			if nid[a] < nid[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	return ord
}

// PlanSweep merges the parts' sorted rows into one plan: a k-way merge over
// their orders, split by row id into ranges merged in parallel. Ids are
// checked against numRows (at most 2^32: the plan keeps row ids in 32 bits),
// and an order must sort its part's ids.
func PlanSweep(parts []SweepPart, numRows int64) (*SweepPlan, error) {
	if len(parts) > MaxSweepParts {
		return nil, fmt.Errorf("gather: a sweep covers at most %d batches, not %d", MaxSweepParts, len(parts))
	}
	if numRows > 1<<32 {
		return nil, fmt.Errorf("gather: a sweep takes tables of at most 2^32 rows, not %d", numRows)
	}
	total := 0
	for k, p := range parts {
		if p.Order != nil && len(p.Order) != len(p.Nid) {
			return nil, fmt.Errorf("gather: sweep part %d: order has %d entries for %d rows", k, len(p.Order), len(p.Nid))
		}
		if len(p.Nid) > MaxPartRows {
			return nil, fmt.Errorf("gather: sweep part %d has %d rows, more than %d", k, len(p.Nid), MaxPartRows)
		}
		total += len(p.Nid)
	}
	// Each part's ids in ascending order (reading nid through the order
	// inside the merge would cost a cache miss a row).
	orders := make([][]int32, len(parts))
	sorted := make([][]uint32, len(parts))
	var g errgroup.Group
	for k, p := range parts {
		g.Go(func() error {
			ord := p.Order
			if ord == nil {
				ord = SortOrder(p.Nid)
			}
			sk := make([]uint32, len(p.Nid))
			prev := int64(-1)
			for j, i := range ord {
				if i < 0 || int(i) >= len(p.Nid) {
					return fmt.Errorf("gather: sweep part %d: order[%d] = %d is not a position of nid", k, j, i)
				}
				v := p.Nid[i]
				if v < 0 || v >= numRows {
					return fmt.Errorf("gather: sweep part %d: row id nid[%d] = %d out of range [0, %d)", k, i, v, numRows)
				}
				if v < prev {
					return fmt.Errorf("gather: sweep part %d: its order does not sort its ids (nid[%d] = %d after %d)", k, i, v, prev)
				}
				sk[j], prev = uint32(v), v
			}
			orders[k], sorted[k] = ord, sk
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	// Ranges of row ids, cut at values of the largest part so that they hold
	// about as many rows each; a row falls in exactly one range.
	nr := min(runtime.GOMAXPROCS(0), total/(1<<16)+1)
	big := 0
	for k := range parts {
		if len(sorted[k]) > len(sorted[big]) {
			big = k
		}
	}
	cuts := make([]int64, 0, nr+1) // range r is [cuts[r], cuts[r+1])
	cuts = append(cuts, 0)
	for r := 1; r < nr; r++ {
		if v := int64(sorted[big][len(sorted[big])*r/nr]); v > cuts[len(cuts)-1] {
			cuts = append(cuts, v)
		}
	}
	cuts = append(cuts, math.MaxInt64)
	pl := &SweepPlan{chunks: make([]planChunk, len(cuts)-1), delivered: int64(total)}
	for r := range pl.chunks {
		var lo, hi [MaxSweepParts]int
		for k := range parts {
			lo[k], _ = slices.BinarySearch(sorted[k], uint32(cuts[r]))
			hi[k] = len(sorted[k])
			if cuts[r+1] <= math.MaxUint32 {
				hi[k], _ = slices.BinarySearch(sorted[k], uint32(cuts[r+1]))
			}
		}
		g.Go(func() error {
			pl.chunks[r].merge(sorted, orders, lo, hi)
			return nil
		})
	}
	g.Wait()
	pl.uniqueOff = make([]int64, len(pl.chunks))
	pl.extraOff = make([]int64, len(pl.chunks))
	var e int64
	for c, ch := range pl.chunks {
		pl.uniqueOff[c], pl.extraOff[c] = pl.unique, e
		pl.unique += int64(len(ch.rows))
		e += int64(len(ch.extras))
	}
	return pl, nil
}

// merge builds the chunk of the parts' sorted ids [lo[k], hi[k]).
func (ch *planChunk) merge(sorted [][]uint32, orders [][]int32, lo, hi [MaxSweepParts]int) {
	const done = math.MaxUint64
	np := len(sorted)
	var cur [MaxSweepParts]uint64
	n := 0
	for k := 0; k < np; k++ {
		cur[k] = done
		if lo[k] < hi[k] {
			cur[k] = uint64(sorted[k][lo[k]])
		}
		n += hi[k] - lo[k]
	}
	ch.rows = make([]uint32, 0, n)
	ch.first = make([]uint32, 0, n)
	last, shared := uint64(done), uint32(0) // shared: deliveries of the last row, once it has two
	head := lo
	for range n {
		bk := 0
		for k := 1; k < np; k++ {
			if cur[k] < cur[bk] {
				bk = k
			}
		}
		v := cur[bk]
		e := uint32(bk)<<partShift | uint32(orders[bk][head[bk]])
		switch {
		case v != last:
			ch.rows = append(ch.rows, uint32(v))
			ch.first = append(ch.first, e)
			last, shared = v, 0
		case shared == 0: // the row's second delivery: move both to extras
			u := len(ch.first) - 1
			i := uint32(len(ch.extras))
			ch.extras = append(ch.extras, 2, ch.first[u], e)
			ch.first[u] = sharedRow | i
			shared = 2
		default:
			shared++
			ch.extras[ch.first[len(ch.first)-1]&^sharedRow] = shared
			ch.extras = append(ch.extras, e)
		}
		head[bk]++
		if head[bk] < hi[bk] {
			cur[bk] = uint64(sorted[bk][head[bk]])
		} else {
			cur[bk] = done
		}
	}
}

// Sweep is the CPU reference for a sweep: each part gathered on its own.
func (c *CPU) Sweep(t Table, parts []SweepPart) error {
	for _, p := range parts {
		if err := c.Gather(p.Dst.Host, t, p.Nid, p.Order); err != nil {
			return err
		}
	}
	return nil
}
