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
// by every GPU sampler on that device; a GPU is one trainer's sampler, which
// samples up to its lanes' number of batches together, each lane with its
// working memory (room for a batch, and a hash table of the nodes a batch
// has met: 16 bytes an entry, a power of two of at least twice the batch's
// most nodes, emptied whole after each call where it is small, else entry
// by entry with 8 bytes a node to find them). For the usual fanouts that is
// far less than a graph's worth (55 MB a lane against the 888 MB of two
// int32 a node for papers100M batches of 1024 at [15,10,5]:
// GPULaneBytes); where a batch may reach most of the graph (-1 fanouts,
// small graphs) the table can be up to 9 times that (72 bytes a node of the
// graph against 8), beside the batch's own buffers of 12 bytes an edge and
// 12 an edge of its largest hop. Both must be used in their
// context (cudaext.Context.Do).

// DeviceOut is where a GPU-sampled batch goes, in device memory: n_id
// (int64, room for the batch's nodes), edge_index (int64 [2, E]: sources,
// then targets, room for 2 x the batch's edges), edge ids (int64, room for
// its edges) and its counts (int64, CountsLen entries: see CountsLen).
type DeviceOut struct {
	NID, EdgeIndex, EID, Counts cudaext.DevicePtr
}

// GPU samples batches on a device, up to Lanes() of them in one call, each
// with working memory of its own (a lane). It is not safe for concurrent
// use: one call at a time, on one stream (its working memory is reused).
type GPU struct {
	g        *DeviceGraph
	fanouts  []int
	maxBatch int
	lanes    int
	sms      int
	mod      *cudaext.Module
	fn       map[string]*cudaext.Function

	// Every lane's working memory, lane after lane in each array (a lane's
	// part at base + lane x its size).
	table            cudaext.DevicePtr // the hash tables: sample.cu Entry (16 bytes: key, local id, first position; all ones when empty)
	slot             cudaext.DevicePtr // int64 per node of a batch: its table entry (gnn_reset_find), where !clearWhole
	args             cudaext.DevicePtr // sample.cu SampleArgs, one per lane: its batch and working memory
	graphs           map[int]*cudaext.Graph
	nbr, dst         cudaext.DevicePtr // per edge of a batch: neighbour id (int64), target (int32)
	cnt, off         cudaext.DevicePtr // per frontier node (int32)
	flag, newid, ent cudaext.DevicePtr // per edge of a hop (int32; ent: the neighbour's table entry)
	blockSums        cudaext.DevicePtr // per scan block (int64)
	gpuCaps
	Bytes int64 // device memory held: lanes x GPULaneBytes + GPUFixedBytes
}

// gpuCaps are a GPU sampler's capacities, for its batches' most seeds.
type gpuCaps struct {
	frontierCap      []int64 // per hop (1-based, index hop-1): most frontier nodes
	hopEdgeCap       []int64 // per hop: most edges
	edgeCap, nodeCap int64
	maxFront, maxHop int64
	entries          int64 // a lane's hash table (a power of two, >= 2 nodeCap)
	clearWhole       bool  // the tables emptied by a memset after a call (clearsWhole), not by gnn_reset
	scanBlocks       int64
}

// gpuCapacities checks a GPU sampler's fanouts and batch size and works out
// its capacities, as batch.Capacity bounds a whole batch.
func gpuCapacities(numNodes, numEdges int64, fanouts []int, maxBatch int, maxDegree int64) (c gpuCaps, err error) {
	if len(fanouts) == 0 || len(fanouts) > MaxHops {
		return c, fmt.Errorf("sampler: %d fanouts, want 1 to %d", len(fanouts), MaxHops)
	}
	for i, k := range fanouts {
		if k != -1 && k < 1 {
			return c, fmt.Errorf("sampler: fanout %d of hop %d, want -1 (all) or >= 1", k, i+1)
		}
	}
	if maxBatch < 1 {
		return c, fmt.Errorf("sampler: batch size %d", maxBatch)
	}
	sat := func(a, b int64) int64 {
		if a != 0 && b > (1<<62)/a {
			return 1 << 62
		}
		return a * b
	}
	front := int64(maxBatch)
	c.nodeCap = front
	for _, f := range fanouts {
		k := int64(f)
		if f < 0 || k > maxDegree {
			k = maxDegree
		}
		e := min(sat(front, k), numEdges)
		c.frontierCap = append(c.frontierCap, front)
		c.hopEdgeCap = append(c.hopEdgeCap, e)
		c.maxFront, c.maxHop = max(c.maxFront, front), max(c.maxHop, e)
		c.edgeCap = min(c.edgeCap+e, numEdges)
		front = min(e, numNodes)
		c.nodeCap = min(c.nodeCap+front, numNodes)
	}
	if c.nodeCap > 1<<31-1 || c.edgeCap > 1<<31-1 {
		return c, ErrTooLarge
	}
	c.entries = tableEntries(c.nodeCap)
	if c.entries > 1<<31 { // gnn_first keeps each edge's entry as an int32
		return c, ErrTooLarge
	}
	c.clearWhole = clearsWhole(c.entries)
	c.scanBlocks = max((max(c.maxFront, c.maxHop)+scanBlock-1)/scanBlock, 1)
	return c, nil
}

