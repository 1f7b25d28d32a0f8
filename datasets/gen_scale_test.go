package datasets

// The generator at papers100M scale: stage timings, CPU time and peak RSS
// (TestGenPapersScale1, BenchmarkGenerate), and the helpers they use.

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func checkSymmetric(t *testing.T, g *Graph) {
	t.Helper()
	for v := range g.NumNodes {
		for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
			u := g.Neighbor(i)
			row := make([]int64, 0, g.Degree(u))
			for j := g.Indptr[u]; j < g.Indptr[u+1]; j++ {
				row = append(row, g.Neighbor(j))
			}
			if _, ok := slices.BinarySearch(row, v); !ok {
				t.Fatalf("edge %d->%d without %d->%d", v, u, u, v)
			}
		}
	}
}

type progressFunc struct {
	begin func(string, int64)
	add   func(int64)
}

func (p progressFunc) Begin(s string, total int64) { p.begin(s, total) }
func (p progressFunc) Add(n int64)                 { p.add(n) }

// stageTimer records how long each stage takes, in wall-clock and in CPU
// time of the whole process (user + system), which contention from other
// processes disturbs less.
type stageTimer struct {
	mu     sync.Mutex
	names  []string
	starts []time.Time
	cpu    []time.Duration
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (s *stageTimer) Begin(stage string, _ int64) {
	s.mu.Lock()
	s.names = append(s.names, stage)
	s.starts = append(s.starts, time.Now())
	s.cpu = append(s.cpu, processCPU())
	s.mu.Unlock()
}
func (s *stageTimer) Add(int64) {}

func (s *stageTimer) reset() { s.names, s.starts, s.cpu = nil, nil, nil }

// durations lists each stage with its wall-clock and CPU seconds, the last
// stage ending at end (and endCPU).
func (s *stageTimer) durations(end time.Time, endCPU time.Duration) (names []string, secs, cpu []float64) {
	for i, name := range s.names {
		next, nextCPU := end, endCPU
		if i+1 < len(s.starts) {
			next, nextCPU = s.starts[i+1], s.cpu[i+1]
		}
		names = append(names, name)
		secs = append(secs, next.Sub(s.starts[i]).Seconds())
		cpu = append(cpu, (nextCPU - s.cpu[i]).Seconds())
	}
	return names, secs, cpu
}

func (s *stageTimer) summary(end time.Time, endCPU time.Duration) string {
	var b strings.Builder
	names, secs, cpu := s.durations(end, endCPU)
	for i, name := range names {
		fmt.Fprintf(&b, " %s=%.2fs(cpu %.1fs)", name, secs[i], cpu[i])
	}
	return b.String()
}

func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	return "?"
}

// TestGenPapersScale1 times papers100M at scale 1, in memory, when
// GNNLOADER_GEN_SCALE1=1 (57 GB of features: run it on a large machine).
// GNNLOADER_GEN_SCALE overrides the scale, GNNLOADER_GEN_UNDIRECTED=1
// symmetrises, GNNLOADER_GEN_LIKE picks another preset.
func TestGenPapersScale1(t *testing.T) {
	if os.Getenv("GNNLOADER_GEN_SCALE1") != "1" {
		t.Skip("set GNNLOADER_GEN_SCALE1=1 to time papers100M at scale 1 (needs ~70 GB of memory)")
	}
	o := GenOptions{Like: "papers100M", Scale: 1, Seed: 1}
	if s := os.Getenv("GNNLOADER_GEN_SCALE"); s != "" {
		var err error
		if o.Scale, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatal(err)
		}
	}
	if s := os.Getenv("GNNLOADER_GEN_LIKE"); s != "" {
		o.Like = s
	}
	if os.Getenv("GNNLOADER_GEN_UNDIRECTED") == "1" {
		yes := true
		o.Undirected = &yes
	}
	st := &stageTimer{}
	o.Progress = st
	start, startCPU := time.Now(), processCPU()
	d := mustGenerate(t, o)
	end, endCPU := time.Now(), processCPU()
	fmt.Printf("gen %s scale %g: %d nodes, %d edges, %.1f GB features, directed=%v, GOMAXPROCS %d: total %.2fs (cpu %.1fs):%s; peak RSS %s\n",
		o.Like, o.Scale, d.Graph.NumNodes, d.Graph.NumEdges(), float64(len(d.Features))/1e9, d.Directed,
		runtime.GOMAXPROCS(0), end.Sub(start).Seconds(), (endCPU - startCPU).Seconds(), st.summary(end, endCPU), peakRSS())
}

// BenchmarkGenerate generates products at scale 0.1 (undirected, float32).
// nodes/s and edges/s are over the whole run (edges counted before
// symmetrising), featureGB/s over the features stage alone.
func BenchmarkGenerate(b *testing.B) {
	o := GenOptions{Like: "products", Scale: 0.1, Seed: 1}
	var d *Data
	st := &stageTimer{}
	o.Progress = st
	var featSec float64
	for b.Loop() {
		st.reset()
		var err error
		if d, err = Generate(o); err != nil {
			b.Fatal(err)
		}
		names, secs, _ := st.durations(time.Now(), processCPU())
		featSec += secs[slices.Index(names, "features")]
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(d.Graph.NumNodes)/sec, "nodes/s")
	b.ReportMetric(float64(scaledSizes(presets[1], o.Scale).edges)/sec, "edges/s")
	b.ReportMetric(float64(len(d.Features))/1e9/(featSec/float64(b.N)), "featureGB/s")
	b.Logf("last run:%s", st.summary(time.Now(), processCPU()))
}
