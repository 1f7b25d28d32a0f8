package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
	"github.com/gnnloader/gnnloader/pinned"
	"github.com/gnnloader/gnnloader/sampler"
)

// GPUConfig is the daemon's GPU backend configuration (cmd/loaderd: --gpus,
// --gather-sms, --gpu-reserve, --gpu-slot-memory).
type GPUConfig struct {
	// Devices are the device ordinals trainers may ask for; nil means every
	// device of the host.
	Devices []int
	// MaxSMs caps each trainer's gather grid (gather.CUDAOptions.MaxSMs;
	// 0 = gather.DefaultSMs).
	MaxSMs int
	// Reserve is GPU memory that slots never take, left to the trainers
	// (0 = 1 GiB; negative = none).
	Reserve int64
	// SlotMemory caps the bytes of all slots on one GPU (0 = no cap beyond
	// the device's free memory less Reserve).
	SlotMemory int64
	// SweepBatches caps the batches one gather pass may cover (a sorted
	// sweep reads a row shared by them once): 0 means half the trainer's
	// slots, at most gather.MaxSweepParts; 1 means one batch a pass. A
	// sweep only grows while the trainer's earlier fills still run on the
	// GPU, so a trainer that keeps up gets its batches one at a time.
	SweepBatches int
}

// ProbeGPU returns the number of CUDA devices, or why none can be used (an
// error wrapping cudaext.ErrNoDriver or cudaext.ErrNoDevice).
func ProbeGPU() (int, error) {
	n, err := cudaext.DeviceCount()
	if err == nil && n == 0 {
		err = cudaext.ErrNoDevice
	}
	return n, err
}

// OpenSourcePinned opens spec like OpenSource, with the feature table in
// pinned host memory registered with the CUDA driver once (portable: every
// device's context reads it zero-copy). A synthetic table is generated
// straight into that memory and a dataset directory's features.arrow read
// straight into it, so the table is never held twice. It fails without a
// usable driver.
func OpenSourcePinned(spec string, skipChecksums bool, progress datasets.Progress, log *slog.Logger) (*Source, error) {
	if _, err := ProbeGPU(); err != nil {
		return nil, err
	}
	s, err := openSource(spec, skipChecksums, progress, log, featureMem{generated: true, read: true})
	if err != nil {
		return nil, err
	}
	d := s.Data
	st, err := pinned.FromAlloc(d.Features, d.RowBytes(), d.Graph.NumNodes, nil)
	if err != nil {
		pinned.Free(d.Features) // still ours on error
	} else if !st.Registered() {
		st.Close()
		err = errors.New("the CUDA driver did not register the feature table")
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("pinning the feature table: %w", err)
	}
	d.Features = st.Rows
	s.Table.Rows = st.Rows
	s.store = st
	prev := s.close
	s.close = func() error { return errors.Join(prev(), st.Close()) }
	if log != nil {
		log.Info("feature table pinned", "bytes", len(st.Rows), "copy", st.LoadTime, "register", st.RegisterTime)
	}
	return s, nil
}

// gpuBackend makes CUDA slot rings: one context per allowed device, the
// pinned table shared by all of them, slot memory accounted per device.
type gpuBackend struct {
	store   *pinned.Store
	count   int   // devices of the host
	allowed []int // sorted
	ctx     map[int]*cudaext.Context
	opts    gather.CUDAOptions
	cfg     GPUConfig
	mu      sync.Mutex
	used    map[int]int64 // slot bytes per device
	labels  []int32
}

