package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pinned"
	"github.com/gnnloader/gnnloader/sampler"
	"github.com/gnnloader/gnnloader/serve"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "serve sampled mini-batches of a dataset to trainers over a Unix socket",
		usage:   "[--dataset DIR|synthetic:NAME[:SCALE[:SEED[:DTYPE]]]] [--socket PATH] [flags]",
		example: "loaderd serve --dataset /tmp/cora   # socket: $GNNLOADER_SOCKET, else $XDG_RUNTIME_DIR/gnnloader/loaderd.sock, ...\n" +
			"loaderd serve --dataset /data/papers100M --socket /run/loaderd/loaderd.sock --allow-gid 2000\n" +
			"loaderd serve   # serves a generated arxiv-like graph (synthetic:arxiv:0.1:0)",
		run: runServe,
	})
}

// serveArgs holds every serve flag; it maps one to one onto serve.Config.
type serveArgs struct {
	dataset        string
	skipChecksums  bool
	logFormat      string
	logLevel       string
	cfg            serve.Config
	memoryBudget   string
	allowUIDs      string
	allowGIDs      string
	gpu            bool
	gpus           string
	gpuCfg         serve.GPUConfig
	noEdgeFeatures bool
	gpuReserve     string
	gpuSlotMemory  string
	gpuCache       string
	gpuCacheRoom   string
	metricsAddr    string
	cpuProfile     string
	fillTrace      string
	tableSocket    string
	gradTimeout    time.Duration
}

