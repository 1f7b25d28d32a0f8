package samplerbench

// The GPU sampler (sampler.GPU) on its own: batches enqueued back to back
// on one stream, nothing else on the device, timed with CUDA events.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// errNoGraphs: a graph row asked of a driver without CUDA graphs.
var errNoGraphs = errors.New("samplerbench: the driver has no CUDA graphs")

// GPURow is one measured GPU run.
type GPURow struct {
	Name           string
	BatchSize      int
	Batches        int
	GPUPerBatch    time.Duration // device time a batch (events around the run / batches)
	LaunchPerBatch time.Duration // host time to enqueue a batch's kernels
	NodesPerBatch  float64
	EdgesPerBatch  float64
}

// RunGPU samples cfg.Batches batches (0 means 500) of the epoch's seeds on
// device dev with the GPU sampler, back to back on one stream: at
// cfg.BatchSize seeds and at one seed a batch (the same kernels with almost
// no work: what the launches cost on their own), each with the kernels
// launched as the sampler's CUDA graph and one by one, in that order (the
// graph rows left out where the driver has none); then at cfg.BatchSize
// seeds, cfg.GPULanes batches a call, as CUDA graphs. It prints a table to
// w.
func RunGPU(ctx context.Context, g *datasets.Graph, seeds []int64, cfg Config, dev int, w io.Writer) ([]GPURow, error) {
	if cfg.Fanouts == nil {
		cfg.Fanouts = []int{15, 10, 5}
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1024
	}
	if cfg.Batches == 0 {
		cfg.Batches = 500
	}
	if cfg.GPULanes == nil {
		cfg.GPULanes = []int{8, 32}
	}
	if len(seeds) == 0 {
		return nil, errors.New("sampler: bench needs seeds")
	}
	if err := cudaext.Init(); err != nil {
		return nil, err
	}
	d, err := cudaext.GetDevice(dev)
	if err != nil {
		return nil, err
	}
	c, err := d.RetainPrimaryContext()
	if err != nil {
		return nil, err
	}
	defer c.Release()
	maxDeg := g.MaxDegree()
	var rows []GPURow
	err = c.Do(func() error {
		dg, err := sampler.NewDeviceGraph(g)
		if err != nil {
			return err
		}
		defer dg.Close()
		for _, bs := range []int{cfg.BatchSize, 1} {
			for _, graph := range []bool{true, false} {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				row, err := gpuRun(c, g, dg, seeds, cfg, bs, maxDeg, graph, 1)
				if errors.Is(err, errNoGraphs) {
					continue // the launches one by one still run
				}
				if err != nil {
					return err
				}
				rows = append(rows, row)
			}
		}
		for _, lanes := range cfg.GPULanes {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			row, err := gpuRun(c, g, dg, seeds, cfg, cfg.BatchSize, maxDeg, true, lanes)
			if errors.Is(err, errNoGraphs) {
				break
			}
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
		return nil
	})
	writeGPU(w, g, cfg, rows)
	return rows, err
}

func gpuRun(c *cudaext.Context, g *datasets.Graph, dg *sampler.DeviceGraph, seeds []int64, cfg Config, batch int, maxDeg int64, graph bool, lanes int) (row GPURow, err error) {
	how := "one launch a kernel"
	if graph {
		how = "CUDA graph"
	}
	if lanes > 1 {
		how += fmt.Sprintf(", %d a call", lanes)
	}
	row = GPURow{Name: fmt.Sprintf("GPU, %d seeds a batch, %s", batch, how), BatchSize: batch, Batches: cfg.Batches}
	plan, err := sampler.NewPlan(seeds, sampler.EpochConfig{BatchSize: batch, Shuffle: true, Seed: cfg.Seed}, 0)
	if err != nil {
		return row, err
	}
	gs, err := sampler.NewGPU(c, dg, cfg.Fanouts, batch, maxDeg, lanes)
	if err != nil {
		return row, err
	}
	defer gs.Close()
	if err := gs.UseGraph(graph); err != nil {
		return row, err
	}
	if gs.Graph() != graph {
		return row, errNoGraphs
	}
	var ptrs []cudaext.DevicePtr
	defer func() {
		for _, p := range ptrs {
			cudaext.MemFree(p)
		}
	}()
	alloc := func(n int64) cudaext.DevicePtr {
		if err != nil {
			return 0
		}
		var p cudaext.DevicePtr
		if p, err = cudaext.MemAlloc(max(n, 16)); err == nil {
			ptrs = append(ptrs, p)
		}
		return p
	}
	H := len(cfg.Fanouts)
	outs := make([]sampler.DeviceOut, lanes) // one a lane
	for y := range outs {
		outs[y] = sampler.DeviceOut{NID: alloc(8 * gs.MaxNodes()), EdgeIndex: alloc(16 * gs.MaxEdges()), EID: alloc(8 * gs.MaxEdges()),
			Counts: alloc(8 * int64(sampler.CountsLen(H)))}
	}
	out := outs[0]
	// Every batch's seeds in device memory before the clock starts.
	nb := min(cfg.Batches, plan.NumBatches())
	all := make([]int64, 0, nb*batch)
	at := make([]int, nb+1)
	for i := range nb {
		all = append(all, plan.Batch(i)...)
		at[i+1] = len(all)
	}
	seedsDev := alloc(8 * int64(len(all)))
	if err != nil {
		return row, err
	}
	st, err := cudaext.NewStream()
	if err != nil {
		return row, err
	}
	defer st.Destroy()
	if err := cudaext.CopyFromHost(seedsDev, unsafe.Slice((*byte)(unsafe.Pointer(&all[0])), 8*len(all)), st); err != nil {
		return row, err
	}
	start, err := cudaext.NewEvent(cudaext.EventDefault)
	if err != nil {
		return row, err
	}
	defer start.Destroy()
	end, err := cudaext.NewEvent(cudaext.EventDefault)
	if err != nil {
		return row, err
	}
	defer end.Destroy()
	// sample(i): batches i to i+lanes-1 in one call (one batch at one lane).
	jobs := make([]sampler.Job, lanes)
	sample := func(i int) error {
		for y := range jobs {
			k := (i + y) % nb
			jobs[y] = sampler.Job{Seeds: seedsDev + cudaext.DevicePtr(8*at[k]), N: at[k+1] - at[k], Key: plan.Key(k), Out: outs[y]}
		}
		return gs.SampleMany(st, jobs)
	}
	for i := 0; i < min(nb, 20); i += lanes { // warm-up
		if err := sample(i); err != nil {
			return row, err
		}
	}
	if err := st.Synchronize(); err != nil {
		return row, err
	}
	if err := start.Record(st); err != nil {
		return row, err
	}
	t0 := time.Now()
	done := 0
	for ; done < cfg.Batches; done += lanes {
		if err := sample(done); err != nil {
			return row, err
		}
	}
	launch := time.Since(t0)
	if err := end.Record(st); err != nil {
		return row, err
	}
	if err := end.Synchronize(); err != nil {
		return row, err
	}
	gpu, err := cudaext.Elapsed(start, end)
	if err != nil {
		return row, err
	}
	row.Batches = done
	row.GPUPerBatch = gpu / time.Duration(done)
	row.LaunchPerBatch = launch / time.Duration(done)
	// Sizes, from the counts of the first few batches.
	counts := make([]int64, sampler.CountsLen(H))
	var nodes, edges int64
	m := min(nb, 16)
	for i := range m {
		if err := sample(i); err != nil { // batch i at lane 0
			return row, err
		}
		if err := cudaext.CopyToHost(unsafe.Slice((*byte)(unsafe.Pointer(&counts[0])), 8*len(counts)), out.Counts, st); err != nil {
			return row, err
		}
		nodes += counts[0]
		edges += counts[1]
	}
	row.NodesPerBatch, row.EdgesPerBatch = float64(nodes)/float64(m), float64(edges)/float64(m)
	return row, nil
}

func writeGPU(w io.Writer, g *datasets.Graph, cfg Config, rows []GPURow) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "GPU sampler, alone on the device: %d nodes, %d edges, fanouts %v, %d batches back to back on one stream\n",
		g.NumNodes, g.NumEdges(), cfg.Fanouts, cfg.Batches)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tGPU ms/batch\tlaunch ms/batch\tnodes/batch\tedges/batch\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.0f\t%.0f\t\n", r.Name, r.GPUPerBatch.Seconds()*1e3, r.LaunchPerBatch.Seconds()*1e3, r.NodesPerBatch, r.EdgesPerBatch)
	}
	tw.Flush()
}
