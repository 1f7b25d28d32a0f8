// Package gatherbench is the gather benchmark: on one table and in one run,
// the pinned host-to-device memcpy (the ceiling), the CPU gather plus its
// copy, a naive zero-copy kernel in sampled order, the sorted kernel and
// sorted sweeps of several batches, each optionally capped to a number of
// SMs or forced onto the any-size kernels (Run). `loaderd bench gather` and
// TestBenchGather (scripts/gpu-check.sh) print its table; docs/gpu.md says
// how to read it. It drives gather's CUDA backend step by step through
// internal/gatherhook. One Run at a time per table.
package gatherbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/internal/gatherhook"
	"github.com/gnnloader/gnnloader/pinned"
)

// hooks are the CUDA backend's steps one at a time (set by gather's init,
// which runs before this package's).
var hooks = gatherhook.Get[*gather.CUDA, *gather.CUDAOptions, *gather.SweepPlan, gather.SweepPart]()

// Config describes one gather benchmark over one table.
type Config struct {
	// BatchRows is the number of distinct rows one sampled batch gathers
	// (about 700 K for [15,10,5] fan-outs and 1024 seeds on papers100M).
	BatchRows int
	// SweepBatches is how many batches one sweep covers (0: no sweep).
	SweepBatches int
	// SweepWidths adds sweeps over these numbers of batches (2 to
	// gather.MaxSweepParts), on the default backend only.
	SweepWidths []int
	// Reps is the number of timed repetitions (the median is reported); 0 means 11.
	Reps int
	// Caps adds runs of the sorted kernel and the sweep capped to these
	// numbers of SMs (gather.CUDAOptions.MaxSMs: -1 is every SM at full
	// occupancy); the default runs use gather.DefaultSMs.
	Caps []int
	// Variants adds runs with the any-size kernels forced (for rows that are
	// a multiple of 16 but not of 128), reading only the chunks a row
	// overlaps and reading whole 128-byte lines.
	Variants bool
	// CPUWorkers for the CPU gather baseline; 0 means GOMAXPROCS.
	CPUWorkers int
	// Seed for the sampled batches.
	Seed uint64
}

// Result is one line of the benchmark. Delivered bytes are feature
// bytes written to slots (a row shared by k batches of a sweep counts k
// times); read bytes are those fetched from the table (such a row once).
type Result struct {
	Name          string
	RowsRead      int64
	RowsDelivered int64
	RowBytes      int
	Time          time.Duration // median
	GBps          float64       // delivered bytes / Time, 1e9 bytes a second
	ReadGBps      float64       // read bytes / Time
	RowsPerSec    float64       // delivered rows a second
	PercentMemcpy float64       // GBps / the memcpy ceiling of the same run
	Note          string
}