// mask is a lane's table entries - 1 (the kernels' probes wrap with it).
func (c *gpuCaps) mask() int64 { return c.entries - 1 }

// laneParts are the bytes of a lane's working memory, array by array in
// sample.cu SampleArgs' order: table, slot, nbr, dst, cnt, off, flag,
// newid, ent, block_sums.
func (c *gpuCaps) laneParts() []int64 {
	slot := 8 * c.nodeCap
	if c.clearWhole {
		slot = 0 // no slot: the tables are emptied whole
	}
	return []int64{entryBytes * c.entries, slot, 8 * c.edgeCap, 4 * c.edgeCap,
		4 * c.maxFront, 4 * c.maxFront, 4 * c.maxHop, 4 * c.maxHop, 4 * c.maxHop, 8 * c.scanBlocks}
}

// GPULaneBytes is the device memory each lane of a GPU sampler over dg
// takes (NewGPU's arguments; an error where NewGPU would refuse them): a
// caller choosing how many lanes to ask for.
func GPULaneBytes(dg *DeviceGraph, fanouts []int, maxBatch int, maxDegree int64) (int64, error) {
	c, err := gpuCapacities(dg.NumNodes, dg.NumEdges, fanouts, maxBatch, maxDegree)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, b := range c.laneParts() {
		n += b
	}
	return n + sampleArgsBytes, nil
}

// GPUFixedBytes is the device memory a GPU sampler holds beside its lanes':
// a GPU of L lanes holds L x GPULaneBytes + GPUFixedBytes (GPU.Bytes), so a
// caller knows it before NewGPU allocates it.
const GPUFixedBytes = gpuArrays * gpuPad

const (
	gpuArrays = 11 // laneArrays and the SampleArgs
	gpuPad    = 16 // bytes each array holds past its lanes' parts, so that none is empty (cuMemAlloc refuses 0 bytes)
)

// arrayBytes are the bytes NewGPU allocates for each of its arrays with
// lanes lanes, in laneArrays' order and then the SampleArgs': every lane's
// part and gpuPad. Their sum is GPU.Bytes.
func (c *gpuCaps) arrayBytes(lanes int) []int64 {
	parts := append(c.laneParts(), sampleArgsBytes)
	for i, p := range parts {
		parts[i] = int64(lanes)*p + gpuPad
	}
	return parts
}

// gpuKernels are sample.fatbin's entry points.
var gpuKernels = []string{"gnn_set_args", "gnn_seeds", "gnn_seed_ids", "gnn_degrees", "gnn_scan_block", "gnn_scan_sum_add",
	"gnn_draw32", "gnn_draw64", "gnn_first", "gnn_flag_first", "gnn_assign", "gnn_resolve", "gnn_end_hop",
	"gnn_pack", "gnn_reset_find", "gnn_reset"}

const (
	scanBlock       = 1024   // sample.cu SCAN_BLOCK
	entryBytes      = 16     // sample.cu Entry: a hash table entry
	sampleArgsBytes = 17 * 8 // sample.cu SampleArgs
	scanDegrees     = 0      // sample.cu SCAN_DEGREES
	scanFlags       = 1      // sample.cu SCAN_FLAGS
	// MaxLanes is the most batches one call of a GPU sampler samples
	// (sample.cu MAX_LANES).
	MaxLanes = 32
)

