package sampler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/datasets"
)

// TestGPUMatchesCPU: batches sampled on the GPU are the CPU sampler's, byte
// for byte: n_id, edge_index, edge ids and the per-hop counts, for 32- and
// 64-bit indices, fanouts above and below the degrees, Floyd with more than
// 32 draws, every neighbour (-1), repeated seeds, and several batches in a
// row on one sampler (its working memory must come back clean), of full and
// smaller sizes, one at a time and enqueued back to back, with the kernels
// launched as the captured CUDA graph (the default) and one by one, and the
// hash table emptied whole by a memset (small tables, the default) and entry
// by entry by the reset kernels, on a sampler of one lane and of four (the
// back-to-back batches then sampled together: a call of three, at a width of
// four with a lane idle, then a call of one).
func TestGPUMatchesCPU(t *testing.T) {
	c := cudatest.Context(t)
	t.Setenv(SampleGraphEnv, "") // new samplers take a graph where the driver has them
	cases := []struct {
		fanouts []int
		batch   int
	}{
		{[]int{15, 10, 5}, 512},
		{[]int{-1, 3}, 64},
		{[]int{40, 2}, 128},
		{[]int{1, 1, 1, 1, 1, 1, 1, 1}, 32},
		{[]int{2000}, 8},
	}
	for gi, g := range testGraphs() {
		maxDeg := g.MaxDegree()
		var dg *DeviceGraph
		if err := c.Do(func() (err error) { dg, err = NewDeviceGraph(g); return err }); err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			for _, graph := range []bool{true, false} {
				for _, whole := range []bool{true, false} {
					for _, lanes := range []int{1, 4} {
						t.Run(fmt.Sprintf("g%d/%v/graph=%v/clearWhole=%v/lanes=%d", gi, tc.fanouts, graph, whole, lanes), func(t *testing.T) {
							setClearWhole(t, whole)
							c.Do(func() error { // the context is current per thread: in the subtest's
								checkGPUSampler(t, c, g, dg, tc.fanouts, tc.batch, maxDeg, graph, whole, lanes)
								return nil
							})
						})
					}
				}
			}
		}
		c.Do(dg.Close)
	}
}

// setClearWhole makes the samplers the test makes empty their tables whole
// (every table the tests make is small) or entry by entry.
func setClearWhole(t *testing.T, whole bool) {
	old := clearWholeBytes
	t.Cleanup(func() { clearWholeBytes = old })
	clearWholeBytes = 64 << 20
	if !whole {
		clearWholeBytes = 0
	}
}

