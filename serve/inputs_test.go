package serve

import (
	"testing"

	"github.com/gnnloader/gnnloader/ipc"
)

// Every batch says where its seeds are in the split (input_id), also with
// shuffling and two ranks, and a hop of fanout 0 samples nothing.
func TestInputIDsAndZeroFanout(t *testing.T) {
	srv, src := testServer(t, Config{})
	split := src.Data.Splits["train"]
	for _, tc := range []struct {
		name    string
		fanouts []int32
		rank    uint32
		world   uint32
	}{
		{"one rank", []int32{5, 3}, 0, 1},
		{"rank 1 of 2", []int32{5, 3}, 1, 2},
		{"fanout 0", []int32{0}, 0, 1},
		{"fanouts 4, 0", []int32{4, 0}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv)
			o := openReq()
			o.Fanouts, o.Rank, o.WorldSize = tc.fanouts, tc.rank, tc.world
			c.handshake(o)
			c.send(&ipc.StartEpoch{Epoch: 1})
			batches := 0
			for {
				m := c.recv()
				if _, ok := m.(*ipc.EpochEnd); ok {
					break
				}
				b := m.(*ipc.BatchReady)
				seeds := checkBatch(t, c, src, b)
				n, ok := c.opened.Count(b, "input_id")
				if !ok || int(n) != len(seeds) {
					t.Fatalf("input_id count %d (%v) for %d seeds", n, ok, len(seeds))
				}
				in := c.region(b.Slot, "input_id", 8*len(seeds))
				for j, v := range seeds {
					at := i64(in, j)
					if at < 0 || at >= int64(len(split)) || split[at] != v {
						t.Fatalf("batch %d seed %d is node %d, but input_id %d", b.Index, j, v, at)
					}
				}
				_, e, _, perHop := c.sizes(b)
				for h, f := range tc.fanouts {
					if f == 0 && (perHop[h+1] != 0 || (h == 0 && e != 0)) {
						t.Fatalf("hop %d of fanout 0 sampled %d nodes (%d edges in all)", h+1, perHop[h+1], e)
					}
				}
				c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
				batches++
			}
			if batches != int(c.opened.NumBatches) {
				t.Fatalf("%d batches, opened said %d", batches, c.opened.NumBatches)
			}
		})
	}
}
