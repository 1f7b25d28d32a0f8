package serve

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/sampler"
)

// The GPU hot-row cache (GPUConfig.Cache): each device keeps the feature rows
// most likely to be sampled in its own memory, and sweeps copy those from
// there instead of reading them over PCIe (gather.DeviceCache). The rows are
// chosen, as GNNLab does, by pre-sampling batches of the first trainer that
// uses the device (its split, batch size and fanouts) and counting how often
// each node appears; nodes never seen are ranked by in-degree (how many rows
// of the CSR list them), which also breaks ties. The cache is built once, at
// that trainer's Open, and shared by every trainer on the device.

// deviceCache is one device's cache of hot rows.
type deviceCache struct {
	mu    sync.Mutex // held while it is built
	built bool
	// ids are the rows chosen (ascending), kept from a build that failed
	// for the next try, so the pre-sample runs once per device.
	ids    []int64
	c      gather.DeviceCache
	rows   int64
	choice string // how the rows were chosen, for the log
	// bytes of rows the built cache holds (for the metrics, which must not
	// wait for mu while a cache is built).
	bytes atomic.Int64
}

// cacheFor returns device dev's cache, building it with req the first time
// (nil when there is none).
func (b *gpuBackend) cacheFor(dev int, ctx *cudaext.Context, g *gather.CUDA, src *Source, req *request, log *slog.Logger) (*gather.DeviceCache, error) {
	if b.cfg.Cache <= 0 {
		return nil, nil
	}
	b.mu.Lock()
	c := b.caches[dev]
	if c == nil {
		c = &deviceCache{}
		b.caches[dev] = c
	}
	b.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.built {
		// A build that fails is not kept: the next Open tries again (the
		// same trainer with fewer default slots, whose memory the cache
		// may have lacked, or a later one), with the rows already chosen.
		start := time.Now()
		clamped, err := c.build(ctx, g, src, req, b.cfg.Cache, b.cfg.CacheHeadroom, b.cfg.CachePresample)
		if err != nil {
			return nil, err
		}
		c.built = true
		c.bytes.Store(c.rows * int64(src.Data.RowBytes()))
		// The choice's counts, in-degrees and scores, the row map's host
		// copy and the chosen ids (about 20 bytes a node, 2.2 GB on
		// papers100M) are garbage now. Collected here, in the Open that
		// already waits for the build, and given back to the system, rather
		// than beside the first epoch's fills (or never: with the graph's
		// arrays in the heap, the collector's goal is far above them).
		debug.FreeOSMemory()
		if clamped != "" {
			log.Warn("GPU cache smaller than --gpu-cache: it takes what the device has free", "device", fmt.Sprintf("cuda:%d", dev),
				"rows", c.rows, "of", src.Data.Graph.NumNodes, "why", clamped)
		}
		log.Info("GPU cache built", "device", fmt.Sprintf("cuda:%d", dev), "rows", c.rows,
			"bytes", c.rows*int64(src.Data.RowBytes()), "chosen_by", c.choice, "took", time.Since(start).Round(time.Millisecond))
	}
	return &c.c, nil
}