func checkGPUSampler(t *testing.T, c *cudaext.Context, g *datasets.Graph, dg *DeviceGraph, fanouts []int, batch int, maxDeg int64, graph, whole bool, lanes int) {
	gs, err := NewGPU(c, dg, fanouts, batch+2, maxDeg, lanes)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	if gs.clearWhole != whole {
		t.Fatalf("a sampler of %d table entries empties it whole: %v, want %v", gs.entries, gs.clearWhole, whole)
	}
	if per, err := GPULaneBytes(dg, fanouts, batch+2, maxDeg); err != nil || gs.Bytes != int64(lanes)*per+GPUFixedBytes {
		t.Fatalf("a sampler of %d lanes holds %d bytes, want %d lanes of %d (%v) and %d", lanes, gs.Bytes, lanes, per, err, GPUFixedBytes)
	}
	if hasGraphs := driverHasGraphs(t); gs.Graph() != hasGraphs {
		t.Fatalf("a new GPU sampler: Graph() = %v, the driver has graphs: %v", gs.Graph(), hasGraphs)
	} else if graph && !hasGraphs {
		t.Skip("the driver has no CUDA graphs")
	}
	if err := gs.UseGraph(graph); err != nil {
		t.Fatal(err)
	}
	if gs.Graph() != graph {
		t.Fatalf("UseGraph(%v): Graph() = %v", graph, gs.Graph())
	}
	cpu, err := New(g, Options{Fanouts: fanouts, Workers: 2, EdgeIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := cudaext.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	alloc := func(n int64) cudaext.DevicePtr {
		p, err := cudaext.MemAlloc(max(n, 16))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Do(func() error { return cudaext.MemFree(p) }) })
		return p
	}
	H := len(fanouts)
	newOut := func() DeviceOut {
		return DeviceOut{NID: alloc(8 * gs.MaxNodes()), EdgeIndex: alloc(16 * gs.MaxEdges()), EID: alloc(8 * gs.MaxEdges()),
			Counts: alloc(8 * int64(CountsLen(H)))}
	}
	const keys = 4
	seedsOf := func(key uint64) []int64 {
		seeds := testSeeds(g, batch, key+100)
		seeds = append(seeds, seeds[3], seeds[0]) // repeated seeds keep their place
		if key%2 == 1 {
			seeds = seeds[:len(seeds)/2+1] // fewer than the sampler's most
		}
		return seeds
	}
	// One batch at a time: each checked before the next is sampled.
	out := newOut()
	seedsDev := alloc(8 * int64(batch+2))
	for key := uint64(0); key < keys; key++ {
		seeds := seedsOf(key)
		if err := cudaext.CopyFromHost(seedsDev, bytesOf(seeds), st); err != nil {
			t.Fatal(err)
		}
		if err := gs.Sample(st, seedsDev, len(seeds), key, out); err != nil {
			t.Fatal(err)
		}
		compareGPUBatch(t, cpu, st, seeds, key, H, out)
	}
	// Back to back, as the daemon samples: every batch enqueued before any
	// is read, each into its own outputs, so each batch's arguments and the
	// working memory's reset must hold in stream order alone.
	var outs [keys]DeviceOut
	var seedsAll [keys][]int64
	for key := uint64(0); key < keys; key++ {
		seedsAll[key] = seedsOf(key + keys)
		outs[key] = newOut()
	}
	seedBufs := make([]cudaext.DevicePtr, keys)
	for key := range seedBufs {
		seedBufs[key] = alloc(8 * int64(len(seedsAll[key])))
		if err := cudaext.CopyFromHost(seedBufs[key], bytesOf(seedsAll[key]), st); err != nil {
			t.Fatal(err)
		}
	}
	jobs := make([]Job, keys)
	for key := uint64(0); key < keys; key++ {
		jobs[key] = Job{Seeds: seedBufs[key], N: len(seedsAll[key]), Key: key + keys, Out: outs[key]}
	}
	calls := [][]Job{jobs[:1], jobs[1:2], jobs[2:3], jobs[3:]} // one lane: a batch a call
	if lanes > 1 {
		calls = [][]Job{jobs[:3], jobs[3:]}
	}
	for _, call := range calls {
		if err := gs.SampleMany(st, call); err != nil {
			t.Fatal(err)
		}
	}
	for key := uint64(0); key < keys; key++ {
		compareGPUBatch(t, cpu, st, seedsAll[key], key+keys, H, outs[key])
	}
	checkTablesEmpty(t, gs, st)
}

// checkTablesEmpty: after its calls, every lane's hash table is empty again
// (every bit of every entry set: key -1, local id -1, first position
// NOT_SEEN), whichever way it is emptied; a table left dirty would look
// fresh to the next batch's lookups and fill up over many.
func checkTablesEmpty(t *testing.T, gs *GPU, st *cudaext.Stream) {
	t.Helper()
	entries := int64(gs.lanes) * gs.entries
	words := make([]int64, entries*entryBytes/8) // an entry: its key, then its local id and first position
	if err := cudaext.CopyToHost(bytesOf(words), gs.table, st); err != nil {
		t.Fatal(err)
	}
	dirty := 0
	for i := range entries {
		if words[2*i] != -1 || words[2*i+1] != -1 {
			dirty++
		}
	}
	if dirty > 0 {
		t.Fatalf("%d of %d table entries (%d lanes) not empty after the sampler's calls", dirty, entries, gs.lanes)
	}
}

// driverHasGraphs reports whether a stream can be captured into a graph.
// Context current.
func driverHasGraphs(t *testing.T) bool {
	st, err := cudaext.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	if err := st.BeginCapture(); errors.Is(err, cudaext.ErrNotSupported) {
		return false
	} else if err != nil {
		t.Fatal(err)
	}
	g, err := st.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	g.Destroy()
	return true
}

