package serve

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

// seedsFD returns a memfd holding ids as little-endian int64, padded or cut
// to size bytes when size >= 0.
func seedsFD(t *testing.T, ids []int64, size int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("seeds-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	b := make([]byte, 0, 8*len(ids))
	for _, v := range ids {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	if size >= 0 {
		b = append(b, make([]byte, max(0, size-len(b)))...)[:size]
	}
	if _, err := unix.Write(fd, b); err != nil {
		t.Fatal(err)
	}
	return fd
}

func (c *client) sendSeeds(count uint64, fd int) {
	c.t.Helper()
	if err := c.conn.WriteMsg(&ipc.Seeds{Count: count}, fd); err != nil {
		c.t.Fatal(err)
	}
}

func customOpen() ipc.Open {
	o := openReq()
	o.Split, o.Shuffle, o.BatchSize = ipc.CustomSplit, false, 4
	return o
}

func TestCustomSeeds(t *testing.T) {
	srv, src := testServer(t, Config{})
	n := src.Data.Graph.NumNodes
	// Any ids, repeats allowed, served in the order given when not shuffled.
	ids := []int64{5, n - 1, 0, 17, 17, 3, 250, 9, 1, 42}
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
	o := customOpen()
	c.send(&o)
	opened, ok := c.recv().(*ipc.Opened)
	if !ok {
		t.Fatal("no Opened")
	}
	c.opened = opened
	if opened.NumBatches != 3 {
		t.Fatalf("%d batches for 10 seeds of 4, want 3", opened.NumBatches)
	}
	for epoch := uint32(0); epoch < 2; epoch++ {
		if got := c.epoch(src, epoch); !slices.Equal(got, ids) {
			t.Fatalf("epoch %d served seeds %v, want %v", epoch, got, ids)
		}
	}

	// Two ranks with shuffling split the custom seeds like a named split.
	// (checkBatch wants distinct n_id, and a seed repeated within one batch
	// appears once per occurrence: distinct ids here.)
	ids = []int64{5, n - 1, 0, 17, 3, 250, 9, 1, 42, 77}
	var all []int64
	for rank := uint32(0); rank < 2; rank++ {
		c := dial(t, srv)
		c.hello()
		c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
		o := customOpen()
		o.Shuffle, o.Rank, o.WorldSize = true, rank, 2
		c.send(&o)
		c.opened = c.recv().(*ipc.Opened)
		all = append(all, c.epoch(src, 0)...)
	}
	slices.Sort(all)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("two ranks served %v, want %v", all, want)
	}
}

func TestCustomSeedsRefused(t *testing.T) {
	srv, src := testServer(t, Config{})
	n := src.Data.Graph.NumNodes
	cases := []struct {
		name  string
		run   func(c *client)
		code  ipc.Code
		text  string
		hello bool
	}{
		{"id past the graph", func(c *client) { c.sendSeeds(3, seedsFD(t, []int64{1, 2, n}, -1)) },
			ipc.CodeBadRequest, "position 2", true},
		{"negative id", func(c *client) { c.sendSeeds(1, seedsFD(t, []int64{-1}, -1)) },
			ipc.CodeBadRequest, "id -1", true},
		{"no seeds", func(c *client) { c.sendSeeds(0, seedsFD(t, nil, -1)) },
			ipc.CodeBadRequest, "no seeds", true},
		{"more seeds than any budget", func(c *client) { c.sendSeeds(maxSeedIDs+1, seedsFD(t, nil, -1)) },
			ipc.CodeLimit, "at most", true},
		{"more seed bytes than the whole memory budget", func(c *client) { c.sendSeeds(maxSeedIDs, seedsFD(t, nil, -1)) },
			ipc.CodeLimit, "exceed the whole memory budget", true},
		{"short memfd", func(c *client) { c.sendSeeds(4, seedsFD(t, []int64{1, 2, 3, 4}, 31)) },
			ipc.CodeBadRequest, "cannot read 4 ids", true},
		{"custom split without Seeds", func(c *client) { o := customOpen(); c.send(&o) },
			ipc.CodeBadRequest, "needs a Seeds message", true},
		{"second Seeds", func(c *client) {
			c.sendSeeds(1, seedsFD(t, []int64{1}, -1))
			c.sendSeeds(1, seedsFD(t, []int64{2}, -1))
		}, ipc.CodeBadRequest, "second Seeds", true},
		{"Seeds before Hello", func(c *client) { c.sendSeeds(1, seedsFD(t, []int64{1}, -1)) },
			ipc.CodeOutOfOrder, "Seeds", false},
		{"Seeds after Open", func(c *client) {
			o := openReq()
			c.send(&o)
			c.opened = c.recv().(*ipc.Opened)
			c.sendSeeds(1, seedsFD(t, []int64{1}, -1))
		}, ipc.CodeOutOfOrder, "Seeds", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv)
			if tc.hello {
				c.hello()
			}
			tc.run(c)
			c.expectError(tc.code, tc.text)
		})
	}
	// The daemon carries on serving custom seeds.
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(2, seedsFD(t, []int64{7, 8}, -1))
	o := customOpen()
	c.send(&o)
	c.opened = c.recv().(*ipc.Opened)
	if got := c.epoch(src, 0); !slices.Equal(got, []int64{7, 8}) {
		t.Fatalf("served %v", got)
	}
}

// A custom seed list counts against the memory budget: many connections
// cannot make the daemon hold seed lists beyond it.
func TestCustomSeedsChargedToTheBudget(t *testing.T) {
	srv, _ := testServer(t, Config{MemoryBudget: 1000})
	ids := make([]int64, 200) // 1600 bytes
	for i := range ids {
		ids[i] = int64(i)
	}
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, 8*len(ids)))
	c.expectError(ipc.CodeLimit, "custom seeds exceed the whole memory budget")
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
}

// A link:custom set whose Seeds fit the memory budget but whose epoch plans
// (32 bytes a pair each: the epoch's and the next one's, made ahead) do not
// is refused at its Open before the plan is made, and its seeds' share of
// the budget comes back.
func TestLinkCustomPlanChargedBeforeItIsMade(t *testing.T) {
	const pairs = 1000 // seeds 16,000 bytes, plans 64,000
	srv, src := testServer(t, Config{MemoryBudget: 20000})
	ids := make([]int64, 2*pairs)
	for i := range ids {
		ids[i] = int64(i) % src.Data.Graph.NumNodes
	}
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
	o := openReq()
	o.Split = "link:custom"
	c.send(&o)
	c.expectError(ipc.CodeLimit, "64000 bytes of link plan exceed the whole memory budget")
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
}
