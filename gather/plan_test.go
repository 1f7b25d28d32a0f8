package gather

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/pinned"
)

// deviceBytes copies host bytes to a new device allocation, freed with the
// test.
func deviceBytes(t *testing.T, g *CUDA, b []byte) cudaext.DevicePtr {
	t.Helper()
	p, err := cudaext.MemAlloc(int64(max(len(b), 16)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.ctx.Do(func() error { return cudaext.MemFree(p) }) })
	if len(b) > 0 {
		if err := cudaext.CopyFromHost(p, b, g.Stream()); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func int64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// TestSweepOnDeviceMatchesCPU: sweeps planned on the GPU, over batches that
// overlap (and repeat ids within a batch), with every row size the kernels
// distinguish, and with a device cache holding some rows whose bytes differ
// from the table's (so the test sees which copy each id came from): every
// destination must hold exactly the rows, or cache rows, and labels the CPU
// says.
func TestSweepOnDeviceMatchesCPU(t *testing.T) {
	c := cudatest.Context(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		dt  dtype
		dim int
	}{{dtypes[0], 128}, {dtypes[0], 100}, {dtypes[1], 127}, {dtypes[2], 64}, {dtypes[0], 1}} {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s_x%d_cache%v", tc.dt.name, tc.dim, cached), func(t *testing.T) {
				const rows = 100_003
				rb := tc.dt.size * tc.dim
				table := randomTable(t, tc.dt, tc.dim, rows, r)
				st, err := pinned.Load(table, rb, rows, &pinned.Options{Context: c})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				labels := make([]int32, rows)
				for i := range labels {
					labels[i] = int32(r.IntN(50)) - 1
				}
				var g *CUDA
				err = c.Do(func() error {
					g, err = NewCUDA(c, st, nil)
					if err != nil {
						return err
					}
					g.opts.Labels = deviceBytes(t, g, unsafe.Slice((*byte)(unsafe.Pointer(&labels[0])), 4*rows))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				// The cache: every 7th row, held at slot i/7, with its bytes
				// inverted.
				slotOf := make([]int32, rows)
				var cacheRows []byte
				for i := range slotOf {
					slotOf[i] = -1
					if cached && i%7 == 0 {
						slotOf[i] = int32(len(cacheRows) / rb)
						for _, x := range table[i*rb : (i+1)*rb] {
							cacheRows = append(cacheRows, ^x)
						}
					}
				}
				if cached {
					c.Do(func() error {
						g.opts.Cache = &DeviceCache{Slot: deviceBytes(t, g, unsafe.Slice((*byte)(unsafe.Pointer(&slotOf[0])), 4*rows)),
							Rows: deviceBytes(t, g, cacheRows)}
						return nil
					})
				}
				for round, sizes := range [][]int{{30_000, 20_000, 1}, {0, 5000}, {900, 10, 1, 3000, 77, 640, 2, 45_000},
					{70_000, 70_000, 70_000, 70_000}, // more ids than the table has rows
					{3000, 1, 0, 2500, 900, 10, 4000, 77, 640, 2, 1500, 5, 1200, 333, 64, 2048},
					{3000, 1, 0, 2500, 900, 10, 4000, 77, 640, 2, 1500, 5, 1200, 333, 64, 2048, // MaxDeviceParts batches
						12, 400, 0, 1, 2200, 31, 700, 5, 900, 64, 1800, 3, 250, 1000, 9, 128}} {
					checkSweepOnDevice(t, c, g, table, labels, slotOf, cacheRows, rb, sizes, r, round)
				}
			})
		}
	}
}

func checkSweepOnDevice(t *testing.T, c *cudaext.Context, g *CUDA, table []byte, labels, slotOf []int32, cacheRows []byte,
	rb int, sizes []int, r *rand.Rand, round int) {
	t.Helper()
	rows := int64(len(labels))
	var ids [][]int64
	for _, n := range sizes {
		nid := randomBatch(r, n, rows, false) // repeats allowed
		if n > 100 && len(ids) > 0 {
			copy(nid[n/2:], ids[0][:min(len(ids[0]), n/4)]) // overlap with the first batch
		}
		ids = append(ids, nid)
	}
	// What the sweep's counters must grow by.
	var lookups, hits uint64
	read := map[int64]bool{}
	for _, nid := range ids {
		for _, id := range nid {
			lookups++
			if slotOf[id] >= 0 {
				hits++
			} else {
				read[id] = true
			}
		}
	}
	before, err := g.PlanStats()
	if err != nil {
		t.Fatal(err)
	}
	err = c.Do(func() error {
		parts := make([]DevicePart, len(ids))
		xs := make([]cudaext.DevicePtr, len(ids))
		ys := make([]cudaext.DevicePtr, len(ids))
		for j, nid := range ids {
			n := int64(len(nid))
			xs[j] = deviceBytes(t, g, bytes.Repeat([]byte{poison}, int((n+1)*int64(rb))))
			ys[j] = deviceBytes(t, g, bytes.Repeat([]byte{poison}, int(8*(n+1))))
			parts[j] = DevicePart{IDs: deviceBytes(t, g, int64Bytes(nid)), N: n, X: xs[j], XBytes: (n + 1) * int64(rb), Y: ys[j]}
		}
		if err := g.SweepOnDevice(context.Background(), parts); err != nil {
			return err
		}
		for j, nid := range ids {
			n := len(nid)
			gotX := make([]byte, (n+1)*rb)
			gotY := make([]byte, 8*(n+1))
			if err := cudaext.CopyToHost(gotX, xs[j], g.Stream()); err != nil {
				return err
			}
			if err := cudaext.CopyToHost(gotY, ys[j], g.Stream()); err != nil {
				return err
			}
			for i, id := range nid {
				want := table[id*int64(rb) : (id+1)*int64(rb)]
				if s := slotOf[id]; s >= 0 {
					want = cacheRows[int(s)*rb : (int(s)+1)*rb]
				}
				if !bytes.Equal(gotX[i*rb:(i+1)*rb], want) {
					t.Fatalf("round %d part %d position %d (row %d, cache slot %d): row differs", round, j, i, id, slotOf[id])
				}
				if y := int64(binary.LittleEndian.Uint64(gotY[8*i:])); y != int64(labels[id]) {
					t.Fatalf("round %d part %d position %d: label %d, want %d", round, j, i, y, labels[id])
				}
			}
			for _, b := range gotX[n*rb:] {
				if b != poison {
					t.Fatalf("round %d part %d: written past its %d rows", round, j, n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := g.PlanStats()
	if err != nil {
		t.Fatal(err)
	}
	got := PlanStats{Lookups: after.Lookups - before.Lookups, Hits: after.Hits - before.Hits, RowsRead: after.RowsRead - before.RowsRead}
	if want := (PlanStats{Lookups: lookups, Hits: hits, RowsRead: uint64(len(read))}); got != want {
		t.Fatalf("round %d: sweep counters grew by %+v, want %+v", round, got, want)
	}
}

// A sweep size a trainer's Open could make hostile (none, negative, past
// MaxSweepIDs) is refused before anything is allocated or any CUDA call is
// made: the backend here has no context at all.
func TestReservePlanRefusesBadSizes(t *testing.T) {
	for _, bad := range []int64{0, -1, MaxSweepIDs + 1, 1 << 62} {
		err := (&CUDA{}).ReservePlan(bad)
		if err == nil || !strings.Contains(err.Error(), "reserving a sweep of") {
			t.Fatalf("ReservePlan(%d): %v, want the size refused", bad, err)
		}
	}
}

// PlanBytesFor is what a new backend's planning holds after ReservePlan:
// worked out by hand for papers100M's table and for tables smaller than the
// sweep (at most as many distinct rows as the table has).
func TestPlanBytesFor(t *testing.T) {
	for _, c := range []struct {
		rows, ids, want int64
	}{
		// 3,470,624 words of bitmap and of word bases, 3,390 block sums,
		// 64 bytes of counters; 1000 rows of id, count and first, 8000
		// bytes of lists.
		{111_059_956, 1000, 2*4*3_470_624 + 4*3_390 + 64 + 3*4*1000 + 8*1000},
		{10, 3, 16 + 16 + 16 + 64 + 3*16 + 24},        // every buffer at least 16 bytes
		{10, 100, 16 + 16 + 16 + 64 + 3*4*10 + 8*100}, // rows capped at the table's
		{50_000, 30_000, 2*4*1563 + 16 + 64 + 3*4*30_000 + 8*30_000},
	} {
		if got := PlanBytesFor(c.rows, c.ids); got != c.want {
			t.Errorf("PlanBytesFor(%d, %d) = %d, want %d", c.rows, c.ids, got, c.want)
		}
	}
}

// ReservePlan allocates a sweep's planning memory up front: a sweep of up
// to the reserved ids then allocates nothing (the buffers stay where they
// were) and still delivers every row; one larger grows them.
func TestReservePlan(t *testing.T) {
	c := cudatest.Context(t)
	r := rand.New(rand.NewPCG(7, 8))
	const rows, dim = 50_000, 32
	rb := 4 * dim
	table := randomTable(t, dtypes[0], dim, rows, r)
	st, err := pinned.Load(table, rb, rows, &pinned.Options{Context: c})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	labels := make([]int32, rows)
	slotOf := make([]int32, rows)
	for i := range slotOf {
		slotOf[i] = -1
	}
	var g *CUDA
	if err := c.Do(func() (err error) {
		g, err = NewCUDA(c, st, nil)
		if err == nil {
			g.opts.Labels = deviceBytes(t, g, unsafe.Slice((*byte)(unsafe.Pointer(&labels[0])), 4*rows))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := g.PlanBytes(); got != 0 {
		t.Fatalf("PlanBytes before any sweep: %d, want 0", got)
	}
	// What the planning holds for a sweep of n ids (each buffer at least 16
	// bytes): a bitmap and its word bases over the table's rows, a sum per
	// block of words, three small counters, and per row (n of them here)
	// its id, count and first delivery, and 8 bytes an id of lists.
	words := int64(rows+31) / 32
	planBytes := func(n int64) int64 {
		return 2*4*words + max(4*((words+wordsPerBlock-1)/wordsPerBlock), 16) + 16 + 32 + 16 + 3*4*n + 8*n
	}
	const reserved = 30_000
	if err := g.ReservePlan(reserved); err != nil {
		t.Fatal(err)
	}
	if got, want := g.PlanBytes(), planBytes(reserved); got != want || got != PlanBytesFor(rows, reserved) {
		t.Fatalf("PlanBytes after ReservePlan(%d): %d, want %d (PlanBytesFor: %d)", reserved, got, want, PlanBytesFor(rows, reserved))
	}
	held := g.plan
	if held.capIDs != reserved || held.capRows != reserved {
		t.Fatalf("after ReservePlan(%d): room for %d ids, %d rows", reserved, held.capIDs, held.capRows)
	}
	checkSweepOnDevice(t, c, g, table, labels, slotOf, nil, rb, []int{20_000, 10_000}, r, 0)
	if g.plan.rows != held.rows || g.plan.extras != held.extras || g.plan.capIDs != reserved {
		t.Fatalf("a sweep of the reserved %d ids reallocated the plan", reserved)
	}
	checkSweepOnDevice(t, c, g, table, labels, slotOf, nil, rb, []int{20_000, 20_000}, r, 1)
	if g.plan.capIDs != 40_000 || g.plan.capRows != 40_000 {
		t.Fatalf("a sweep of 40000 ids: room for %d ids, %d rows", g.plan.capIDs, g.plan.capRows)
	}
	if got, want := g.PlanBytes(), planBytes(40_000); got != want {
		t.Fatalf("PlanBytes after a sweep of 40000 ids: %d, want %d", got, want)
	}
}
