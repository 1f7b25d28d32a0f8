// Package samplerbench is the sampler benchmark behind `loaderd bench
// sample`: how fast one process samples GraphSAGE batches on a graph with
// one worker, with every worker inside one batch, and with as many batches
// in flight as workers (Run). sampler's BenchmarkSample reports the same
// metrics under go test -bench. One Run at a time.
package samplerbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/internal/cputime"
	"github.com/gnnloader/gnnloader/sampler"
)

// Config configures Run.
type Config struct {
	// Fanouts per hop; nil means [15, 10, 5].
	Fanouts []int
	// BatchSize is the number of seeds per batch; 0 means 1024.
	BatchSize int
	// Workers is the core count of the "all workers" runs; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Duration is how long each run lasts; 0 means 2s unless Batches is set.
	Duration time.Duration
	// Batches, when > 0, is how many batches each run samples (it then
	// ends at Batches or Duration, whichever comes first when both are set).
	Batches int
	// Seed seeds the shuffle of the seeds and the batch keys.
	Seed uint64
	// GPULanes: on a GPU, the full-size batches are also sampled that many
	// at a time (sampler.GPU's SampleMany, as a GPU fill does), one row
	// each; nil means 8 and 32.
	GPULanes []int
}

// Row is one measured run.
type Row struct {
	Name          string  // what ran
	Workers       int     // goroutines per batch (sampler.Options.Workers)
	InFlight      int     // batches sampled at once
	Batches       int     // batches sampled
	Seconds       float64 // wall time
	Edges         int64   // sampled edges, all batches
	Nodes         int64   // unique nodes, all batches
	EdgesPerSec   float64
	BatchesPerSec float64
	NodesPerBatch float64
	EdgesPerBatch float64
	// CPUPerBatch is the process CPU time per batch (0 when unknown): with
	// Seconds it tells a busy machine from extra work in the parallel runs.
	CPUPerBatch time.Duration
}

// Result holds Run's runs: one worker, one batch at a time with
// all workers inside it, and as many batches in flight as workers.
type Result struct {
	Single   Row // 1 worker, 1 batch in flight
	Intra    Row // Workers goroutines inside each batch, 1 batch in flight
	Parallel Row // Workers batches in flight, 1 goroutine each
}

// Rows returns the runs in table order.
func (r Result) Rows() []Row { return []Row{r.Single, r.Intra, r.Parallel} }

// Run measures how fast this process samples batches of seeds on g and
// prints a table to w (nil means none). Cancelling ctx ends the current run
// early; the rows measured so far are returned with ctx's error.
func Run(ctx context.Context, g *datasets.Graph, seeds []int64, cfg Config, w io.Writer) (Result, error) {
	var res Result
	if cfg.Fanouts == nil {
		cfg.Fanouts = []int{15, 10, 5}
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1024
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Duration == 0 && cfg.Batches == 0 {
		cfg.Duration = 2 * time.Second
	}
	if len(seeds) == 0 {
		return res, errors.New("sampler: bench needs seeds")
	}
	plan, err := sampler.NewPlan(seeds, sampler.EpochConfig{BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed}, 0)
	if err != nil {
		return res, err
	}
	if plan.NumBatches() == 0 {
		return res, errors.New("sampler: bench has no batches")
	}
	runs := []struct {
		row              *Row
		name             string
		workers, flights int
	}{
		{&res.Single, "1 worker", 1, 1},
		{&res.Intra, fmt.Sprintf("%d workers in 1 batch", cfg.Workers), cfg.Workers, 1},
		{&res.Parallel, fmt.Sprintf("%d batches in flight", cfg.Workers), 1, cfg.Workers},
	}
	for _, r := range runs {
		row, err := benchRun(ctx, g, plan, cfg, r.workers, r.flights)
		row.Name = r.name
		*r.row = row
		if err != nil {
			writeBench(w, g, cfg, res)
			return res, err
		}
	}
	writeBench(w, g, cfg, res)
	return res, nil
}

func benchRun(ctx context.Context, g *datasets.Graph, plan *sampler.Plan, cfg Config, workers, flights int) (Row, error) {
	row := Row{Workers: workers, InFlight: flights}
	s, err := sampler.New(g, sampler.Options{Fanouts: cfg.Fanouts, Workers: workers})
	if err != nil {
		return row, err
	}
	// Warm up every goroutine's buffers outside the clock.
	var wg sync.WaitGroup
	bufs := make([]sampler.Batch, flights)
	for f := range bufs {
		wg.Go(func() { _ = s.Sample(plan.Batch(f%plan.NumBatches()), plan.Key(f), &bufs[f]) })
	}
	wg.Wait()
	var next, edges, nodes atomic.Int64
	var firstErr error
	var errOnce sync.Once
	cpu0 := cputime.Process()
	start := time.Now()
	deadline := time.Time{}
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	for f := range bufs {
		wg.Go(func() {
			b := &bufs[f]
			for ctx.Err() == nil && (deadline.IsZero() || time.Now().Before(deadline)) {
				i := next.Add(1) - 1
				if cfg.Batches > 0 && i >= int64(cfg.Batches) {
					return
				}
				bi := int(i % int64(plan.NumBatches()))
				if err := s.Sample(plan.Batch(bi), plan.Key(bi), b); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				edges.Add(int64(len(b.Src)))
				nodes.Add(int64(len(b.NID)))
			}
		})
	}
	wg.Wait()
	sec := time.Since(start).Seconds()
	cpu := cputime.Process() - cpu0
	n := next.Load()
	if cfg.Batches > 0 {
		n = min(n, int64(cfg.Batches))
	}
	row.Batches, row.Seconds, row.Edges, row.Nodes = int(n), sec, edges.Load(), nodes.Load()
	if sec > 0 {
		row.EdgesPerSec = float64(row.Edges) / sec
		row.BatchesPerSec = float64(n) / sec
	}
	if n > 0 {
		row.NodesPerBatch = float64(row.Nodes) / float64(n)
		row.EdgesPerBatch = float64(row.Edges) / float64(n)
		row.CPUPerBatch = cpu / time.Duration(n)
	}
	if firstErr != nil {
		return row, firstErr
	}
	return row, ctx.Err()
}

func writeBench(w io.Writer, g *datasets.Graph, cfg Config, res Result) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "sampler: %d nodes, %d edges, fanouts %v, batch %d, GOMAXPROCS %d\n",
		g.NumNodes, g.NumEdges(), cfg.Fanouts, cfg.BatchSize, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tbatches\tedges/s\tbatches/s\tnodes/batch\tedges/batch\tcpu/batch\t")
	for _, r := range res.Rows() {
		if r.Name == "" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3gM\t%.1f\t%.0f\t%.0f\t%v\t\n", r.Name, r.Batches, r.EdgesPerSec/1e6, r.BatchesPerSec, r.NodesPerBatch, r.EdgesPerBatch, r.CPUPerBatch.Round(10*time.Microsecond))
	}
	tw.Flush()
}
