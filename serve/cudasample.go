package serve

import (
	"context"
	"fmt"
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
// sampler.GPU (working memory of 8 bytes a node). The batches are the CPU
// sampler's, byte for byte; the CPU only uploads the seeds and launches.

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

// deviceSampling is a ring's GPU sampler and the memory its fills use: the
// seeds of up to gather.MaxDeviceParts batches and their counts, on the
// device and, for the counts, in pinned host memory they are copied back to.
type deviceSampling struct {
	gs          *sampler.GPU
	seeds       cudaext.DevicePtr
	counts      cudaext.DevicePtr
	host        []byte // pinned, registered
	done        *cudaext.Event
	batch, clen int
}

func (d *deviceSampling) bytes() int64 {
	return d.gs.Bytes + int64(gather.MaxDeviceParts)*int64(8*d.batch+8*d.clen)
}

// newDeviceSampling makes a ring's GPU sampler. Context current.
func (b *gpuBackend) newDeviceSampling(ctx *cudaext.Context, dev int, req *request, maxDegree int64) (_ *deviceSampling, err error) {
	d := &deviceSampling{batch: req.epochs.BatchSize, clen: sampler.CountsLen(len(req.fanouts))}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.gs, err = sampler.NewGPU(ctx, b.graphs[dev], req.fanouts, req.epochs.BatchSize, maxDegree); err != nil {
		return nil, err
	}
	if d.seeds, err = cudaext.MemAlloc(int64(gather.MaxDeviceParts) * int64(8*d.batch)); err != nil {
		return nil, err
	}
	if d.counts, err = cudaext.MemAlloc(int64(gather.MaxDeviceParts) * int64(8*d.clen)); err != nil {
		return nil, err
	}
	if d.host, err = unix.Mmap(-1, 0, max(gather.MaxDeviceParts*8*d.clen, 4096), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return nil, err
	}
	if err = cudaext.HostRegister(d.host, 0); err != nil {
		unix.Munmap(d.host)
		d.host = nil
		return nil, err
	}
	d.done, err = cudaext.NewEvent(cudaext.EventDisableTiming | cudaext.EventBlockingSync)
	return d, err
}

// close frees what newDeviceSampling made. Context current.
func (d *deviceSampling) close() {
	if d.gs != nil {
		d.gs.Close()
	}
	for _, p := range []cudaext.DevicePtr{d.seeds, d.counts} {
		if p != 0 {
			cudaext.MemFree(p)
		}
	}
	if d.host != nil {
		cudaext.HostUnregister(d.host)
		unix.Munmap(d.host)
	}
	if d.done != nil {
		d.done.Destroy()
	}
}

// fillSampled is Fill for batches sampled on the GPU: the seeds go up
// through the pinned staging, every batch is sampled into its slot, the
// counts come back to pinned host memory (the batches' Meta waits for them),
// and the gathered regions are filled by sweeps planned on the GPU from the
// n_id the sampler wrote, their counts read on the device.
func (r *cudaRing) fillSampled(ctx context.Context, slots []int, bs []batch.Batch) error {
	d := r.sampling
	if err := r.onStream(slots, r.WaitReleased); err != nil {
		return err
	}
	copies := make([]gather.Copy, len(bs))
	dbs := make([]batch.DeviceBatch, len(bs))
	for j, b := range bs {
		db, ok := b.(batch.DeviceBatch)
		if !ok {
			return fmt.Errorf("serve: a batch of %T on a ring that samples on the GPU", b)
		}
		dbs[j] = db
		seeds := db.Seeds()
		if len(seeds) > d.batch {
			return fmt.Errorf("serve: %d seeds, the ring's GPU sampler takes %d", len(seeds), d.batch)
		}
		copies[j] = gather.Copy{Dst: d.seeds + cudaext.DevicePtr(j*8*d.batch), Src: int64Bytes(seeds)}
	}
	if err := r.g.CopyIn(copies...); err != nil {
		return err
	}
	err := r.Context().Do(func() error {
		for j, db := range dbs {
			region := func(k int) cudaext.DevicePtr { p, _ := r.RegionAt(slots[j], k); return p }
			if err := db.SampleOn(d.gs, r.g.Stream(), d.seeds+cudaext.DevicePtr(j*8*d.batch), d.counts+cudaext.DevicePtr(j*8*d.clen), region); err != nil {
				return err
			}
		}
		if err := cudaext.MemcpyDtoHAsync(unsafe.Pointer(&d.host[0]), d.counts, int64(len(bs)*8*d.clen), r.g.Stream()); err != nil {
			return err
		}
		return d.done.Record(r.g.Stream())
	})
	if err != nil {
		return err
	}
	wait := func() error { return r.Context().Do(d.done.Synchronize) }
	all := unsafe.Slice((*int64)(unsafe.Pointer(&d.host[0])), len(bs)*d.clen)
	for j, db := range dbs {
		db.Sampled(all[j*d.clen:(j+1)*d.clen], wait)
	}
	for _, grp := range r.gatherGroups() {
		parts := make([]gather.DevicePart, len(bs))
		for j := range bs {
			ids, n := r.RegionAt(slots[j], grp.ids)
			at := dbs[j].CountIndex(grp.ids)
			parts[j] = gather.DevicePart{IDs: ids, N: n / 8, NDev: d.counts + cudaext.DevicePtr(j*8*d.clen+8*at)}
			if grp.y >= 0 {
				parts[j].Y, _ = r.RegionAt(slots[j], grp.y)
			}
			if grp.x >= 0 {
				parts[j].X, parts[j].XBytes = r.RegionAt(slots[j], grp.x)
			}
		}
		if err := r.g.SweepOnDevice(ctx, parts); err != nil {
			return err
		}
	}
	return r.onStream(slots, r.RecordReady)
}

func int64Bytes(s []int64) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s))
}
