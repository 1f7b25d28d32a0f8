package serve

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
)

// gpuServer serves a small generated dataset with the GPU path on.
func gpuServer(t *testing.T, cfg Config, g GPUConfig) (*Server, *Source) {
	t.Helper()
	return gpuServerOf(t, "synthetic:cora:0.5:3", cfg, g)
}

// gpuServerOf serves spec with the GPU path on.
func gpuServerOf(t *testing.T, spec string, cfg Config, g GPUConfig) (*Server, *Source) {
	t.Helper()
	src, err := OpenSourcePinned(spec, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveSource(t, src, cfg, func(srv *Server) {
		if err := srv.EnableGPU(g); err != nil {
			t.Fatal(err)
		}
	})
	return srv, src
}

// cudaRingOf finds the GPU ring of the session that opened device dev (in
// this process the test reads the slots directly rather than through IPC).
func cudaRingOf(t *testing.T, srv *Server, rank uint32) *cudaRing {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for ss := range srv.sessions {
		if ss.req != nil && ss.req.rank() == int(rank) {
			if r, ok := ss.ring.(*cudaRing); ok {
				return r
			}
		}
	}
	t.Fatalf("no CUDA session of rank %d", rank)
	return nil
}

// copySlot copies a GPU slot, once its ready event has completed, into the
// client's host image of the ring (so checkBatch and region work on it).
func copySlot(t *testing.T, c *client, r *cudaRing, slot uint32) {
	t.Helper()
	if c.mem == nil {
		c.mem = make([]byte, int(c.opened.Slots)*int(c.opened.SlotBytes))
	}
	sb := int(c.opened.SlotBytes)
	err := r.Context().Do(func() error {
		if err := r.ReadyEvent(int(slot)).Synchronize(); err != nil {
			return err
		}
		s, err := cudaext.NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		return cudaext.CopyToHost(c.mem[int(slot)*sb:(int(slot)+1)*sb], r.Slot(int(slot)), s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readyWord reads slot's ready word (after copySlot has waited for the
// slot's ready event).
func readyWord(t *testing.T, r *cudaRing, slot uint32) uint32 {
	t.Helper()
	b := make([]byte, 4)
	err := r.Context().Do(func() error {
		s, err := cudaext.NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		return cudaext.CopyToHost(b, r.Slot(0)+cudaext.DevicePtr(r.ReadyWords()+4*int64(slot)), s)
	})
	if err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b)
}

// TestCUDASlotsMatchCPU: a trainer on cuda:0 and one on the CPU path, same
// request and seed, get the same batches byte for byte, and the GPU ones are
// checked against the dataset like the CPU ones.
func TestCUDASlotsMatchCPU(t *testing.T) {
	cudatest.Devices(t)
	srv, n := compareWithCPU(t, "synthetic:cora:0.5:3", 3, GPUConfig{}, false)
	if swept := srv.Stats().SweptBatches.Load(); swept != 0 {
		t.Errorf("%d batches swept with 3 slots (sweeps need 4)", swept)
	}
	t.Logf("%d batches identical on both paths", n)
}

// TestCUDASweepsMatchCPU: the same with 6 slots and the GPU reported busy,
// so the daemon fills 3 batches at a time with one sorted sweep.
func TestCUDASweepsMatchCPU(t *testing.T) {
	cudatest.Devices(t)
	srv, n := compareWithCPU(t, "synthetic:cora:0.5:3", 6, GPUConfig{SweepBatches: 3}, true)
	swept := srv.Stats().SweptBatches.Load()
	if swept < int64(n)/2 {
		t.Errorf("%d of %d batches filled in sweeps", swept, n)
	}
	t.Logf("%d batches identical on both paths, %d of them filled in sweeps", n, swept)
}

// TestCUDAWaysMatchCPU: every way of filling GPU slots gives the CPU path's
// batches byte for byte: sampled on the GPU (sweeps planned there), sampled
// on the CPU with sweeps planned on the GPU, and both on the CPU.
func TestCUDAWaysMatchCPU(t *testing.T) {
	cudatest.Devices(t)
	for _, g := range []GPUConfig{
		{Sampling: "gpu", SweepPlan: "gpu", SweepBatches: 3},
		{Sampling: "cpu", SweepPlan: "gpu", SweepBatches: 3},
		{Sampling: "cpu", SweepPlan: "cpu", SweepBatches: 3},
		{Sampling: "gpu", SweepPlan: "gpu", SweepBatches: 3, Cache: 1 << 20},
		{Sampling: "cpu", SweepPlan: "gpu", SweepBatches: 3, Cache: 1 << 20, CachePresample: -1},
		// A fill's batches sampled together: 2 lanes (a fill of 3 in two
		// calls) and 4 (a call of 3 with a lane idle).
		{Sampling: "gpu", SweepPlan: "gpu", SweepBatches: 3, SampleLanes: 2},
		{Sampling: "gpu", SweepPlan: "gpu", SweepBatches: 3, SampleLanes: 4},
	} {
		name := g.Sampling + "_sampling_" + g.SweepPlan + "_plan"
		if g.Cache > 0 {
			name += fmt.Sprintf("_cache%d", g.CachePresample)
		}
		if g.SampleLanes > 0 {
			name += fmt.Sprintf("_lanes%d", g.SampleLanes)
		}
		t.Run(name, func(t *testing.T) {
			srv, n := compareWithCPU(t, "synthetic:cora:0.5:3", 6, g, true)
			t.Logf("%d batches identical on both paths, %d filled in sweeps", n, srv.Stats().SweptBatches.Load())
			if g.SweepPlan != "gpu" {
				return
			}
			var st gather.PlanStats
			srv.mu.Lock()
			for ss := range srv.sessions {
				if r, ok := ss.ring.(*cudaRing); ok {
					st, _ = r.g.PlanStats()
				}
			}
			srv.mu.Unlock()
			t.Logf("rows looked up %d, cache hits %d, rows read over PCIe %d", st.Lookups, st.Hits, st.RowsRead)
			if st.Lookups == 0 || st.RowsRead == 0 || (g.Cache > 0) != (st.Hits > 0) || st.Hits+st.RowsRead > st.Lookups {
				t.Errorf("sweep counters %+v with cache %d", st, g.Cache)
			}
		})
	}
}

// TestCUDAFillTimes: with GPUConfig.Timing the GPU-sampled fills' times add
// up, and they are sane: sampling, planning and reading took time, no phase
// or idle time is negative, and together they fit in the test's wall time.
func TestCUDAFillTimes(t *testing.T) {
	cudatest.Devices(t)
	start := time.Now()
	srv, n := compareWithCPU(t, "synthetic:cora:0.5:3", 6, GPUConfig{Sampling: "gpu", SweepPlan: "gpu", SweepBatches: 3, Timing: true}, true)
	wall := time.Since(start)
	st, ok := srv.SweepStats()
	if !ok {
		t.Fatal("no sweep stats on the GPU path")
	}
	t.Logf("%d batches; %d sweeps timed: plan %v, read %v, assemble %v; sampling %v, waiting for it %v, for the host %v (wall %v)",
		n, st.Timed, st.PlanTime, st.ReadTime, st.AssembleTime, st.SampleTime, st.SampleWait, st.HostWait, wall)
	if st.Timed == 0 || st.PlanTime <= 0 || st.ReadTime <= 0 || st.SampleTime <= 0 {
		t.Errorf("fill times %+v: sweeps timed, sampling, planning and reading must have taken time", st)
	}
	for _, d := range []time.Duration{st.AssembleTime, st.SampleWait, st.HostWait} {
		if d < 0 {
			t.Errorf("fill times %+v: a negative time", st)
		}
	}
	if busy := st.PlanTime + st.ReadTime + st.AssembleTime + st.SampleWait + st.HostWait; busy > wall {
		t.Errorf("the fill stream's times add up to %v, more than the test's %v", busy, wall)
	}
	// The same times, exported by phase (--gpu-timing): counters, so
	// between the stats read before and after them.
	phases := fillSeconds(t, srv)
	after, _ := srv.SweepStats()
	byPhase := func(st gather.PlanStats) map[string]time.Duration {
		return map[string]time.Duration{"plan": st.PlanTime, "read": st.ReadTime, "assemble": st.AssembleTime,
			"sample": st.SampleTime, "sample_wait": st.SampleWait, "host_wait": st.HostWait}
	}
	lo, hi := byPhase(st), byPhase(after)
	for ph := range lo {
		got, ok := phases[ph]
		if !ok || got < lo[ph].Seconds()-1e-9 || got > hi[ph].Seconds()+1e-9 {
			t.Errorf("gnnloader_gpu_fill_seconds_total{phase=%q} = %v (exported %v), want %v..%v", ph, got, ok, lo[ph].Seconds(), hi[ph].Seconds())
		}
	}
	if len(phases) != len(lo) {
		t.Errorf("fill phases exported: %v, want %d of them", phases, len(lo))
	}
}

// fillSeconds is gnnloader_gpu_fill_seconds_total by phase, summed over GPUs.
func fillSeconds(t *testing.T, srv *Server) map[string]float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "gnnloader_gpu_fill_seconds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// compareWithCPU serves spec and runs two epochs for a CPU trainer and a
// cuda:0 trainer with the given slots, comparing every batch; busy makes the
// GPU ring report its stream busy, so fills grow into sweeps.
func compareWithCPU(t *testing.T, spec string, slots uint32, g GPUConfig, busy bool) (*Server, int) {
	srv, src := gpuServerOf(t, spec, Config{}, g)
	req := openReq()
	req.Slots = slots
	return srv, compareRequest(t, srv, src, req, busy, true)
}

// compareRequest runs two epochs of req for a CPU trainer and a cuda:0
// trainer and compares every region of every batch byte for byte; node
// batches are also checked against the dataset.
func compareRequest(t *testing.T, srv *Server, src *Source, req ipc.Open, busy, nodeBatches bool) int {
	t.Helper()
	cpu, gpu := dial(t, srv), dial(t, srv)
	req.Device = "cpu"
	cpu.handshake(req)
	req.Device, req.Rank, req.WorldSize = "cuda:0", 0, 1
	// A different rank would get other seeds: use the same rank, told apart
	// by the job name.
	req.Job = "gpu"
	o := gpu.handshake(req)
	if o.Memory != ipc.MemoryCUDA || o.CUDADevice != 0 || len(o.MemHandle) != ipc.HandleSize || len(o.Events) != int(o.Slots) {
		t.Fatalf("opened: memory %q device %d, %d-byte handle, %d event pairs", o.Memory, o.CUDADevice, len(o.MemHandle), len(o.Events))
	}
	if len(o.Regions) != len(cpu.opened.Regions) {
		t.Fatalf("GPU regions %v, CPU regions %v", o.Regions, cpu.opened.Regions)
	}
	if o.ReadyWords < uint64(o.Slots)*o.SlotBytes || cpu.opened.ReadyWords != 0 {
		t.Fatalf("ready words at %d on the GPU (%d slots of %d bytes), %d on the CPU", o.ReadyWords, o.Slots, o.SlotBytes, cpu.opened.ReadyWords)
	}
	var last uint32 // the ready value of the GPU's previous batch: values rise fill by fill over the connection
	var ring *cudaRing
	srv.mu.Lock()
	for ss := range srv.sessions {
		if ss.req != nil && ss.req.job == "gpu" {
			ring = ss.ring.(*cudaRing)
		}
	}
	srv.mu.Unlock()
	if o.ReadyWords != uint64(ring.ReadyWords()) {
		t.Fatalf("Opened says ready words at %d, the ring has them at %d", o.ReadyWords, ring.ReadyWords())
	}
	ring.busy.Store(busy)
	batches := 0
	for epoch := uint32(0); epoch < 2; epoch++ {
		cpu.send(&ipc.StartEpoch{Epoch: epoch})
		gpu.send(&ipc.StartEpoch{Epoch: epoch})
		for {
			mc, mg := cpu.recv(), gpu.recv()
			if _, end := mc.(*ipc.EpochEnd); end {
				if _, end := mg.(*ipc.EpochEnd); !end {
					t.Fatalf("cpu epoch ended, gpu sent %#v", mg)
				}
				break
			}
			bc, okc := mc.(*ipc.BatchReady)
			bg, okg := mg.(*ipc.BatchReady)
			if !okc || !okg {
				t.Fatalf("expected a batch from both: cpu sent %#v, gpu sent %#v", mc, mg)
			}
			if bc.Index != bg.Index || !slices.Equal(bc.Counts, bg.Counts) || !slices.Equal(bc.Scalars, bg.Scalars) {
				t.Fatalf("batch %d: cpu %+v gpu %+v", bc.Index, bc, bg)
			}
			if bg.ReadyValue < last || bg.ReadyValue > uint32(batches)+1 || bc.ReadyValue != 0 {
				t.Fatalf("batch %d (the connection's %d): ready value %d after %d, want it between them (one fill a batch at most; CPU: %d, want 0)",
					bg.Index, batches, bg.ReadyValue, last, bc.ReadyValue)
			}
			last = bg.ReadyValue
			copySlot(t, gpu, ring, bg.Slot)
			if w := readyWord(t, ring, bg.Slot); w != bg.ReadyValue {
				t.Fatalf("batch %d: slot %d's ready word is %d once its ready event is done, BatchReady says %d", bg.Index, bg.Slot, w, bg.ReadyValue)
			}
			if nodeBatches {
				checkBatch(t, gpu, src, bg)
			}
			for _, r := range cpu.opened.Regions {
				n := regionDataBytes(cpu.opened, bc, r)
				if !bytes.Equal(cpu.region(bc.Slot, r.Name, n), gpu.region(bg.Slot, r.Name, n)) {
					t.Fatalf("epoch %d batch %d: %s differs between the CPU and GPU paths", epoch, bc.Index, r.Name)
				}
			}
			cpu.send(&ipc.Release{Slot: bc.Slot, Epoch: bc.Epoch, Index: bc.Index})
			gpu.send(&ipc.Release{Slot: bg.Slot, Epoch: bg.Epoch, Index: bg.Index})
			batches++
		}
	}
	return batches
}

// regionDataBytes is the bytes of region r that batch b fills.
func regionDataBytes(o *ipc.Opened, b *ipc.BatchReady, r ipc.Region) int {
	n, _ := o.Count(b, r.Name)
	size := batch.ElemSize(r.DType)
	for i, d := range r.Shape {
		if i == int(r.CountAxis) {
			d = uint64(n)
		}
		size *= int(d)
	}
	return size
}

// TestCUDABadRequests: a device that does not exist, one the daemon was not
// told to use, slots over the GPU slot memory: each gets an Error, and a
// trainer already on the GPU carries on.
func TestCUDABadRequests(t *testing.T) {
	n := cudatest.Devices(t)
	srv, src := gpuServer(t, Config{}, GPUConfig{Devices: []int{0}, SlotMemory: 64 << 20})
	good := dial(t, srv)
	req := openReq()
	req.Device = "cuda:0"
	good.handshake(req)
	for _, tc := range []struct {
		device string
		slots  uint32
		batch  uint32
		code   ipc.Code
		text   string
	}{
		{"cuda:7", 0, 32, ipc.CodeBadRequest, "does not exist"},
		{"cuda:" + strconv.Itoa(n), 0, 32, ipc.CodeBadRequest, "does not exist"},
		{"cuda:1", 0, 32, ipc.CodeBadRequest, ""}, // not served (or absent on a 1-GPU host)
		{"cuda:0", 16, 1024, ipc.CodeBusy, "do not fit"},
	} {
		c := dial(t, srv)
		c.hello()
		r := openReq()
		r.Device, r.Slots, r.BatchSize = tc.device, tc.slots, tc.batch
		c.send(&r)
		c.expectError(tc.code, tc.text)
	}
	waitFor(t, func() bool { return srv.Trainers() == 1 }) // the refused sessions end after their Error
	checkCUDAEpoch(t, good, srv, src)
}

// checkCUDAEpoch runs epoch 0 of the GPU trainer c (rank 0 of srv),
// checking every batch against src from a copy of its slot.
func checkCUDAEpoch(t *testing.T, c *client, srv *Server, src *Source) {
	t.Helper()
	ring := cudaRingOf(t, srv, 0)
	c.send(&ipc.StartEpoch{Epoch: 0})
	for done := false; !done; {
		switch m := c.recv().(type) {
		case *ipc.BatchReady:
			copySlot(t, c, ring, m.Slot)
			checkBatch(t, c, src, m)
			c.send(&ipc.Release{Slot: m.Slot, Epoch: m.Epoch, Index: m.Index})
		case *ipc.EpochEnd:
			done = true
		}
	}
}

// The GPU path exports slot memory per GPU, the pinned table and NVML's
// counters (docs/operations.md).
func TestGPUMetrics(t *testing.T) {
	cudatest.Devices(t)
	srv, _ := gpuServer(t, Config{}, GPUConfig{})
	c := dial(t, srv)
	o := openReq()
	o.Device = "cuda:0"
	c.send(&ipc.Hello{Version: ipc.Version})
	c.recv()
	c.send(&o)
	if _, ok := c.recv().(*ipc.Opened); !ok {
		t.Fatal("no Opened")
	}
	got := metricSums(t, srv)
	for _, name := range []string{"gnnloader_gpu_slot_bytes", "gnnloader_pinned_bytes", "gnnloader_gpu_memory_used_bytes"} {
		if got[name] <= 0 {
			t.Errorf("%s = %v, want > 0 (metrics: %v)", name, got[name], got)
		}
	}
	if _, ok := got["gnnloader_gpu_pcie_rx_bytes_per_second"]; !ok {
		t.Error("no PCIe throughput metric")
	}
	if _, ok := got["gnnloader_gpu_utilization_ratio"]; !ok {
		t.Error("no GPU utilisation metric")
	}
	if ph := fillSeconds(t, srv); len(ph) != 0 {
		t.Errorf("fill times exported without GPUConfig.Timing: %v", ph)
	}
}

// metricSums gathers srv's metrics: per name, the sum of its gauges' and
// counters' values over their labels.
func metricSums(t *testing.T, srv *Server) map[string]float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil {
				got[mf.GetName()] += g.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				got[mf.GetName()] += c.GetValue()
			}
		}
	}
	return got
}
