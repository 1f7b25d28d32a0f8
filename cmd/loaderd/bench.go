package main

import (
	"context"
	"flag"
	"fmt"

	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/sampler"
	"github.com/gnnloader/gnnloader/serve"
)

// benchmark is one `loaderd bench NAME` subcommand.
type benchmark struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var benchmarks = map[string]*benchmark{}

// registerBench adds `loaderd bench NAME`.
func registerBench(name, summary string, run func(ctx context.Context, e *env, args []string) error) {
	benchmarks[name] = &benchmark{summary: summary, run: run}
}

func init() {
	register(&command{
		name:    "bench",
		summary: "run a benchmark: " + "sample, serve, gather (GPU), ... (loaderd bench -h lists them)",
		usage:   "NAME [flags]",
		example: "loaderd bench sample --dataset synthetic:papers100M:0.01:1\nloaderd bench serve --trainers 2",
		run:     runBench,
	})
	registerBench("sample", "neighbour sampling: sampled edges/s, batches/s and unique nodes per batch, 1 core vs all", benchSample)
	registerBench("serve", "the CPU serving pipeline end to end: batches/s and time per stage", benchServe)
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(e.stderr, "usage: loaderd bench NAME [flags]\n\nbenchmarks:\n")
		for _, n := range names {
			fmt.Fprintf(e.stderr, "  %-8s %s\n", n, benchmarks[n].summary)
		}
		fmt.Fprintf(e.stderr, "\nRun 'loaderd bench NAME -h' for its flags.\n")
		if len(args) == 0 {
			return usageError{"which benchmark?"}
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown benchmark %q", args[0])}
	}
	return b.run(ctx, e, args[1:])
}

// benchFlags makes the flag set of `loaderd bench NAME`.
func benchFlags(e *env, name, example string, bind func(fs *flag.FlagSet)) *flag.FlagSet {
	c := &command{name: "bench " + name, summary: benchmarks[name].summary, usage: "[flags]", example: example}
	return c.flags(e.stderr, bind)
}

func parseFanouts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || (v < 1 && v != -1) {
			return nil, fmt.Errorf("bad fanout %q (want positive numbers or -1 for all neighbours)", f)
		}
		out = append(out, v)
	}
	return out, nil
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
		spec, split, fanouts string
		cfg                  sampler.BenchConfig
	)
	fs := benchFlags(e, "sample", "loaderd bench sample --dataset synthetic:papers100M:1:1 --duration 10s", func(fs *flag.FlagSet) {
		fs.StringVar(&spec, "dataset", "synthetic:papers100M:0.01:1", "dataset directory or synthetic:NAME[:SCALE[:SEED]] (graph only)")
		fs.StringVar(&split, "split", "train", "seed split")
		fs.StringVar(&fanouts, "fanouts", "15,10,5", "fanouts per hop")
		fs.IntVar(&cfg.BatchSize, "batch-size", 1024, "seeds per batch")
		fs.IntVar(&cfg.Workers, "workers", 0, "cores of the all-cores runs (0 = GOMAXPROCS)")
		fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "time per run")
		fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the shuffle and the sampling")
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
	d, done, err := benchGraph(spec, e)
	if err != nil {
		return err
	}
	defer done()
	seeds := d.Splits[split]
	if len(seeds) == 0 {
		return fmt.Errorf("dataset %s has no seeds in split %q", d.Name, split)
	}
	_, err = sampler.RunBench(ctx, &d.Graph, seeds, cfg, e.stdout)
	return err
}

