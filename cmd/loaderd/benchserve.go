package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/serve"
)

func init() {
	registerBench("serve", "the serving pipeline end to end (CPU or GPU path): batches/s, the PCIe bound, and the CPU time per batch by stage", benchServe)
}

// serveRun is one configuration of the serve benchmark.
type serveRun struct {
	name       string
	cfg        serve.Config
	gpu        serve.GPUConfig
	cache      string // bytes or a percentage of the feature bytes
	slots      int
	trainers   int
	epochs     int
	maxBatches int
	budget     bool
	dev        int // -1: the CPU path
	req        ipc.Open
}

func benchServe(ctx context.Context, e *env, args []string) error {
	var (
		spec, fanouts, device, variants string
		batchSize                       int
		base                            serveRun
	)
	fs := benchFlags(e, "serve", "loaderd bench serve --dataset synthetic:papers100M:1:0 --device cuda:0 --batches 600 --variants 'slots=6;slots=16;slots=16,gpu-cache=20%'", func(fs *flag.FlagSet) {
		fs.StringVar(&spec, "dataset", "synthetic:products:0.05:1", "dataset directory or synthetic:NAME[:SCALE[:SEED[:DTYPE]]]")
		fs.StringVar(&fanouts, "fanouts", "15,10,5", "fanouts per hop")
		fs.IntVar(&batchSize, "batch-size", 1024, "seeds per batch")
		fs.IntVar(&base.trainers, "trainers", 1, "trainers (ranks of one job) consuming batches")
		fs.IntVar(&base.epochs, "epochs", 1, "epochs each trainer consumes")
		fs.IntVar(&base.cfg.SamplerThreads, "sampler-threads", 0, "goroutines per batch (0 = all cores)")
		fs.IntVar(&base.cfg.Prefetch, "prefetch", 2, "batches sampled ahead per trainer")
		fs.IntVar(&base.slots, "slots", 0, "slots per trainer (0 = the daemon's default)")
		fs.StringVar(&device, "device", "cpu", "where the trainers ask for their slots: cpu or cuda:N (the GPU path: the table pinned, CUDA gather)")
		fs.IntVar(&base.gpu.SweepBatches, "gpu-sweep", 0, "most batches one GPU gather pass covers (0 = half the slots)")
		fs.IntVar(&base.gpu.SweepAhead, "sweep-ahead", 0, "announced, unreleased batches above which a GPU fill waits for a whole sweep (0 = half the sweep width; -1 = never)")
		fs.IntVar(&base.gpu.MaxSMs, "gather-sms", 0, "SMs one trainer's gather kernels may use (0 = 16; -1 = all)")
		fs.StringVar(&base.gpu.SweepPlan, "sweep-plan", "gpu", "where GPU fills plan their sweeps: gpu or cpu")
		fs.StringVar(&base.gpu.Sampling, "sampling", "auto", "where trainers on a GPU are sampled: auto, gpu or cpu")
		fs.IntVar(&base.gpu.SampleLanes, "gpu-sample-lanes", 0, "batches of a fill the GPU sampler samples together (1 to 32; 0 = the default)")
		fs.StringVar(&base.cache, "gpu-cache", "0", "bytes of hot rows the GPU keeps (e.g. 12GiB, or a percentage of the feature bytes: 20%)")
		fs.IntVar(&base.maxBatches, "batches", 0, "stop each trainer after this many batches (0 = whole epochs)")
		fs.BoolVar(&base.gpu.Timing, "gpu-timing", true, "time the GPU work of the fills with events, by phase")
		fs.BoolVar(&base.budget, "budget", true, "profile the daemon while the trainers consume and print the CPU time per batch of each stage")
		fs.StringVar(&variants, "variants", "", "runs to make one after the other over the same dataset, ';'-separated, each a ','-separated list of flag=value overriding the flags above (slots, gpu-sweep, sweep-ahead, gpu-cache, sampling, gpu-sample-lanes, sweep-plan, prefetch, sampler-threads, gather-sms, trainers, batches)")
	})
	if pos, err := parseInterspersed(fs, args); err != nil || len(pos) > 0 {
		if err == nil {
			err = usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
		}
		return err
	}
	fo, err := parseFanouts(fanouts)
	if err != nil {
		return usageError{err.Error()}
	}
	dev, err := ipc.ParseDevice(device)
	if err != nil {
		return usageError{"--device: " + err.Error()}
	}
	base.req = ipc.Open{Split: "train", BatchSize: uint32(batchSize), Shuffle: true, Seed: 1, Device: device}
	for _, f := range fo {
		base.req.Fanouts = append(base.req.Fanouts, int32(f))
	}
	runs := []serveRun{base}
	if variants != "" {
		if runs, err = parseVariants(base, variants); err != nil {
			return usageError{"--variants: " + err.Error()}
		}
	}
	open := serve.OpenSource
	if dev >= 0 {
		open = serve.OpenSourcePinned
	}
	p := newProgress(e.log, 5*time.Second)
	src, err := open(spec, true, p, e.log)
	p.Finish()
	if err != nil {
		return err
	}
	defer src.Close()
	d := src.Data
	fmt.Fprintf(e.stdout, "serve benchmark: %s (%d nodes, %d edges, %d-byte rows), fanouts %v, batch %d, device %s\n",
		d.Name, d.Graph.NumNodes, d.Graph.NumEdges(), d.RowBytes(), fo, batchSize, device)
	for _, r := range runs {
		if err := r.run(ctx, e, src, dev); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return nil
}

// parseVariants makes one run of base per ';'-separated list of overrides.
func parseVariants(base serveRun, s string) ([]serveRun, error) {
	var runs []serveRun
	for _, v := range strings.Split(s, ";") {
		r := base
		r.name = strings.TrimSpace(v)
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				if k == "" {
					continue
				}
				return nil, fmt.Errorf("%q is not flag=value", kv)
			}
			n, nerr := strconv.Atoi(val)
			num := func(p *int) error {
				if nerr != nil {
					return fmt.Errorf("%s=%q: want a number", k, val)
				}
				*p = n
				return nil
			}
			var err error
			switch k {
			case "slots":
				err = num(&r.slots)
			case "gpu-sweep":
				err = num(&r.gpu.SweepBatches)
			case "sweep-ahead":
				err = num(&r.gpu.SweepAhead)
			case "gather-sms":
				err = num(&r.gpu.MaxSMs)
			case "prefetch":
				err = num(&r.cfg.Prefetch)
			case "sampler-threads":
				err = num(&r.cfg.SamplerThreads)
			case "trainers":
				err = num(&r.trainers)
			case "batches":
				err = num(&r.maxBatches)
			case "gpu-cache":
				r.cache = val
			case "sampling":
				r.gpu.Sampling = val
			case "gpu-sample-lanes":
				err = num(&r.gpu.SampleLanes)
			case "sweep-plan":
				r.gpu.SweepPlan = val
			default:
				err = fmt.Errorf("unknown flag %q", k)
			}
			if err != nil {
				return nil, err
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// run serves src with the run's configuration and reports.
func (r serveRun) run(ctx context.Context, e *env, src *serve.Source, dev int) error {
	bytes, pct, err := parseShare(r.cache)
	if err != nil {
		return usageError{"--gpu-cache: " + err.Error()}
	}
	r.gpu.Cache = bytes
	if pct > 0 {
		r.gpu.Cache = int64(pct / 100 * float64(len(src.Data.Features)))
	}
	dir, err := os.MkdirTemp("", "loaderd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r.cfg.Socket = filepath.Join(dir, "s.sock")
	r.cfg.MemoryBudget = 1 << 40 // the benchmark measures speed, not admission
	r.cfg.MaxSlots = max(32, r.slots)
	srv := serve.New(src, r.cfg, nil)
	if dev >= 0 {
		r.gpu.Devices = []int{dev}
		if err := srv.EnableGPU(r.gpu); err != nil {
			return err
		}
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	r.req.Slots, r.req.WorldSize = uint32(r.slots), uint32(r.trainers)
	r.dev = dev
	res, err := r.measure(srv)
	cancel()
	<-served
	if err != nil {
		return err
	}
	return res.report(e.stdout, r, srv, src, dev)
}