// compareGPUBatch reads the batch sampled into out (its work enqueued on
// st) and compares it with the CPU sampler's batch of seeds and key: the
// counts, n_id, edge_index and edge ids, byte for byte.
func compareGPUBatch(t *testing.T, cpu *Sampler, st *cudaext.Stream, seeds []int64, key uint64, H int, out DeviceOut) {
	t.Helper()
	counts := make([]byte, 8*CountsLen(H))
	if err := cudaext.CopyToHost(counts, out.Counts, st); err != nil {
		t.Fatal(err)
	}
	cnt := func(i int) int { return int(binary.LittleEndian.Uint64(counts[8*i:])) }
	var want Batch
	if err := cpu.Sample(seeds, key, &want); err != nil {
		t.Fatal(err)
	}
	n, e := cnt(0), cnt(1)
	if n != len(want.NID) || e != len(want.Src) {
		t.Fatalf("key %d: %d nodes and %d edges, CPU %d and %d", key, n, e, len(want.NID), len(want.Src))
	}
	for h := 0; h <= H; h++ {
		if cnt(2+h) != want.NumSampledNodes[h] {
			t.Fatalf("key %d: hop %d added %d nodes, CPU %d", key, h, cnt(2+h), want.NumSampledNodes[h])
		}
	}
	for h := 0; h < H; h++ {
		if cnt(3+H+h) != want.NumSampledEdges[h] {
			t.Fatalf("key %d: hop %d has %d edges, CPU %d", key, h+1, cnt(3+H+h), want.NumSampledEdges[h])
		}
	}
	nid := make([]int64, n)
	ei := make([]int64, 2*e)
	eid := make([]int64, e)
	for _, x := range []struct {
		dst []int64
		src cudaext.DevicePtr
	}{{nid, out.NID}, {ei, out.EdgeIndex}, {eid, out.EID}} {
		if len(x.dst) == 0 {
			continue
		}
		if err := cudaext.CopyToHost(bytesOf(x.dst), x.src, st); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(nid, want.NID) {
		t.Fatalf("key %d: n_id differs", key)
	}
	for j := 0; j < e; j++ {
		if ei[j] != int64(want.Src[j]) || ei[e+j] != int64(want.Dst[j]) {
			t.Fatalf("key %d: edge %d is %d -> %d, CPU %d -> %d", key, j, ei[j], ei[e+j], want.Src[j], want.Dst[j])
		}
	}
	if !slices.Equal(eid, want.EID) {
		t.Fatalf("key %d: edge ids differ", key)
	}
}

// TestTableEntries: a GPU sampler's hash table is a power of two of at
// least twice a batch's most nodes (at least 1024 entries), so it never
// fills and its probes stay short.
func TestTableEntries(t *testing.T) {
	for _, tc := range []struct{ nodes, want int64 }{
		{0, 1024}, {1, 1024}, {512, 1024}, {513, 2048}, {2708, 8192},
		{938_000, 1 << 21}, {1 << 20, 1 << 21}, {1<<20 + 1, 1 << 22}, {1<<31 - 1, 1 << 32},
	} {
		got := tableEntries(tc.nodes)
		if got != tc.want || got&(got-1) != 0 || got < 2*tc.nodes {
			t.Errorf("tableEntries(%d) = %d, want %d", tc.nodes, got, tc.want)
		}
	}
}

// TestClearsWhole: a table of up to clearWholeBytes (16 bytes an entry) is
// emptied whole after each batch, a larger one entry by entry; papers100M's
// batches of 1024 at [15,10,5] (938 K nodes: 2^21 entries, 32 MiB) are
// emptied whole.
func TestClearsWhole(t *testing.T) {
	for _, tc := range []struct {
		entries int64
		want    bool
	}{{1024, true}, {tableEntries(938_000), true}, {1 << 22, true}, {1<<22 + 1, false}, {1 << 23, false}} {
		if got := clearsWhole(tc.entries); got != tc.want {
			t.Errorf("clearsWhole(%d) = %v, want %v", tc.entries, got, tc.want)
		}
	}
}

// TestNewGPULanes: a GPU sampler takes 1 to MaxLanes lanes; NewGPU refuses
// others before it touches a device (no GPU needed).
func TestNewGPULanes(t *testing.T) {
	dg := &DeviceGraph{NumNodes: 100, NumEdges: 1000}
	for _, lanes := range []int{0, -1, MaxLanes + 1} {
		gs, err := NewGPU(nil, dg, []int{2}, 4, 10, lanes)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d lanes, want 1 to %d", lanes, MaxLanes)) {
			t.Errorf("NewGPU with %d lanes: %v, %v; want the lanes' range", lanes, gs, err)
		}
	}
}