func runServe(ctx context.Context, e *env, args []string) error {
	c := commands["serve"]
	var a serveArgs
	fs := c.flags(e.stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&a.dataset, "dataset", serve.DefaultSource, "dataset directory, or synthetic:NAME[:SCALE[:SEED[:DTYPE]]] generated in memory")
		fs.BoolVar(&a.skipChecksums, "skip-checksums", false, "do not hash the dataset's files at start (sizes and ids are still checked)")
		fs.StringVar(&a.cfg.Socket, "socket", ipc.DefaultSocketPath(), "Unix socket path trainers connect to; the default is the clients' too: $GNNLOADER_SOCKET, else $XDG_RUNTIME_DIR/gnnloader/loaderd.sock, else /run/gnnloader/loaderd.sock for root, else /tmp/gnnloader-UID/loaderd.sock (its directory created private and checked)")
		fs.IntVar(&a.cfg.SamplerThreads, "sampler-threads", 0, "goroutines one batch's sampling and gather may use (0 = all cores)")
		fs.IntVar(&a.cfg.Prefetch, "prefetch", 2, "batches each trainer's sampler runs ahead of the gather")
		fs.IntVar(&a.cfg.Slots, "slots", 2, "slots per trainer when the trainer does not ask (2 = ping-pong)")
		fs.IntVar(&a.cfg.GPUSlots, "gpu-slots", 32, "slots per trainer on a GPU when the trainer does not ask (32: the GPU fills up to 16 at a time in one sweep while the trainer works through the others, 8% faster training than 16 on papers100M under MPS, for twice the GPU memory, docs/training.md; a trainer that does not fit the memory budget or the GPU gets half as many, down to 2)")
		fs.IntVar(&a.cfg.MaxSlots, "max-slots", 64, "most slots one trainer may ask for (64: sweeps of 32 batches on a GPU)")
		fs.IntVar(&a.cfg.MaxTrainers, "max-trainers", 64, "most trainers served at once")
		fs.StringVar(&a.memoryBudget, "memory-budget", "32GiB", "most memory for all trainers' slots together (e.g. 8GiB, 512MiB)")
		fs.IntVar(&a.cfg.Limits.MaxFrame, "max-frame", 0, "largest protocol frame in bytes (0 = 1 MiB)")
		fs.IntVar(&a.cfg.Limits.MaxBatchSize, "max-batch-size", 0, "largest batch size a trainer may ask for (0 = protocol default)")
		fs.IntVar(&a.cfg.Limits.MaxFanouts, "max-hops", 0, "most hops (fanouts) a trainer may ask for (0 = protocol default)")
		fs.StringVar(&a.allowUIDs, "allow-uid", "", "comma-separated uids allowed besides the daemon's own (POSIX ACL entries on the socket)")
		fs.StringVar(&a.allowGIDs, "allow-gid", "", "comma-separated gids allowed, as a peer's primary or supplementary group (POSIX ACL entries on the socket)")
		fs.IntVar(&a.cfg.MaxPending, "max-pending", 64, "most connections in their handshake at once; more are refused with Error(busy)")
		fs.DurationVar(&a.cfg.HandshakeTimeout, "handshake-timeout", 10*time.Second, "time a connection has from connecting to its Open (or RegisterGrad)")
		fs.DurationVar(&a.cfg.WriteTimeout, "write-timeout", 10*time.Second, "time a trainer may leave a message unread before it is disconnected")
		fs.DurationVar(&a.gradTimeout, "grad-timeout", 10*time.Minute, "how long a job's gradient ranks wait for each other: all of them to register, and each all-reduce to end; past it the job's ring breaks and the waiting ranks are told which ranks did not come (0 = no limit)")
		fs.DurationVar(&a.cfg.ShutdownTimeout, "shutdown-timeout", 5*time.Second, "on SIGTERM, time trainers get to take their Goodbye before their connections are closed")
		fs.StringVar(&a.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; a bare :PORT binds loopback; empty = off)")
		fs.BoolVar(&a.gpu, "gpu", true, "serve trainers asking for cuda:N from GPU slots when a CUDA driver and device are usable (--gpu=false: CPU path only)")
		fs.StringVar(&a.gpus, "gpus", "", "comma-separated GPU ordinals trainers may ask for (empty = every GPU)")
		fs.IntVar(&a.gpuCfg.MaxSMs, "gather-sms", 0, "SMs one trainer's gather kernels may use (0 = 16; -1 = all)")
		fs.IntVar(&a.gpuCfg.SweepBatches, "gpu-sweep", 0, "most batches one GPU gather pass may cover while the GPU is busy (a sorted sweep reads a row they share once; 0 = half the trainer's slots, at most 32; 1 = one batch a pass)")
		fs.IntVar(&a.gpuCfg.SweepAhead, "sweep-ahead", 0, "while a GPU trainer holds more than this many announced, unreleased batches, a fill waits for a whole sweep of free slots even when the GPU is idle (wide sweeps when the loader outruns the trainer, e.g. with --gpu-cache; 0 = half the sweep width; -1 = never)")
		fs.BoolVar(&a.noEdgeFeatures, "no-edge-features", false, "serve batches without the dataset's edge_attr and edge_weight (saves their gather and, on the GPU path, their pinned copy)")
		fs.StringVar(&a.gpuCache, "gpu-cache", "0", "bytes of hot feature rows each GPU keeps in its own memory, chosen by pre-sampling batches of the first trainer's split, batch size and fanouts (e.g. 12GiB, or 20% of the feature bytes; 0 = none); clamped to what the GPU has free at that trainer's Open, less --gpu-cache-headroom left for the trainers, so 100% means as much as fits")
		fs.StringVar(&a.gpuCacheRoom, "gpu-cache-headroom", "auto", "GPU memory the cache leaves free for the trainers' own work (models, activations, optimiser state) when it is clamped to what the GPU has free: bytes (e.g. 10GiB; 0 = none) or auto (5% of the GPU's memory, at least 2 GiB)")
		fs.IntVar(&a.gpuCfg.CachePresample, "gpu-cache-presample", 0, "batches pre-sampled to choose the cached rows, in-degree serving as a prior (0 = a whole epoch's; -1 = by in-degree only)")
		fs.StringVar(&a.gpuCfg.Sampling, "sampling", "auto", "where trainers on a GPU are sampled: auto (on the GPU when the graph's CSR takes at most a third of its free memory), gpu or cpu")
		fs.IntVar(&a.gpuCfg.SampleLanes, "gpu-sample-lanes", 0, fmt.Sprintf("batches of a fill the GPU sampler samples together, one launch of each kernel for them all, each with working memory of its own (about 55 MB a batch for papers100M's; 1 to %d; 0 = %d)", sampler.MaxLanes, serve.DefaultSampleLanes))
		fs.StringVar(&a.gpuCfg.SweepPlan, "sweep-plan", "gpu", "where a GPU fill plans its sweep over the batches' ids: gpu (the GPU sorts and merges them) or cpu (the CPU does, as before)")
		fs.BoolVar(&a.gpuCfg.Timing, "gpu-timing", false, "time each GPU fill's phases with CUDA events (planning, PCIe read, assembly, sampling, the fill stream idle) and export them as gnnloader_gpu_fill_seconds_total{phase}")
		fs.StringVar(&a.gpuReserve, "gpu-reserve", "1GiB", "GPU memory slots never take, left to the trainers")
		fs.StringVar(&a.gpuSlotMemory, "gpu-slot-memory", "0", "most memory for trainers' slots, with their sampling (counted before it is allocated, with fewer lanes where short) and sweep-planning memory, on one GPU (0 = its free memory less --gpu-reserve)")
		fs.StringVar(&a.tableSocket, "table-socket", "", "also share the feature table read-only (a memfd, SCM_RIGHTS) with trainers connecting to this socket, for baselines that gather features themselves (empty = off)")
		fs.StringVar(&a.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the daemon to this file until it stops (go tool pprof reads it)")
		fs.StringVar(&a.fillTrace, "fill-trace", "", "write a line per slot fill to this file: \"fill UNIX_NS BATCHES HOST_NS HELD CONN ANNOUNCED_NS\" (start, batches, host time, batches the trainer held, its connection, time until its last batch was announced), to line the daemon's work up with a trainer's steps (bench-train.sh FILL_TRACE=1; empty = off)")
		fs.StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
		fs.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
	}
	if a.cfg.MemoryBudget, err = parseBytes(a.memoryBudget); err != nil {
		return usageError{"--memory-budget: " + err.Error()}
	}
	if a.cfg.AllowUIDs, err = parseInts(a.allowUIDs); err != nil {
		return usageError{"--allow-uid: " + err.Error()}
	}
	if a.cfg.AllowGIDs, err = parseInts(a.allowGIDs); err != nil {
		return usageError{"--allow-gid: " + err.Error()}
	}
	if a.gpuCfg.Reserve, err = parseBytes(a.gpuReserve); err != nil {
		return usageError{"--gpu-reserve: " + err.Error()}
	}
	if a.gpuCfg.Reserve == 0 {
		a.gpuCfg.Reserve = -1 // an explicit 0 means none
	}
	if a.gpuCfg.SlotMemory, err = parseBytes(a.gpuSlotMemory); err != nil {
		return usageError{"--gpu-slot-memory: " + err.Error()}
	}
	cacheBytes, cachePct, err := parseShare(a.gpuCache)
	if err != nil {
		return usageError{"--gpu-cache: " + err.Error()}
	}
	a.gpuCfg.Cache = cacheBytes
	if a.gpuCfg.CacheHeadroom, err = parseHeadroom(a.gpuCacheRoom); err != nil {
		return usageError{"--gpu-cache-headroom: " + err.Error()}
	}
	if a.gpus != "" {
		if a.gpuCfg.Devices, err = parseInts(a.gpus); err != nil {
			return usageError{"--gpus: " + err.Error()}
		}
	}
	if a.gpuCfg.SweepBatches < 0 || a.gpuCfg.SweepBatches > gather.MaxSweepParts {
		return usageError{fmt.Sprintf("--gpu-sweep %d must be between 0 (automatic) and %d", a.gpuCfg.SweepBatches, gather.MaxSweepParts)}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"handshake-timeout", a.cfg.HandshakeTimeout}, {"write-timeout", a.cfg.WriteTimeout}, {"shutdown-timeout", a.cfg.ShutdownTimeout}} {
		if d.v <= 0 {
			return usageError{fmt.Sprintf("--%s %v must be positive", d.flag, d.v)}
		}
	}
	switch {
	case a.gradTimeout < 0:
		return usageError{fmt.Sprintf("--grad-timeout %v must not be negative (0 = no limit)", a.gradTimeout)}
	case a.gradTimeout == 0:
		a.cfg.GradTimeout = -1 // no limit
	default:
		a.cfg.GradTimeout = a.gradTimeout
	}
	if a.cfg.MaxPending < 1 {
		return usageError{fmt.Sprintf("--max-pending %d must be at least 1", a.cfg.MaxPending)}
	}
	if a.cfg.Slots < 1 || a.cfg.Slots > a.cfg.MaxSlots {
		return usageError{fmt.Sprintf("--slots %d must be between 1 and --max-slots %d", a.cfg.Slots, a.cfg.MaxSlots)}
	}
	if !flagSet(fs, "gpu-slots") {
		a.cfg.GPUSlots = min(a.cfg.GPUSlots, a.cfg.MaxSlots) // --max-slots 16 alone caps the default too
	}
	if a.cfg.GPUSlots < 1 || a.cfg.GPUSlots > a.cfg.MaxSlots {
		return usageError{fmt.Sprintf("--gpu-slots %d must be between 1 and --max-slots %d", a.cfg.GPUSlots, a.cfg.MaxSlots)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usageError{"--log-level: " + err.Error()}
	}
	if a.logFormat != "text" && a.logFormat != "json" {
		return usageError{fmt.Sprintf("--log-format must be text or json, not %q", a.logFormat)}
	}
	if dir := ipc.DefaultSocketDir(); dir != "" && !flagSet(fs, "socket") {
		// The rule chose the directory: make it ours, or refuse one that
		// someone else could have planted a socket in.
		if err := ipc.PrepareSocketDir(dir); err != nil {
			return err
		}
	}
	if a.fillTrace != "" { // opened first: a path that cannot be written fails before the dataset loads
		f, err := openTraceFile(a.fillTrace)
		if err != nil {
			return fmt.Errorf("--fill-trace: %w", err)
		}
		defer f.Close()
		a.cfg.FillTrace = f
	}
	log := newLogger(e.stderr, a.logFormat, level)
	serve.Version = version
	p := newProgress(log, 5*time.Second)
	open, noGPU, useGPU := serve.OpenSource, "disabled with --gpu=false", false
	if a.gpu {
		if _, err := serve.ProbeGPU(); err != nil {
			if a.gpus != "" {
				return fmt.Errorf("--gpus %s: no usable GPU: %w", a.gpus, err)
			}
			noGPU = err.Error()
			log.Info("no GPU: serving the CPU path only", "reason", noGPU)
		} else {
			open, useGPU = serve.OpenSourcePinned, true
		}
	}
	if a.tableSocket != "" {
		pinned.SetShared(true) // the table goes into a memfd it can share
	}
	src, err := open(a.dataset, a.skipChecksums, p, log)
	p.Finish()
	if err != nil {
		return err
	}
	defer src.Close()
	if cachePct > 0 {
		if src.Hetero != nil {
			return fmt.Errorf("--gpu-cache %s: the cache keeps rows of a homogeneous dataset's feature table; %s is heterogeneous", a.gpuCache, a.dataset)
		}
		a.gpuCfg.Cache = int64(cachePct / 100 * float64(len(src.Data.Features)))
	}
	if a.noEdgeFeatures {
		src.DropEdgeFeatures()
	}
	srv := serve.New(src, a.cfg, log)
	if useGPU {
		if err := srv.EnableGPU(a.gpuCfg); err != nil {
			return err
		}
		if ok, dir := mpsRunning(); !ok {
			// Measured on an H100 (docs/benchmarks.md, 2026-11-25): without
			// MPS the daemon's kernels and a trainer's take turns on the GPU.
			log.Warn("no MPS control daemon: loaderd's GPU kernels and each trainer's will take turns in time slices instead of sharing the GPU; "+
				"start one before loaderd and the trainers (docs/gpu.md, \"MPS\"): GraphSAGE on papers100M trained 1.5x faster with it",
				"looked_in", dir)
		}
	} else {
		srv.DisableGPU(noGPU)
	}
	// The dataset is loaded (and copied to the GPUs): garbage from here on
	// is each Open's and each epoch's, collected at a fixed allowance.
	if percent, live, set := serve.PaceCollector(); set {
		log.Info("collector paced for the dataset's heap", "live_heap_bytes", live, "gc_percent", percent,
			"garbage_allowance_bytes", serve.GarbageAllowance)
	} else {
		log.Info("collector left at GOGC from the environment", "GOGC", os.Getenv("GOGC"))
	}
	if a.metricsAddr != "" { // before Listen: a bad address leaves no socket behind
		stop, err := serveMetrics(a.metricsAddr, srv.Registry(), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	if a.tableSocket != "" {
		if _, _, err := src.TableFD(); err != nil {
			return fmt.Errorf("--table-socket: %w", err)
		}
		go func() {
			if err := srv.ServeTable(ctx, a.tableSocket); err != nil {
				log.Error("table socket failed", "err", err)
			}
		}()
	}
	if a.cpuProfile != "" {
		f, err := os.Create(a.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	return srv.Serve(ctx)
}

// parseBytes parses sizes like 512MiB, 8GiB, 1.5GB or a plain byte count.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(num, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	// NaN fails the range check; Inf and anything of 2^63 bytes or more
	// would not convert to an int64 (Go gives the minimum: a negative size).
	if err != nil || !(v >= 0 && v*mult < 1<<63) {
		return 0, fmt.Errorf("bad size %q (want e.g. 8GiB, 512MiB or a byte count)", s)
	}
	return int64(v * mult), nil
}

// parseHeadroom parses --gpu-cache-headroom into GPUConfig.CacheHeadroom:
// auto is 0 (the default headroom), a size is that many bytes, and an
// explicit 0 is -1 (none).
func parseHeadroom(s string) (int64, error) {
	if strings.TrimSpace(s) == "auto" {
		return 0, nil
	}
	b, err := parseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%w; or auto", err)
	}
	if b == 0 {
		return -1, nil
	}
	return b, nil
}

// parseShare parses a size as parseBytes does, or a percentage ("20%") of
// something the caller knows (the feature bytes): one of bytes, pct is set.
func parseShare(s string) (bytes int64, pct float64, err error) {
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		pct, err = strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(pct >= 0 && pct <= 100) { // NaN fails both
			return 0, 0, fmt.Errorf("bad share %q (want a percentage from 0%% to 100%%, or a size such as 8GiB)", s)
		}
		return 0, pct, nil
	}
	bytes, err = parseBytes(s)
	return bytes, 0, err
}

func parseInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad id %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// openTraceFile creates (or truncates) path for a trace the fills write to
// as they go. Only a regular file: a FIFO or a device could block a write,
// and with it every trainer's fills. The open itself does not block (a FIFO
// without a reader fails at once).
func openTraceFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
		}
		return nil, err
	}
	return f, nil
}
