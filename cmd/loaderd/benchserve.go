package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gnnloader/gnnloader/internal/cputime"
	"github.com/gnnloader/gnnloader/internal/stages"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/serve"
)

func init() {
	registerBench("serve", "the CPU serving pipeline end to end: batches/s and time per stage", benchServe)
}

func benchServe(ctx context.Context, e *env, args []string) error {
	var (
		spec, fanouts, device string
		trainers, batchSize   int
		epochs, slots         int
		maxBatches            int
		budget                bool
		cfg                   serve.Config
		gpu                   serve.GPUConfig
	)
	fs := benchFlags(e, "serve", "loaderd bench serve --dataset synthetic:products:0.1:1 --trainers 2", func(fs *flag.FlagSet) {
		fs.StringVar(&spec, "dataset", "synthetic:products:0.05:1", "dataset directory or synthetic:NAME[:SCALE[:SEED]]")
		fs.StringVar(&fanouts, "fanouts", "15,10,5", "fanouts per hop")
		fs.IntVar(&batchSize, "batch-size", 1024, "seeds per batch")
		fs.IntVar(&trainers, "trainers", 1, "trainers (ranks of one job) consuming batches")
		fs.IntVar(&epochs, "epochs", 1, "epochs each trainer consumes")
		fs.IntVar(&cfg.SamplerThreads, "sampler-threads", 0, "goroutines per batch (0 = all cores)")
		fs.IntVar(&cfg.Prefetch, "prefetch", 2, "batches sampled ahead per trainer")
		fs.IntVar(&slots, "slots", 0, "slots per trainer (0 = the daemon's default: 2 on the CPU, 6 on a GPU)")
		fs.StringVar(&device, "device", "cpu", "where the trainers ask for their slots: cpu or cuda:N (the GPU path: the table pinned, CUDA gather)")
		fs.IntVar(&gpu.SweepBatches, "gpu-sweep", 0, "most batches one GPU gather pass covers (0 = half the slots)")
		fs.IntVar(&gpu.MaxSMs, "gather-sms", 0, "SMs one trainer's gather kernels may use (0 = 16; -1 = all)")
		fs.StringVar(&gpu.SweepPlan, "sweep-plan", "gpu", "where GPU fills plan their sweeps: gpu or cpu")
		fs.StringVar(&gpu.Sampling, "sampling", "auto", "where trainers on a GPU are sampled: auto, gpu or cpu")
		fs.IntVar(&maxBatches, "batches", 0, "stop each trainer after this many batches (0 = whole epochs)")
		fs.BoolVar(&budget, "budget", true, "profile the daemon while the trainers consume and print the CPU time per batch of each stage")
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
	dir, err := os.MkdirTemp("", "loaderd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Socket = filepath.Join(dir, "s.sock")
	cfg.MemoryBudget = 1 << 40 // the benchmark measures speed, not admission
	srv := serve.New(src, cfg, nil)
	if dev >= 0 {
		gpu.Devices = []int{dev}
		if err := srv.EnableGPU(gpu); err != nil {
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

	req := ipc.Open{Split: "train", BatchSize: uint32(batchSize), Shuffle: true, Seed: 1, WorldSize: uint32(trainers),
		Device: device, Slots: uint32(slots)}
	for _, f := range fo {
		req.Fanouts = append(req.Fanouts, int32(f))
	}
	var prof bytes.Buffer
	if budget {
		if err := pprof.StartCPUProfile(&prof); err != nil {
			return fmt.Errorf("--budget: %w (is loaderd serve --cpu-profile running in this process?)", err)
		}
	}
	cpu0 := cputime.Process()
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
			o := req
			o.Rank = uint32(r)
			n, nn, err := consume(cfg.Socket, o, epochs, maxBatches)
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
	cpu := cputime.Process() - cpu0
	if budget {
		pprof.StopCPUProfile()
	}
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
	fmt.Fprintf(e.stdout, "CPU: %.1f core-ms per batch, %.1f of %d cores busy on average\n",
		float64(cpu)/1e6/float64(max(total, 1)), cpu.Seconds()/el.Seconds(), runtime.NumCPU())
	if budget {
		b, sampled, err := stages.Attribute(&prof)
		if err != nil {
			return fmt.Errorf("reading the profile: %w", err)
		}
		fmt.Fprintln(e.stdout, "CPU budget per batch, by stage (from the daemon's CPU profile):")
		tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stage\tcore-ms/batch\tshare\t")
		for _, name := range b.Stages() {
			fmt.Fprintf(tw, "%s\t%.2f\t%.1f%%\t\n", name, float64(b[name])/1e6/float64(max(total, 1)), 100*float64(b[name])/float64(max(sampled, 1)))
		}
		fmt.Fprintf(tw, "all (profiled)\t%.2f\t100%%\t\n", float64(sampled)/1e6/float64(max(total, 1)))
		tw.Flush()
	}
	return nil
}

// consume is a trainer that takes every batch and releases it at once: the
// loader's ceiling. It stops after maxBatches batches when that is not 0.
func consume(socket string, open ipc.Open, epochs, maxBatches int) (batches, nodes int64, err error) {
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
	om, err := recv()
	if err != nil {
		return 0, 0, err
	}
	opened, ok := om.(*ipc.Opened)
	if !ok {
		return 0, 0, fmt.Errorf("daemon answered Open with %T", om)
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
				n, _ := opened.Count(b, "n_id")
				nodes += int64(n)
				if err := c.WriteMsg(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index}); err != nil {
					return batches, nodes, err
				}
				if maxBatches > 0 && batches >= int64(maxBatches) {
					c.WriteMsg(&ipc.Goodbye{Reason: "bench done"})
					return batches, nodes, nil
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
