package main

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/internal/cputime"
	"github.com/gnnloader/gnnloader/internal/stages"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/serve"
)

// serveResult is what one run of the serve benchmark measured.
type serveResult struct {
	batches, nodes int64
	wall, cpu      time.Duration
	memcpy         float64          // pinned H2D bytes/s, the best of before and after the run
	sweeps         gather.PlanStats // over the timed part (GPU path)
	haveSweeps     bool
	fills, served  int64 // fills and batches announced over the timed part
	profile        bytes.Buffer
}

// measure runs the trainers against srv (after a warm-up batch that builds
// a GPU cache, if any) and times them.
func (r serveRun) measure(srv *serve.Server) (*serveResult, error) {
	res := &serveResult{}
	if r.gpu.Cache > 0 {
		// The cache is built at the first trainer's Open (pre-sampling its
		// batches): before the clock starts.
		if _, _, err := consume(r.cfg.Socket, r.req, 1, 1); err != nil {
			return nil, fmt.Errorf("warming the GPU cache: %w", err)
		}
	}
	if r.dev >= 0 {
		// The PCIe ceiling on an idle GPU, before the run (and after it:
		// the larger is kept).
		res.memcpy, _ = srv.MemcpyRate(r.dev)
	}
	st0, _ := srv.SweepStats()
	fills0, served0 := srv.Stats().Fills.Load(), srv.Stats().BatchesServed.Load()
	if r.budget {
		if err := pprof.StartCPUProfile(&res.profile); err != nil {
			return nil, fmt.Errorf("--budget: %w (is a CPU profile already running in this process?)", err)
		}
	}
	cpu0 := cputime.Process()
	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for rank := 0; rank < r.trainers; rank++ {
		wg.Go(func() {
			o := r.req
			o.Rank = uint32(rank)
			n, nn, err := consume(r.cfg.Socket, o, r.epochs, r.maxBatches)
			mu.Lock()
			defer mu.Unlock()
			res.batches += n
			res.nodes += nn
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.fills, res.served = srv.Stats().Fills.Load()-fills0, srv.Stats().BatchesServed.Load()-served0
	res.cpu = cputime.Process() - cpu0
	if r.budget {
		pprof.StopCPUProfile()
	}
	if r.dev >= 0 {
		if after, err := srv.MemcpyRate(r.dev); err == nil {
			res.memcpy = max(res.memcpy, after)
		}
	}
	if st, ok := srv.SweepStats(); ok {
		res.haveSweeps = true
		res.sweeps = st.Sub(st0)
	}
	return res, firstErr
}

// report prints a run's figures.
func (res *serveResult) report(w io.Writer, r serveRun, srv *serve.Server, src *serve.Source, dev int) error {
	d := src.Data
	total := max(res.batches, 1)
	el := res.wall
	st := srv.Stats()
	per := func(ns int64) string {
		return (time.Duration(ns) / time.Duration(total)).Round(time.Microsecond).String()
	}
	name := r.name
	if name == "" {
		name = "run"
	}
	fmt.Fprintf(w, "== %s: %d trainer(s), slots %d, sampling %s, sweep plan %s, gpu cache %s\n", name, r.trainers, r.slots,
		orDefault(r.gpu.Sampling, "auto"), orDefault(r.gpu.SweepPlan, "gpu"), r.cache)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "batches\tseconds\tbatches/s\tms/batch\tnodes/batch\tfeature GB/s\tsample/batch\tgather/batch\tslot wait/batch\t")
	fmt.Fprintf(tw, "%d\t%.2f\t%.1f\t%.2f\t%.0f\t%.2f\t%s\t%s\t%s\t\n", res.batches, el.Seconds(), float64(res.batches)/el.Seconds(),
		1e3*el.Seconds()/float64(total), float64(res.nodes)/float64(total), float64(res.nodes)*float64(d.RowBytes())/el.Seconds()/1e9,
		per(st.SampleNanos.Load()), per(st.GatherNanos.Load()), per(st.WaitNanos.Load()))
	tw.Flush()
	if res.fills > 0 && dev >= 0 {
		fmt.Fprintf(w, "fills: %d, %.2f batches a fill\n", res.fills, float64(res.served)/float64(res.fills))
	}
	if res.haveSweeps && res.sweeps.Lookups > 0 {
		s, rb := res.sweeps, float64(d.RowBytes())
		fmt.Fprintf(w, "GPU sweeps: %d rows asked for, %.1f%% from the cache (%.2f GB), %.2f GB read over PCIe (%.2f GB/s); delivered %.2f GB/s\n",
			s.Lookups, 100*float64(s.Hits)/float64(s.Lookups), float64(s.Hits)*rb/1e9, float64(s.RowsRead)*rb/1e9,
			float64(s.RowsRead)*rb/el.Seconds()/1e9, float64(s.Lookups)*rb/el.Seconds()/1e9)
	}
	if s := res.sweeps; s.Timed > 0 {
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(total) }
		fmt.Fprintf(w, "GPU time per batch: planning %.2f ms, reading over PCIe %.2f ms, assembling %.2f ms (one stream); sampling %.2f ms (its own stream)\n",
			ms(s.PlanTime), ms(s.ReadTime), ms(s.AssembleTime), ms(s.SampleTime))
		if s.SampleWait > 0 || s.HostWait > 0 {
			fmt.Fprintf(w, "fill stream idle per batch: %.2f ms waiting for the batches' sampling, %.2f ms with the next fill not yet issued by the host\n",
				ms(s.SampleWait), ms(s.HostWait))
		}
	}
	if rate := res.memcpy; rate > 0 && res.batches > 0 {
		bound := float64(res.nodes) * float64(d.RowBytes()) / rate / float64(total) // seconds a batch at the memcpy rate
		got := el.Seconds() / float64(total)
		fmt.Fprintf(w, "PCIe bound: pinned memcpy %.1f GB/s (the better of before and after the run), so %.2f ms a batch for its feature bytes; this run %.2f ms a batch = %.1f%% of the bound\n",
			rate/1e9, 1e3*bound, 1e3*got, 100*bound/got)
	}
	fmt.Fprintf(w, "CPU: %.1f core-ms per batch, %.1f of %d cores busy on average\n",
		float64(res.cpu)/1e6/float64(total), res.cpu.Seconds()/el.Seconds(), runtime.NumCPU())
	if !r.budget {
		return nil
	}
	b, sampled, err := stages.Attribute(&res.profile)
	if err != nil {
		return fmt.Errorf("reading the profile: %w", err)
	}
	fmt.Fprintln(w, "CPU budget per batch, by stage (from the daemon's CPU profile):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tcore-ms/batch\tshare\t")
	for _, name := range b.Stages() {
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f%%\t\n", name, float64(b[name])/1e6/float64(total), 100*float64(b[name])/float64(max(sampled, 1)))
	}
	fmt.Fprintf(tw, "all (profiled)\t%.2f\t100%%\t\n", float64(sampled)/1e6/float64(total))
	tw.Flush()
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