func benchServe(ctx context.Context, e *env, args []string) error {
	var (
		spec, fanouts       string
		trainers, batchSize int
		epochs              int
		cfg                 serve.Config
	)
	fs := benchFlags(e, "serve", "loaderd bench serve --dataset synthetic:products:0.1:1 --trainers 2", func(fs *flag.FlagSet) {
		fs.StringVar(&spec, "dataset", "synthetic:products:0.05:1", "dataset directory or synthetic:NAME[:SCALE[:SEED]]")
		fs.StringVar(&fanouts, "fanouts", "15,10,5", "fanouts per hop")
		fs.IntVar(&batchSize, "batch-size", 1024, "seeds per batch")
		fs.IntVar(&trainers, "trainers", 1, "trainers (ranks of one job) consuming batches")
		fs.IntVar(&epochs, "epochs", 1, "epochs each trainer consumes")
		fs.IntVar(&cfg.SamplerThreads, "sampler-threads", 0, "goroutines per batch (0 = all cores)")
		fs.IntVar(&cfg.Prefetch, "prefetch", 2, "batches sampled ahead per trainer")
		fs.IntVar(&cfg.Slots, "slots", 2, "slots per trainer")
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
	src, err := serve.OpenSource(spec, true, nil, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	dir, err := os.MkdirTemp("", "loaderd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Socket = filepath.Join(dir, "s.sock")
	srv := serve.New(src, cfg, nil)
	if err := srv.Listen(); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()

	open := ipc.Open{Split: "train", BatchSize: uint32(batchSize), Shuffle: true, Seed: 1, WorldSize: uint32(trainers), Device: "cpu"}
	for _, f := range fo {
		open.Fanouts = append(open.Fanouts, int32(f))
	}
	start := time.Now()
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		total, nodes int64
		firstErr     error
	)
	for r := 0; r < trainers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := open
			o.Rank = uint32(r)
			n, nn, err := consume(cfg.Socket, o, epochs)
			mu.Lock()
			defer mu.Unlock()
			total += n
			nodes += nn
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	cancel()
	<-served
	if firstErr != nil {
		return firstErr
	}
	st := srv.Stats()
	per := func(ns int64) string {
		return (time.Duration(ns) / time.Duration(max(total, 1))).Round(time.Microsecond).String()
	}
	d := src.Data
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(e.stdout, "serve benchmark: %s (%d nodes, %d edges, %d-byte rows), fanouts %v, batch %d, %d trainer(s), %d epoch(s)\n",
		d.Name, d.Graph.NumNodes, d.Graph.NumEdges(), d.RowBytes(), fo, batchSize, trainers, epochs)
	fmt.Fprintln(tw, "batches\tseconds\tbatches/s\tnodes/batch\tfeature GB/s\tsample/batch\tgather/batch\tslot wait/batch\t")
	fmt.Fprintf(tw, "%d\t%.2f\t%.1f\t%.0f\t%.2f\t%s\t%s\t%s\t\n", total, el.Seconds(), float64(total)/el.Seconds(),
		float64(nodes)/float64(max(total, 1)), float64(nodes)*float64(d.RowBytes())/el.Seconds()/1e9,
		per(st.SampleNanos.Load()), per(st.GatherNanos.Load()), per(st.WaitNanos.Load()))
	tw.Flush()
	fmt.Fprintln(e.stdout, "sample and gather times are per batch on their own goroutines; they overlap each other and the trainers.")
	return nil
}

// consume is a trainer that takes every batch and releases it at once: the
// loader's ceiling.
func consume(socket string, open ipc.Open, epochs int) (batches, nodes int64, err error) {
	c, err := ipc.Dial(socket, ipc.DefaultLimits)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	recv := func() (ipc.Msg, error) {
		m, fds, err := c.ReadMsg()
		ipc.CloseFDs(fds)
		if e, ok := m.(*ipc.Error); ok {
			return nil, e.AsError()
		}
		return m, err
	}
	if err := c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "bench"}); err != nil {
		return 0, 0, err
	}
	if _, err := recv(); err != nil {
		return 0, 0, err
	}
	if err := c.WriteMsg(&open); err != nil {
		return 0, 0, err
	}
	if _, err := recv(); err != nil {
		return 0, 0, err
	}
	for ep := 0; ep < epochs; ep++ {
		if err := c.WriteMsg(&ipc.StartEpoch{Epoch: uint32(ep)}); err != nil {
			return batches, nodes, err
		}
		for {
			m, err := recv()
			if err != nil {
				return batches, nodes, err
			}
			if b, ok := m.(*ipc.BatchReady); ok {
				batches++
				nodes += int64(b.NumNodes)
				if err := c.WriteMsg(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index}); err != nil {
					return batches, nodes, err
				}
				continue
			}
			if _, ok := m.(*ipc.EpochEnd); ok {
				break
			}
			return batches, nodes, fmt.Errorf("unexpected %T", m)
		}
	}
	c.WriteMsg(&ipc.Goodbye{Reason: "bench done"})
	return batches, nodes, nil
}
