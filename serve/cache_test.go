package serve

import (
	"maps"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// topNodes takes the most sampled nodes, then by in-degree, then by id,
// whatever k cuts through.
func TestTopNodes(t *testing.T) {
	counts := []uint32{0, 5, 0, 2, 5, 0, 2, 1, 0, 0}
	indeg := []uint32{9, 1, 3, 4, 0, 3, 7, 0, 70000, 3}
	for k, want := range map[int64][]int64{
		1:  {1},                      // count 5, smaller id first
		2:  {1, 4},                   // both count 5
		3:  {1, 4, 6},                // count 2: in-degree 7 before 4
		5:  {1, 3, 4, 6, 7},          // then count 1
		6:  {1, 3, 4, 6, 7, 8},       // then count 0 by in-degree (capped: 70000 > 9)
		8:  {0, 1, 3, 4, 6, 7, 8, 2}, // in-degree 3 three times: smallest id first
		10: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		20: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	} {
		slices.Sort(want)
		if got := topNodes(counts, indeg, k); !slices.Equal(got, want) {
			t.Errorf("k=%d: got %v, want %v", k, got, want)
		}
	}
}

// The cache's pre-sample draws batches the trainer will not see: neither its
// first epoch's batches (seeds and sampling keys) nor, for a trainer that
// does not shuffle, its fixed order.
func TestPresampleIsNotTheTrainersEpoch(t *testing.T) {
	seeds := make([]int64, 10000)
	for i := range seeds {
		seeds[i] = int64(i)
	}
	for _, shuffle := range []bool{true, false} {
		req := &request{seeds: seeds, epochs: sampler.EpochConfig{BatchSize: 64, Shuffle: shuffle, Seed: 7, WorldSize: 1}}
		pre, err := presamplePlan(req)
		if err != nil {
			t.Fatal(err)
		}
		if pre.NumBatches() != 157 {
			t.Fatalf("shuffle=%v: pre-sample plan of %d batches, want the split's 157", shuffle, pre.NumBatches())
		}
		for epoch := range 3 {
			own, err := sampler.NewPlan(seeds, req.epochs, epoch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if slices.Equal(pre.Batch(i), own.Batch(i)) {
					t.Errorf("shuffle=%v: pre-sample batch %d has the seeds of the trainer's epoch %d", shuffle, i, epoch)
				}
				if pre.Key(i) == own.Key(i) {
					t.Errorf("shuffle=%v: pre-sample batch %d has the sampling key of the trainer's epoch %d", shuffle, i, epoch)
				}
			}
		}
	}
}

// hotScores' prior: with a few batches pre-sampled, a hub never drawn ranks
// above a leaf drawn once; with a whole epoch pre-sampled the counts decide.
func TestHotScores(t *testing.T) {
	counts := []uint32{0, 1, 0, 3}
	deg := []uint32{500, 0, 0, 1}
	// 1 batch of a 100-batch epoch: node 0's prior is 0.5*100 * 4/501*500 = 199.6
	s := hotScores(counts, deg, 1, 100)
	if !(s[0] > s[3] && s[3] > s[1] && s[1] > s[2]) {
		t.Errorf("1 batch of 100: scores %v, want hub 0 > node 3 > node 1 > node 2", s)
	}
	// a whole epoch: node 0's prior is 0.5 * 4/501*500 = 2.0, under node 3's 3 counts
	s = hotScores(counts, deg, 100, 100)
	if !(s[3] > s[0] && s[0] > s[1] && s[1] > s[2] && s[2] == 0) {
		t.Errorf("a whole epoch: scores %v, want node 3 > hub 0 > node 1 > node 2 = 0", s)
	}
	if got := hotScores([]uint32{0, 0}, []uint32{0, 0}, 1, 1); got[0] != 0 || got[1] != 0 {
		t.Errorf("nothing counted, no in-degree: %v", got)
	}
	if got := hotScores([]uint32{0}, []uint32{1 << 31}, 1, 1<<20); got[0] != 0 {
		// the prior's total equals half an epoch of counts, which are 0 here
		t.Errorf("no counts: %v, want 0", got)
	}
}

// The rows the cache takes by default serve more of a trainer's epoch than
// in-degree alone and than the choice before the prior (counts of 22% of an
// epoch, then in-degree): on synthetic papers100M at scale 0.01 (the hit rate
// over epoch 0 of [15,10,5] batches of 1024, 20% of the rows cached).
func TestHotRowsServeMoreOfTheEpoch(t *testing.T) {
	if testing.Short() {
		t.Skip("samples two epochs of a 1.1 M-node graph")
	}
	opts, err := ParseSynthetic("papers100M:0.01:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.NoFeatures = true
	d, err := datasets.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	req := &request{seeds: d.Splits["train"], fanouts: []int{15, 10, 5},
		epochs: sampler.EpochConfig{BatchSize: 1024, Shuffle: true, Seed: 1, WorldSize: 1}}
	plan, err := sampler.NewPlan(req.seeds, req.epochs, 0)
	if err != nil {
		t.Fatal(err)
	}
	smp, err := sampler.New(&d.Graph, sampler.Options{Fanouts: req.fanouts, Workers: 1, NoOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	n := d.Graph.NumNodes
	own := make([]uint32, n) // the epoch's own counts: the best any choice can do
	var b sampler.Batch
	for i := range plan.NumBatches() {
		if err := smp.Sample(plan.Batch(i), plan.Key(i), &b); err != nil {
			t.Fatal(err)
		}
		for _, v := range b.NID {
			own[v]++
		}
	}
	k := n / 5
	rate := func(rows []int64) float64 {
		var hit, all float64
		for _, r := range rows {
			hit += float64(own[r])
		}
		for _, c := range own {
			all += float64(c)
		}
		return hit / all
	}
	deg := inDegrees(&d.Graph)
	rows, how := hotRows(d, req, k, 0)
	now := rate(rows)
	inDeg := rate(topNodes(make([]uint32, n), deg, k))
	before := make([]uint32, n)
	presampleCounts(d, req, plan.NumBatches()*22/100, before)
	old := rate(topNodes(before, deg, k))
	best := rate(topNodes(own, deg, k))
	t.Logf("hit rates: now %.4f (%s), in-degree %.4f, before %.4f, the epoch's own counts %.4f", now, how, inDeg, old, best)
	if !(now > inDeg+0.01 && now > old+0.01 && best >= now) {
		t.Errorf("hit rates: now %.4f, in-degree %.4f, before %.4f, best %.4f: want now above both by a point, at most best", now, inDeg, old, best)
	}
}

// Hostile: a dataset whose in-degrees are huge (a hub listed by 2^31 rows)
// cannot make topNodes keep more than scoreCap+1 counters: hotScores caps
// every score, and the ranking still puts the hub first.
func TestHotScoresCapped(t *testing.T) {
	counts := []uint32{1, 0, 0}
	deg := []uint32{0, 1 << 31, 3}
	s := hotScores(counts, deg, 1, 1<<24) // the hub's prior: 0.5 * 2^24 * 1/(2^31+3) * 2^31, about 2^23
	if s[1] != scoreCap {
		t.Fatalf("scores %v: the hub's is not capped at %d", s, scoreCap)
	}
	for _, v := range s {
		if v > scoreCap {
			t.Fatalf("scores %v: above the cap %d", s, scoreCap)
		}
	}
	if got := topNodes(s, deg, 1); len(got) != 1 || got[0] != 1 {
		t.Fatalf("top node %v, want the hub (1)", got)
	}
}

// The cache takes at most what the device has free less its headroom (by
// default 5% of the device, at least 2 GiB; --gpu-cache-headroom otherwise)
// and its row map: a cache asked for more holds fewer rows, none when
// nothing is left.
func TestCacheFits(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		free, total, asked, rb, nodes, want int64
	}{
		{free: 70 * gib, total: 80 * gib, rb: 512, nodes: 111_059_956, want: (70*gib - 4*gib - 4*111_059_956) / 512},
		{free: 10 * gib, total: 16 * gib, rb: 1024, nodes: 1000, want: (8*gib - 4000) / 1024}, // the 2 GiB floor
		{free: 2 * gib, total: 16 * gib, rb: 1024, nodes: 1000, want: 0},                      // the headroom alone
		{free: 0, total: 80 * gib, rb: 512, nodes: 10, want: 0},
		// --gpu-cache-headroom 12GiB: more than the default's 4 GiB.
		{free: 70 * gib, total: 80 * gib, asked: 12 * gib, rb: 512, nodes: 111_059_956, want: (58*gib - 4*111_059_956) / 512},
		// Below the default's floor, and none at all.
		{free: 10 * gib, total: 16 * gib, asked: gib, rb: 1024, nodes: 1000, want: (9*gib - 4000) / 1024},
		{free: 10 * gib, total: 16 * gib, asked: -1, rb: 1024, nodes: 1000, want: (10*gib - 4000) / 1024},
		{free: 10 * gib, total: 16 * gib, asked: 11 * gib, rb: 1024, nodes: 1000, want: 0},
	} {
		if got := cacheFits(tc.free, cacheHeadroom(tc.total, tc.asked), tc.rb, tc.nodes); got != tc.want {
			t.Errorf("cacheFits(free %d, total %d, headroom asked %d, %d-byte rows, %d nodes) = %d, want %d",
				tc.free, tc.total, tc.asked, tc.rb, tc.nodes, got, tc.want)
		}
	}
}

// gnnloader_gpu_cache_bytes: 0 on a device whose cache is not built yet,
// the rows' bytes once built; absent without --gpu-cache.
func TestCacheBytesMetric(t *testing.T) {
	built := &deviceCache{}
	built.bytes.Store(12345)
	b := &gpuBackend{allowed: []int{0, 1, 2}, used: map[int]int64{}, cfg: GPUConfig{Cache: 1 << 20},
		caches: map[int]*deviceCache{1: built, 2: {}}}
	cacheBytes := func() map[string]float64 {
		c := newGPUCollector(b, nil)
		ch := make(chan prometheus.Metric, 64)
		c.Collect(ch)
		close(ch)
		got := map[string]float64{}
		for m := range ch {
			if m.Desc() != c.cacheBytes {
				continue
			}
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			got[pb.GetLabel()[0].GetValue()] = pb.GetGauge().GetValue()
		}
		return got
	}
	if got, want := cacheBytes(), map[string]float64{"0": 0, "1": 12345, "2": 0}; !maps.Equal(got, want) {
		t.Fatalf("gnnloader_gpu_cache_bytes by gpu: %v, want %v", got, want)
	}
	b.cfg.Cache = 0
	if got := cacheBytes(); len(got) != 0 {
		t.Fatalf("without a cache: %v, want no series", got)
	}
}