// EnableGPU turns on the GPU path: trainers asking for device "cuda:N" get
// slots in GPU memory on device N, filled by the CUDA gather. The source must
// come from OpenSourcePinned. It checks every allowed device and loads the
// gather kernels on each, so a driver older than the kernels need fails
// here, at start-up, with an error saying so. Call it before Serve.
func (s *Server) EnableGPU(cfg GPUConfig) error {
	if s.src.store == nil || !s.src.store.Registered() {
		return errors.New("serve: the GPU path needs the feature table in registered pinned memory (OpenSourcePinned)")
	}
	n, err := ProbeGPU()
	if err != nil {
		return err
	}
	b := &gpuBackend{store: s.src.store, count: n, ctx: map[int]*cudaext.Context{}, used: map[int]int64{},
		opts: gather.CUDAOptions{MaxSMs: cfg.MaxSMs}, cfg: cfg, labels: s.src.Data.Labels}
	if cfg.Devices == nil {
		for i := 0; i < n; i++ {
			b.allowed = append(b.allowed, i)
		}
	} else {
		b.allowed = slices.Compact(slices.Sorted(slices.Values(cfg.Devices)))
	}
	if b.cfg.Reserve == 0 {
		b.cfg.Reserve = 1 << 30
	}
	b.cfg.Reserve = max(b.cfg.Reserve, 0)
	for _, dev := range b.allowed {
		if dev < 0 || dev >= n {
			b.close()
			return fmt.Errorf("GPU %d does not exist: this host has %d CUDA device(s) (0..%d)", dev, n, n-1)
		}
		d, err := cudaext.GetDevice(dev)
		if err != nil {
			b.close()
			return err
		}
		ctx, err := d.RetainPrimaryContext()
		if err != nil {
			b.close()
			return fmt.Errorf("cuda:%d: %w", dev, err)
		}
		b.ctx[dev] = ctx
		// Load the kernels once now: a driver too old for them fails here.
		g, err := gather.NewCUDA(ctx, b.store, &b.opts)
		if err != nil {
			b.close()
			v, _ := cudaext.DriverVersion()
			return fmt.Errorf("cuda:%d: cannot load the gather kernels (the driver supports CUDA %d.%d; the kernels are built with nvcc 13.0 for sm_80/sm_90 plus PTX: an older driver or GPU cannot run them): %w",
				dev, v/1000, v%1000/10, err)
		}
		g.Close()
		name, _ := d.Name()
		s.log.Info("GPU ready", "device", fmt.Sprintf("cuda:%d", dev), "name", name)
	}
	s.newCUDARing = b.newRing
	s.gpuUnavailable = ""
	s.registerGPUMetrics(b)
	return nil
}

func (b *gpuBackend) close() {
	for _, c := range b.ctx {
		c.Release()
	}
}

func (b *gpuBackend) allowedString() string {
	if len(b.allowed) == 0 {
		return "none"
	}
	var parts []string
	for _, d := range b.allowed {
		parts = append(parts, fmt.Sprint(d))
	}
	return strings.Join(parts, ",")
}

// newRing makes a trainer's slots on device dev.
func (b *gpuBackend) newRing(dev int, m *ipc.Open, slots int, l pingpong.Layout) (slotRing, error) {
	if dev >= b.count {
		return nil, perrf(ipc.CodeBadRequest, "device %q does not exist: this host has %d GPU(s) (cuda:0..cuda:%d)", m.Device, b.count, b.count-1)
	}
	ctx, ok := b.ctx[dev]
	if !ok {
		return nil, perrf(ipc.CodeBadRequest, "device %q is not one this daemon serves (--gpus %s)", m.Device, b.allowedString())
	}
	bytes := l.SlotBytes * int64(slots)
	b.mu.Lock()
	if b.cfg.SlotMemory > 0 && b.used[dev]+bytes > b.cfg.SlotMemory {
		used := b.used[dev]
		b.mu.Unlock()
		return nil, perrf(ipc.CodeBusy, "%d slots of %d bytes do not fit in the GPU slot memory of %s (%d of %d bytes in use)", slots, l.SlotBytes, m.Device, used, b.cfg.SlotMemory)
	}
	b.used[dev] += bytes
	b.mu.Unlock()
	giveBack := func() {
		b.mu.Lock()
		b.used[dev] -= bytes
		b.mu.Unlock()
	}
	ring, err := pingpong.NewCUDARing(ctx, slots, l, b.cfg.Reserve)
	if err != nil {
		giveBack()
		if errors.Is(err, pingpong.ErrNoRoom) || errors.Is(err, cudaext.ErrOutOfMemory) {
			return nil, perrf(ipc.CodeBusy, "%v: ask for fewer slots, a smaller batch_size or fanouts", err)
		}
		return nil, perrf(ipc.CodeInternal, "%s: %v", m.Device, err)
	}
	g, err := gather.NewCUDA(ctx, b.store, &b.opts)
	if err != nil {
		ring.Close()
		giveBack()
		if errors.Is(err, cudaext.ErrOutOfMemory) {
			return nil, perrf(ipc.CodeBusy, "%s: %v", m.Device, err)
		}
		return nil, perrf(ipc.CodeInternal, "%s: %v", m.Device, err)
	}
	sweep := b.cfg.SweepBatches
	if sweep <= 0 {
		sweep = slots / 2
	}
	sweep = max(1, min(sweep, slots, gather.MaxSweepParts))
	return &cudaRing{CUDARing: ring, dev: dev, g: g, labels: b.labels, giveBack: giveBack, sweep: sweep}, nil
}