// Run measures, in one run on one table: the pinned host-to-device
// memcpy bandwidth (the ceiling), a CPU gather into pinned memory plus its
// copy, the zero-copy kernel in sampled order (naive), the sorted kernel on
// one batch (optionally capped to MaxSMs), and a sorted sweep over
// SweepBatches batches. GPU figures are timed with CUDA events over back-to-
// back repetitions (index upload included, plan building on the CPU not);
// each is the median after a warm-up. It prints a table to w.
func Run(ctx context.Context, c *cudaext.Context, st *pinned.Store, cfg Config, w io.Writer) ([]Result, error) {
	if cfg.Reps <= 0 {
		cfg.Reps = 11
	}
	rb := int64(st.RowBytes)
	r := rand.New(rand.NewPCG(cfg.Seed, 0x9e37))
	nb := max(cfg.SweepBatches, 1)
	for _, w := range cfg.SweepWidths {
		if w < 2 || w > gather.MaxSweepParts {
			return nil, fmt.Errorf("gather: sweep width %d not in [2, %d]", w, gather.MaxSweepParts)
		}
		nb = max(nb, w)
	}
	batches := make([][]int64, nb)
	orders := make([][]int32, nb)
	for k := range batches {
		batches[k] = SampleBatch(r, cfg.BatchRows, st.NumRows)
		orders[k] = gather.SortOrder(batches[k])
	}
	n := int64(cfg.BatchRows)
	var out []Result
	var ceiling float64
	add := func(res Result) {
		secs := res.Time.Seconds()
		res.RowBytes = st.RowBytes
		res.GBps = float64(res.RowsDelivered*rb) / secs / 1e9
		res.ReadGBps = float64(res.RowsRead*rb) / secs / 1e9
		res.RowsPerSec = float64(res.RowsDelivered) / secs
		if ceiling > 0 {
			res.PercentMemcpy = 100 * res.GBps / ceiling
		}
		out = append(out, res)
	}

	g, err := gather.NewCUDA(c, st, nil)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	s := g.Stream()
	err = c.Do(func() error {
		// Destinations: one slot per sweep batch.
		slots := make([]cudaext.DevicePtr, nb)
		for k := range slots {
			p, err := cudaext.MemAlloc(n * rb)
			if err != nil {
				return err
			}
			defer cudaext.MemFree(p)
			slots[k] = p
		}
		evs := make([]*cudaext.Event, cfg.Reps+2)
		for i := range evs {
			e, err := cudaext.NewEvent(cudaext.EventDefault)
			if err != nil {
				return err
			}
			defer e.Destroy()
			evs[i] = e
		}
		timed := func(op func() error) (time.Duration, error) { return timeOps(s, evs, cfg.Reps, op) }
		unlock := hooks.Lock(g) // the bench drives g's steps directly
		defer unlock()

		// 1. The ceiling: pinned memcpy of up to 1 GiB from the table.
		cp := min(int64(len(st.Rows)), 1<<30, n*rb)
		d, err := timed(func() error {
			return cudaext.MemcpyHtoDAsync(slots[0], unsafe.Pointer(&st.Rows[0]), cp, s)
		})
		if err != nil {
			return err
		}
		ceiling = float64(cp) / d.Seconds() / 1e9
		add(Result{Name: fmt.Sprintf("memcpy pinned H2D %d MiB (ceiling)", cp>>20), RowsRead: cp / rb, RowsDelivered: cp / rb, Time: d})

		// 2. CPU gather into pinned staging + H2D copy (wall clock).
		stage, err := pinned.Alloc(n * rb)
		if err != nil {
			return err
		}
		defer pinned.Free(stage)
		if err := cudaext.HostRegister(stage, cudaext.HostRegisterPortable); err != nil {
			return err
		}
		defer cudaext.HostUnregister(stage)
		cpu := &gather.CPU{Workers: cfg.CPUWorkers}
		tab := gather.TableOf(st)
		var ds []time.Duration
		for i := 0; i <= min(cfg.Reps, 5); i++ {
			t0 := time.Now()
			if err := cpu.Gather(stage, tab, batches[0], orders[0]); err != nil {
				return err
			}
			if err := cudaext.MemcpyHtoDAsync(slots[0], unsafe.Pointer(&stage[0]), n*rb, s); err != nil {
				return err
			}
			if err := s.Synchronize(); err != nil {
				return err
			}
			if i > 0 {
				ds = append(ds, time.Since(t0))
			}
		}
		workers := cfg.CPUWorkers
		if workers <= 0 {
			workers = runtime.GOMAXPROCS(0)
		}
		add(Result{Name: fmt.Sprintf("CPU gather (%d goroutines) + H2D copy", workers), RowsRead: n, RowsDelivered: n, Time: median(ds), Note: "wall clock"})

		// 3. Naive zero-copy kernel in sampled order.
		dst0 := slots[0]
		if d, err = timed(func() error {
			launch, err := hooks.StageGather(g, batches[0], nil)
			if err != nil {
				return err
			}
			return launch(dst0)
		}); err != nil {
			return err
		}
		add(Result{Name: "naive kernel, sampled order, 1 batch", RowsRead: n, RowsDelivered: n, Time: d, Note: "incl. index upload"})

		// 4, 5. Sorted kernel and sweep, on the default backend and the variants.
		var pl *gather.SweepPlan
		parts := make([]gather.SweepPart, nb)
		for k := range parts {
			parts[k] = gather.SweepPart{Dst: gather.Dest{Device: slots[k]}, Nid: batches[k], Order: orders[k]}
		}
		if cfg.SweepBatches > 1 {
			if pl, err = gather.PlanSweep(parts[:cfg.SweepBatches], st.NumRows); err != nil {
				return err
			}
		}
		type variant struct {
			label string
			o     *gather.CUDAOptions
		}
		vs := []variant{{"", nil}}
		for _, c := range cfg.Caps {
			label := fmt.Sprintf(", %d SMs", c)
			if c < 0 {
				label = ", all SMs x 256 thr"
			}
			vs = append(vs, variant{label, &gather.CUDAOptions{MaxSMs: c}})
		}
		if cfg.Variants {
			anySize, wholeLines := &gather.CUDAOptions{}, &gather.CUDAOptions{}
			hooks.AnySize(anySize, false)
			hooks.AnySize(wholeLines, true)
			vs = append(vs, variant{", any-size kernel", anySize}, variant{", any-size kernel, whole lines", wholeLines})
		}
		for _, w := range cfg.SweepWidths {
			wp, err := gather.PlanSweep(parts[:w], st.NumRows)
			if err != nil {
				return err
			}
			if err := measureSweep(g, evs, cfg.Reps, "", parts[:w], wp, add); err != nil {
				return err
			}
		}
		for _, v := range vs {
			gv := g
			if v.o != nil {
				if gv, err = gather.NewCUDA(c, st, v.o); err != nil {
					return err
				}
			}
			err := measure(gv, evs, cfg.Reps, v.label, dst0, batches[0], orders[0], parts[:max(cfg.SweepBatches, 1)], pl, n, add)
			if gv != g {
				err = errors.Join(err, gv.Close())
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	Print(w, out)
	return out, nil
}

// Print writes results as a table.
func Print(w io.Writer, res []Result) {
	fmt.Fprintf(w, "%-44s %6s %10s %10s %9s %10s %9s %8s %9s  %s\n", "what", "row B", "rows read", "rows dlv", "ms", "Mrows/s", "GB/s dlv", "% memcpy", "GB/s read", "note")
	for _, r := range res {
		fmt.Fprintf(w, "%-44s %6d %10d %10d %9.3f %10.1f %9.1f %8.1f %9.1f  %s\n", r.Name, r.RowBytes, r.RowsRead, r.RowsDelivered,
			float64(r.Time.Microseconds())/1000, r.RowsPerSec/1e6, r.GBps, r.PercentMemcpy, r.ReadGBps, r.Note)
	}
}
