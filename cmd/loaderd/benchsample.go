package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/internal/bench/samplerbench"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/sampler"
	"github.com/gnnloader/gnnloader/serve"
)

func init() {
	registerBench("sample", "neighbour sampling: sampled edges/s, batches/s and unique nodes per batch, 1 core vs all", benchSample)
}

// benchGraph loads the graph and a seed split for sampling benchmarks: a
// dataset directory, or a synthetic spec generated without features.
func benchGraph(spec string, e *env) (*datasets.Data, func(), error) {
	start := time.Now()
	if rest, ok := strings.CutPrefix(spec, "synthetic:"); ok {
		opts, err := serve.ParseSynthetic(rest)
		if err != nil {
			return nil, nil, err
		}
		opts.NoFeatures = true
		p := newProgress(e.log, 5*time.Second)
		opts.Progress = p
		d, err := datasets.Generate(opts)
		p.Finish()
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(e.stdout, "generated %s (graph only) in %s\n", spec, time.Since(start).Round(time.Millisecond))
		return d, func() {}, nil
	}
	// The graph only: Open reads what it opens into memory, and the
	// features would be most of it.
	ds, err := datasets.Open(spec, &datasets.OpenOptions{SkipChecksums: true, NoFeatures: true})
	if err != nil {
		return nil, nil, err
	}
	return &ds.Data, func() { ds.Close() }, nil
}

func benchSample(ctx context.Context, e *env, args []string) error {
	var (
		spec, split, fanouts, device, lanes string
		cfg                                 samplerbench.Config
	)
	fs := benchFlags(e, "sample", "loaderd bench sample --dataset synthetic:papers100M:1:1 --duration 10s", func(fs *flag.FlagSet) {
		fs.StringVar(&spec, "dataset", "synthetic:papers100M:0.01:1", "dataset directory or synthetic:NAME[:SCALE[:SEED[:DTYPE]]] (graph only)")
		fs.StringVar(&split, "split", "train", "seed split")
		fs.StringVar(&fanouts, "fanouts", "15,10,5", "fanouts per hop")
		fs.IntVar(&cfg.BatchSize, "batch-size", 1024, "seeds per batch")
		fs.IntVar(&cfg.Workers, "workers", 0, "cores of the all-cores runs (0 = GOMAXPROCS)")
		fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "time per run")
		fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the shuffle and the sampling")
		fs.StringVar(&device, "device", "cpu", "cpu, or cuda:N: the GPU sampler alone on that device (CUDA events)")
		fs.IntVar(&cfg.Batches, "batches", 0, "batches per run (0: --duration decides on the CPU, 500 on a GPU)")
		fs.StringVar(&lanes, "gpu-lanes", "8,32", "on a GPU, also sample the full batches this many a call (as a fill does), a row each; comma-separated, 1 to 32, or none")
	})
	if pos, err := parseInterspersed(fs, args); err != nil || len(pos) > 0 {
		if err == nil {
			err = usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
		}
		return err
	}
	var err error
	if cfg.Fanouts, err = parseFanouts(fanouts); err != nil {
		return usageError{err.Error()}
	}
	if cfg.GPULanes, err = parseLanes(lanes); err != nil {
		return usageError{"--gpu-lanes: " + err.Error()}
	}
	dev, err := ipc.ParseDevice(device)
	if err != nil {
		return usageError{"--device: " + err.Error()}
	}
	d, done, err := benchGraph(spec, e)
	if err != nil {
		return err
	}
	defer done()
	seeds := d.Splits[split]
	if len(seeds) == 0 {
		return fmt.Errorf("dataset %s has no seeds in split %q", d.Name, split)
	}
	if dev >= 0 {
		_, err = samplerbench.RunGPU(ctx, &d.Graph, seeds, cfg, dev, e.stdout)
		return err
	}
	_, err = samplerbench.Run(ctx, &d.Graph, seeds, cfg, e.stdout)
	return err
}

// parseLanes reads --gpu-lanes: "none", or comma-separated lane counts of 1
// to sampler.MaxLanes.
func parseLanes(v string) ([]int, error) {
	lanes := []int{}
	if v == "none" {
		return lanes, nil
	}
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > sampler.MaxLanes {
			return nil, fmt.Errorf("%q: want lane counts of 1 to %d, comma-separated, or none", f, sampler.MaxLanes)
		}
		lanes = append(lanes, n)
	}
	return lanes, nil
}