// cudaRing is the GPU path: slots in GPU memory, filled on the trainer's own
// non-blocking gather stream. Per fill, on that stream: wait for the slots'
// "released" events, upload the row indices and gather the rows (in address
// order; several batches in one sorted sweep), upload labels, n_id and
// edge_index through pinned staging, record each slot's "ready" event.
// Nothing waits on the CPU except the staging.
type cudaRing struct {
	*pingpong.CUDARing
	dev      int
	g        *gather.CUDA
	labels   []int32
	giveBack func()
	sweep    int         // most batches one fill may cover
	busy     atomic.Bool // tests: Busy reports true whatever the stream does
	once     sync.Once
}

func (r *cudaRing) Describe(o *ipc.Opened) []int {
	o.Memory = ipc.MemoryCUDA
	o.CUDADevice = uint32(r.dev)
	h := r.MemHandle()
	o.MemHandle = h[:]
	for _, e := range r.EventHandles() {
		o.Events = append(o.Events, ipc.EventIPC{Ready: e[0], Released: e[1]})
	}
	return nil
}

func (r *cudaRing) Fill(slot int, b *sampler.Batch) error {
	return r.FillSweep([]int{slot}, []*sampler.Batch{b})
}

// SweepWidth is the most batches one FillSweep may take.
func (r *cudaRing) SweepWidth() int { return r.sweep }

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

// FillSweep fills slots[j] with bs[j]: one gather kernel, or one sorted sweep
// over all of them that reads each row they share once.
func (r *cudaRing) FillSweep(slots []int, bs []*sampler.Batch) error {
	ctx := context.Background()
	if err := r.onStream(slots, r.WaitReleased); err != nil {
		return err
	}
	parts := make([]gather.SweepPart, len(bs))
	for j, b := range bs {
		x, xn := r.Region(slots[j], "x")
		parts[j] = gather.SweepPart{Dst: gather.Dest{Device: x, DeviceBytes: xn}, Nid: b.NID, Order: b.Order}
	}
	if len(parts) == 1 {
		if err := r.g.Gather(ctx, parts[0].Dst, parts[0].Nid, parts[0].Order); err != nil {
			return err
		}
	} else if _, err := r.g.Sweep(ctx, parts); err != nil {
		return err
	}
	if err := r.copyRest(slots, bs); err != nil {
		return err
	}
	return r.onStream(slots, r.RecordReady)
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

// copyRest enqueues the copies of the batches' labels, n_id and edge_index
// into their slots: written as int64 straight into the pinned staging, then
// copied from there to their slot regions.
func (r *cudaRing) copyRest(slots []int, bs []*sampler.Batch) error {
	fills := make([]gather.Fill, 0, 3*len(bs))
	for j, b := range bs {
		yp, _ := r.Region(slots[j], "y")
		np, _ := r.Region(slots[j], "n_id")
		ep, _ := r.Region(slots[j], "edge_index")
		n, e := int64(len(b.NID)), int64(len(b.Src))
		fills = append(fills, gather.Fill{Dst: yp, Bytes: 8 * n}, gather.Fill{Dst: np, Bytes: 8 * n}, gather.Fill{Dst: ep, Bytes: 16 * e})
	}
	return r.g.CopyInWith(fills, func(host [][]byte) error {
		// Labels (a random read each), n_id and edge_index widened to
		// int64: about 8 ms a papers100M batch on one core, so in pieces
		// on all cores.
		const piece = 1 << 15
		var wg sync.WaitGroup
		for j, b := range bs {
			y, nid, ei := int64s(host[3*j]), int64s(host[3*j+1]), int64s(host[3*j+2])
			n, e := len(b.NID), len(b.Src)
			for lo := 0; lo < n; lo += piece {
				hi := min(lo+piece, n)
				wg.Go(func() {
					for i, v := range b.NID[lo:hi] {
						y[lo+i] = int64(r.labels[v])
					}
					copy(nid[lo:hi], b.NID[lo:hi])
				})
			}
			for lo := 0; lo < e; lo += 2 * piece {
				hi := min(lo+2*piece, e)
				wg.Go(func() {
					for k := lo; k < hi; k++ {
						ei[k] = int64(b.Src[k])
						ei[e+k] = int64(b.Dst[k])
					}
				})
			}
		}
		wg.Wait()
		return nil
	})
}

func (r *cudaRing) Close() error {
	var err error
	r.once.Do(func() {
		err = errors.Join(r.g.Close(), r.CUDARing.Close())
		r.giveBack()
	})
	return err
}

// DisableGPU records why this daemon has no GPU path: a trainer asking for
// "cuda:N" gets an Error that says so.
func (s *Server) DisableGPU(reason string) { s.gpuUnavailable = reason }
