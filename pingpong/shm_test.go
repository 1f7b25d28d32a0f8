package pingpong

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func testLayout(t *testing.T) Layout {
	l, err := NewLayout(100, 300, 2, 5, "float32", 20)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

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

func TestCapacity(t *testing.T) {
	n, e := Capacity(4, []int{3, 2}, 10, 1000, 5000)
	if n != 4+12+24 || e != 12+24 {
		t.Fatalf("got %d nodes %d edges", n, e)
	}
	n, e = Capacity(4, []int{-1, -1}, 10, 1000, 5000)
	if n != 4+40+400 || e != 440 {
		t.Fatalf("all neighbours: %d nodes %d edges", n, e)
	}
	n, e = Capacity(1024, []int{15, 10, 5}, 1<<20, 2708, 10556)
	if n != 2708 || e != 10556 {
		t.Fatalf("capped: %d nodes %d edges", n, e)
	}
	n, _ = Capacity(1<<30, []int{-1, -1, -1, -1, -1, -1, -1, -1}, 1<<40, 1<<62, 1<<62)
	if n <= 0 {
		t.Fatalf("overflow: %d", n)
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
	if err := r.Release(b, Tag{0, 0}); err == nil {
		t.Fatal("release with the wrong tag accepted")
	}
	if err := r.Release(7, Tag{}); err == nil {
		t.Fatal("release of a slot that does not exist accepted")
	}
	if err := r.Release(b, Tag{0, 1}); err != nil {
		t.Fatal(err)
	}
	if i := <-got; i != b {
		t.Fatalf("acquired %d, want the released %d", i, b)
	}
	if err := r.Release(b, Tag{0, 1}); err == nil {
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
