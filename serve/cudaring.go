package serve

// A trainer's GPU slot ring: making it on its device, what it tells the
// trainer, closing it.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// newRing makes a trainer's slots on its device.
func (b *gpuBackend) newRing(req *request, layout *batch.Layout, l pingpong.Layout) (slotRing, error) {
	dev := req.device
	name := fmt.Sprintf("cuda:%d", dev)
	if dev >= b.count {
		return nil, perrf(ipc.CodeBadRequest, "device %q does not exist: this host has %d GPU(s) (cuda:0..cuda:%d)", name, b.count, b.count-1)
	}
	ctx, ok := b.ctx[dev]
	if !ok {
		return nil, perrf(ipc.CodeBadRequest, "device %q is not one this daemon serves (--gpus %s)", name, b.allowedString())
	}
	plan, err := b.planGroups(layout)
	if err != nil {
		return nil, perrf(ipc.CodeBadRequest, "dataset %s: %v: ask for device \"cpu\"", b.src.Data.Name, err)
	}
	slots := req.slots
	sweep := sweepWidth(b.cfg.SweepBatches, slots)
	for _, p := range plan { // a sweep's deliveries keep 26 bits of position
		r := l.Regions[p.ids]
		if r.Bytes/8 > gather.MaxPartRows {
			return nil, perrf(ipc.CodeLimit, "a batch may hold up to %d %s ids, and a GPU sweep takes at most %d a batch: ask for a smaller batch_size or fanouts, or device \"cpu\"",
				r.Bytes/8, r.Name, gather.MaxPartRows)
		}
		sweep = sweepFits(sweep, r.Bytes/8)
	}
	// The slots and the GPU sampling are counted against the slot memory
	// before either is allocated.
	var mem *samplingMemory
	if req.onDevice {
		m, err := b.samplingFor(dev, req, b.maxDeg, sweep)
		if err != nil {
			return nil, perrf(ipc.CodeInternal, "%s: sampling on the GPU: %v", name, err)
		}
		mem = &m
	}
	reserved, err := b.reserveRing(dev, slots, l.SlotBytes, pingpong.CUDARingBytes(slots, l), b.planBytes(plan, l, sweep), mem)
	if err != nil {
		return nil, err
	}
	giveBack := func() { b.unreserve(dev, reserved) }
	ring, err := pingpong.NewCUDARing(ctx, slots, l, b.cfg.Reserve)
	if err != nil {
		giveBack()
		if errors.Is(err, pingpong.ErrNoRoom) || errors.Is(err, cudaext.ErrOutOfMemory) {
			return nil, slotMemoryErrorf(ipc.CodeBusy, "%v: ask for fewer slots, a smaller batch_size or fanouts", err)
		}
		return nil, perrf(ipc.CodeInternal, "%s: %v", name, err)
	}
	// The trainer's GPU sampling buffers (counted with its slots), then its
	// tables with their sweeps' planning memory, then, once all of it fits
	// the slot memory, (for the device's first trainer) the cache: the cache
	// takes what is left, and nothing this ring needs is allocated after
	// it, so no sweep runs out of memory mid-epoch.
	var sampling *deviceSampling
	if mem != nil {
		err := ctx.Do(func() (err error) {
			if sampling, err = b.newDeviceSampling(ctx, dev, req, b.maxDeg, mem.lanes); err == nil && sampling.bytes() != mem.bytes() {
				err = fmt.Errorf("%d bytes, %d counted before they were allocated", sampling.bytes(), mem.bytes())
				sampling.close()
			}
			return err
		})
		if err != nil {
			ring.Close()
			giveBack()
			if errors.Is(err, cudaext.ErrOutOfMemory) {
				return nil, slotMemoryErrorf(ipc.CodeBusy, "%s: sampling on the GPU: %v", name, err)
			}
			return nil, perrf(ipc.CodeInternal, "%s: sampling on the GPU: %v", name, err)
		}
	}
	// undo frees what this Open allocated so far (groups: its tables) and
	// gives back what it counted.
	undo := func(groups []gatherGroup) {
		for i := len(groups) - 1; i >= 0; i-- {
			groups[i].table.Close()
		}
		if sampling != nil {
			ctx.Do(func() error { sampling.close(); return nil })
		}
		ring.Close()
		giveBack()
	}
	// groupErr is what a failure to make the tables or their cache tells
	// the trainer: busy when the device's memory ran out (admitRing may
	// try fewer slots), else internal.
	groupErr := func(err error) error {
		if errors.Is(err, cudaext.ErrOutOfMemory) {
			return slotMemoryErrorf(ipc.CodeBusy, "%s: %v", name, err)
		}
		return perrf(ipc.CodeInternal, "%s: %v", name, err)
	}
	groups, err := b.newGroups(ctx, dev, plan, l, sweep)
	if err != nil {
		undo(nil)
		return nil, groupErr(err)
	}
	// The tables' sweep planning memory counts against the slot memory as
	// the slots and the sampling do: known only once allocated, it is
	// checked here, and a trainer it does not fit beside is refused (with
	// the default slots, it tries half as many: admitRing).
	var planned int64
	for _, g := range groups {
		planned += g.table.PlanBytes()
	}
	b.mu.Lock()
	b.used[dev] += planned
	if used := b.used[dev]; b.cfg.SlotMemory > 0 && used > b.cfg.SlotMemory {
		b.used[dev] -= planned
		b.mu.Unlock()
		undo(groups)
		var sampled int64
		if sampling != nil {
			sampled = sampling.bytes()
		}
		return nil, slotMemoryErrorf(ipc.CodeBusy, "%d slots of %d bytes with their sampling (%d bytes) and sweep planning (%d bytes) memory do not fit in the GPU slot memory of %s (%d of %d bytes in use with them)",
			slots, l.SlotBytes, sampled, planned, name, used, b.cfg.SlotMemory)
	}
	b.mu.Unlock()
	giveBack = func() { b.unreserve(dev, reserved+planned) }
	if err := b.useCache(ctx, dev, plan, groups, req); err != nil {
		undo(groups)
		return nil, groupErr(err)
	}
	r := &cudaRing{CUDARing: ring, dev: dev, g: groups[0].table, groups: groups, layout: layout,
		workers: b.workers, sweep: sweep, ahead: sweepAhead(b.cfg.SweepAhead, sweep), planOnGPU: b.cfg.SweepPlan == "gpu", sampling: sampling}
	b.mu.Lock()
	b.rings[r] = struct{}{}
	b.mu.Unlock()
	r.giveBack = func() {
		st, _ := r.stats()
		b.mu.Lock()
		delete(b.rings, r)
		b.closedStats[dev] = b.closedStats[dev].Add(st)
		b.mu.Unlock()
		giveBack()
	}
	return r, nil
}

