package sampler

import (
	"errors"
	"fmt"
	"os"

	"github.com/gnnloader/gnnloader/cudaext"
)

// Sampling on the GPU (cudaext/kernels/sample.cu), from the graph's CSR held
// in device memory: the same batches as Sampler's, byte for byte (the same
// RNG streams, Floyd's algorithm, edge order and local ids), with no CPU work
// but the launches. A DeviceGraph holds one device's copy of the CSR, shared
// by every GPU sampler on that device; a GPU is one trainer's sampler, with
// its working memory (room for a batch, and a hash table of the nodes a
// batch has met: 16 bytes an entry, a power of two of at least twice the
// batch's most nodes, emptied whole after each batch where it is small, else
// entry by entry with 8 bytes a node to find them). For the usual
// fanouts that is far less than a graph's worth (41 MB against the 888 MB
// of two int32 a node for papers100M batches of 1024 at [15,10,5]); where
// a batch may reach most of the graph (-1 fanouts, small graphs) it can be
// up to 9 times that (72 bytes a node of the graph against 8), beside the
// batch's own buffers of 12 bytes an edge. Both must be used in their
// context (cudaext.Context.Do).

// DeviceOut is where a GPU-sampled batch goes, in device memory: n_id
// (int64, room for the batch's nodes), edge_index (int64 [2, E]: sources,
// then targets, room for 2 x the batch's edges), edge ids (int64, room for
// its edges) and its counts (int64, CountsLen entries: see CountsLen).
type DeviceOut struct {
	NID, EdgeIndex, EID, Counts cudaext.DevicePtr
}

// GPU samples batches on a device. It is not safe for concurrent use: one
// batch at a time, on one stream (its working memory is reused).
type GPU struct {
	g        *DeviceGraph
	fanouts  []int
	maxBatch int
	sms      int
	mod      *cudaext.Module
	fn       map[string]*cudaext.Function

	keys              cudaext.DevicePtr // the hash table's keys (int64 node ids, -1 when empty)
	localid, firstpos cudaext.DevicePtr // int32 per table entry: -1 / NOT_SEEN when empty
	tableMask         int64             // table entries - 1 (a power of two, >= 2 nodeCap)
	clearWhole        bool              // the table emptied by memsets after a batch (clearsWhole), not by gnn_reset
	slot              cudaext.DevicePtr // int64 per node of a batch: its table entry (gnn_reset_find), where !clearWhole
	args              cudaext.DevicePtr // sample.cu SampleArgs: the batch's arguments
	graph             *cudaext.Graph    // every kernel after gnn_seeds, captured once; nil: launched one by one
	nbr, dst          cudaext.DevicePtr // per edge of the batch: neighbour id (int64), target (int32)
	cnt, off          cudaext.DevicePtr // per frontier node (int32)
	flag, newid, ent  cudaext.DevicePtr // per edge of a hop (int32; ent: the neighbour's table entry)
	blockSums         cudaext.DevicePtr // per scan block (int64)
	frontierCap       []int64           // per hop (1-based, index hop-1): most frontier nodes
	hopEdgeCap        []int64           // per hop: most edges
	edgeCap, nodeCap  int64
	scanBlocks        int64
	Bytes             int64 // device memory held
}

// gpuKernels are sample.fatbin's entry points.
var gpuKernels = []string{"gnn_seeds", "gnn_seed_ids", "gnn_degrees", "gnn_scan_block", "gnn_scan_sum_add",
	"gnn_draw32", "gnn_draw64", "gnn_first", "gnn_flag_first", "gnn_assign", "gnn_resolve", "gnn_end_hop",
	"gnn_pack", "gnn_reset_find", "gnn_reset"}

const (
	scanBlock       = 1024       // sample.cu SCAN_BLOCK
	notSeen         = 0x7fffffff // sample.cu NOT_SEEN
	sampleArgsBytes = 7 * 8      // sample.cu SampleArgs
)

// SampleGraphEnv, set to 0, makes GPU samplers launch their kernels one by
// one instead of as a captured CUDA graph (to compare the two; the batches
// are the same).
const SampleGraphEnv = "GNNLOADER_SAMPLE_GRAPH"

// clearWholeBytes: a hash table of at most this many bytes is emptied after
// each batch whole, by three memsets (a linear write: about 10 µs for
// papers100M's 32 MiB), rather than entry by entry (gnn_reset_find and
// gnn_reset: the batch's nodes looked up and written at random, 61 µs a
// batch in docs/benchmarks.md's Nsight Compute run). A larger table (batches
// that may reach most of a large graph) keeps the kernels, whose work
// follows the batch rather than the table. A variable so that the tests
// cover both.
var clearWholeBytes int64 = 64 << 20

