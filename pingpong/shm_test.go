package pingpong

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nodeLayout is the layout of node batches of at most maxNodes nodes with
// rowBytes-byte feature rows and maxEdges edges.
func nodeLayout(t *testing.T, maxNodes, maxEdges int64, rowBytes int) Layout {
	t.Helper()
	l, err := NewLayout([]Region{
		{Name: "x", Bytes: maxNodes * int64(rowBytes), DType: "float32"},
		{Name: "y", Bytes: 8 * maxNodes, DType: "int64"},
		{Name: "n_id", Bytes: 8 * maxNodes, DType: "int64"},
		{Name: "edge_index", Bytes: 16 * maxEdges, DType: "int64"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testLayout(t *testing.T) Layout { return nodeLayout(t, 100, 300, 20) }

func TestLayoutAligned(t *testing.T) {
	l := testLayout(t)
	var end int64
	for _, r := range l.Regions {
		if r.Offset%Alignment != 0 {
			t.Fatalf("region %s at %d not aligned", r.Name, r.Offset)
		}
		if r.Offset < end {
			t.Fatalf("region %s overlaps the one before", r.Name)
		}
		end = r.Offset + r.Bytes
	}
	if l.SlotBytes%Alignment != 0 || l.SlotBytes < end {
		t.Fatalf("slot bytes %d", l.SlotBytes)
	}
	if l.Region("x").Bytes != 100*20 || l.Region("edge_index").Bytes != 2*300*8 {
		t.Fatalf("capacities: %+v", l.Regions)
	}
}

func TestShmRingLifecycle(t *testing.T) {
	r, err := NewShmRing("test", 2, testLayout(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	a, _ := r.Acquire(ctx)
	b, _ := r.Acquire(ctx)
	if a == b {
		t.Fatal("same slot twice")
	}
	r.Publish(a, Tag{0, 0})
	r.Publish(b, Tag{0, 1})
	// Both held: Acquire must wait until the trainer releases one.
	got := make(chan int)
	go func() {
		i, err := r.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- i
	}()
	select {
	case i := <-got:
		t.Fatalf("acquired slot %d while both are held", i)
	case <-time.After(50 * time.Millisecond):
	}
	if err := r.Release(b, Tag{0, 0}, false); err == nil {
		t.Fatal("release with the wrong tag accepted")
	}
	if err := r.Release(7, Tag{}, false); err == nil {
		t.Fatal("release of a slot that does not exist accepted")
	}
	if err := r.Release(b, Tag{0, 1}, false); err != nil {
		t.Fatal(err)
	}
	if i := <-got; i != b {
		t.Fatalf("acquired %d, want the released %d", i, b)
	}
	if err := r.Release(b, Tag{0, 1}, false); err == nil {
		t.Fatal("double release accepted")
	}
	if r.Held() != 1 {
		t.Fatalf("held %d", r.Held())
	}
}

func TestShmRingSharedWithMapping(t *testing.T) {
	r, err := NewShmRing("test", 2, testLayout(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// What a trainer does: map the fd it was given and read the slot.
	other, err := unix.Mmap(r.FD(), 0, int(r.Bytes()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(other)
	x := r.Region(1, "x")
	copy(x, "hello")
	off := r.Layout.SlotBytes + r.Layout.Region("x").Offset
	if string(other[off:off+5]) != "hello" {
		t.Fatal("trainer mapping does not see the slot")
	}
}

func TestShmRingCloseWakesAcquire(t *testing.T) {
	r, err := NewShmRing("test", 1, testLayout(t))
	if err != nil {
		t.Fatal(err)
	}
	i, _ := r.Acquire(context.Background())
	r.Publish(i, Tag{})
	done := make(chan error)
	go func() { _, err := r.Acquire(context.Background()); done <- err }()
	time.Sleep(10 * time.Millisecond)
	r.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
	r.ReleaseAll() // after Close: must not panic
}

// Slots are handed out in turn: one released at once is not taken again
// while others are free (on a GPU it may still be in use by its fill).
func TestAcquireInTurn(t *testing.T) {
	r, err := NewShmRing("turn", 4, testLayout(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	var got []int
	for i := range 6 {
		s, err := r.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
		r.Publish(s, Tag{0, uint32(i)})
		if err := r.Release(s, Tag{0, uint32(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{0, 1, 2, 3, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("slots taken %v, want %v", got, want)
	}
}
