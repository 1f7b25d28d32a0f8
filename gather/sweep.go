package gather

import (
	"fmt"
	"slices"
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

	// The compact form the CUDA kernels take: row ids and offsets as uint32,
	// deliveries as part<<29 | position.
	rows32, offs32, dlv []uint32
}

// MaxSweepParts is the most batches one sweep may cover; a part may hold up
// to 1<<29 rows.
const (
	MaxSweepParts = 8
	partShift     = 29
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

// PlanSweep merges the parts' sorted rows (a k-way merge over their orders)
// into one plan. Ids are checked against numRows.
func PlanSweep(parts []SweepPart, numRows int64) (*SweepPlan, error) {
	if len(parts) > MaxSweepParts {
		return nil, fmt.Errorf("gather: a sweep covers at most %d batches, not %d", MaxSweepParts, len(parts))
	}
	total := 0
	orders := make([][]int32, len(parts))
	for k, p := range parts {
		if p.Order != nil && len(p.Order) != len(p.Nid) {
			return nil, fmt.Errorf("gather: sweep part %d: order has %d entries for %d rows", k, len(p.Order), len(p.Nid))
		}
		if len(p.Nid) >= 1<<partShift {
			return nil, fmt.Errorf("gather: sweep part %d has %d rows, more than %d", k, len(p.Nid), 1<<partShift)
		}
		for i, v := range p.Nid {
			if v < 0 || v >= numRows {
				return nil, fmt.Errorf("gather: sweep part %d: row id nid[%d] = %d out of range [0, %d)", k, i, v, numRows)
			}
		}
		orders[k] = p.Order
		if orders[k] == nil {
			orders[k] = SortOrder(p.Nid)
		}
		total += len(p.Nid)
	}
	pl := &SweepPlan{
		Rows: make([]int64, 0, total),
		Offs: make([]int64, 1, total+1),
		Part: make([]int32, 0, total),
		Pos:  make([]int32, 0, total),
	}
	head := make([]int, len(parts))
	for {
		best, bk := int64(-1), -1
		for k := range parts {
			if head[k] < len(orders[k]) {
				v := parts[k].Nid[orders[k][head[k]]]
				if bk < 0 || v < best {
					best, bk = v, k
				}
			}
		}
		if bk < 0 {
			break
		}
		pos := orders[bk][head[bk]]
		head[bk]++
		if n := len(pl.Rows); n == 0 || pl.Rows[n-1] != best {
			if n > 0 {
				pl.Offs = append(pl.Offs, int64(len(pl.Pos)))
			}
			pl.Rows = append(pl.Rows, best)
		}
		pl.Part = append(pl.Part, int32(bk))
		pl.Pos = append(pl.Pos, pos)
	}
	if len(pl.Rows) > 0 {
		pl.Offs = append(pl.Offs, int64(len(pl.Pos)))
	}
	if numRows <= 1<<32 {
		pl.rows32 = make([]uint32, len(pl.Rows))
		for i, v := range pl.Rows {
			pl.rows32[i] = uint32(v)
		}
		pl.offs32 = make([]uint32, len(pl.Offs))
		for i, v := range pl.Offs {
			pl.offs32[i] = uint32(v)
		}
		pl.dlv = make([]uint32, len(pl.Pos))
		for i := range pl.dlv {
			pl.dlv[i] = uint32(pl.Part[i])<<partShift | uint32(pl.Pos[i])
		}
	}
	return pl, nil
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