// SampleGraphEnv, set to 0, makes GPU samplers launch their kernels one by
// one instead of as a captured CUDA graph (to compare the two; the batches
// are the same).
const SampleGraphEnv = "GNNLOADER_SAMPLE_GRAPH"

// clearWholeBytes: a lane's hash table of at most this many bytes is emptied
// after each call whole, by one memset (a linear write: about 10 µs for
// papers100M's 32 MiB), rather than entry by entry (gnn_reset_find and
// gnn_reset: the batch's nodes looked up and written at random, 61 µs a
// batch in docs/benchmarks.md's Nsight Compute run). A larger table (batches
// that may reach most of a large graph) keeps the kernels, whose work
// follows the batch rather than the table. A variable so that the tests
// cover both.
var clearWholeBytes int64 = 64 << 20

// clearsWhole reports whether a table of entries entries (16 bytes each) is
// emptied by a memset after each call.
func clearsWhole(entries int64) bool { return entryBytes*entries <= clearWholeBytes }

// CountsLen is the length of a GPU-sampled batch's counts for hops hops:
// [0] nodes, [1] edges, [2 .. 2+hops] nodes added per hop (seeds first),
// [3+hops .. 2+2*hops] edges per hop, then one scratch entry.
func CountsLen(hops int) int { return 2*hops + 4 }

