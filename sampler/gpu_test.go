package sampler

import (
	"encoding/binary"
	"fmt"
	"slices"
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
// smaller sizes, with the kernels launched as the captured CUDA graph (the
// default) and one by one.
func TestGPUMatchesCPU(t *testing.T) {
	c := cudatest.Context(t)
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
				t.Run(fmt.Sprintf("g%d/%v/graph=%v", gi, tc.fanouts, graph), func(t *testing.T) {
					c.Do(func() error { // the context is current per thread: in the subtest's
						checkGPUSampler(t, c, g, dg, tc.fanouts, tc.batch, maxDeg, graph)
						return nil
					})
				})
			}
		}
		c.Do(dg.Close)
	}
}

func checkGPUSampler(t *testing.T, c *cudaext.Context, g *datasets.Graph, dg *DeviceGraph, fanouts []int, batch int, maxDeg int64, graph bool) {
	gs, err := NewGPU(c, dg, fanouts, batch+2, maxDeg)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	if !gs.Graph() {
		t.Fatal("a new GPU sampler launches its kernels one by one; the driver has graphs")
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
	out := DeviceOut{NID: alloc(8 * gs.MaxNodes()), EdgeIndex: alloc(16 * gs.MaxEdges()), EID: alloc(8 * gs.MaxEdges()),
		Counts: alloc(8 * int64(CountsLen(H)))}
	seedsDev := alloc(8 * int64(batch+2))
	for key := uint64(0); key < 4; key++ {
		seeds := testSeeds(g, batch, key+100)
		seeds = append(seeds, seeds[3], seeds[0]) // repeated seeds keep their place
		if key%2 == 1 {
			seeds = seeds[:len(seeds)/2+1] // fewer than the sampler's most
		}
		if err := cudaext.CopyFromHost(seedsDev, bytesOf(seeds), st); err != nil {
			t.Fatal(err)
		}
		if err := gs.Sample(st, seedsDev, len(seeds), key, out); err != nil {
			t.Fatal(err)
		}
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
}
