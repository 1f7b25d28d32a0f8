package gatherbench

// Timing the kernels and sweeps with CUDA events: the median of back-to-back
// repetitions.

import (
	"fmt"
	"slices"
	"time"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
)

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// measure times, on g: the sorted kernel on one batch, with its index upload
// and alone, and the sweep the same two ways. Called with the context
// current; it drives g's steps directly, so nothing else may use g meanwhile.
func measure(g *gather.CUDA, evs []*cudaext.Event, reps int, label string, dst0 cudaext.DevicePtr, nid []int64, order []int32, parts []gather.SweepPart, pl *gather.SweepPlan, n int64, add func(Result)) error {
	s := g.Stream()
	d, err := timeOps(s, evs, reps, func() error {
		launch, err := hooks.StageGather(g, nid, order)
		if err != nil {
			return err
		}
		return launch(dst0)
	})
	if err != nil {
		return err
	}
	add(Result{Name: "sorted kernel, 1 batch" + label, RowsRead: n, RowsDelivered: n, Time: d, Note: "incl. index upload"})
	launch, err := hooks.StageGather(g, nid, order)
	if err != nil {
		return err
	}
	if d, err = timeOps(s, evs, reps, func() error { return launch(dst0) }); err != nil {
		return err
	}
	add(Result{Name: "sorted kernel, 1 batch" + label, RowsRead: n, RowsDelivered: n, Time: d, Note: "kernel only"})
	if pl == nil {
		return nil
	}
	return measureSweep(g, evs, reps, label, parts, pl, add)
}

// measureSweep times the sweep pl over parts on g, with its index upload and
// alone. Called with the context current; nothing else may use g meanwhile.
func measureSweep(g *gather.CUDA, evs []*cudaext.Event, reps int, label string, parts []gather.SweepPart, pl *gather.SweepPlan, add func(Result)) error {
	s := g.Stream()
	note := fmt.Sprintf("%d rows shared", pl.Delivered()-pl.Unique())
	d, err := timeOps(s, evs, reps, func() error {
		launch, err := hooks.StageSweep(g, pl, parts)
		if err != nil {
			return err
		}
		return launch()
	})
	if err != nil {
		return err
	}
	name := fmt.Sprintf("sorted sweep, %d batches%s", len(parts), label)
	add(Result{Name: name, RowsRead: pl.Unique(), RowsDelivered: pl.Delivered(), Time: d, Note: "incl. index upload; " + note})
	launch, err := hooks.StageSweep(g, pl, parts)
	if err != nil {
		return err
	}
	if d, err = timeOps(s, evs, reps, launch); err != nil {
		return err
	}
	add(Result{Name: name, RowsRead: pl.Unique(), RowsDelivered: pl.Delivered(), Time: d, Note: "kernel only"})
	return nil
}

// timeOps runs op back to back on s: two warm-ups, then reps runs with an
// event after each; it returns the median interval between events. The GPU
// stays busy across the intervals as long as op's CPU part is shorter than
// its GPU part, so each interval is one op's GPU time.
func timeOps(s *cudaext.Stream, evs []*cudaext.Event, reps int, op func() error) (time.Duration, error) {
	for range 2 {
		if err := op(); err != nil {
			return 0, err
		}
	}
	if err := evs[0].Record(s); err != nil {
		return 0, err
	}
	for i := 1; i <= reps; i++ {
		if err := op(); err != nil {
			return 0, err
		}
		if err := evs[i].Record(s); err != nil {
			return 0, err
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	ds := make([]time.Duration, reps)
	for i := range ds {
		d, err := cudaext.Elapsed(evs[i], evs[i+1])
		if err != nil {
			return 0, err
		}
		ds[i] = d
	}
	return median(ds), nil
}
