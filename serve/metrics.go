package serve

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the daemon's Prometheus metrics, all prefixed gnnloader_ and
// documented in docs/operations.md. Counters and histograms are updated on
// the pipeline's paths (a few atomic adds per batch); gauges are read from
// the server's state at scrape time.
type metrics struct {
	registry *prometheus.Registry

	batches     *prometheus.CounterVec // by rank
	sample      prometheus.Histogram
	gather      prometheus.Histogram
	slotWait    prometheus.Histogram
	releaseWait prometheus.Histogram
	trainerHold prometheus.Histogram
	epochStart  prometheus.Histogram
	gatherBytes prometheus.Counter
	swept       prometheus.Counter
	fills       prometheus.Counter
	connections prometheus.Counter
	refused     prometheus.Counter
	errors      *prometheus.CounterVec // by code
}

// latencyBuckets spans 10 us to ~40 s.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 2.5, 17)

func newMetrics(s *Server) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.registry.MustRegister(c) }
	m.batches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gnnloader_batches_served_total", Help: "Batches announced to trainers (BatchReady), by trainer rank.",
	}, []string{"rank"})
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
	}
	m.sample = hist("gnnloader_sample_seconds", "Time to sample one batch (on a sampler goroutine).")
	m.gather = hist("gnnloader_gather_seconds", "Time to fill one slot: feature rows, labels, n_id, edge_index.")
	m.releaseWait = hist("gnnloader_release_wait_seconds", "Time a fill on a GPU waited, once the trainer had released its slots, for the trainer's kernels that read them to end.")
	m.slotWait = hist("gnnloader_slot_wait_seconds", "Time the gather stage waited for the trainer to release a slot (long = the trainer is the bottleneck).")
	m.trainerHold = hist("gnnloader_trainer_hold_seconds", "Time from BatchReady to the trainer's Release of that batch.")
	m.epochStart = hist("gnnloader_epoch_start_seconds", "Time from a trainer's StartEpoch to the epoch's first BatchReady.")
	m.gatherBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gnnloader_gather_bytes_total", Help: "Feature bytes written into slots.",
	})
	m.swept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gnnloader_swept_batches_total", Help: "Batches filled together with others in one sorted sweep of the table (GPU path).",
	})
	m.fills = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gnnloader_fills_total", Help: "Fills: one batch each on the CPU path, one sweep of one or more batches on the GPU path.",
	})
	m.connections = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gnnloader_connections_total", Help: "Trainer connections accepted.",
	})
	m.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gnnloader_connections_refused_total", Help: "Connections refused by the peer-credential check.",
	})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gnnloader_connection_errors_total", Help: "Connections ended with an Error frame, by error code.",
	}, []string{"code"})
	for _, c := range []prometheus.Collector{m.batches, m.sample, m.gather, m.slotWait, m.releaseWait, m.trainerHold, m.epochStart, m.gatherBytes, m.swept, m.fills, m.connections, m.refused, m.errors} {
		f(c)
	}
	gauge := func(name, help string, v func() float64) {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	gauge("gnnloader_trainers", "Trainers with an open slot ring.", func() float64 { return float64(s.Trainers()) })
	gauge("gnnloader_slot_bytes", "Bytes of all trainers' slots.", func() float64 { return float64(s.SlotBytes()) })
	gauge("gnnloader_budget_used_bytes", "Bytes of --memory-budget in use: slots, sampled batches in flight, custom seed lists and gradient buffers.",
		func() float64 { return float64(s.BudgetUsed()) })
	gauge("gnnloader_slots_held", "Slots handed to trainers and not yet released.", func() float64 { return float64(s.count(func(ss *session) int { return ss.held() })) })
	gauge("gnnloader_sampled_queue_depth", "Batches sampled and waiting for the gather stage.", func() float64 {
		return float64(s.count(func(ss *session) int { return int(ss.queued.Load()) }))
	})
	gauge("gnnloader_dataset_feature_bytes", "Bytes of the served feature table (of every node type's, for a heterogeneous dataset).", func() float64 { return float64(s.src.featureBytes()) })
	gauge("gnnloader_memory_budget_bytes", "The slot memory budget.", func() float64 { return float64(s.cfg.MemoryBudget) })
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// Registry is where the server's metrics live (served by loaderd on
// --metrics-addr); other components may register theirs there too.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

// count sums f over live sessions.
func (s *Server) count(f func(*session) int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for ss := range s.sessions {
		n += f(ss)
	}
	return n
}