// TestGPULanesRefused: a call of more batches than the sampler's lanes is
// refused (a GPU needed).
func TestGPULanesRefused(t *testing.T) {
	c := cudatest.Context(t)
	g := testGraphs()[0]
	c.Do(func() error {
		dg, err := NewDeviceGraph(g)
		if err != nil {
			t.Fatal(err)
		}
		defer dg.Close()
		gs, err := NewGPU(c, dg, []int{2}, 4, g.MaxDegree(), 2)
		if err != nil {
			t.Fatal(err)
		}
		defer gs.Close()
		st, err := cudaext.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Destroy()
		if err := gs.SampleMany(st, make([]Job, 3)); err == nil {
			t.Error("3 batches on a sampler of 2 lanes: no error")
		}
		return nil
	})
}

// TestGPULaneBytes: a lane's working memory, without a GPU. papers100M's
// batches of 1024 at [15,10,5]: a table of 2^21 entries (32 MiB, emptied
// whole: no slot array), 12 bytes an edge of the batch (936,960), 8 a node
// of the widest frontier (153,600), 12 an edge of the largest hop (768,000),
// 8 a scan block (750) and the lane's SampleArgs: 55,248,904 bytes. Batches
// that may reach most of a graph (-1 fanouts) take far more, and bad
// arguments get NewGPU's error.
func TestGPULaneBytes(t *testing.T) {
	papers := &DeviceGraph{NumNodes: 111_059_956, NumEdges: 1_615_685_872}
	got, err := GPULaneBytes(papers, []int{15, 10, 5}, 1024, 100_000)
	if want := int64(1<<25 + 12*936_960 + 8*153_600 + 12*768_000 + 8*750 + sampleArgsBytes); err != nil || got != want {
		t.Errorf("papers100M lane: %d bytes (%v), want %d", got, err, want)
	}
	products := &DeviceGraph{NumNodes: 2_449_029, NumEdges: 123_718_280}
	all, err := GPULaneBytes(products, []int{-1, -1}, 1024, 17_481)
	if err != nil || all < 1<<30 {
		t.Errorf("every neighbour of two hops on a products-sized graph: %d bytes a lane (%v), want over 1 GiB", all, err)
	}
	if _, err := GPULaneBytes(papers, []int{0}, 1024, 10); err == nil {
		t.Error("fanout 0: no error")
	}
	if _, err := GPULaneBytes(papers, []int{5}, 0, 10); err == nil {
		t.Error("batch size 0: no error")
	}
}

