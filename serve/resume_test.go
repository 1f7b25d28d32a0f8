package serve

import (
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/ipc"
)

// A trainer that loses its connection mid-epoch and reconnects with the same
// job, rank and epoch resumes after the last batch it released: over the
// epoch every seed of its share is delivered exactly once, and the batches
// are the ones an unbroken epoch would have had.
func TestResumeAfterDisconnectDeliversEachSeedOnce(t *testing.T) {
	srv, src := testServer(t, Config{})
	open := openReq()
	open.Job, open.Rank, open.WorldSize = "job", 1, 2

	// The reference: one unbroken epoch 3.
	ref := dial(t, srv)
	ref.handshake(open)
	want := ref.epoch(src, 3)

	// Take 5 batches of epoch 3, release 4 of them, and vanish.
	c := dial(t, srv)
	c.handshake(open)
	c.send(&ipc.StartEpoch{Epoch: 3})
	var got []int64
	released := -1
	for i := 0; i < 5; i++ {
		b := c.recv().(*ipc.BatchReady)
		if int(b.Index) != i {
			t.Fatalf("batch index %d, want %d", b.Index, i)
		}
		seeds := checkBatch(t, c, src, b)
		if i < 4 {
			c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
			got = append(got, seeds...)
			released = i
		}
	}
	c.conn.Close()

	// Reconnect and resume after the last released batch.
	r := dial(t, srv)
	open.StartEpoch, open.StartBatch = 3, uint32(released+1)
	r.handshake(open)
	r.send(&ipc.StartEpoch{Epoch: 3})
	next := uint32(released + 1)
	for {
		m := r.recv()
		if e, ok := m.(*ipc.EpochEnd); ok {
			if int(e.NumBatches) != int(r.opened.NumBatches) {
				t.Fatalf("epoch end says %d batches", e.NumBatches)
			}
			break
		}
		b := m.(*ipc.BatchReady)
		if b.Index != next {
			t.Fatalf("resumed batch index %d, want %d", b.Index, next)
		}
		next++
		got = append(got, checkBatch(t, r, src, b)...)
		r.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("resumed epoch delivered %d seeds, unbroken epoch %d (or in another order)", len(got), len(want))
	}
	// The next epoch after a resumed one is whole.
	if n := len(r.epoch(src, 4)); n != len(want) {
		t.Fatalf("epoch after the resumed one served %d seeds, want %d", n, len(want))
	}

}

func TestResumeBeyondTheEpochIsRefused(t *testing.T) {
	srv, _ := testServer(t, Config{})
	c := dial(t, srv)
	c.send(&ipc.Hello{Version: ipc.Version})
	c.recv()
	o := openReq()
	o.StartBatch = 10000
	c.send(&o)
	c.expectError(ipc.CodeBadRequest, "resume at batch 10000")
}