// build chooses the rows and copies them to the device. clamped says why
// it holds fewer rows than asked ("" when it holds them all): what was free
// on the device.
func (c *deviceCache) build(ctx *cudaext.Context, g *gather.CUDA, src *Source, req *request, bytes, headroom int64, presample int) (clamped string, err error) {
	d := src.Data
	rb := int64(d.RowBytes())
	k := min(bytes/rb, d.Graph.NumNodes)
	if k <= 0 {
		return "", fmt.Errorf("--gpu-cache %d bytes holds no %d-byte row", bytes, rb)
	}
	var free, total int64
	if err := ctx.Do(func() (err error) { free, total, err = cudaext.MemGetInfo(); return err }); err != nil {
		return "", err
	}
	left := cacheHeadroom(total, headroom)
	if fit := cacheFits(free, left, rb, d.Graph.NumNodes); fit < k {
		if fit <= 0 {
			return "", fmt.Errorf("the GPU cache: %w: %d bytes free of %d, and the cache leaves %d for the trainers' own work (--gpu-cache-headroom)",
				cudaext.ErrOutOfMemory, free, total, left)
		}
		clamped = fmt.Sprintf("%d bytes asked, %d free of %d, %d left for the trainers' own work (--gpu-cache-headroom)", k*rb, free, total, left)
		k = fit
	}
	if int64(len(c.ids)) != k {
		c.ids, c.choice = hotRows(d, req, k, presample)
	}
	ids := c.ids
	slot := make([]int32, d.Graph.NumNodes)
	for i := range slot {
		slot[i] = -1
	}
	for i, v := range ids {
		slot[v] = int32(i)
	}
	err = ctx.Do(func() (err error) {
		if c.c.Rows, err = cudaext.MemAlloc(k * rb); err != nil {
			return fmt.Errorf("the GPU cache (%d rows, %d bytes): %w", k, k*rb, err)
		}
		if c.c.Slot, err = cudaext.MemAlloc(4 * d.Graph.NumNodes); err != nil {
			return fmt.Errorf("the GPU cache's row map (%d bytes): %w", 4*d.Graph.NumNodes, err)
		}
		st, err := cudaext.NewStream()
		if err != nil {
			return err
		}
		defer st.Destroy()
		return cudaext.CopyFromHost(c.c.Slot, unsafe.Slice((*byte)(unsafe.Pointer(&slot[0])), 4*len(slot)), st)
	})
	if err == nil {
		// ids are ascending: one gather in address order fills the cache.
		if err = g.Gather(context.Background(), gather.Dest{Device: c.c.Rows, DeviceBytes: k * rb}, ids, nil); err == nil {
			err = g.Sync()
		}
	}
	if err != nil {
		ctx.Do(func() error { c.free(); return nil })
		return "", err
	}
	c.rows, c.ids = k, nil
	return clamped, nil
}

// cacheHeadroom is the device memory a cache leaves free for the trainers'
// own work (their models, activations and optimiser state) on a device of
// total bytes: asked (GPUConfig.CacheHeadroom) when positive, none when
// negative, and by default (0) 5% of the device's memory, at least 2 GiB.
func cacheHeadroom(total, asked int64) int64 {
	switch {
	case asked > 0:
		return asked
	case asked < 0:
		return 0
	}
	return max(2<<30, total/20)
}

// cacheFits is how many rows of rb bytes a cache over nodes nodes can hold
// with free bytes free on its device: its row map (4 bytes a node) and
// rows, leaving headroom bytes free.
func cacheFits(free, headroom, rb, nodes int64) int64 {
	return max(0, (free-headroom-4*nodes)/rb)
}

func (c *deviceCache) free() {
	for _, p := range []*cudaext.DevicePtr{&c.c.Rows, &c.c.Slot} {
		if *p != 0 {
			cudaext.MemFree(*p)
			*p = 0
		}
	}
}

// hotRows returns the k nodes most likely to be sampled, ascending, and how
// they were chosen: by their appearances in presample pre-sampled batches
// (0: a whole epoch's, the default) with their in-degree as a prior
// (hotScores), or by in-degree alone (presample < 0, or no batch sampled).
func hotRows(d *datasets.Data, req *request, k int64, presample int) ([]int64, string) {
	n := d.Graph.NumNodes
	deg := inDegrees(&d.Graph)
	if presample >= 0 {
		if presample == 0 {
			presample = 1 << 30 // presampleCounts stops at one epoch
		}
		counts := make([]uint32, n)
		if b, epoch := presampleCounts(d, req, presample, counts); b > 0 {
			return topNodes(hotScores(counts, deg, b, epoch), deg, k),
				fmt.Sprintf("presampling %d batches (of an epoch's %d), in-degree as a prior", b, epoch)
		}
	}
	return topNodes(make([]uint32, n), deg, k), "in-degree"
}

// hotScores estimates each node's appearances in an epoch for topNodes:
// its count over the batches pre-sampled plus its in-degree scaled so that
// the in-degrees together weigh as much as half an epoch of counts (a
// prior: with few batches pre-sampled, a node seen once would otherwise
// rank above a hub never drawn), in quarters, capped at scoreCap.
//
// Measured on the CPU (the hit rate of the chosen 20% of the rows over a
// trainer's epoch of [15,10,5] batches of 1024 on synthetic papers100M at
// scale 0.25, 295 batches an epoch; docs/benchmarks.md): counts of 64
// batches then in-degree for ties (before) 43.9%, in-degree alone 45.1%,
// 64 batches with the prior 47.4%, a whole epoch's 50.2% without the prior
// and 50.4% with it; the epoch's own counts (the best any choice can do)
// 54.1%.
func hotScores(counts, deg []uint32, batches, epochBatches int) []uint32 {
	var csum, dsum float64
	for i := range counts {
		csum += float64(counts[i])
		dsum += float64(deg[i])
	}
	w := 0.0
	if dsum > 0 && batches > 0 {
		w = 0.5 * float64(epochBatches) / float64(batches) * csum / dsum
	}
	scores := make([]uint32, len(counts))
	for i := range scores {
		scores[i] = uint32(min(scoreCap, math.Round(4*(float64(counts[i])+w*float64(deg[i])))))
	}
	return scores
}

