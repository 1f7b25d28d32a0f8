// Package ringbench is the ring all-reduce benchmark behind `loaderd bench
// ring` and scripts/ring-bench.sh: the GPU ring's time, algbw and busbw for
// bucket sizes doubling from MinBytes to MaxBytes, in nccl-tests' columns
// (Run). One Run at a time over a set of contexts.
package ringbench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/ring"
)

// Config is the ring benchmark's setup (nccl-tests' all_reduce_perf:
// sizes doubling from MinBytes to MaxBytes, float32 sum, in place).
type Config struct {
	MinBytes, MaxBytes int64 // default 1 KiB .. 1 GiB
	DType              ring.DType
	Op                 ring.Op
	Reps               int // timed repetitions per size (median), default 9
	Options            ring.GPUOptions
}

// Row is one size's result. Time is the median over repetitions of a
// repetition's time per all-reduce, the slowest rank's (CUDA events on each
// rank's stream around back-to-back all-reduces). AlgBW = bytes / time;
// BusBW = AlgBW * 2(n-1)/n, as nccl-tests reports them.
type Row struct {
	Bytes        int64
	Count        int64
	Time         time.Duration
	AlgBW, BusBW float64 // GB/s (1e9 bytes)
}

// Run measures the GPU ring over ctxs (one rank each) and prints a table
// to w: size, count, time (us), algbw and busbw (GB/s).
func Run(w io.Writer, ctxs []*cudaext.Context, cfg Config) ([]Row, error) {
	if cfg.MinBytes <= 0 {
		cfg.MinBytes = 1 << 10
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 30
	}
	if cfg.Reps <= 0 {
		cfg.Reps = 9
	}
	n := len(ctxs)
	g, err := ring.NewGPU(ctxs, &cfg.Options)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	bufs := make([]cudaext.DevicePtr, n)
	starts := make([]*cudaext.Event, n)
	ends := make([]*cudaext.Event, n)
	for i := range ctxs {
		err := ctxs[i].Do(func() error {
			p, err := cudaext.MemAlloc(cfg.MaxBytes)
			if err != nil {
				return err
			}
			bufs[i] = p
			if err := cudaext.MemsetD32Async(p, 0x3f800000, cfg.MaxBytes/4, g.Stream(i)); err != nil {
				return err
			}
			if starts[i], err = cudaext.NewEvent(cudaext.EventDefault); err != nil {
				return err
			}
			ends[i], err = cudaext.NewEvent(cudaext.EventDefault)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	defer func() {
		for i := range ctxs {
			ctxs[i].Do(func() error {
				cudaext.MemFree(bufs[i])
				starts[i].Destroy()
				ends[i].Destroy()
				return nil
			})
		}
	}()
	if err := g.Sync(); err != nil {
		return nil, err
	}
	for _, l := range g.Links() {
		fmt.Fprintf(w, "# link %s\n", l)
	}
	fmt.Fprintf(w, "# gnnloader ring all-reduce, %d ranks, %s %s, in place; time = median of %d reps, slowest rank\n", n, cfg.DType, cfg.Op, cfg.Reps)
	fmt.Fprintf(w, "%12s %12s %10s %9s %9s %7s %7s %6s %5s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "blocks", "piece", "rounds", "kind")
	es := int64(cfg.DType.Size())
	var rows []Row
	for size := cfg.MinBytes; size <= cfg.MaxBytes; size *= 2 {
		count := size / es
		iters := int(max(3, min(200, (512<<20)/size)))
		var times []time.Duration
		for rep := -1; rep < cfg.Reps; rep++ { // rep -1 warms up
			for i := range ctxs {
				if err := ctxs[i].Do(func() error { return starts[i].Record(g.Stream(i)) }); err != nil {
					return nil, err
				}
			}
			for k := 0; k < iters; k++ {
				if err := g.AllReduce(bufs, count, cfg.DType, cfg.Op); err != nil {
					return nil, err
				}
			}
			var worst time.Duration
			for i := range ctxs {
				err := ctxs[i].Do(func() error {
					if err := ends[i].Record(g.Stream(i)); err != nil {
						return err
					}
					if err := ends[i].Synchronize(); err != nil {
						return err
					}
					d, err := cudaext.Elapsed(starts[i], ends[i])
					worst = max(worst, d)
					return err
				})
				if err != nil {
					return nil, err
				}
			}
			if rep >= 0 {
				times = append(times, worst/time.Duration(iters))
			}
		}
		slices.Sort(times)
		t := times[len(times)/2]
		alg := float64(size) / t.Seconds() / 1e9
		row := Row{Bytes: size, Count: count, Time: t, AlgBW: alg, BusBW: alg * 2 * float64(n-1) / float64(n)}
		rows = append(rows, row)
		p := g.Plan(count, cfg.DType)
		kind := "pull"
		if p.Push {
			kind = "push"
		}
		fmt.Fprintf(w, "%12d %12d %10.2f %9.2f %9.2f %7d %7d %6d %5s\n", size, count, float64(t.Nanoseconds())/1e3, row.AlgBW, row.BusBW,
			p.Blocks, p.Piece*es, p.Rounds, kind)
	}
	return rows, nil
}