// reserveRing counts a trainer's ring against device dev's slot memory
// before any of it is allocated: ringBytes for its slots slots of
// slotBytes each and, where it samples on the GPU (s not nil), s.bytes()
// for its sampling, whose lanes it cuts to the most that fit in what is
// left of GPUConfig.SlotMemory beside the slots and planBytes for the
// sweep planning its tables will take (at least one lane, or the trainer
// is refused; the planning itself is counted once the tables are made).
// The check and the count are made together under b.mu, so two Opens
// cannot both take what is left. It returns the bytes counted, for
// unreserve once the ring is closed or not made.
func (b *gpuBackend) reserveRing(dev, slots int, slotBytes, ringBytes, planBytes int64, s *samplingMemory) (int64, error) {
	name, limit := fmt.Sprintf("cuda:%d", dev), b.cfg.SlotMemory
	b.mu.Lock()
	used := b.used[dev]
	if limit > 0 && used+ringBytes+planBytes > limit {
		b.mu.Unlock()
		return 0, slotMemoryErrorf(ipc.CodeBusy, "%d slots of %d bytes and their sweep planning (%d bytes) do not fit in the GPU slot memory of %s (%d of %d bytes in use)",
			slots, slotBytes, planBytes, name, used, limit)
	}
	bytes, want := ringBytes, 0
	if s != nil {
		want = s.lanes
		lanes := lanesInSlotMemory(want, s.per, s.fixed, limit, used+ringBytes+planBytes)
		if lanes < 1 {
			b.mu.Unlock()
			return 0, slotMemoryErrorf(ipc.CodeBusy, "%d slots of %d bytes, their sweep planning (%d bytes) and their GPU sampling (%d bytes with one lane) do not fit in the GPU slot memory of %s (%d of %d bytes in use)",
				slots, slotBytes, planBytes, s.per+s.fixed, name, used, limit)
		}
		s.lanes = lanes
		bytes += s.bytes()
	}
	b.used[dev] += bytes
	b.mu.Unlock()
	if s != nil && s.lanes < want && b.log != nil {
		b.log.Info("GPU sampling: fewer lanes than configured, to fit the GPU slot memory",
			"device", dev, "lanes", s.lanes, "configured", want, "lane_bytes", s.per, "slot_memory_bytes", limit, "in_use_bytes", used+ringBytes,
			"planning_bytes", planBytes)
	}
	return bytes, nil
}

// unreserve gives back bytes of device dev's slot memory counted by
// reserveRing or after it.
func (b *gpuBackend) unreserve(dev int, bytes int64) {
	b.mu.Lock()
	b.used[dev] -= bytes
	b.mu.Unlock()
}

