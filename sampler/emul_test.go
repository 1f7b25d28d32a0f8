package sampler

// The GPU sampler's kernels, run on the CPU: their logic checked against the
// CPU sampler where there is no nvcc and no GPU.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// TestKernelsEmulatedMatchCPU: cudaext/kernels/sample.cu, compiled by g++
// as host C++ (testdata/emul/cuda_emul.h: blocks one after the other, a
// block's threads in turn or, where they work together, on threads with
// real barriers) and launched in the order gpu.go enqueues a call
// (testdata/emul/sample_emul.cpp), samples the CPU sampler's batches: n_id,
// edge_index, edge ids and the per-hop counts, ten batches in four calls
// of several lanes (4 batches; 3 at a width of 4, the lane the call before
// used idle; 1; 2; one batch of no seeds) on one sampler's working memory
// (which must come back empty, its idle lanes marked idle) for each of
// [15 10 5], [-1 3], [40 2] and [1 1 1 1], with the tables emptied either
// way between calls. On a GPU TestGPUMatchesCPU
// checks the same on the real thing; this one runs everywhere g++ does
// (scripts/setup.sh installs it; GNNLOADER_REQUIRE_GXX=1 makes its absence
// a failure), so a change to the kernels' logic is checked before it meets
// a GPU. GNNLOADER_SAMPLE_CU names another sample.cu to check instead.
func TestKernelsEmulatedMatchCPU(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		if os.Getenv("GNNLOADER_REQUIRE_GXX") == "1" {
			t.Fatalf("no g++ (GNNLOADER_REQUIRE_GXX=1): %v", err)
		}
		t.Skipf("no g++ to compile the kernels for the CPU: %v", err)
	}
	if testing.Short() {
		t.Skip("-short: the emulation takes a while")
	}
	src := os.Getenv("GNNLOADER_SAMPLE_CU")
	if src == "" {
		src = "../cudaext/kernels/sample.cu"
	}
	if src, err = filepath.Abs(src); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "emul")
	build := exec.Command(gxx, "-O2", "-std=c++20", "-pthread", "-w", "-include", "testdata/emul/cuda_emul.h",
		fmt.Sprintf("-DSAMPLE_CU=%q", src), "testdata/emul/sample_emul.cpp", "-o", bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	// kernel: the table emptied entry by entry (gnn_reset_find, gnn_reset);
	// memset: emptied whole between batches, as gpu.go does for small tables.
	for _, mode := range []string{"kernel", "memset"} {
		t.Run(mode, func(t *testing.T) {
			dump := filepath.Join(dir, "batches-"+mode)
			out, err := exec.Command(bin, mode, dump).CombinedOutput()
			if err != nil {
				t.Fatalf("the emulation: %v\n%s", err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if !strings.HasSuffix(line, "table entries left 0") {
					t.Errorf("the table is not empty after a batch: %s", line)
				}
			}
			compared, err := compareEmulated(dump)
			if err != nil {
				t.Fatal(err)
			}
			if compared != 40 {
				t.Fatalf("%d batches compared, want 40", compared)
			}
		})
	}
}

// compareEmulated reads sample_emul.cpp's file (its graph, each case's
// fanouts, each batch's key, seeds and hash), samples each batch with the
// CPU sampler and returns how many it compared, or the first that differs.
func compareEmulated(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var rerr error
	next := func() int64 {
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil && rerr == nil {
			rerr = fmt.Errorf("%s: truncated: %w", path, err)
		}
		return int64(binary.LittleEndian.Uint64(b[:]))
	}
	n, e := next(), next()
	if rerr != nil || n <= 0 || e < 0 || n > 1<<24 || e > 1<<26 {
		return 0, fmt.Errorf("%s: %d nodes, %d edges (%v)", path, n, e, rerr)
	}
	g := &datasets.Graph{NumNodes: n, Indptr: make([]int64, n+1), Indices32: make([]int32, e)}
	for i := range g.Indptr {
		g.Indptr[i] = next()
	}
	for i := range g.Indices32 {
		g.Indices32[i] = int32(next())
	}
	compared := 0
	cases := next()
	for c := int64(0); c < cases && rerr == nil; c++ {
		hops := next()
		if hops < 1 || hops > MaxHops {
			return compared, fmt.Errorf("%s: case %d has %d hops (1 to %d)", path, c, hops, MaxHops)
		}
		fanouts := make([]int, hops)
		for i := range fanouts {
			fanouts[i] = int(next())
		}
		s, err := New(g, Options{Fanouts: fanouts, Workers: 1, EdgeIDs: true})
		if err != nil {
			return compared, err
		}
		batches := next()
		for b := int64(0); b < batches && rerr == nil; b++ {
			key := uint64(next())
			ns := next()
			if ns < 0 || ns > n {
				return compared, fmt.Errorf("%s: batch %d of case %d has %d seeds (a graph of %d nodes)", path, b, c, ns, n)
			}
			seeds := make([]int64, ns)
			for i := range seeds {
				seeds[i] = next()
			}
			want := uint64(next())
			if rerr != nil {
				break
			}
			var out Batch
			if err := s.Sample(seeds, key, &out); err != nil {
				return compared, err
			}
			if got := emulHash(&out, len(fanouts)); got != want {
				return compared, fmt.Errorf("fanouts %v, batch %d (key %d): the emulated kernels' hash %016x, the CPU sampler's %016x",
					fanouts, b, key, want, got)
			}
			compared++
		}
	}
	return compared, rerr
}

// emulHash is sample_emul.cpp's: FNV-1a over 8-byte words of n_id,
// edge_index (sources, then targets), the edge ids and the GPU's counts
// ([0] nodes, [1] edges, the nodes added per hop from the seeds, the edges
// per hop, then the flags' scan scratch: the last hop's new nodes).
func emulHash(b *Batch, hops int) uint64 {
	h := uint64(1469598103934665603)
	mix := func(x uint64) { h = (h ^ x) * 1099511628211 }
	for _, v := range b.NID {
		mix(uint64(v))
	}
	for _, v := range b.Src {
		mix(uint64(int64(v)))
	}
	for _, v := range b.Dst {
		mix(uint64(int64(v)))
	}
	for _, v := range b.EID {
		mix(uint64(v))
	}
	counts := []int{len(b.NID), len(b.Src)}
	counts = append(counts, b.NumSampledNodes[:hops+1]...)
	counts = append(counts, b.NumSampledEdges[:hops]...)
	counts = append(counts, b.NumSampledNodes[hops])
	for _, c := range counts {
		mix(uint64(int64(c)))
	}
	return h
}
