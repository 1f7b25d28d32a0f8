package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
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
	// SlotMemory caps the bytes of all slots on one GPU with the trainers'
	// working memory (0 = no cap beyond the device's free memory less
	// Reserve): a trainer's GPU sampling is counted with its slots before
	// either is allocated, with fewer lanes than SampleLanes where they do
	// not fit (at least one, else the trainer is refused), and its sweep
	// planning once allocated.
	SlotMemory int64
	// SweepBatches caps the batches one gather pass may cover (a sorted
	// sweep reads a row shared by them once): 0 means half the trainer's
	// slots, at most gather.MaxSweepParts; 1 means one batch a pass. A
	// sweep grows while the trainer's earlier fills still run on the GPU,
	// and while the trainer has more than SweepAhead batches announced and
	// not yet released (SweepAhead).
	SweepBatches int
	// SweepAhead: while a trainer holds more than this many announced,
	// unreleased batches, a fill waits for a whole sweep of free slots even
	// when the GPU is idle, so a loader faster than the trainer (a GPU
	// cache) still reads wide sweeps in few bursts instead of a batch or two
	// as each slot comes back. 0 means half the sweep width; negative means
	// never (a fill goes as soon as the GPU is idle, the old behaviour).
	SweepAhead int
	// Cache is the bytes of hot feature rows each device keeps in its own
	// memory, so sweeps copy them from there instead of reading them over
	// PCIe (cache.go; 0 = none). Built at the first trainer on the device.
	Cache int64
	// Timing times the GPU work of fills with events (SweepStats' times),
	// for benchmarks.
	Timing bool
	// CacheHeadroom is the device memory the cache leaves free, at the
	// Open that builds it, for the trainers' own work (models, activations,
	// optimiser state): 0 = 5% of the device, at least 2 GiB; negative =
	// none. Beside 64 papers100M slots on an 80 GB H100 the default left
	// 4.25 GB, too little for a trainer that keeps batches of its own.
	CacheHeadroom int64
	// CachePresample is how many of that trainer's batches are sampled to
	// choose the rows, with in-degree as a prior (0 = a whole epoch's; -1 =
	// none: by in-degree only).
	CachePresample int
	// Sampling is where trainers on a GPU are sampled: "auto" (the default:
	// on the GPU when the graph's CSR takes at most a third of its free
	// memory beyond Reserve, else on the CPU), "gpu" (always; an error at
	// start when the CSR does not fit) or "cpu".
	Sampling string
	// SampleLanes is how many of a fill's batches the GPU sampler samples
	// together, one launch of each kernel for them all, each with working
	// memory of its own (about 55 MB a lane for papers100M's batches of
	// 1024 at [15,10,5]): 1 to sampler.MaxLanes, 0 = DefaultSampleLanes.
	// A trainer gets fewer where a fill has fewer batches, where its lanes
	// are large, or where they do not fit SlotMemory.
	SampleLanes int
	// SweepPlan is where a sweep is planned: "gpu" (the default: the GPU
	// sorts and merges the batches' ids itself, and no CPU time goes to it)
	// or "cpu" (the CPU sorts each batch's ids while sampling and merges
	// them per sweep, as before; kept to compare the two).
	SweepPlan string
}

// DefaultSampleLanes is GPUConfig.SampleLanes' default. Measured on an H200
// (docs/benchmarks.md, "The sampling kernels: fewer, fuller launches, a
// fill's batches together, and every must-show at HEAD"): papers100M's
// sampling took 0.22-0.23 ms of GPU time a batch beside the training steps
// with 8 lanes against 0.38-0.41 with 1, and 0.163 ms alone against 0.198
// (4 lanes: 0.158, 32: 0.171, the lanes' tables then spilling from the L2);
// 8 lanes hold about 440 MB of working memory for those batches.
const DefaultSampleLanes = 8

// ProbeGPU returns the number of CUDA devices, or why none can be used (an
// error wrapping cudaext.ErrNoDriver or cudaext.ErrNoDevice).
func ProbeGPU() (int, error) {
	n, err := cudaext.DeviceCount()
	if err == nil && n == 0 {
		err = cudaext.ErrNoDevice
	}
	return n, err
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
	used    map[int]int64                        // slot bytes per device
	workers int                                  // goroutines writing a batch's structure
	labels  map[int]map[string]cudaext.DevicePtr // per device, each label table (int32 a node)
	graphs  map[int]*sampler.DeviceGraph         // per device sampling on the GPU, its CSR
	caches  map[int]*deviceCache                 // per device with a hot-row cache
	rings   map[*cudaRing]struct{}               // live rings (for their sweep counters)
	// closedStats are the sweep counters of the rings closed so far.
	closedStats map[int]gather.PlanStats
	closeOnce   sync.Once
	maxDeg      int64
	src         *Source
	log         *slog.Logger
}