// sweepWidth is the most batches one fill of a GPU ring with slots slots
// may cover, for GPUConfig.SweepBatches batches (0: half the slots).
func sweepWidth(batches, slots int) int {
	if batches <= 0 {
		batches = slots / 2
	}
	return max(1, min(batches, slots, gather.MaxSweepParts))
}

// sweepFits caps a sweep width so that width batches of up to capacity ids
// each stay within what one sweep on the GPU takes (gather.MaxSweepIDs: a
// sampled batch's sweep counts its region's capacity, not its ids).
func sweepFits(width int, capacity int64) int {
	if capacity > 0 {
		width = max(1, min(width, int(gather.MaxSweepIDs/capacity)))
	}
	return width
}

// sweepAhead is the announced, unreleased batches above which a fill of a
// ring sweeping width batches waits for a whole sweep, for
// GPUConfig.SweepAhead ahead (0: half the width; negative: never).
func sweepAhead(ahead, width int) int {
	switch {
	case width <= 1 || ahead < 0:
		return -1
	case ahead == 0:
		return width / 2
	}
	return ahead
}

// cudaRing is the GPU path: slots in GPU memory, filled on the trainer's own
// non-blocking gather stream. Per fill, on that stream: wait for the slots'
// "released" events, gather the rows of each gathered region (in address
// order; several batches in one sorted sweep), copy the structure the
// batches wrote into pinned staging to their slots, record each slot's
// "ready" event. Nothing waits on the CPU except the staging.
type cudaRing struct {
	*pingpong.CUDARing
	dev      int
	g        *gather.CUDA  // the stream and staging of the fills (groups[0]'s)
	groups   []gatherGroup // the sweeps of a fill
	layout   *batch.Layout
	workers  int // goroutines writing a batch's structure
	giveBack func()
	sweep    int         // most batches one fill may cover
	ahead    int         // SweepAhead: announced batches above which a fill waits for a whole sweep
	busy     atomic.Bool // tests: Busy reports true whatever the stream does
	once     sync.Once
	meta     batch.Meta
	// planOnGPU: gathered regions are filled by sweeps planned on the GPU
	// from the ids already copied to the slots; otherwise the CPU plans the
	// sweep from the batches' host ids and address orders.
	planOnGPU bool
	// sampling, when not nil: the batches are sampled on the GPU
	// (cudasample.go).
	sampling *deviceSampling
}

func (r *cudaRing) Describe(o *ipc.Opened) []int {
	o.Memory = ipc.MemoryCUDA
	o.CUDADevice = uint32(r.dev)
	h := r.MemHandle()
	o.MemHandle = h[:]
	for _, e := range r.EventHandles() {
		o.Events = append(o.Events, ipc.EventIPC{Ready: e[0], Released: e[1]})
	}
	o.ReadyWords = uint64(r.ReadyWords())
	return nil
}

// SweepWidth is the most batches one Fill may take.
func (r *cudaRing) SweepWidth() int { return r.sweep }

// SweepAhead is GPUConfig.SweepAhead resolved for this ring.
func (r *cudaRing) SweepAhead() int { return r.ahead }

// Busy reports whether fills enqueued earlier are still running on the GPU.
func (r *cudaRing) Busy() bool {
	if r.busy.Load() {
		return true
	}
	var done bool
	err := r.Context().Do(func() (err error) {
		done, err = r.g.Stream().Done()
		return err
	})
	return err == nil && !done
}

func (r *cudaRing) Close() error {
	var err error
	r.once.Do(func() {
		// The fills enqueued so far finish first, so the counters and times
		// giveBack keeps include them (the backends' Close would wait anyway).
		r.Context().Do(r.g.Stream().Synchronize)
		r.giveBack() // keeps the sweep counters, so before the backend closes
		var errs []error
		for i := len(r.groups) - 1; i >= 0; i-- { // g, whose stream the others use, last
			errs = append(errs, r.groups[i].table.Close())
		}
		err = errors.Join(append(errs, r.CUDARing.Close())...)
		if r.sampling != nil {
			r.Context().Do(func() error { r.sampling.close(); return nil })
		}
	})
	return err
}

// stats are the ring's sweep counters, summed over its tables (bytes
// per table's rows), and, with GPUConfig.Timing, the GPU time of its
// sampling.
func (r *cudaRing) stats() (gather.PlanStats, error) {
	var st gather.PlanStats
	var errs []error
	for _, grp := range r.groups {
		one, err := grp.table.PlanStats()
		st, errs = st.Add(one), append(errs, err)
	}
	err := errors.Join(errs...)
	if r.sampling != nil {
		t := r.sampling.fillTimes()
		st.SampleTime, st.SampleWait, st.HostWait = t.sampled, t.sampleWait, t.hostWait
	}
	return st, err
}
