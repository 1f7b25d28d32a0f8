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

// SweepPlan is one sorted pass over the union of several batches' rows: row
// Rows[u] (ascending, unique) goes to the parts and positions
// Part[Offs[u]:Offs[u+1]], Pos[Offs[u]:Offs[u+1]].
type SweepPlan struct {
	Rows []int64
	Offs []int64
	Part []int32
	Pos  []int32

	// The compact form the CUDA kernels take (8 bytes a distinct row, as
	// it crosses PCIe too): row ids as uint32; first[u] is row u's only
	// delivery, part<<28 | position, or sharedRow | i for a row shared by
	// several parts, whose extras[i] deliveries follow at extras[i+1:].
	rows32, first, extras []uint32
}

// MaxSweepParts is the most batches one sweep may cover; a part may hold up
// to 1<<28 rows.
const (
	MaxSweepParts = 8
	partShift     = 28
	sharedRow     = 1 << 31
)

// Unique is the number of distinct rows (each read once).
func (p *SweepPlan) Unique() int64 { return int64(len(p.Rows)) }

// Delivered is the number of rows written (a row shared by k parts counts k times).
func (p *SweepPlan) Delivered() int64 { return int64(len(p.Pos)) }

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
// checked against numRows, and an order must sort its part's ids.
func PlanSweep(parts []SweepPart, numRows int64) (*SweepPlan, error) {
	if len(parts) > MaxSweepParts {
		return nil, fmt.Errorf("gather: a sweep covers at most %d batches, not %d", MaxSweepParts, len(parts))
	}
	total := 0
	for k, p := range parts {
		if p.Order != nil && len(p.Order) != len(p.Nid) {
			return nil, fmt.Errorf("gather: sweep part %d: order has %d entries for %d rows", k, len(p.Order), len(p.Nid))
		}
		if len(p.Nid) >= 1<<partShift {
			return nil, fmt.Errorf("gather: sweep part %d has %d rows, more than %d", k, len(p.Nid), 1<<partShift)
		}
		total += len(p.Nid)
	}
	// Each part's ids in ascending order (reading nid through the order
	// inside the merge would cost a cache miss a row).
	orders := make([][]int32, len(parts))
	sorted := make([][]int64, len(parts))
	var g errgroup.Group
	for k, p := range parts {
		g.Go(func() error {
			ord := p.Order
			if ord == nil {
				ord = SortOrder(p.Nid)
			}
			sk := make([]int64, len(p.Nid))
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
				sk[j], prev = v, v
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
		if v := sorted[big][len(sorted[big])*r/nr]; v > cuts[len(cuts)-1] {
			cuts = append(cuts, v)
		}
	}
	cuts = append(cuts, math.MaxInt64)
	nr = len(cuts) - 1
	ranges := make([]planRange, nr)
	d0 := 0
	for r := range ranges {
		rg := &ranges[r]
		rg.d0 = d0
		for k := range parts {
			lo, _ := slices.BinarySearch(sorted[k], cuts[r])
			hi, _ := slices.BinarySearch(sorted[k], cuts[r+1])
			if r == nr-1 {
				hi = len(sorted[k])
			}
			rg.lo[k], rg.hi[k] = lo, hi
			d0 += hi - lo
		}
	}
	pl := &SweepPlan{Part: make([]int32, total), Pos: make([]int32, total)}
	compact := numRows <= 1<<32
	for r := range ranges {
		g.Go(func() error {
			ranges[r].merge(pl, sorted, orders, compact)
			return nil
		})
	}
	g.Wait()

	// Concatenate the ranges' rows, offsets and compact form.
	var u0, e0 int
	for r := range ranges {
		ranges[r].u0, ranges[r].e0 = u0, e0
		u0 += len(ranges[r].rows)
		e0 += len(ranges[r].extras)
	}
	pl.Rows = make([]int64, u0)
	pl.Offs = make([]int64, u0+1)
	pl.Offs[u0] = int64(total)
	if compact {
		pl.rows32, pl.first, pl.extras = make([]uint32, u0), make([]uint32, u0), make([]uint32, e0)
	}
	for r := range ranges {
		g.Go(func() error {
			rg := &ranges[r]
			copy(pl.Rows[rg.u0:], rg.rows)
			for i, o := range rg.offs {
				pl.Offs[rg.u0+i] = int64(rg.d0 + int(o))
			}
			if compact {
				for i, v := range rg.rows {
					pl.rows32[rg.u0+i] = uint32(v)
				}
				for i, f := range rg.first {
					if f&sharedRow != 0 {
						f += uint32(rg.e0)
					}
					pl.first[rg.u0+i] = f
				}
				copy(pl.extras[rg.e0:], rg.extras)
			}
			return nil
		})
	}
	g.Wait()
	return pl, nil
}

// planRange is one range of row ids of a sweep plan: the parts' sorted ids
// [lo[k], hi[k]), whose deliveries are pl.Part/Pos[d0:...], merged into
// the range's own rows, offsets (from d0) and compact form.
type planRange struct {
	lo, hi     [MaxSweepParts]int
	d0, u0, e0 int
	rows       []int64
	offs       []int32
	first      []uint32
	extras     []uint32
}

func (rg *planRange) merge(pl *SweepPlan, sorted [][]int64, orders [][]int32, compact bool) {
	const done = int64(math.MaxInt64)
	np := len(sorted)
	var head [MaxSweepParts]int
	var cur [MaxSweepParts]int64
	n := 0
	for k := 0; k < np; k++ {
		head[k] = rg.lo[k]
		cur[k] = done
		if head[k] < rg.hi[k] {
			cur[k] = sorted[k][head[k]]
		}
		n += rg.hi[k] - rg.lo[k]
	}
	rg.rows = make([]int64, 0, n)
	rg.offs = make([]int32, 0, n)
	part, pos := pl.Part[rg.d0:rg.d0+n], pl.Pos[rg.d0:rg.d0+n]
	last := int64(-1)
	for d := 0; d < n; d++ {
		bk := 0
		for k := 1; k < np; k++ {
			if cur[k] < cur[bk] {
				bk = k
			}
		}
		v := cur[bk]
		if v != last {
			rg.rows = append(rg.rows, v)
			rg.offs = append(rg.offs, int32(d))
			last = v
		}
		part[d], pos[d] = int32(bk), orders[bk][head[bk]]
		head[bk]++
		if head[bk] < rg.hi[bk] {
			cur[bk] = sorted[bk][head[bk]]
		} else {
			cur[bk] = done
		}
	}
	if !compact {
		return
	}
	rg.first = make([]uint32, len(rg.rows))
	for u := range rg.rows {
		a, b := int(rg.offs[u]), n
		if u+1 < len(rg.rows) {
			b = int(rg.offs[u+1])
		}
		if b-a == 1 {
			rg.first[u] = uint32(part[a])<<partShift | uint32(pos[a])
			continue
		}
		rg.first[u] = sharedRow | uint32(len(rg.extras))
		rg.extras = append(rg.extras, uint32(b-a))
		for d := a; d < b; d++ {
			rg.extras = append(rg.extras, uint32(part[d])<<partShift|uint32(pos[d]))
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
