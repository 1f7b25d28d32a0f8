package serve

// Filling a GPU ring's slots: the structure through pinned staging, then the
// gathered regions by sweeps.

import (
	"context"
	"fmt"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/pingpong"
	"github.com/gnnloader/gnnloader/pinned"
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
	counts, err := r.copyStructure(slots, bs)
	if err != nil {
		return err
	}
	for _, grp := range r.groups {
		if grp.x >= 0 && !r.planOnGPU {
			if err := r.sweepPlannedOnCPU(ctx, grp, slots, bs); err != nil {
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
	return r.Context().Do(func() error { return r.RecordReady(r.g.Stream(), slots...) })
}

// gatherGroup is gathered regions filled by one sweep over the rows of one
// ids region: rows of a table into region x and labels into region y
// (either absent, -1), by a backend over that table with those labels on
// the device.
type gatherGroup struct {
	ids, x, y int
	table     *gather.CUDA
}

// groupPlan is a gatherGroup before its backend: the table and label table
// it reads.
type groupPlan struct {
	ids, x, y     int
	table, labels string
}

// planGroups groups a layout's gathered regions by their ids region: per
// group at most one feature table and one label table (a node type's x and
// y share its n_id; edge features each get a group of their own, being
// tables of their own over e_id). The group of "x" (the node features)
// comes first: its backend's stream carries the fills.
func (b *gpuBackend) planGroups(l *batch.Layout) ([]groupPlan, error) {
	var groups []groupPlan
	labels := b.src.labelTables()
	find := func(ids int, label bool) *groupPlan {
		for i := range groups {
			if g := &groups[i]; g.ids == ids && (label && g.y < 0 || !label && g.x < 0) {
				return g
			}
		}
		groups = append(groups, groupPlan{ids: ids, x: -1, y: -1})
		return &groups[len(groups)-1]
	}
	for k, reg := range l.Regions {
		_, isLabels := labels[reg.Table]
		switch {
		case reg.Table == "":
		case isLabels:
			g := find(l.Index(reg.IDs), true)
			g.y, g.labels = k, reg.Table
		case b.src.stores[reg.Table] != nil:
			g := find(l.Index(reg.IDs), false)
			g.x, g.table = k, reg.Table
		default:
			return nil, fmt.Errorf("region %s gathers from table %q, which the GPU path does not hold", reg.Name, reg.Table)
		}
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("its batches gather nothing, which the GPU path does not serve")
	}
	for i, g := range groups {
		if g.table == "x" {
			groups[0], groups[i] = groups[i], groups[0]
		}
	}
	return groups, nil
}

// newGroups makes the backends of a ring's groups on device dev: the first
// with a stream of its own, the others on it. A group of labels alone reads
// no rows; its backend is over the node features (any registered table).
// Each backend that Fill will sweep on the device reserves the planning
// memory of the ring's largest sweep (sweep batches, each as many ids as its
// slot region holds); the device's cache comes later (useCache).
func (b *gpuBackend) newGroups(ctx *cudaext.Context, dev int, plan []groupPlan, layout pingpong.Layout, sweep int) ([]gatherGroup, error) {
	var groups []gatherGroup
	fail := func(err error) ([]gatherGroup, error) {
		for i := len(groups) - 1; i >= 0; i-- {
			groups[i].table.Close()
		}
		return nil, err
	}
	for i, p := range plan {
		opts := b.opts
		if i > 0 {
			opts.Stream = groups[0].table.Stream()
		}
		if p.labels != "" {
			opts.Labels = b.labels[dev][p.labels]
		}
		g, err := gather.NewCUDA(ctx, b.groupStore(plan, i), &opts)
		if err != nil {
			return fail(fmt.Errorf("table %s: %w", p.table, err))
		}
		groups = append(groups, gatherGroup{ids: p.ids, x: p.x, y: p.y, table: g})
		if ids := b.sweepIDs(p, layout, sweep); ids > 0 {
			if err := g.ReservePlan(ids); err != nil {
				return fail(fmt.Errorf("table %s: %w", p.table, err))
			}
		}
	}
	return groups, nil
}

// groupStore is the table plan[i]'s backend reads: its own, or for a group
// of labels alone any registered one.
func (b *gpuBackend) groupStore(plan []groupPlan, i int) *pinned.Store {
	store := b.src.stores[plan[i].table]
	if plan[i].table == "" {
		if store = b.src.stores[plan[0].table]; store == nil {
			store = b.store
		}
	}
	return store
}

// sweepIDs is the most ids a fill of sweep batches has group p's backend
// plan on the device (0: it plans none; a region of no ids sweeps nothing).
func (b *gpuBackend) sweepIDs(p groupPlan, layout pingpong.Layout, sweep int) int64 {
	if ids := int64(sweep) * (layout.Regions[p.ids].Bytes / 8); ids > 0 && (b.cfg.SweepPlan == "gpu" || p.y >= 0) {
		return ids
	}
	return 0
}

// planBytes is the planning memory newGroups' backends will hold
// (gather.PlanBytesFor), known before they are made.
func (b *gpuBackend) planBytes(plan []groupPlan, layout pingpong.Layout, sweep int) int64 {
	var n int64
	for i, p := range plan {
		if ids, store := b.sweepIDs(p, layout, sweep), b.groupStore(plan, i); ids > 0 && store != nil {
			n += gather.PlanBytesFor(store.NumRows, ids)
		}
	}
	return n
}

// useCache gives the groups that gather the node features their device's
// hot-row cache (GPUConfig.Cache), built at the device's first trainer.
// newRing calls it last, once the ring's memory is allocated and counted
// against the slot memory: the cache then takes what is left, and an Open
// that the slot memory refuses builds none (a build sized beside the
// refused ring would leave the memory that ring gives back unused, after
// seconds of copying).
func (b *gpuBackend) useCache(ctx *cudaext.Context, dev int, plan []groupPlan, groups []gatherGroup, req *request) error {
	for i, p := range plan {
		if p.table != "x" {
			continue
		}
		cache, err := b.cacheFor(dev, ctx, groups[i].table, b.src, req, b.log)
		if err != nil {
			return err
		}
		groups[i].table.UseCache(cache)
	}
	return nil
}

// sweepPlannedOnCPU fills region k of the slots from the batches' host ids
// and address orders: one gather kernel, or one sorted sweep over all of
// them that reads each row they share once.
func (r *cudaRing) sweepPlannedOnCPU(ctx context.Context, grp gatherGroup, slots []int, bs []batch.Batch) error {
	k := grp.x
	parts := make([]gather.SweepPart, len(bs))
	for j, b := range bs {
		dst, n := r.RegionAt(slots[j], k)
		ids, order := b.Rows(k)
		parts[j] = gather.SweepPart{Dst: gather.Dest{Device: dst, DeviceBytes: n}, Nid: ids, Order: order}
	}
	var t gather.Backend = grp.table
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
