package gather

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/pinned"
)

func TestCUDAGatherMatchesCPU(t *testing.T) {
	c := cudatest.Context(t)
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		dt  dtype
		dim int
	}{
		{dtypes[0], 128}, // 512 B: 16-byte loads, one warp a row
		{dtypes[0], 100}, // 400 B: not a multiple of 128
		{dtypes[0], 3},   // 12 B
		{dtypes[0], 200}, // 800 B: several chunks a lane
		{dtypes[1], 128}, // 256 B: half a warp a row
		{dtypes[1], 127}, // 254 B: unaligned, 2-byte stores
		{dtypes[1], 7},   // 14 B
		{dtypes[1], 333}, // 666 B: two pieces
		{dtypes[2], 64},  // 128 B
		{dtypes[2], 301}, // 602 B
		{dtypes[2], 1},   // 2 B
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s_x%d", tc.dt.name, tc.dim), func(t *testing.T) {
			const rows = 7919
			rb := tc.dt.size * tc.dim
			src := randomTable(t, tc.dt, tc.dim, rows, r)
			st, err := pinned.Load(src, rb, rows, &pinned.Options{Context: c})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, opt := range []*CUDAOptions{nil, {MaxSMs: 3}, {MaxSMs: -1}, {forceAny: true}, {forceAny: true, fullLines: true},
				{MaxSMs: 2, forceAny: true}} {
				g, err := NewCUDA(c, st, opt)
				if err != nil {
					t.Fatal(err)
				}
				for trial := range 4 {
					n := []int{1, 33, 3000, 6000}[trial]
					nid := randomBatch(r, n, rows, trial != 2)
					for _, sorted := range []bool{true, false} {
						var order []int32
						if sorted {
							order = SortOrder(nid)
						}
						for _, off := range []int64{0, 8, 2} { // destination misalignment
							checkGather(t, c, g, TableOf(st), nid, order, off)
						}
					}
				}
				if err := g.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkGather runs g and the CPU gather into poisoned buffers (one spare row
// after the end) and compares every byte.
func checkGather(t *testing.T, c *cudaext.Context, g *CUDA, tab Table, nid []int64, order []int32, off int64) {
	t.Helper()
	rb := int64(tab.RowBytes)
	size := (int64(len(nid))+1)*rb + off
	want := bytes.Repeat([]byte{poison}, int(size))
	if err := (&CPU{}).Gather(want[off:], tab, nid, order); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	err := c.Do(func() error {
		p, err := cudaext.MemAlloc(size)
		if err != nil {
			return err
		}
		defer cudaext.MemFree(p)
		if err := cudaext.MemsetD8Async(p, poison, size, g.Stream()); err != nil {
			return err
		}
		if err := g.Gather(context.Background(), Dest{Device: p + cudaext.DevicePtr(off), DeviceBytes: size - off}, nid, order); err != nil {
			return err
		}
		return cudaext.CopyToHost(got, p, g.Stream())
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("rows %d B, %d rows, sorted %v, dst offset %d: first difference at byte %d (row %d): got %#x want %#x",
			rb, len(nid), order != nil, off, i, (int64(i)-off)/rb, got[i], want[i])
	}
}

func TestCUDASweepMatchesCPU(t *testing.T) {
	c := cudatest.Context(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		dt  dtype
		dim int
	}{{dtypes[0], 128}, {dtypes[0], 100}, {dtypes[1], 127}, {dtypes[2], 64}} {
		t.Run(fmt.Sprintf("%s_x%d", tc.dt.name, tc.dim), func(t *testing.T) {
			const rows = 5003
			rb := tc.dt.size * tc.dim
			st, err := pinned.Load(randomTable(t, tc.dt, tc.dim, rows, r), rb, rows, &pinned.Options{Context: c})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, opt := range []*CUDAOptions{nil, {forceAny: true, fullLines: true}, {forceAny: true}} {
				sweepRounds(t, c, st, opt, r, rb)
			}
		})
	}
}

func sweepRounds(t *testing.T, c *cudaext.Context, st *pinned.Store, opt *CUDAOptions, r *rand.Rand, rb int) {
	const rows = 5003
	g, err := NewCUDA(c, st, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tab := TableOf(st)
	// Three overlapping batches (about half the table each), one
	// without an order, one of them empty in the second round; in the
	// third, MaxSweepParts batches.
	for round := range 3 {
		var parts []SweepPart
		var want [][]byte
		sizes := []int{2500, 2000, 1200}
		if round == 2 {
			sizes = []int{900, 10, 1, 3000, 77, 640, 2, 1500, 5, 1200, 0, 333, 64, 2048, 7, 96,
				12, 400, 0, 1, 2200, 31, 700, 5, 900, 64, 1800, 3, 250, 1000, 9, 128}[:MaxSweepParts]
		}
		for k, n := range sizes {
			if round == 1 && k == 1 {
				n = 0
			}
			nid := randomBatch(r, n, rows, true)
			var order []int32
			if k%3 != 2 {
				order = SortOrder(nid)
			}
			w := bytes.Repeat([]byte{poison}, (n+1)*rb)
			parts = append(parts, SweepPart{Nid: nid, Order: order, Dst: Dest{Host: w}})
			want = append(want, w)
		}
		if err := (&CPU{}).Sweep(tab, parts); err != nil {
			t.Fatal(err)
		}
		err := c.Do(func() error {
			ptrs := make([]cudaext.DevicePtr, len(parts))
			for k := range parts {
				p, err := cudaext.MemAlloc(int64(len(want[k])))
				if err != nil {
					return err
				}
				defer cudaext.MemFree(p)
				if err := cudaext.MemsetD8Async(p, poison, int64(len(want[k])), g.Stream()); err != nil {
					return err
				}
				ptrs[k] = p
				parts[k].Dst = Dest{Device: p}
			}
			pl, err := g.Sweep(context.Background(), parts)
			if err != nil {
				return err
			}
			total := 0
			for _, p := range parts {
				total += len(p.Nid)
			}
			if pl.Delivered() != int64(total) || pl.Unique() >= pl.Delivered() {
				t.Errorf("plan: %d unique, %d delivered", pl.Unique(), pl.Delivered())
			}
			for k := range parts {
				got := make([]byte, len(want[k]))
				if err := cudaext.CopyToHost(got, ptrs[k], g.Stream()); err != nil {
					return err
				}
				if !bytes.Equal(got, want[k]) {
					t.Errorf("round %d part %d differs from the CPU gather", round, k)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// smallBackend is a CUDA backend over a zeroed 100 x 64-byte table, closed
// with the test.
func smallBackend(t *testing.T) (*cudaext.Context, *CUDA) {
	t.Helper()
	c := cudatest.Context(t)
	st, err := pinned.Load(make([]byte, 64*100), 64, 100, &pinned.Options{Context: c})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewCUDA(c, st, nil)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		st.Close()
	})
	return c, g
}

func TestCUDARejectsBadInput(t *testing.T) {
	_, g := smallBackend(t)
	ctx := context.Background()
	if err := g.Gather(ctx, Dest{Device: 1 << 20}, []int64{5, 100}, nil); err == nil {
		t.Error("out of range id accepted")
	}
	if err := g.Gather(ctx, Dest{}, []int64{5}, nil); err == nil {
		t.Error("no destination accepted")
	}
	if err := g.Gather(ctx, Dest{Device: 1 << 20, DeviceBytes: 64}, []int64{1, 2}, nil); err == nil {
		t.Error("small destination accepted")
	}
}