// NewGPU makes a GPU sampler over dg for batches of at most maxBatch seeds,
// with maxDegree bounding -1 fanouts, sampling up to lanes batches (1 to
// MaxLanes) in one call, each lane with working memory of its own. ctx must
// be current.
func NewGPU(ctx *cudaext.Context, dg *DeviceGraph, fanouts []int, maxBatch int, maxDegree int64, lanes int) (_ *GPU, err error) {
	caps, err := gpuCapacities(dg.NumNodes, dg.NumEdges, fanouts, maxBatch, maxDegree)
	if err != nil {
		return nil, err
	}
	if lanes < 1 || lanes > MaxLanes {
		return nil, fmt.Errorf("sampler: %d lanes, want 1 to %d", lanes, MaxLanes)
	}
	s := &GPU{g: dg, fanouts: append([]int(nil), fanouts...), maxBatch: maxBatch, lanes: lanes, fn: map[string]*cudaext.Function{},
		graphs: map[int]*cudaext.Graph{}, gpuCaps: caps}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
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
	// Each array holds every lane's part, in SampleArgs' order, and the
	// SampleArgs one a lane (arrayBytes).
	L := int64(lanes)
	ptrs, lane, sizes := s.laneArrays(), s.laneParts(), s.arrayBytes(lanes)
	for i, p := range append(ptrs, &s.args) {
		if *p, err = cudaext.MemAlloc(sizes[i]); err != nil {
			return nil, fmt.Errorf("sampler: GPU sampling memory (%d lanes): %w", lanes, err)
		}
		s.Bytes += sizes[i]
	}
	// The lanes' SampleArgs: the working memory's pointers, every lane idle.
	args := make([]int64, 0, L*sampleArgsBytes/8)
	for y := range L {
		args = append(args, 0, -1, 0, 0, 0, 0, 0) // seeds, n = -1 (idle), key, nid, edge_index, eid, counts
		for i, p := range ptrs {
			args = append(args, int64(*p)+y*lane[i])
		}
	}
	if len(args)*8 != lanes*sampleArgsBytes {
		return nil, fmt.Errorf("sampler: %d bytes of SampleArgs for %d lanes", len(args)*8, lanes)
	}
	st, err := cudaext.NewStream()
	if err != nil {
		return nil, err
	}
	defer st.Destroy()
	if err := cudaext.CopyFromHost(s.args, bytesOf(args), st); err != nil {
		return nil, err
	}
	if err := s.clearTables(st, lanes); err != nil {
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

// laneArrays are the sampler's arrays of every lane's working memory, in
// SampleArgs' order (laneParts gives a lane's bytes of each).
func (s *GPU) laneArrays() []*cudaext.DevicePtr {
	return []*cudaext.DevicePtr{&s.table, &s.slot, &s.nbr, &s.dst, &s.cnt, &s.off, &s.flag, &s.newid, &s.ent, &s.blockSums}
}

// UseGraph chooses how the sampler enqueues a call's kernels after
// gnn_set_args: captured once per width as a CUDA graph, launched as one
// submission (on, the default), or launched one by one (off). The batches
// are the same. A driver without graphs leaves the sampler launching them
// one by one. Context current; no call of the sampler's in flight.
func (s *GPU) UseGraph(on bool) error {
	if !on {
		var errs []error
		for w, g := range s.graphs {
			errs = append(errs, g.Destroy())
			delete(s.graphs, w)
		}
		return errors.Join(errs...)
	}
	if len(s.graphs) > 0 {
		return nil
	}
	st, err := cudaext.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	for _, w := range s.widths() {
		if err := st.BeginCapture(); err != nil {
			if errors.Is(err, cudaext.ErrNotSupported) {
				return nil
			}
			return fmt.Errorf("sampler: capturing the GPU sampler's kernels: %w", err)
		}
		err = s.enqueue(st, w)
		g, endErr := st.EndCapture()
		if err = errors.Join(err, endErr); err != nil {
			g.Destroy()
			return errors.Join(fmt.Errorf("sampler: capturing the GPU sampler's kernels (%d lanes): %w", w, err), s.UseGraph(false))
		}
		s.graphs[w] = g
	}
	return nil
}

// Graph reports whether the sampler launches its kernels as CUDA graphs.
func (s *GPU) Graph() bool { return len(s.graphs) > 0 }

// MaxNodes and MaxEdges bound a batch of this sampler.
func (s *GPU) MaxNodes() int64 { return s.nodeCap }
func (s *GPU) MaxEdges() int64 { return s.edgeCap }

// Lanes is the most batches one call samples.
func (s *GPU) Lanes() int { return s.lanes }

// Close frees the sampler's device memory. Context current.
func (s *GPU) Close() error {
	errs := []error{s.UseGraph(false)}
	for _, p := range append(s.laneArrays(), &s.args) {
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

// Job is one batch of a call: n seeds at Seeds (int64, device memory, valid
// node ids), key as for Sampler.Sample, its output at Out.
type Job struct {
	Seeds cudaext.DevicePtr
	N     int
	Key   uint64
	Out   DeviceOut
}

// Sample enqueues the sampling of one batch on st: n seeds at seeds (int64,
// device memory, valid node ids), key as for Sampler.Sample, into out. The
// counts are in out.Counts once the work completes. Context current. The
// buffers hold MaxNodes and MaxEdges, which count each seed once: a batch
// of repeated seeds that reaches every node of the graph would pass them,
// so such seeds belong to the CPU sampler (serve sends them there).
func (s *GPU) Sample(st *cudaext.Stream, seeds cudaext.DevicePtr, n int, key uint64, out DeviceOut) error {
	return s.SampleMany(st, []Job{{Seeds: seeds, N: n, Key: key, Out: out}})
}

// SampleMany enqueues the sampling of up to Lanes() batches on st, all
// together (one launch of each kernel for all of them), each as Sample
// would. Context current.
func (s *GPU) SampleMany(st *cudaext.Stream, jobs []Job) error {
	if len(jobs) == 0 {
		return nil
	}
	if len(jobs) > s.lanes {
		return fmt.Errorf("sampler: %d batches in one call, the GPU sampler has %d lanes", len(jobs), s.lanes)
	}
	var seeds, n, key, nid, ei, eid, counts [MaxLanes]uint64
	for y, j := range jobs {
		if j.N < 0 || j.N > s.maxBatch {
			return fmt.Errorf("sampler: %d seeds, the GPU sampler takes 0 to %d", j.N, s.maxBatch)
		}
		seeds[y], n[y], key[y] = uint64(j.Seeds), uint64(j.N), j.Key
		nid[y], ei[y], eid[y], counts[y] = uint64(j.Out.NID), uint64(j.Out.EdgeIndex), uint64(j.Out.EID), uint64(j.Out.Counts)
	}
	w := s.width(len(jobs))
	if err := s.fn["gnn_set_args"].Launch(cudaext.Dim3{X: 1}, cudaext.Dim3{X: MaxLanes}, 0, st, s.args, int32(len(jobs)), int32(w),
		seeds, n, key, nid, ei, eid, counts); err != nil {
		return fmt.Errorf("sampler: gnn_set_args: %w", err)
	}
	if g := s.graphs[w]; g != nil {
		if err := g.Launch(st); err != nil {
			return fmt.Errorf("sampler: the GPU sampler's graph: %w", err)
		}
		return nil
	}
	return s.enqueue(st, w)
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
