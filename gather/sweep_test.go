package gather

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPlanSweep(t *testing.T) {
	parts := []SweepPart{{Nid: []int64{5, 1, 9}}, {Nid: []int64{9, 2}}, {Nid: nil}, {Nid: []int64{1}}}
	pl, err := PlanSweep(parts, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pl.Rows, []int64{1, 2, 5, 9}) || !slices.Equal(pl.Offs, []int64{0, 2, 3, 4, 6}) {
		t.Fatalf("rows %v offs %v", pl.Rows, pl.Offs)
	}
	if pl.Unique() != 4 || pl.Delivered() != 6 {
		t.Fatal("counts")
	}
	// Row 1 goes to part 0 position 1 and part 3 position 0.
	if pl.Part[0] != 0 || pl.Pos[0] != 1 || pl.Part[1] != 3 || pl.Pos[1] != 0 {
		t.Fatalf("part %v pos %v", pl.Part, pl.Pos)
	}
	if _, err := PlanSweep([]SweepPart{{Nid: []int64{10}}}, 10); err == nil {
		t.Fatal("out of range accepted")
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
