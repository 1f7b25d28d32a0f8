package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

func TestOneTrainerEpochs(t *testing.T) {
	srv, src := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq())
	train := src.Data.Splits[datasets.SplitTrain]
	var first []int64
	for e := uint32(0); e < 2; e++ {
		got := c.epoch(src, e)
		if len(got) != len(train) {
			t.Fatalf("epoch %d served %d seeds, split has %d", e, len(got), len(train))
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		want := slices.Clone(train)
		slices.Sort(want)
		if !slices.Equal(sorted, want) {
			t.Fatalf("epoch %d did not serve the split exactly once", e)
		}
		if e == 0 {
			first = got
		} else if slices.Equal(first, got) {
			t.Fatal("shuffle gave the same order in two epochs")
		}
	}
	c.send(&ipc.Goodbye{})
	waitFor(t, func() bool { return srv.Trainers() == 0 })
	// The CPU path fills one batch at a time.
	if st := srv.Stats(); st.Fills.Load() != st.BatchesServed.Load() || st.Fills.Load() == 0 {
		t.Errorf("%d fills for %d batches served, want one a batch", st.Fills.Load(), st.BatchesServed.Load())
	}
}

func TestTwoTrainersSplitTheEpoch(t *testing.T) {
	srv, src := testServer(t, Config{})
	var mu sync.Mutex
	all := map[int64]int{}
	var wg sync.WaitGroup
	for rank := uint32(0); rank < 2; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, srv)
			o := openReq()
			// 813 train seeds: drop_last drops one so the ranks split 812
			// evenly, 406 each = 14 batches of 29, none short.
			o.Rank, o.WorldSize, o.DropLast, o.BatchSize = rank, 2, true, 29
			c.handshake(o)
			seeds := c.epoch(src, 0)
			mu.Lock()
			for _, s := range seeds {
				all[s]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	train := src.Data.Splits[datasets.SplitTrain]
	for s, n := range all {
		if n != 1 {
			t.Fatalf("seed %d served %d times", s, n)
		}
	}
	if len(train) != 813 {
		t.Fatalf("the generated split changed size (%d): adjust the batch size", len(train))
	}
	if want := len(train) / 2 * 2; len(all) != want {
		t.Fatalf("two ranks served %d distinct seeds, want %d", len(all), want)
	}
}

func TestHeldSlotNeverChanges(t *testing.T) {
	srv, src := testServer(t, Config{Slots: 3})
	c := dial(t, srv)
	c.handshake(openReq())
	c.send(&ipc.StartEpoch{Epoch: 0})
	first := c.recv().(*ipc.BatchReady)
	nodes, _, _, _ := c.sizes(first)
	n := nodes * src.Data.RowBytes()
	snapshot := slices.Clone(c.region(first.Slot, "x", n))
	// Keep the first batch; take and release the others. The daemon runs
	// ahead through the other slots but must never refill the held one.
	for i := 0; i < 6; i++ {
		m := c.recv()
		b, ok := m.(*ipc.BatchReady)
		if !ok {
			break
		}
		if b.Slot == first.Slot {
			t.Fatalf("held slot %d was handed out again", b.Slot)
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	time.Sleep(50 * time.Millisecond)
	if !bytes.Equal(snapshot, c.region(first.Slot, "x", n)) {
		t.Fatal("the held slot's contents changed")
	}
}

func TestShutdownSaysGoodbyeAndRemovesSocket(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.2:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv := New(src, Config{Socket: sock}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	waitFor(t, func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	c := dial(t, srv)
	c.handshake(openReq())
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m, _, err := c.conn.ReadMsg()
	if g, ok := m.(*ipc.Goodbye); !ok || !strings.Contains(g.Reason, "shutting down") {
		t.Fatalf("got %#v %v, want Goodbye", m, err)
	}
	if _, _, err := c.conn.ReadMsg(); !errors.Is(err, io.EOF) && err == nil {
		t.Fatal("connection open after shutdown")
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("socket still accepts")
	}
}

func TestStaleSocketReplacedLiveRefused(t *testing.T) {
	srv, _ := testServer(t, Config{})
	other := New(srv.src, Config{Socket: srv.cfg.Socket}, nil)
	if err := other.Listen(); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("second daemon on a live socket: %v", err)
	}
	// A stale socket file (no listener) is replaced.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, _ := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	l.SetUnlinkOnClose(false)
	l.Close()
	s3 := New(srv.src, Config{Socket: stale}, nil)
	if err := s3.Listen(); err != nil {
		t.Fatal(err)
	}
	s3.ln.Close()
}
