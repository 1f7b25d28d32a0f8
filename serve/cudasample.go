package serve

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/sampler"
)

// Sampling on the GPU (GPUConfig.Sampling): each device that can spare the
// memory holds the graph's CSR once (sampler.DeviceGraph), and a trainer on
// it gets batches sampled there, straight into its slots, by its own
// sampler.GPU (working memory sized by its largest batch: room for the
// batch, and a hash table of 16 bytes an entry, a power of two of at least
// twice the batch's most nodes), which samples a fill's batches
// GPUConfig.SampleLanes at a time, or fewer where memory is short
// (samplingFor, reserveRing). The batches are the CPU sampler's, byte for
// byte; the CPU only uploads the seeds and launches.

// loadGraph copies the graph to device dev when the sampling policy wants it
// there: "gpu" always (an error if it does not fit), "auto" when it takes at
// most a third of the memory free beyond the reserve, "cpu" never.
func (b *gpuBackend) loadGraph(dev int, ctx *cudaext.Context, src *Source) error {
	if b.cfg.Sampling == "cpu" {
		return nil
	}
	g := &src.Data.Graph
	need := sampler.DeviceGraphBytes(g)
	return ctx.Do(func() error {
		free, _, err := cudaext.MemGetInfo()
		if err != nil {
			return err
		}
		if b.cfg.Sampling == "auto" && need > (free-b.cfg.Reserve)/3 {
			return nil // the CPU samples for this device
		}
		dg, err := sampler.NewDeviceGraph(g)
		if err != nil {
			return fmt.Errorf("cuda:%d: the graph's CSR (%d bytes) on the device, for --sampling %s: %w", dev, need, b.cfg.Sampling, err)
		}
		b.graphs[dev] = dg
		return nil
	})
}

// samplesOn reports whether trainers on device dev are sampled there.
func (b *gpuBackend) samplesOn(dev int) bool {
	_, ok := b.graphs[dev]
	return ok
}

// deviceSampling is a ring's GPU sampler and what its fills use. Sampling
// runs on a stream of its own, so a fill's sampling overlaps the previous
// fill's gather on the ring's stream; that stream waits for it (an event)
// before the sweep. The counts of a fill's batches live in one of
// countsRing device buffers, reused only after the sweep that read them (an
// event recorded after it); the seeds and counts cross to and from the host
// through pinned memory, which the host touches only after the previous
// fill's counts have arrived (each batch's Meta waits for them).
type deviceSampling struct {
	gs          *sampler.GPU
	st          *cudaext.Stream
	seeds       cudaext.DevicePtr
	counts      [countsRing]cudaext.DevicePtr
	read        [countsRing]*cudaext.Event // recorded after the sweep that read counts[k]
	recorded    [countsRing]bool
	seedsHost   []byte // pinned: the seeds, then the input ids (input_id)
	host        []byte // pinned: the counts, copied back
	done        *cudaext.Event
	seq         int
	batch, clen int
	timing      bool
	mu          sync.Mutex
	cur         *fillEvents  // the fill being timed (from markSampling to markFilled)
	times       []fillEvents // pending: fills whose marks are all recorded, not yet added up
	freeTimes   []fillEvents
	last        *fillEvents // the last fill added up (its markFilled is the next one's start of idle)
	timed       fillTimes   // added up so far
}

// countsRing is how many fills' counts may be in flight on the device.
const countsRing = 4

// bytes is the device memory the sampling holds (samplingMemory.bytes
// before it is made).
func (d *deviceSampling) bytes() int64 { return samplingBytes(d.gs.Bytes, d.batch, d.clen) }

// samplingBytes is the device memory of a ring's GPU sampling with a
// sampler of gpu bytes, for batches of at most batch seeds and clen counts:
// the sampler's, the seeds of a fill's batches and countsRing fills'
// counts.
func samplingBytes(gpu int64, batch, clen int) int64 {
	return gpu + seedsBytes(batch) + countsRing*countsBytes(clen)
}

