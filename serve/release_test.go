package serve

// Releases that the trainer defers (ipc.Release's Deferred).

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
)

// Deferred releases keep their slots from the pipeline until a release that
// is not deferred covers them (on a GPU, its released event is recorded
// after their work): a trainer whose releases are all deferred gets no more
// batches, and the covering release frees them all at once.
func TestDeferredReleasesWaitForCover(t *testing.T) {
	srv, src := testServer(t, Config{Slots: 3})
	c := dial(t, srv)
	o := openReq()
	o.BatchSize = 100 // 813 train seeds: 9 batches an epoch
	c.handshake(o)
	c.send(&ipc.StartEpoch{})
	var bs []*ipc.BatchReady
	for range 3 {
		bs = append(bs, c.recv().(*ipc.BatchReady))
	}
	nothingFor := func(d time.Duration) {
		t.Helper()
		c.conn.UnixConn().SetReadDeadline(time.Now().Add(d))
		if m, _, err := c.conn.ReadMsg(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %#v (%v) with every slot held or released deferred", m, err)
		}
	}
	for _, b := range bs[:2] {
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index, Deferred: true})
	}
	nothingFor(300 * time.Millisecond)
	c.send(&ipc.Release{Slot: bs[2].Slot, Epoch: bs[2].Epoch, Index: bs[2].Index})
	next := map[uint32]bool{}
	var third uint32 // the slot of batch 3
	// All three slots free again: three more batches, each checked.
	for range 3 {
		b := c.recv().(*ipc.BatchReady)
		checkBatch(t, c, src, b)
		if b.Index != uint32(3+len(next)) {
			t.Fatalf("batch %d after the cover, want %d", b.Index, 3+len(next))
		}
		next[b.Slot] = true
		if b.Index == 3 {
			third = b.Slot
		}
		if b.Index < 5 {
			c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index, Deferred: true})
		}
	}
	if len(next) != 3 {
		t.Fatalf("the three batches after the cover came in slots %v, want all three", next)
	}
	// Batch 3 was released deferred: its slot is no longer the trainer's.
	c.send(&ipc.Release{Slot: third, Epoch: 0, Index: 3, Deferred: true})
	c.expectError(ipc.CodeBadRequest, "not held by the trainer")
}

// Hostile deferrals: a Release whose deferred byte is neither 0 nor 1 is a
// bad message (the connection ends, the daemon carries on); a trainer that
// defers every release and leaves without a covering one costs the daemon
// nothing once it is gone (its slots and budget come back, the next trainer
// gets whole epochs).
func TestHostileDeferredReleases(t *testing.T) {
	srv, src := testServer(t, Config{Slots: 3})
	c := dial(t, srv)
	c.handshake(openReq())
	c.send(&ipc.StartEpoch{})
	b := c.recv().(*ipc.BatchReady)
	frame, err := ipc.Marshal(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index, Deferred: true})
	if err != nil {
		t.Fatal(err)
	}
	frame[len(frame)-1] = 2
	if _, err := c.conn.UnixConn().Write(frame); err != nil {
		t.Fatal(err)
	}
	c.expectError(ipc.CodeBadMessage, "")

	d := dial(t, srv)
	o := openReq()
	o.BatchSize = 100
	d.handshake(o)
	d.send(&ipc.StartEpoch{})
	for range 3 {
		b := d.recv().(*ipc.BatchReady)
		d.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index, Deferred: true})
	}
	d.conn.Close() // no covering release, no Goodbye
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.SlotBytes() == 0 && srv.BudgetUsed() == 0 })

	e := dial(t, srv)
	e.handshake(o)
	for epoch := range uint32(2) {
		if seeds := e.epoch(src, epoch); len(seeds) != 813 {
			t.Fatalf("epoch %d after a trainer that deferred every release: %d seeds, want the 813 of the train split", epoch, len(seeds))
		}
	}
}
