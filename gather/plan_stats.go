package gather

// The counters and timing of sweeps planned on the GPU (plan.go), and the
// device cache they copy hot rows from.

import (
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
)

// DeviceCache is a part of the table held in device memory: Slot[id] is the
// row of Rows holding table row id, or -1 (int32 per table row).
type DeviceCache struct {
	Slot cudaext.DevicePtr
	Rows cudaext.DevicePtr
}

// PlanStats are the counts of the sweeps planned on the GPU so far.
type PlanStats struct {
	Lookups  uint64 // ids the sweeps were asked for (a row in two batches counts twice)
	Hits     uint64 // of which the cache held
	RowsRead uint64 // distinct rows read over PCIe
	// HitBytes and ReadBytes are Hits and RowsRead in bytes of the
	// backend's rows (sums over backends of different tables stay right).
	HitBytes, ReadBytes uint64
	// GPU time of the sweeps timed so far (CUDAOptions.Timing), by phase:
	// planning (marking, counting, compacting), reading the rows over PCIe
	// straight into the batches, and the assembly (cached rows, labels).
	Timed                            uint64
	PlanTime, ReadTime, AssembleTime time.Duration
	// SampleTime is the GPU time of sampling on the GPU (the daemon adds
	// it; the gather backend has none).
	SampleTime time.Duration
	// SampleWait and HostWait are the fill stream's idle time between fills
	// of batches sampled on the GPU (the daemon adds them): waiting for a
	// fill's sampling, and with nothing enqueued (the host had not yet
	// issued the next fill).
	SampleWait, HostWait time.Duration
}

// Sub is p less q, field by field: the counts and times between two reads.
func (p PlanStats) Sub(q PlanStats) PlanStats { return p.plus(q, -1) }

// Add is p plus q, field by field: the stats of two backends together.
func (p PlanStats) Add(q PlanStats) PlanStats { return p.plus(q, 1) }

// plus is p + k*q, field by field (k is 1 or -1; the counters wrap as
// uint64 arithmetic does, so a later read less an earlier one is exact).
func (p PlanStats) plus(q PlanStats, k int64) PlanStats {
	n := func(a, b uint64) uint64 { return a + uint64(k)*b }
	d := func(a, b time.Duration) time.Duration { return a + time.Duration(k)*b }
	return PlanStats{Lookups: n(p.Lookups, q.Lookups), Hits: n(p.Hits, q.Hits), RowsRead: n(p.RowsRead, q.RowsRead),
		HitBytes: n(p.HitBytes, q.HitBytes), ReadBytes: n(p.ReadBytes, q.ReadBytes), Timed: n(p.Timed, q.Timed),
		PlanTime: d(p.PlanTime, q.PlanTime), ReadTime: d(p.ReadTime, q.ReadTime), AssembleTime: d(p.AssembleTime, q.AssembleTime),
		SampleTime: d(p.SampleTime, q.SampleTime), SampleWait: d(p.SampleWait, q.SampleWait), HostWait: d(p.HostWait, q.HostWait)}
}

// PlanStats reads the counters of the sweeps planned on the GPU (zero before
// the first). The read does not wait for the backend's stream, so sweeps
// still running may or may not be counted.
func (g *CUDA) PlanStats() (PlanStats, error) {
	g.mu.Lock()
	p := g.plan.stats
	g.mu.Unlock()
	var st PlanStats
	if p == 0 {
		return st, nil
	}
	err := g.ctx.Do(func() error {
		s, err := cudaext.NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		b := make([]byte, 24)
		if err := cudaext.CopyToHost(b, p, s); err != nil {
			return err
		}
		v := unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), 3)
		rb := uint64(g.tab.RowBytes)
		st = PlanStats{Lookups: v[0], Hits: v[1], RowsRead: v[2], HitBytes: v[1] * rb, ReadBytes: v[2] * rb}
		return nil
	})
	g.mu.Lock()
	g.harvest(false)
	st.Timed, st.PlanTime, st.ReadTime, st.AssembleTime = g.timed.n, g.timed.plan, g.timed.read, g.timed.assemble
	g.mu.Unlock()
	return st, err
}

// sweepEvents time one sweep: recorded before planning, after it, after the
// PCIe read, after the assembly.
type sweepEvents [4]*cudaext.Event

// timeSweep records event k of the current sweep's set (Timing on).
// Context current, g.mu held.
func (g *CUDA) timeSweep(k int) error {
	if !g.opts.Timing {
		return nil
	}
	if k == 0 {
		g.harvest(false)
		if len(g.timing.free) == 0 {
			var s sweepEvents
			if err := cudaext.NewEvents(s[:], cudaext.EventDefault); err != nil {
				return err
			}
			g.timing.free = append(g.timing.free, s)
		}
		g.timing.cur = g.timing.free[len(g.timing.free)-1]
		g.timing.free = g.timing.free[:len(g.timing.free)-1]
	}
	if err := g.timing.cur[k].Record(g.stream); err != nil {
		return err
	}
	if k == 3 {
		g.timing.pending = append(g.timing.pending, g.timing.cur)
	}
	return nil
}

// harvest adds the times of the timed sweeps that have completed (all of
// them when wait is set) and recycles their events. Context current (or
// not: Event calls need none), g.mu held.
func (g *CUDA) harvest(wait bool) {
	t := &g.timing
	for len(t.pending) > 0 {
		s := t.pending[0]
		if done, err := s[3].Done(); err != nil || !done && !wait {
			return
		} else if !done {
			s[3].Synchronize()
		}
		d := func(a, b int) time.Duration { e, _ := cudaext.Elapsed(s[a], s[b]); return e }
		g.timed.n++
		g.timed.plan += d(0, 1)
		g.timed.read += d(1, 2)
		g.timed.assemble += d(2, 3)
		t.pending = t.pending[1:]
		t.free = append(t.free, s)
	}
}

// UseCache makes later sweeps planned on the GPU copy the rows c holds from
// there (nil: none). The caller keeps c alive while the backend lives.
func (g *CUDA) UseCache(c *DeviceCache) {
	g.mu.Lock()
	g.opts.Cache = c
	g.mu.Unlock()
}