// scoreCap bounds hotScores (topNodes keeps a counter per score value).
const scoreCap = 1 << 22

// topNodes returns the k nodes first in the order (most counts, then most
// in-degree (capped at 2^16-1), then smallest id), ascending, in O(n):
// buckets by count, then, inside the one bucket that is taken only in part,
// by in-degree.
func topNodes(counts, indeg []uint32, k int64) []int64 {
	n := int64(len(counts))
	if k >= n {
		ids := make([]int64, n)
		for v := range ids {
			ids[v] = int64(v)
		}
		return ids
	}
	maxCount := uint32(0)
	for _, c := range counts {
		maxCount = max(maxCount, c)
	}
	perCount := make([]int64, maxCount+1)
	for _, c := range counts {
		perCount[c]++
	}
	// Counts above cut are taken whole; of count cut, need more.
	cut, need := int64(maxCount), k
	for ; cut >= 0 && perCount[cut] < need; cut-- {
		need -= perCount[cut]
	}
	const degCap = 1<<16 - 1
	perDeg := make([]int64, degCap+1)
	for v := int64(0); v < n; v++ {
		if int64(counts[v]) == cut {
			perDeg[min(indeg[v], degCap)]++
		}
	}
	degCut, needDeg := int64(degCap), need
	for ; degCut >= 0 && perDeg[degCut] < needDeg; degCut-- {
		needDeg -= perDeg[degCut]
	}
	ids := make([]int64, 0, k)
	for v := int64(0); v < n && int64(len(ids)) < k; v++ {
		c := int64(counts[v])
		switch {
		case c > cut:
			ids = append(ids, v)
		case c == cut:
			d := int64(min(indeg[v], degCap))
			if d > degCut || d == degCut && needDeg > 0 {
				if d == degCut {
					needDeg--
				}
				ids = append(ids, v)
			}
		}
	}
	return ids
}

// presampleSalt turns a trainer's shuffle seed into the pre-sample's.
const presampleSalt = 0x9E3779B97F4A7C15

// presamplePlan is the epoch plan the pre-sample draws its batches from:
// req's split, batch size and ranks, shuffled with a seed of its own. Not
// the trainer's first epoch: its first batches, sampled with the very keys
// the trainer will use, would put exactly their rows in the cache, and a
// benchmark over those batches would report a hit rate the rest of the
// training never sees (62.8% over the first 300 batches of papers100M
// against 47.8% over the whole epoch, docs/training.md).
func presamplePlan(req *request) (*sampler.Plan, error) {
	cfg := req.epochs
	cfg.Seed ^= presampleSalt
	cfg.Shuffle = true
	return sampler.NewPlan(req.seeds, cfg, 0)
}

// presampleCounts samples up to batches batches of presamplePlan (at most
// one epoch) on every core and counts each node's appearances; it returns
// the batches sampled and an epoch's batches.
func presampleCounts(d *datasets.Data, req *request, batches int, counts []uint32) (int, int) {
	plan, err := presamplePlan(req)
	if err != nil {
		return 0, 0
	}
	smp, err := sampler.New(&d.Graph, sampler.Options{Fanouts: req.fanouts, Workers: 1, NoOrder: true})
	if err != nil {
		return 0, 0
	}
	batches = min(batches, plan.NumBatches())
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var b sampler.Batch
			for {
				i := int(next.Add(1) - 1)
				if i >= batches {
					return
				}
				if smp.Sample(plan.Batch(i), plan.Key(i), &b) != nil {
					continue
				}
				for _, v := range b.NID {
					atomic.AddUint32(&counts[v], 1)
				}
			}
		})
	}
	wg.Wait()
	return batches, plan.NumBatches()
}

// inDegrees counts, for every node, the CSR rows that list it: how many
// nodes sample from it.
func inDegrees(g *datasets.Graph) []uint32 {
	deg := make([]uint32, g.NumNodes)
	e := g.NumEdges()
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := e*int64(w)/int64(workers), e*int64(w+1)/int64(workers)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				atomic.AddUint32(&deg[g.Neighbor(i)], 1)
			}
		})
	}
	wg.Wait()
	return deg
}
