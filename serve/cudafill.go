package serve

// Filling a GPU ring's slots: the structure through pinned staging, then the
// gathered regions by sweeps.

import (
	"context"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
)

// Fill fills slots[j] with bs[j]: the structure first (the batches write it
// into pinned staging, copied from there to the slots: the ids the gathers
// read among it), then the gathered regions, grouped by the region that
// holds their ids: features from the pinned table and labels from the
// device's copy, in one sweep over all the batches.
func (r *cudaRing) Fill(ctx context.Context, slots []int, bs []batch.Batch) error {
	if r.sampling != nil {
		return r.fillSampled(ctx, slots, bs)
	}
	if err := r.onStream(slots, r.WaitReleased); err != nil {
		return err
	}
	counts, err := r.copyStructure(slots, bs)
	if err != nil {
		return err
	}
	for _, grp := range r.gatherGroups() {
		if grp.x >= 0 && !r.planOnGPU {
			if err := r.sweepPlannedOnCPU(ctx, grp.x, slots, bs); err != nil {
				return err
			}
			if grp.y < 0 {
				continue
			}
		}
		parts := make([]gather.DevicePart, len(bs))
		for j := range bs {
			ids, _ := r.RegionAt(slots[j], grp.ids)
			parts[j] = gather.DevicePart{IDs: ids, N: int64(counts[j][grp.ids])}
			if grp.y >= 0 {
				parts[j].Y, _ = r.RegionAt(slots[j], grp.y)
			}
			if grp.x >= 0 && r.planOnGPU {
				parts[j].X, parts[j].XBytes = r.RegionAt(slots[j], grp.x)
			}
		}
		if err := grp.table.SweepOnDevice(ctx, parts); err != nil {
			return err
		}
	}
	return r.onStream(slots, r.RecordReady)
}

// gatherGroup is gathered regions filled by one sweep: rows of table
// (whose ids are region ids) into region x, and for the node features the
// labels into region y; either one absent (-1).
type gatherGroup struct {
	ids, x, y int
	table     *gather.CUDA
}

// gatherGroups are the ring's sweeps: the node features with the labels
// (they share n_id), then each other table (edge features by e_id) alone.
func (r *cudaRing) gatherGroups() []gatherGroup {
	var groups []gatherGroup
	find := func(ids int) *gatherGroup {
		for i := range groups {
			if groups[i].ids == ids && groups[i].table == r.g {
				return &groups[i]
			}
		}
		groups = append(groups, gatherGroup{ids: ids, x: -1, y: -1, table: r.g})
		return &groups[len(groups)-1]
	}
	for k, reg := range r.layout.Regions {
		switch reg.Table {
		case "":
		case "x":
			find(r.layout.Index(reg.IDs)).x = k
		case "y":
			find(r.layout.Index(reg.IDs)).y = k
		default:
			groups = append(groups, gatherGroup{ids: r.layout.Index(reg.IDs), x: k, y: -1, table: r.tables[reg.Table].(*gather.CUDA)})
		}
	}
	return groups
}

// sweepPlannedOnCPU fills region k of the slots from the batches' host ids
// and address orders: one gather kernel, or one sorted sweep over all of
// them that reads each row they share once.
func (r *cudaRing) sweepPlannedOnCPU(ctx context.Context, k int, slots []int, bs []batch.Batch) error {
	parts := make([]gather.SweepPart, len(bs))
	for j, b := range bs {
		dst, n := r.RegionAt(slots[j], k)
		ids, order := b.Rows(k)
		parts[j] = gather.SweepPart{Dst: gather.Dest{Device: dst, DeviceBytes: n}, Nid: ids, Order: order}
	}
	t := r.tables[r.layout.Regions[k].Table]
	if sw, ok := t.(gather.Sweeper); ok && len(parts) > 1 {
		_, err := sw.Sweep(ctx, parts)
		return err
	}
	for _, p := range parts {
		if err := t.Gather(ctx, p.Dst, p.Nid, p.Order); err != nil {
			return err
		}
	}
	return nil
}

// onStream calls op for each slot on the gather stream, in the ring's context.
func (r *cudaRing) onStream(slots []int, op func(slot int, s *cudaext.Stream) error) error {
	return r.Context().Do(func() error {
		for _, slot := range slots {
			if err := op(slot, r.g.Stream()); err != nil {
				return err
			}
		}
		return nil
	})
}

// copyStructure enqueues the copies of the batches' structure regions into
// their slots: each batch writes them straight into pinned staging, then
// they are copied from there to the slots. It returns each batch's counts.
func (r *cudaRing) copyStructure(slots []int, bs []batch.Batch) ([][]uint32, error) {
	var structure []int // the regions the batches write
	for k, reg := range r.layout.Regions {
		if reg.Table == "" {
			structure = append(structure, k)
		}
	}
	counts := make([][]uint32, len(bs))
	fills := make([]gather.Fill, 0, len(structure)*len(bs))
	for j, b := range bs {
		b.Meta(&r.meta)
		counts[j] = append([]uint32(nil), r.meta.Counts...)
		for _, k := range structure {
			dst, _ := r.RegionAt(slots[j], k)
			fills = append(fills, gather.Fill{Dst: dst, Bytes: r.layout.Regions[k].DataBytes(int(r.meta.Counts[k]))})
		}
	}
	at := make([]int, len(r.layout.Regions)) // region -> its place among structure
	for i, k := range structure {
		at[k] = i
	}
	return counts, r.g.CopyInWith(fills, func(host [][]byte) error {
		for j, b := range bs {
			mine := host[j*len(structure) : (j+1)*len(structure)]
			b.WriteStructure(func(k int) []byte { return mine[at[k]] }, r.workers)
		}
		return nil
	})
}