// seedsBytes and countsBytes are the device buffers of a fill's seeds and
// of one fill's counts.
func seedsBytes(batch int) int64 { return int64(gather.MaxDeviceParts) * int64(8*batch) }
func countsBytes(clen int) int64 { return int64(gather.MaxDeviceParts) * int64(8*clen) }

// pinnedHost is page-aligned host memory registered with the driver.
func pinnedHost(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, max(n, 4096), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if err := cudaext.HostRegister(b, 0); err != nil {
		unix.Munmap(b)
		return nil, err
	}
	return b, nil
}

func freePinned(b []byte) {
	if b != nil {
		cudaext.HostUnregister(b)
		unix.Munmap(b)
	}
}

// newDeviceSampling makes a ring's GPU sampler, with lanes lanes
// (samplingFor, cut by reserveRing). Context current.
func (b *gpuBackend) newDeviceSampling(ctx *cudaext.Context, dev int, req *request, maxDegree int64, lanes int) (_ *deviceSampling, err error) {
	d := &deviceSampling{batch: req.maxSeeds, clen: sampler.CountsLen(len(req.fanouts)), timing: b.cfg.Timing}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.gs, err = sampler.NewGPU(ctx, b.graphs[dev], req.fanouts, req.maxSeeds, maxDegree, lanes); err != nil {
		return nil, err
	}
	if d.st, err = cudaext.NewStream(); err != nil {
		return nil, err
	}
	if d.seeds, err = cudaext.MemAlloc(seedsBytes(d.batch)); err != nil {
		return nil, err
	}
	for k := range d.counts {
		if d.counts[k], err = cudaext.MemAlloc(countsBytes(d.clen)); err != nil {
			return nil, err
		}
		if d.read[k], err = cudaext.NewEvent(cudaext.EventDisableTiming); err != nil {
			return nil, err
		}
	}
	if d.seedsHost, err = pinnedHost(2 * gather.MaxDeviceParts * 8 * d.batch); err != nil {
		return nil, err
	}
	if d.host, err = pinnedHost(gather.MaxDeviceParts * 8 * d.clen); err != nil {
		return nil, err
	}
	d.done, err = cudaext.NewEvent(cudaext.EventDisableTiming | cudaext.EventBlockingSync)
	return d, err
}

// sampleLaneBudget bounds the device memory of a trainer's GPU sampling
// lanes past the first: batches that may reach most of a large graph (-1
// fanouts) need far more working memory a lane than papers100M's 55 MB, and
// get fewer lanes (at least one) rather than gigabytes more.
const sampleLaneBudget = 1 << 30

// samplingMemory is the device memory a ring's GPU sampling will take,
// known before any of it is allocated: lanes of per bytes each
// (sampler.GPULaneBytes), and fixed bytes beside them (samplingBytes with
// sampler.GPUFixedBytes). bytes is what deviceSampling.bytes counts once
// it is made.
type samplingMemory struct {
	lanes      int
	per, fixed int64
}

func (m samplingMemory) bytes() int64 { return int64(m.lanes)*m.per + m.fixed }

// samplingFor is the memory of a ring's GPU sampling on device dev, with
// the lanes it gets before the slot memory's cut (reserveRing): the
// configured number, at most a fill's batches (sweep), cut to what
// sampleLaneBudget allows.
func (b *gpuBackend) samplingFor(dev int, req *request, maxDegree int64, sweep int) (samplingMemory, error) {
	want := min(b.cfg.SampleLanes, sweep) // both 1 to 32 (sampler.MaxLanes, gather.MaxSweepParts)
	per, err := sampler.GPULaneBytes(b.graphs[dev], req.fanouts, req.maxSeeds, maxDegree)
	if err != nil {
		return samplingMemory{}, err
	}
	lanes := lanesWithin(want, per, sampleLaneBudget)
	if lanes < want && b.log != nil {
		b.log.Info("GPU sampling: fewer lanes than configured, each lane's working memory being large",
			"device", dev, "lanes", lanes, "configured", want, "lane_bytes", per, "budget_bytes", int64(sampleLaneBudget))
	}
	fixed := samplingBytes(sampler.GPUFixedBytes, req.maxSeeds, sampler.CountsLen(len(req.fanouts)))
	return samplingMemory{lanes: lanes, per: per, fixed: fixed}, nil
}