// clearsWhole reports whether a table of entries entries (16 bytes each) is
// emptied by memsets after each batch.
func clearsWhole(entries int64) bool { return 16*entries <= clearWholeBytes }

// CountsLen is the length of a GPU-sampled batch's counts for hops hops:
// [0] nodes, [1] edges, [2 .. 2+hops] nodes added per hop (seeds first),
// [3+hops .. 2+2*hops] edges per hop, then one scratch entry.
func CountsLen(hops int) int { return 2*hops + 4 }

// NewGPU makes a GPU sampler over dg for batches of at most maxBatch seeds,
// with maxDegree bounding -1 fanouts. ctx must be current.
func NewGPU(ctx *cudaext.Context, dg *DeviceGraph, fanouts []int, maxBatch int, maxDegree int64) (_ *GPU, err error) {
	if len(fanouts) == 0 || len(fanouts) > MaxHops {
		return nil, fmt.Errorf("sampler: %d fanouts, want 1 to %d", len(fanouts), MaxHops)
	}
	for i, k := range fanouts {
		if k != -1 && k < 1 {
			return nil, fmt.Errorf("sampler: fanout %d of hop %d, want -1 (all) or >= 1", k, i+1)
		}
	}
	if maxBatch < 1 {
		return nil, fmt.Errorf("sampler: batch size %d", maxBatch)
	}
	s := &GPU{g: dg, fanouts: append([]int(nil), fanouts...), maxBatch: maxBatch, fn: map[string]*cudaext.Function{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// Capacities per hop, as batch.Capacity bounds a whole batch.
	sat := func(a, b int64) int64 {
		if a != 0 && b > (1<<62)/a {
			return 1 << 62
		}
		return a * b
	}
	front := int64(maxBatch)
	s.nodeCap = front
	var maxFront, maxHop int64
	for _, f := range fanouts {
		k := int64(f)
		if f < 0 || k > maxDegree {
			k = maxDegree
		}
		e := min(sat(front, k), dg.NumEdges)
		s.frontierCap = append(s.frontierCap, front)
		s.hopEdgeCap = append(s.hopEdgeCap, e)
		maxFront, maxHop = max(maxFront, front), max(maxHop, e)
		s.edgeCap = min(s.edgeCap+e, dg.NumEdges)
		front = min(e, dg.NumNodes)
		s.nodeCap = min(s.nodeCap+front, dg.NumNodes)
	}
	if s.nodeCap > 1<<31-1 || s.edgeCap > 1<<31-1 {
		return nil, ErrTooLarge
	}
	entries := tableEntries(s.nodeCap)
	if entries > 1<<31 { // gnn_first keeps each edge's entry as an int32
		return nil, ErrTooLarge
	}
	s.tableMask = entries - 1
	s.clearWhole = clearsWhole(entries)
	slotBytes := 8 * s.nodeCap
	if s.clearWhole {
		slotBytes = 0
	}
	s.scanBlocks = (max(maxFront, maxHop) + scanBlock - 1) / scanBlock
	img, err := cudaext.SampleImage()
	if err != nil {
		return nil, err
	}
	if s.mod, err = cudaext.LoadModule(img); err != nil {
		return nil, err
	}
	for _, name := range gpuKernels {
		if s.fn[name], err = s.mod.Function(name); err != nil {
			return nil, err
		}
	}
	if s.sms, err = ctx.Device.Attribute(cudaext.AttrMultiprocessorCount); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		p *cudaext.DevicePtr
		n int64
	}{
		{&s.keys, 8 * entries}, {&s.localid, 4 * entries}, {&s.firstpos, 4 * entries}, {&s.slot, slotBytes},
		{&s.nbr, 8 * s.edgeCap}, {&s.dst, 4 * s.edgeCap},
		{&s.cnt, 4 * maxFront}, {&s.off, 4 * maxFront},
		{&s.flag, 4 * maxHop}, {&s.newid, 4 * maxHop}, {&s.ent, 4 * maxHop},
		{&s.blockSums, 8 * s.scanBlocks}, {&s.args, sampleArgsBytes},
	} {
		if *a.p, err = cudaext.MemAlloc(max(a.n, 16)); err != nil {
			return nil, fmt.Errorf("sampler: GPU sampling memory: %w", err)
		}
		s.Bytes += max(a.n, 16)
	}
	st, err := cudaext.NewStream()
	if err != nil {
		return nil, err
	}
	defer st.Destroy()
	if err := s.clearTable(st); err != nil {
		return nil, err
	}
	if err := st.Synchronize(); err != nil {
		return nil, err
	}
	if err := s.UseGraph(os.Getenv(SampleGraphEnv) != "0"); err != nil {
		return nil, err
	}
	return s, nil
}

// UseGraph chooses how the sampler enqueues a batch's kernels after the
// first: captured once as a CUDA graph, launched as one submission (on, the
// default), or launched one by one (off). The batches are the same. A driver
// without graphs leaves the sampler launching them one by one. Context
// current; no batch of the sampler's in flight.
func (s *GPU) UseGraph(on bool) error {
	if !on {
		err := s.graph.Destroy()
		s.graph = nil
		return err
	}
	if s.graph != nil {
		return nil
	}
	st, err := cudaext.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	if err := st.BeginCapture(); err != nil {
		if errors.Is(err, cudaext.ErrNotSupported) {
			return nil
		}
		return fmt.Errorf("sampler: capturing the GPU sampler's kernels: %w", err)
	}
	err = s.enqueueBatch(st)
	g, endErr := st.EndCapture()
	if err = errors.Join(err, endErr); err != nil {
		g.Destroy()
		return fmt.Errorf("sampler: capturing the GPU sampler's kernels: %w", err)
	}
	s.graph = g
	return nil
}

// Graph reports whether the sampler launches its kernels as one CUDA graph.
func (s *GPU) Graph() bool { return s.graph != nil }

// MaxNodes and MaxEdges bound a batch of this sampler.
func (s *GPU) MaxNodes() int64 { return s.nodeCap }
func (s *GPU) MaxEdges() int64 { return s.edgeCap }

// Close frees the sampler's device memory. Context current.
func (s *GPU) Close() error {
	errs := []error{s.UseGraph(false)}
	for _, p := range []*cudaext.DevicePtr{&s.keys, &s.localid, &s.firstpos, &s.slot, &s.nbr, &s.dst, &s.cnt, &s.off, &s.flag, &s.newid, &s.ent, &s.blockSums, &s.args} {
		if *p != 0 {
			errs = append(errs, cudaext.MemFree(*p))
			*p = 0
		}
	}
	if s.mod != nil {
		errs = append(errs, s.mod.Unload())
		s.mod = nil
	}
	return errors.Join(errs...)
}

// Sample enqueues the sampling of one batch on st: n seeds at seeds (int64,
// device memory, valid node ids), key as for Sampler.Sample, into out. The
// counts are in out.Counts once the work completes. Context current. The
// buffers hold MaxNodes and MaxEdges, which count each seed once: a batch
// of repeated seeds that reaches every node of the graph would pass them,
// so such seeds belong to the CPU sampler (serve sends them there).
func (s *GPU) Sample(st *cudaext.Stream, seeds cudaext.DevicePtr, n int, key uint64, out DeviceOut) error {
	if n > s.maxBatch {
		return fmt.Errorf("sampler: %d seeds, the GPU sampler takes at most %d", n, s.maxBatch)
	}
	n64 := int64(n)
	if err := s.fn["gnn_seeds"].Launch(s.grid(n64), cudaext.Dim3{X: 256}, 0, st, seeds, n64, key, out.NID, out.EdgeIndex,
		out.EID, out.Counts, s.keys, s.tableMask, s.firstpos, s.args); err != nil {
		return fmt.Errorf("sampler: gnn_seeds: %w", err)
	}
	if s.graph != nil {
		if err := s.graph.Launch(st); err != nil {
			return fmt.Errorf("sampler: the GPU sampler's graph: %w", err)
		}
		return nil
	}
	return s.enqueueBatch(st)
}

// grid is the launch grid for n elements: a block of 256 threads for each
// 256, at most 8 a multiprocessor (the kernels stride over the rest).
func (s *GPU) grid(n int64) cudaext.Dim3 {
	return cudaext.Dim3{X: uint32(max(1, min((n+255)/256, int64(8*s.sms))))}
}

// enqueueBatch enqueues every kernel of a batch after gnn_seeds: the same
// launches for every batch (grids sized for the largest), which read the
// batch from s.args. Captured once into s.graph where the driver can.
func (s *GPU) enqueueBatch(st *cudaext.Stream) error {
	H := len(s.fanouts)
	scratch := int32(2*H + 3) // the flags' scan total: the hop's new nodes
	threads := cudaext.Dim3{X: 256}
	launch := func(name string, g cudaext.Dim3, b cudaext.Dim3, args ...any) error {
		if err := s.fn[name].Launch(g, b, 0, st, args...); err != nil {
			return fmt.Errorf("sampler: %s: %w", name, err)
		}
		return nil
	}
	one := cudaext.Dim3{X: 1}
	if err := launch("gnn_seed_ids", s.grid(int64(s.maxBatch)), threads, s.args, s.keys, s.tableMask, s.localid, s.firstpos); err != nil {
		return err
	}
	draw := "gnn_draw32"
	if s.g.Wide {
		draw = "gnn_draw64"
	}
	for h, k := range s.fanouts {
		hop := int32(h + 1)
		edgesAt := int32(3 + H + h) // counts: the hop's edges
		fc, ec := s.frontierCap[h], s.hopEdgeCap[h]
		if err := launch("gnn_degrees", s.grid(fc), threads, s.g.Indptr, s.args, hop, int32(k), s.cnt); err != nil {
			return err
		}
		if err := s.scan(st, s.cnt, s.off, int32(2+h), fc, edgesAt); err != nil {
			return err
		}
		if err := launch(draw, s.grid(fc), threads, s.g.Indptr, s.g.Indices, s.args, hop, int32(k), s.off, s.nbr, s.dst); err != nil {
			return err
		}
		if err := launch("gnn_first", s.grid(ec), threads, s.args, hop, int32(H), s.nbr, s.keys, s.tableMask, s.localid, s.firstpos, s.ent); err != nil {
			return err
		}
		if err := launch("gnn_flag_first", s.grid(ec), threads, s.args, hop, int32(H), s.ent, s.localid, s.firstpos, s.flag); err != nil {
			return err
		}
		if err := s.scan(st, s.flag, s.newid, edgesAt, ec, scratch); err != nil {
			return err
		}
		if err := launch("gnn_assign", s.grid(ec), threads, s.args, hop, int32(H), s.nbr, s.flag, s.newid, s.ent, s.localid); err != nil {
			return err
		}
		if err := launch("gnn_resolve", s.grid(ec), threads, s.args, hop, int32(H), s.ent, s.localid); err != nil {
			return err
		}
		if err := launch("gnn_end_hop", one, one, s.args, hop, int32(H), scratch); err != nil {
			return err
		}
	}
	if err := launch("gnn_pack", s.grid(s.edgeCap), threads, s.args, s.dst); err != nil {
		return err
	}
	if s.clearWhole {
		return s.clearTable(st)
	}
	if err := launch("gnn_reset_find", s.grid(s.nodeCap), threads, s.args, s.keys, s.tableMask, s.slot); err != nil {
		return err
	}
	return launch("gnn_reset", s.grid(s.nodeCap), threads, s.args, s.slot, s.keys, s.localid, s.firstpos)
}

// clearTable enqueues the emptying of the whole hash table on st: every key
// -1, every local id -1, every first position NOT_SEEN.
func (s *GPU) clearTable(st *cudaext.Stream) error {
	entries := s.tableMask + 1
	if err := cudaext.MemsetD32Async(s.keys, 0xffffffff, 2*entries, st); err != nil {
		return fmt.Errorf("sampler: emptying the GPU sampler's table: %w", err)
	}
	if err := cudaext.MemsetD32Async(s.localid, 0xffffffff, entries, st); err != nil {
		return fmt.Errorf("sampler: emptying the GPU sampler's table: %w", err)
	}
	if err := cudaext.MemsetD32Async(s.firstpos, notSeen, entries, st); err != nil {
		return fmt.Errorf("sampler: emptying the GPU sampler's table: %w", err)
	}
	return nil
}

// tableEntries is the size of the hash table of a sampler whose batches hold
// at most nodes nodes: the power of two at least twice that (at least 1024),
// so that a probe meets an empty entry within a few.
func tableEntries(nodes int64) int64 {
	n := int64(1024)
	for n < 2*nodes {
		n *= 2
	}
	return n
}

// scan enqueues out = exclusive prefix of the int32 array a, of
// counts[nAt] (at most capN) elements, with the total into counts[totalAt]
// (the counts of the batch in s.args): two launches over the same grid.
func (s *GPU) scan(st *cudaext.Stream, a, out cudaext.DevicePtr, nAt int32, capN int64, totalAt int32) error {
	nb := max((capN+scanBlock-1)/scanBlock, 1)
	if nb > s.scanBlocks {
		return fmt.Errorf("sampler: a scan of %d elements, room for %d", capN, s.scanBlocks*scanBlock)
	}
	threads := cudaext.Dim3{X: 256}
	if err := s.fn["gnn_scan_block"].Launch(cudaext.Dim3{X: uint32(nb)}, threads, 0, st, a, s.args, nAt, out, s.blockSums); err != nil {
		return err
	}
	return s.fn["gnn_scan_sum_add"].Launch(cudaext.Dim3{X: uint32(nb)}, threads, 0, st, s.args, nAt, s.blockSums, out, totalAt)
}
