package serve

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
)

// gpuCollector exports the GPU path's memory and NVML's counters per device
// at scrape time (docs/operations.md).
type gpuCollector struct {
	b   *gpuBackend
	mon *cudaext.Monitor // nil when NVML is unavailable

	slotBytes, util, rx, tx, memUsed *prometheus.Desc
	lookups, hitBytes, readBytes     *prometheus.Desc
	cacheBytes, fillSeconds          *prometheus.Desc
}

func newGPUCollector(b *gpuBackend, mon *cudaext.Monitor) *gpuCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"gpu"}, nil)
	}
	return &gpuCollector{b: b, mon: mon,
		slotBytes: d("gnnloader_gpu_slot_bytes", "Bytes of trainers' slots and their working memory (GPU sampling, sweep planning) allocated by loaderd on the GPU: what --gpu-slot-memory caps."),
		util:      d("gnnloader_gpu_utilization_ratio", "Share of the last NVML sample period a kernel ran on the GPU (0..1)."),
		rx:        d("gnnloader_gpu_pcie_rx_bytes_per_second", "PCIe host-to-device throughput NVML measured (all processes)."),
		tx:        d("gnnloader_gpu_pcie_tx_bytes_per_second", "PCIe device-to-host throughput NVML measured (all processes)."),
		memUsed:   d("gnnloader_gpu_memory_used_bytes", "GPU memory in use by all processes, from NVML."),
		lookups:   d("gnnloader_gpu_rows_looked_up_total", "Feature rows the GPU sweeps were asked for (a row two batches need counts twice)."),
		hitBytes:  d("gnnloader_gpu_cache_hit_bytes_total", "Feature bytes the GPU sweeps copied from the device's hot-row cache."),
		readBytes: d("gnnloader_gpu_pcie_read_bytes_total", "Feature bytes the GPU sweeps read over PCIe (each distinct row of a sweep once)."),
		cacheBytes: d("gnnloader_gpu_cache_bytes", "Bytes of feature rows the device's hot-row cache holds (0 until the first trainer on the device builds it; "+
			"less than --gpu-cache where the device had less free)."),
		fillSeconds: prometheus.NewDesc("gnnloader_gpu_fill_seconds_total",
			"GPU time of the fills by phase, with --gpu-timing: plan, read (PCIe), assemble (cached rows, labels), sample (on the sampling stream), "+
				"and the fill stream idle between fills: sample_wait (for a fill's sampling) and host_wait (nothing enqueued yet).",
			[]string{"gpu", "phase"}, nil),
	}
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.slotBytes, c.util, c.rx, c.tx, c.memUsed, c.lookups, c.hitBytes, c.readBytes, c.cacheBytes, c.fillSeconds} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	c.b.mu.Lock()
	for _, dev := range c.b.allowed {
		ch <- prometheus.MustNewConstMetric(c.slotBytes, prometheus.GaugeValue, float64(c.b.used[dev]), strconv.Itoa(dev))
		if c.b.cfg.Cache > 0 {
			var held int64
			if dc := c.b.caches[dev]; dc != nil {
				held = dc.bytes.Load()
			}
			ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(held), strconv.Itoa(dev))
		}
	}
	c.b.mu.Unlock()
	for dev, st := range c.b.planStats() {
		gpu := strconv.Itoa(dev)
		ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(st.Lookups), gpu)
		ch <- prometheus.MustNewConstMetric(c.hitBytes, prometheus.CounterValue, float64(st.HitBytes), gpu)
		ch <- prometheus.MustNewConstMetric(c.readBytes, prometheus.CounterValue, float64(st.ReadBytes), gpu)
		if !c.b.cfg.Timing {
			continue
		}
		for _, ph := range []struct {
			name string
			t    time.Duration
		}{{"plan", st.PlanTime}, {"read", st.ReadTime}, {"assemble", st.AssembleTime},
			{"sample", st.SampleTime}, {"sample_wait", st.SampleWait}, {"host_wait", st.HostWait}} {
			ch <- prometheus.MustNewConstMetric(c.fillSeconds, prometheus.CounterValue, ph.t.Seconds(), gpu, ph.name)
		}
	}
	if c.mon == nil {
		return
	}
	for _, s := range c.mon.Sample() {
		gpu := strconv.Itoa(s.Index)
		ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, s.Utilization, gpu)
		ch <- prometheus.MustNewConstMetric(c.rx, prometheus.GaugeValue, s.PCIeRxBytesSec, gpu)
		ch <- prometheus.MustNewConstMetric(c.tx, prometheus.GaugeValue, s.PCIeTxBytesSec, gpu)
		ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(s.MemUsed), gpu)
	}
}

// registerGPUMetrics adds the GPU path's metrics: slot memory per GPU, the
// pinned feature table, and NVML's utilisation, PCIe throughput and memory
// (when NVML is there).
func (s *Server) registerGPUMetrics(b *gpuBackend) {
	mon, err := cudaext.NewMonitor()
	if err != nil {
		s.log.Info("no NVML metrics", "reason", err)
		mon = nil
	}
	s.metrics.registry.MustRegister(newGPUCollector(b, mon))
	s.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gnnloader_pinned_bytes", Help: "Bytes of host memory pinned (registered with CUDA) for the gathered tables (node features, edge features, each node type's features).",
	}, func() float64 {
		var n int
		for _, st := range s.src.stores {
			n += len(st.Rows)
		}
		return float64(n)
	}))
}

// planStats sums the sweep counters per device: closed rings' (kept when
// they closed) and live rings'.
func (b *gpuBackend) planStats() map[int]gather.PlanStats {
	b.mu.Lock()
	out := map[int]gather.PlanStats{}
	for dev := range b.ctx {
		out[dev] = b.closedStats[dev]
	}
	var live []*cudaRing
	for r := range b.rings {
		live = append(live, r)
	}
	b.mu.Unlock()
	for _, r := range live {
		if st, err := r.stats(); err == nil {
			out[r.dev] = out[r.dev].Add(st)
		}
	}
	return out
}