// lanesWithin is want lanes of per bytes each, cut so that the lanes past
// the first take at most budget bytes (at least one lane).
func lanesWithin(want int, per, budget int64) int {
	if per <= 0 {
		return max(want, 1)
	}
	return max(1, min(want, 1+int(budget/per)))
}

// lanesInSlotMemory is want lanes of per bytes each, beside fixed bytes,
// cut to the most that fit in the slot memory limit (0: no cap) with used
// bytes of it taken; 0 where not even one lane fits.
func lanesInSlotMemory(want int, per, fixed, limit, used int64) int {
	if limit <= 0 {
		return want
	}
	free := limit - used // both at least 0
	if free < fixed {
		return 0
	}
	if free -= fixed; per <= 0 {
		return want
	}
	return int(min(int64(want), free/per))
}

// close frees what newDeviceSampling made. Context current.
func (d *deviceSampling) close() {
	if d.st != nil {
		d.st.Synchronize()
	}
	d.mu.Lock()
	d.harvestLocked(true)
	if d.last != nil {
		d.freeTimes = append(d.freeTimes, *d.last)
	}
	if d.cur != nil {
		d.freeTimes = append(d.freeTimes, *d.cur)
	}
	for _, f := range d.freeTimes {
		for _, e := range f {
			e.Destroy()
		}
	}
	d.mu.Unlock()
	if d.gs != nil {
		d.gs.Close()
	}
	for _, p := range append([]cudaext.DevicePtr{d.seeds}, d.counts[:]...) {
		if p != 0 {
			cudaext.MemFree(p)
		}
	}
	for _, e := range append([]*cudaext.Event{d.done}, d.read[:]...) {
		if e != nil {
			e.Destroy()
		}
	}
	freePinned(d.seedsHost)
	freePinned(d.host)
	if d.st != nil {
		d.st.Destroy()
	}
}

