package gather

import (
	"bytes"
	"cmp"
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

func TestPlanSweep(t *testing.T) {
	parts := []SweepPart{{Nid: []int64{5, 1, 9}}, {Nid: []int64{9, 2}}, {Nid: nil}, {Nid: []int64{1}}}
	pl, err := PlanSweep(parts, 10)
	if err != nil {
		t.Fatal(err)
	}
	rows, offs, part, pos := pl.Deliveries()
	if !slices.Equal(rows, []int64{1, 2, 5, 9}) || !slices.Equal(offs, []int64{0, 2, 3, 4, 6}) {
		t.Fatalf("rows %v offs %v", rows, offs)
	}
	if pl.Unique() != 4 || pl.Delivered() != 6 {
		t.Fatal("counts")
	}
	// Row 1 goes to part 0 position 1 and part 3 position 0.
	if part[0] != 0 || pos[0] != 1 || part[1] != 3 || pos[1] != 0 {
		t.Fatalf("part %v pos %v", part, pos)
	}
	// The kernels' form: 8 bytes a distinct row; row 1 (shared) and row 9
	// (shared) keep their deliveries in extras.
	d := func(part, pos uint32) uint32 { return part<<partShift | pos }
	shared := func(extra uint32) uint32 { return sharedRow | extra }
	r32, first, extras := compactOf(pl)
	if !slices.Equal(r32, []uint32{1, 2, 5, 9}) ||
		!slices.Equal(first, []uint32{shared(0), d(1, 1), d(0, 0), shared(3)}) ||
		!slices.Equal(extras, []uint32{2, d(0, 1), d(3, 0), 2, d(0, 2), d(1, 0)}) {
		t.Fatalf("compact form: rows %v first %#x extras %#x", r32, first, extras)
	}
	if _, err := PlanSweep([]SweepPart{{Nid: []int64{10}}}, 10); err == nil {
		t.Fatal("out of range accepted")
	}
}

// TestPlanSweepCompactRoundTrip checks random plans, small and large enough
// to be merged in several ranges, against a plain sort of every (row, part,
// position) delivery, and decodes the kernels' form of each back into
// deliveries, as the kernels do.
func TestPlanSweepCompactRoundTrip(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(7)) // several ranges even on few cores
	r := rand.New(rand.NewPCG(7, 8))
	type dl struct {
		row       int64
		part, pos uint32
	}
	for trial := range 24 {
		rows := int64(1 + r.IntN(5000))
		maxN := 3000
		if trial%4 == 3 {
			rows, maxN = int64(50_000+r.IntN(400_000)), 200_000
		}
		parts := make([]SweepPart, 1+r.IntN(MaxSweepParts))
		var want []dl
		for k := range parts {
			n := r.IntN(maxN)
			if maxN > 3000 { // enough deliveries (over 2^16) to be planned in several ranges
				n = maxN/2 + r.IntN(maxN/2)
			}
			for i := range n {
				v := r.Int64N(rows)
				parts[k].Nid = append(parts[k].Nid, v)
				want = append(want, dl{v, uint32(k), uint32(i)})
			}
			if k%2 == 0 {
				parts[k].Order = SortOrder(parts[k].Nid)
			}
		}
		slices.SortFunc(want, func(a, b dl) int {
			if a.row != b.row {
				return cmp.Compare(a.row, b.row)
			}
			if a.part != b.part {
				return cmp.Compare(a.part, b.part)
			}
			return cmp.Compare(a.pos, b.pos)
		})
		pl, err := PlanSweep(parts, rows)
		if err != nil {
			t.Fatal(err)
		}
		if maxN > 3000 && len(pl.chunks) < 2 {
			t.Fatalf("trial %d: %d deliveries merged in %d range(s)", trial, len(want), len(pl.chunks))
		}
		var plain, got []dl
		urows, offs, part, pos := pl.Deliveries()
		for u, v := range urows {
			if u > 0 && v <= urows[u-1] {
				t.Fatalf("trial %d: rows not strictly ascending at %d", trial, u)
			}
			for i := offs[u]; i < offs[u+1]; i++ {
				plain = append(plain, dl{v, uint32(part[i]), uint32(pos[i])})
			}
		}
		// The concatenated form the kernels read, decoded as they do.
		r32, first, extras := compactOf(pl)
		for u, f := range first {
			ds := []uint32{f}
			if f&sharedRow != 0 {
				i := f &^ sharedRow
				ds = extras[i+1 : i+1+extras[i]]
			}
			for _, e := range ds {
				got = append(got, dl{int64(r32[u]), e >> partShift, e & (1<<partShift - 1)})
			}
		}
		if !slices.Equal(plain, want) || !slices.Equal(got, want) || int(pl.Delivered()) != len(want) || int(pl.Unique()) != len(urows) {
			t.Fatalf("trial %d (%d parts, %d deliveries): plan lists %d deliveries, compact form %d; they differ from a plain sort",
				trial, len(parts), len(want), len(plain), len(got))
		}
	}
}

// compactOf is the plan's concatenated compact form, as uploaded.
func compactOf(pl *SweepPlan) (rows, first, extras []uint32) {
	rows, first, extras = make([]uint32, pl.Unique()), make([]uint32, pl.Unique()), make([]uint32, pl.extras())
	pl.compact(rows, first, extras)
	return rows, first, extras
}

func TestPlanSweepRejectsBadOrder(t *testing.T) {
	nid := []int64{4, 2, 9}
	for _, order := range [][]int32{{0, 1, 2}, {1, 0, 7}, {1, 0}} {
		if _, err := PlanSweep([]SweepPart{{Nid: nid, Order: order}}, 10); err == nil {
			t.Errorf("order %v accepted", order)
		}
	}
}
func TestCPUBackend(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tab := Table{Rows: make([]byte, 100*12), RowBytes: 12, NumRows: 100}
	for i := range tab.Rows {
		tab.Rows[i] = byte(r.Uint32())
	}
	var b Backend = NewCPUBackend(tab, 0)
	nid := []int64{3, 99, 0, 3}
	dst := make([]byte, 4*12)
	if err := b.Gather(context.Background(), Dest{Host: dst}, nid, SortOrder(nid)); err != nil {
		t.Fatal(err)
	}
	for i, v := range nid {
		if !bytes.Equal(dst[i*12:(i+1)*12], tab.Rows[v*12:(v+1)*12]) {
			t.Fatal("row", i)
		}
	}
	if err := b.Gather(context.Background(), Dest{}, nid, nil); err == nil {
		t.Fatal("no host destination accepted")
	}
}