// EnableGPU turns on the GPU path: trainers asking for device "cuda:N" get
// slots in GPU memory on device N, filled by the CUDA gather. The source must
// come from OpenSourcePinned. It checks every allowed device and loads the
// gather kernels on each, so a driver older than the kernels need fails
// here, at start-up, with an error saying so. Call it before Serve.
func (s *Server) EnableGPU(cfg GPUConfig) error {
	if cfg.SampleLanes < 0 || cfg.SampleLanes > sampler.MaxLanes {
		return fmt.Errorf("serve: %d GPU sampling lanes: want 1 to %d (0: the default, %d)", cfg.SampleLanes, sampler.MaxLanes, DefaultSampleLanes)
	}
	if cfg.SampleLanes == 0 {
		cfg.SampleLanes = DefaultSampleLanes
	}
	if s.src.stores == nil {
		return errors.New("serve: the GPU path needs the tables in registered pinned memory (OpenSourcePinned)")
	}
	store := s.src.store // the node features, or the first table by name
	if names := slices.Sorted(maps.Keys(s.src.stores)); store == nil && len(names) > 0 {
		store = s.src.stores[names[0]]
	}
	if store == nil {
		return errors.New("serve: the GPU path needs a feature table to gather, and the dataset has none")
	}
	if s.src.Hetero != nil && cfg.Cache > 0 {
		return errors.New("serve: --gpu-cache keeps rows of a homogeneous dataset's feature table; this dataset is heterogeneous")
	}
	if s.src.Hetero != nil {
		if cfg.Sampling == "gpu" {
			return errors.New("serve: --sampling gpu: the GPU sampler walks one CSR, and this dataset is heterogeneous (its batches are sampled by the CPU: --sampling auto or cpu)")
		}
		cfg.Sampling = "cpu"
	}
	n, err := ProbeGPU()
	if err != nil {
		return err
	}
	b := &gpuBackend{store: store, count: n, ctx: map[int]*cudaext.Context{}, used: map[int]int64{},
		opts: gather.CUDAOptions{MaxSMs: cfg.MaxSMs, Timing: cfg.Timing}, cfg: cfg, workers: s.fillWorkers(), labels: map[int]map[string]cudaext.DevicePtr{}}
	b.graphs, b.maxDeg = map[int]*sampler.DeviceGraph{}, s.src.MaxDegree
	b.caches, b.src, b.log = map[int]*deviceCache{}, s.src, s.log
	b.rings, b.closedStats = map[*cudaRing]struct{}{}, map[int]gather.PlanStats{}
	switch cfg.SweepPlan {
	case "":
		b.cfg.SweepPlan = "gpu"
	case "gpu", "cpu":
	default:
		return fmt.Errorf("serve: sweep plan %q: want gpu or cpu", cfg.SweepPlan)
	}
	switch cfg.Sampling {
	case "":
		b.cfg.Sampling = "auto"
	case "auto", "gpu", "cpu":
	default:
		return fmt.Errorf("serve: sampling %q: want auto, gpu or cpu", cfg.Sampling)
	}
	if b.cfg.Sampling != "cpu" && b.cfg.SweepPlan != "gpu" {
		if cfg.Sampling == "gpu" {
			return errors.New("serve: sampling on the GPU needs sweeps planned there (--sweep-plan gpu)")
		}
		b.cfg.Sampling = "cpu"
	}
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
		// The label tables on the device, for the fills' y (one copy a
		// device).
		b.labels[dev] = map[string]cudaext.DevicePtr{}
		for name, labels := range s.src.labelTables() {
			err = ctx.Do(func() error {
				p, err := cudaext.MemAlloc(max(4*int64(len(labels)), 16))
				if err != nil {
					return err
				}
				b.labels[dev][name] = p
				if len(labels) == 0 {
					return nil
				}
				st, err := cudaext.NewStream()
				if err != nil {
					return err
				}
				defer st.Destroy()
				return cudaext.CopyFromHost(p, unsafe.Slice((*byte)(unsafe.Pointer(&labels[0])), 4*len(labels)), st)
			})
			if err != nil {
				b.close()
				return fmt.Errorf("cuda:%d: the labels %s on the device: %w", dev, name, err)
			}
		}
		if err := b.loadGraph(dev, ctx, s.src); err != nil {
			b.close()
			return err
		}
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
	s.gpu = b
	s.newCUDARing = b.newRing
	s.gpuPlansSweeps = b.cfg.SweepPlan == "gpu"
	s.gpuSampling = b.samplesOn
	s.gpuUnavailable = ""
	s.registerGPUMetrics(b)
	return nil
}

// close frees what the backend holds on the devices: labels, graphs,
// caches and contexts. Once; the rings must be closed.
func (b *gpuBackend) close() {
	b.closeOnce.Do(b.free)
}

func (b *gpuBackend) free() {
	for dev, ps := range b.labels {
		for _, p := range ps {
			b.ctx[dev].Do(func() error { return cudaext.MemFree(p) })
		}
	}
	for dev, g := range b.graphs {
		b.ctx[dev].Do(g.Close)
	}
	for dev, c := range b.caches {
		b.ctx[dev].Do(func() error { c.free(); return nil })
	}
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

// DisableGPU records why this daemon has no GPU path: a trainer asking for
// "cuda:N" gets an Error that says so.
func (s *Server) DisableGPU(reason string) { s.gpuUnavailable = reason }

// SweepStats sums the counters of the GPU sweeps over every device: rows
// looked up, found in the hot-row cache, and read over PCIe (false without a
// GPU path).
func (s *Server) SweepStats() (gather.PlanStats, bool) {
	if s.gpu == nil {
		return gather.PlanStats{}, false
	}
	var sum gather.PlanStats
	for _, st := range s.gpu.planStats() {
		sum = sum.Add(st)
	}
	return sum, true
}