// TestGPUBytes: what NewGPU allocates (arrayBytes, summed into GPU.Bytes)
// is lanes x GPULaneBytes + GPUFixedBytes for every lane count, so a
// caller knows a sampler's memory before making it; each array is not
// empty and holds every lane's part. The small cases have parts of fewer
// bytes than the pad (a frontier of one node, one scan block, no edges, no
// slot array).
func TestGPUBytes(t *testing.T) {
	arrays := len((&GPU{}).laneArrays()) + 1 // and the SampleArgs
	if arrays != gpuArrays {
		t.Fatalf("%d arrays of a GPU sampler, GPUFixedBytes counts %d", arrays, gpuArrays)
	}
	for _, tc := range []struct {
		nodes, edges int64
		fanouts      []int
		batch        int
		maxDeg       int64
	}{
		{111_059_956, 1_615_685_872, []int{15, 10, 5}, 1024, 100_000}, // papers100M
		{2_449_029, 123_718_280, []int{-1, -1}, 1024, 17_481},         // every neighbour: a table never emptied whole
		{10, 0, []int{1}, 1, 0},                                       // no edges
		{10, 20, []int{1}, 1, 3},
		{2708, 5429, []int{5, 3}, 34, 168},
	} {
		for _, whole := range []bool{true, false} {
			setClearWhole(t, whole)
			dg := &DeviceGraph{NumNodes: tc.nodes, NumEdges: tc.edges}
			per, err := GPULaneBytes(dg, tc.fanouts, tc.batch, tc.maxDeg)
			if err != nil {
				t.Fatal(err)
			}
			c, err := gpuCapacities(tc.nodes, tc.edges, tc.fanouts, tc.batch, tc.maxDeg)
			if err != nil {
				t.Fatal(err)
			}
			parts := append(c.laneParts(), sampleArgsBytes)
			for lanes := 1; lanes <= MaxLanes; lanes++ {
				sizes := c.arrayBytes(lanes)
				if len(sizes) != arrays {
					t.Fatalf("%d array sizes, want %d", len(sizes), arrays)
				}
				var sum int64
				for i, n := range sizes {
					if n <= 0 || n < int64(lanes)*parts[i] {
						t.Fatalf("%v, %d lanes: array %d of %d bytes, a lane's part %d", tc, lanes, i, n, parts[i])
					}
					sum += n
				}
				if want := int64(lanes)*per + GPUFixedBytes; sum != want {
					t.Errorf("%v, clearWhole %v, %d lanes: %d bytes, want %d x %d + %d = %d", tc, whole, lanes, sum, lanes, per, GPUFixedBytes, want)
				}
			}
		}
	}
}

// TestWidths: a call of n batches runs at the least of the sampler's widths
// (the graphs captured: powers of two below its lanes, and its lanes) that
// holds n, for every lane count and call size.
func TestWidths(t *testing.T) {
	for lanes := 1; lanes <= MaxLanes; lanes++ {
		s := &GPU{lanes: lanes}
		ws := s.widths()
		for n := 1; n <= lanes; n++ {
			want := -1
			for _, w := range ws {
				if w >= n {
					want = w
					break
				}
			}
			if got := s.width(n); got != want {
				t.Fatalf("%d lanes (widths %v), a call of %d: width %d, want %d", lanes, ws, n, got, want)
			}
		}
	}
}

// TestGPULaneBytesHostile: a trainer's Open decides the batch size (at most
// ipc's MaxBatchSize, 2^20 seeds) and the fanouts. However large, a lane's
// bytes stay within what the graph and that batch size bound (the
// capacities are capped at its nodes and edges) and never overflow:
// the caller then gives such a trainer one lane, and its allocation fails
// with an error. Where the graph itself lets a batch pass 2^31 nodes or
// edges, ErrTooLarge, before anything is sized.
func TestGPULaneBytesHostile(t *testing.T) {
	papers := &DeviceGraph{NumNodes: 111_059_956, NumEdges: 1_615_685_872}
	// The most a lane can take on it: a table of twice its nodes, 12 bytes
	// an edge of the batch and of a hop, 8 a frontier node (the seeds, or
	// nodes of the graph), a node's slot, 8 a scan block of the largest
	// scan, and SampleArgs.
	const batch = 1 << 20
	bound := 16*tableEntries(papers.NumNodes) + 24*papers.NumEdges + 16*papers.NumNodes +
		8*(max(papers.NumEdges, batch)/scanBlock+1) + sampleArgsBytes
	for _, tc := range []struct {
		fanouts []int
		batch   int
	}{
		{[]int{-1, -1, -1}, batch},
		{[]int{1 << 30, 1 << 30}, batch},
		{[]int{1 << 30}, batch},
	} {
		n, err := GPULaneBytes(papers, tc.fanouts, tc.batch, 1<<20)
		if err != nil || n <= 1<<30 || n > bound {
			t.Errorf("fanouts %v, batches of %d: %d bytes a lane (%v), want over 1 GiB and at most %d", tc.fanouts, tc.batch, n, err, bound)
		}
	}
	huge := &DeviceGraph{NumNodes: 3_000_000_000, NumEdges: 5_000_000_000}
	if n, err := GPULaneBytes(huge, []int{-1, -1}, 1<<20, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("every neighbour on a graph of 5e9 edges: %d bytes a lane, %v; want ErrTooLarge", n, err)
	}
}