// fillSampled is Fill for batches sampled on the GPU (the slots' released
// events done: the pipeline's AwaitReleased): on the sampling stream the
// seeds go up, every batch is sampled into its slot and the counts come
// back (each batch's Meta waits for them); the ring's stream waits for
// that, then fills the gathered regions by sweeps planned on the GPU from
// the n_id the sampler wrote, the counts read on the device.
func (r *cudaRing) fillSampled(ctx context.Context, slots []int, bs []batch.Batch) (err error) {
	d := r.sampling
	defer func() {
		if err != nil {
			d.fillFailed()
		}
	}()
	dbs := make([]batch.DeviceBatch, len(bs))
	for j, b := range bs {
		db, ok := b.(batch.DeviceBatch)
		if !ok {
			return fmt.Errorf("serve: a batch of %T on a ring that samples on the GPU", b)
		}
		if len(db.Seeds()) > d.batch {
			return fmt.Errorf("serve: %d seeds, the ring's GPU sampler takes %d", len(db.Seeds()), d.batch)
		}
		dbs[j] = db
	}
	k := d.seq % countsRing
	d.seq++
	counts := d.counts[k]
	err = r.Context().Do(func() error {
		for _, slot := range slots {
			// The daemon's own last fill of the slot: a batch is announced
			// once its counts are known, possibly before its sweep ends on
			// the ring's stream, so a trainer that releases it at once must
			// not let this stream write the slot's ids under that sweep.
			if err := d.st.WaitEvent(r.ReadyEvent(slot)); err != nil {
				return err
			}
		}
		if d.recorded[k] {
			if err := d.st.WaitEvent(d.read[k]); err != nil { // the sweep that read counts[k] is done
				return err
			}
		}
		if err := d.timeMark(markSampling, d.st); err != nil {
			return err
		}
		seeds := unsafe.Slice((*int64)(unsafe.Pointer(&d.seedsHost[0])), len(bs)*d.batch)
		for j, db := range dbs {
			copy(seeds[j*d.batch:], db.Seeds())
		}
		if err := cudaext.MemcpyHtoDAsync(d.seeds, unsafe.Pointer(&d.seedsHost[0]), int64(len(bs)*8*d.batch), d.st); err != nil {
			return err
		}
		// input_id goes up straight into each slot, from the second half.
		if in := r.layout.Index("input_id"); in >= 0 {
			inputs := unsafe.Slice((*int64)(unsafe.Pointer(&d.seedsHost[0])), 2*gather.MaxDeviceParts*d.batch)[gather.MaxDeviceParts*d.batch:]
			for j, db := range dbs {
				n := len(db.Seeds())
				mine := inputs[j*d.batch : j*d.batch+n]
				if ids := db.InputIDs(); ids != nil {
					copy(mine, ids)
				} else {
					for i := range mine {
						mine[i] = -1
					}
				}
				dst, _ := r.RegionAt(slots[j], in)
				if n > 0 {
					if err := cudaext.MemcpyHtoDAsync(dst, unsafe.Pointer(&mine[0]), int64(8*n), d.st); err != nil {
						return err
					}
				}
			}
		}
		jobs := make([]sampler.Job, len(dbs))
		for j, db := range dbs {
			region := func(k int) cudaext.DevicePtr { p, _ := r.RegionAt(slots[j], k); return p }
			job, err := db.SampleJob(d.seeds+cudaext.DevicePtr(j*8*d.batch), counts+cudaext.DevicePtr(j*8*d.clen), region)
			if err != nil {
				return err
			}
			jobs[j] = job
		}
		for len(jobs) > 0 { // the fill's batches, Lanes() at a time
			n := min(len(jobs), d.gs.Lanes())
			if err := d.gs.SampleMany(d.st, jobs[:n]); err != nil {
				return err
			}
			jobs = jobs[n:]
		}
		if err := d.timeMark(markSampled, d.st); err != nil {
			return err
		}
		if err := cudaext.MemcpyDtoHAsync(unsafe.Pointer(&d.host[0]), counts, int64(len(bs)*8*d.clen), d.st); err != nil {
			return err
		}
		if err := d.done.Record(d.st); err != nil {
			return err
		}
		if err := d.timeMark(markFillQueued, r.g.Stream()); err != nil {
			return err
		}
		if err := r.g.Stream().WaitEvent(d.done); err != nil {
			return err
		}
		return d.timeMark(markFillGo, r.g.Stream())
	})
	if err != nil {
		return err
	}
	wait := func() error { return r.Context().Do(d.done.Synchronize) }
	all := unsafe.Slice((*int64)(unsafe.Pointer(&d.host[0])), len(bs)*d.clen)
	for j, db := range dbs {
		db.Sampled(all[j*d.clen:(j+1)*d.clen], wait)
	}
	for _, grp := range r.groups {
		parts := make([]gather.DevicePart, len(bs))
		for j := range bs {
			ids, n := r.RegionAt(slots[j], grp.ids)
			at := dbs[j].CountIndex(grp.ids)
			if at < 0 { // the sweep would read its count from before the batch's counts
				return fmt.Errorf("serve: region %d of a GPU-sampled batch has no count", grp.ids)
			}
			parts[j] = gather.DevicePart{IDs: ids, N: n / 8, NDev: counts + cudaext.DevicePtr(j*8*d.clen+8*at)}
			if grp.y >= 0 {
				parts[j].Y, _ = r.RegionAt(slots[j], grp.y)
			}
			if grp.x >= 0 {
				parts[j].X, parts[j].XBytes = r.RegionAt(slots[j], grp.x)
			}
		}
		if err := grp.table.SweepOnDevice(ctx, parts); err != nil {
			return err
		}
	}
	// One context switch for the fill's last events: counts[k] free again,
	// the slots ready, and the fill's timing mark.
	return r.Context().Do(func() error {
		st := r.g.Stream()
		if err := d.read[k].Record(st); err != nil {
			return err
		}
		d.recorded[k] = true
		if err := r.RecordReady(st, slots...); err != nil {
			return err
		}
		return d.timeMark(markFilled, st)
	})
}
